#include "server/local_executor.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"

extern char** environ;

namespace ringmaster::server {
namespace {

using scheduler::Eviction;
using scheduler::TaskState;

class SystemProcessLauncher : public ProcessLauncher {
 public:
  ~SystemProcessLauncher() override = default;

  absl::StatusOr<pid_t> Start(const ProcessSpec& spec) override {
    if (spec.argv.empty() || spec.argv.front().empty()) return absl::InvalidArgumentError("an empty command");
    std::set<std::string> overridden;
    for (const auto& [k, v] : spec.env) overridden.insert(k);
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string kv(*e);
      if (!overridden.contains(kv.substr(0, kv.find('=')))) env.push_back(std::move(kv));
    }
    for (const auto& [k, v] : spec.env) env.push_back(k + "=" + v);
    std::vector<char*> argv;
    for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);

    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    // Its own process group (signals reach its children too), every signal
    // unblocked (the daemon blocks SIGTERM/SIGINT/SIGHUP in all threads, and
    // a spawned process inherits the mask) and at its default action.
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    for (int s : {SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD}) sigaddset(&defaults, s);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    if (!spec.log_file.empty()) {
      posix_spawn_file_actions_addopen(&files, 1, spec.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      posix_spawn_file_actions_adddup2(&files, 1, 2);
    }
    pid_t pid = 0;
    const int rc = posix_spawnp(&pid, argv[0], &files, &attr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&files);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
      return absl::InternalError(absl::StrCat("cannot start ", spec.argv.front(), ": ", std::strerror(rc)));
    }
    pids_.insert(pid);
    return pid;
  }

  void Signal(pid_t pid, int sig) override {
    if (!pids_.contains(pid)) return;
    if (::kill(-pid, sig) != 0) ::kill(pid, sig);
  }

  std::vector<ProcessExit> Reap() override {
    std::vector<ProcessExit> out;
    for (auto it = pids_.begin(); it != pids_.end();) {
      int status = 0;
      const pid_t r = ::waitpid(*it, &status, WNOHANG);
      if (r == *it || (r < 0 && errno == ECHILD)) {
        ProcessExit x;
        x.pid = *it;
        if (r == *it && WIFSIGNALED(status)) {
          x.signaled = true;
          x.signal = WTERMSIG(status);
        } else {
          x.exit_code = r == *it ? WEXITSTATUS(status) : 255;
        }
        out.push_back(x);
        it = pids_.erase(it);
      } else {
        ++it;
      }
    }
    return out;
  }

 private:
  std::set<pid_t> pids_;
};

bool IsTerminal(scheduler::JobPhase phase) {
  return phase == scheduler::JobPhase::kCompleted || phase == scheduler::JobPhase::kFailed ||
         phase == scheduler::JobPhase::kAborted;
}

std::string ExitText(const ProcessExit& x) {
  return x.signaled ? absl::StrCat("killed by signal ", x.signal) : absl::StrCat("exited with code ", x.exit_code);
}

}  // namespace

std::unique_ptr<ProcessLauncher> MakeSystemProcessLauncher() { return std::make_unique<SystemProcessLauncher>(); }

LocalExecutor::LocalExecutor(scheduler::Engine& engine, const scheduler::Clock& clock, ProcessLauncher& launcher,
                             LocalExecutorOptions options, JobChanged on_job_changed)
    : engine_(engine),
      clock_(clock),
      launcher_(launcher),
      options_(std::move(options)),
      on_job_changed_(std::move(on_job_changed)) {}

LocalExecutor::~LocalExecutor() = default;

ProcessSpec LocalExecutor::SpecFor(const scheduler::Job& job, const scheduler::Bind& b, int incarnation) const {
  ProcessSpec p;
  p.argv = {options_.ringmaster, "shim",   "run",      "--mode",    "inprocess", "--coordinator", options_.coordinator,
            "--job",             job.name(), "--worker", b.task_name, "--workers", absl::StrCat(job.ReadyCount()),
            "--"};
  for (const std::string& a : job.spec().command) p.argv.push_back(a);
  std::vector<std::string> gpus;
  for (int16_t g : b.gpus) gpus.push_back(absl::StrCat(g));
  p.env = {{"RINGMASTER_NODE", b.node_name},
           {"RINGMASTER_TASK", b.task_name},
           {"RINGMASTER_GPUS", absl::StrJoin(gpus, ",")},
           {"CUDA_VISIBLE_DEVICES", absl::StrJoin(gpus, ",")}};
  if (!options_.log_dir.empty()) p.log_file = absl::StrCat(options_.log_dir, "/", b.task_name, ".", incarnation, ".log");
  return p;
}

void LocalExecutor::Changed(scheduler::JobId id, const std::string& event, const std::string& detail) {
  if (on_job_changed_) on_job_changed_(id, event, detail);
}

pid_t LocalExecutor::PidOf(const std::string& task_name) const {
  for (const auto& [pid, p] : procs_) {
    if (p.task_name == task_name && !p.stopping) return pid;
  }
  return 0;
}

void LocalExecutor::OnCycle(const scheduler::Decisions& d) {
  for (const scheduler::Bind& b : d.binds) {
    if (!engine_.state().has_job(b.job) || !Executes(engine_.state().job(b.job))) continue;
    Launch(b);
  }
  for (const scheduler::Eviction& e : d.evictions) {
    if (!engine_.state().has_job(e.job) || !Executes(engine_.state().job(e.job))) continue;
    Stop(e);
  }
}

