// Volcano's Queue objects as queues (issue 27 §3): the reader, the
// composition with the policy's queues, the API server's list, and serve
// re-reading them (a change applied, a conflict refused naming both sources,
// a removed queue that still has jobs kept).
#include "server/extender/volcano_queues.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "api/admin.grpc.pb.h"
#include "plugins/registry.h"
#include "scheduler/policy.h"
#include "server/admin/admin_convert.h"
#include "server/admin/queue_sources.h"
#include "server/daemon/daemon.h"
#include "server/extender/kube_binder.h"
#include "server/http/http_server.h"
#include "tests/support/builders.h"
#include "tests/support/source_dir.h"
#include "yaml-cpp/yaml.h"

namespace ringmaster::server {
namespace {

using nlohmann::json;
using ringmaster::testing::ClusterBuilder;
using ringmaster::testing::JobBuilder;

json Queue(const std::string& name, json spec, json status = nullptr) {
  json q = {{"apiVersion", "scheduling.volcano.sh/v1beta1"}, {"kind", "Queue"}, {"metadata", {{"name", name}}},
            {"spec", std::move(spec)}};
  if (!status.is_null()) q["status"] = std::move(status);
  return q;
}
json List(std::vector<json> items) { return {{"kind", "QueueList"}, {"items", std::move(items)}}; }

const queue::QueueSpec* Named(const std::vector<queue::QueueSpec>& specs, const std::string& name) {
  for (const auto& q : specs) {
    if (q.name == name) return &q;
  }
  return nullptr;
}

TEST(VolcanoQueues, EachSpecFieldBecomesItsQueueField) {
  auto read = ReadVolcanoQueueList(List({
      Queue("root", {{"capability", {{"cpu", "1000"}}}}),
      Queue("research", {{"weight", 3}, {"reclaimable", false}, {"priority", 5},
                         {"capability", {{"cpu", "64"}, {"memory", "256Gi"}, {"nvidia.com/gpu", 16}}},
                         {"guarantee", {{"resource", {{"nvidia.com/gpu", "4"}, {"cpu", "500m"}}}}}}),
      Queue("vision", {{"parent", "research"}, {"capability", {{"nvidia.com/gpu", "8"}}}}),
      Queue("default", {{"parent", "root"}, {"deserved", {{"cpu", "2"}}}}, {{"state", "Closed"}}),
  }));
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->specs.size(), 3u) << "root is the tree's own root, not a queue";
  const queue::QueueSpec* r = Named(read->specs, "research");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->weight, 3);
  EXPECT_FALSE(r->reclaimable);
  EXPECT_EQ(r->priority, 5);
  EXPECT_EQ(r->parent, "");
  ASSERT_TRUE(r->capability.has_value());
  EXPECT_EQ(r->capability->cpu_milli(), 64'000);
  EXPECT_EQ(r->capability->memory(), int64_t{256} << 30);
  EXPECT_EQ(r->capability->gpu_milli(), 16'000);
  EXPECT_EQ(r->guarantee.gpu_milli(), 4'000);
  EXPECT_EQ(r->guarantee.cpu_milli(), 500);
  const queue::QueueSpec* v = Named(read->specs, "vision");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->parent, "research");
  EXPECT_EQ(v->weight, 1) << "Volcano's default weight";
  EXPECT_TRUE(v->reclaimable) << "Volcano's default";
  ASSERT_TRUE(v->capability.has_value());
  EXPECT_EQ(v->capability->gpu_milli(), 8'000);
  EXPECT_EQ(v->capability->cpu_milli(), topology::kUnlimited) << "a dimension the capability does not name is unlimited";
  EXPECT_EQ(v->capability->memory(), topology::kUnlimited);
  const queue::QueueSpec* d = Named(read->specs, "default");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->parent, "") << "parent root is ringmaster's root";
  EXPECT_FALSE(d->capability.has_value());
  // Nothing dropped silently: the root's capability, deserved, the Closed state.
  std::string notes;
  for (const std::string& n : read->notes) notes += n + "\n";
  EXPECT_NE(notes.find("Volcano Queue 'root': capability and guarantee not carried over"), std::string::npos) << notes;
  EXPECT_NE(notes.find("Volcano Queue 'default': spec.deserved: not carried over"), std::string::npos) << notes;
  EXPECT_NE(notes.find("Volcano Queue 'default': state Closed not carried over"), std::string::npos) << notes;
  EXPECT_EQ(read->notes.size(), 3u) << notes;
}

TEST(VolcanoQueues, ABadQueueFailsTheListNamingQueueAndField) {
  struct Case {
    json list;
    std::string want;
  };
  const std::vector<Case> cases = {
      {json{{"kind", "Status"}}, "Volcano QueueList: not a list with items"},
      {List({json{{"spec", json::object()}}}), "items[0]: metadata.name: missing"},
      {List({Queue("a", {{"weight", 0}})}), "Volcano Queue 'a': spec.weight: 0 is out of range [1, 2147483647]"},
      {List({Queue("a", {{"weight", "3"}})}), "Volcano Queue 'a': spec.weight: must be an integer"},
      {List({Queue("a", {{"capability", {{"memory", "-1Gi"}}}})}),
       "Volcano Queue 'a': spec.capability.memory: '-1Gi' is negative"},
      {List({Queue("a", {{"capability", {{"cpu", "lots"}}}})}), "Volcano Queue 'a': spec.capability.cpu: 'lots' is not a quantity"},
      {List({Queue("a", {{"capability", {{"cpu", true}}}})}), "Volcano Queue 'a': spec.capability.cpu: must be a quantity"},
      {List({Queue("a", {{"capability", "8"}})}), "Volcano Queue 'a': spec.capability: must be a map"},
      {List({Queue("a", {{"guarantee", {{"resource", {{"nvidia.com/gpu", "x"}}}}}})}),
       "Volcano Queue 'a': spec.guarantee.resource.nvidia.com/gpu: 'x' is not a quantity"},
      {List({Queue("a", {{"reclaimable", "yes"}})}), "Volcano Queue 'a': spec.reclaimable: must be true or false"},
      {List({Queue("a", {{"parent", 7}})}), "Volcano Queue 'a': spec.parent: must be a queue name"},
      {List({Queue("a", json::object()), Queue("a", json::object())}), "Volcano Queue 'a': listed twice"},
  };
  for (const Case& c : cases) {
    auto read = ReadVolcanoQueueList(c.list);
    ASSERT_FALSE(read.ok()) << c.list.dump();
    EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(read.status().message().find(c.want), std::string_view::npos)
        << read.status() << "\nwanted: " << c.want;
  }
}

scheduler::Policy PolicyWithQueues(const std::string& queues_yaml);

// YAML as the API server would send it in JSON: plain true/false and
// integers typed, everything else (quoted or not) a string.
json ToJson(const YAML::Node& n) {
  if (n.IsMap()) {
    json o = json::object();
    for (const auto& kv : n) o[kv.first.Scalar()] = ToJson(kv.second);
    return o;
  }
  if (n.IsSequence()) {
    json a = json::array();
    for (const auto& v : n) a.push_back(ToJson(v));
    return a;
  }
  if (n.IsNull()) return nullptr;
  const std::string& text = n.Scalar();
  if (n.Tag() != "!") {
    if (text == "true" || text == "false") return text == "true";
    char* end = nullptr;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (!text.empty() && *end == '\0') return v;
  }
  return text;
}

// The Queue objects of volcano.sh's "Hierarchical Queue" page
// (tests/server/volcano/README.md): a two-level tree under root, each
// with a `deserved` the capacity plugin reads.
TEST(VolcanoQueues, TheHierarchicalQueuesOfVolcanosDocsMakeATree) {
  std::vector<json> items;
  for (const YAML::Node& doc :
       YAML::LoadAllFromFile(ringmaster::testing::SourceDir() + "/tests/server/volcano/hierarchical-queue-005621a.yaml")) {
    items.push_back(ToJson(doc));
  }
  ASSERT_EQ(items.size(), 4u);
  auto read = ReadVolcanoQueueList(List(items));
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->specs.size(), 4u);
  EXPECT_EQ(Named(read->specs, "child-queue-a")->parent, "");
  EXPECT_EQ(Named(read->specs, "child-queue-b")->parent, "");
  EXPECT_EQ(Named(read->specs, "subchild-queue-a1")->parent, "child-queue-a");
  EXPECT_EQ(Named(read->specs, "subchild-queue-a2")->parent, "child-queue-a");
  ASSERT_EQ(read->notes.size(), 4u) << "each Queue's deserved is reported";
  EXPECT_NE(read->notes[2].find("Volcano Queue 'subchild-queue-a1': spec.deserved: not carried over"), std::string::npos)
      << read->notes[2];
  auto composed = ComposeQueues(PolicyWithQueues(""), ExternalQueues{.specs = read->specs});
  ASSERT_TRUE(composed.ok()) << composed.status();
  auto tree = queue::QueueTree::Build(composed->queues);
  ASSERT_TRUE(tree.ok()) << tree.status();
  EXPECT_FALSE(tree->is_leaf(*tree->Find("child-queue-a")));
  EXPECT_TRUE(tree->is_leaf(*tree->Find("subchild-queue-a1")));
  EXPECT_TRUE(tree->is_leaf(*tree->Find("child-queue-b")));
}

scheduler::Policy PolicyWithQueues(const std::string& queues_yaml) {
  const scheduler::PluginRegistry registry = plugins::BuiltinRegistry();
  std::vector<queue::ConfigError> errors;
  auto p = scheduler::ParsePolicy("actions: \"allocate\"\ntiers:\n- plugins: [{name: gang}]\n" + queues_yaml, "p.yaml",
                                  registry, &errors);
  EXPECT_TRUE(p.ok()) << p.status();
  return *p;
}

TEST(ComposeQueues, AddsTheExternalQueuesToThePolicysAndNamesBothSourcesOfAConflict) {
  ExternalQueues ext;
  ext.specs = {{.name = "ml", .weight = 2}, {.name = "vision", .parent = "team"}};
  // The policy declares none: the tree is the external queues alone.
  auto alone = ComposeQueues(PolicyWithQueues(""), ext);
  ASSERT_FALSE(alone.ok()) << "vision's parent 'team' is nowhere";
  EXPECT_NE(alone.status().message().find("Volcano Queue 'vision': queues[vision].parent: unknown parent queue 'team'"),
            std::string_view::npos)
      << alone.status();
  // A parent in the policy, a child in Volcano: one tree.
  auto both = ComposeQueues(PolicyWithQueues("queues:\n- {name: team, weight: 1}\n"), ext);
  ASSERT_TRUE(both.ok()) << both.status();
  ASSERT_EQ(both->queues.size(), 3u);
  EXPECT_TRUE(queue::QueueTree::Build(both->queues).ok());
  // The same name in both: refused, naming the policy file and the object.
  auto twice = ComposeQueues(PolicyWithQueues("queues:\n- {name: team}\n- {name: ml}\n"), ext);
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find(
                "queue 'ml': defined twice, in the policy (p.yaml) and by Volcano Queue 'ml': keep one of them"),
            std::string_view::npos)
      << twice.status();
  // No external queues: the policy unchanged.
  auto none = ComposeQueues(PolicyWithQueues("queues:\n- {name: team}\n"), ExternalQueues{});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->queues.size(), 1u);
}

