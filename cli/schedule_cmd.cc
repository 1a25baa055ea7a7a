// `ringmaster schedule`: runs the engine on a synthetic cluster and a jobs
// file until nothing changes, then prints where every job went or why it
// waits.
#include <algorithm>
#include <iostream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "plugins/registry.h"
#include "scheduler/engine.h"
#include "scheduler/job_file.h"
#include "topology/cluster_file.h"
#include "topology/uniform_cluster.h"

namespace ringmaster::cli {
namespace {

struct ScheduleFlags {
  topology::UniformClusterSpec cluster;
  std::string cluster_file;
  std::string jobs;
  std::string policy;
  int max_cycles = 100;
  bool check = false;
};

std::string Placement(const scheduler::State& st, const scheduler::Job& job) {
  // node-0001[0-7] x2, ...
  std::map<std::string, std::vector<int>> per_node;
  for (const auto& t : job.tasks()) {
    if (!scheduler::HoldsNode(t.state)) continue;
    auto& g = per_node[st.cluster().node(t.node).name];
    for (int16_t d : t.gpus) g.push_back(d);
    if (t.gpus.empty()) g.push_back(-1);
  }
  std::vector<std::string> parts;
  for (auto& [node, gpus] : per_node) {
    std::sort(gpus.begin(), gpus.end());
    std::vector<std::string> ids;
    for (int d : gpus) {
      if (d >= 0) ids.push_back(absl::StrCat(d));
    }
    parts.push_back(ids.empty() ? node : absl::StrCat(node, "[", absl::StrJoin(ids, ","), "]"));
  }
  return absl::StrJoin(parts, " ");
}

int Run(const ScheduleFlags& f) {
  auto registry = plugins::BuiltinRegistry();
  scheduler::Policy policy = scheduler::DefaultPolicy();
  if (!f.policy.empty()) {
    std::vector<queue::ConfigError> errors;
    auto p = scheduler::LoadPolicyFile(f.policy, registry, &errors);
    if (!p.ok()) {
      std::cerr << p.status().message() << "\n";
      return 2;
    }
    policy = *std::move(p);
  }
  auto cluster = f.cluster_file.empty() ? topology::MakeUniformCluster(f.cluster)
                                        : topology::LoadClusterFile(f.cluster_file);
  if (!cluster.ok()) {
    std::cerr << cluster.status().message() << "\n";
    return 2;
  }
  auto jobs = scheduler::LoadJobFile(f.jobs);
  if (!jobs.ok()) {
    std::cerr << jobs.status().message() << "\n";
    return 2;
  }
  scheduler::ManualClock clock(0);
  scheduler::EngineOptions opts;
  opts.check_invariants = f.check;
  auto engine = scheduler::Engine::Create(*std::move(cluster), policy, registry, clock, opts);
  if (!engine.ok()) {
    std::cerr << engine.status().message() << "\n";
    return 2;
  }
  auto& e = **engine;
  for (auto& spec : *jobs) {
    auto id = e.SubmitJob(spec);
    if (!id.ok()) {
      std::cerr << id.status().message() << "\n";
      return 2;
    }
    clock.Advance(1);
  }
  int cycles = 0;
  int binds = 0;
  for (; cycles < f.max_cycles; ++cycles) {
    scheduler::Decisions d = e.RunCycle();
    binds += static_cast<int>(d.binds.size());
    clock.Advance(1000);
    if (d.empty() && cycles > 0) break;
  }
  const auto& st = e.state();
  std::cout << "cluster: " << st.cluster().num_nodes() << " nodes, " << st.cluster().total_gpus()
            << " GPUs, " << st.free_index().TotalFree() << " GPUs free after " << e.cycles()
            << " cycles, " << binds << " tasks bound\n\n";
  std::printf("%-22s %-10s %-9s %-7s %s\n", "JOB", "QUEUE", "STATE", "TASKS", "PLACEMENT / REASON");
  for (uint32_t i = 0; i < st.num_jobs(); ++i) {
    const auto& job = st.job(scheduler::JobId(i));
    const std::string tasks = absl::StrCat(job.ReadyCount(), "/", job.tasks().size());
    const std::string where = job.phase() == scheduler::JobPhase::kRunning
                                  ? Placement(st, job)
                                  : job.pending_reason();
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
  CLI::App* cmd = app.add_subcommand("schedule", "run scheduling cycles on a cluster and a jobs file");
  cmd->add_option("--nodes", flags->cluster.nodes, "number of nodes")->check(CLI::Range(1, 1000000));
  cmd->add_option("--gpus-per-node", flags->cluster.gpus_per_node, "GPUs per node")->check(CLI::Range(0, 64));
  cmd->add_option("--nodes-per-rack", flags->cluster.nodes_per_rack, "nodes per rack (tier 1)")
      ->check(CLI::Range(0, 1000000));
  cmd->add_option("--racks-per-spine", flags->cluster.racks_per_spine, "racks per spine (tier 2; 0: none)")
      ->check(CLI::Range(0, 1000000));
  cmd->add_option("--cluster", flags->cluster_file, "cluster file (YAML); replaces the --nodes shape")
      ->check(CLI::ExistingFile);
  cmd->add_option("--jobs", flags->jobs, "jobs file (YAML)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--policy", flags->policy, "policy file (YAML); built-in default when absent")
      ->check(CLI::ExistingFile);
  cmd->add_option("--max-cycles", flags->max_cycles, "stop after this many cycles")->check(CLI::Range(1, 100000));
  cmd->add_flag("--check", flags->check, "check every invariant after each cycle");
  cmd->callback([flags] { ExitCode() = Run(*flags); });
}

}  // namespace ringmaster::cli
