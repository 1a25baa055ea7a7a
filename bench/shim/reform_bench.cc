// reform_bench: re-formation latency of the worker shim, measured with real
// worker processes (examples/elastic_trainer) on 127.0.0.1 and an in-process
// coordinator.
//
// For each trial, from a job of --workers N members:
//  - planned_shrink: resize to N-1; the last rank leaves at a step boundary.
//  - kill9: SIGKILL the last rank; detect_ms = coordinator publishes the
//    failure generation - kill time.
//  reform_ms = (latest survivor holding a working communicator) - (new
//  generation published), from the survivors' --reform-log records (same
//  machine, same clock). It includes waiting for the next step boundary
//  (planned) or for the blocked collective to fail (kill9).
// After each trial a fresh worker is started and the job grows back to N;
// that re-formation is reported as kind "grow".
// Prints one JSON line per kind: workers, kind, trials, reform_ms_p50,
// reform_ms_p99 (the slowest trial up to 51 trials, then not: the second
// slowest of 60), reform_ms_max, ready_ms_p50 / _p99 (the same up to the
// last member's new communicator working: for a prepared one, when it was
// ready, not when the step boundary swapped it in), detect_ms (p50; kill9
// only), per-phase p50s, and
// prepared_frac (the share of trials in which every member swapped in a
// communicator prepared ahead of the step boundary).
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "server/coordinator/coordinator_service.h"

namespace {

namespace fs = std::filesystem;
using ringmaster::api::JobStatus;

struct Flags {
  std::string trainer;
  int workers = 4;
  std::string kind = "planned";
  int trials = 10;
  int step_delay_ms = 5;
  bool keep_logs = false;
};

class Bench {
 public:
  explicit Bench(const Flags& f) : f_(f) {
    dir_ = fs::temp_directory_path() /
           ("rm_reform_bench_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    ringmaster::server::CoordinatorOptions o;
    o.heartbeat_timeout = absl::Seconds(30);
    server_ = *ringmaster::server::CoordinatorServer::Start(
        "127.0.0.1:0", o, absl::Milliseconds(50));
  }
  ~Bench() {
    for (auto& [w, pid] : pids_) {
      if (pid > 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    }
    server_->Stop();
    if (ok_ && !f_.keep_logs) fs::remove_all(dir_);
    if (f_.keep_logs) std::cerr << "logs in " << dir_ << "\n";
  }

  std::string Spawn() {
    const std::string name = "w" + std::to_string(next_++);
    std::vector<std::string> args = {
        f_.trainer, "--coordinator", server_->address(), "--job", "bench",
        "--worker", name, "--workers", std::to_string(f_.workers),
        "--samples", "1024", "--epochs", "1000000", "--batch", "64",
        "--commit-every", "8", "--step-delay-ms",
        std::to_string(f_.step_delay_ms), "--reform-log",
        (dir_ / (name + ".jsonl")).string()};
    const pid_t pid = ::fork();
    if (pid == 0) {
      // Die with the bench, however it ends (a closed stdout pipe, a ^C):
      // a leftover gang would go on training and load the next run.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      std::freopen((dir_ / (name + ".log")).c_str(), "w", stderr);
      for (int fd = 3; fd < 1024; ++fd) ::close(fd);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      std::_Exit(127);
    }
    pids_[name] = pid;
    return name;
  }

  JobStatus Job() {
    auto j = server_->core().GetJob("bench");
    return j.ok() ? *j : JobStatus();
  }

  // The reform record of `worker` for `generation`, if written yet.
  std::optional<nlohmann::json> Record(const std::string& worker,
                                       int64_t generation) {
    std::ifstream in(dir_ / (worker + ".jsonl"));
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_discarded() && j["generation"] == generation) return j;
    }
    return std::nullopt;
  }

