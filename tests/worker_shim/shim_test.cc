// End-to-end tests of worker_shim/shim.h in one process: an in-process
// coordinator on 127.0.0.1 and several shims (threads) with Gloo backends.
#include "worker_shim/shim.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string_view>

#include "server/coordinator/coordinator_service.h"
#include "tests/support/blocked.h"
#include "tests/worker_shim/test_world.h"
#include "worker_shim/backend_factory.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::shim {
namespace {

class ShimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server::CoordinatorOptions o;
    o.heartbeat_timeout = absl::Seconds(3);
    server_ = *server::CoordinatorServer::Start("127.0.0.1:0", o,
                                                absl::Milliseconds(50));
  }

  // A coordinator that publishes a generation for every newcomer at once.
  void RestartWithoutGrowSettle() {
    server_.reset();
    server::CoordinatorOptions o;
    o.heartbeat_timeout = absl::Seconds(3);
    o.grow_settle = absl::ZeroDuration();
    server_ = *server::CoordinatorServer::Start("127.0.0.1:0", o,
                                                absl::Milliseconds(50));
  }

  // Two workers train (a committed state, then progress after it); the job
  // is resized to 4 and two new workers join 5 ms apart; everyone steps
  // until all are in a world of 4. Leaves the shims and states behind.
  void GrowByTwoNewcomersAFewMsApart();
  std::vector<std::unique_ptr<Shim>> grown_;
  std::vector<double> grown_state_;

  std::unique_ptr<Shim> MakeShim(
      const std::string& worker, int desired,
      std::function<void(const api::MembershipUpdate&)> on_reform_start = {}) {
    ShimOptions o;
    o.on_reform_start = std::move(on_reform_start);
    o.client.address = server_->address();
    o.client.job = "job";
    o.client.worker_id = worker;
    o.client.desired_workers = desired;
    o.client.heartbeat_interval = absl::Milliseconds(200);
    o.membership_timeout = absl::Seconds(20);
    auto backend = MakeBackend("gloo", absl::Seconds(10));
    return *Shim::Create(o, *std::move(backend));
  }

  absl::Status Resize(int n) {
    api::ResizeRequest r;
    r.set_job("job");
    r.set_workers(n);
    return server_->core().Resize(r).status();
  }

  std::unique_ptr<server::CoordinatorServer> server_;
};

TEST_F(ShimTest, StartSyncsStateFromNobodyThenAllReduces) {
  std::vector<std::unique_ptr<Shim>> shims;
  for (int i = 0; i < 3; ++i) shims.push_back(MakeShim("w" + std::to_string(i), 3));
  std::vector<std::function<void()>> fns;
  for (int i = 0; i < 3; ++i) {
    fns.push_back([&, i] {
      Shim& s = *shims[i];
      ASSERT_TRUE(s.Start().ok());
      EXPECT_EQ(s.generation(), 1);
      EXPECT_EQ(s.world_size(), 3);
      // The rendezvous is one KvSet and one KvWait for both peers' keys,
      // however many peers; and its phases come in order.
      const ReformRecord& r = s.reforms().back();
      EXPECT_EQ(r.kv_rpcs, 2);
      EXPECT_GT(r.received_unix_us, 0);
      EXPECT_LE(r.published_unix_us, r.received_unix_us);
      EXPECT_LE(r.boundary_unix_us, r.rendezvous_unix_us);
      EXPECT_LE(r.rendezvous_unix_us, r.formed_unix_us);
      EXPECT_LE(r.formed_unix_us, r.synced_unix_us);
      double v = s.rank() + 1;
      ASSERT_TRUE(s.AllReduce(&v, 1, DataType::kFloat64, ReduceOp::kSum).ok());
      EXPECT_EQ(v, 6);
      auto b = s.StepBoundary();
      ASSERT_TRUE(b.ok());
      EXPECT_EQ(*b, Shim::Boundary::kContinue);
    });
  }
  testing::RunRanks(fns);
}

