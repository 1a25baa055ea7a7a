// End-to-end test of the extender over HTTP: server/http/http_server.h with the
// routes of server/extender/extender_http.h on 127.0.0.1 with an ephemeral port, and
// a plain Beast client. Each request is bounded by a socket timeout.
#include "server/extender/extender_http.h"

#include <gtest/gtest.h>

#include <mutex>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "plugins/registry.h"
#include "server/extender/kube_binder.h"
#include "scheduler/policy.h"

namespace ringmaster::server {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;
using nlohmann::json;

struct Reply {
  int status = 0;
  std::string body;
};

// One request on a fresh connection to 127.0.0.1:port (5 s at most).
Reply Send(uint16_t port, http::verb method, const std::string& target, const std::string& body) {
  boost::asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  stream.expires_after(std::chrono::seconds(5));
  stream.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port));
  http::request<http::string_body> req{method, target, 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  req.body() = body;
  req.prepare_payload();
  http::write(stream, req);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  beast::error_code ec;
  http::read(stream, buffer, res, ec);
  if (ec) return {-1, ec.message()};
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  return {static_cast<int>(res.result_int()), res.body()};
}

// Raw bytes (a request head), then the answer's status code.
int SendRaw(uint16_t port, const std::string& bytes) {
  boost::asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  stream.expires_after(std::chrono::seconds(5));
  stream.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port));
  boost::asio::write(stream, boost::asio::buffer(bytes));
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  beast::error_code ec;
  http::read(stream, buffer, res, ec);
  return ec ? -1 : static_cast<int>(res.result_int());
}

json Node(const std::string& name) {
  return {{"metadata", {{"name", name}}}, {"status", {{"allocatable", {{"cpu", "32"}, {"nvidia.com/gpu", "8"}}}}}};
}

json Pod(const std::string& name) {
  return {{"metadata",
           {{"name", name}, {"namespace", "ml"}, {"uid", "u-" + name},
            {"annotations", {{"scheduling.volcano.sh/group-name", "pair"}, {"scheduling.volcano.sh/group-min-member", "2"}}}}},
          {"spec", {{"containers", {{{"resources", {{"limits", {{"nvidia.com/gpu", "8"}}}}}}}}}}};
}

class ExtenderHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    scheduler::EngineOptions opts;
    opts.auto_confirm_binds = false;
    auto engine = scheduler::Engine::Create(*topology::Cluster::Build(TierSpecs(DefaultTopologyLabels()), {}),
                                            scheduler::DefaultPolicy(), registry_, clock_, opts);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
    extender_ = std::make_unique<Extender>(*engine_, clock_, ExtenderOptions{}, nullptr);
    HttpServerOptions o;
    o.body_limit = 1 << 20;
    auto server = HttpServer::Start(o, [this](HttpRequest& r) { return HandleExtenderRequest(*extender_, r); });
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ASSERT_NE(server_->port(), 0);
  }
  void TearDown() override {
    if (server_) server_->Stop();
  }

  scheduler::PluginRegistry registry_ = plugins::BuiltinRegistry();
  scheduler::ManualClock clock_{0};
  std::unique_ptr<scheduler::Engine> engine_;
  std::unique_ptr<Extender> extender_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(ExtenderHttpTest, GangOverHttp) {
  const uint16_t port = server_->port();
  EXPECT_EQ(Send(port, http::verb::get, "/healthz", "").status, 200);
  const json nodes = {{"metadata", json::object()}, {"items", {Node("n1"), Node("n2")}}};
  // nodeCacheCapable false, the first member: both nodes fail with the reason.
  Reply r = Send(port, http::verb::post, "/filter", json{{"Pod", Pod("a")}, {"Nodes", nodes}, {"NodeNames", nullptr}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["Nodes"]["items"].size(), 0u);
  EXPECT_EQ(j["FailedNodes"]["n1"], "gang ml/pair: 1 of 2 member pods seen; waiting for the rest to reach the scheduler");
  // nodeCacheCapable true, the second member under a urlPrefix with a path: it passes one node.
  r = Send(port, http::verb::post, "/ringmaster/filter", json{{"Pod", Pod("b")}, {"NodeNames", {"n1", "n2"}}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  j = json::parse(r.body);
  ASSERT_EQ(j["NodeNames"].size(), 1u) << r.body;
  EXPECT_TRUE(j["Nodes"].is_null());
  const std::string node = j["NodeNames"][0];
  r = Send(port, http::verb::post, "/prioritize", json{{"Pod", Pod("b")}, {"NodeNames", {"n1", "n2"}}}.dump());
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body), json::parse(R"([{"Host":")" + node + R"(","Score":10}])"));
  r = Send(port, http::verb::post, "/bind",
           json{{"PodName", "b"}, {"PodNamespace", "ml"}, {"PodUID", "u-b"}, {"Node", node}}.dump());
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["Error"], "");
  r = Send(port, http::verb::post, "/preempt", json{{"Pod", Pod("b")}, {"NodeNameToMetaVictims", json::object()}}.dump());
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body), json::parse(R"({"NodeNameToMetaVictims":{}})"));
}

