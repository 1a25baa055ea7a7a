// Property test for preempt, reclaim, shrink and grow: seeded random clusters,
// queues, policies and a stream of jobs, node failures and releases. After
// every cycle an oracle that knows only the Decisions (binds, evictions with
// their deadlines) and the events the test itself caused recounts every GPU
// and must equal the engine's state; it does not use State::CheckInvariants.
// Also checked: GPUs per task, hard-topology domains, running gangs whole,
// generations strictly increasing, every eviction letting its preemptor
// start, no job ever taking from one it yielded to, every victim sharing a
// node with where its preemptor landed, and no GPU-less task stopped (cpu is
// never short here, so such a victim would free nothing a preemptor lacks).
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "queue/queue.h"
#include "tests/support/builders.h"

namespace ringmaster::testing {
namespace {

using scheduler::Eviction;
using scheduler::JobId;
using scheduler::JobPhase;
using scheduler::TaskState;
using scheduler::Timestamp;
using topology::NodeId;

struct Held {
  NodeId node;
  std::vector<int16_t> gpus;
  int64_t milli = 0;
  Timestamp leaving_by = -1;  // set once evicted with a grace period
};

class Oracle {
 public:
  void Bind(const scheduler::Bind& b, int64_t milli) { held_[{b.job, b.task}] = {b.node, b.gpus, milli, -1}; }
  void Evict(const Eviction& e, Timestamp now) {
    auto it = held_.find({e.job, e.task});
    if (it == held_.end()) return;
    if (e.kind != Eviction::Kind::kCancel && e.deadline > now) {
      it->second.leaving_by = e.deadline;
    } else {
      held_.erase(it);
    }
  }
  // The engine releases leavers whose deadline has come at a cycle's start.
  void Expire(Timestamp now) {
    std::erase_if(held_, [&](const auto& kv) { return kv.second.leaving_by >= 0 && kv.second.leaving_by <= now; });
  }
  void Released(JobId j, uint32_t t) { held_.erase({j, t}); }
  void JobEnded(JobId j) {
    std::erase_if(held_, [&](const auto& kv) { return kv.first.first == j; });
  }
  void NodeLost(NodeId n) {
    std::erase_if(held_, [&](const auto& kv) { return kv.second.node == n; });
  }
  // Recount per GPU and per task against the state. Empty when equal.
  std::string Compare(const scheduler::State& st) const {
    std::map<std::pair<uint32_t, int>, int64_t> gpu;
    for (const auto& [key, h] : held_) {
      for (int16_t d : h.gpus) gpu[{h.node.value(), d}] += h.milli;
      const auto& t = st.job(key.first).task(key.second);
      if (!scheduler::HoldsNode(t.state) || t.node != h.node || t.gpus != h.gpus) {
        return "task " + t.name + " differs from the decisions (state " +
               std::string(scheduler::TaskStateName(t.state)) + ")";
      }
    }
    for (uint32_t n = 0; n < st.num_nodes(); ++n) {
      const auto& used = st.node(NodeId(n)).gpu_used;
      for (int d = 0; d < static_cast<int>(used.size()); ++d) {
        auto it = gpu.find({n, d});
        const int64_t want = it == gpu.end() ? 0 : it->second;
        if (want > 1000) return "GPU given twice on node " + std::to_string(n);
        if (used[d] != want) {
          return "node " + std::to_string(n) + " GPU " + std::to_string(d) + ": state " +
                 std::to_string(used[d]) + " decisions " + std::to_string(want);
        }
      }
    }
    for (JobId id : st.active_jobs()) {
      const auto& j = st.job(id);
      for (const auto& t : j.tasks()) {
        if (scheduler::HoldsNode(t.state) && !held_.count({id, t.index})) {
          return "task " + t.name + " holds a node no decision gave it";
        }
      }
    }
    return {};
  }

