// `ringmaster serve --local-executor`: runs each task the engine binds as a
// local process, wrapped in `ringmaster shim run --mode inprocess` (so the
// job's command finds the daemon's coordinator through RINGMASTER_*), and
// reports what the processes do back to the engine.
//
// Lifecycle of one task (LocalExecutor, driven under the engine lock):
//   Bind                 -> start the process; ConfirmBind + TaskStarted
//                           (ConfirmBind(false) when it cannot be started)
//   Eviction kShrink     -> the process is told by the coordinator to leave
//                           at its step boundary; if it is still there
//                           near the engine's deadline it gets SIGTERM, and
//                           SIGKILL at the deadline
//   Eviction kEvict/kCancel -> SIGTERM now, SIGKILL at the deadline
//   a stopped task exits -> TaskReleased
//   a running task exits 0 -> the job's program is ending: once none of the
//                           job's processes is left, FinishJob(succeeded)
//   a running task exits non-zero (or by a signal) before that
//                        -> TaskFailed: an elastic job above its minimum
//                           runs on smaller, else the gang restarts whole
// Only jobs with a command are run (Executes); the others keep the admin
// service's "bound and started at once" behaviour.
//
// Across a daemon restart (`state_dir` set: serve --state): each process is
// started under `ringmaster supervise --status-file F`, a small parent that
// records how the command ended in F (the command's process is not the
// restarted daemon's child, so waitpid cannot tell), and the executor keeps
// a record of its live processes (task, pid, start time from
// /proc/PID/stat, boot id) in state_dir/processes.json. A daemon killed
// with kill -9 leaves its processes running; the restarted one re-adopts
// (Readopt) each process whose task the engine re-adopted as running and
// whose pid still names the same process (same start time, same boot): it
// keeps supervising it (signals on eviction, its end reported to the
// engine with the status the supervisor recorded). A process that ended
// while no daemon ran is reported as its status file says; a task whose
// process is gone without one fails (TaskFailed); a recorded process whose
// task no longer runs is killed. A task the engine re-adopted as Releasing
// (its job was Cancelling when the daemon stopped) is re-adopted stopping:
// SIGTERM now, SIGKILL at its deadline, TaskReleased once it is gone (at
// once when its process already is).
//
// The processes themselves sit behind ProcessLauncher, so tests can drive
// the lifecycle with fake ones (or with real `sh -c` processes).
#ifndef RINGMASTER_SERVER_EXECUTOR_LOCAL_EXECUTOR_H_
#define RINGMASTER_SERVER_EXECUTOR_LOCAL_EXECUTOR_H_

#include <sys/types.h>

#include <functional>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/clock.h"
#include "scheduler/decisions.h"
#include "scheduler/engine.h"

namespace ringmaster::server {

struct ProcessSpec {
  std::vector<std::string> argv;  // argv[0] looked up in PATH
  std::vector<std::pair<std::string, std::string>> env;  // added to the daemon's
  std::string log_file;  // stdout and stderr appended there; empty: the daemon's
};

struct ProcessExit {
  pid_t pid = 0;
  int exit_code = 0;  // when !signaled
  int signal = 0;     // the signal that ended it, when signaled
  bool signaled = false;
  // An adopted process ended without a recorded status (killed with its
  // supervisor): reported as signaled by SIGKILL.
  bool unknown = false;
};

// The start time of process `pid` (field 22 of /proc/PID/stat, clock ticks
// since boot); 0 when there is no such process or it is a zombie.
uint64_t ProcessStartTime(pid_t pid);
// This boot's id (/proc/sys/kernel/random/boot_id); empty when unreadable.
std::string BootId();
// `ringmaster supervise --status-file FILE -- CMD ARGS`: runs CMD as its
// child in the same process group, ignores SIGTERM / SIGINT / SIGHUP itself
// (they reach CMD through the group), and when CMD ends writes "exit N" or
// "signal N" to FILE (atomically: FILE.tmp, then rename); then ends the
// same way CMD did.
int RunSupervisor(const std::string& status_file, const std::vector<std::string>& argv);
// Reads a status FILE written by RunSupervisor; nullopt when absent or
// unreadable.
std::optional<ProcessExit> ReadExitStatus(const std::string& status_file);

// Starts, signals and reaps processes. Not thread-safe (one caller).
class ProcessLauncher {
 public:
  virtual ~ProcessLauncher() = default;
  // The new process's id; it runs in its own process group with the
  // default signal mask.
  virtual absl::StatusOr<pid_t> Start(const ProcessSpec& spec) = 0;
  // To the process's group.
  virtual void Signal(pid_t pid, int sig) = 0;
  // The processes that ended since the last call (never blocks).
  virtual std::vector<ProcessExit> Reap() = 0;
  // Supervises a process it did not start (a previous daemon's): `pid`, a
  // process-group leader that started at `start_time` (ProcessStartTime);
  // when it ends, Reap reports the status recorded in `status_file`.
  // Signals reach it only while the pid still names that process. False
  // when it cannot (the default: a launcher without real processes).
  virtual bool Adopt(pid_t pid, uint64_t start_time, const std::string& status_file) {
    (void)pid;
    (void)start_time;
    (void)status_file;
    return false;
  }
  // ProcessStartTime for this launcher's processes (fakes override it).
  virtual uint64_t StartTimeOf(pid_t pid) { return ProcessStartTime(pid); }
};
// posix_spawn, waitpid(WNOHANG) on the processes it started.
std::unique_ptr<ProcessLauncher> MakeSystemProcessLauncher();

struct LocalExecutorOptions {
  std::string ringmaster = "/proc/self/exe";  // the binary that runs `shim run`
  std::string coordinator;                    // HOST:PORT the shims join
  std::string log_dir;  // one log per process (TASK.N.log); empty: the daemon's stdout/stderr
  // A stop without an engine deadline: SIGKILL this long after SIGTERM.
  int64_t kill_after_ms = 5000;
  // A shrunk task still running this long before its deadline gets SIGTERM.
  int64_t shrink_term_before_ms = 2000;
  // An existing directory: processes run under `ringmaster supervise` and
  // are recorded there, so a restarted daemon re-adopts them (Readopt).
  // Empty: neither.
  std::string state_dir;
  // Whether the job's workers told the coordinator the job finished (its
  // training ran to the end): a task of such a job that then exits in any
  // way, even killed before its own exit, ends the program as finished, not
  // as a failed task (which would restart a job whose workers the
  // coordinator then refuses, over and over). Called under the engine lock
  // with the job's name. Empty: never.
  std::function<bool(const std::string& job)> job_finished;
};

class LocalExecutor {
 public:
  // `on_job_changed` is called (under the engine lock) after the executor
  // changed a job through the engine (finished, failed task), for the
  // journal and the event log: (job, event, detail).
  using JobChanged = std::function<void(scheduler::JobId, const std::string& event, const std::string& detail)>;
  LocalExecutor(scheduler::Engine& engine, const scheduler::Clock& clock, ProcessLauncher& launcher,
                LocalExecutorOptions options, JobChanged on_job_changed = {});
  ~LocalExecutor();