TEST_F(ExtenderHttpTest, BadRequestsGetAnErrorAnswer) {
  const uint16_t port = server_->port();
  Reply r = Send(port, http::verb::post, "/filter", R"({"Pod": {"metadata": )");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(json::parse(r.body)["Error"].get<std::string>().find("malformed JSON at byte"), std::string::npos);
  EXPECT_EQ(Send(port, http::verb::post, "/bind", "[]").status, 400);
  EXPECT_EQ(Send(port, http::verb::get, "/filter", "").status, 405);
  EXPECT_EQ(Send(port, http::verb::post, "/nope", "{}").status, 404);
  // A body over the limit (1 MiB here) is refused from its declared length.
  EXPECT_EQ(SendRaw(port, "POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: 2097152\r\n\r\n"), 413);
  // Also when the body comes in chunks with no declared length (2 x 768 KiB).
  const std::string chunk(768 << 10, ' ');
  EXPECT_EQ(SendRaw(port, "POST /filter HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nc0000\r\n" + chunk +
                              "\r\nc0000\r\n" + chunk + "\r\n0\r\n\r\n"),
            413);
  // JSON nested deeper than the wire reader takes is a 400 that says where,
  // not a stack overflow in the thread copying it (docs/FUZZING.md).
  r = Send(port, http::verb::post, "/filter", R"({"Pod": {"x": )" + std::string(300'000, '[') + std::string(300'000, ']') + "}}");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("JSON nested deeper than 128 levels at byte 140"), std::string::npos) << r.body.substr(0, 200);
  // The server still answers after all that.
  EXPECT_EQ(Send(port, http::verb::get, "/healthz", "").status, 200);
}

TEST_F(ExtenderHttpTest, EveryErrorAnswerIsJsonAndARequestWithoutItsPodIs400) {
  const uint16_t port = server_->port();
  auto error = [](const Reply& r) {
    const json j = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
    return j.is_object() && j.contains("Error") ? j["Error"].get<std::string>() : "<not JSON: " + r.body + ">";
  };
  Reply r = Send(port, http::verb::post, "/nope", "{}");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(error(r).find("not found"), std::string::npos) << r.body;
  r = Send(port, http::verb::get, "/filter", "");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(error(r), "filter: use POST");
  r = Send(port, http::verb::post, "/healthz", "");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(error(r), "healthz: use GET");
  for (const char* verb : {"/filter", "/prioritize", "/preempt"}) {
    for (const char* body : {"{}", R"({"Pod": null})"}) {
      r = Send(port, http::verb::post, verb, body);
      EXPECT_EQ(r.status, 400) << verb << " " << body << ": " << r.body;
      EXPECT_NE(error(r).find("Pod: missing"), std::string::npos) << r.body;
    }
  }
  r = Send(port, http::verb::post, "/bind", "{}");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(error(r).find("PodName: missing"), std::string::npos) << r.body;
  EXPECT_EQ(extender_->gang_count(), 0u);
}

TEST_F(ExtenderHttpTest, MalformedOrOversizedRequestsGet400Or431AndTheServerKeepsServing) {
  const uint16_t port = server_->port();
  // Request lines and headers that do not parse.
  EXPECT_EQ(SendRaw(port, "GARBAGE\r\n\r\n"), 400);
  EXPECT_EQ(SendRaw(port, "GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n"), 400);
  EXPECT_EQ(SendRaw(port, "GET /healthz HTTP/1.1\r\nHost x\r\n\r\n"), 400);          // no colon
  EXPECT_EQ(SendRaw(port, "GET /healthz HTTP/1.1\r\nHo st: x\r\n\r\n"), 400);        // a space in the name
  EXPECT_EQ(SendRaw(port, "GET /heal\x01thz HTTP/1.1\r\nHost: x\r\n\r\n"), 400);     // a control byte in the target
  EXPECT_EQ(SendRaw(port, "POST /filter HTTP/1.1\r\nContent-Length: 12abc\r\n\r\n"), 400);
  EXPECT_EQ(SendRaw(port, "POST /filter HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx"), 400);
  EXPECT_EQ(SendRaw(port, "POST /filter HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"), 400);
  const char junk[] = "\0\xff\xfe binary\r\n\r\n";
  EXPECT_EQ(SendRaw(port, std::string(junk, sizeof(junk) - 1)), 400);
  // Headers over the limit (16 KiB by default): one large, or many small.
  EXPECT_EQ(SendRaw(port, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(20 << 10, 'a') + "\r\n\r\n"),
            431);
  std::string many = "GET /healthz HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 2000; ++i) many += "X-" + std::to_string(i) + ": y\r\n";
  EXPECT_EQ(SendRaw(port, many + "\r\n"), 431);
  EXPECT_EQ(SendRaw(port, "GET /" + std::string(20 << 10, 'a') + " HTTP/1.1\r\n\r\n"), 431);  // a long target
  // Just under the limit is fine.
  EXPECT_EQ(SendRaw(port, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(15 << 10, 'a') + "\r\n\r\n"),
            200);
  EXPECT_EQ(Send(port, http::verb::get, "/healthz", "").status, 200);
}