TEST(ApiServerBinder, ListsVolcanoQueuesAndSaysWhenTheCrdIsMissing) {
  std::mutex mu;
  std::vector<std::string> targets;
  int status = 200;
  auto api = HttpServer::Start({}, [&](const HttpRequest& r) {
    std::lock_guard<std::mutex> lock(mu);
    targets.push_back(r.method + " " + r.target);
    if (status != 200) return HttpResponse{status, "application/json", R"({"kind":"Status","reason":"NotFound"})"};
    return HttpResponse{200, "application/json", List({Queue("ml", {{"weight", 2}})}).dump()};
  });
  ASSERT_TRUE(api.ok());
  auto binder = MakeApiServerBinder({.url = "http://127.0.0.1:" + std::to_string((*api)->port()), .token = "t"});
  ASSERT_TRUE(binder.ok()) << binder.status();
  auto list = (*binder)->ListVolcanoQueues();
  ASSERT_TRUE(list.ok()) << list.status();
  auto read = ReadVolcanoQueueList(*list);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->specs.size(), 1u);
  EXPECT_EQ(read->specs[0].weight, 2);
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(targets.size(), 1u);
    EXPECT_EQ(targets[0], "GET /apis/scheduling.volcano.sh/v1beta1/queues");
    status = 404;
  }
  auto missing = (*binder)->ListVolcanoQueues();
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_NE(missing.status().message().find("is Volcano's Queue CRD installed?"), std::string_view::npos);
  (*api)->Stop();
}

