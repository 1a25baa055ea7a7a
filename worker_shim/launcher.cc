// The shim launcher; see launcher.h.
#include "worker_shim/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>

#include "absl/strings/numbers.h"
#include "common/logging.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

extern char** environ;

namespace ringmaster::shim {
namespace {

constexpr char kMasterKey[] = "launcher/master_addr";

// A port the OS considers free on `host` right now.
absl::StatusOr<int> FreePort(const std::string& host) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
  }
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return absl::InternalError(absl::StrCat("bind: ", std::strerror(errno)));
  }
  ::close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

// The current environment with `extra` set (overriding).
std::vector<std::string> Environment(
    const std::map<std::string, std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    const std::string key = kv.substr(0, kv.find('='));
    if (!extra.contains(key)) env.push_back(std::move(kv));
  }
  for (const auto& [k, v] : extra) env.push_back(k + "=" + v);
  return env;
}

[[noreturn]] void Exec(const std::vector<std::string>& command,
                       const std::vector<std::string>& env) {
  std::vector<char*> argv;
  for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  ::execvpe(argv[0], argv.data(), envp.data());
  std::_Exit(127);
}

pid_t Spawn(const std::vector<std::string>& command,
            const std::vector<std::string>& env) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);  // its own group, so that its children stop with it
    for (int fd = 3; fd < 1024; ++fd) ::close(fd);
    Exec(command, env);
  }
  return pid;
}

// SIGTERM to the child's group, SIGKILL after `grace`; reaps it.
void Stop(pid_t pid, absl::Duration grace) {
  ::kill(-pid, SIGTERM);
  const absl::Time deadline = absl::Now() + grace;
  while (absl::Now() < deadline) {
    if (::waitpid(pid, nullptr, WNOHANG) == pid) return;
    absl::SleepFor(absl::Milliseconds(10));
  }
  ::kill(-pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

}  // namespace

absl::StatusOr<int> RunLauncher(const LaunchOptions& options) {
  if (options.command.empty()) {
    return absl::InvalidArgumentError("shim run needs a command after --");
  }
  const ClientOptions& c = options.client;
  if (options.in_process) {
    Exec(options.command,
         Environment({{"RINGMASTER_COORDINATOR", c.address},
                      {"RINGMASTER_JOB", c.job},
                      {"RINGMASTER_WORKER", c.worker_id},
                      {"RINGMASTER_WORKERS", absl::StrCat(c.desired_workers)}}));
  }
  RM_ASSIGN_OR_RETURN(auto connected, CoordinatorClient::Connect(c));
  CoordinatorClient& client = *connected;
  int64_t generation = 0;
  bool was_member = false;
  while (true) {
    RM_ASSIGN_OR_RETURN(
        auto update,
        client.WaitForGeneration(generation + 1, options.membership_timeout));
    generation = update.generation();
    if (update.rank() < 0) {
      if (was_member) {
        common::Log(common::LogLevel::info, "shrunk away",
                    {{"job", c.job}, {"worker", c.worker_id}, {"generation", generation}});
        (void)client.Leave(false);
        return 0;  // shrunk away
      }
      common::Log(common::LogLevel::debug, "standby", {{"job", c.job}, {"worker", c.worker_id}, {"generation", generation}});
      continue;  // standby
    }
    was_member = true;
    const int rank = update.rank();
    // Rendezvous for MASTER_ADDR/PORT through the generation's store.
    std::string master;
    if (rank == 0) {
      RM_ASSIGN_OR_RETURN(auto port, FreePort(c.host));
      master = absl::StrCat(c.host, ":", port);
      if (!client.KvSet(generation, kMasterKey, master).ok()) continue;
    } else {
      if (!client.KvWait(generation, {kMasterKey}, absl::Seconds(30)).ok()) {
        continue;  // superseded (or rank 0 gone): take the next generation
      }
      auto v = client.KvGet(generation, kMasterKey);
      if (!v.ok() || !v->has_value()) continue;
      master = **v;
    }
    const std::string master_host = master.substr(0, master.rfind(':'));
    const std::string master_port = master.substr(master.rfind(':') + 1);
    int local_rank = 0;
    int local_world = 0;
    for (const auto& m : update.members()) {
      if (m.host() == c.host) {
        if (m.rank() < rank) ++local_rank;
        ++local_world;
      }
    }
    client.SetCurrent(generation, rank, update.world_size());
    const pid_t child = Spawn(
        options.command,
        Environment({{"RANK", absl::StrCat(rank)},
                     {"WORLD_SIZE", absl::StrCat(update.world_size())},
                     {"LOCAL_RANK", absl::StrCat(local_rank)},
                     {"LOCAL_WORLD_SIZE", absl::StrCat(local_world)},
                     {"MASTER_ADDR", master_host},
                     {"MASTER_PORT", master_port},
                     {"RINGMASTER_COORDINATOR", c.address},
                     {"RINGMASTER_JOB", c.job},
                     {"RINGMASTER_WORKER", c.worker_id},
                     {"RINGMASTER_GENERATION", absl::StrCat(generation)}}));
    if (child < 0) return absl::InternalError("fork failed");
    common::Log(common::LogLevel::info, "worker started",
                {{"job", c.job}, {"worker", c.worker_id}, {"generation", generation}, {"rank", rank},
                 {"world_size", update.world_size()}, {"pid", child}});
    while (true) {
      int status = 0;
      if (::waitpid(child, &status, WNOHANG) == child) {
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
          common::Log(common::LogLevel::info, "worker finished",
                      {{"job", c.job}, {"worker", c.worker_id}, {"generation", generation}});
          (void)client.Leave(/*finished=*/true);
          return 0;
        }
        // Crashed: everybody restarts in the next generation.
        common::Log(common::LogLevel::warn, "worker failed",
                    {{"job", c.job}, {"worker", c.worker_id}, {"generation", generation}, {"wait_status", status}});
        (void)client.ReportFailure(
            generation, "",
            absl::StrCat(c.worker_id, ": command exited with status ", status));
        break;
      }
      if (client.LatestGeneration() > generation) {
        common::Log(common::LogLevel::info, "membership changed: stopping worker",
                    {{"job", c.job}, {"worker", c.worker_id}, {"generation", generation},
                     {"next_generation", client.LatestGeneration()}});
        Stop(child, options.grace);
        break;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
  }
}

}  // namespace ringmaster::shim
