#include "server/executor/local_executor.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

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
    if (auto a = adopted_.find(pid); a != adopted_.end()) {
      // Not our child: the pid may have been reused once it ended.
      if (ProcessStartTime(pid) != a->second.start_time) return;
    } else if (!pids_.contains(pid)) {
      return;
    }
    if (::kill(-pid, sig) != 0) ::kill(pid, sig);
  }

  bool Adopt(pid_t pid, uint64_t start_time, const std::string& status_file) override {
    if (pid <= 0 || start_time == 0 || ProcessStartTime(pid) != start_time) return false;
    adopted_[pid] = {start_time, status_file};
    return true;
  }

  std::vector<ProcessExit> Reap() override {
    std::vector<ProcessExit> out;
    for (auto it = adopted_.begin(); it != adopted_.end();) {
      if (ProcessStartTime(it->first) == it->second.start_time) {
        ++it;
        continue;
      }
      std::optional<ProcessExit> x = ReadExitStatus(it->second.status_file);
      if (!x) {
        x = ProcessExit{};
        x->signaled = true;
        x->signal = SIGKILL;
        x->unknown = true;
      }
      x->pid = it->first;
      out.push_back(*x);
      it = adopted_.erase(it);
    }
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
  struct Adopted {
    uint64_t start_time = 0;
    std::string status_file;
  };
  std::set<pid_t> pids_;
  std::map<pid_t, Adopted> adopted_;
};

bool IsTerminal(scheduler::JobPhase phase) {
  return phase == scheduler::JobPhase::kCompleted || phase == scheduler::JobPhase::kFailed ||
         phase == scheduler::JobPhase::kAborted;
}

std::string ExitText(const ProcessExit& x) {
  return x.signaled ? absl::StrCat("killed by signal ", x.signal) : absl::StrCat("exited with code ", x.exit_code);
}

// A name no other process of this state directory has (a status file).
std::string Token() {
  std::random_device rd;
  std::mt19937_64 g((uint64_t{rd()} << 32) ^ rd() ^ static_cast<uint64_t>(::getpid()));
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(g()));
  return buf;
}

bool WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return false;
    out << text;
    if (!out.flush()) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

}  // namespace

uint64_t ProcessStartTime(pid_t pid) {
  if (pid <= 0) return 0;
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string text;
  if (!in || !std::getline(in, text)) return 0;
  // "PID (COMM) STATE ..." where COMM may hold spaces and parentheses:
  // the fields after the last ')' are state (3), ..., starttime (22).
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(text.substr(close + 1));
  std::string field;
  uint64_t start = 0;
  for (int i = 3; i <= 22 && rest >> field; ++i) {
    if (i == 3 && (field == "Z" || field == "X")) return 0;  // ended, not yet reaped
    if (i == 22) start = std::strtoull(field.c_str(), nullptr, 10);
  }
  return start;
}

std::string BootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

std::optional<ProcessExit> ReadExitStatus(const std::string& status_file) {
  if (status_file.empty()) return std::nullopt;
  std::ifstream in(status_file);
  std::string how;
  int n = 0;
  if (!(in >> how >> n)) return std::nullopt;
  ProcessExit x;
  if (how == "exit") {
    x.exit_code = n;
  } else if (how == "signal") {
    x.signaled = true;
    x.signal = n;
  } else {
    return std::nullopt;
  }
  return x;
}

int RunSupervisor(const std::string& status_file, const std::vector<std::string>& argv) {
  if (argv.empty() || argv.front().empty()) {
    std::fprintf(stderr, "supervise: no command\n");
    return 2;
  }
  // The stop signals reach the command through the process group; the
  // supervisor outlives it to record how it ended.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaction(sig, &ignore, nullptr);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t child = 0;
  const int rc = posix_spawnp(&child, args[0], nullptr, &attr, args.data(), environ);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    std::fprintf(stderr, "supervise: cannot start %s: %s\n", argv.front().c_str(), std::strerror(rc));
    WriteFileAtomically(status_file, "exit 127\n");
    return 127;
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) {
      WriteFileAtomically(status_file, "exit 255\n");
      return 255;
    }
  }
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    WriteFileAtomically(status_file, absl::StrCat("signal ", sig, "\n"));
    // End the same way (the daemon's waitpid then reads what the command did).
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, nullptr);
    ::kill(::getpid(), sig);
    return 128 + sig;
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 255;
  WriteFileAtomically(status_file, absl::StrCat("exit ", code, "\n"));
  return code;
}

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
  // Evictions first: they name processes that ran before this cycle. A cycle
  // can stop a task and bind it again (a gang broken by a failure that is
  // released and restarted whole within the cycle); stopping after the launch
  // would kill the new incarnation.
  for (const scheduler::Eviction& e : d.evictions) {
    if (!engine_.state().has_job(e.job) || !Executes(engine_.state().job(e.job))) continue;
    Stop(e);
  }
  for (const scheduler::Bind& b : d.binds) {
    if (!engine_.state().has_job(b.job) || !Executes(engine_.state().job(b.job))) continue;
    Launch(b);
  }
}