// A binder whose Queue list the test sets; binds nothing.
class QueueListBinder : public Binder {
 public:
  void Set(json list) {
    absl::MutexLock lock(&mu_);
    list_ = std::move(list);
  }
  absl::Status Bind(const ExtenderBindingArgs&) override { return absl::OkStatus(); }
  absl::Status Evict(const PodEviction&) override { return absl::OkStatus(); }
  absl::StatusOr<json> ListVolcanoQueues() override {
    absl::MutexLock lock(&mu_);
    ++reads_;
    return list_;
  }
  int reads() {
    absl::MutexLock lock(&mu_);
    return reads_;
  }

 private:
  absl::Mutex mu_;
  json list_ ABSL_GUARDED_BY(mu_);
  int reads_ ABSL_GUARDED_BY(mu_) = 0;
};

class VolcanoQueuesServeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rm_vq_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    daemon_.reset();
    std::filesystem::remove_all(dir_);
  }
  absl::StatusOr<std::unique_ptr<Daemon>> Launch(json list, const std::string& policy_yaml = "") {
    DaemonOptions o;
    o.cluster = ClusterBuilder().NodesPerRack(2).Gpus(8).Build();
    o.grpc_address = "127.0.0.1:0";
    o.extender.learn_nodes = false;
    o.volcano_queues = true;
    o.volcano_queues_refresh_ms = 100;
    if (!policy_yaml.empty()) {
      o.policy_file = dir_ + "/policy.yaml";
      std::ofstream(o.policy_file) << policy_yaml;
    }
    auto binder = std::make_unique<QueueListBinder>();
    binder->Set(std::move(list));
    binder_ = binder.get();
    o.binder = std::move(binder);
    return Daemon::Start(std::move(o), registry_);
  }
  void Connect() {
    stub_ = admin::Admin::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(daemon_->grpc_port()),
                                                      grpc::InsecureChannelCredentials()));
  }
  std::map<std::string, admin::Queue> Queues() {
    admin::ListQueuesRequest req;
    admin::ListQueuesResponse resp;
    grpc::ClientContext ctx;
    EXPECT_TRUE(stub_->ListQueues(&ctx, req, &resp).ok());
    std::map<std::string, admin::Queue> out;
    for (const admin::Queue& q : resp.queues()) out[q.name()] = q;
    return out;
  }
  grpc::Status Submit(const scheduler::JobSpec& spec) {
    admin::SubmitJobRequest req;
    *req.mutable_job() = JobSpecToProto(spec);
    admin::SubmitJobResponse resp;
    grpc::ClientContext ctx;
    return stub_->SubmitJob(&ctx, req, &resp);
  }
  // Waits (2 s at most) for `done` over the admin API's view.
  bool WaitFor(const std::function<bool(const std::map<std::string, admin::Queue>&)>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      if (done(Queues())) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  // Waits until the binder was read `n` more times (the loop went round).
  void WaitForReads(int n) {
    const int want = binder_->reads() + n;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (binder_->reads() < want && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_GE(binder_->reads(), want) << "the Queue objects were not re-read";
  }

  std::string dir_;
  scheduler::PluginRegistry registry_ = plugins::BuiltinRegistry();
  QueueListBinder* binder_ = nullptr;
  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<admin::Admin::Stub> stub_;
};

TEST_F(VolcanoQueuesServeTest, TheQueueObjectsAreQueuesAndAChangeIsAppliedWhileJobsKeepTheirs) {
  auto d = Launch(List({Queue("default", json::object()), Queue("ml", {{"weight", 3}})}));
  ASSERT_TRUE(d.ok()) << d.status();
  daemon_ = *std::move(d);
  Connect();
  auto q = Queues();
  ASSERT_EQ(q.size(), 2u);
  EXPECT_EQ(q.at("ml").weight(), 3);
  ASSERT_TRUE(Submit(JobBuilder("train").Queue("ml").GpusPerTask(1).Build()).ok());
  EXPECT_FALSE(Submit(JobBuilder("other").Queue("vision").GpusPerTask(1).Build()).ok()) << "no such queue yet";
  // A new Queue, and ml's weight changed: applied at the next read.
  binder_->Set(List({Queue("default", json::object()), Queue("ml", {{"weight", 5}}), Queue("vision", json::object())}));
  ASSERT_TRUE(WaitFor([](const auto& qs) { return qs.size() == 3 && qs.at("ml").weight() == 5; }));
  EXPECT_TRUE(Submit(JobBuilder("other").Queue("vision").GpusPerTask(1).Build()).ok());
  // ml removed while train is in it: refused, the queues in force stay.
  binder_->Set(List({Queue("default", json::object()), Queue("vision", json::object())}));
  WaitForReads(3);
  q = Queues();
  EXPECT_EQ(q.size(), 3u);
  EXPECT_TRUE(q.contains("ml")) << "a queue that still has jobs is not taken away";
  // A conflict with nothing: the policy declares no queue here. A Queue
  // with a bad field: the whole list refused, the queues in force stay.
  binder_->Set(List({Queue("default", json::object()), Queue("ml", {{"weight", -1}}), Queue("vision", json::object())}));
  WaitForReads(3);
  EXPECT_EQ(Queues().at("ml").weight(), 5);
}

TEST_F(VolcanoQueuesServeTest, AQueueBothDefineStopsTheStartNamingBoth) {
  const std::string policy =
      "actions: \"allocate\"\ntiers:\n- plugins: [{name: gang}, {name: proportion}]\nqueues:\n- {name: ml, weight: 1}\n";
  auto d = Launch(List({Queue("ml", {{"weight", 3}})}), policy);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("--volcano-queues: queue 'ml': defined twice, in the policy ("),
            std::string_view::npos)
      << d.status();
  EXPECT_NE(d.status().message().find("and by Volcano Queue 'ml'"), std::string_view::npos) << d.status();
  // Without the conflict, the policy's and Volcano's queues make one tree.
  auto ok = Launch(List({Queue("vision", {{"parent", "ml"}})}), policy);
  ASSERT_TRUE(ok.ok()) << ok.status();
  daemon_ = *std::move(ok);
  Connect();
  auto q = Queues();
  ASSERT_EQ(q.size(), 2u);
  EXPECT_EQ(q.at("vision").parent(), "ml");
}

