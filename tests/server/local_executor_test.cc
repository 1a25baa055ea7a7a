// The local executor's lifecycle (server/executor/local_executor.h) on a real engine
// (binds confirmed by the executor, as in serve): fake processes driven by
// hand, then real ones (`sh -c`) through the system launcher.
#include "server/executor/local_executor.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "plugins/registry.h"
#include "scheduler/job_file.h"
#include "server/admin/admin_convert.h"
#include "tests/support/builders.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::server {
namespace {

using scheduler::JobPhase;
using scheduler::TaskState;
using namespace ringmaster::testing;

// Processes that exist only in the test: it decides when they exit.
class FakeLauncher : public ProcessLauncher {
 public:
  absl::StatusOr<pid_t> Start(const ProcessSpec& spec) override {
    if (fail_next) {
      fail_next = false;
      return absl::InternalError("no such program");
    }
    const pid_t pid = next_++;
    specs[pid] = spec;
    alive.insert(pid);
    return pid;
  }
  void Signal(pid_t pid, int sig) override { signals.push_back({pid, sig}); }
  std::vector<ProcessExit> Reap() override {
    auto out = std::move(exits);
    exits.clear();
    for (const auto& x : out) alive.erase(x.pid);
    return out;
  }
  // Processes it did not start (a previous executor's) are adopted while
  // alive with the start time they had.
  bool Adopt(pid_t pid, uint64_t start_time, const std::string&) override {
    if (!alive.contains(pid) || StartTimeOf(pid) != start_time) return false;
    adopted.insert(pid);
    return true;
  }
  uint64_t StartTimeOf(pid_t pid) override { return alive.contains(pid) ? 10 * static_cast<uint64_t>(pid) : 0; }
  void Exit(pid_t pid, int code) { exits.push_back({pid, code, 0, false}); }
  void Kill(pid_t pid, int sig) { exits.push_back({pid, 0, sig, true}); }
  // The pid running `task`.
  pid_t Of(const std::string& task) const {
    for (const auto& [pid, s] : specs) {
      if (alive.contains(pid) && std::find(s.argv.begin(), s.argv.end(), task) != s.argv.end()) return pid;
    }
    return 0;
  }

  std::map<pid_t, ProcessSpec> specs;
  std::set<pid_t> alive;
  std::vector<ProcessExit> exits;
  std::vector<std::pair<pid_t, int>> signals;
  std::set<pid_t> adopted;
  bool fail_next = false;

