// `ringmaster schedule`: runs the engine on a virtual clock over a cluster and
// a jobs file (each job with an optional `submit` and `duration`, in seconds)
// until nothing changes, printing a time-stamped event log (bind, shrink,
// grow, evict, finish) and then where every job went, or why it waits and
// when it is expected to start.
//
// The clock is the trace replay's (simulator::Replay: one event loop for
// `schedule` and `simulate`). Cycles run at multiples of `--period` seconds
// after anything changed, and every period while a job waits or could grow.
// At each instant: jobs whose duration is over finish, members evicted
// `--release-after` seconds ago report that they are gone (a worker shim
// leaves at its next step boundary), jobs whose submit time has come arrive,
// then the cycle runs. It stops when no arrival, completion or release is
// left and nothing changed for `--settle` seconds (so idle-time growth can
// still happen), or nothing could change any more.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/cluster_flags.h"
#include "cli/commands.h"
#include "plugins/registry.h"
#include "scheduler/engine.h"
#include "scheduler/job_file.h"
#include "simulator/replay.h"

namespace ringmaster::cli {
namespace {

using scheduler::Timestamp;

struct ScheduleFlags {
  ClusterFlags cluster;
  std::string jobs;
  std::string policy;
  int max_cycles = 100000;
  double period_s = 1;
  double release_after_s = 2;
  double settle_s = 300;
  bool check = false;
  bool quiet = false;
};

std::string Placement(const scheduler::State& st, const scheduler::Job& job) {
  // node-0001[0-7] x2, ...
  std::map<std::string, std::vector<int>> per_node;
  for (const auto& t : job.tasks()) {
    if (!scheduler::HoldsNode(t.state) || t.state == scheduler::TaskState::kReleasing) continue;
    auto& g = per_node[st.cluster().node(t.node).name];
    for (int16_t d : t.gpus) g.push_back(d);
    if (t.gpus.empty()) g.push_back(-1);
  }
  std::vector<std::string> parts;
  for (auto& [node, gpus] : per_node) {
    std::sort(gpus.begin(), gpus.end());
    // Runs of consecutive devices as ranges: [0-3,6].
    std::vector<std::string> ids;
    for (size_t k = 0; k < gpus.size();) {
      if (gpus[k] < 0) {
        ++k;
        continue;
      }
      size_t e = k;
      while (e + 1 < gpus.size() && gpus[e + 1] == gpus[e] + 1) ++e;
      ids.push_back(e == k ? absl::StrCat(gpus[k]) : absl::StrCat(gpus[k], "-", gpus[e]));
      k = e + 1;
    }
    parts.push_back(ids.empty() ? node : absl::StrCat(node, "[", absl::StrJoin(ids, ","), "]"));
  }
  return absl::StrJoin(parts, " ");
}

std::string Clock(Timestamp ms) { return absl::StrFormat("t=%.0fs", static_cast<double>(ms) / 1000.0); }

// One line per job and kind of event in a cycle's decisions.
void PrintEvents(const scheduler::Engine& e, const scheduler::Decisions& d, Timestamp now) {
  const auto& st = e.state();
  std::map<std::pair<std::string, std::string>, std::vector<const scheduler::Eviction*>> stops;
  for (const auto& ev : d.evictions) {
    stops[{st.job(ev.job).name(), std::string(scheduler::EvictionKindName(ev.kind))}].push_back(&ev);
  }
  for (const auto& [key, list] : stops) {
    const auto* first = list.front();
    std::string by;
    if (first->deadline > now) by = absl::StrCat(", gone by ", Clock(first->deadline));
    std::printf("%-8s %-7s %-16s %zu task%s: %s%s\n", Clock(now).c_str(), key.second.c_str(), key.first.c_str(),
                list.size(), list.size() == 1 ? "" : "s", first->reason.c_str(), by.c_str());
  }
  for (const auto& m : d.membership) {
    const auto& job = st.job(m.job);
    const char* what = m.kind == scheduler::MembershipChange::Kind::kStart  ? "bind"
                       : m.kind == scheduler::MembershipChange::Kind::kGrow ? "grow"
                       : m.kind == scheduler::MembershipChange::Kind::kShrink ? "resize"
                                                                              : "failure";
    std::printf("%-8s %-7s %-16s generation %lld, %zu member%s: %s\n", Clock(now).c_str(), what, job.name().c_str(),
                static_cast<long long>(m.generation), m.members.size(), m.members.size() == 1 ? "" : "s",
                m.kind == scheduler::MembershipChange::Kind::kShrink ? m.reason.c_str() : Placement(st, job).c_str());
  }
}

// The final table: where every job went, or why it waits and when it is
// expected to start.
void PrintTable(const scheduler::Engine& e, Timestamp now, int binds, bool check) {
  const auto& st = e.state();
  std::cout << "\ncluster: " << st.cluster().num_nodes() << " nodes, " << st.cluster().total_gpus() << " GPUs, "
            << st.free_index().TotalFree() << " GPUs free at " << Clock(now) << " after " << e.cycles()
            << " cycles, " << binds << " tasks bound\n\n";
  std::printf("%-22s %-10s %-9s %-7s %s\n", "JOB", "QUEUE", "STATE", "TASKS", "PLACEMENT / REASON");
  for (uint32_t i = 0; i < st.num_jobs(); ++i) {
    const auto& job = st.job(scheduler::JobId(i));
    const std::string tasks = absl::StrCat(job.ReadyCount(), "/", job.tasks().size());
    std::string where;
    if (job.phase() == scheduler::JobPhase::kRunning) {
      where = Placement(st, job);
    } else if (job.phase() == scheduler::JobPhase::kCompleted) {
      where = "finished";
    } else {
      const Timestamp at = e.ExpectedStart(job.id());
      where = absl::StrCat(job.pending_reason(), at >= 0 ? absl::StrCat(" (expected start ", Clock(at), ")")
                                                         : std::string(" (expected start unknown)"));
    }
    std::printf("%-22s %-10s %-9s %-7s %s\n", job.name().c_str(), job.spec().queue.c_str(),
                std::string(scheduler::PhaseName(job.phase())).c_str(), tasks.c_str(), where.c_str());
  }
  if (check) std::cout << "\ninvariants: ok\n";
}

// The jobs file replayed by the simulator's driver (simulator/replay.h, the
// one virtual-clock event loop), with the jobs file's model of time: a job
// ends `duration` after it starts whatever its size, and an evicted gang
// runs its duration again from the start (unless it checkpoints).
int Run(const ScheduleFlags& f) {
  auto registry = plugins::BuiltinRegistry();
  auto loaded = scheduler::LoadPolicyOrDefault(f.policy, registry);
  if (!loaded.ok()) {
    std::cerr << loaded.status().message() << "\n";
    return 2;
  }
  std::string notes;
  auto cluster = BuildCluster(f.cluster, &notes);
  std::cerr << notes;
  if (!cluster.ok()) {
    std::cerr << cluster.status().message() << "\n";
    return 2;
  }
  auto jobs = scheduler::LoadTimedJobFile(f.jobs);
  if (!jobs.ok()) {
    std::cerr << jobs.status().message() << "\n";
    return 2;
  }
  simulator::ReplayOptions o;
  o.cycle_period_s = f.period_s;
  o.wake_period_s = f.period_s;  // a cycle every period while a job waits or could grow
  o.settle_s = f.settle_s;
  o.max_cycles = f.max_cycles;
  o.release_after_s = f.release_after_s;
  o.speed_scales_with_size = false;
  o.reform_pause_s = 0;
  o.restart_cost_s = 0;
  o.queues_from_trace = false;
  o.check = f.check;
  int binds = 0;
  o.on_cycle = [&](const scheduler::Engine& e, const scheduler::Decisions& d, int64_t now) {
    binds += static_cast<int>(d.binds.size());
    if (!f.quiet) PrintEvents(e, d, now);
  };
  o.on_finish = [&](const scheduler::Engine& e, scheduler::JobId id, int64_t now) {
    if (!f.quiet) {
      std::printf("%-8s %-7s %-16s ran its duration\n", Clock(now).c_str(), "finish", e.state().job(id).name().c_str());
    }
  };
  o.on_end = [&](const scheduler::Engine& e, int64_t now) {
    if (f.check && !e.CheckInvariants().ok()) return;  // reported below instead
    PrintTable(e, now, binds, f.check);
  };
  if (!f.quiet) std::printf("%-8s %-7s %-16s %s\n", "TIME", "EVENT", "JOB", "DETAIL");
  auto r = simulator::Replay(*std::move(cluster), *std::move(loaded), simulator::TraceOfJobFile(*jobs), f.jobs, o);
  if (!r.ok()) {
    std::cerr << r.status().message() << "\n";
    return 2;
  }
  if (r->violation) {
    std::cerr << Clock(r->violation->time_ms) << " cycle " << r->violation->cycle
              << ": invariant broken: " << r->violation->message << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

void RegisterScheduleCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<ScheduleFlags>();
  CLI::App* cmd = app.add_subcommand("schedule", "run the engine on a virtual clock over a cluster and a jobs file");
  AddClusterFlags(*cmd, flags->cluster);
  cmd->add_option("--jobs", flags->jobs, "jobs file (YAML; scheduler/job_file.h)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--policy", flags->policy, "policy file (YAML); built-in default when absent")
      ->check(CLI::ExistingFile);
  cmd->add_option("--period", flags->period_s, "seconds between scheduling cycles (1)")->check(CLI::Range(0.001, 3600.0));
  cmd->add_option("--release-after", flags->release_after_s,
                  "seconds an evicted member takes to exit, at most its grace period (2)")
      ->check(CLI::Range(0.0, 86400.0));
  cmd->add_option("--settle", flags->settle_s, "stop after this many quiet seconds with no event left (300)")
      ->check(CLI::Range(0.0, 1e7));
  cmd->add_option("--max-cycles", flags->max_cycles, "stop after this many cycles")->check(CLI::Range(1, 10000000));
  cmd->add_flag("--check", flags->check, "check every invariant after each cycle");
  cmd->add_flag("--quiet", flags->quiet, "no event log, only the final table");
  cmd->callback([flags, exit_code] { *exit_code = Run(*flags); });
}

}  // namespace ringmaster::cli
