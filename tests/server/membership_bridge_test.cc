// The engine -> coordinator mapping of `ringmaster serve`
// (server/coordinator/membership_bridge.h, Coordinator::SetMembers): ranks in the
// engine's ring order, a planned shrink published at once with the leavers
// told rank -1 and the engine's deadline, a grow waiting for every
// newcomer, failures, and the engine's own decisions fed through the bridge.
#include "server/coordinator/membership_bridge.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "plugins/registry.h"
#include "server/extender/extender.h"
#include "tests/support/builders.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::server {
namespace {

using scheduler::MembershipChange;

class ManagedTest : public ::testing::Test {
 protected:
  ManagedTest() : coord_(Options()) {}
  CoordinatorOptions Options() {
    CoordinatorOptions o;
    o.now = [this] { return now_; };
    o.failure_report_grace = absl::ZeroDuration();
    return o;
  }
  Subscription Join(const std::string& worker, int desired = 1) {
    api::JoinRequest r;
    r.set_job("j");
    r.set_worker_id(worker);
    r.set_desired_workers(desired);
    auto sub = coord_.Join(r);
    EXPECT_TRUE(sub.ok()) << sub.status();
    return *sub;
  }
  std::optional<api::MembershipUpdate> Next(const Subscription& sub) {
    auto u = coord_.NextUpdate(sub, absl::ZeroDuration());
    EXPECT_TRUE(u.ok()) << u.status();
    return u.ok() ? *u : std::nullopt;
  }
  static std::vector<std::string> Members(const api::MembershipUpdate& u) {
    std::vector<std::string> out;
    for (const auto& m : u.members()) out.push_back(m.worker_id());
    return out;
  }
  int64_t Generation() { return coord_.GetJob("j")->generation(); }

  absl::Time now_ = absl::FromUnixSeconds(1000);
  Coordinator coord_;
};

using Names = std::vector<std::string>;

TEST_F(ManagedTest, StartWaitsForEveryListedWorkerAndRanksFollowTheList) {
  ASSERT_TRUE(coord_.SetMembers("j", {"b", "c", "a"}, api::REASON_INITIAL).ok());
  auto a = Join("a", /*desired=*/1);  // desired_workers does not apply to a managed job
  auto b = Join("b");
  EXPECT_EQ(Generation(), 0) << "c has not joined";
  EXPECT_FALSE(Next(a).has_value());
  auto c = Join("c");
  ASSERT_EQ(Generation(), 1);
  auto u = Next(a);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(Members(*u), (Names{"b", "c", "a"})) << "the engine's ring order, not worker-id order";
  EXPECT_EQ(u->rank(), 2);
  EXPECT_EQ(u->reason(), api::REASON_INITIAL);
  EXPECT_EQ(Next(b)->rank(), 0);
}

TEST_F(ManagedTest, TicksNeverPublishAnIncompleteFirstGang) {
  // A job at generation 0 has no pending failure report: Tick must not take
  // "0 == 0" for one and force a generation of whoever joined first.
  ASSERT_TRUE(coord_.SetMembers("j", {"a", "b"}, api::REASON_INITIAL).ok());
  auto a = Join("a");
  for (int i = 0; i < 3; ++i) {
    now_ += absl::Seconds(1);
    (void)coord_.Heartbeat([] {
      api::HeartbeatRequest h;
      h.set_job("j");
      h.set_worker_id("a");
      return h;
    }());
    coord_.Tick();
  }
  EXPECT_EQ(Generation(), 0);
  EXPECT_FALSE(Next(a).has_value());
  Join("b");
  EXPECT_EQ(Generation(), 1);
}

TEST_F(ManagedTest, UnlistedWorkersStayStandby) {
  ASSERT_TRUE(coord_.SetMembers("j", {"a", "b"}, api::REASON_INITIAL).ok());
  Join("x", 1);
  Join("a");
  Join("b");
  auto st = coord_.GetJob("j");
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->members_size(), 2);
  EXPECT_EQ(st->standby_size(), 1);
  EXPECT_EQ(st->standby(0), "x");
}