void LocalExecutor::Launch(const scheduler::Bind& b) {
  const scheduler::Job& job = engine_.state().job(b.job);
  const int incarnation = ++incarnations_[b.task_name];
  ProcessSpec spec = SpecFor(job, b, incarnation);
  std::string status_file;
  if (!options_.state_dir.empty()) {
    status_file = absl::StrCat(options_.state_dir, "/exit-", Token());
    std::vector<std::string> argv = {options_.ringmaster, "supervise", "--status-file", status_file, "--"};
    argv.insert(argv.end(), spec.argv.begin(), spec.argv.end());
    spec.argv = std::move(argv);
  }
  auto pid = launcher_.Start(spec);
  if (!pid.ok()) {
    common::Log(common::LogLevel::err, "task not started",
                {{"job", job.name()}, {"task", b.task_name}, {"error", std::string(pid.status().message())}});
    common::LogIfError(engine_.ConfirmBind(b.job, b.task, false), "bind of an unstarted task not released", {{"task", b.task_name}});
    Changed(b.job, "start_failed", absl::StrCat(b.task_name, ": ", pid.status().message()));
    return;
  }
  ++started_;
  Proc p;
  p.job = b.job;
  p.task = b.task;
  p.task_name = b.task_name;
  p.status_file = status_file;
  p.start_time = launcher_.StartTimeOf(*pid);
  p.incarnation = incarnation;
  procs_[*pid] = p;
  SaveRecords();
  common::Log(common::LogLevel::info, "task started",
              {{"job", job.name()}, {"task", b.task_name}, {"pid", static_cast<int64_t>(*pid)},
               {"node", b.node_name}, {"incarnation", incarnation}});
  if (engine_.ConfirmBind(b.job, b.task, true).ok()) common::LogIfError(engine_.TaskStarted(b.job, b.task), "task start", {{"task", b.task_name}});
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
  if (!p.status_file.empty()) std::remove(p.status_file.c_str());
  SaveRecords();
  const bool active = engine_.state().has_job(p.job) && !IsTerminal(engine_.state().job(p.job).phase());
  const std::string job_name = active ? engine_.state().job(p.job).name() : "";
  common::Log(x.exit_code == 0 && !x.signaled ? common::LogLevel::info : common::LogLevel::warn, "task exited",
              {{"job", job_name}, {"task", p.task_name}, {"pid", static_cast<int64_t>(x.pid)},
               {"how", ExitText(x)}, {"stopping", p.stopping ? "true" : "false"}});
  if (!active) return;
  const scheduler::Job& job = engine_.state().job(p.job);
  const bool releasing = p.task < job.tasks().size() && job.task(p.task).state == TaskState::kReleasing;
  if (p.stopping || releasing) {
    // Stopped, or its gang broke (another task failed) before the stop
    // reached it: gone either way.
    if (releasing) {
      common::LogIfError(engine_.TaskReleased(p.job, p.task), "task release", {{"task", p.task_name}});
      Changed(p.job, "released", absl::StrCat(p.task_name, " ", ExitText(x)));
    }
  } else if (auto e = ending_.find(p.job); e != ending_.end()) {
    // The program is ending: a late exit does not change its result.
  } else if ((!x.signaled && x.exit_code == 0) || (options_.job_finished && options_.job_finished(job.name()))) {
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

void LocalExecutor::SaveRecords() const {
  if (options_.state_dir.empty()) return;
  nlohmann::json procs = nlohmann::json::array();
  for (const auto& [pid, p] : procs_) {
    const std::string job = engine_.state().has_job(p.job) ? engine_.state().job(p.job).name() : "";
    procs.push_back({{"job", job}, {"task", p.task_name}, {"pid", pid}, {"start_time", p.start_time},
                     {"status_file", p.status_file}, {"incarnation", p.incarnation}});
  }
  const nlohmann::json doc{{"boot_id", BootId()}, {"processes", std::move(procs)}};
  const std::string path = absl::StrCat(options_.state_dir, "/processes.json");
  if (!WriteFileAtomically(path, doc.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n")) {
    common::Log(common::LogLevel::err, "process records not written", {{"file", path}, {"error", std::strerror(errno)}});
  }
}

LocalExecutor::Readopted LocalExecutor::Readopt() {
  Readopted out;
  struct Record {
    std::string job;
    pid_t pid = 0;
    uint64_t start_time = 0;
    std::string status_file;
    int incarnation = 0;
  };
  std::map<std::string, Record> records;  // by task name
  bool same_boot = false;
  if (!options_.state_dir.empty()) {
    const std::string path = absl::StrCat(options_.state_dir, "/processes.json");
    std::ifstream in(path);
    if (in) {
      try {
        const nlohmann::json doc = nlohmann::json::parse(in);
        same_boot = doc.value("boot_id", std::string()) == BootId() && !BootId().empty();
        for (const auto& r : doc.at("processes")) {
          Record rec{r.value("job", std::string()), r.value("pid", pid_t{0}), r.value("start_time", uint64_t{0}),
                     r.value("status_file", std::string()), r.value("incarnation", 0)};
          records[r.value("task", std::string())] = std::move(rec);
        }
      } catch (const nlohmann::json::exception& e) {
        common::Log(common::LogLevel::err, "process records not read", {{"file", path}, {"error", e.what()}});
      }
    }
  }
  std::vector<std::pair<scheduler::JobId, uint32_t>> orphans;
  std::vector<ProcessExit> ended;
  // A copy: the loop reports task starts to the engine, and the state's job
  // sets are B-trees whose iterators no change may cross.
  const std::vector<scheduler::JobId> active(engine_.state().active_jobs().begin(), engine_.state().active_jobs().end());
  for (scheduler::JobId id : active) {
    const scheduler::Job& job = engine_.state().job(id);
    if (!Executes(job)) continue;
    for (uint32_t i = 0; i < job.tasks().size(); ++i) {
      const scheduler::Task& t = job.task(i);
      // Releasing: a job cancelled before the restart, stopped again
      // (AdminService::Recover); its process is waited for the same way.
      const bool stopping = t.state == TaskState::kReleasing;
      if (t.state != TaskState::kRunning && t.state != TaskState::kBound && !stopping) continue;
      auto r = records.find(t.name);
      if (r == records.end() || r->second.job != job.name()) {
        orphans.push_back({id, i});
        continue;
      }
      const Record rec = r->second;
      records.erase(r);
      Proc p;
      p.job = id;
      p.task = i;
      p.task_name = t.name;
      p.status_file = rec.status_file;
      p.start_time = rec.start_time;
      p.incarnation = rec.incarnation;
      incarnations_[t.name] = std::max(incarnations_[t.name], rec.incarnation);
      if (stopping) {
        p.stopping = true;
        p.stop_kind = Eviction::Kind::kCancel;
        p.term_at = clock_.Now();
        p.kill_at = std::max(clock_.Now() + 100, t.release_deadline);
      }
      if (same_boot && launcher_.Adopt(rec.pid, rec.start_time, rec.status_file)) {
        procs_[rec.pid] = p;
        ++out.adopted;
        common::Log(common::LogLevel::info, "task re-adopted",
                    {{"job", job.name()}, {"task", t.name}, {"pid", static_cast<int64_t>(rec.pid)}});
        if (t.state == TaskState::kBound) common::LogIfError(engine_.TaskStarted(id, i), "re-adopted task start", {{"task", t.name}});
        continue;
      }
      if (std::optional<ProcessExit> x = same_boot ? ReadExitStatus(rec.status_file) : std::nullopt) {
        // It ended while no daemon ran: report it as it ended.
        x->pid = rec.pid;
        procs_[rec.pid] = p;
        ended.push_back(*x);
        continue;
      }
      orphans.push_back({id, i});
    }
  }
  // Recorded processes whose task no longer runs hold GPUs nobody counts.
  for (const auto& [task, rec] : records) {
    if (!rec.status_file.empty()) std::remove(rec.status_file.c_str());
    if (!same_boot || !launcher_.Adopt(rec.pid, rec.start_time, rec.status_file)) continue;
    common::Log(common::LogLevel::warn, "stray task process killed",
                {{"job", rec.job}, {"task", task}, {"pid", static_cast<int64_t>(rec.pid)}});
    launcher_.Signal(rec.pid, SIGKILL);
    ++out.killed;
  }
  for (const ProcessExit& x : ended) {
    ++out.ended;
    Exited(x);
  }
  for (const auto& [id, i] : orphans) {
    const scheduler::Task& t = engine_.state().job(id).task(i);
    if (t.state == TaskState::kReleasing) {
      // Stopping and its process is gone: released.
      const std::string name = t.name;
      if (engine_.TaskReleased(id, i).ok()) {
        ++out.ended;
        Changed(id, "released", absl::StrCat(name, " has no process after a daemon restart"));
      }
      continue;
    }
    if (t.state != TaskState::kRunning && t.state != TaskState::kBound) continue;  // a gang already broken
    if (engine_.TaskFailed(id, i, "has no process after a daemon restart").ok()) {
      ++out.failed;
      Changed(id, "task_failed", absl::StrCat(t.name, " has no process after a daemon restart"));
    }
  }
  SaveRecords();
  return out;
}

void LocalExecutor::StopAll(int64_t grace_ms) {
  for (auto& [pid, p] : procs_) launcher_.Signal(pid, SIGTERM);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  auto reap = [&] {
    for (const ProcessExit& x : launcher_.Reap()) {
      if (auto it = procs_.find(x.pid); it != procs_.end() && !it->second.status_file.empty()) {
        std::remove(it->second.status_file.c_str());
      }
      procs_.erase(x.pid);
    }
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
  SaveRecords();  // what is left (normally nothing)
}

}  // namespace ringmaster::server