TEST_F(ShimTest, PlannedShrinkAtStepBoundaryKeepsStateWithoutRollback) {
  std::vector<std::unique_ptr<Shim>> shims;
  std::vector<double> state(3, 0);
  for (int i = 0; i < 3; ++i) {
    shims.push_back(MakeShim("w" + std::to_string(i), 3));
    ASSERT_TRUE(shims[i]->state().Register("x", &state[i], sizeof(double)).ok());
  }
  std::atomic<int> removed{0};
  std::vector<std::function<void()>> fns;
  for (int i = 0; i < 3; ++i) {
    fns.push_back([&, i] {
      Shim& s = *shims[i];
      ASSERT_TRUE(s.Start().ok());
      ASSERT_TRUE(s.Commit(0, 0).ok());  // committed x = 0
      state[i] = 5;                      // progress after the commit
      ASSERT_TRUE(s.Barrier().ok());
      if (s.rank() == 0) {
        ASSERT_TRUE(Resize(2).ok());
      }
      // Everyone agrees on the new generation at the same boundary.
      absl::StatusOr<Shim::Boundary> b;
      do {
        b = s.StepBoundary();
        ASSERT_TRUE(b.ok()) << b.status();
      } while (*b == Shim::Boundary::kContinue);
      if (*b == Shim::Boundary::kRemoved) {
        ++removed;
        ASSERT_TRUE(s.Leave(false).ok());
        return;
      }
      EXPECT_EQ(s.world_size(), 2);
      EXPECT_EQ(state[i], 5);  // planned: no rollback
      EXPECT_FALSE(s.reforms().back().rolled_back);
    });
  }
  testing::RunRanks(fns);
  EXPECT_EQ(removed.load(), 1);
}

TEST_F(ShimTest, PlannedShrinkRendezvousRunsAheadOfTheStepBoundary) {
  // The survivors' rendezvous into generation 2 must begin before they reach
  // the step boundary: each survivor waits, before its boundary, until its
  // re-formation into generation 2 has begun. Done synchronously at the
  // boundary, that never happens and the wait fails.
  constexpr int kWorkers = 3;
  std::vector<std::unique_ptr<Shim>> shims;
  std::vector<double> state(kWorkers, 0);
  std::atomic<int64_t> started_us[kWorkers] = {0, 0, 0};
  for (int i = 0; i < kWorkers; ++i) {
    shims.push_back(MakeShim(
        "w" + std::to_string(i), kWorkers,
        [&started_us, i](const api::MembershipUpdate& u) {
          if (u.generation() == 2) {
            started_us[i] = absl::ToUnixMicros(absl::Now());
          }
        }));
    ASSERT_TRUE(shims[i]->state().Register("x", &state[i], sizeof(double)).ok());
  }
  std::vector<std::function<void()>> fns;
  for (int i = 0; i < kWorkers; ++i) {
    fns.push_back([&, i] {
      Shim& s = *shims[i];
      ASSERT_TRUE(s.Start().ok());
      ASSERT_TRUE(s.Commit(0, 0).ok());
      state[i] = 5 + s.rank();  // progress after the commit
      ASSERT_TRUE(s.Barrier().ok());
      if (s.rank() == 0) {
        ASSERT_TRUE(Resize(2).ok());
      }
      const bool leaving = s.rank() == 2;  // a shrink keeps the lowest ranks
      const absl::Time give_up = absl::Now() + absl::Seconds(20);
      while (s.client().LatestGeneration() < 2 ||
             (!leaving && started_us[i].load() == 0)) {
        ASSERT_LT(absl::Now(), give_up)
            << "rank " << s.rank() << " did not start re-forming before its "
            << "step boundary";
        absl::SleepFor(absl::Milliseconds(1));
      }
      // The old communicator still serves the step, the leaving rank too.
      double v = 1;
      ASSERT_TRUE(s.AllReduce(&v, 1, DataType::kFloat64, ReduceOp::kSum).ok());
      EXPECT_EQ(v, 3);
      auto b = s.StepBoundary();
      ASSERT_TRUE(b.ok()) << b.status();
      if (leaving) {
        EXPECT_EQ(*b, Shim::Boundary::kRemoved);
        ASSERT_TRUE(s.Leave(false).ok());
        return;
      }
      ASSERT_EQ(*b, Shim::Boundary::kReformed);
      EXPECT_EQ(s.generation(), 2);
      EXPECT_EQ(s.world_size(), 2);
      const ReformRecord& r = s.reforms().back();
      EXPECT_TRUE(r.prepared);
      EXPECT_FALSE(r.rolled_back);
      EXPECT_LE(started_us[i].load(), r.boundary_unix_us);
      EXPECT_LE(r.rendezvous_unix_us, r.formed_unix_us);
      EXPECT_EQ(r.kv_rpcs, 2);
      EXPECT_EQ(state[i], 5);  // synced from rank 0, no rollback
      v = 1;
      ASSERT_TRUE(s.AllReduce(&v, 1, DataType::kFloat64, ReduceOp::kSum).ok());
      EXPECT_EQ(v, 2);
    });
  }
  testing::RunRanks(fns);
}

