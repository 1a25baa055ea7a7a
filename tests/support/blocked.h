// Waiting, with a deadline, until threads are blocked (Linux /proc): what a
// test waits for instead of sleeping "long enough" for a thread or a child
// process to reach a wait. A thread counts as blocked once it has been
// asleep ('S' in /proc/PID/task/TID/stat) without a single voluntary
// context switch (/proc/PID/task/TID/status) for `quiet`: one that sleeps
// in a loop, computes, or is woken and runnable does not qualify, whatever
// the load. Header-only; no dependency.
#ifndef RINGMASTER_TESTS_SUPPORT_BLOCKED_H_
#define RINGMASTER_TESTS_SUPPORT_BLOCKED_H_

#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace ringmaster::testing {

// The calling thread's id, as /proc/PID/task names it.
inline pid_t ThisThreadId() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

struct ThreadSample {
  char state = '?';         // R, S, D, T, Z, ... ('?' once the thread is gone)
  int64_t voluntary = -1;   // voluntary context switches so far
  std::string wchan;        // kernel wait channel ("0" where hidden)
};

inline ThreadSample SampleThread(pid_t pid, pid_t tid) {
  const std::string dir =
      "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/";
  ThreadSample s;
  std::ifstream stat(dir + "stat");
  std::string line;
  std::getline(stat, line);
  // "TID (comm) S ...": comm may hold spaces and parentheses.
  const size_t close = line.rfind(')');
  if (close != std::string::npos && close + 2 < line.size()) {
    s.state = line[close + 2];
  }
  std::ifstream status(dir + "status");
  const std::string key = "voluntary_ctxt_switches:";
  while (std::getline(status, line)) {
    if (line.rfind(key, 0) == 0) s.voluntary = std::stoll(line.substr(key.size()));
  }
  std::ifstream wchan(dir + "wchan");
  std::getline(wchan, s.wchan);
  return s;
}

inline std::vector<pid_t> ThreadsOf(pid_t pid) {
  std::vector<pid_t> tids;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(
           "/proc/" + std::to_string(pid) + "/task", ec)) {
    tids.push_back(static_cast<pid_t>(std::stol(e.path().filename().string())));
  }
  return tids;
}

// Polls every millisecond, for at most `timeout`, until `enough` accepts the
// threads of `pid` (those in `tids`, or all of them when `tids` is empty)
// that have been blocked for `quiet` and whose sample `which` accepts (all
// samples when empty). Returns whether it did.
inline bool WaitForBlocked(
    pid_t pid, std::vector<pid_t> tids, std::chrono::milliseconds quiet,
    std::chrono::milliseconds timeout,
    const std::function<bool(const std::vector<pid_t>&)>& enough,
    const std::function<bool(const ThreadSample&)>& which = {}) {
  using Clock = std::chrono::steady_clock;
  struct Quiet {
    int64_t voluntary = -1;
    Clock::time_point since;
  };
  std::map<pid_t, Quiet> seen;
  const bool all = tids.empty();
  const auto deadline = Clock::now() + timeout;
  while (true) {
    const auto now = Clock::now();
    if (all) tids = ThreadsOf(pid);
    std::vector<pid_t> blocked;
    for (pid_t tid : tids) {
      const ThreadSample s = SampleThread(pid, tid);
      Quiet& q = seen[tid];
      const bool asleep = s.state == 'S' && (!which || which(s));
      if (!asleep || s.voluntary != q.voluntary) {
        q.voluntary = asleep ? s.voluntary : -1;
        q.since = now;
      } else if (now - q.since >= quiet) {
        blocked.push_back(tid);
      }
    }
    if (enough(blocked)) return true;
    if (now >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Every thread in `tids` (of process `pid`) blocked for `quiet`.
inline bool WaitUntilBlocked(pid_t pid, const std::vector<pid_t>& tids,
                             std::chrono::milliseconds quiet,
                             std::chrono::milliseconds timeout) {
  return WaitForBlocked(pid, tids, quiet, timeout,
                        [n = tids.size()](const std::vector<pid_t>& b) {
                          return b.size() == n;
                        });
}

}  // namespace ringmaster::testing

#endif  // RINGMASTER_TESTS_SUPPORT_BLOCKED_H_