TEST_F(VolcanoQueuesServeTest, AnUpdatePolicyThatCollidesWithAVolcanoQueueIsRejected) {
  auto d = Launch(List({Queue("ml", json::object()), Queue("default", json::object())}));
  ASSERT_TRUE(d.ok()) << d.status();
  daemon_ = *std::move(d);
  Connect();
  admin::UpdatePolicyRequest req;
  req.set_yaml("actions: \"allocate\"\ntiers:\n- plugins: [{name: gang}]\nqueues:\n- {name: ml}\n");
  admin::UpdatePolicyResponse resp;
  grpc::ClientContext ctx;
  const grpc::Status s = stub_->UpdatePolicy(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("queue 'ml': defined twice, in the policy (UpdatePolicy) and by Volcano Queue 'ml'"),
            std::string::npos)
      << s.error_message();
  // One with its own queue beside them is taken, and keeps Volcano's.
  req.set_yaml("actions: \"allocate\"\ntiers:\n- plugins: [{name: gang}]\nqueues:\n- {name: batch}\n");
  grpc::ClientContext ctx2;
  EXPECT_TRUE(stub_->UpdatePolicy(&ctx2, req, &resp).ok());
  auto q = Queues();
  EXPECT_EQ(q.size(), 3u);
  EXPECT_TRUE(q.contains("batch") && q.contains("ml") && q.contains("default"));
}

TEST_F(VolcanoQueuesServeTest, WithoutAnApiServerServeRefusesToStart) {
  DaemonOptions o;
  o.cluster = ClusterBuilder().NodesPerRack(2).Gpus(8).Build();
  o.grpc_address = "";
  o.extender.learn_nodes = false;
  o.volcano_queues = true;
  auto d = Daemon::Start(std::move(o), registry_);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("--volcano-queues: needs the API server (--api-server URL)"),
            std::string_view::npos)
      << d.status();
}

}  // namespace
}  // namespace ringmaster::server