void ShimTest::GrowByTwoNewcomersAFewMsApart() {
  constexpr int kWorkers = 4;
  std::vector<std::unique_ptr<Shim>>& shims = grown_;
  std::vector<double>& state = grown_state_;
  shims.resize(kWorkers);
  state.assign(kWorkers, 0);
  auto make = [&](int i) {
    shims[i] = MakeShim("w" + std::to_string(i), 2);
    ASSERT_TRUE(
        shims[i]->state().Register("x", &state[i], sizeof(double)).ok());
  };
  make(0);
  make(1);
  std::atomic<int> started{0};
  // Steps until every worker is in a world of 4, then one all-reduce.
  auto train = [&](int i) {
    Shim& s = *shims[i];
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (s.world_size() < kWorkers) {
      ASSERT_LT(absl::Now(), give_up) << "w" << i << " never saw 4 workers";
      double v = 1;
      absl::Status st = s.AllReduce(&v, 1, DataType::kFloat64, ReduceOp::kSum);
      absl::StatusOr<Shim::Boundary> b =
          st.ok() ? s.StepBoundary() : s.Recover(std::string(st.message()));
      ASSERT_TRUE(b.ok()) << b.status();
      ASSERT_NE(*b, Shim::Boundary::kRemoved);
      absl::SleepFor(absl::Milliseconds(10));  // the step's compute
    }
    double v = 1;
    ASSERT_TRUE(s.AllReduce(&v, 1, DataType::kFloat64, ReduceOp::kSum).ok());
    EXPECT_EQ(v, kWorkers);
  };
  std::vector<std::function<void()>> fns;
  for (int i = 0; i < 2; ++i) {
    fns.push_back([&, i] {
      Shim& s = *shims[i];
      ASSERT_TRUE(s.Start().ok());
      ASSERT_TRUE(s.Commit(1, 1).ok());
      state[i] = 5;  // progress after the commit: a rollback would lose it
      ++started;
      train(i);
    });
  }
  fns.push_back([&] {
    while (started.load() < 2) absl::SleepFor(absl::Milliseconds(1));
    ASSERT_TRUE(Resize(kWorkers).ok());  // nobody to grow with yet
    absl::SleepFor(absl::Milliseconds(100));
    make(2);
    absl::SleepFor(absl::Milliseconds(5));
    make(3);
    std::vector<std::function<void()>> newcomers;
    for (int i = 2; i < kWorkers; ++i) {
      newcomers.push_back([&, i] {
        ASSERT_TRUE(shims[i]->Start().ok());
        train(i);
      });
    }
    testing::RunRanks(newcomers);
  });
  testing::RunRanks(fns);
  for (int i = 0; i < kWorkers; ++i) {
    ASSERT_NE(shims[i], nullptr);
    SCOPED_TRACE("w" + std::to_string(i));
    EXPECT_EQ(shims[i]->world_size(), kWorkers);
    EXPECT_EQ(state[i], 5);  // no rollback; the newcomers got it by sync
    for (const ReformRecord& r : shims[i]->reforms()) {
      EXPECT_FALSE(r.rolled_back) << "generation " << r.generation;
    }
  }
}

// Two new workers joining a grown job a few ms apart enter one generation
// (the coordinator's grow settle window): the members re-form once.
TEST_F(ShimTest, TwoNewcomersAFewMsApartCostOneReformationWithoutRollback) {
  GrowByTwoNewcomersAFewMsApart();
  for (const auto& s : grown_) EXPECT_EQ(s->generation(), 2);
  ASSERT_EQ(grown_[0]->reforms().size(), 2u);  // initial, then one grow
  EXPECT_EQ(grown_[0]->reforms().back().reason, api::REASON_GROW);
}

// Published one generation per newcomer, the members hear of the second
// while they re-form into the first (or prepare it), which the second
// supersedes: the first newcomer, already formed into it, fails there, and
// everyone re-forms into the second. That is a planned change, not a
// failure: no rollback. (It used to roll every member back to its commit.)
TEST_F(ShimTest, NewcomerGenerationSupersededByTheNextCostsNoRollback) {
  RestartWithoutGrowSettle();
  GrowByTwoNewcomersAFewMsApart();
  for (const auto& s : grown_) EXPECT_EQ(s->generation(), 3);
}

