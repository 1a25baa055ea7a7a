// The extender's HTTP routes: POST {prefix}/filter, /prioritize, /preempt,
// /bind (kube-scheduler appends the verb to the stanza's urlPrefix) and
// GET /healthz. A body that does not parse gets 400 with {"Error": what and
// where}; an unknown path 404; a wrong method 405.
#ifndef RINGMASTER_SERVER_EXTENDER_HTTP_H_
#define RINGMASTER_SERVER_EXTENDER_HTTP_H_

#include "server/extender.h"
#include "server/http_server.h"

namespace ringmaster::server {

HttpResponse HandleExtenderRequest(Extender& extender, const HttpRequest& request);

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_EXTENDER_HTTP_H_
