// Tests for worker_shim/elastic_state.h.
#include "worker_shim/elastic_state.h"

#include <gloo/rendezvous/prefix_store.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "tests/worker_shim/test_world.h"

namespace ringmaster::shim {
namespace {

TEST(ElasticState, CommitRestoreRoundTrip) {
  ElasticState state;
  double w[3] = {1, 2, 3};
  int64_t pos = 10;
  ASSERT_TRUE(state.Register("w", w, sizeof(w)).ok());
  ASSERT_TRUE(state.Register("pos", &pos, sizeof(pos)).ok());
  EXPECT_EQ(state.Register("w", w, sizeof(w)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(state.Restore().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(state.Commit().ok());
  w[1] = 99;
  pos = 20;
  ASSERT_TRUE(state.Restore().ok());
  EXPECT_EQ(w[1], 2);
  EXPECT_EQ(pos, 10);
  EXPECT_EQ(state.total_bytes(), sizeof(w) + sizeof(pos));
}

TEST(ElasticState, CommitFileSurvivesTheProcess) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("rm_state_" + std::to_string(::getpid())))
                               .string();
  std::remove(path.c_str());
  // A child commits, says so through a pipe and waits; it is killed with
  // SIGKILL there (no destructor, no flush at exit): the commit file must
  // hold what Commit() returned for.
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    ElasticState state(path);
    double w[2] = {4, 5};
    if (!state.Register("w", w, sizeof(w)).ok() || !state.Commit().ok()) std::_Exit(1);
    w[1] = 6;  // after the commit: never on disk
    const char ok = 'c';
    if (::write(ready[1], &ok, 1) != 1) std::_Exit(2);
    while (true) ::pause();
  }
  ::close(ready[1]);
  char said = 0;
  const ssize_t n = ::read(ready[0], &said, 1);
  ::close(ready[0]);
  ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_EQ(n, 1) << "the child did not commit; status " << status;
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  ElasticState fresh(path);
  double w[2] = {0, 0};
  ASSERT_TRUE(fresh.Register("w", w, sizeof(w)).ok());
  ASSERT_TRUE(fresh.LoadCommitFile().ok());
  EXPECT_EQ(w[0], 4);
  EXPECT_EQ(w[1], 5);
  ElasticState wrong(path);
  double big[3];
  ASSERT_TRUE(wrong.Register("w", big, sizeof(big)).ok());
  EXPECT_EQ(wrong.LoadCommitFile().code(), absl::StatusCode::kDataLoss);
  std::remove(path.c_str());
}

TEST(ElasticState, SyncBroadcastsFromTheRootWithState) {
  using testing::GlooTraits;
  GlooTraits::World world;
  std::vector<std::unique_ptr<CollectiveBackend>> b;
  for (int i = 0; i < 3; ++i) b.push_back(GlooTraits::Make(world, ""));
  std::vector<std::array<double, 2>> w = {{0, 0}, {7, 8}, {0, 0}};
  std::vector<std::function<void()>> fns;
  for (int r = 0; r < 3; ++r) {
    fns.push_back([&, r] {
      ElasticState state;
      ASSERT_TRUE(state.Register("w", w[r].data(), sizeof(w[r])).ok());
      ReformPlan plan = PlanReform({}, {"0", "1", "2"}, std::to_string(r), 1,
                                   false);
      gloo::rendezvous::PrefixStore store("1", world.store);
      ASSERT_TRUE(b[r]->Reform(plan, store).ok());
      ASSERT_TRUE(state.Sync(*b[r], /*root=*/1).ok());
    });
  }
  testing::RunRanks(fns);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(w[r][1], 8) << "rank " << r;
}

}  // namespace
}  // namespace ringmaster::shim