TEST_F(ManagedTest, PlannedShrinkIsPublishedAtOnceWithTheEnginesDeadline) {
  ASSERT_TRUE(coord_.SetMembers("j", {"a", "b", "c", "d"}, api::REASON_INITIAL).ok());
  std::map<std::string, Subscription> subs;
  for (const char* w : {"a", "b", "c", "d"}) subs[w] = Join(w);
  for (auto& [w, s] : subs) ASSERT_TRUE(Next(s).has_value());
  const absl::Time deadline = now_ + absl::Seconds(12);
  auto g = coord_.SetMembers("j", {"d", "a"}, api::REASON_PLANNED_SHRINK, deadline);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(*g, 2);
  for (const char* leaver : {"b", "c"}) {
    auto u = Next(subs[leaver]);
    ASSERT_TRUE(u.has_value());
    EXPECT_EQ(u->rank(), -1) << leaver << " is told to leave (at its step boundary)";
    EXPECT_EQ(u->reason(), api::REASON_PLANNED_SHRINK);
    EXPECT_EQ(u->deadline_unix_ms(), absl::ToUnixMillis(deadline));
  }
  auto u = Next(subs["a"]);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(Members(*u), (Names{"d", "a"}));
  EXPECT_EQ(u->rank(), 1);
  for (const auto& m : u->members()) EXPECT_TRUE(m.has_state()) << m.worker_id() << " is a survivor";
  // The leavers leave: nothing more is published.
  for (const char* leaver : {"b", "c"}) {
    api::LeaveRequest l;
    l.set_job("j");
    l.set_worker_id(leaver);
    ASSERT_TRUE(coord_.Leave(l).ok());
  }
  EXPECT_EQ(Generation(), 2);
}

TEST_F(ManagedTest, GrowWaitsForEveryNewcomerThenOneGeneration) {
  ASSERT_TRUE(coord_.SetMembers("j", {"a", "b"}, api::REASON_INITIAL).ok());
  auto a = Join("a");
  auto b = Join("b");
  ASSERT_TRUE(Next(a).has_value());
  ASSERT_TRUE(coord_.SetMembers("j", {"c", "a", "b", "d"}, api::REASON_GROW).ok());
  EXPECT_EQ(Generation(), 1);
  auto c = Join("c");
  EXPECT_EQ(Generation(), 1) << "d is still to come: one grow is one re-formation";
  auto d = Join("d");
  ASSERT_EQ(Generation(), 2);
  auto u = Next(a);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->reason(), api::REASON_GROW);
  EXPECT_EQ(Members(*u), (Names{"c", "a", "b", "d"}));
  std::map<std::string, bool> state;
  for (const auto& m : u->members()) state[m.worker_id()] = m.has_state();
  EXPECT_FALSE(state["c"]);
  EXPECT_TRUE(state["a"]);
  EXPECT_TRUE(state["b"]);
  EXPECT_FALSE(state["d"]);
  EXPECT_NE(u->deadline_unix_ms(), 0);
}

TEST_F(ManagedTest, AFailureWhileAGrowWaitsIsPublishedAtOnce) {
  ASSERT_TRUE(coord_.SetMembers("j", {"a", "b"}, api::REASON_INITIAL).ok());
  auto a = Join("a");
  auto b = Join("b");
  ASSERT_TRUE(coord_.SetMembers("j", {"a", "b", "c"}, api::REASON_GROW).ok());
  coord_.Disconnect(b);
  ASSERT_EQ(Generation(), 2);
  auto u = coord_.GetJob("j");
  ASSERT_EQ(u->members_size(), 1);
  EXPECT_EQ(u->members(0).worker_id(), "a");
  // The engine's failure decision then names the survivors: no new generation.
  ASSERT_TRUE(coord_.SetMembers("j", {"a"}, api::REASON_FAILURE).ok());
  EXPECT_EQ(Generation(), 2);
}