TEST(HttpServerTimeout, AClientThatStopsMidRequestIsDisconnectedNotWaitedFor) {
  auto server = HttpServer::Start({.idle_timeout_ms = 200},
                                  [](const HttpRequest&) { return HttpResponse{200, "text/plain", "ok"}; });
  ASSERT_TRUE(server.ok());
  boost::asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  stream.expires_after(std::chrono::seconds(5));  // the test's own bound
  stream.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), (*server)->port()));
  boost::asio::write(stream, boost::asio::buffer(std::string("POST /filter HTTP/1.1\r\nContent-Le")));
  const auto start = std::chrono::steady_clock::now();
  char c;
  beast::error_code ec;
  stream.read_some(boost::asio::buffer(&c, 1), ec);
  EXPECT_TRUE(ec == boost::asio::error::eof || ec == boost::asio::error::connection_reset) << ec.message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));  // the server closed it, not our bound
  (*server)->Stop();
}

TEST(ApiServerBinder, PostsABindingToThePodsSubresource) {
  // A fake API server on 127.0.0.1 that records what it got.
  std::mutex mu;
  std::vector<HttpRequest> got;
  int answer = 201;
  auto api = HttpServer::Start({}, [&](const HttpRequest& r) {
    std::lock_guard<std::mutex> lock(mu);
    got.push_back(r);
    return HttpResponse{answer, "application/json", answer == 201 ? "{}" : R"({"reason":"Conflict"})"};
  });
  ASSERT_TRUE(api.ok());
  auto binder = MakeApiServerBinder({.url = "http://127.0.0.1:" + std::to_string((*api)->port()), .token = "t"});
  ASSERT_TRUE(binder.ok()) << binder.status();
  ASSERT_TRUE((*binder)->Bind({"w-0", "ml", "u-0", "n1"}).ok());
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].method, "POST");
    EXPECT_EQ(got[0].target, "/api/v1/namespaces/ml/pods/w-0/binding");
    EXPECT_EQ(json::parse(got[0].body), json::parse(R"({"apiVersion":"v1","kind":"Binding",
        "metadata":{"name":"w-0","namespace":"ml","uid":"u-0"},"target":{"apiVersion":"v1","kind":"Node","name":"n1"}})"));
    answer = 409;
  }
  const absl::Status refused = (*binder)->Bind({"w-0", "ml", "u-0", "n1"});
  EXPECT_NE(refused.message().find("answered 409"), std::string_view::npos) << refused;
  (*api)->Stop();
  EXPECT_FALSE(MakeApiServerBinder({.url = "10.0.0.1:6443"}).ok());  // no scheme
}

