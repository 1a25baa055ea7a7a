// The contract every collective backend keeps (worker_shim/collective.h),
// run over Gloo (TCP on 127.0.0.1) and, where NCCL is built, over the NCCL
// backend driving the fake NCCL. Ranks are threads.
#include <gloo/rendezvous/prefix_store.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <string_view>
#include <thread>

#include "tests/worker_shim/test_world.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::shim::testing {
namespace {

template <typename Traits>
class CollectiveContract : public ::testing::Test {
 protected:
  using World = typename Traits::World;

  CollectiveBackend& Backend(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& b = backends_[name];
    if (!b) b = Traits::Make(world_, name);
    return *b;
  }

  // Every name in `members` re-forms into generation `gen` from `previous`
  // (empty for newcomers) on its own thread; returns their statuses.
  std::map<std::string, absl::Status> Reform(
      int64_t gen, const std::vector<std::string>& previous,
      const std::vector<std::string>& members, bool failure) {
    std::map<std::string, absl::Status> out;
    std::mutex out_mu;
    std::vector<std::function<void()>> fns;
    for (const auto& m : members) {
      CollectiveBackend& b = Backend(m);  // create before the threads start
      fns.push_back([&, m, gen] {
        const bool had = std::find(previous.begin(), previous.end(), m) !=
                         previous.end();
        ReformPlan plan = PlanReform(had ? previous : std::vector<std::string>(),
                                     members, m, gen, failure);
        gloo::rendezvous::PrefixStore store(std::to_string(gen), world_.store);
        absl::Status s = b.Reform(plan, store);
        std::lock_guard<std::mutex> lock(out_mu);
        out[m] = s;
      });
    }
    RunRanks(fns);
    return out;
  }

  // Each member all-reduces {rank + 1, 10 * (rank + 1)} (sum); returns the
  // results by member.
  std::map<std::string, std::vector<double>> SumRanks(
      const std::vector<std::string>& members) {
    std::map<std::string, std::vector<double>> out;
    std::mutex out_mu;
    std::vector<std::function<void()>> fns;
    for (size_t r = 0; r < members.size(); ++r) {
      CollectiveBackend& b = Backend(members[r]);
      fns.push_back([&, r] {
        std::vector<double> v = {double(r + 1), 10.0 * double(r + 1)};
        absl::Status s = b.AllReduce(v.data(), v.size(), DataType::kFloat64,
                                     ReduceOp::kSum);
        EXPECT_TRUE(s.ok()) << s;
        std::lock_guard<std::mutex> lock(out_mu);
        out[members[r]] = v;
      });
    }
    RunRanks(fns);
    return out;
  }

