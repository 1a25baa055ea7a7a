// The extender's HTTP routes: POST {prefix}/filter, /prioritize, /preempt,
// /bind (kube-scheduler appends the verb to the stanza's urlPrefix) and
// GET /healthz. Every error answer is JSON {"Error": what and where}: a
// body that does not parse, or a request without its Pod (filter,
// prioritize, preempt) or without PodName or Node (bind), gets 400; an
// unknown path 404; a wrong method 405. The HTTP peer is the `who` of the
// extender's audit lines.
//
// HandleHealthRequest answers the routes of the health port (--metrics):
// GET /healthz only (its caller adds /metrics); everything else 404.
#ifndef RINGMASTER_SERVER_EXTENDER_EXTENDER_HTTP_H_
#define RINGMASTER_SERVER_EXTENDER_EXTENDER_HTTP_H_

#include "server/extender/extender.h"
#include "server/http/http_server.h"

namespace ringmaster::server {

// A filter's or prioritize's body is taken (moved out of `request`): the
// Node objects' texts point into it.
HttpResponse HandleExtenderRequest(Extender& extender, HttpRequest& request);
HttpResponse HandleHealthRequest(const HttpRequest& request);

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_EXTENDER_EXTENDER_HTTP_H_