// The pods bound to nodes, for what others hold (Extender::RefreshForeignPods):
// one GET with the field selector; each pod's node, UID and requests; a pod
// that cannot be read is left out; an answer that is not a list is an error.
TEST(ApiServerBinder, ListsTheBoundPodsWithTheirRequests) {
  std::mutex mu;
  std::vector<std::string> targets;
  std::string answer = R"({"kind":"PodList","items":[
    {"metadata":{"name":"a","namespace":"kube-system","uid":"ua"},
     "spec":{"nodeName":"n1","containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"2"},"requests":{"cpu":"1500m"}}}]}},
    {"metadata":{"name":"b","namespace":"default","uid":"ub"},
     "spec":{"nodeName":"n2","containers":[{"name":"c","resources":{"requests":{"cpu":"-1"}}}]}},
    {"metadata":{"name":"c","namespace":"default","uid":"uc"},"spec":{"containers":[]}}]})";
  auto api = HttpServer::Start({}, [&](const HttpRequest& r) {
    std::lock_guard<std::mutex> lock(mu);
    targets.push_back(r.method + " " + r.target);
    return HttpResponse{200, "application/json", answer};
  });
  ASSERT_TRUE(api.ok());
  auto binder = MakeApiServerBinder({.url = "http://127.0.0.1:" + std::to_string((*api)->port()), .token = "t"});
  ASSERT_TRUE(binder.ok()) << binder.status();
  auto pods = (*binder)->ListBoundPods();
  ASSERT_TRUE(pods.ok()) << pods.status();
  ASSERT_EQ(pods->size(), 1u) << "b's requests do not read, c is not bound";
  EXPECT_EQ((*pods)[0].key, "kube-system/a");
  EXPECT_EQ((*pods)[0].uid, "ua");
  EXPECT_EQ((*pods)[0].node, "n1");
  EXPECT_EQ((*pods)[0].gpus, 2);
  EXPECT_EQ((*pods)[0].request.cpu_milli(), 1500);
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(targets.size(), 1u);
    EXPECT_EQ(targets[0],
              "GET /api/v1/pods?fieldSelector=spec.nodeName%21%3D%2Cstatus.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed");
    answer = R"({"kind":"Status"})";
  }
  const auto bad = (*binder)->ListBoundPods();
  EXPECT_NE(bad.status().message().find("not a list with items"), std::string_view::npos) << bad.status();
  (*api)->Stop();
}

TEST(ApiServerBinder, ReadsAPodGroupsMinMemberFromEitherApiGroup) {
  // scheduler-plugins' PodGroup "bert", Volcano's "gpt", a broken "bad"; nothing else.
  std::mutex mu;
  std::vector<std::string> targets;
  auto api = HttpServer::Start({}, [&](const HttpRequest& r) {
    std::lock_guard<std::mutex> lock(mu);
    targets.push_back(r.method + " " + r.target);
    if (r.target == "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ml/podgroups/bert") {
      return HttpResponse{200, "application/json", R"({"kind":"PodGroup","spec":{"minMember":4}})"};
    }
    if (r.target == "/apis/scheduling.volcano.sh/v1beta1/namespaces/ml/podgroups/gpt") {
      return HttpResponse{200, "application/json", R"({"kind":"PodGroup","spec":{"minMember":2,"queue":"q"}})"};
    }
    if (r.target == "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ml/podgroups/bad") {
      return HttpResponse{200, "application/json", R"({"spec":{"minMember":"four"}})"};
    }
    return HttpResponse{404, "application/json", R"({"reason":"NotFound"})"};
  });
  ASSERT_TRUE(api.ok());
  auto binder = MakeApiServerBinder({.url = "http://127.0.0.1:" + std::to_string((*api)->port()), .token = "t"});
  ASSERT_TRUE(binder.ok()) << binder.status();
  EXPECT_EQ(*(*binder)->PodGroupMinMember("ml", "bert"), 4);
  EXPECT_EQ(*(*binder)->PodGroupMinMember("ml", "gpt"), 2);
  const absl::StatusOr<int> missing = (*binder)->PodGroupMinMember("ml", "none");
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_NE(missing.status().message().find("scheduling.volcano.sh/v1beta1"), std::string_view::npos);
  const absl::StatusOr<int> bad = (*binder)->PodGroupMinMember("ml", "bad");
  EXPECT_NE(bad.status().message().find("spec.minMember"), std::string_view::npos) << bad.status();
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_GE(targets.size(), 2u);
    EXPECT_EQ(targets[0], "GET /apis/scheduling.x-k8s.io/v1alpha1/namespaces/ml/podgroups/bert");
    EXPECT_EQ(targets[1], "GET /apis/scheduling.x-k8s.io/v1alpha1/namespaces/ml/podgroups/gpt");
  }
  (*api)->Stop();
}

TEST(HttpServer, ParsesHostPortAndStopsTwice) {
  EXPECT_EQ(*ParseHostPort("127.0.0.1:8080"), (std::pair<std::string, uint16_t>{"127.0.0.1", 8080}));
  EXPECT_EQ(*ParseHostPort("[::1]:0"), (std::pair<std::string, uint16_t>{"::1", 0}));
  EXPECT_EQ(ParseHostPort(":9")->first, "127.0.0.1");
  EXPECT_FALSE(ParseHostPort("localhost").ok());
  EXPECT_FALSE(ParseHostPort("1.2.3.4:99999").ok());
  EXPECT_FALSE(HttpServer::Start({.address = "not-an-address"}, nullptr).ok());
  auto s = HttpServer::Start({}, [](const HttpRequest&) { return HttpResponse{200, "text/plain", "x"}; });
  ASSERT_TRUE(s.ok());
  (*s)->Stop();
  (*s)->Stop();
}

}  // namespace
}  // namespace ringmaster::server
