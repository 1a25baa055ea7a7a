// Multi-process elastic training through the shim: four elastic_trainer
// processes train while (a) a planned shrink to 2 then a grow back to 4,
// (b) a kill -9 in the middle of an all-reduce, (c) a kill during a
// rendezvous, (d) a coordinator restart. Every run must finish with no
// duplicate or skipped sample and with the weights of the serial reference
// run within 1e-6 relative.
//
// The coordinator runs in this process (so the test can resize it, watch its
// committed position, and restart it); workers are child processes on
// 127.0.0.1 and are killed in TearDown whatever happens.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/coordinator/coordinator_service.h"
#include "tests/support/blocked.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kSamples = 1536;
constexpr int kEpochs = 2;
constexpr int kBatch = 32;
constexpr int64_t kTotal = int64_t{kSamples} * kEpochs;  // 96 steps

class ShimElastic : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("rm_shim_it_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    StartCoordinator("127.0.0.1:0");
  }

  void TearDown() override {
    for (auto& [name, pid] : pids_) {
      if (pid > 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    }
    if (server_) server_->Stop();
    if (!HasFailure()) fs::remove_all(dir_);
  }

  // Retries for a while: after a restart the old listener may linger.
  void StartCoordinator(const std::string& address) {
    server::CoordinatorOptions o;
    o.heartbeat_timeout = absl::Seconds(10);
    absl::StatusOr<std::unique_ptr<server::CoordinatorServer>> s;
    for (int i = 0; i < 50; ++i) {
      s = server::CoordinatorServer::Start(address, o, absl::Milliseconds(50));
      if (s.ok()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
  }

  std::vector<std::string> CommonArgs() {
    return {"--samples", std::to_string(kSamples), "--epochs",
            std::to_string(kEpochs), "--batch", std::to_string(kBatch),
            "--commit-every", "4"};
  }

  // Starts an elastic_trainer worker; its stderr goes to dir_/<name>.log.
  void Spawn(const std::string& name, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {ELASTIC_TRAINER_PATH, "--coordinator",
                                     server_->address(), "--job", "job",
                                     "--worker", name, "--workers", "4",
                                     "--step-delay-ms", "25", "--out",
                                     (dir_ / "result.json").string()};
    for (auto& a : CommonArgs()) args.push_back(a);
    for (auto& a : extra) args.push_back(a);
    const std::string log = (dir_ / (name + ".log")).string();
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      FILE* f = std::freopen(log.c_str(), "w", stderr);
      (void)f;
      // Do not leak this process's sockets (the coordinator's listener!)
      // into the worker: a leaked listener would swallow reconnects after a
      // coordinator restart.
      for (int fd = 3; fd < 1024; ++fd) ::close(fd);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      std::_Exit(127);
    }
    pids_[name] = pid;
  }

  // Waits for a worker to exit; returns its wait status (-1 on timeout, after
  // killing it).
  int WaitExit(const std::string& name, std::chrono::seconds timeout) {
    const pid_t pid = pids_.at(name);
    const auto deadline = Clock::now() + timeout;
    int status = 0;
    while (Clock::now() < deadline) {
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        pids_[name] = 0;
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    pids_[name] = 0;
    return -1;
  }

  void ExpectCleanExit(const std::string& name) {
    const int status = WaitExit(name, std::chrono::seconds(60));
    EXPECT_TRUE(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << name << " status " << status << "\n"
        << Log(name);
  }

  std::string Log(const std::string& name) {
    std::ifstream f(dir_ / (name + ".log"));
    return std::string(std::istreambuf_iterator<char>(f), {});
  }

  bool WaitFor(const std::function<bool(const api::JobStatus&)>& pred,
               std::chrono::seconds timeout = std::chrono::seconds(45)) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      auto job = server_->core().GetJob("job");
      if (job.ok() && pred(*job)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  bool WaitForPosition(int64_t at_least) {
    return WaitFor([&](const api::JobStatus& j) {
      return j.committed_position() >= at_least;
    });
  }

  void Resize(int n) {
    api::ResizeRequest r;
    r.set_job("job");
    r.set_workers(n);
    ASSERT_TRUE(server_->core().Resize(r).ok());
  }

  nlohmann::json Reference() {
    const std::string out = (dir_ / "reference.json").string();
    std::string cmd = std::string(ELASTIC_TRAINER_PATH) + " --reference --out " + out;
    for (auto& a : CommonArgs()) cmd += " " + a;
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    std::ifstream f(out);
    return nlohmann::json::parse(f);
  }

  // The invariants every run must end with; returns the result.
  nlohmann::json CheckResult() {
    std::ifstream f(dir_ / "result.json");
    EXPECT_TRUE(f.good()) << "no result.json";
    if (!f.good()) return {};
    nlohmann::json r = nlohmann::json::parse(f);
    nlohmann::json ref = Reference();
    EXPECT_EQ(r["duplicate_samples"], 0);
    EXPECT_EQ(r["skipped_samples"], 0);
    EXPECT_EQ(r["inconsistent_steps"], 0);
    EXPECT_EQ(r["samples_processed"], kTotal);
    EXPECT_EQ(ref["samples_processed"], kTotal);
    const auto& w = r["weights"];
    const auto& rw = ref["weights"];
    EXPECT_EQ(w.size(), rw.size());
    for (size_t k = 0; k < std::min(w.size(), rw.size()); ++k) {
      const double a = w[k], b = rw[k];
      EXPECT_LE(std::abs(a - b), 1e-6 * std::max(std::abs(b), 1e-12))
          << "weight " << k << ": " << a << " vs reference " << b;
    }
    // The training did something: loss well below the loss at w = 0.
    EXPECT_LT(double(r["final_loss"]), 0.01);
    return r;
  }

  static bool HasGeneration(const nlohmann::json& r, const std::string& reason,
                            bool rolled_back) {
    for (const auto& g : r["generations"]) {
      if (g["reason"] == reason && g["rolled_back"] == rolled_back) return true;
    }
    return false;
  }

  fs::path dir_;
  std::unique_ptr<server::CoordinatorServer> server_;
  std::map<std::string, pid_t> pids_;
};

TEST_F(ShimElastic, PlannedShrinkToTwoThenGrowToFour) {
  for (int i = 0; i < 4; ++i) Spawn("w" + std::to_string(i));
  ASSERT_TRUE(WaitForPosition(kTotal / 5));
  // Ranks of the first gang follow worker ids; a shrink keeps the lowest.
  Resize(2);  // w2 and w3 leave at a step boundary
  ExpectCleanExit("w2");
  ExpectCleanExit("w3");
  EXPECT_NE(Log("w3").find("removed"), std::string::npos);
  ASSERT_TRUE(WaitForPosition(kTotal * 2 / 5));
  Spawn("w4");
  Spawn("w5");
  ASSERT_TRUE(WaitFor([](const api::JobStatus& j) { return j.standby_size() == 2; }));
  Resize(4);
  for (const char* w : {"w0", "w1", "w4", "w5"}) ExpectCleanExit(w);
  nlohmann::json r = CheckResult();
  EXPECT_TRUE(HasGeneration(r, "planned_shrink", false)) << r.dump();
  EXPECT_TRUE(HasGeneration(r, "grow", false)) << r.dump();
  EXPECT_EQ(r["final_world_size"], 4);
}

TEST_F(ShimElastic, KillNineInTheMiddleOfAnAllReduce) {
  for (int i = 0; i < 4; ++i) Spawn("w" + std::to_string(i));
  ASSERT_TRUE(WaitForPosition(kTotal * 3 / 10));
  // Freeze w2 so that the others block inside the step's all-reduce waiting
  // for it, then kill it there. Every step sleeps 25 ms and ends in two
  // all-reduces (the gradient, then the step boundary's): a main thread
  // asleep without a context switch for 4 steps' worth is in one of them.
  ::kill(pids_["w2"], SIGSTOP);
  int stopped = 0;
  ASSERT_EQ(::waitpid(pids_["w2"], &stopped, WUNTRACED), pids_["w2"]);
  ASSERT_TRUE(WIFSTOPPED(stopped)) << "w2 status " << stopped;
  for (const char* w : {"w0", "w1", "w3"}) {
    ASSERT_TRUE(ringmaster::testing::WaitUntilBlocked(
        pids_[w], {pids_[w]}, std::chrono::milliseconds(100),
        std::chrono::seconds(8)))
        << w << " is not blocked in an all-reduce with w2 stopped\n" << Log(w);
  }
  ::kill(pids_["w2"], SIGKILL);
  EXPECT_EQ(WaitExit("w2", std::chrono::seconds(10)) & 0x7f, SIGKILL);
  for (const char* w : {"w0", "w1", "w3"}) ExpectCleanExit(w);
  nlohmann::json r = CheckResult();
  EXPECT_TRUE(HasGeneration(r, "failure", true)) << r.dump();
  EXPECT_EQ(r["final_world_size"], 3);
}

TEST_F(ShimElastic, KillDuringRendezvous) {
  // Every re-formation waits 1 s before its rendezvous, so the kill lands
  // while all members are between the new generation and a communicator.
  for (int i = 0; i < 4; ++i) {
    Spawn("w" + std::to_string(i), {"--rendezvous-delay-ms", "1000"});
  }
  ASSERT_TRUE(WaitForPosition(kTotal * 3 / 10));
  Resize(3);  // generation 2: w3 leaves, w0..w2 re-form
  ASSERT_TRUE(WaitFor([](const api::JobStatus& j) { return j.generation() == 2; }));
  // w1 has heard of generation 2 once a thread of it (the shim's preparing
  // thread, or the training thread at the boundary) sits in the 1 s delay:
  // asleep in nanosleep, without a context switch, for longer than the
  // training thread's 25 ms steps ever sleep.
  ASSERT_TRUE(ringmaster::testing::WaitForBlocked(
      pids_["w1"], {}, std::chrono::milliseconds(100), std::chrono::seconds(8),
      [](const std::vector<pid_t>& b) { return !b.empty(); },
      [](const ringmaster::testing::ThreadSample& t) {
        return t.wchan.find("nanosleep") != std::string::npos;
      }))
      << "w1 never entered the re-formation's delay\n" << Log("w1");
  ::kill(pids_["w1"], SIGKILL);
  EXPECT_EQ(WaitExit("w1", std::chrono::seconds(10)) & 0x7f, SIGKILL);
  for (const char* w : {"w0", "w2", "w3"}) ExpectCleanExit(w);
  nlohmann::json r = CheckResult();
  EXPECT_TRUE(HasGeneration(r, "failure", true)) << r.dump();
  EXPECT_EQ(r["final_world_size"], 2);
}

TEST_F(ShimElastic, CoordinatorRestart) {
  for (int i = 0; i < 4; ++i) Spawn("w" + std::to_string(i));
  ASSERT_TRUE(WaitForPosition(kTotal / 5));
  const std::string address = server_->address();
  const int64_t before = server_->core().GetJob("job")->generation();
  server_->Stop();
  server_.reset();
  // Every worker notices the loss (and trains on) before the restart.
  for (int i = 0; i < 4; ++i) {
    const std::string w = "w" + std::to_string(i);
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (Log(w).find("coordinator lost") == std::string::npos &&
           Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_NE(Log(w).find("coordinator lost"), std::string::npos)
        << w << " never noticed the coordinator's loss\n" << Log(w);
  }
  StartCoordinator(address);  // same port; a fresh, empty coordinator
  ASSERT_TRUE(WaitFor([&](const api::JobStatus& j) {
    return j.generation() > before && j.members_size() == 4;
  }));
  for (int i = 0; i < 4; ++i) ExpectCleanExit("w" + std::to_string(i));
  nlohmann::json r = CheckResult();
  EXPECT_TRUE(HasGeneration(r, "recovery", false)) << r.dump();
  EXPECT_EQ(r["final_world_size"], 4);
}

}  // namespace
}  // namespace ringmaster