 private:
  pid_t next_ = 1000;
};

class ExecutorTest : public ::testing::Test {
 protected:
  ExecutorTest() : registry_(plugins::BuiltinRegistry()) {
    scheduler::EngineOptions eo;
    eo.auto_confirm_binds = false;
    eo.restart_grace_ms = 3000;  // as serve sets it
    auto e = scheduler::Engine::Create(ClusterBuilder().NodesPerRack(1).Gpus(4).Build(), PolicyFromYaml(R"(actions: "enqueue, allocate, preempt, elastic, backfill"
configurations:
- name: preempt
  arguments: {gracePeriod: 10, cooldown: 0}
- name: elastic
  arguments: {growIdle: 0, cooldown: 0}
)"), registry_, clock_, eo);
    EXPECT_TRUE(e.ok()) << e.status();
    engine_ = *std::move(e);
    LocalExecutorOptions o = Options();
    o.shrink_term_before_ms = 2000;
    MakeExecutor(o);
  }
  static LocalExecutorOptions Options() {
    LocalExecutorOptions o;
    o.ringmaster = "/opt/ringmaster";
    o.coordinator = "127.0.0.1:7070";
    o.kill_after_ms = 3000;
    return o;
  }
  // An executor with `o` in place of the fixture's, its events to events_.
  void MakeExecutor(LocalExecutorOptions o) {
    executor_ = std::make_unique<LocalExecutor>(*engine_, clock_, launcher_, std::move(o),
                                                [this](scheduler::JobId, const std::string& ev, const std::string&) {
                                                  events_.push_back(ev);
                                                });
  }
  scheduler::JobId Submit(scheduler::JobSpec spec, std::vector<std::string> command = {"train", "--fast"}) {
    spec.command = std::move(command);
    auto id = engine_->SubmitJob(spec);
    EXPECT_TRUE(id.ok()) << id.status();
    return *id;
  }
  scheduler::Decisions Cycle() {
    auto d = engine_->RunCycle();
    executor_->OnCycle(d);
    return d;
  }
  const scheduler::Job& Job(scheduler::JobId id) { return engine_->state().job(id); }
  int Count(scheduler::JobId id, TaskState s) {
    int n = 0;
    for (const auto& t : Job(id).tasks()) n += t.state == s;
    return n;
  }

  scheduler::PluginRegistry registry_;
  scheduler::ManualClock clock_{1'000'000};
  std::unique_ptr<scheduler::Engine> engine_;
  FakeLauncher launcher_;
  std::unique_ptr<LocalExecutor> executor_;
  std::vector<std::string> events_;
};

TEST_F(ExecutorTest, BindStartsTheCommandUnderTheShimAndTheTaskRuns) {
  const auto id = Submit(JobBuilder("train").Gang(2).GpusPerTask(1).Build());
  Cycle();
  ASSERT_EQ(launcher_.specs.size(), 2u);
  EXPECT_EQ(Count(id, TaskState::kRunning), 2) << "bound and started by the executor";
  const ProcessSpec& s = launcher_.specs.begin()->second;
  const std::vector<std::string> head = {"/opt/ringmaster", "shim", "run", "--mode", "inprocess", "--coordinator",
                                         "127.0.0.1:7070", "--job", "train", "--worker"};
  ASSERT_GT(s.argv.size(), head.size());
  EXPECT_TRUE(std::equal(head.begin(), head.end(), s.argv.begin()));
  EXPECT_TRUE(s.argv[head.size()] == Job(id).task(0).name || s.argv[head.size()] == Job(id).task(1).name)
      << "the worker id is the engine's task name, not " << s.argv[head.size()];
  ASSERT_GE(s.argv.size(), 3u);
  EXPECT_EQ(s.argv[s.argv.size() - 3], "--");
  EXPECT_EQ(s.argv[s.argv.size() - 2], "train");
  EXPECT_EQ(s.argv.back(), "--fast");
  bool gpus = false;
  for (const auto& [k, v] : s.env) gpus |= k == "CUDA_VISIBLE_DEVICES" && !v.empty();
  EXPECT_TRUE(gpus);
}

TEST_F(ExecutorTest, JobsWithoutACommandAreNotRun) {
  const auto id = Submit(JobBuilder("plain").Build(), {});
  Cycle();
  EXPECT_TRUE(launcher_.specs.empty());
  EXPECT_EQ(Count(id, TaskState::kBinding), 1) << "left to the admin service";
}

TEST_F(ExecutorTest, AProcessThatCannotStartFailsItsBind) {
  launcher_.fail_next = true;
  const auto id = Submit(JobBuilder("bad").Build());
  Cycle();
  EXPECT_EQ(Count(id, TaskState::kPending), 1) << "the gang waits again";
  EXPECT_EQ(events_, (std::vector<std::string>{"start_failed"}));
}

TEST_F(ExecutorTest, EveryTaskExitingZeroFinishesTheJob) {
  const auto id = Submit(JobBuilder("train").Gang(2).GpusPerTask(1).Build());
  Cycle();
  launcher_.Exit(launcher_.Of(Job(id).task(0).name), 0);
  executor_->Poll();
  EXPECT_EQ(Job(id).phase(), JobPhase::kRunning) << "one task is still running";
  launcher_.Exit(launcher_.Of(Job(id).task(1).name), 0);
  executor_->Poll();
  EXPECT_EQ(Job(id).phase(), JobPhase::kCompleted);
  EXPECT_EQ(events_, (std::vector<std::string>{"finished"}));
}

TEST_F(ExecutorTest, ATaskKilledAfterItsJobFinishedEndsItAsFinished) {
  // The workers told the coordinator the job finished; one is killed before
  // it exits (chaos seed 60776282: the job was restarted, and its new
  // workers, refused by the coordinator, failed and restarted it forever).
  std::set<std::string> finished;
  LocalExecutorOptions o = Options();
  o.job_finished = [&finished](const std::string& job) { return finished.contains(job); };
  MakeExecutor(o);
  const auto id = Submit(JobBuilder("train").Gang(2).GpusPerTask(1).Build());
  Cycle();
  ASSERT_EQ(Count(id, TaskState::kRunning), 2);
  finished.insert("train");
  launcher_.Kill(launcher_.Of(Job(id).task(0).name), SIGKILL);
  executor_->Poll();
  EXPECT_EQ(Job(id).phase(), JobPhase::kRunning) << "the other task is still running";
  EXPECT_EQ(Count(id, TaskState::kRunning), 2) << "no task failed";
  launcher_.Exit(launcher_.Of(Job(id).task(1).name), 0);
  executor_->Poll();
  EXPECT_EQ(Job(id).phase(), JobPhase::kCompleted);
  EXPECT_EQ(events_, (std::vector<std::string>{"finished"}));
}

TEST_F(ExecutorTest, ATaskKilledBeforeItsJobFinishedFailsIt) {
  // The same kill while the job is not finished is a failed task.
  const auto id = Submit(JobBuilder("train").Gang(2).GpusPerTask(1).Build());
  Cycle();
  launcher_.Kill(launcher_.Of(Job(id).task(0).name), SIGKILL);
  executor_->Poll();
  EXPECT_EQ(events_, (std::vector<std::string>{"task_failed"}));
}

TEST_F(ExecutorTest, ACrashOfAnElasticJobAboveItsMinimumRunsOnSmaller) {
  const auto id = Submit(JobBuilder("el").Gang(4).GpusPerTask(1).Elastic(2, 4).Build());
  Cycle();
  ASSERT_EQ(Count(id, TaskState::kRunning), 4);
  launcher_.Exit(launcher_.Of(Job(id).task(2).name), 3);
  executor_->Poll();
  EXPECT_EQ(Count(id, TaskState::kRunning), 3);
  EXPECT_EQ(Job(id).phase(), JobPhase::kRunning);
  EXPECT_EQ(events_, (std::vector<std::string>{"task_failed"}));
  auto d = engine_->RunCycle();
  bool failure = false;
  for (const auto& m : d.membership) {
    if (m.kind == scheduler::MembershipChange::Kind::kFailure) {
      failure = true;
      EXPECT_EQ(m.members.size(), 3u);
    }
  }
  EXPECT_TRUE(failure) << "a failure membership change for the coordinator";
}

TEST_F(ExecutorTest, ACrashOfAGangBelowItsMinimumRestartsItWhole) {
  const auto id = Submit(JobBuilder("gang").Gang(2).GpusPerTask(1).Build());
  Cycle();
  const pid_t survivor = launcher_.Of(Job(id).task(1).name);
  launcher_.Kill(launcher_.Of(Job(id).task(0).name), SIGSEGV);
  executor_->Poll();
  EXPECT_NE(Job(id).phase(), JobPhase::kRunning);
  // The survivor still runs: it is Releasing, its GPU is not free.
  EXPECT_EQ(Count(id, TaskState::kReleasing), 1);
  // The engine evicts it with its next decisions: the survivor is stopped,
  // and the gang does not start again while it runs (its GPU would be
  // shared by two processes).
  auto d = Cycle();
  EXPECT_TRUE(d.binds.empty());
  bool stopped = false;
  for (const auto& [pid, sig] : launcher_.signals) stopped |= pid == survivor && sig == SIGTERM;
  executor_->Poll();
  for (const auto& [pid, sig] : launcher_.signals) stopped |= pid == survivor && sig == SIGTERM;
  EXPECT_TRUE(stopped);
  clock_.Advance(1000);
  Cycle();
  EXPECT_EQ(executor_->started(), 2) << "no new process while the survivor runs";
  EXPECT_EQ(launcher_.alive.size(), 1u);
  launcher_.Kill(survivor, SIGTERM);
  executor_->Poll();
  EXPECT_EQ(Count(id, TaskState::kPending), 2) << "released once its process is gone";
  // And it starts again, whole, as new processes.
  for (int i = 0; i < 3 && Count(id, TaskState::kRunning) < 2; ++i) {
    clock_.Advance(1000);
    Cycle();
  }
  EXPECT_EQ(Count(id, TaskState::kRunning), 2);
  EXPECT_EQ(executor_->started(), 4);
}

TEST_F(ExecutorTest, ShrunkTaskLeavesByItselfOrIsTermedThenKilledAtTheDeadline) {
  const auto el = Submit(JobBuilder("el").Gang(4).GpusPerTask(1).Elastic(2, 4).Build());
  Cycle();
  Submit(JobBuilder("hp").Gang(2).GpusPerTask(1).Priority(100).Build(), {"hp"});
  const auto d = Cycle();
  ASSERT_EQ(d.evictions.size(), 2u);
  const scheduler::Timestamp deadline = d.evictions[0].deadline;
  ASSERT_EQ(deadline, clock_.Now() + 10'000);
  const pid_t polite = launcher_.Of(d.evictions[0].task_name);
  const pid_t stubborn = launcher_.Of(d.evictions[1].task_name);
  executor_->Poll();
  EXPECT_TRUE(launcher_.signals.empty()) << "a shrunk task is first left to leave at its step boundary";
  // One leaves by itself (the coordinator told it): released at once.
  launcher_.Exit(polite, 0);
  executor_->Poll();
  EXPECT_EQ(Job(el).task(d.evictions[0].task).state, TaskState::kPending);
  EXPECT_EQ(Job(el).phase(), JobPhase::kRunning) << "a leaver's exit 0 does not finish the job";
  // The other is still there 2 s before the deadline: SIGTERM; at the deadline SIGKILL.
  clock_.Set(deadline - 2'001);
  executor_->Poll();
  EXPECT_TRUE(launcher_.signals.empty());
  clock_.Set(deadline - 2'000);
  executor_->Poll();
  ASSERT_EQ(launcher_.signals.size(), 1u);
  EXPECT_EQ(launcher_.signals[0], std::make_pair(stubborn, SIGTERM));
  clock_.Set(deadline);
  executor_->Poll();
  ASSERT_EQ(launcher_.signals.size(), 2u);
  EXPECT_EQ(launcher_.signals[1], std::make_pair(stubborn, SIGKILL));
  launcher_.Kill(stubborn, SIGKILL);
  executor_->Poll();
  EXPECT_EQ(Job(el).task(d.evictions[1].task).state, TaskState::kPending);
  EXPECT_EQ(Count(el, TaskState::kRunning), 2);
  auto next = Cycle();
  EXPECT_EQ(next.binds.size(), 2u) << "the priority job binds once both are gone";
}

TEST_F(ExecutorTest, EvictedTaskGetsSigtermNowAndSigkillAtTheDeadline) {
  const auto low = Submit(JobBuilder("low").Gang(4).GpusPerTask(1).Build());
  Cycle();
  Submit(JobBuilder("hp").Gang(4).GpusPerTask(1).Priority(100).Build(), {"hp"});
  const auto d = Cycle();
  ASSERT_EQ(d.evictions.size(), 4u);
  ASSERT_EQ(d.evictions[0].kind, scheduler::Eviction::Kind::kEvict);
  executor_->Poll();
  int terms = 0;
  for (const auto& [pid, sig] : launcher_.signals) terms += sig == SIGTERM;
  EXPECT_EQ(terms, 4);
  clock_.Set(d.evictions[0].deadline);
  executor_->Poll();
  int kills = 0;
  for (const auto& [pid, sig] : launcher_.signals) kills += sig == SIGKILL;
  EXPECT_EQ(kills, 4);
  for (const auto& t : Job(low).tasks()) launcher_.Kill(launcher_.Of(t.name), SIGKILL);
  executor_->Poll();
  EXPECT_EQ(Count(low, TaskState::kReleasing), 0);
}

// Every process of a gang fails at once (both exits read in one poll): the
// failure stops the survivor and the gang restarts whole in the next cycle,
// whose decisions hold both the stale stop and the new binds. The new
// processes must not be stopped by the stale eviction.
TEST_F(ExecutorTest, AGangRestartedInTheCycleThatStopsItKeepsItsNewProcesses) {
  const auto id = Submit(JobBuilder("crash").Gang(2).GpusPerTask(1).Build());
  Cycle();
  ASSERT_EQ(Count(id, TaskState::kRunning), 2);
  const pid_t a = launcher_.Of(Job(id).task(0).name), b = launcher_.Of(Job(id).task(1).name);
  launcher_.Exit(a, 3);
  launcher_.Exit(b, 3);
  executor_->Poll();
  for (int i = 0; i < 3; ++i) {
    Cycle();
    executor_->Poll();
  }
  const pid_t a2 = launcher_.Of(Job(id).task(0).name), b2 = launcher_.Of(Job(id).task(1).name);
  ASSERT_NE(a2, 0);
  ASSERT_NE(b2, 0);
  EXPECT_NE(a2, a);
  EXPECT_NE(b2, b);
  for (const auto& [pid, sig] : launcher_.signals) {
    EXPECT_TRUE(pid != a2 && pid != b2) << "new process " << pid << " got signal " << sig;
  }
  EXPECT_EQ(Count(id, TaskState::kRunning), 2);
}

// Cancel of a running job with a grace period (serve's --cancel-grace-ms):
// SIGTERM now, SIGKILL at the deadline, and nothing is bound onto the job's
// GPUs until its processes are gone; then it is Aborted.
TEST_F(ExecutorTest, CancelStopsTheProcessesAndKeepsTheirGpusUntilTheyAreGone) {
  executor_.reset();
  scheduler::EngineOptions eo;
  eo.auto_confirm_binds = false;
  eo.cancel_grace_ms = 3000;
  auto e = scheduler::Engine::Create(ClusterBuilder().NodesPerRack(1).Gpus(4).Build(), scheduler::DefaultPolicy(),
                                     registry_, clock_, eo);
  ASSERT_TRUE(e.ok()) << e.status();
  engine_ = *std::move(e);
  MakeExecutor(Options());
  const auto a = Submit(JobBuilder("a").Gang(4).GpusPerTask(1).Build());
  Cycle();
  ASSERT_EQ(Count(a, TaskState::kRunning), 4);
  const auto b = Submit(JobBuilder("b").GpusPerTask(4).Build(), {"b"});
  ASSERT_TRUE(Cycle().binds.empty());
  ASSERT_TRUE(engine_->CancelJob(a).ok());
  EXPECT_EQ(Job(a).phase(), JobPhase::kCancelling);
  auto d = Cycle();
  ASSERT_EQ(d.evictions.size(), 4u);
  EXPECT_EQ(d.evictions[0].kind, scheduler::Eviction::Kind::kCancel);
  EXPECT_EQ(d.evictions[0].deadline, clock_.Now() + 3000);
  EXPECT_TRUE(d.binds.empty()) << "nothing bound onto the cancelled job's GPUs";
  executor_->Poll();
  int terms = 0;
  for (const auto& [pid, sig] : launcher_.signals) terms += sig == SIGTERM;
  EXPECT_EQ(terms, 4) << "SIGTERM at once";
  // Two leave on SIGTERM; the other two hold their GPUs.
  clock_.Advance(1000);
  launcher_.Kill(launcher_.Of(Job(a).task(0).name), SIGTERM);
  launcher_.Kill(launcher_.Of(Job(a).task(1).name), SIGTERM);
  executor_->Poll();
  EXPECT_EQ(Count(a, TaskState::kReleasing), 2);
  EXPECT_EQ(Job(a).phase(), JobPhase::kCancelling);
  EXPECT_TRUE(Cycle().binds.empty()) << "two processes of the cancelled job still run on the GPUs b needs";
  // The deadline: SIGKILL to those left (and only to them).
  clock_.Set(d.evictions[0].deadline);
  executor_->Poll();
  int kills = 0;
  for (const auto& [pid, sig] : launcher_.signals) kills += sig == SIGKILL;
  EXPECT_EQ(kills, 2);
  launcher_.Kill(launcher_.Of(Job(a).task(2).name), SIGKILL);
  launcher_.Kill(launcher_.Of(Job(a).task(3).name), SIGKILL);
  executor_->Poll();
  EXPECT_EQ(Job(a).phase(), JobPhase::kAborted);
  EXPECT_EQ(std::count(events_.begin(), events_.end(), "released"), 4);
  d = Cycle();
  ASSERT_EQ(d.binds.size(), 1u);
  EXPECT_EQ(d.binds[0].job, b);
  EXPECT_TRUE(engine_->CheckInvariants().ok());
}

// A daemon restart (serve --state): a new executor on the engine's re-adopted
// jobs re-adopts the recorded processes still alive, reports those that
// ended with their recorded status, fails tasks without either, and kills a
// recorded process whose task no longer runs.
TEST_F(ExecutorTest, ARestartedExecutorReadoptsWhatStillRuns) {
  char dir[] = "/tmp/rm_readopt_XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  LocalExecutorOptions o;
  o.ringmaster = "/opt/ringmaster";
  o.coordinator = "127.0.0.1:7070";
  o.state_dir = dir;
  auto first = std::make_unique<LocalExecutor>(*engine_, clock_, launcher_, o);
  auto run = [&](LocalExecutor& ex) {
    auto d = engine_->RunCycle();
    ex.OnCycle(d);
  };
  const auto gang = Submit(JobBuilder("gang").Gang(2).GpusPerTask(1).Build());
  const auto solo = Submit(JobBuilder("solo").GpusPerTask(1).Build());
  const auto gone = Submit(JobBuilder("gone").GpusPerTask(1).Build());
  run(*first);
  ASSERT_EQ(first->started(), 4);
  const ProcessSpec& spec = launcher_.specs.begin()->second;
  ASSERT_GE(spec.argv.size(), 5u);
  EXPECT_EQ(spec.argv[1], "supervise") << "run under the supervisor, which records the exit status";
  EXPECT_EQ(spec.argv[2], "--status-file");
  const std::string g0 = Job(gang).task(0).name, g1 = Job(gang).task(1).name;
  const pid_t p0 = launcher_.Of(g0), p1 = launcher_.Of(g1), ps = launcher_.Of(Job(solo).task(0).name),
              pg = launcher_.Of(Job(gone).task(0).name);
  // The records, as the killed daemon left them.
  std::ifstream in(std::string(dir) + "/processes.json");
  const nlohmann::json records = nlohmann::json::parse(in);
  ASSERT_EQ(records.at("processes").size(), 4u);
  std::string status_g1;
  for (const auto& r : records.at("processes")) {
    EXPECT_EQ(r.at("start_time").get<uint64_t>(), 10 * r.at("pid").get<uint64_t>());
    if (r.at("task") == g1) status_g1 = r.at("status_file");
  }
  ASSERT_FALSE(status_g1.empty());
  first.reset();  // kill -9: nothing stopped
  // While no daemon ran: g1 exited 0 (its supervisor wrote the status), the
  // solo job's process vanished without one, and "gone" is no longer
  // running in the restored state (here: cancelled) while its process lives.
  launcher_.alive.erase(p1);
  std::ofstream(status_g1) << "exit 0\n";
  launcher_.alive.erase(ps);
  ASSERT_TRUE(engine_->CancelJob(gone).ok());
  LocalExecutor second(*engine_, clock_, launcher_, o);
  const LocalExecutor::Readopted r = second.Readopt();
  EXPECT_EQ(r.adopted, 1);
  EXPECT_EQ(r.ended, 1);
  EXPECT_EQ(r.failed, 1);
  EXPECT_EQ(r.killed, 1);
  EXPECT_EQ(second.PidOf(g0), p0) << "the live process is supervised again";
  EXPECT_TRUE(launcher_.adopted.contains(p0));
  EXPECT_TRUE(std::find(launcher_.signals.begin(), launcher_.signals.end(), std::make_pair(pg, SIGKILL)) !=
              launcher_.signals.end())
      << "the stray process is killed";
  EXPECT_EQ(Job(gang).phase(), JobPhase::kRunning) << "g1's exit 0: the program is ending";
  EXPECT_EQ(Count(solo, TaskState::kPending), 1) << "no process, no status: failed, waits again";
  // The solo job starts again as a new process; g0 ends with 0: the gang completes.
  run(second);
  EXPECT_EQ(second.started(), 1);
  EXPECT_EQ(Count(solo, TaskState::kRunning), 1);
  launcher_.Exit(p0, 0);
  second.Poll();
  EXPECT_EQ(Job(gang).phase(), JobPhase::kCompleted);
  std::filesystem::remove_all(dir);
}

TEST(JobCommand, JobFileListOrShellStringAndTheAdminApiCarryIt) {
  auto jobs = scheduler::ParseJobFile(R"(jobs:
- name: a
  roles: [{replicas: 2, gpus: 1}]
  command: [trainer, --samples, "64"]
- name: b
  roles: [{replicas: 1}]
  command: "echo $RINGMASTER_TASK"
- name: c
  roles: [{replicas: 1}]
)",
                                      "jobs.yaml");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 3u);
  EXPECT_EQ((*jobs)[0].command, (std::vector<std::string>{"trainer", "--samples", "64"}));
  EXPECT_EQ((*jobs)[1].command, (std::vector<std::string>{"/bin/sh", "-c", "echo $RINGMASTER_TASK"}));
  EXPECT_TRUE((*jobs)[2].command.empty());
  auto back = JobSpecFromProto(JobSpecToProto((*jobs)[0]));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->command, (*jobs)[0].command);
  for (const char* bad : {"command: []", "command: {a: 1}", "command: [\"\"]"}) {
    auto r = scheduler::ParseJobFile(std::string("jobs:\n- name: x\n  roles: [{replicas: 1}]\n  ") + bad + "\n", "bad.yaml");
    ASSERT_ERROR(r, absl::StatusCode::kInvalidArgument, "bad.yaml:4:12: jobs[0].command:") << bad;
    EXPECT_NE(r.status().message().find("command"), std::string::npos) << r.status();
  }
  admin::JobSpec p = JobSpecToProto((*jobs)[0]);
  p.set_command(0, "");
  EXPECT_ERROR(JobSpecFromProto(p), absl::StatusCode::kInvalidArgument, "job 'a': command[0]: an empty program name");
}

TEST(SystemLauncher, RealProcessesExitCodesSignalsAndLogs) {
  auto launcher = MakeSystemProcessLauncher();
  char dir[] = "/tmp/rm_executor_XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string log = std::string(dir) + "/out.log";
  ProcessSpec ok{{"sh", "-c", "echo hello $RM_TEST_VAR; exit 0"}, {{"RM_TEST_VAR", "world"}}, log};
  ProcessSpec bad{{"sh", "-c", "exit 7"}, {}, ""};
  // SIGTERM is blocked in the daemon's threads: the child must still get it.
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  sigset_t old;
  pthread_sigmask(SIG_BLOCK, &block, &old);
  ProcessSpec slow{{"sleep", "30"}, {}, ""};
  auto p1 = launcher->Start(ok);
  auto p2 = launcher->Start(bad);
  auto p3 = launcher->Start(slow);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ASSERT_TRUE(p1.ok() && p2.ok() && p3.ok());
  EXPECT_ERROR(launcher->Start({{"/nonexistent/program"}, {}, ""}), absl::StatusCode::kInternal, "cannot start /nonexistent/program: No such file or directory");
  launcher->Signal(*p3, SIGTERM);
  std::map<pid_t, ProcessExit> exits;
  for (int i = 0; i < 500 && exits.size() < 3; ++i) {
    for (const auto& x : launcher->Reap()) exits[x.pid] = x;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(exits.size(), 3u) << "every process was reaped within 5 s";
  EXPECT_EQ(exits[*p1].exit_code, 0);
  EXPECT_FALSE(exits[*p1].signaled);
  EXPECT_EQ(exits[*p2].exit_code, 7);
  EXPECT_TRUE(exits[*p3].signaled);
  EXPECT_EQ(exits[*p3].signal, SIGTERM);
  std::ifstream in(log);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "hello world");
  EXPECT_TRUE(launcher->Reap().empty());
}

}  // namespace
}  // namespace ringmaster::server
