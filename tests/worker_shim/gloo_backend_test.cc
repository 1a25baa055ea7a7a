// What the Gloo backend does beyond the collective contract: its full-mesh
// rendezvous can be interrupted by a newer generation, and only by a newer
// one.
#include "worker_shim/gloo_backend.h"

#include <arpa/inet.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/transport/tcp/address.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "tests/worker_shim/test_world.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::shim {
namespace {

using testing::RunRanks;

ReformPlan Plan(int64_t generation, int rank, int world_size) {
  ReformPlan p;
  p.generation = generation;
  p.rank = rank;
  p.world_size = world_size;
  return p;
}

// Calls Interrupt(newer) on `backend` until `done`: whenever the rendezvous
// reaches a point Interrupt() can act on, one of the calls lands there.
void InterruptUntil(CollectiveBackend& backend, int64_t newer,
                    const std::atomic<bool>& done) {
  while (!done.load()) {
    backend.Interrupt(newer);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

TEST(GlooBackend, NewerGenerationEndsAConnectThatWouldNeverComplete) {
  // Rank 1 is played by the test: it publishes an address nobody listens on
  // whose port sorts above rank 0's, so rank 0 is the accepting side of the
  // pair and waits for a dial that never comes. Uninterrupted, that wait
  // lasts 5 x the 60 s timeout, far past the test's limit.
  GlooOptions o;
  o.timeout = absl::Seconds(60);
  auto backend = *GlooBackend::Create(o);
  gloo::rendezvous::HashStore store;
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  peer.sin_port = 0xffff;  // compared as stored, like tcp::Pair does
  const gloo::transport::tcp::Address fake(
      reinterpret_cast<const sockaddr*>(&peer), sizeof(peer));
  store.set("1", fake.bytes());

  std::atomic<bool> done{false};
  absl::Status result;
  std::thread rank0([&] {
    result = backend->Reform(Plan(3, 0, 2), store);
    done = true;
  });
  InterruptUntil(*backend, 4, done);
  rank0.join();
  EXPECT_ERROR(result, absl::StatusCode::kUnavailable, "gloo rendezvous: interrupted by a newer generation");
  EXPECT_NE(result.message().find("interrupted"), std::string::npos)
      << result;
  EXPECT_FALSE(backend->healthy());
}

TEST(GlooBackend, SameOrOlderGenerationLeavesTheRendezvousAlone) {
  GlooOptions o;
  o.timeout = absl::Seconds(15);
  std::unique_ptr<CollectiveBackend> b[2] = {*GlooBackend::Create(o),
                                             *GlooBackend::Create(o)};
  gloo::rendezvous::HashStore store;
  std::atomic<bool> done[2] = {false, false};
  absl::Status result[2];
  std::thread interrupter([&] {
    // Generation 3 is the one forming; 2 and 3 must not disturb it.
    while (!done[0].load() || !done[1].load()) {
      for (auto& backend : b) {
        backend->Interrupt(3);
        backend->Interrupt(2);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  RunRanks({[&] {
              result[0] = b[0]->Reform(Plan(3, 0, 2), store);
              done[0] = true;
            },
            [&] {
              result[1] = b[1]->Reform(Plan(3, 1, 2), store);
              done[1] = true;
            }});
  interrupter.join();
  ASSERT_TRUE(result[0].ok()) << result[0];
  ASSERT_TRUE(result[1].ok()) << result[1];
  // And the communicator works: 1 + 2 = 3 on both ranks.
  int64_t v[2] = {1, 2};
  RunRanks({[&] {
              EXPECT_TRUE(
                  b[0]->AllReduce(&v[0], 1, DataType::kInt64, ReduceOp::kSum)
                      .ok());
            },
            [&] {
              EXPECT_TRUE(
                  b[1]->AllReduce(&v[1], 1, DataType::kInt64, ReduceOp::kSum)
                      .ok());
            }});
  EXPECT_EQ(v[0], 3);
  EXPECT_EQ(v[1], 3);
}

// Small all-reduces take bcube, large ones the ring; both must sum right in
// worlds that are a power of two, factorizable (6 = 2 x 3) or prime (5).
TEST(GlooBackend, SmallAndLargeAllReducesSumInEveryWorldSize) {
  for (const int n : {2, 5, 6}) {
    SCOPED_TRACE(n);
    GlooOptions o;
    o.timeout = absl::Seconds(15);
    std::vector<std::unique_ptr<CollectiveBackend>> b;
    for (int r = 0; r < n; ++r) b.push_back(*GlooBackend::Create(o));
    gloo::rendezvous::HashStore store;
    // 3 doubles (24 bytes, bcube) and 1024 doubles (8 KiB, ring).
    const size_t small = 3;
    const size_t large = GlooBackend::kSmallAllReduceBytes / sizeof(double) * 2;
    std::vector<std::vector<double>> s(n), l(n);
    std::vector<std::function<void()>> fns;
    for (int r = 0; r < n; ++r) {
      s[r].assign(small, r + 1.0);
      l[r].assign(large, r + 1.0);
      fns.push_back([&, r] {
        ASSERT_TRUE(b[r]->Reform(Plan(1, r, n), store).ok());
        ASSERT_TRUE(b[r]->AllReduce(s[r].data(), small, DataType::kFloat64,
                                    ReduceOp::kSum)
                        .ok());
        ASSERT_TRUE(b[r]->AllReduce(l[r].data(), large, DataType::kFloat64,
                                    ReduceOp::kSum)
                        .ok());
      });
    }
    RunRanks(fns);
    // 1 + 2 + ... + n in every slot of every rank.
    const double sum = n * (n + 1) / 2.0;
    for (int r = 0; r < n; ++r) {
      for (double v : s[r]) EXPECT_EQ(v, sum);
      for (double v : l[r]) EXPECT_EQ(v, sum);
    }
  }
}

}  // namespace
}  // namespace ringmaster::shim
