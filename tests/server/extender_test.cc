// Tests for server/extender/extender.h: gang semantics of the scheduler extender on a
// real engine (filters fail with a reason until the gang is complete, then
// each member passes exactly its reserved node), expiry, bind, and both
// nodeCacheCapable modes.
#include "server/extender/extender.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <set>

#include "absl/synchronization/notification.h"
#include "plugins/registry.h"
#include "scheduler/policy.h"
#include "server/http/http_server.h"
#include "server/extender/kube_binder.h"
#include "tests/server/extender_fixtures.h"
#include "tests/support/builders.h"

namespace ringmaster::server {
namespace {

using nlohmann::json;

using extender_fixtures::MemoryStore;
using extender_fixtures::Node;
using extender_fixtures::Pod;

// An engine that starts with no nodes: they come from the requests.
class ExtenderTest : public ::testing::Test {
 protected:
  void SetUp() override { Make(DefaultTopologyLabels()); }

  void Make(const TopologyLabels& labels, std::optional<topology::Cluster> cluster = std::nullopt) {
    if (!cluster) cluster = *topology::Cluster::Build(TierSpecs(labels), {});
    scheduler::EngineOptions opts;
    opts.auto_confirm_binds = false;
    auto e = scheduler::Engine::Create(*std::move(cluster), policy_, registry_, clock_, opts);
    ASSERT_TRUE(e.ok()) << e.status();
    extender_.reset();  // it uses the engine until it is gone (the engine must outlive it)
    engine_ = *std::move(e);
    ExtenderOptions o;
    o.topology = labels;
    o.reservation_timeout_ms = 30'000;
    o.learn_nodes = !cluster_file_;
    extender_ = std::make_unique<Extender>(*engine_, clock_, o, binder_);
  }

  // nodeCacheCapable false: every node object is sent.
  ExtenderArgs FullArgs(const json& pod) const {
    ExtenderArgs a;
    a.pod = pod;
    a.nodes = NodeObjects(nodes_);
    return a;
  }

