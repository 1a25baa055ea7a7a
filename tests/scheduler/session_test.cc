// How plugins' answers combine across tiers (session.cc), tested with small
// fake plugins registered through a test registry.
#include "scheduler/session.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "tests/support/builders.h"

namespace ringmaster::testing {
namespace {

using scheduler::Job;
using scheduler::Plugin;
using scheduler::Session;
using scheduler::Verdict;

// A plugin whose callbacks are set by the test.
class FakePlugin : public Plugin {
 public:
  explicit FakePlugin(std::string name, std::function<void(Session&)> open, bool admission_pure = false)
      : name_(std::move(name)), open_(std::move(open)), admission_pure_(admission_pure) {}
  std::string_view name() const override { return name_; }
  void OnSessionOpen(Session& s) override { open_(s); }
  bool AdmissionReadsOnlyJobAndQueues() const override { return admission_pure_; }

 private:
  std::string name_;
  std::function<void(Session&)> open_;
  bool admission_pure_;
};

class SessionTiers : public ::testing::Test {
 protected:
  SessionTiers() : state_(ClusterBuilder().NodesPerRack(2).Gpus(8).Build(), queue::QueueTree::Default()) {
    a_ = &state_.job(state_.AddJob(JobBuilder("a").Priority(1).Build(), scheduler::QueueId(0), 10));
    b_ = &state_.job(state_.AddJob(JobBuilder("b").Priority(2).Build(), scheduler::QueueId(0), 20));
  }
  // Opens a session with one plugin per entry of `tiers`.
  std::unique_ptr<Session> Open(std::vector<std::vector<std::function<void(Session&)>>> tiers) {
    plugins_.clear();
    tier_ptrs_.clear();
    for (auto& t : tiers) {
      std::vector<Plugin*> list;
      for (auto& fn : t) {
        plugins_.push_back(std::make_unique<FakePlugin>("fake" + std::to_string(plugins_.size()), fn));
        list.push_back(plugins_.back().get());
      }
      tier_ptrs_.push_back(list);
    }
    return std::make_unique<Session>(state_, clock_, 1, tier_ptrs_, buffers_);
  }
  Session::Buffers* buffers_ = nullptr;  // lent to the sessions Open makes when set
  scheduler::State state_;
  scheduler::ManualClock clock_;
  std::vector<std::unique_ptr<Plugin>> plugins_;
  std::vector<std::vector<Plugin*>> tier_ptrs_;
  Job* a_;
  Job* b_;
};

TEST_F(SessionTiers, OrderFirstDecisiveComparisonWinsThenCreationTime) {
  auto undecided = [](Session& s) { s.AddJobOrderFn("u", [](const Job&, const Job&) { return 0; }); };
  auto by_priority = [](Session& s) {
    s.AddJobOrderFn("p", [](const Job& l, const Job& r) { return r.priority() - l.priority(); });
  };
  auto reverse = [](Session& s) {
    s.AddJobOrderFn("r", [](const Job& l, const Job& r) { return l.priority() - r.priority(); });
  };
  auto s = Open({{undecided}, {by_priority}, {reverse}});
  EXPECT_TRUE(s->JobOrder(*b_, *a_)) << "tier 2 decides: higher priority first; tier 3 never asked";
  auto none = Open({{undecided}});
  EXPECT_TRUE(none->JobOrder(*a_, *b_)) << "nobody decides: earlier creation first";
}

TEST_F(SessionTiers, KeysAndComparatorsMixInTierOrder) {
  auto tie_key = [](Session& s) { s.AddJobOrderKeyFn("k", [](const Job&) { return int64_t{7}; }); };
  auto low_first = [](Session& s) {
    s.AddJobOrderFn("c", [](const Job& l, const Job& r) { return l.priority() - r.priority(); });
  };
  auto high_key = [](Session& s) {
    s.AddJobOrderKeyFn("h", [](const Job& j) { return -static_cast<int64_t>(j.priority()); });
  };
  auto s = Open({{tie_key}, {low_first}, {high_key}});
  EXPECT_TRUE(s->JobOrder(*a_, *b_)) << "equal keys pass on; the comparator decides: lower priority first";
  EXPECT_FALSE(s->JobOrder(*b_, *a_));
  auto k = Open({{high_key}, {low_first}});
  EXPECT_TRUE(k->JobOrder(*b_, *a_)) << "a key decides first: higher priority first";
}

TEST_F(SessionTiers, LentBuffersComeBackClearedAndHoldNoEarlierHooks) {
  Session::Buffers buffers;
  buffers_ = &buffers;
  auto high_first = [](Session& s) {
    s.AddJobOrderKeyFn("h", [](const Job& j) { return -static_cast<int64_t>(j.priority()); });
    s.AddPredicateFn("h", [](const scheduler::TaskRef&, scheduler::NodeId) { return Verdict::Fit(); });
  };
  auto low_first = [](Session& s) {
    s.AddJobOrderKeyFn("l", [](const Job& j) { return static_cast<int64_t>(j.priority()); });
  };
  {
    auto s = Open({{high_first}});
    EXPECT_TRUE(buffers.job_order_key.empty()) << "lent: the session holds the lists while open";
    EXPECT_TRUE(s->JobOrder(*b_, *a_));
  }
  EXPECT_TRUE(buffers.job_order_key.empty() && buffers.job_order.empty() && buffers.predicate.empty() &&
              buffers.jobs.empty())
      << "given back cleared";
  EXPECT_GE(buffers.job_order_key.capacity(), 1u) << "capacity kept for the next session";
  EXPECT_GE(buffers.jobs.capacity(), 2u);
  auto s = Open({{low_first}});
  EXPECT_TRUE(s->JobOrder(*a_, *b_)) << "only this session's key orders: lower priority first";
  EXPECT_EQ(s->jobs().size(), 2u) << "its own job list, not the last session's appended";
}

TEST_F(SessionTiers, AnAdmissionHookOfAPluginThatDoesNotSayWhatItReadsTurnsTheAdmissionMemoOff) {
  auto admits = [](Session& s) { s.AddJobEnqueueableFn("a", [](const Job&) { return Verdict::Fit(); }); };
  auto orders = [](Session& s) { s.AddJobOrderFn("o", [](const Job&, const Job&) { return 0; }); };
  EXPECT_TRUE(Open({{orders}})->admission_reads_only_job_and_queues()) << "no admission hook: nothing unknown";
  EXPECT_FALSE(Open({{orders}, {admits}})->admission_reads_only_job_and_queues())
      << "an admission hook whose plugin says nothing of what it reads";
  // The same hook from a plugin that says it reads only the job and queues.
  plugins_.clear();
  tier_ptrs_.clear();
  plugins_.push_back(std::make_unique<FakePlugin>("pure", admits, true));
  tier_ptrs_.push_back({plugins_.back().get()});
  Session pure(state_, clock_, 1, tier_ptrs_);
  EXPECT_TRUE(pure.admission_reads_only_job_and_queues());
}

TEST_F(SessionTiers, EnqueueVotesRejectBeatsPermitInATierAbstainPassesOn) {
  auto vote = [](Verdict v) {
    return [v](Session& s) { s.AddJobEnqueueableFn("v", [v](const Job&) { return v; }); };
  };
  const Verdict permit = Verdict::Fit(), reject = Verdict::Wait("queue full"), abstain = Verdict::Abstain();
  Verdict v = Open({{vote(permit), vote(reject)}})->JobEnqueueable(*a_);
  EXPECT_FALSE(v.ok());
  EXPECT_EQ(v.reason(), "queue full") << "the rejecting verdict is the answer";
  EXPECT_TRUE(Open({{vote(permit)}, {vote(reject)}})->JobEnqueueable(*a_).ok()) << "a permitting tier ends the vote";
  EXPECT_FALSE(Open({{vote(abstain)}, {vote(reject)}})->JobEnqueueable(*a_).ok());
  EXPECT_TRUE(Open({{vote(abstain)}})->JobEnqueueable(*a_).ok()) << "no decision permits";
  const Verdict composed = Verdict::Because(Verdict::Code::kWait, std::string("needs ") + "16 GPUs");
  const Verdict copy = composed;
  EXPECT_EQ(copy.reason(), "needs 16 GPUs") << "a composed reason survives a copy";
}

TEST_F(SessionTiers, ChecksAreAndScoresAdd) {
  auto ready = [](bool r) { return [r](Session& s) { s.AddJobReadyFn("r", [r](const Job&) { return r; }); }; };
  EXPECT_FALSE(Open({{ready(true)}, {ready(false)}})->JobReady(*a_));
  EXPECT_TRUE(Open({{ready(true)}, {ready(true)}})->JobReady(*a_));
  auto score = [](int64_t v) {
    return [v](Session& s) { s.AddNodeOrderFn("n", [v](const scheduler::TaskRef&, topology::NodeId) { return v; }); };
  };
  EXPECT_EQ(Open({{score(3)}, {score(4)}})->NodeOrder({a_, 0}, topology::NodeId(0)), 7);
  auto pred = [](bool ok) {
    return [ok](Session& s) {
      s.AddPredicateFn("p", [ok](const scheduler::TaskRef&, topology::NodeId) {
        return ok ? scheduler::Verdict::Fit() : scheduler::Verdict::Unschedulable("nope");
      });
    };
  };
  EXPECT_EQ(Open({{pred(true), pred(false)}})->Predicate({a_, 0}, topology::NodeId(0)).reason(), "nope");
}

TEST_F(SessionTiers, VictimsIntersectWithinTheFirstTierWithAnAnswer) {
  const scheduler::TaskRef ta{a_, 0}, tb{b_, 0};
  auto only = [](std::string name) {
    return [name](Session& s) {
      s.AddPreemptableFn("v", [name](const scheduler::TaskRef&, const std::vector<scheduler::TaskRef>& c) {
        std::vector<scheduler::TaskRef> out;
        for (const auto& t : c) {
          if (name.empty() || t.job->name() == name) out.push_back(t);
        }
        return out;
      });
    };
  };
  auto v = Open({{only(""), only("a")}, {only("b")}})->Preemptable(ta, {ta, tb});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].job->name(), "a");
  v = Open({{only("a"), only("b")}, {only("b")}})->Preemptable(ta, {ta, tb});
  ASSERT_EQ(v.size(), 1u) << "tier 1's intersection is empty, tier 2 answers";
  EXPECT_EQ(v[0].job->name(), "b");
}