 private:
  std::map<std::pair<JobId, uint32_t>, Held> held_;
};

std::string RandomPolicy(std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int grace = pick(0, 2) * 2;  // 0, 2 or 4 s
  const int cooldown = pick(0, 1) * 3;
  const int cap = pick(0, 1) * pick(1, 8);
  std::string args = "{gracePeriod: " + std::to_string(grace) + ", cooldown: " + std::to_string(cooldown) +
                     ", maxEvictionsPerCycle: " + std::to_string(cap) + "}";
  return R"(actions: "enqueue, allocate, preempt, reclaim, elastic, backfill"
configurations:
- {name: preempt, arguments: )" + args + R"(}
- {name: reclaim, arguments: )" + args + R"(}
- {name: elastic, arguments: {growIdle: )" + std::to_string(pick(0, 3)) + R"(, cooldown: )" +
         std::to_string(pick(0, 3)) + R"(}}
queues:
- {name: a, weight: 2, guarantee: {gpu: 4}}
- {name: b, weight: 1}
- {name: c, weight: 1, capability: {gpu: 24}}
)";
}

TEST(PreemptionProperty, DecisionsAloneAccountForEveryGpu) {
  int evictions = 0, shrinks = 0, grows = 0, held = 0;
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    std::mt19937 rng(seed);
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    ClusterBuilder cb;
    cb.Racks(pick(1, 3)).NodesPerRack(pick(1, 4)).Gpus(pick(1, 2) * 4);
    if (pick(0, 1)) cb.RacksPerSpine(pick(1, 2));
    EngineHarness h(cb.Build(), PolicyFromYaml(RandomPolicy(rng)), /*check_invariants=*/false);
    Oracle oracle;
    std::map<JobId, int64_t> generation;
    std::set<std::pair<JobId, JobId>> yielded;  // (victim, preemptor)
    const char* queues[] = {"a", "b", "c"};
    int next = 0;
    for (int cycle = 0; cycle < 14; ++cycle) {
      // Arrivals.
      for (int k = pick(0, 3); k > 0; --k) {
        JobBuilder jb("j" + std::to_string(next++));
        if (pick(0, 7) == 0) {  // a CPU-only job beside the GPU work
          h.Submit(jb.Gang(pick(1, 2)).Queue(queues[pick(0, 2)]).Priority(pick(0, 1)).CpuPerTask(1000).Build());
          continue;
        }
        const int gang = pick(1, 6);
        jb.Gang(gang).Queue(queues[pick(0, 2)]).Priority(pick(0, 3)).GpusPerTask(pick(1, 2) == 1 ? 1 : pick(2, 8));
        if (gang > 1 && pick(0, 1)) jb.Elastic(pick(1, gang), gang + pick(0, 3));
        if (pick(0, 3) == 0) jb.Hard(pick(0, 1));
        h.Submit(jb.Build());
      }
      const Timestamp now = h.clock().Now();
      oracle.Expire(now);
      auto d = h.Cycle();
      const auto& st = h.state();
      // Per (preemptor, victim job): whether one of the stopped tasks was on
      // a node the preemptor now holds or is held on.
      std::map<std::pair<JobId, JobId>, bool> shares_node;
      for (const auto& e : d.evictions) {
        if (e.preemptor.empty()) continue;
        const JobId p = h.engine().FindJob(e.preemptor);
        ASSERT_GT(st.job(e.job).gpu(e.task).count, 0)
            << "seed " << seed << " cycle " << cycle << ": " << st.job(e.job).name() << " holds no GPU, yet was stopped for "
            << e.preemptor;
        bool on = false;
        for (const auto& t : st.job(p).tasks()) {
          on = on || ((scheduler::HoldsNode(t.state) || t.state == TaskState::kPipelined) && t.node == e.node);
        }
        shares_node[{p, e.job}] |= on;
      }
      for (const auto& [pv, on] : shares_node) {
        ASSERT_TRUE(on) << "seed " << seed << " cycle " << cycle << ": " << st.job(pv.second).name()
                        << " was stopped for " << st.job(pv.first).name() << " on no node it landed on";
      }
      for (const auto& e : d.evictions) {
        oracle.Evict(e, now);
        evictions += e.kind == Eviction::Kind::kEvict;
        shrinks += e.kind == Eviction::Kind::kShrink;
        if (e.preemptor.empty()) continue;
        const JobId p = h.engine().FindJob(e.preemptor);
        ASSERT_FALSE(yielded.count({p, e.job}))
            << "seed " << seed << ": " << e.preemptor << " took from " << st.job(e.job).name()
            << ", a job it had yielded to";
        yielded.insert({e.job, p});
        // The preemptor starts now, or is held on the victims' GPUs.
        const auto& pj = st.job(p);
        ASSERT_TRUE(pj.phase() == JobPhase::kRunning || pj.nominated())
            << "seed " << seed << " cycle " << cycle << ": evicted for " << e.preemptor << " which did not start";
        held += pj.nominated();
      }
      for (const auto& b : d.binds) {
        const auto& j = st.job(b.job);
        ASSERT_EQ(static_cast<int>(b.gpus.size()), j.gpu(b.task).count) << "seed " << seed << " " << b.task_name;
        oracle.Bind(b, j.gpu(b.task).milli);
      }
      for (const auto& m : d.membership) {
        auto [it, first] = generation.try_emplace(m.job, m.generation);
        if (!first) {
          ASSERT_GT(m.generation, it->second) << "seed " << seed << " job " << m.job_name;
          it->second = m.generation;
        }
        grows += m.kind == scheduler::MembershipChange::Kind::kGrow;
      }
      const std::string diff = oracle.Compare(st);
      ASSERT_TRUE(diff.empty()) << "seed " << seed << " cycle " << cycle << ": " << diff;
      for (JobId id : st.active_jobs()) {
        const auto& j = st.job(id);
        if (j.phase() != JobPhase::kRunning) continue;
        ASSERT_GE(j.ReadyCount(), j.min_member()) << "seed " << seed << " job " << j.name();
        if (j.spec().topology_mode == scheduler::TopologyMode::kHard && j.spec().highest_tier <= st.cluster().num_tiers()) {
          std::set<uint32_t> domains;
          for (const auto& t : j.tasks()) {
            if (!scheduler::HoldsNode(t.state)) continue;
            domains.insert(j.spec().highest_tier == 0 ? t.node.value()
                                                      : st.cluster().DomainOf(t.node, j.spec().highest_tier).value());
          }
          ASSERT_LE(domains.size(), 1u) << "seed " << seed << " hard job " << j.name() << " spans domains";
        }
      }
      for (uint32_t q = 0; q < st.queues().size(); ++q) {
        const auto& cap = st.queues().spec(q).capability;
        if (cap) {
          ASSERT_TRUE(queue::WithinCapability(st.queue_usage(scheduler::QueueId(q)).allocated, *cap));
        }
      }
      // Events between cycles: a job ends, a leaver exits, a node fails.
      std::vector<JobId> running;
      std::vector<std::pair<JobId, uint32_t>> leaving;
      for (JobId id : st.active_jobs()) {
        const auto& j = st.job(id);
        if (j.phase() == JobPhase::kRunning) running.push_back(id);
        for (const auto& t : j.tasks()) {
          if (t.state == TaskState::kReleasing) leaving.push_back({id, t.index});
        }
      }
      if (!running.empty() && pick(0, 2) == 0) {
        const JobId j = running[pick(0, static_cast<int>(running.size()) - 1)];
        ASSERT_TRUE(h.engine().FinishJob(j, true).ok());
        oracle.JobEnded(j);
      }
      if (!leaving.empty() && pick(0, 1)) {
        const auto [j, t] = leaving[pick(0, static_cast<int>(leaving.size()) - 1)];
        if (st.job(j).task(t).state == TaskState::kReleasing) {
          ASSERT_TRUE(h.engine().TaskReleased(j, t).ok());
          oracle.Released(j, t);
        }
      }
      if (pick(0, 9) == 0) {
        const NodeId n(static_cast<uint32_t>(pick(0, static_cast<int>(st.num_nodes()) - 1)));
        if (st.node(n).schedulable) {
          ASSERT_TRUE(h.engine().FailNode(st.cluster().node(n).name).ok());
          oracle.NodeLost(n);
        }
      }
    }
  }
  // The mixes must exercise what this test is about.
  EXPECT_GT(evictions, 50);
  EXPECT_GT(shrinks, 50);
  EXPECT_GT(grows, 20);
  EXPECT_GT(held, 10);
  std::printf("whole-job evictions %d, shrinks %d, grows %d, preemptors held on releasing victims %d\n",
              evictions, shrinks, grows, held);
}

}  // namespace
}  // namespace ringmaster::testing