  scheduler::PluginRegistry registry_ = plugins::BuiltinRegistry();
  scheduler::ManualClock clock_{1'000};
  std::unique_ptr<scheduler::Engine> engine_;
  std::unique_ptr<Extender> extender_;
  Binder* binder_ = nullptr;
  scheduler::Policy policy_ = scheduler::DefaultPolicy();
  bool cluster_file_ = false;
  std::vector<json> nodes_ = {Node("n1", 8), Node("n2", 8), Node("n3", 8, "r2")};
};

// The passing nodes of a filter answer, whichever form it came in.
std::vector<std::string> Passing(const ExtenderFilterResult& r) {
  std::vector<std::string> out;
  if (r.node_names) out = *r.node_names;
  if (r.nodes) {
    for (const json& n : *r.nodes) out.push_back(n["metadata"]["name"]);
  }
  return out;
}

TEST_F(ExtenderTest, GangFiltersFailUntilTheLastMemberThenEachGetsItsReservedNode) {
  // 4 pods x 4 GPUs = 16 GPUs: two of the 8-GPU nodes.
  for (int i = 0; i < 3; ++i) {
    const ExtenderFilterResult r = extender_->Filter(FullArgs(Pod("w-" + std::to_string(i), "bert", 4, 4)));
    EXPECT_TRUE(r.error.empty()) << r.error;
    EXPECT_TRUE(Passing(r).empty());
    ASSERT_EQ(r.failed_nodes.size(), 3u);
    EXPECT_EQ(r.failed_nodes.at("n1"),
              "gang ml/bert: " + std::to_string(i + 1) + " of 4 member pods seen; waiting for the rest to reach the scheduler");
  }
  EXPECT_EQ(engine_->state().cluster().num_nodes(), 3u);  // learned from the Node objects
  const ExtenderFilterResult last = extender_->Filter(FullArgs(Pod("w-3", "bert", 4, 4)));
  ASSERT_EQ(Passing(last).size(), 1u) << ToJson(last);
  EXPECT_TRUE(last.failed_nodes.empty());  // placed: the other nodes need no reason
  std::map<std::string, int> per_node;
  for (int i = 0; i < 4; ++i) {
    const std::string name = "w-" + std::to_string(i);
    const auto reserved = extender_->ReservedNode("ml/" + name);
    ASSERT_TRUE(reserved.has_value()) << name;
    ++per_node[*reserved];
    // Asked again (kube-scheduler retries the first three), it passes exactly that node.
    const ExtenderFilterResult r = extender_->Filter(FullArgs(Pod(name, "bert", 4, 4)));
    EXPECT_EQ(Passing(r), std::vector<std::string>{*reserved});
    EXPECT_EQ(r.failed_nodes.count(*reserved), 0u);
    // Only the reserved node is scored; the hosts left out score 0.
    const HostPriorityList scores = extender_->Prioritize(FullArgs(Pod(name, "bert", 4, 4)));
    ASSERT_EQ(scores.size(), 1u);
    EXPECT_EQ(scores[0].host, *reserved);
    EXPECT_EQ(scores[0].score, kMaxExtenderPriority);
  }
  // Two pods of 4 GPUs on each of two 8-GPU nodes.
  ASSERT_EQ(per_node.size(), 2u);
  for (const auto& [node, n] : per_node) EXPECT_EQ(n, 2) << node;
  // Binding each member confirms it in the engine; a second bind is a no-op.
  for (int i = 0; i < 4; ++i) {
    const std::string name = "w-" + std::to_string(i);
    const ExtenderBindingResult b =
        extender_->Bind({name, "ml", "uid-" + name, *extender_->ReservedNode("ml/" + name)});
    EXPECT_TRUE(b.error.empty()) << b.error;
  }
  EXPECT_EQ(extender_->bindings().size(), 4u);
  const scheduler::Job& job = engine_->state().job(engine_->FindJob("ml/bert"));
  EXPECT_EQ(job.Count(scheduler::TaskState::kRunning), 4);
  // Bound gangs do not expire.
  clock_.Advance(60'000);
  extender_->Tick();
  EXPECT_TRUE(extender_->ReservedNode("ml/w-0").has_value());
}

TEST_F(ExtenderTest, UnplaceableGangGetsTheEnginesReason) {
  // 4 x 16 GPUs never fit on 8-GPU nodes.
  ExtenderFilterResult r;
  for (int i = 0; i < 4; ++i) r = extender_->Filter(FullArgs(Pod("big-" + std::to_string(i), "huge", 4, 16)));
  EXPECT_TRUE(Passing(r).empty());
  ASSERT_EQ(r.failed_nodes.size(), 3u);
  const std::string& why = r.failed_nodes.at("n1");
  EXPECT_NE(why.find("gang ml/huge (4 pods, min 4) is not placed: "), std::string::npos) << why;
  EXPECT_GT(why.size(), std::string("gang ml/huge (4 pods, min 4) is not placed: ").size()) << why;
}

TEST_F(ExtenderTest, MinMemberUnknownIsUnresolvableUntilThePodGroupGivesIt) {
  ExtenderFilterResult r = extender_->Filter(FullArgs(Pod("a", "nomin", 0, 1)));
  ASSERT_EQ(r.failed_and_unresolvable_nodes.size(), 3u);
  EXPECT_NE(r.failed_and_unresolvable_nodes.at("n1").find("min member unknown"), std::string::npos);
  extender_->SetPodGroupMinMember("ml", "nomin", 2);
  r = extender_->Filter(FullArgs(Pod("a", "nomin", 0, 1)));
  EXPECT_TRUE(r.failed_and_unresolvable_nodes.empty());
  EXPECT_NE(r.failed_nodes.at("n1").find("1 of 2"), std::string::npos);
  r = extender_->Filter(FullArgs(Pod("b", "nomin", 0, 1)));
  EXPECT_EQ(Passing(r).size(), 1u);
}

TEST_F(ExtenderTest, APodWithoutAGroupIsAGangOfOne) {
  const ExtenderFilterResult r = extender_->Filter(FullArgs(Pod("solo", "", 0, 2)));
  EXPECT_EQ(Passing(r).size(), 1u);
  EXPECT_TRUE(engine_->FindJob("ml/solo").valid());
}

TEST_F(ExtenderTest, ReservationsExpireAndTheGangFormsAgain) {
  for (int i = 0; i < 2; ++i) extender_->Filter(FullArgs(Pod("w-" + std::to_string(i), "g", 2, 8)));
  ASSERT_TRUE(extender_->ReservedNode("ml/w-0").has_value());
  const scheduler::JobId first = engine_->FindJob("ml/g");
  // One member binds, the other never does.
  ASSERT_TRUE(extender_->Bind({"w-0", "ml", "uid-w-0", *extender_->ReservedNode("ml/w-0")}).error.empty());
  clock_.Advance(29'999);
  extender_->Tick();
  EXPECT_TRUE(extender_->ReservedNode("ml/w-1").has_value());  // not yet: 30 s timeout
  clock_.Advance(1);
  extender_->Tick();
  EXPECT_FALSE(extender_->ReservedNode("ml/w-0").has_value());
  EXPECT_FALSE(extender_->ReservedNode("ml/w-1").has_value());
  EXPECT_EQ(extender_->gang_count(), 0u);
  // The engine released the job: every GPU is free again.
  EXPECT_EQ(engine_->state().job(first).phase(), scheduler::JobPhase::kAborted);
  EXPECT_EQ(engine_->state().job(first).allocated().gpu_milli(), 0);
  // The bound member's pod runs: it is evicted (its GPUs are given back).
  const std::vector<PodEviction> evicted = extender_->evictions();
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0].pod_name, "w-0");
  EXPECT_EQ(evicted[0].pod_uid, "uid-w-0");
  // The pods come back and form the gang as a new job.
  ExtenderFilterResult r = extender_->Filter(FullArgs(Pod("w-1", "g", 2, 8)));
  EXPECT_NE(r.failed_nodes.at("n1").find("1 of 2"), std::string::npos);
  r = extender_->Filter(FullArgs(Pod("w-0", "g", 2, 8)));
  EXPECT_EQ(Passing(r).size(), 1u);
  EXPECT_TRUE(engine_->FindJob("ml/g#1").valid());
}

TEST_F(ExtenderTest, BindChecksTheReservation) {
  extender_->Filter(FullArgs(Pod("s", "", 0, 8)));
  const std::string node = *extender_->ReservedNode("ml/s");
  const std::string other = node == "n1" ? "n2" : "n1";
  EXPECT_NE(extender_->Bind({"s", "ml", "uid-s", other}).error.find("is reserved on node " + node), std::string::npos);
  EXPECT_NE(extender_->Bind({"nobody", "ml", "u", node}).error.find("was not admitted by ringmaster"), std::string::npos);
  EXPECT_TRUE(extender_->Bind({"s", "ml", "uid-s", node}).error.empty());
}

class FailingBinder : public Binder {
 public:
  absl::Status Bind(const ExtenderBindingArgs&) override {
    ++calls;
    return calls == 1 ? absl::UnavailableError("API server said no") : absl::OkStatus();
  }
  absl::Status Evict(const PodEviction&) override { return absl::OkStatus(); }
  int calls = 0;
};

// Knows the PodGroups of `min`; counts the look-ups.
class PodGroupBinder : public Binder {
 public:
  absl::Status Bind(const ExtenderBindingArgs&) override { return absl::OkStatus(); }
  absl::Status Evict(const PodEviction&) override { return absl::OkStatus(); }
  absl::StatusOr<int> PodGroupMinMember(const std::string& ns, const std::string& group) override {
    ++lookups;
    auto it = min.find(ns + "/" + group);
    if (it == min.end()) return absl::NotFoundError("PodGroup " + ns + "/" + group + " not found");
    return it->second;
  }
  std::map<std::string, int> min;
  int lookups = 0;
};

TEST_F(ExtenderTest, AGangWithoutTheAnnotationTakesItsMinMemberFromThePodGroup) {
  PodGroupBinder binder;
  binder.min["ml/bert"] = 2;
  binder_ = &binder;
  Make(DefaultTopologyLabels());
  // No min-member annotation (min 0): the PodGroup says 2. The filter
  // answers at once while the lookup thread reads it; the next one knows.
  const ExtenderFilterResult looking = extender_->Filter(FullArgs(Pod("w-0", "bert", 0, 4)));
  ASSERT_EQ(looking.failed_and_unresolvable_nodes.size(), 0u) << ToJson(looking);
  ASSERT_EQ(looking.failed_nodes.size(), 3u) << ToJson(looking);
  EXPECT_NE(looking.failed_nodes.begin()->second.find("looking up PodGroup ml/bert's minMember"), std::string::npos)
      << ToJson(looking);
  extender_->WaitForPodGroupLookups();
  const ExtenderFilterResult first = extender_->Filter(FullArgs(Pod("w-0", "bert", 0, 4)));
  ASSERT_EQ(first.failed_and_unresolvable_nodes.size(), 0u) << ToJson(first);
  EXPECT_NE(first.failed_nodes.begin()->second.find("1 of 2 member pods seen"), std::string::npos) << ToJson(first);
  const ExtenderFilterResult second = extender_->Filter(FullArgs(Pod("w-1", "bert", 0, 4)));
  ASSERT_TRUE(second.nodes.has_value());
  EXPECT_EQ(second.nodes->size(), 1u) << ToJson(second);
  EXPECT_EQ(binder.lookups, 1);  // read once, then known

  // A group with no PodGroup object waits as unresolvable and is not asked
  // for again on every request.
  extender_->Filter(FullArgs(Pod("o-0", "orphan", 0, 1)));
  extender_->WaitForPodGroupLookups();
  const ExtenderFilterResult orphan = extender_->Filter(FullArgs(Pod("o-0", "orphan", 0, 1)));
  ASSERT_FALSE(orphan.failed_and_unresolvable_nodes.empty()) << ToJson(orphan);
  EXPECT_NE(orphan.failed_and_unresolvable_nodes.begin()->second.find("min member unknown"), std::string::npos);
  EXPECT_NE(orphan.failed_and_unresolvable_nodes.begin()->second.find("PodGroup ml/orphan not found"),
            std::string::npos)
      << ToJson(orphan);
  extender_->Filter(FullArgs(Pod("o-0", "orphan", 0, 1)));
  extender_->WaitForPodGroupLookups();
  EXPECT_EQ(binder.lookups, 2);
  // Created later: found on a retry once the retry time has passed.
  binder.min["ml/orphan"] = 1;
  clock_.Advance(10'001);
  extender_->Filter(FullArgs(Pod("o-0", "orphan", 0, 1)));
  extender_->WaitForPodGroupLookups();
  const ExtenderFilterResult found = extender_->Filter(FullArgs(Pod("o-0", "orphan", 0, 1)));
  EXPECT_TRUE(found.failed_and_unresolvable_nodes.empty()) << ToJson(found);
  EXPECT_EQ(Passing(found).size(), 1u) << ToJson(found);
  EXPECT_EQ(binder.lookups, 3);
}

// The API server answers slowly (the binder's 5 s timeout): the filter does
// not wait for it.
class SlowPodGroupBinder : public Binder {
 public:
  absl::Status Bind(const ExtenderBindingArgs&) override { return absl::OkStatus(); }
  absl::Status Evict(const PodEviction&) override { return absl::OkStatus(); }
  absl::StatusOr<int> PodGroupMinMember(const std::string&, const std::string&) override {
    ++lookups;
    answer.WaitForNotificationWithTimeout(absl::Seconds(30));
    return 2;
  }
  absl::Notification answer;
  std::atomic<int> lookups{0};
};

TEST_F(ExtenderTest, ASlowPodGroupLookupDoesNotHoldUpTheFilter) {
  SlowPodGroupBinder binder;
  binder_ = &binder;
  Make(DefaultTopologyLabels());
  auto filtered = std::async(std::launch::async, [&] { return extender_->Filter(FullArgs(Pod("w-0", "slow", 0, 4))); });
  const bool answered = filtered.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  if (!answered) binder.answer.Notify();  // let the old, blocking filter finish
  ASSERT_TRUE(answered) << "the filter waited for the API server";
  const ExtenderFilterResult r = filtered.get();
  ASSERT_EQ(r.failed_nodes.size(), 3u) << ToJson(r);
  EXPECT_NE(r.failed_nodes.at("n1").find("looking up PodGroup ml/slow's minMember"), std::string::npos) << ToJson(r);
  // Other pods are served meanwhile, and a second filter of the group does
  // not ask again.
  EXPECT_EQ(Passing(extender_->Filter(FullArgs(Pod("solo", "", 0, 1)))).size(), 1u);
  EXPECT_NE(extender_->Filter(FullArgs(Pod("w-1", "slow", 0, 4))).failed_nodes.at("n1").find("looking up"),
            std::string::npos);
  binder.answer.Notify();
  extender_->WaitForPodGroupLookups();
  EXPECT_EQ(binder.lookups.load(), 1);
  // The answer is in: both members seen, the gang is placed.
  const ExtenderFilterResult placed = extender_->Filter(FullArgs(Pod("w-0", "slow", 0, 4)));
  EXPECT_EQ(Passing(placed).size(), 1u) << ToJson(placed);
  EXPECT_TRUE(engine_->FindJob("ml/slow").valid());
}

TEST_F(ExtenderTest, AFailedBindReleasesTheGangAndTheEnginePlacesItAgain) {
  FailingBinder binder;
  binder_ = &binder;
  Make(DefaultTopologyLabels());
  extender_->Filter(FullArgs(Pod("s", "", 0, 8)));
  const std::string node = *extender_->ReservedNode("ml/s");
  const ExtenderBindingResult b = extender_->Bind({"s", "ml", "uid-s", node});
  EXPECT_NE(b.error.find("API server said no"), std::string::npos) << b.error;
  EXPECT_FALSE(extender_->ReservedNode("ml/s").has_value());
  extender_->Tick();  // the next cycle places it again
  ASSERT_TRUE(extender_->ReservedNode("ml/s").has_value());
  EXPECT_TRUE(extender_->Bind({"s", "ml", "uid-s", *extender_->ReservedNode("ml/s")}).error.empty());
  EXPECT_EQ(binder.calls, 2);
}

TEST_F(ExtenderTest, NodeCacheCapableUsesNamesAndTheClusterFile) {
  // The nodes come from a cluster (file); the request carries names only.
  cluster_file_ = true;
  Make(TopologyLabels{}, testing::ClusterBuilder().Racks(1).NodesPerRack(2).Gpus(8).Build());
  const std::string n0 = engine_->state().cluster().node(topology::NodeId(0)).name;
  const std::string n1 = engine_->state().cluster().node(topology::NodeId(1)).name;
  ExtenderArgs a;
  a.node_names = std::vector<std::string>{n0, n1};
  a.pod = Pod("p-0", "pair", 2, 8);
  ExtenderFilterResult r = extender_->Filter(a);
  EXPECT_TRUE(r.node_names.has_value());
  EXPECT_FALSE(r.nodes.has_value());
  EXPECT_TRUE(r.node_names->empty());
  EXPECT_EQ(r.failed_nodes.size(), 2u);
  a.pod = Pod("p-1", "pair", 2, 8);
  r = extender_->Filter(a);
  ASSERT_EQ(r.node_names->size(), 1u);
  EXPECT_TRUE(r.failed_nodes.empty());
  // Preempt keeps only the reserved node's victims, in Meta form.
  ExtenderPreemptionArgs pa;
  pa.pod = a.pod;
  pa.node_name_to_meta_victims = std::map<std::string, MetaVictims>{{n0, {{"v0"}, 0}}, {n1, {{"v1"}, 0}}};
  const ExtenderPreemptionResult pr = extender_->Preempt(pa);
  ASSERT_EQ(pr.node_name_to_meta_victims.size(), 1u);
  EXPECT_EQ(pr.node_name_to_meta_victims.begin()->first, (*r.node_names)[0]);
}

// Preemption with a 30 s grace period and no cooldown.
scheduler::Policy PreemptPolicy(const scheduler::PluginRegistry& registry) {
  std::vector<queue::ConfigError> errors;
  auto p = scheduler::ParsePolicy(R"(actions: "enqueue, allocate, preempt, backfill"
configurations:
- name: preempt
  arguments: {gracePeriod: 30, cooldown: 0}
)",
                                  "test", registry, &errors);
  EXPECT_TRUE(p.ok()) << p.status();
  return *p;
}

// A fake API server on 127.0.0.1 that takes every binding, records the
// evictions posted to it and answers 429 (a disruption budget) to the first
// `refuse` of them.
class FakeApiServer {
 public:
  explicit FakeApiServer(int refuse) : refuse_(refuse) {
    auto s = HttpServer::Start({}, [this](const HttpRequest& r) {
      std::lock_guard<std::mutex> lock(mu_);
      if (r.method == "GET" && r.target == "/api/v1/nodes") {  // the Node objects the requests carry are real
        return HttpResponse{200, "application/json",
                            R"({"kind":"PartialObjectMetadataList","items":[{"metadata":{"name":"n1"}},)"
                            R"({"metadata":{"name":"n2"}},{"metadata":{"name":"n3"}}]})"};
      }
      if (r.target.find("/eviction") == std::string::npos) return HttpResponse{201, "application/json", "{}"};  // binds
      got_.push_back(r);
      if (refuse_ > 0) {
        --refuse_;
        return HttpResponse{429, "application/json", R"({"reason":"TooManyRequests"})"};
      }
      return HttpResponse{201, "application/json", "{}"};
    });
    EXPECT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
    auto b = MakeApiServerBinder({.url = "http://127.0.0.1:" + std::to_string(server_->port())});
    EXPECT_TRUE(b.ok()) << b.status();
    binder_ = *std::move(b);
  }
  Binder* binder() { return binder_.get(); }
  std::vector<HttpRequest> got() {
    std::lock_guard<std::mutex> lock(mu_);
    return got_;
  }