void LocalExecutor::Launch(const scheduler::Bind& b) {
  const scheduler::Job& job = engine_.state().job(b.job);
  const int incarnation = ++incarnations_[b.task_name];
  auto pid = launcher_.Start(SpecFor(job, b, incarnation));
  if (!pid.ok()) {
    common::Log(common::LogLevel::err, "task not started",
                {{"job", job.name()}, {"task", b.task_name}, {"error", std::string(pid.status().message())}});
    (void)engine_.ConfirmBind(b.job, b.task, false);
    Changed(b.job, "start_failed", absl::StrCat(b.task_name, ": ", pid.status().message()));
    return;
  }
  ++started_;
  Proc p;
  p.job = b.job;
  p.task = b.task;
  p.task_name = b.task_name;
  procs_[*pid] = p;
  common::Log(common::LogLevel::info, "task started",
              {{"job", job.name()}, {"task", b.task_name}, {"pid", static_cast<int64_t>(*pid)},
               {"node", b.node_name}, {"incarnation", incarnation}});
  if (engine_.ConfirmBind(b.job, b.task, true).ok()) (void)engine_.TaskStarted(b.job, b.task);
}

void LocalExecutor::Stop(const scheduler::Eviction& e) {
  const scheduler::Timestamp now = clock_.Now();
  for (auto& [pid, p] : procs_) {
    if (p.job != e.job || p.task != e.task || p.stopping) continue;
    p.stopping = true;
    p.stop_kind = e.kind;
    if (e.kind == Eviction::Kind::kShrink) {
      // The coordinator tells it to leave at its step boundary; SIGTERM only
      // if it is still there shortly before the deadline.
      p.kill_at = e.deadline >= 0 ? e.deadline : now + 2 * options_.kill_after_ms;
      p.term_at = std::max(now, p.kill_at - options_.shrink_term_before_ms);
    } else {
      p.term_at = now;
      p.kill_at = std::max(now + 100, e.deadline >= 0 ? e.deadline : now + options_.kill_after_ms);
    }
    common::Log(common::LogLevel::info, "task stopping",
                {{"job", engine_.state().job(e.job).name()}, {"task", p.task_name},
                 {"pid", static_cast<int64_t>(pid)}, {"kind", std::string(scheduler::EvictionKindName(e.kind))},
                 {"kill_in_ms", p.kill_at - now}});
  }
}

void LocalExecutor::Exited(const ProcessExit& x) {
  auto it = procs_.find(x.pid);
  if (it == procs_.end()) return;
  const Proc p = it->second;
  procs_.erase(it);
  const bool active = engine_.state().has_job(p.job) && !IsTerminal(engine_.state().job(p.job).phase());
  const std::string job_name = active ? engine_.state().job(p.job).name() : "";
  common::Log(x.exit_code == 0 && !x.signaled ? common::LogLevel::info : common::LogLevel::warn, "task exited",
              {{"job", job_name}, {"task", p.task_name}, {"pid", static_cast<int64_t>(x.pid)},
               {"how", ExitText(x)}, {"stopping", p.stopping ? "true" : "false"}});
  if (!active) return;
  const scheduler::Job& job = engine_.state().job(p.job);
  if (p.stopping) {
    if (p.task < job.tasks().size() && job.task(p.task).state == TaskState::kReleasing) {
      (void)engine_.TaskReleased(p.job, p.task);
      Changed(p.job, "released", absl::StrCat(p.task_name, " ", ExitText(x)));
    }
  } else if (auto e = ending_.find(p.job); e != ending_.end()) {
    // The program is ending: a late exit does not change its result.
  } else if (!x.signaled && x.exit_code == 0) {
    ending_[p.job] = true;
  } else if (engine_.TaskFailed(p.job, p.task, ExitText(x)).ok()) {
    Changed(p.job, "task_failed", absl::StrCat(p.task_name, " ", ExitText(x)));
  }
  if (auto e = ending_.find(p.job); e != ending_.end()) {
    const bool left = std::any_of(procs_.begin(), procs_.end(), [&](const auto& kv) { return kv.second.job == p.job; });
    if (!left) {
      const bool ok = e->second;
      ending_.erase(e);
      if (engine_.FinishJob(p.job, ok).ok()) Changed(p.job, ok ? "finished" : "failed", "every task exited");
    }
  }
}

void LocalExecutor::Poll() {
  for (const ProcessExit& x : launcher_.Reap()) Exited(x);
  const scheduler::Timestamp now = clock_.Now();
  for (auto& [pid, p] : procs_) {
    if (!p.stopping) continue;
    if (!p.termed && p.term_at >= 0 && now >= p.term_at) {
      p.termed = true;
      launcher_.Signal(pid, SIGTERM);
    }
    if (!p.killed && p.kill_at >= 0 && now >= p.kill_at) {
      p.killed = true;
      launcher_.Signal(pid, SIGKILL);
    }
  }
}

void LocalExecutor::StopAll(int64_t grace_ms) {
  for (auto& [pid, p] : procs_) launcher_.Signal(pid, SIGTERM);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  auto reap = [&] {
    for (const ProcessExit& x : launcher_.Reap()) procs_.erase(x.pid);
  };
  while (!procs_.empty() && std::chrono::steady_clock::now() < until) {
    reap();
    if (!procs_.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (auto& [pid, p] : procs_) launcher_.Signal(pid, SIGKILL);
  for (int i = 0; i < 100 && !procs_.empty(); ++i) {
    reap();
    if (!procs_.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace ringmaster::server