  // One re-formation as the survivors logged it; times in ms after the
  // coordinator published the generation, each the maximum over the members.
  struct Trial {
    double formed = -1;      // reform_ms: the last member holds a communicator
    double ready = 0;        // ready_ms: the last member's new communicator
                             // works (a prepared one: when it was ready,
                             // before the step boundary swapped it in)
    double received = 0;     // the last member's watcher had the generation
    double boundary = 0;     // the last member began moving to it
    double rendezvous = 0;   // longest rendezvous (start to communicator; a
                             // prepared one ends when it is ready, which may
                             // be before the step boundary)
    double prepared = 0;     // 1 when every member adopted a prepared one
    double kv_rpcs = 0;      // most coordinator round trips of one member
    double kv_ms = 0;        // longest time in them
  };

  // Waits until generation `gen` exists with `size` members and every member
  // logged it; formed < 0 when it never did.
  Trial WaitFormed(int64_t gen, int size, int64_t* published_us) {
    // (a failure may take more than one generation to settle)
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      JobStatus j = Job();
      if (j.generation() >= gen && j.members_size() == size) {
        gen = j.generation();  // the first generation of that size
        std::vector<nlohmann::json> records;
        for (const auto& m : j.members()) {
          auto r = Record(m.worker_id(), gen);
          if (!r) break;
          records.push_back(*r);
        }
        if (static_cast<int>(records.size()) == size) {
          const int64_t published = records[0]["published_us"];
          if (published_us) *published_us = published;
          auto after = [&](int64_t us) { return (us - published) / 1e3; };
          Trial t;
          t.prepared = 1;
          for (const auto& r : records) {
            const int64_t ready = r.value("prepared_us", int64_t{0}) > 0
                                      ? r["prepared_us"].get<int64_t>()
                                      : r["formed_us"].get<int64_t>();
            if (!r.value("prepared", false)) t.prepared = 0;
            t.formed = std::max(t.formed, after(r["formed_us"]));
            t.ready = std::max(t.ready, after(std::min<int64_t>(
                                            ready, r["formed_us"].get<int64_t>())));
            t.received = std::max(t.received, after(r.value("received_us", published)));
            t.boundary = std::max(t.boundary, after(r.value("boundary_us", published)));
            t.rendezvous = std::max(
                t.rendezvous, (ready - r.value("rendezvous_us", int64_t{0})) / 1e3);
            t.kv_rpcs = std::max(t.kv_rpcs, r.value("kv_rpcs", 0.0));
            t.kv_ms = std::max(t.kv_ms, r.value("kv_rpc_us", 0.0) / 1e3);
          }
          return t;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return Trial{};
  }

  void Reap(const std::string& w) {
    ::waitpid(pids_[w], nullptr, 0);
    pids_[w] = 0;
  }

  int Run() {
    for (int i = 0; i < f_.workers; ++i) Spawn();
    if (WaitFormed(1, f_.workers, nullptr).formed < 0) {
      std::cerr << "initial gang never formed\n";
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::vector<Trial> shrink, grow;
    std::vector<double> detect;
    for (int t = 0; t < f_.trials; ++t) {
      JobStatus j = Job();
      const int64_t g = j.generation();
      const std::string victim = j.members(j.members_size() - 1).worker_id();
      int64_t published = 0;
      if (f_.kind == "planned") {
        ringmaster::api::ResizeRequest r;
        r.set_job("bench");
        r.set_workers(f_.workers - 1);
        (void)server_->core().Resize(r);
        const Trial tr = WaitFormed(g + 1, f_.workers - 1, &published);
        if (tr.formed < 0) return Fail("planned shrink", t);
        shrink.push_back(tr);
        Reap(victim);
        Spawn();
        r.set_workers(f_.workers);
        (void)server_->core().Resize(r);
      } else {
        const int64_t kill_us = absl::ToUnixMicros(absl::Now());
        ::kill(pids_[victim], SIGKILL);
        Reap(victim);
        const Trial tr = WaitFormed(g + 1, f_.workers - 1, &published);
        if (tr.formed < 0) return Fail("kill -9", t);
        shrink.push_back(tr);
        detect.push_back((published - kill_us) / 1e3);
        Spawn();  // the target is still N: the job grows back by itself
      }
      const Trial gt = WaitFormed(Job().generation() + 1, f_.workers, nullptr);
      if (gt.formed < 0) return Fail("grow", t);
      grow.push_back(gt);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    Print(f_.kind == "planned" ? "planned_shrink" : "kill9", shrink, detect);
    Print(f_.kind == "planned" ? "grow_after_planned" : "grow_after_kill9",
          grow, {});
    return 0;
  }

 private:
  int Fail(const char* what, int trial) {
    ok_ = false;
    std::cerr << what << " did not re-form in trial " << trial << "; logs in "
              << dir_ << "; job: " << Job().ShortDebugString() << "\n";
    for (auto& [w, pid] : pids_) {
      int status = 0;
      if (pid > 0 && ::waitpid(pid, &status, WNOHANG) == pid) {
        std::cerr << w << " exited, status " << status << "\n";
        pid = 0;
      }
    }
    return 1;
  }
  static double Pct(std::vector<double> v, double p) {
    if (v.empty()) return -1;
    std::sort(v.begin(), v.end());
    const size_t i = std::min(v.size() - 1,
                              static_cast<size_t>(p * (v.size() - 1) + 0.5));
    return v[i];
  }
  static double Mean(const std::vector<double>& v) {
    if (v.empty()) return -1;
    double sum = 0;
    for (double x : v) sum += x;
    return sum / static_cast<double>(v.size());
  }
  void Print(const std::string& kind, const std::vector<Trial>& trials,
             const std::vector<double>& detect) {
    auto col = [&](double Trial::*field) {
      std::vector<double> v;
      for (const auto& t : trials) v.push_back(t.*field);
      return v;
    };
    const std::vector<double> reform = col(&Trial::formed);
    nlohmann::json j = {{"workers", f_.workers},
                        {"kind", kind},
                        {"trials", reform.size()},
                        {"reform_ms_p50", Pct(reform, 0.5)},
                        {"reform_ms_p99", Pct(reform, 0.99)},
                        {"reform_ms_max", reform.empty() ? 0.0
                                          : *std::max_element(reform.begin(), reform.end())},
                        {"ready_ms_p50", Pct(col(&Trial::ready), 0.5)},
                        {"ready_ms_p99", Pct(col(&Trial::ready), 0.99)},
                        {"received_ms_p50", Pct(col(&Trial::received), 0.5)},
                        {"boundary_ms_p50", Pct(col(&Trial::boundary), 0.5)},
                        {"rendezvous_ms_p50", Pct(col(&Trial::rendezvous), 0.5)},
                        {"kv_rpcs_p50", Pct(col(&Trial::kv_rpcs), 0.5)},
                        {"kv_ms_p50", Pct(col(&Trial::kv_ms), 0.5)},
                        {"prepared_frac", Mean(col(&Trial::prepared))},
                        {"detect_ms", detect.empty() ? nlohmann::json(nullptr)
                                                     : nlohmann::json(Pct(detect, 0.5))}};
    std::cout << j.dump() << std::endl;
  }

  Flags f_;
  fs::path dir_;
  std::unique_ptr<ringmaster::server::CoordinatorServer> server_;
  std::map<std::string, pid_t> pids_;
  int next_ = 0;
  bool ok_ = true;
};

}  // namespace

int main(int argc, char** argv) {
  // A closed stdout (`| head -1`) must not kill the bench before its
  // destructor stops the workers.
  ::signal(SIGPIPE, SIG_IGN);
  Flags f;
  CLI::App app{"reform_bench: shim re-formation latency"};
  app.add_option("--trainer", f.trainer, "elastic_trainer binary")->required();
  app.add_option("--workers", f.workers, "members before the change")
      ->check(CLI::Range(2, 64));
  app.add_option("--kind", f.kind, "planned or kill9")
      ->check(CLI::IsMember({"planned", "kill9"}));
  app.add_option("--trials", f.trials, "trials")->check(CLI::PositiveNumber);
  app.add_option("--step-delay-ms", f.step_delay_ms, "trainer step time");
  app.add_flag("--keep-logs", f.keep_logs,
               "keep the workers' stderr and re-formation logs");
  CLI11_PARSE(app, argc, argv);
  Bench bench(f);
  return bench.Run();
}