 private:
  std::mutex mu_;
  std::vector<HttpRequest> got_;
  int refuse_;
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<Binder> binder_;
};

// Three 8-GPU pods of `low` bound on the three nodes; then a priority-10
// 8-GPU pod arrives and the engine evicts the low gang for it.
class ExtenderEvictionTest : public ExtenderTest {
 protected:
  void PlaceLowThenUrgent() {
    policy_ = PreemptPolicy(registry_);
    Make(DefaultTopologyLabels());
    for (int i = 0; i < 3; ++i) extender_->Filter(FullArgs(Pod("low-" + std::to_string(i), "low", 3, 8)));
    for (int i = 0; i < 3; ++i) {
      const std::string name = "low-" + std::to_string(i);
      ASSERT_TRUE(extender_->ReservedNode("ml/" + name).has_value()) << name;
      ASSERT_TRUE(extender_->Bind({name, "ml", "uid-" + name, *extender_->ReservedNode("ml/" + name)}).error.empty());
    }
    json urgent = Pod("urgent", "", 0, 8);
    urgent["spec"]["priority"] = 10;
    const ExtenderFilterResult r = extender_->Filter(FullArgs(urgent));
    EXPECT_TRUE(Passing(r).empty());  // the victims have their grace period first
  }
};

TEST_F(ExtenderEvictionTest, PreemptedPodsAreEvictedThroughTheApiServerWithTheGracePeriod) {
  FakeApiServer api(0);
  binder_ = api.binder();
  PlaceLowThenUrgent();
  const std::vector<HttpRequest> got = api.got();
  ASSERT_FALSE(got.empty());
  std::set<std::string> targets;
  for (const HttpRequest& r : got) {
    EXPECT_EQ(r.method, "POST");
    targets.insert(r.target);
    const json body = json::parse(r.body);
    const std::string pod = body["metadata"]["name"];
    EXPECT_EQ(body, json::parse(R"({"apiVersion":"policy/v1","kind":"Eviction",
        "metadata":{"name":")" + pod + R"(","namespace":"ml"},
        "deleteOptions":{"gracePeriodSeconds":30,"preconditions":{"uid":"uid-)" + pod + R"("}}})"));
  }
  EXPECT_EQ(targets.size(), got.size());  // each pod once
  // Evicting one member breaks the gang: the engine stops all three.
  EXPECT_EQ(targets, (std::set<std::string>{"/api/v1/namespaces/ml/pods/low-0/eviction",
                                            "/api/v1/namespaces/ml/pods/low-1/eviction",
                                            "/api/v1/namespaces/ml/pods/low-2/eviction"}));
  EXPECT_EQ(extender_->evictions().size(), 3u);
  EXPECT_FALSE(extender_->ReservedNode("ml/low-0").has_value());
  // After the grace period the urgent pod gets a node; nothing is evicted twice.
  clock_.Advance(30'000);
  extender_->Tick();
  EXPECT_TRUE(extender_->ReservedNode("ml/urgent").has_value());
  EXPECT_EQ(api.got().size(), 3u);
}

TEST_F(ExtenderEvictionTest, ARefusedEvictionIsTriedAgainUntilItsDeadline) {
  FakeApiServer api(1);  // a disruption budget refuses the first one
  binder_ = api.binder();
  PlaceLowThenUrgent();
  ASSERT_EQ(api.got().size(), 3u);
  EXPECT_EQ(extender_->evictions().size(), 2u);
  clock_.Advance(1'000);
  extender_->Tick();  // tried again, accepted
  ASSERT_EQ(api.got().size(), 4u);
  EXPECT_EQ(api.got()[3].target, api.got()[0].target);
  EXPECT_EQ(extender_->evictions().size(), 3u);
  // A grace period counts down: the retry asks for what is left.
  EXPECT_EQ(json::parse(api.got()[3].body)["deleteOptions"]["gracePeriodSeconds"], 29);
}

TEST_F(ExtenderEvictionTest, WithoutABinderEvictionsAreOnlyRecorded) {
  PlaceLowThenUrgent();
  const std::vector<PodEviction> ev = extender_->evictions();
  ASSERT_EQ(ev.size(), 3u);
  std::set<std::string> pods;
  for (const PodEviction& e : ev) {
    pods.insert(e.pod_name);
    EXPECT_EQ(e.pod_namespace, "ml");
    EXPECT_EQ(e.pod_uid, "uid-" + e.pod_name);
    EXPECT_EQ(e.grace_period_seconds, 30);
    EXPECT_FALSE(e.node.empty());
  }
  EXPECT_EQ(pods, (std::set<std::string>{"low-0", "low-1", "low-2"}));
}


// The extender (and its engine) built again from what the store kept, as
// after a daemon restart: the nodes come from the store alone.
class ExtenderRestartTest : public ExtenderTest {
 protected:
  // The extender goes before the loop it is a sink of (loop_ is this
  // class's, extender_ the base's), and both before the engine lock they
  // share (declared first, destroyed last).
  void TearDown() override { extender_.reset(); }
  absl::Mutex engine_mu_;  // the daemon's engine lock, shared with the admin API
  std::unique_ptr<CycleLoop> loop_;
  void MakeStored() {
    scheduler::EngineOptions opts;
    opts.auto_confirm_binds = false;
    auto e = scheduler::Engine::Create(*topology::Cluster::Build(TierSpecs(DefaultTopologyLabels()), {}), policy_,
                                       registry_, clock_, opts);
    ASSERT_TRUE(e.ok()) << e.status();
    extender_.reset();
    engine_ = *std::move(e);
    ExtenderOptions o;
    o.reservation_timeout_ms = 30'000;
    o.store = &store_;
    extender_ = std::make_unique<Extender>(*engine_, clock_, o, binder_);
  }
  void Restart() {
    const std::vector<StoredRecord> kept = store_.records();
    MakeStored();
    ASSERT_TRUE(extender_->Restore(kept).ok());
  }
  ExtenderArgs Names(const json& pod) const {
    ExtenderArgs a;
    a.pod = pod;
    a.node_names = std::vector<std::string>{"n1", "n2", "n3"};
    return a;
  }
  MemoryStore store_;
};

TEST_F(ExtenderRestartTest, ReservationsAndBoundPodsSurviveARestart) {
  MakeStored();
  for (int i = 0; i < 3; ++i) extender_->Filter(FullArgs(Pod("w-" + std::to_string(i), "bert", 3, 4)));
  extender_->Filter(FullArgs(Pod("x-0", "half", 2, 2)));  // a gang still forming
  std::map<std::string, std::string> reserved;
  for (int i = 0; i < 3; ++i) {
    const std::string key = "ml/w-" + std::to_string(i);
    ASSERT_TRUE(extender_->ReservedNode(key).has_value()) << key;
    reserved[key] = *extender_->ReservedNode(key);
  }
  const int syncs = store_.syncs;
  ASSERT_TRUE(extender_->Bind({"w-0", "ml", "uid-w-0", reserved["ml/w-0"]}).error.empty());
  EXPECT_EQ(store_.syncs, syncs + 1);  // a bind is answered once durable
  EXPECT_EQ(store_.Count("node"), 3u);
  EXPECT_EQ(store_.Count("pod"), 4u);
  EXPECT_EQ(store_.Count("gang"), 2u);

  clock_.Advance(10'000);
  Restart();
  EXPECT_EQ(engine_->state().cluster().num_nodes(), 3u);  // learned again from the store
  EXPECT_EQ(extender_->gang_count(), 2u);
  for (const auto& [key, node] : reserved) EXPECT_EQ(extender_->ReservedNode(key), node) << key;
  EXPECT_EQ(extender_->bindings(), (std::vector<std::pair<std::string, std::string>>{{"ml/w-0", reserved["ml/w-0"]}}));
  // The engine holds the gang where it was: its GPUs are not given away.
  const scheduler::JobId bert = engine_->FindJob("ml/bert");
  ASSERT_TRUE(bert.valid());
  const scheduler::Job& job = engine_->state().job(bert);
  EXPECT_EQ(job.phase(), scheduler::JobPhase::kRunning);
  EXPECT_EQ(job.allocated().gpu_milli(), 12'000);
  // Names only (nodeCacheCapable true): the reserved node passes, a bind
  // already done is a no-op, the others bind.
  EXPECT_EQ(Passing(extender_->Filter(Names(Pod("w-1", "bert", 3, 4)))), std::vector<std::string>{reserved["ml/w-1"]});
  EXPECT_TRUE(extender_->Bind({"w-0", "ml", "uid-w-0", reserved["ml/w-0"]}).error.empty());
  EXPECT_TRUE(extender_->Bind({"w-1", "ml", "uid-w-1", reserved["ml/w-1"]}).error.empty());
  // The forming gang remembers its first pod: the second completes it.
  const ExtenderFilterResult r = extender_->Filter(Names(Pod("x-1", "half", 2, 2)));
  EXPECT_EQ(Passing(r).size(), 1u) << ToJson(r);
  // The reservation clock kept running across the restart: w-2 never
  // bound, so 30 s after placement the gang is released.
  clock_.Advance(20'000);
  extender_->Tick();
  EXPECT_FALSE(extender_->ReservedNode("ml/w-2").has_value());
  EXPECT_EQ(engine_->state().job(bert).phase(), scheduler::JobPhase::kAborted);
  EXPECT_EQ(store_.Count("pod"), 2u);  // bert's pods forgotten
}

TEST_F(ExtenderRestartTest, AStoredRecordThatDoesNotReadIsDataLossNamingIt) {
  MakeStored();
  const absl::Status s = extender_->Restore({{"gang", "ml/g", "{not json"}});
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("extender gang 'ml/g'"), std::string_view::npos) << s;
  const absl::Status missing = extender_->Restore(
      {{"gang", "ml/h", R"({"min_member":1,"unresolvable":"","attempt":0,"deadline":-1,
        "members":[{"pod":"ml/gone","task":-1,"node":"","gpus":[],"bound":false}]})"}});
  EXPECT_NE(missing.message().find("pod ml/gone is missing"), std::string_view::npos) << missing;
}

// --- Place only where kube-scheduler allows (issue 26, part 1) ---------------

// Node objects of `names` (8 GPUs each), as a filter of nodeCacheCapable
// false carries the nodes kube-scheduler's own filters passed.
ExtenderArgs Offered(const json& pod, const std::vector<std::string>& names) {
  ExtenderArgs a;
  a.pod = pod;
  a.nodes.emplace();
  for (const std::string& n : names) a.nodes->push_back(Node(n, 8));
  return a;
}

TEST_F(ExtenderTest, AGangOfOneOfferedOnlyNodeBIsNotReservedOnNodeAItKnew) {
  // The engine learns n1 first (a gang still forming names it), then pods
  // ringmaster does not schedule fill n1: kube-scheduler offers only n2.
  extender_->Filter(Offered(Pod("early-0", "early", 2, 8), {"n1"}));
  const ExtenderFilterResult r = extender_->Filter(Offered(Pod("solo", "", 0, 8), {"n2"}));
  EXPECT_EQ(Passing(r), std::vector<std::string>{"n2"}) << ToJson(r);
  EXPECT_EQ(extender_->ReservedNode("ml/solo"), "n2");
}

TEST_F(ExtenderTest, KubeSchedulersSequenceWithBackoffBindsInsideTheOfferedNodesInOneReservation) {
  // kube-scheduler's real sequence: one pod at a time, filter -> prioritize
  // -> bind, an unschedulable pod retried after a backoff. n1 and n2 are
  // learned while free; then other pods fill them, and kube-scheduler's
  // NodeResourcesFit offers the gang's pods only n3 and n4.
  extender_->Filter(Offered(Pod("w-0", "g", 2, 8), {"n1", "n2", "n3", "n4"}));  // 1 of 2: waits
  const std::vector<std::string> free = {"n3", "n4"};
  std::map<std::string, std::string> bound;
  std::vector<std::string> queue = {"w-1", "w-0"};  // w-0 comes back after its backoff
  for (int attempt = 0; attempt < 8 && !queue.empty(); ++attempt) {
    const std::string pod = queue.front();
    queue.erase(queue.begin());
    const ExtenderFilterResult r = extender_->Filter(Offered(Pod(pod, "g", 2, 8), free));
    const std::vector<std::string> passing = Passing(r);
    if (passing.empty()) {
      queue.push_back(pod);  // unschedulable: retried after a backoff
      clock_.Advance(1'000);
      extender_->Tick();
      continue;
    }
    ASSERT_EQ(passing.size(), 1u);
    ASSERT_TRUE(passing[0] == "n3" || passing[0] == "n4") << pod << " passed " << passing[0];
    ASSERT_TRUE(extender_->Bind({pod, "ml", "uid-" + pod, passing[0]}).error.empty()) << pod;
    bound[pod] = passing[0];
  }
  EXPECT_TRUE(queue.empty()) << "pods left unbound: " << queue.size();
  ASSERT_EQ(bound.size(), 2u);
  EXPECT_NE(bound["w-0"], bound["w-1"]);  // 8 GPUs each: one node each
  // One reservation: the gang never re-formed as ml/g#1.
  EXPECT_TRUE(engine_->FindJob("ml/g").valid());
  EXPECT_FALSE(engine_->FindJob("ml/g#1").valid());
  EXPECT_EQ(engine_->state().job(engine_->FindJob("ml/g")).Count(scheduler::TaskState::kRunning), 2);
}

TEST_F(ExtenderTest, AReservationOutsideTheOfferedNodesIsReplannedAtOnce) {
  extender_->Filter(Offered(Pod("solo", "", 0, 8), {"n1", "n2", "n3"}));
  const std::string first = *extender_->ReservedNode("ml/solo");
  std::vector<std::string> others;
  for (const char* n : {"n1", "n2", "n3"}) {
    if (n != first) others.push_back(n);
  }
  // Its node was taken by other pods: the next filter offers the other two.
  // No timeout, no Tick: that filter answers a node among them.
  const ExtenderFilterResult r = extender_->Filter(Offered(Pod("solo", "", 0, 8), others));
  const std::vector<std::string> passing = Passing(r);
  ASSERT_EQ(passing.size(), 1u) << ToJson(r);
  EXPECT_NE(passing[0], first);
  EXPECT_EQ(extender_->ReservedNode("ml/solo"), passing[0]);
  EXPECT_TRUE(extender_->Bind({"solo", "ml", "uid-solo", passing[0]}).error.empty());
  EXPECT_FALSE(engine_->FindJob("ml/solo#1").valid());  // the same job, placed again
}

// --- Let no stranger place or bind (issue 26, part 2) ------------------------

// Counts the binds it is asked for; lists the API server's Nodes when
// `nodes` is set.
class CountingBinder : public Binder {
 public:
  absl::Status Bind(const ExtenderBindingArgs& b) override {
    binds.push_back(b.pod_namespace + "/" + b.pod_name);
    return absl::OkStatus();
  }
  absl::Status Evict(const PodEviction&) override { return absl::OkStatus(); }
  absl::StatusOr<std::map<std::string, std::string>> ListNodes() override {
    ++lists;
    if (!nodes) return absl::UnimplementedError("no list");
    return *nodes;
  }
  std::vector<std::string> binds;
  std::optional<std::map<std::string, std::string>> nodes;
  int lists = 0;
};

TEST_F(ExtenderTest, AStrangersBindIsRefusedAndNothingIsSentToTheApiServer) {
  CountingBinder binder;
  binder_ = &binder;
  Make(DefaultTopologyLabels());
  extender_->Filter(FullArgs(Pod("s", "", 0, 8)));
  const std::string node = *extender_->ReservedNode("ml/s");
  // A pod never admitted through /filter (kube-system's coredns), to a node
  // of the caller's choosing, with or without a UID.
  EXPECT_NE(extender_->Bind({"coredns-1", "kube-system", "", "control-plane-1"}, "10.0.0.9:4242").error.find(
                "was not admitted by ringmaster"),
            std::string::npos);
  EXPECT_NE(extender_->Bind({"coredns-1", "kube-system", "u-x", node}).error.find("was not admitted"),
            std::string::npos);
  // The admitted pod with an empty or another UID.
  EXPECT_NE(extender_->Bind({"s", "ml", "", node}).error.find("PodUID '' is not the UID"), std::string::npos);
  EXPECT_NE(extender_->Bind({"s", "ml", "uid-other", node}).error.find("is not the UID"), std::string::npos);
  EXPECT_TRUE(binder.binds.empty());
  EXPECT_TRUE(extender_->bindings().empty());
  EXPECT_TRUE(extender_->Bind({"s", "ml", "uid-s", node}).error.empty());
  EXPECT_EQ(binder.binds, std::vector<std::string>{"ml/s"});
}

TEST_F(ExtenderTest, APodOfAnotherSchedulerProfileIsRefused) {
  ExtenderOptions o;
  o.scheduler_name = "ringmaster";
  extender_.reset();  // its destructor clears the engine's driver predicate
  extender_ = std::make_unique<Extender>(*engine_, clock_, o, binder_);
  json other = Pod("coredns-1", "", 0, 0);
  other["spec"]["schedulerName"] = "default-scheduler";
  ExtenderFilterResult r = extender_->Filter(FullArgs(other));
  ASSERT_EQ(r.failed_and_unresolvable_nodes.size(), 3u) << ToJson(r);
  EXPECT_NE(r.failed_and_unresolvable_nodes.at("n1").find("spec.schedulerName 'default-scheduler', not 'ringmaster'"),
            std::string::npos);
  EXPECT_EQ(extender_->gang_count(), 0u);
  EXPECT_EQ(engine_->state().cluster().num_nodes(), 0u);  // nothing learned from the request either
  json ours = Pod("p", "", 0, 8);
  ours["spec"]["schedulerName"] = "ringmaster";
  EXPECT_EQ(Passing(extender_->Filter(FullArgs(ours))).size(), 1u);
}

TEST_F(ExtenderTest, TwoPodsWithOneUidCountOnce) {
  extender_->Filter(FullArgs(Pod("a", "g", 2, 4)));
  json twin = Pod("b", "g", 2, 4);
  twin["metadata"]["uid"] = "uid-a";
  const ExtenderFilterResult r = extender_->Filter(FullArgs(twin));
  ASSERT_FALSE(r.failed_and_unresolvable_nodes.empty()) << ToJson(r);
  EXPECT_NE(r.failed_and_unresolvable_nodes.at("n1").find("has UID uid-a, the UID of pod ml/a"), std::string::npos);
  EXPECT_FALSE(engine_->FindJob("ml/g").valid()) << "the twin completed the gang";
  // A real second member completes it.
  EXPECT_EQ(Passing(extender_->Filter(FullArgs(Pod("c", "g", 2, 4)))).size(), 1u);
}

// A filter carrying `n` invented Node objects (5,000 in the attack).
ExtenderArgs Flood(const json& pod, int n) {
  ExtenderArgs a;
  a.pod = pod;
  a.nodes.emplace();
  for (int i = 0; i < n; ++i) a.nodes->push_back(Node("fake-" + std::to_string(i), 8));
  return a;
}

TEST_F(ExtenderTest, ANodeFloodIsBoundedByTheLimit) {
  ExtenderOptions o;
  o.max_learned_nodes = 4;
  extender_.reset();  // its destructor clears the engine's driver predicate
  extender_ = std::make_unique<Extender>(*engine_, clock_, o, binder_);
  const ExtenderFilterResult r = extender_->Filter(Flood(Pod("x", "wait", 2, 8), 5000));
  EXPECT_EQ(engine_->state().cluster().num_nodes(), 4u);
  ASSERT_EQ(r.failed_and_unresolvable_nodes.size(), 4996u);
  EXPECT_EQ(r.failed_and_unresolvable_nodes.at("fake-4999"),
            "node not learned: ringmaster learns at most 4 nodes from requests (--max-learned-nodes)");
}

TEST_F(ExtenderTest, NodeObjectsAreCheckedAgainstTheApiServer) {
  CountingBinder binder;
  binder.nodes = std::map<std::string, std::string>{{"n1", ""}, {"n2", "uid-n2"}, {"n3", ""}};
  binder_ = &binder;
  Make(DefaultTopologyLabels());
  // 5,000 invented nodes: none is learned, the API server was asked once.
  ExtenderFilterResult r = extender_->Filter(Flood(Pod("x", "wait", 3, 8), 5000));
  EXPECT_EQ(engine_->state().cluster().num_nodes(), 0u);
  EXPECT_EQ(r.failed_and_unresolvable_nodes.at("fake-7"), "node not learned: the API server has no Node fake-7");
  EXPECT_EQ(binder.lists, 1);
  // A Node object whose UID is not the API server's is not learned either.
  json forged = Node("n2", 8);
  forged["metadata"]["uid"] = "uid-forged";
  ExtenderArgs a;
  a.pod = Pod("y", "wait", 3, 8);  // still forming: holds no GPUs
  a.nodes = NodeObjects({Node("n1", 8), forged, Node("n3", 8)});
  r = extender_->Filter(a);
  EXPECT_EQ(binder.lists, 1);  // the list read for the flood has these names: not read again
  EXPECT_EQ(engine_->state().cluster().num_nodes(), 2u);
  EXPECT_NE(r.failed_and_unresolvable_nodes.at("n2").find("with UID uid-forged"), std::string::npos) << ToJson(r);
  // The next real gang is placed on real nodes only.
  a.pod = Pod("solo", "", 0, 8);
  const ExtenderFilterResult placed = extender_->Filter(a);
  ASSERT_EQ(Passing(placed).size(), 1u) << ToJson(placed);
  EXPECT_TRUE(Passing(placed)[0] == "n1" || Passing(placed)[0] == "n3");
}

// --- Keep cancels whole (issue 26, part 4) -----------------------------------

TEST_F(ExtenderRestartTest, ACancelledBoundGangHoldsItsGpusUntilTheDeadlineAndStaysCancelledAcrossARestart) {
  auto make = [&](bool restore) {
    const std::vector<StoredRecord> kept = store_.records();
    scheduler::EngineOptions opts;
    opts.auto_confirm_binds = false;
    opts.cancel_grace_ms = 10'000;  // serve's --cancel-grace-ms
    extender_.reset();
    loop_.reset();
    engine_ = *scheduler::Engine::Create(*topology::Cluster::Build(TierSpecs(DefaultTopologyLabels()), {}), policy_,
                                         registry_, clock_, opts);
    ExtenderOptions o;
    o.store = &store_;
    loop_ = std::make_unique<CycleLoop>(*engine_, engine_mu_);
    extender_ = std::make_unique<Extender>(*engine_, clock_, o, binder_, loop_.get());
    if (restore) {
      ASSERT_TRUE(extender_->Restore(kept).ok());
    }
  };
  make(false);
  for (int i = 0; i < 2; ++i) extender_->Filter(FullArgs(Pod("w-" + std::to_string(i), "a", 2, 8)));
  for (int i = 0; i < 2; ++i) {
    const std::string name = "w-" + std::to_string(i);
    ASSERT_TRUE(extender_->Bind({name, "ml", "uid-" + name, *extender_->ReservedNode("ml/" + name)}).error.empty());
  }
  const scheduler::JobId a = engine_->FindJob("ml/a");
  {
    // What the admin API's CancelJob does for a pod gang (AdminService,
    // with the extender's gangs among the jobs something else runs).
    absl::MutexLock lock(&engine_mu_);
    ASSERT_TRUE(engine_->CancelJob(a).ok());
    extender_->JobCancelledLocked(a);
  }
  extender_->Tick();  // the cycle's kCancel evictions: the pods are evicted
  EXPECT_EQ(extender_->evictions().size(), 2u);
  EXPECT_EQ(engine_->state().job(a).phase(), scheduler::JobPhase::kCancelling);
  EXPECT_EQ(engine_->state().job(a).allocated().gpu_milli(), 16'000);  // held until the pods are gone
  // A gang needing every GPU is not given them meanwhile.
  ExtenderFilterResult r;
  for (int i = 0; i < 3; ++i) r = extender_->Filter(FullArgs(Pod("b-" + std::to_string(i), "b", 3, 8)));
  EXPECT_TRUE(Passing(r).empty()) << ToJson(r);

  clock_.Advance(2'000);
  make(/*restore=*/true);  // kill -9 and restart, 2 s into the grace period
  const scheduler::JobId again = engine_->FindJob("ml/a");
  ASSERT_TRUE(again.valid());
  EXPECT_EQ(engine_->state().job(again).phase(), scheduler::JobPhase::kCancelling);
  EXPECT_EQ(engine_->state().job(again).allocated().gpu_milli(), 16'000);
  // Its pods are not placed again; a bind for them is refused.
  r = extender_->Filter(FullArgs(Pod("w-0", "a", 2, 8)));
  ASSERT_EQ(r.failed_and_unresolvable_nodes.size(), 3u) << ToJson(r);
  EXPECT_NE(r.failed_and_unresolvable_nodes.at("n1").find("was cancelled"), std::string::npos);
  EXPECT_FALSE(extender_->ReservedNode("ml/w-0").has_value());
  EXPECT_NE(extender_->Bind({"w-0", "ml", "uid-w-0", "n1"}).error.find("cancelled"), std::string::npos);
  // After the grace period the GPUs are free and the waiting gang is placed.
  clock_.Advance(10'000);
  extender_->Tick();
  EXPECT_EQ(engine_->state().job(again).phase(), scheduler::JobPhase::kAborted);
  r = extender_->Filter(FullArgs(Pod("b-0", "b", 3, 8)));
  EXPECT_EQ(Passing(r).size(), 1u) << ToJson(r);
  // And it stays cancelled across another restart, Aborted now.
  make(/*restore=*/true);
  ASSERT_TRUE(engine_->FindJob("ml/a").valid());
  EXPECT_EQ(engine_->state().job(engine_->FindJob("ml/a")).phase(), scheduler::JobPhase::kAborted);
}

// What pods ringmaster did not admit hold (another scheduler's, or pods
// bound directly) is counted as used on their nodes: the engine's free GPUs
// agree with kube-scheduler's, a gang is not planned onto GPUs others hold,
// and it is placed once they are gone. Ringmaster's own bound pods are not
// counted twice.
TEST_F(ExtenderTest, PodsOthersPlacedCountAsUsedOnTheirNodes) {
  struct ListingBinder : Binder {
    absl::Status Bind(const ExtenderBindingArgs&) override { return absl::OkStatus(); }
    absl::Status Evict(const PodEviction&) override { return absl::OkStatus(); }
    absl::StatusOr<std::vector<BoundPod>> ListBoundPods() override { return pods; }
    std::vector<BoundPod> pods;
  } lister;
  auto other = [](const std::string& key, const std::string& node, int gpus) {
    BoundPod p;
    p.key = key;
    p.uid = "uid-" + key;
    p.node = node;
    p.request.set_cpu_milli(2'000);
    p.gpus = gpus;
    return p;
  };
  // Without a binder that lists pods nothing is counted.
  EXPECT_EQ(extender_->RefreshForeignPods().code(), absl::StatusCode::kUnimplemented);
  binder_ = &lister;
  Make(DefaultTopologyLabels());
  extender_->Filter(FullArgs(Pod("g-0", "g", 2, 8)));  // learns n1..n3; the gang waits for its second pod
  lister.pods = {other("kube-system/o-0", "n1", 8), other("default/o-1", "n2", 6), other("default/o-2", "n9", 8)};
  ASSERT_TRUE(extender_->RefreshForeignPods().ok());
  const auto& st = engine_->state();
  auto free_on = [&](const std::string& n) { return st.FreeWholeGpus(st.cluster().FindNode(n)); };
  EXPECT_EQ(free_on("n1"), 0);
  EXPECT_EQ(free_on("n2"), 2);
  EXPECT_EQ(free_on("n3"), 8);
  EXPECT_EQ(extender_->ForeignOn("n2"), (std::pair<int64_t, int>{6, 1}));
  EXPECT_EQ(extender_->ForeignOn("n9"), (std::pair<int64_t, int>{0, 0})) << "a node not learned is not counted";
  EXPECT_EQ(st.node(st.cluster().FindNode("n1")).used.cpu_milli(), 2'000);
  ASSERT_TRUE(st.CheckInvariants().ok()) << st.CheckInvariants();
  // A gang of two 8-GPU pods: only n3 has 8 GPUs free.
  ExtenderFilterResult r = extender_->Filter(FullArgs(Pod("g-1", "g", 2, 8)));
  EXPECT_TRUE(Passing(r).empty()) << ToJson(r);
  EXPECT_FALSE(extender_->ReservedNode("ml/g-0").has_value());
  ASSERT_EQ(r.failed_nodes.count("n1"), 1u) << ToJson(r);
  EXPECT_NE(r.failed_nodes.at("n1").find("1 of 2 members placeable"), std::string::npos) << r.failed_nodes.at("n1");
  // The others' pods on n1 end: the next read frees their GPUs, the next cycle places the gang.
  lister.pods = {other("default/o-1", "n2", 6)};
  ASSERT_TRUE(extender_->RefreshForeignPods().ok());
  EXPECT_EQ(free_on("n1"), 8);
  extender_->Tick();
  ASSERT_TRUE(extender_->ReservedNode("ml/g-0").has_value());
  ASSERT_TRUE(extender_->ReservedNode("ml/g-1").has_value());
  std::set<std::string> used = {*extender_->ReservedNode("ml/g-0"), *extender_->ReservedNode("ml/g-1")};
  EXPECT_EQ(used, (std::set<std::string>{"n1", "n3"}));
  for (const std::string name : {"g-0", "g-1"}) {
    ASSERT_TRUE(extender_->Bind({name, "ml", "uid-" + name, *extender_->ReservedNode("ml/" + name)}).error.empty());
  }
  // Listed as bound, ringmaster's own pods are not counted again.
  BoundPod mine = other("ml/g-0", *extender_->ReservedNode("ml/g-0"), 8);
  mine.uid = "uid-g-0";
  lister.pods = {mine, other("default/o-1", "n2", 6)};
  ASSERT_TRUE(extender_->RefreshForeignPods().ok());
  EXPECT_EQ(extender_->ForeignOn(mine.node), (std::pair<int64_t, int>{0, 0}));
  EXPECT_EQ(free_on(mine.node), 0);
  ASSERT_TRUE(st.CheckInvariants().ok()) << st.CheckInvariants();
  // A pod of others on GPUs ringmaster gave its own: counted only where free
  // (the two schedulers disagree; a warning names the node), never twice.
  lister.pods = {mine, other("default/intruder", "n3", 8)};
  ASSERT_TRUE(extender_->RefreshForeignPods().ok());
  EXPECT_EQ(st.node(st.cluster().FindNode("n3")).foreign.gpu_milli(), 0);
  EXPECT_EQ(free_on("n2"), 8) << "o-1 is gone from the list: its GPUs are free again";
  ASSERT_TRUE(st.CheckInvariants().ok()) << st.CheckInvariants();
}

// Launchers that rank by a pod's index (Kubeflow's replica index, an
// Indexed Job's completion index, an MPIJob's "-worker-N"): the pod of index
// r is reserved where the engine put its rank-r task, so a gang across two
// racks gets ranks 0..1 in one rack and 2..3 in the other, whatever order
// its pods arrived in.
TEST_F(ExtenderTest, PodsThatCarryAnIndexAreRankedInRingOrder) {
  struct Kind {
    std::string what;
    std::function<json(int index)> pod;
    std::function<int(int index)> rank;  // the launcher's rank of the pod
  };
  auto gpu_pod = [](const std::string& name) { return Pod(name, "g", 4, 8); };
  const std::vector<Kind> kinds = {
      {"replica-index label",
       [&](int i) {
         json p = gpu_pod("w" + std::to_string(i));
         p["metadata"]["labels"]["training.kubeflow.org/replica-index"] = std::to_string(i);
         p["metadata"]["labels"]["training.kubeflow.org/replica-type"] = "worker";
         return p;
       },
       [](int i) { return i; }},
      {"completion-index annotation",
       [&](int i) {
         json p = gpu_pod("job-" + std::to_string(i) + "-x");
         p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] = std::to_string(i);
         return p;
       },
       [](int i) { return i; }},
      {"MPIJob worker names", [&](int i) { return gpu_pod("pi-worker-" + std::to_string(i)); }, [](int i) { return i; }},
      {"PyTorchJob master and workers",
       [&](int i) {
         // i == 0: the master (replica index 0); 1..3: workers 0..2.
         json p = gpu_pod(i == 0 ? "bert-master-0" : "bert-worker-" + std::to_string(i - 1));
         p["metadata"]["labels"]["training.kubeflow.org/replica-type"] = i == 0 ? "Master" : "Worker";
         p["metadata"]["labels"]["training.kubeflow.org/replica-index"] = std::to_string(i == 0 ? 0 : i - 1);
         return p;
       },
       [](int i) { return i; }},
  };
  // Two racks, their nodes interleaved by name.
  nodes_ = {Node("n1", 8, "r1"), Node("n2", 8, "r2"), Node("n3", 8, "r1"), Node("n4", 8, "r2")};
  for (const Kind& kind : kinds) {
    SCOPED_TRACE(kind.what);
    Make(DefaultTopologyLabels());
    std::vector<scheduler::MembershipChange> seen;
    struct Recorder : CycleSink {
      std::vector<scheduler::MembershipChange>* seen;
      void OnCycle(const scheduler::Decisions& d) override {
        for (const auto& m : d.membership) seen->push_back(m);
      }
    } recorder;
    recorder.seen = &seen;
    extender_->loop().AddSink(&recorder);
    std::map<std::string, int> rank_of_pod;
    for (int i : {2, 0, 3, 1}) {  // not in index order
      const json p = kind.pod(i);
      rank_of_pod["ml/" + p["metadata"]["name"].get<std::string>()] = kind.rank(i);
      extender_->Filter(FullArgs(p));
    }
    std::map<int, std::string> rack_of_rank;
    for (const auto& [pod, rank] : rank_of_pod) {
      const auto node = extender_->ReservedNode(pod);
      ASSERT_TRUE(node.has_value()) << pod;
      rack_of_rank[rank] = (*node == "n1" || *node == "n3") ? "r1" : "r2";
    }
    EXPECT_EQ(rack_of_rank[0], rack_of_rank[1]);
    EXPECT_EQ(rack_of_rank[2], rack_of_rank[3]);
    EXPECT_NE(rack_of_rank[0], rack_of_rank[2]);
    // The engine's ranks are the pods' ranks (what the coordinator hands the
    // shims, by the pods' names).
    ASSERT_EQ(seen.size(), 1u);
    std::string gang;
    std::map<uint32_t, std::string> pods;
    {
      absl::MutexLock lock(&extender_->loop().mutex());
      ASSERT_TRUE(extender_->PodNamesLocked(seen[0].job, &gang, &pods));
    }
    for (const scheduler::Member& m : seen[0].members) {
      EXPECT_EQ(rank_of_pod.at("ml/" + pods.at(m.task)), m.rank) << pods.at(m.task);
    }
    extender_->loop().RemoveSink(&recorder);
  }
}

TEST_F(ExtenderTest, AMalformedPodGetsAnError) {
  ExtenderArgs a = FullArgs(json{{"metadata", {{"namespace", "ml"}}}});
  EXPECT_NE(extender_->Filter(a).error.find("Pod.metadata.name"), std::string::npos);
}

}  // namespace
}  // namespace ringmaster::server
