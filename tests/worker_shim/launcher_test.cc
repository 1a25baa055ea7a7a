// Tests for the restart-mode launcher (worker_shim/launcher.h): two
// launchers (threads) run `sh -c` commands that record their environment;
// a resize to one worker restarts the survivor's command with the new
// generation's environment and stops the removed one.
#include "worker_shim/launcher.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "server/coordinator/coordinator_service.h"
#include "tests/worker_shim/test_world.h"

namespace ringmaster::shim {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Lines(const fs::path& p) {
  std::ifstream f(p);
  std::vector<std::string> out;
  for (std::string line; std::getline(f, line);) out.push_back(line);
  return out;
}

TEST(Launcher, RestartsTheCommandWithEachGenerationsEnvironment) {
  auto server = *server::CoordinatorServer::Start(
      "127.0.0.1:0", server::CoordinatorOptions(), absl::Milliseconds(50));
  const fs::path dir = fs::temp_directory_path() /
                       ("rm_launcher_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // Generation 1 runs until stopped; later generations finish at once.
  const std::string script =
      "echo \"$RANK $WORLD_SIZE $RINGMASTER_GENERATION $MASTER_ADDR "
      "$MASTER_PORT $LOCAL_RANK\" >> " +
      dir.string() +
      "/$RINGMASTER_WORKER.txt; "
      "if [ \"$RINGMASTER_GENERATION\" = 1 ]; then exec sleep 30; fi";
  std::vector<absl::StatusOr<int>> results(2, absl::UnknownError("unset"));
  std::vector<std::function<void()>> fns;
  for (int i = 0; i < 2; ++i) {
    fns.push_back([&, i] {
      LaunchOptions o;
      o.client.address = server->address();
      o.client.job = "launch";
      o.client.worker_id = "l" + std::to_string(i);
      o.client.desired_workers = 2;
      o.command = {"sh", "-c", script};
      o.grace = absl::Seconds(2);
      o.membership_timeout = absl::Seconds(30);
      results[i] = RunLauncher(o);
    });
  }
  std::thread resizer([&] {
    // Once both commands of generation 1 have written, shrink to one.
    for (int k = 0; k < 500; ++k) {
      if (Lines(dir / "l0.txt").size() == 1 && Lines(dir / "l1.txt").size() == 1)
        break;
      absl::SleepFor(absl::Milliseconds(20));
    }
    api::ResizeRequest r;
    r.set_job("launch");
    r.set_workers(1);
    EXPECT_TRUE(server->core().Resize(r).ok());
  });
  testing::RunRanks(fns);
  resizer.join();
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(results[i].ok()) << results[i].status();
    EXPECT_EQ(*results[i], 0);
  }
  const auto l0 = Lines(dir / "l0.txt");
  const auto l1 = Lines(dir / "l1.txt");
  ASSERT_EQ(l0.size(), 2u);
  ASSERT_EQ(l1.size(), 1u);  // removed: never restarted
  std::istringstream g1a(l0[0]), g1b(l1[0]), g2(l0[1]);
  std::string rank, world, gen, addr, port, local, port2, x;
  g1a >> rank >> world >> gen >> addr >> port >> local;
  EXPECT_EQ(rank + world + gen + addr + local, "021127.0.0.10");
  std::string r1, w1, gen1, a1, p1, lr1;
  g1b >> r1 >> w1 >> gen1 >> a1 >> p1 >> lr1;
  EXPECT_EQ(r1 + w1 + gen1 + lr1, "1211");  // same host: LOCAL_RANK 1
  EXPECT_EQ(p1, port);  // both got rank 0's MASTER_PORT
  std::string r2, w2, gen2;
  g2 >> r2 >> w2 >> gen2;
  EXPECT_EQ(r2 + w2 + gen2, "012");  // restarted alone in generation 2
  EXPECT_TRUE(server->core().GetJob("launch")->finished());
  fs::remove_all(dir);
}

TEST(Launcher, EmptyCommandIsRejected) {
  LaunchOptions o;
  o.client.address = "127.0.0.1:1";
  o.client.job = "j";
  o.client.worker_id = "w";
  EXPECT_EQ(RunLauncher(o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringmaster::shim
