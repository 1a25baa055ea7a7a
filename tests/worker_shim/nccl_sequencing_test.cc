// The NCCL backend's re-formation sequencing (worker_shim/nccl_backend.h),
// checked call by call against the fake NCCL: which NCCL functions each rank
// calls, in which order, with which exclude list and flags.
#include <gloo/rendezvous/hash_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include "tests/worker_shim/fake_nccl.h"
#include "tests/worker_shim/test_world.h"
#include "worker_shim/nccl_backend.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::shim::testing {
namespace {

using Log = std::vector<std::string>;

class NcclSequencing : public ::testing::Test {
 protected:
  NcclBackend& Backend(const std::string& name) {
    auto& b = backends_[name];
    if (!b) {
      NcclOptions o;
      o.timeout = absl::Seconds(2);
      b = std::make_unique<NcclBackend>(nccl_.Api(name), o);
    }
    return *b;
  }

  std::map<std::string, absl::Status> Reform(int64_t gen,
                                             const std::vector<std::string>& prev,
                                             const std::vector<std::string>& now,
                                             bool failure) {
    std::map<std::string, absl::Status> out;
    std::mutex mu;
    std::vector<std::function<void()>> fns;
    for (const auto& m : now) {
      NcclBackend& b = Backend(m);
      fns.push_back([&, m] {
        const bool had = std::find(prev.begin(), prev.end(), m) != prev.end();
        ReformPlan plan = PlanReform(had ? prev : std::vector<std::string>(),
                                     now, m, gen, failure);
        gloo::rendezvous::PrefixStore store(std::to_string(gen), store_);
        absl::Status s = b.Reform(plan, store);
        std::lock_guard<std::mutex> lock(mu);
        out[m] = s;
      });
    }
    RunRanks(fns);
    return out;
  }

  void FormInitial(const std::vector<std::string>& m) {
    for (const auto& [n, s] : Reform(1, {}, m, false)) ASSERT_TRUE(s.ok()) << s;
    nccl_.ClearLogs();
  }

  FakeNccl nccl_;
  gloo::rendezvous::HashStore store_;
  std::map<std::string, std::unique_ptr<NcclBackend>> backends_;
};

TEST_F(NcclSequencing, InitialFormUsesOneFreshIdAndNonBlockingInit) {
  for (const auto& [n, s] : Reform(1, {}, {"a", "b"}, false)) {
    ASSERT_TRUE(s.ok()) << s;
  }
  EXPECT_EQ(nccl_.Log("a"),
            (Log{"GetUniqueId", "InitRankConfig(n=2,rank=0,blocking=0)"}));
  EXPECT_EQ(nccl_.Log("b"), (Log{"InitRankConfig(n=2,rank=1,blocking=0)"}));
}

TEST_F(NcclSequencing, PlannedShrinkCarvesTheHealthyCommunicator) {
  FormInitial({"a", "b", "c", "d"});
  Backend("b").Abort();  // leavers drop their communicator
  Backend("d").Abort();
  nccl_.ClearLogs();
  for (const auto& [n, s] : Reform(2, {"a", "b", "c", "d"}, {"a", "c"}, false)) {
    ASSERT_TRUE(s.ok()) << s;
  }
  // Same exclude list (old ranks 1 and 3) on both survivors, default flags,
  // then the parent is aborted; no new unique id.
  const Log expected = {"Shrink(exclude=[1,3],flags=0,blocking=0)", "Abort"};
  EXPECT_EQ(nccl_.Log("a"), expected);
  EXPECT_EQ(nccl_.Log("c"), expected);
}

TEST_F(NcclSequencing, FailureRevokesThenShrinksWithAbortFlag) {
  FormInitial({"a", "b", "c"});
  nccl_.Kill("b");
  double v = 1;
  std::vector<std::function<void()>> fns;
  for (const char* n : {"a", "c"}) {
    NcclBackend& b = Backend(n);
    fns.push_back([&b, &v] {
      double x = v;
      EXPECT_ERROR(b.AllReduce(&x, 1, DataType::kFloat64, ReduceOp::kSum), absl::StatusCode::kUnavailable, "nccl allreduce: fake nccl error");
    });
  }
  RunRanks(fns);
  for (const auto& [n, s] : Reform(2, {"a", "b", "c"}, {"a", "c"}, true)) {
    ASSERT_TRUE(s.ok()) << s;
  }
  const Log expected = {"Revoke(flags=0)",
                        "Shrink(exclude=[1],flags=1,blocking=0)", "Abort"};
  EXPECT_EQ(nccl_.Log("a"), expected);
  EXPECT_EQ(nccl_.Log("c"), expected);
}

TEST_F(NcclSequencing, GrowthAlwaysBuildsAFreshCommunicator) {
  FormInitial({"a", "b"});
  for (const auto& [n, s] : Reform(2, {"a", "b"}, {"a", "b", "c"}, false)) {
    ASSERT_TRUE(s.ok()) << s;
  }
  EXPECT_EQ(nccl_.Log("a"), (Log{"Abort", "GetUniqueId",
                                 "InitRankConfig(n=3,rank=0,blocking=0)"}));
  EXPECT_EQ(nccl_.Log("b"),
            (Log{"Abort", "InitRankConfig(n=3,rank=1,blocking=0)"}));
  EXPECT_EQ(nccl_.Log("c"), (Log{"InitRankConfig(n=3,rank=2,blocking=0)"}));
}

TEST_F(NcclSequencing, FailedShrinkFallsBackToAFreshId) {
  FormInitial({"a", "b", "c"});
  Backend("c").Abort();
  nccl_.ClearLogs();
  nccl_.faults().fail_shrink = true;
  for (const auto& [n, s] : Reform(2, {"a", "b", "c"}, {"a", "b"}, false)) {
    ASSERT_TRUE(s.ok()) << s;
  }
  EXPECT_EQ(nccl_.Log("a"),
            (Log{"Shrink(exclude=[2],flags=0,blocking=0)", "Abort",
                 "GetUniqueId", "InitRankConfig(n=2,rank=0,blocking=0)"}));
}

TEST_F(NcclSequencing, SameMembersWithoutFailureKeepTheCommunicator) {
  FormInitial({"a", "b"});
  for (const auto& [n, s] : Reform(2, {"a", "b"}, {"a", "b"}, false)) {
    ASSERT_TRUE(s.ok()) << s;
  }
  EXPECT_TRUE(nccl_.Log("a").empty());
  EXPECT_TRUE(nccl_.Log("b").empty());
}

TEST_F(NcclSequencing, InitThatNeverCompletesTimesOutAndAborts) {
  nccl_.faults().init_never_completes = true;
  auto result = Reform(1, {}, {"a"}, false);
  EXPECT_EQ(result["a"].code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(nccl_.Log("a"), (Log{"GetUniqueId",
                                 "InitRankConfig(n=1,rank=0,blocking=0)",
                                 "Abort"}));
  EXPECT_FALSE(Backend("a").healthy());
}

}  // namespace
}  // namespace ringmaster::shim::testing
