// The decision oracle (tests/support/decision_oracle.h) must be able to
// fail: each test feeds it hand-made Decisions that break one property (a
// GPU given twice, GPU shares over a device, a node over its cpu, a queue
// over its capability, a gang below its minimum, a leaver's GPUs taken
// before its deadline, an eviction or bind that makes no sense) and expects
// the matching complaint, next to the same stream with the fault removed.
#include <gtest/gtest.h>

#include "tests/support/builders.h"
#include "tests/support/decision_oracle.h"

namespace ringmaster::testing {
namespace {

using scheduler::Decisions;
using scheduler::JobId;

// Two racks of one node each, 4 GPUs and 8 cores per node.
topology::Cluster Small() { return ClusterBuilder().Racks(2).NodesPerRack(1).Gpus(4).CpuPerNode(8000).Build(); }

scheduler::Bind B(const topology::Cluster& c, uint32_t job, const std::string& job_name, uint32_t task,
                  uint32_t node, std::vector<int16_t> gpus) {
  scheduler::Bind b;
  b.job = JobId(job);
  b.task = task;
  b.task_name = job_name + "-worker-" + std::to_string(task);
  b.node = topology::NodeId(node);
  b.node_name = c.node(topology::NodeId(node)).name;
  b.gpus = std::move(gpus);
  return b;
}

scheduler::Eviction E(const topology::Cluster& c, uint32_t job, const std::string& job_name, uint32_t task,
                      uint32_t node, scheduler::Timestamp deadline) {
  scheduler::Eviction e;
  e.job = JobId(job);
  e.task = task;
  e.task_name = job_name + "-worker-" + std::to_string(task);
  e.node = topology::NodeId(node);
  e.node_name = c.node(topology::NodeId(node)).name;
  e.deadline = deadline;
  return e;
}

// The message of `s`, or "ok".
std::string What(const absl::Status& s) { return s.ok() ? "ok" : std::string(s.message()); }

TEST(DecisionOracle, OneGpuIndexGivenToTwoTasks) {
  const auto c = Small();
  for (int16_t second : {1, 0}) {
    DecisionOracle o(c, {});
    o.Submitted(JobId(0), JobBuilder("a").GpusPerTask(1).Build());
    o.Submitted(JobId(1), JobBuilder("b").GpusPerTask(1).Build());
    Decisions d;
    d.binds = {B(c, 0, "a", 0, 0, {0}), B(c, 1, "b", 0, 0, {second})};
    const std::string what = What(o.Apply(d, 0));
    if (second == 1) {
      EXPECT_EQ(what, "ok");
    } else {
      EXPECT_NE(what.find("GPU 0 of node-0000 holds 2000 milli"), std::string::npos) << what;
    }
  }
}

TEST(DecisionOracle, GpuSharesAddUpPerDevice) {
  const auto c = Small();
  for (int64_t second : {400, 500}) {
    DecisionOracle o(c, {});
    o.Submitted(JobId(0), JobBuilder("a").GpuShare(600).Build());
    o.Submitted(JobId(1), JobBuilder("b").GpuShare(second).Build());
    Decisions d;
    d.binds = {B(c, 0, "a", 0, 1, {2}), B(c, 1, "b", 0, 1, {2})};
    const std::string what = What(o.Apply(d, 0));
    if (second == 400) {
      EXPECT_EQ(what, "ok");
      EXPECT_EQ(o.stats().shared_gpu_peak, 2);
      EXPECT_EQ(o.stats().share_binds, 2);
    } else {
      EXPECT_NE(what.find("holds 1100 milli (2 tasks"), std::string::npos) << what;
    }
  }
}

TEST(DecisionOracle, NodeOverItsCpu) {
  const auto c = Small();
  for (int cpu : {4, 5}) {
    DecisionOracle o(c, {});
    o.Submitted(JobId(0), JobBuilder("a").Gang(2).CpuPerTask(cpu * 1000).Build());
    Decisions d;
    d.binds = {B(c, 0, "a", 0, 0, {}), B(c, 0, "a", 1, 0, {})};
    const std::string what = What(o.Apply(d, 0));
    if (cpu == 4) {
      EXPECT_EQ(what, "ok");
    } else {
      EXPECT_NE(what.find("more than its allocatable"), std::string::npos) << what;
    }
  }
}

TEST(DecisionOracle, QueueOverItsCapabilityCountingChildren) {
  const auto c = Small();
  const auto policy = PolicyFromYaml(R"(
queues:
- {name: org, capability: {gpu: 4}}
- {name: a, parent: org}
- {name: b, parent: org}
)");
  for (int gpus : {2, 3}) {
    DecisionOracle o(c, policy.queues);
    o.Submitted(JobId(0), JobBuilder("x").Queue("a").GpusPerTask(2).Build());
    o.Submitted(JobId(1), JobBuilder("y").Queue("b").GpusPerTask(gpus).Build());
    Decisions d;
    d.binds = {B(c, 0, "x", 0, 0, {0, 1})};
    d.binds.push_back(gpus == 2 ? B(c, 1, "y", 0, 1, {0, 1}) : B(c, 1, "y", 0, 1, {0, 1, 2}));
    const std::string what = What(o.Apply(d, 0));
    if (gpus == 2) {
      EXPECT_EQ(what, "ok");
    } else {
      EXPECT_NE(what.find("queue org holds"), std::string::npos) << what;
    }
  }
}

TEST(DecisionOracle, GangBelowItsMinimum) {
  const auto c = Small();
  DecisionOracle o(c, {});
  o.Submitted(JobId(0), JobBuilder("g").Gang(3).GpusPerTask(1).Build());
  Decisions d;
  d.binds = {B(c, 0, "g", 0, 0, {0}), B(c, 0, "g", 1, 0, {1}), B(c, 0, "g", 2, 1, {0})};
  ASSERT_EQ(What(o.Apply(d, 0)), "ok");
  // One member evicted at once, the others not: a partial gang runs.
  Decisions next;
  next.cycle = 2;
  next.evictions = {E(c, 0, "g", 2, 1, -1)};
  const std::string what = What(o.Apply(next, 1000));
  EXPECT_NE(what.find("gang g holds 2 members outside its range [3, 3]"), std::string::npos) << what;
}

TEST(DecisionOracle, LeaverHoldsItsGpusUntilItsDeadline) {
  const auto c = Small();
  for (scheduler::Timestamp at : {1500, 2000}) {
    DecisionOracle o(c, {});
    o.Submitted(JobId(0), JobBuilder("v").GpusPerTask(4).Build());
    o.Submitted(JobId(1), JobBuilder("p").GpusPerTask(4).Build());
    Decisions d;
    d.binds = {B(c, 0, "v", 0, 0, {0, 1, 2, 3})};
    ASSERT_EQ(What(o.Apply(d, 0)), "ok");
    Decisions evict;
    evict.evictions = {E(c, 0, "v", 0, 0, 2000)};  // a grace period until t=2000
    ASSERT_EQ(What(o.Apply(evict, 1000)), "ok");
    Decisions take;
    take.binds = {B(c, 1, "p", 0, 0, {0, 1, 2, 3})};
    const std::string what = What(o.Apply(take, at));
    if (at == 2000) {
      EXPECT_EQ(what, "ok");  // released as the cycle at its deadline starts
    } else {
      EXPECT_NE(what.find("v#0 (leaving)"), std::string::npos) << what;
    }
  }
}

TEST(DecisionOracle, ReleasedLeaverFreesAtOnce) {
  const auto c = Small();
  DecisionOracle o(c, {});
  o.Submitted(JobId(0), JobBuilder("v").GpusPerTask(4).Build());
  o.Submitted(JobId(1), JobBuilder("p").GpusPerTask(4).Build());
  Decisions d;
  d.binds = {B(c, 0, "v", 0, 0, {0, 1, 2, 3})};
  ASSERT_EQ(What(o.Apply(d, 0)), "ok");
  Decisions evict;
  evict.evictions = {E(c, 0, "v", 0, 0, 9000)};
  ASSERT_EQ(What(o.Apply(evict, 1000)), "ok");
  o.TaskReleased(JobId(0), 0);
  Decisions take;
  take.binds = {B(c, 1, "p", 0, 0, {0, 1, 2, 3})};
  EXPECT_EQ(What(o.Apply(take, 1500)), "ok");
}

TEST(DecisionOracle, NonsenseEvictionsAndBinds) {
  const auto c = Small();
  DecisionOracle o(c, {});
  o.Submitted(JobId(0), JobBuilder("a").GpusPerTask(2).Build());
  Decisions evict;
  evict.evictions = {E(c, 0, "a", 0, 0, -1)};
  EXPECT_NE(What(o.Apply(evict, 0)).find("which holds nothing"), std::string::npos);

  Decisions wrong_count;
  wrong_count.binds = {B(c, 0, "a", 0, 0, {0})};
  EXPECT_NE(What(o.Apply(wrong_count, 0)).find("gives 1 GPUs; it asks for 2"), std::string::npos);

  Decisions repeated;
  repeated.binds = {B(c, 0, "a", 0, 0, {1, 1})};
  EXPECT_NE(What(o.Apply(repeated, 0)).find("out of range or repeated"), std::string::npos);

  Decisions unknown;
  unknown.binds = {B(c, 7, "zz", 0, 0, {0})};
  EXPECT_NE(What(o.Apply(unknown, 0)).find("no such job"), std::string::npos);

  o.NodeLost("node-0001");
  Decisions lost;
  lost.binds = {B(c, 0, "a", 0, 1, {0, 1})};
  EXPECT_NE(What(o.Apply(lost, 0)).find("not a node of the cluster now"), std::string::npos);

  Decisions twice;
  twice.binds = {B(c, 0, "a", 0, 0, {0, 1})};
  ASSERT_EQ(What(o.Apply(twice, 0)), "ok");
  EXPECT_NE(What(o.Apply(twice, 0)).find("already holds"), std::string::npos);
}

TEST(DecisionOracle, StateThatDisagreesWithTheDecisions) {
  // A real engine, but the oracle is not told of a bind: the state holds a
  // task no decision (that it saw) gave a node.
  const auto c = Small();
  EngineHarness h(c);
  DecisionOracle o(c, {});
  const auto spec = JobBuilder("a").GpusPerTask(2).Build();
  o.Submitted(h.Submit(spec), spec);
  const scheduler::Decisions d = h.Cycle();
  ASSERT_EQ(d.binds.size(), 1u);
  const std::string what = What(o.CompareWithState(h.state()));
  EXPECT_TRUE(what.find("no decision gave it a node") != std::string::npos ||
              what.find("state 1000 milli, decisions 0") != std::string::npos)
      << what;
  ASSERT_EQ(What(o.Apply(d, 0)), "ok");
  EXPECT_EQ(What(o.CompareWithState(h.state())), "ok");
}

}  // namespace
}  // namespace ringmaster::testing