// The intersection of a tier's answers equals a brute-force one whether the
// plugins keep the candidates' order (the walk) or not (the table), and
// keeps the first plugin's order. Random candidate lists over several jobs.
TEST_F(SessionTiers, VictimsIntersectionMatchesBruteForceInAnyOrder) {
  std::vector<Job*> jobs{a_, b_};
  for (int j = 0; j < 4; ++j) {
    jobs.push_back(&state_.job(state_.AddJob(JobBuilder("j" + std::to_string(j)).Gang(5).Build(),
                                             scheduler::QueueId(0), 30 + j)));
  }
  std::mt19937 rng(7);
  int tables = 0;
  for (int round = 0; round < 300; ++round) {
    std::vector<scheduler::TaskRef> candidates;
    for (Job* j : jobs) {
      for (uint32_t i = 0; i < j->tasks().size(); ++i) {
        if (rng() % 3 != 0) candidates.push_back({j, i});
      }
    }
    if (round % 4 == 3) std::shuffle(candidates.begin(), candidates.end(), rng);
    // Three plugins in one tier: each keeps a random subset, some of them
    // reordered.
    std::vector<std::vector<scheduler::TaskRef>> answers(3);
    for (auto& a : answers) {
      for (const auto& t : candidates) {
        if (rng() % 4 != 0) a.push_back(t);
      }
      if (rng() % 3 == 0) {
        std::shuffle(a.begin(), a.end(), rng);
        ++tables;
      }
    }
    std::vector<std::function<void(Session&)>> tier;
    for (const auto& a : answers) {
      tier.push_back([a](Session& s) {
        s.AddPreemptableFn("v", [a](const scheduler::TaskRef&, const std::vector<scheduler::TaskRef>&) { return a; });
      });
    }
    const auto same = [](const scheduler::TaskRef& x, const scheduler::TaskRef& y) {
      return x.job == y.job && x.index == y.index;
    };
    std::vector<scheduler::TaskRef> want;
    for (const auto& t : answers[0]) {
      bool in_all = true;
      for (size_t k = 1; k < answers.size(); ++k) {
        in_all = in_all && std::any_of(answers[k].begin(), answers[k].end(), [&](const auto& u) { return same(t, u); });
      }
      if (in_all) want.push_back(t);
    }
    const auto got = Open({tier})->Preemptable(candidates.empty() ? scheduler::TaskRef{a_, 0} : candidates[0], candidates);
    ASSERT_EQ(got.size(), want.size()) << "round " << round;
    for (size_t k = 0; k < want.size(); ++k) {
      ASSERT_TRUE(same(got[k], want[k])) << "round " << round << ", answer " << k;
    }
  }
  EXPECT_GT(tables, 50) << "the out-of-order path was exercised";
}

TEST(EnqueueAction, InvalidJobStaysPendingWithThePluginsReason) {
  // A gang whose minimum exceeds its tasks cannot even be submitted; this one
  // is rejected by its queue's capability, the next is admitted.
  auto policy = PolicyFromYaml("queues:\n- {name: tiny, capability: {gpu: 1}}\n");
  EngineHarness q(ClusterBuilder().Build(), policy);
  q.Submit(JobBuilder("two").Queue("tiny").Gang(2).GpusPerTask(1).Build());
  q.Submit(JobBuilder("one").Queue("tiny").GpusPerTask(1).Build());
  q.Cycle();
  EXPECT_EQ(q.job("two").phase(), scheduler::JobPhase::kPending);
  EXPECT_NE(q.job("two").pending_reason().find("queue 'tiny'"), std::string::npos);
  EXPECT_TRUE(q.Running("one"));
}

}  // namespace
}  // namespace ringmaster::testing