  // Whether the executor runs this job's tasks (it has a command).
  bool Executes(const scheduler::Job& job) const { return !job.spec().command.empty(); }
  // The argv and environment of one task's process.
  ProcessSpec SpecFor(const scheduler::Job& job, const scheduler::Bind& b, int incarnation) const;

  // Carries out a cycle's binds and evictions for the jobs it executes.
  void OnCycle(const scheduler::Decisions& d);
  // Reaps exited processes and sends the signals that are due (call often:
  // every 100 ms). Engine events as in the class comment.
  void Poll();
  // Shutdown: SIGTERM to every process, SIGKILL to those left after
  // `grace`; reaps them. Reports nothing to the engine.
  void StopAll(int64_t grace_ms);
  // After a daemon restart, before the first cycle (see the class
  // comment): re-adopts the recorded processes of the tasks the engine
  // re-adopted as Bound or Running; reports the ended ones; fails the tasks
  // with no process; kills recorded processes whose task no longer runs.
  struct Readopted {
    int adopted = 0;  // still running, supervised again
    int ended = 0;    // ended while no daemon ran, reported with their status
    int failed = 0;   // no process and no status: TaskFailed
    int killed = 0;   // a process whose task no longer runs
  };
  Readopted Readopt();

  // Live processes (tests, Summary).
  size_t running() const { return procs_.size(); }
  int64_t started() const { return started_; }
  // The pid of a job's task's live process, 0 when none.
  pid_t PidOf(const std::string& task_name) const;

 private:
  struct Proc {
    scheduler::JobId job;
    uint32_t task = 0;
    std::string task_name;
    bool stopping = false;
    scheduler::Eviction::Kind stop_kind = scheduler::Eviction::Kind::kEvict;
    scheduler::Timestamp term_at = -1;  // SIGTERM then (-1: not planned)
    scheduler::Timestamp kill_at = -1;  // SIGKILL then
    bool termed = false;
    bool killed = false;
    std::string status_file;  // with state_dir: where its supervisor records its end
    uint64_t start_time = 0;
    int incarnation = 0;
  };
  // Writes state_dir/processes.json (no-op without state_dir).
  void SaveRecords() const;
  void Launch(const scheduler::Bind& b);
  void Stop(const scheduler::Eviction& e);
  void Exited(const ProcessExit& x);
  void Changed(scheduler::JobId id, const std::string& event, const std::string& detail);

  scheduler::Engine& engine_;
  const scheduler::Clock& clock_;
  ProcessLauncher& launcher_;
  const LocalExecutorOptions options_;
  JobChanged on_job_changed_;
  std::map<pid_t, Proc> procs_;
  // Jobs whose program is ending (a task exited 0): later exits are not failures.
  std::map<scheduler::JobId, bool> ending_;  // -> every exit so far was 0
  std::map<std::string, int> incarnations_;  // task name -> processes started
  int64_t started_ = 0;
};

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_EXECUTOR_LOCAL_EXECUTOR_H_