TEST_F(ManagedTest, BadInputAndResizeOfAManagedJob) {
  EXPECT_EQ(coord_.SetMembers("j", {}, api::REASON_INITIAL).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(coord_.SetMembers("j", {"a", "a"}, api::REASON_INITIAL).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(coord_.SetMembers("j", {"a", ""}, api::REASON_INITIAL).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(coord_.SetMembers("", {"a"}, api::REASON_INITIAL).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(coord_.SetMembers("j", {"a"}, api::REASON_INITIAL).ok());
  api::ResizeRequest r;
  r.set_job("j");
  r.set_workers(3);
  EXPECT_EQ(coord_.Resize(r).status().code(), absl::StatusCode::kFailedPrecondition);
  coord_.DropJob("j");
  EXPECT_EQ(coord_.GetJob("j").status().code(), absl::StatusCode::kNotFound);
}

TEST(MembershipTarget, RankOrderKindsAndDeadline) {
  MembershipChange m;
  m.job_name = "train";
  m.kind = MembershipChange::Kind::kShrink;
  m.deadline = 1'700'000'000'123;
  m.members = {{.task = 3, .task_name = "train-worker-3", .rank = 1},
               {.task = 0, .task_name = "train-worker-0", .rank = 0}};
  MembershipTarget t = TargetOf(m);
  EXPECT_EQ(t.job, "train");
  EXPECT_EQ(t.workers, (Names{"train-worker-0", "train-worker-3"}));
  EXPECT_EQ(t.reason, api::REASON_PLANNED_SHRINK);
  EXPECT_EQ(absl::ToUnixMillis(t.deadline), 1'700'000'000'123);
  m.deadline = -1;
  EXPECT_EQ(TargetOf(m).deadline, absl::InfiniteFuture());
  EXPECT_EQ(ReasonOf(MembershipChange::Kind::kStart), api::REASON_INITIAL);
  EXPECT_EQ(ReasonOf(MembershipChange::Kind::kGrow), api::REASON_GROW);
  EXPECT_EQ(ReasonOf(MembershipChange::Kind::kFailure), api::REASON_FAILURE);
}

// The engine's own decisions, through the bridge: an elastic job of 4 on one
// 4-GPU node shrinks to 2 for a priority gang of 2, then grows back.
TEST(MembershipBridgeEngine, ShrinkAndGrowReachTheCoordinatorInRingOrder) {
  using namespace ringmaster::testing;
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(4).Build(), PolicyFromYaml(R"(actions: "enqueue, allocate, preempt, elastic, backfill"
configurations:
- name: preempt
  arguments: {gracePeriod: 10, cooldown: 0}
- name: elastic
  arguments: {growIdle: 0, cooldown: 0}
)"));
  CoordinatorOptions co;
  Coordinator coord(co);
  MembershipBridge bridge(coord);
  h.Submit(JobBuilder("el").Gang(4).GpusPerTask(1).Elastic(2, 4).Build());
  auto d = h.Cycle();
  ASSERT_TRUE(bridge.OnCycle(d).ok());
  ASSERT_EQ(d.membership.size(), 1u);
  const auto start = TargetOf(d.membership[0]);
  ASSERT_EQ(start.workers.size(), 4u);
  std::map<std::string, Subscription> subs;
  for (const auto& w : start.workers) {
    api::JoinRequest r;
    r.set_job("el");
    r.set_worker_id(w);
    r.set_desired_workers(4);
    subs[w] = *coord.Join(r);
  }
  auto st = coord.GetJob("el");
  ASSERT_EQ(st->generation(), 1);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(st->members(i).worker_id(), start.workers[i]);

  h.Submit(JobBuilder("hp").Gang(2).GpusPerTask(1).Priority(100).Build());
  d = h.Cycle();
  ASSERT_TRUE(bridge.OnCycle(d).ok());
  std::vector<std::string> leavers;
  for (const auto& e : d.evictions) {
    EXPECT_EQ(e.kind, scheduler::Eviction::Kind::kShrink);
    leavers.push_back(e.task_name);
  }
  ASSERT_EQ(leavers.size(), 2u);
  st = coord.GetJob("el");
  ASSERT_EQ(st->generation(), 2) << "a planned shrink is published in the same cycle";
  ASSERT_EQ(st->members_size(), 2);
  for (const auto& l : leavers) {
    auto u = coord.NextUpdate(subs[l], absl::ZeroDuration());
    ASSERT_TRUE(u.ok() && u->has_value());
    EXPECT_EQ((*u)->rank(), -1) << l;
    EXPECT_EQ((*u)->reason(), api::REASON_PLANNED_SHRINK);
    EXPECT_EQ((*u)->deadline_unix_ms(), absl::ToUnixMillis(absl::FromUnixMillis(d.evictions[0].deadline)));
    api::LeaveRequest lr;
    lr.set_job("el");
    lr.set_worker_id(l);
    ASSERT_TRUE(coord.Leave(lr).ok());
    ASSERT_TRUE(h.engine().TaskReleased(d.evictions[0].job, l == d.evictions[0].task_name ? d.evictions[0].task
                                                                                            : d.evictions[1].task)
                    .ok());
  }
  d = h.Cycle();  // hp binds
  ASSERT_TRUE(bridge.OnCycle(d).ok());
  ASSERT_TRUE(h.Running("hp"));
  ASSERT_TRUE(h.engine().FinishJob(h.engine().FindJob("hp"), true).ok());
  h.clock().Advance(1000);
  d = h.Cycle();  // el grows back
  ASSERT_TRUE(bridge.OnCycle(d).ok());
  const MembershipChange* grow = nullptr;
  for (const auto& m : d.membership) {
    if (m.kind == MembershipChange::Kind::kGrow) grow = &m;
  }
  ASSERT_NE(grow, nullptr);
  const auto target = TargetOf(*grow);
  ASSERT_EQ(target.workers.size(), 4u);
  st = coord.GetJob("el");
  EXPECT_EQ(st->generation(), 2) << "waits for the newcomers";
  std::set<std::string> current;
  for (const auto& m : st->members()) current.insert(m.worker_id());
  for (const auto& w : target.workers) {
    if (current.contains(w)) continue;
    api::JoinRequest r;
    r.set_job("el");
    r.set_worker_id(w);
    ASSERT_TRUE(coord.Join(r).ok());
  }
  st = coord.GetJob("el");
  ASSERT_EQ(st->generation(), 3);
  ASSERT_EQ(st->members_size(), 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(st->members(i).worker_id(), target.workers[i]) << "rank " << i;
}

// A gang of pods through the extender: the coordinator's job is the gang
// and its workers are the pods' names (what a shim in the pod knows from the
// downward API), ranked as the engine ranked the tasks the pods run as.
TEST(MembershipBridgeExtender, APodsShimJoinsAsThePodItRunsIn) {
  using namespace ringmaster::testing;
  using nlohmann::json;
  auto registry = plugins::BuiltinRegistry();
  scheduler::ManualClock clock{1'000};
  scheduler::EngineOptions eo;
  eo.auto_confirm_binds = false;
  const TopologyLabels labels = DefaultTopologyLabels();
  auto engine = *scheduler::Engine::Create(*topology::Cluster::Build(TierSpecs(labels), {}),
                                           scheduler::DefaultPolicy(), registry, clock, eo);
  CoordinatorOptions co;
  Coordinator coord(co);
  MembershipBridge bridge(coord);
  std::vector<MembershipChange> seen;
  ExtenderOptions o;
  // As serve's loop: the extender's sink, then the daemon's (the bridge).
  struct BridgeSink : CycleSink {
    std::function<void(const scheduler::Decisions&)> on;
    void OnCycle(const scheduler::Decisions& d) override { on(d); }
  } sink;
  sink.on = [&](const scheduler::Decisions& d) {
    for (const auto& m : d.membership) seen.push_back(m);
    EXPECT_TRUE(bridge.OnCycle(d).ok());
  };
  Extender ext(*engine, clock, o, nullptr);
  ext.loop().AddSink(&sink);
  bridge.SetNames([&](scheduler::JobId id) -> std::optional<CoordinatorNames> {  // as serve sets it
    CoordinatorNames n;
    if (!ext.PodNamesLocked(id, &n.job, &n.workers)) return std::nullopt;
    return n;
  });
  auto node = [](const std::string& name, const std::string& rack) {
    return json{{"metadata", {{"name", name}, {"labels", {{"topology.ringmaster.io/rack", rack}}}}},
                {"status", {{"allocatable", {{"cpu", "96"}, {"memory", "1Ti"}, {"nvidia.com/gpu", "8"}}}}}};
  };
  // Pod names that do not sort in arrival order, one 8-GPU pod per node.
  const std::vector<std::string> pods = {"bert-zeta", "bert-alpha", "bert-mid"};
  auto pod = [](const std::string& name) {
    return json{{"metadata",
                 {{"name", name}, {"namespace", "ml"}, {"uid", "uid-" + name},
                  {"labels", {{"scheduling.x-k8s.io/pod-group", "bert"}}},
                  {"annotations", {{"scheduling.volcano.sh/group-min-member", "3"}}}}},
                {"spec",
                 {{"containers",
                   {{{"name", "t"}, {"resources", {{"limits", {{"nvidia.com/gpu", "8"}}}, {"requests", {{"cpu", "4"}}}}}}}}}}};
  };
  ExtenderArgs args;
  args.nodes = NodeObjects({node("n1", "r1"), node("n2", "r2"), node("n3", "r1"), node("n4", "r2")});
  for (const auto& p : pods) {
    args.pod = pod(p);
    ext.Filter(args);
  }
  ASSERT_EQ(seen.size(), 1u) << "the gang started";
  ASSERT_EQ(seen[0].kind, MembershipChange::Kind::kStart);
  ASSERT_EQ(seen[0].members.size(), 3u);
  // The engine's task names are its own ("ml/bert-worker-N") ...
  for (const auto& m : seen[0].members) EXPECT_EQ(m.task_name.rfind("ml/bert-worker-", 0), 0u) << m.task_name;
  // ... the coordinator waits for the pods by their names, under the gang's.
  std::map<std::string, Subscription> subs;
  for (const auto& p : pods) {
    auto st = coord.GetJob("ml/bert");
    ASSERT_TRUE(st.ok()) << st.status();
    EXPECT_EQ(st->generation(), 0) << "not every pod has joined";
    api::JoinRequest r;
    r.set_job("ml/bert");
    r.set_worker_id(p);
    auto sub = coord.Join(r);
    ASSERT_TRUE(sub.ok()) << sub.status();
    subs.emplace(p, *sub);
  }
  auto st = coord.GetJob("ml/bert");
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->generation(), 1);
  ASSERT_EQ(st->members_size(), 3);
  // Rank r is the pod reserved where the engine put its rank-r task.
  for (const auto& m : seen[0].members) {
    const std::string& worker = st->members(m.rank).worker_id();
    ASSERT_TRUE(std::find(pods.begin(), pods.end(), worker) != pods.end()) << worker;
    EXPECT_EQ(ext.ReservedNode("ml/" + worker), m.node_name) << "rank " << m.rank << " is " << worker;
    auto u = coord.NextUpdate(subs.at(worker), absl::ZeroDuration());
    ASSERT_TRUE(u.ok() && u->has_value());
    EXPECT_EQ((*u)->rank(), m.rank) << worker;
  }
  EXPECT_ERROR(coord.GetJob("ml/bert-worker-0"), absl::StatusCode::kNotFound, "unknown job 'ml/bert-worker-0'") << "nothing under the engine's task names";
}

}  // namespace
}  // namespace ringmaster::server