  World world_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<CollectiveBackend>> backends_;
};

#if RINGMASTER_HAVE_NCCL
using Backends = ::testing::Types<GlooTraits, FakeNcclTraits>;
#else
using Backends = ::testing::Types<GlooTraits>;
#endif
TYPED_TEST_SUITE(CollectiveContract, Backends);

TYPED_TEST(CollectiveContract, AllReduceBroadcastAndBarrier) {
  const std::vector<std::string> m = {"a", "b", "c"};
  for (const auto& [name, s] : this->Reform(1, {}, m, false)) {
    ASSERT_TRUE(s.ok()) << name << ": " << s;
  }
  // 1 + 2 + 3 = 6 and 10 + 20 + 30 = 60 on every rank.
  for (const auto& [name, v] : this->SumRanks(m)) {
    EXPECT_EQ(v, (std::vector<double>{6, 60})) << name;
  }
  std::vector<std::function<void()>> fns;
  for (size_t r = 0; r < m.size(); ++r) {
    CollectiveBackend& b = this->Backend(m[r]);
    fns.push_back([&b, r] {
      int64_t mx = static_cast<int64_t>(r) * 7;  // max of 0, 7, 14
      ASSERT_TRUE(b.AllReduce(&mx, 1, DataType::kInt64, ReduceOp::kMax).ok());
      EXPECT_EQ(mx, 14);
      float f[3] = {0.5f, 1.0f, float(r)};  // sums: 1.5, 3, 0+1+2
      ASSERT_TRUE(b.AllReduce(f, 3, DataType::kFloat32, ReduceOp::kSum).ok());
      EXPECT_FLOAT_EQ(f[0], 1.5f);
      EXPECT_FLOAT_EQ(f[2], 3.0f);
      char text[8] = {};
      if (r == 1) std::memcpy(text, "from-1", 7);
      ASSERT_TRUE(b.Broadcast(text, sizeof(text), 1).ok());
      EXPECT_STREQ(text, "from-1");
      EXPECT_TRUE(b.Barrier().ok());
      EXPECT_EQ(b.Broadcast(text, sizeof(text), 3).code(),
                absl::StatusCode::kInvalidArgument);  // no rank 3
    });
  }
  RunRanks(fns);
}

TYPED_TEST(CollectiveContract, PlannedShrinkThenGrow) {
  std::vector<std::string> g1 = {"a", "b", "c", "d"};
  for (const auto& [n, s] : this->Reform(1, {}, g1, false)) ASSERT_TRUE(s.ok());
  ASSERT_EQ(this->SumRanks(g1)["a"][0], 10);  // 1+2+3+4
  // c and d leave at a step boundary; they simply drop their communicator.
  this->Backend("c").Abort();
  this->Backend("d").Abort();
  std::vector<std::string> g2 = {"a", "b"};
  for (const auto& [n, s] : this->Reform(2, g1, g2, false)) {
    ASSERT_TRUE(s.ok()) << n << ": " << s;
  }
  EXPECT_EQ(this->SumRanks(g2)["b"], (std::vector<double>{3, 30}));
  std::vector<std::string> g3 = {"a", "b", "e"};  // e is new
  for (const auto& [n, s] : this->Reform(3, g2, g3, false)) {
    ASSERT_TRUE(s.ok()) << n << ": " << s;
  }
  EXPECT_EQ(this->SumRanks(g3)["e"], (std::vector<double>{6, 60}));
}

TYPED_TEST(CollectiveContract, DeadPeerIsAnErrorNotAHangAndSurvivorsReform) {
  std::vector<std::string> g1 = {"a", "b", "c"};
  for (const auto& [n, s] : this->Reform(1, {}, g1, false)) ASSERT_TRUE(s.ok());
  TypeParam::Kill(this->world_, "c", this->Backend("c"));
  std::vector<std::function<void()>> fns;
  for (const char* name : {"a", "b"}) {
    CollectiveBackend& b = this->Backend(name);
    fns.push_back([&b] {
      double v[4] = {1, 2, 3, 4};
      absl::Status s = b.AllReduce(v, 4, DataType::kFloat64, ReduceOp::kSum);
      EXPECT_ERROR(s, absl::StatusCode::kUnavailable, "");
      EXPECT_FALSE(b.healthy());
    });
  }
  RunRanks(fns);
  std::vector<std::string> g2 = {"a", "b"};
  for (const auto& [n, s] : this->Reform(2, g1, g2, /*failure=*/true)) {
    ASSERT_TRUE(s.ok()) << n << ": " << s;
  }
  EXPECT_EQ(this->SumRanks(g2)["a"], (std::vector<double>{3, 30}));
}

// Rule 7: a survivor must not sit in a collective once a failure generation
// is published, even when the peer it waits for is alive (here: silent).
TYPED_TEST(CollectiveContract, RevokeEndsACollectiveBlockedOnASilentPeer) {
  std::vector<std::string> g1 = {"a", "b", "c"};
  for (const auto& [n, s] : this->Reform(1, {}, g1, false)) ASSERT_TRUE(s.ok());
  // A failure generation not newer than the communicator leaves it alone.
  for (const auto& m : g1) this->Backend(m).Revoke(1);
  ASSERT_EQ(this->SumRanks(g1)["c"], (std::vector<double>{6, 60}));

  TypeParam::Silence(this->world_, true);
  std::vector<std::function<void()>> fns;
  // The threads of a and b, each set just before its collective.
  std::vector<std::atomic<pid_t>> tids(2);
  for (int i = 0; i < 2; ++i) {
    CollectiveBackend& b = this->Backend(i == 0 ? "a" : "b");
    fns.push_back([&b, &tid = tids[i]] {
      tid = ringmaster::testing::ThisThreadId();
      double v[2] = {1, 2};
      absl::Status s = b.AllReduce(v, 2, DataType::kFloat64, ReduceOp::kSum);
      EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
      EXPECT_NE(s.message().find("revoked"), std::string_view::npos) << s;
      EXPECT_FALSE(b.healthy());
    });
  }
  // c never calls; generation 2 is published after its failure, while a
  // and b are blocked in the collective (not before they enter it: a
  // communicator revoked while idle fails the next call at once, which
  // would pass this test without a revocation reaching a blocked call).
  fns.push_back([this, &tids] {
    while (tids[0] == 0 || tids[1] == 0) std::this_thread::yield();
    EXPECT_TRUE(TypeParam::WaitInCollective(this->world_, {tids[0], tids[1]}))
        << "a and b never blocked in the all-reduce";
    this->Backend("a").Revoke(2);
    this->Backend("b").Revoke(2);
  });
  RunRanks(fns);
  TypeParam::Silence(this->world_, false);
  this->Backend("c").Abort();

  std::vector<std::string> g2 = {"a", "b"};
  for (const auto& [n, s] : this->Reform(2, g1, g2, /*failure=*/true)) {
    ASSERT_TRUE(s.ok()) << n << ": " << s;
  }
  EXPECT_EQ(this->SumRanks(g2)["b"], (std::vector<double>{3, 30}));
  // The new communicator is of generation 2: a late Revoke(2) spares it.
  this->Backend("a").Revoke(2);
  this->Backend("b").Revoke(2);
  EXPECT_TRUE(this->Backend("a").healthy());
  EXPECT_EQ(this->SumRanks(g2)["a"], (std::vector<double>{3, 30}));
  // Revoked while idle: unhealthy at once, and the next collective fails
  // without waiting for anyone.
  this->Backend("a").Revoke(3);
  EXPECT_FALSE(this->Backend("a").healthy());
  double v = 1;
  absl::Status s =
      this->Backend("a").AllReduce(&v, 1, DataType::kFloat64, ReduceOp::kSum);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("revoked"), std::string_view::npos) << s;
}

TYPED_TEST(CollectiveContract, CollectivesWithoutCommunicatorAreRefused) {
  CollectiveBackend& b = this->Backend("lonely");
  double v = 1;
  EXPECT_EQ(b.AllReduce(&v, 1, DataType::kFloat64, ReduceOp::kSum).code(),
            absl::StatusCode::kFailedPrecondition);
  ReformPlan bad;
  bad.generation = 1;
  bad.rank = 2;
  bad.world_size = 2;
  gloo::rendezvous::PrefixStore store("x", this->world_.store);
  EXPECT_EQ(b.Reform(bad, store).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringmaster::shim::testing