TEST_F(ShimTest, PeerCrashRollsSurvivorsBackToTheirCommit) {
  std::vector<std::unique_ptr<Shim>> shims;
  std::vector<double> state(3, 0);
  for (int i = 0; i < 3; ++i) {
    shims.push_back(MakeShim("w" + std::to_string(i), 3));
    ASSERT_TRUE(shims[i]->state().Register("x", &state[i], sizeof(double)).ok());
  }
  std::vector<std::function<void()>> fns;
  for (int i = 0; i < 3; ++i) {
    fns.push_back([&, i] {
      Shim& s = *shims[i];
      ASSERT_TRUE(s.Start().ok());
      state[i] = 1;
      ASSERT_TRUE(s.Commit(1, 1).ok());
      state[i] = 2;  // uncommitted
      ASSERT_TRUE(s.Barrier().ok());
      if (i == 2) {
        shims[i].reset();  // "crash": sockets and stream close
        return;
      }
      double v = 1;
      absl::Status st;
      for (int k = 0; k < 100 && st.ok(); ++k) {
        st = s.AllReduce(&v, 1, DataType::kFloat64, ReduceOp::kSum);
      }
      ASSERT_ERROR(st, absl::StatusCode::kUnavailable, "gloo allreduce: ");
      auto b = s.Recover(std::string(st.message()));
      ASSERT_TRUE(b.ok()) << b.status();
      EXPECT_EQ(*b, Shim::Boundary::kReformed);
      EXPECT_EQ(s.world_size(), 2);
      EXPECT_EQ(state[i], 1);  // rolled back to the commit
      EXPECT_TRUE(s.reforms().back().rolled_back);
      v = 1;
      ASSERT_TRUE(s.AllReduce(&v, 1, DataType::kFloat64, ReduceOp::kSum).ok());
      EXPECT_EQ(v, 2);
    });
  }
  testing::RunRanks(fns);
}

// A failure generation revokes the communicator in use: survivors blocked
// in a collective on a peer that is alive but will never join (its sockets
// stay open, so Gloo sees nothing wrong) fail at once with "revoked" rather
// than after the backend's 10 s timeout, and re-form without it.
TEST_F(ShimTest, FailureGenerationRevokesACollectiveWaitingOnALivePeer) {
  std::vector<std::unique_ptr<Shim>> shims;
  for (int i = 0; i < 3; ++i) shims.push_back(MakeShim("w" + std::to_string(i), 3));
  {
    std::vector<std::function<void()>> start;
    for (int i = 0; i < 3; ++i) {
      start.push_back([&, i] { ASSERT_TRUE(shims[i]->Start().ok()); });
    }
    testing::RunRanks(start);
  }
  std::vector<std::function<void()>> fns;
  // The threads of w0 and w1, each set just before its collective.
  std::vector<std::atomic<pid_t>> tids(2);
  for (int i = 0; i < 2; ++i) {
    fns.push_back([&, i] {
      Shim& s = *shims[i];
      double v = 1;
      tids[i] = ringmaster::testing::ThisThreadId();
      absl::Status st = s.AllReduce(&v, 1, DataType::kFloat64, ReduceOp::kSum);
      // The revocation, not Gloo's timeout (10 s here).
      EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
      EXPECT_NE(st.message().find("revoked"), std::string_view::npos) << st;
      auto b = s.Recover(std::string(st.message()));
      ASSERT_TRUE(b.ok()) << b.status();
      EXPECT_EQ(*b, Shim::Boundary::kReformed);
      EXPECT_EQ(s.world_size(), 2);
      v = 1;
      ASSERT_TRUE(s.AllReduce(&v, 1, DataType::kFloat64, ReduceOp::kSum).ok());
      EXPECT_EQ(v, 2);
    });
  }
  // w2 stays connected and silent; once w0 and w1 are blocked in the
  // all-reduce it is reported failed. The job's target becomes 2 at once,
  // so that w2 (still running, it rejoins as a standby) is not taken back in.
  fns.push_back([&] {
    while (tids[0] == 0 || tids[1] == 0) absl::SleepFor(absl::Milliseconds(1));
    EXPECT_TRUE(ringmaster::testing::WaitUntilBlocked(
        ::getpid(), {tids[0], tids[1]}, std::chrono::milliseconds(50),
        std::chrono::seconds(8)))
        << "w0 and w1 never blocked in the all-reduce";
    auto g = shims[2]->client().ReportFailure(shims[2]->generation(), "w2",
                                              "stuck");
    EXPECT_TRUE(g.ok()) << g.status();
    EXPECT_TRUE(Resize(2).ok());
  });
  testing::RunRanks(fns);
  shims[2].reset();
}

TEST_F(ShimTest, UnknownBackendAndMissingJobAreErrors) {
  EXPECT_EQ(MakeBackend("mpi", absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  ShimOptions o;
  o.client.address = server_->address();
  EXPECT_EQ(Shim::Create(o, *MakeBackend("gloo", absl::Seconds(1)))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringmaster::shim
