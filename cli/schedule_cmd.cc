// `ringmaster schedule`: runs the engine on a virtual clock over a cluster and
// a jobs file (each job with an optional `submit` and `duration`, in seconds)
// until nothing changes, printing a time-stamped event log (bind, shrink,
// grow, evict, finish) and then where every job went, or why it waits and
// when it is expected to start.
//
// The virtual clock ticks once per `--period` seconds. At each tick: jobs
// whose duration is over finish, members evicted `--release-after` seconds
// ago report that they are gone (a worker shim leaves at its next step
// boundary), jobs whose submit time has come arrive, then one cycle runs. It
// stops when no arrival, completion or release is left and nothing changed
// for `--settle` seconds (so idle-time growth can still happen).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/cluster_flags.h"
#include "cli/commands.h"
#include "plugins/registry.h"
#include "scheduler/engine.h"
#include "scheduler/job_file.h"

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

int Run(const ScheduleFlags& f) {
  auto registry = plugins::BuiltinRegistry();
  auto loaded = scheduler::LoadPolicyOrDefault(f.policy, registry);
  if (!loaded.ok()) {
    std::cerr << loaded.status().message() << "\n";
    return 2;
  }
  scheduler::Policy policy = *std::move(loaded);
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
  scheduler::ManualClock clock(0);
  scheduler::EngineOptions opts;
  opts.check_invariants = false;
  auto engine = scheduler::Engine::Create(*std::move(cluster), policy, registry, clock, opts);
  if (!engine.ok()) {
    std::cerr << engine.status().message() << "\n";
    return 2;
  }
  auto& e = **engine;
  const Timestamp period = std::max<Timestamp>(1, static_cast<Timestamp>(f.period_s * 1000));
  const Timestamp release_after = static_cast<Timestamp>(f.release_after_s * 1000);
  size_t next_job = 0;
  std::map<scheduler::JobId, Timestamp> ends;                          // running jobs with a duration
  std::set<std::tuple<Timestamp, scheduler::JobId, uint32_t>> leaves;  // evicted members' exits
  std::map<scheduler::JobId, Timestamp> durations;
  Timestamp quiet_since = 0;
  int binds = 0;
  if (!f.quiet) std::printf("%-8s %-7s %-16s %s\n", "TIME", "EVENT", "JOB", "DETAIL");
  for (int cycle = 0; cycle < f.max_cycles; ++cycle) {
    const Timestamp now = clock.Now();
    bool changed = false;
    for (auto it = ends.begin(); it != ends.end();) {
      if (it->second > now) {
        ++it;
        continue;
      }
      if (e.FinishJob(it->first, true).ok() && !f.quiet) {
        std::printf("%-8s %-7s %-16s ran its duration\n", Clock(now).c_str(), "finish", e.state().job(it->first).name().c_str());
      }
      it = ends.erase(it);
      changed = true;
    }
    while (!leaves.empty() && std::get<0>(*leaves.begin()) <= now) {
      const auto [at, job, task] = *leaves.begin();
      leaves.erase(leaves.begin());
      changed |= e.TaskReleased(job, task).ok();
    }
    while (next_job < jobs->size() && (*jobs)[next_job].submit_ms <= now) {
      const auto& tj = (*jobs)[next_job++];
      auto id = e.SubmitJob(tj.spec);
      if (!id.ok()) {
        std::cerr << f.jobs << ": " << id.status().message() << "\n";
        return 2;
      }
      if (tj.duration_ms >= 0) durations[*id] = tj.duration_ms;
      changed = true;
    }
    scheduler::Decisions d = e.RunCycle();
    if (f.check) {
      if (auto s = e.CheckInvariants(); !s.ok()) {
        std::cerr << Clock(now) << " cycle " << e.cycles() << ": invariant broken: " << s.message() << "\n";
        return 1;
      }
    }
    binds += static_cast<int>(d.binds.size());
    if (!f.quiet) PrintEvents(e, d, now);
    for (const auto& m : d.membership) {
      if (m.kind == scheduler::MembershipChange::Kind::kStart && durations.count(m.job)) {
        ends[m.job] = now + durations[m.job];
      }
    }
    for (const auto& ev : d.evictions) {
      if (ev.deadline > now) leaves.insert({std::min(ev.deadline, now + release_after), ev.job, ev.task});
    }
    changed |= !d.empty();
    if (changed) quiet_since = now;
    const bool pending_events = next_job < jobs->size() || !ends.empty() || !leaves.empty() || e.NextDeadline() >= 0;
    if (!pending_events && now - quiet_since >= static_cast<Timestamp>(f.settle_s * 1000)) break;
    clock.Advance(period);
  }
  const auto& st = e.state();
  std::cout << "\ncluster: " << st.cluster().num_nodes() << " nodes, " << st.cluster().total_gpus() << " GPUs, "
            << st.free_index().TotalFree() << " GPUs free at " << Clock(clock.Now()) << " after " << e.cycles()
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
  if (f.check) {
    if (auto s = e.CheckInvariants(); !s.ok()) {
      std::cerr << "invariant broken: " << s.message() << "\n";
      return 1;
    }
    std::cout << "\ninvariants: ok\n";
  }
  return 0;
}

}  // namespace

void RegisterScheduleCommand(CLI::App& app) {
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
  cmd->callback([flags] { ExitCode() = Run(*flags); });
}

}  // namespace ringmaster::cli
