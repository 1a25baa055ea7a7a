// `ringmaster simulate`: replays a workload on a simulated cluster through
// the engine. Two modes:
//   * trace replay (simulator/replay.h): --trace FILE [--format F] CLUSTER
//     [--policy FILE] [--seed S] [--out DIR] [--check] [--quiet]; writes
//     DIR/summary.json, jobs.csv, timeline.csv and stops.csv and prints a summary;
//   * --protocol fgd: the FGD experiment protocol (simulator/fgd_protocol.h)
//     on an openb node list and pod list, placed through the engine;
//     --driver direct is the FGD authors' loop as an engine configuration.
//     Writes OUT/summary.json, OUT/curve.csv (arrived_pct,alloc_pct,
//     frag_pct) and OUT/policy.yaml (the engine policy the run used).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/cluster_flags.h"
#include "cli/commands.h"
#include "common/status_macros.h"
#include "plugins/registry.h"
#include "scheduler/policy.h"
#include "simulator/app_model.h"
#include "simulator/fgd_protocol.h"
#include "simulator/replay.h"
#include "simulator/replay_plot.h"
#include "simulator/replay_report.h"
#include "simulator/trace.h"
#include "topology/node_lists.h"

namespace ringmaster::cli {
namespace {

struct SimulateFlags {
  std::string protocol;
  std::string format = "auto";
  std::string policy;
  bool check = false;
  bool no_fast_paths = false;
  bool plot = false;
  bool quiet = false;
  double cycle_period_s = 1;
  double comm_fraction = 0.1;
  double reform_pause_s = simulator::ReplayOptions{}.reform_pause_s;
  double restart_cost_s = simulator::ReplayOptions{}.restart_cost_s;
  double mtbf_s = 0;
  double mttr_s = 3600;
  ClusterFlags cluster;
  std::string trace;
  std::string apps;
  std::string placement = "fgd";
  double tune = 1.3;
  uint64_t seed = 42;
  std::string out;
  std::string driver = "engine";
  std::string ties = "planner";
  std::string fgd_score = "normalized";
  double typical_pct = 0;
  int relearn_pct = 0;
  int half_life = 1;
  int nodes_to_score = scheduler::kDefaultNodesToScore;
  simulator::TraceSlice slice;
};

// JSON string literal (the few characters paths may need escaped).
std::string Quote(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o.push_back('\\');
    o.push_back(c);
  }
  return o + "\"";
}

// The FGD protocol's openb node list: --cluster FILE, or the older --nodes
// FILE. Prints why and returns "" when neither names a file.
std::string FgdNodeList(const SimulateFlags& f) {
  const std::string& file = f.cluster.cluster_file.empty() ? f.cluster.nodes : f.cluster.cluster_file;
  if (file.empty() || !std::filesystem::is_regular_file(file)) {
    std::cerr << "--protocol fgd: give the openb node list with --cluster FILE\n";
    return "";
  }
  if (f.cluster.cluster_file.empty()) std::cerr << "--nodes FILE is deprecated; use --cluster " << file << "\n";
  return file;
}

// The protocol's options: --driver direct starts from the authors' loop
// (simulator::AuthorsLoop), then --ties, --fgd-score and --typical-pct given
// on the command line win.
simulator::FgdOptions FgdOptionsOf(const CLI::App& sim, const SimulateFlags& f, topology::SharePolicy policy) {
  simulator::FgdOptions o{policy, f.tune, f.seed};
  if (f.driver == "direct") o = simulator::AuthorsLoop(o);
  if (sim.count("--ties")) o.ties = f.ties;
  if (sim.count("--fgd-score")) o.score = f.fgd_score;
  if (sim.count("--typical-pct")) o.typical_pct = f.typical_pct;
  if (sim.count("--relearn-pct")) o.relearn_pct = f.relearn_pct;
  if (sim.count("--half-life")) o.half_life = f.half_life;
  if (sim.count("--nodes-to-score")) o.nodes_to_score = f.nodes_to_score;
  return o;
}

int RunFgd(const CLI::App& sim, const SimulateFlags& f) {
  auto policy = topology::ParseSharePolicy(f.placement);
  if (!policy.ok()) {
    std::cerr << "--placement: " << policy.status().message() << "\n";
    return 2;
  }
  if (!(f.tune > 0 && f.tune <= 10)) {
    std::cerr << "--tune: must be in (0, 10]\n";
    return 2;
  }
  const std::string nodes_file = FgdNodeList(f);
  if (nodes_file.empty()) return 2;
  auto nodes = topology::ReadOpenbNodeList(nodes_file);
  if (!nodes.ok()) {
    std::cerr << nodes.status().message() << "\n";
    return 2;
  }
  auto pods = simulator::ReadOpenbPodList(f.trace);
  if (!pods.ok()) {
    std::cerr << pods.status().message() << "\n";
    return 2;
  }
  const simulator::FgdOptions options = FgdOptionsOf(sim, f, *policy);
  const auto start = std::chrono::steady_clock::now();
  auto r = simulator::RunFgdProtocol(*nodes, *pods, options);
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!r.ok()) {
    std::cerr << r.status().message() << "\n";
    return 1;
  }
  if (f.out.empty()) {
    std::cerr << "--out: required with --protocol fgd\n";
    return 2;
  }
  std::error_code ec;
  std::filesystem::create_directories(f.out, ec);
  if (ec) {
    std::cerr << f.out << ": cannot create: " << ec.message() << "\n";
    return 1;
  }
  std::ofstream summary(f.out + "/summary.json");
  summary << "{\n"
          << absl::StrFormat("  \"protocol\": \"fgd\",\n  \"driver\": \"%s\",\n  \"placement\": \"%s\",\n",
                             f.driver, topology::SharePolicyName(*policy))
          << "  \"nodes_file\": " << Quote(nodes_file) << ",\n  \"trace_file\": " << Quote(f.trace) << ",\n"
          << absl::StrFormat("  \"tune\": %.4g,\n  \"seed\": %d,\n", f.tune, f.seed)
          << absl::StrFormat("  \"nodes_to_score\": %d,\n  \"ties\": \"%s\",\n  \"fgd_score\": \"%s\",\n",
                             options.nodes_to_score, options.ties, options.score)
          << (options.typical_pct > 0
                  ? absl::StrFormat("  \"typical_pct\": %.4g,\n", options.typical_pct)
                  : absl::StrFormat("  \"half_life\": %d,\n  \"relearn_pct\": %d,\n", options.half_life,
                                    options.relearn_pct))
          << absl::StrFormat("  \"nodes\": %d,\n  \"gpus\": %d,\n  \"pods\": %d,\n  \"failed_pods\": %d,\n",
                             r->nodes, r->capacity_milli / topology::kMilliPerGpu, r->pods, r->failed_pods)
          << absl::StrFormat("  \"gpu_alloc_ratio\": %.4f,\n  \"arrived_ratio\": %.4f,\n  \"frag_pct\": %.4f,\n",
                             r->gpu_alloc_ratio, r->arrived_ratio, r->frag_pct)
          << absl::StrFormat("  \"sim_wall_s\": %.4f\n}\n", wall);
  // The engine policy the run used: `ringmaster policy check` reads it.
  std::ofstream policy_file(f.out + "/policy.yaml");
  policy_file << simulator::FgdPolicyYaml(*pods, options);
  std::ofstream curve(f.out + "/curve.csv");
  curve << "arrived_pct,alloc_pct,frag_pct\n";
  for (const auto& p : r->curve) {
    curve << absl::StrFormat("%.4f,%.4f,%.4f\n", p.arrived_pct, p.alloc_pct, p.frag_pct);
  }
  if (!summary || !curve || !policy_file) {
    std::cerr << f.out << ": write failed\n";
    return 1;
  }
  std::cout << absl::StrFormat("%s seed %d: alloc %.2f%% at %.2f%% arrived, %d of %d pods failed, %.3f s\n",
                               topology::SharePolicyName(*policy), f.seed, r->gpu_alloc_ratio,
                               r->arrived_ratio, r->failed_pods, r->pods, wall);
  return 0;
}

// A progress bar with ETA on stderr, drawn at most every 0.2 s once the run
// has taken a second.
class ProgressBar {
 public:
  void Update(int64_t done, int64_t total) {
    const double elapsed = Elapsed();
    if (elapsed < 1 || elapsed - last_ < 0.2 || total == 0) return;
    last_ = elapsed;
    const double frac = static_cast<double>(done) / total;
    const int filled = static_cast<int>(frac * 30);
    const double eta = frac > 0 ? elapsed * (1 - frac) / frac : 0;
    std::cerr << "\r[" << std::string(filled, '#') << std::string(30 - filled, '.') << "] "
              << absl::StrFormat("%5.1f%%  %d/%d jobs  ETA %.0f s ", frac * 100, done, total, eta) << std::flush;
    drawn_ = true;
  }
  ~ProgressBar() {
    if (drawn_) std::cerr << "\r" << std::string(70, ' ') << "\r" << std::flush;
  }

 private:
  double Elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  double last_ = 0;
  bool drawn_ = false;
};

void PrintSummary(const simulator::ReplayResult& r, const simulator::RunInfo& info) {
  const simulator::ReplayStats s = simulator::StatsOf(r);
  std::cout << absl::StrFormat("trace %s (%s) on %d GPUs, policy %s, seed %d\n", info.trace, info.format,
                               r.total_gpus, info.policy, info.seed)
            << absl::StrFormat("jobs         %d total, %d completed, %d never finished\n", s.jobs_total,
                               s.jobs_completed, s.jobs_total - s.jobs_completed - s.jobs_failed)
            << absl::StrFormat("JCT          avg %.1f s, p50 %.1f, p95 %.1f, p99 %.1f\n", s.avg_jct_s, s.p50_jct_s,
                               s.p95_jct_s, s.p99_jct_s)
            << absl::StrFormat("queue delay  avg %.1f s, p99 %.1f\n", s.avg_queue_delay_s, s.p99_queue_delay_s)
            << absl::StrFormat("makespan     %.1f s, GPU allocation %.2f%%, cross-tier jobs %d\n", s.makespan_s,
                               s.gpu_alloc_ratio * 100, s.cross_tier_jobs)
            << absl::StrFormat("stops        %d evictions (%d preemptions), %d shrinks, %d grows, %d node failures\n",
                               s.evictions, s.preemptions, s.shrinks, s.grows, r.node_failures)
            << absl::StrFormat("engine       %d cycles, %d events in %.3f s wall (%.0f events/s)\n", r.cycles,
                               r.events, info.sim_wall_s, info.sim_wall_s > 0 ? r.events / info.sim_wall_s : 0);
}

// Runs `gnuplot plots.gp` inside `dir`; false (with a message) when it fails.
bool RunGnuplot(const std::string& dir) {
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    if (chdir(dir.c_str()) != 0) _exit(126);
    execlp("gnuplot", "gnuplot", "plots.gp", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return false;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return true;
  std::cerr << "--plot: gnuplot failed"
            << (WIFEXITED(status) && WEXITSTATUS(status) == 127 ? " (not installed? scripts/setup.sh installs gnuplot-nox)" : "")
            << "; the script is " << dir << "/plots.gp\n";
  return false;
}

// The trace's jobs that `slice` keeps, and its format (detected when
// `format` is kAuto).
absl::StatusOr<std::pair<std::vector<simulator::TraceJob>, simulator::TraceFormat>> LoadTrace(
    const std::string& path, simulator::TraceFormat format, const simulator::TraceSlice& slice) {
  RM_ASSIGN_OR_RETURN(auto text, topology::ReadTextFile(path));
  if (format == simulator::TraceFormat::kAuto) {
    RM_ASSIGN_OR_RETURN(format, simulator::DetectTraceFormat(text, path));
  }
  RM_ASSIGN_OR_RETURN(auto jobs, simulator::ParseTraceSlice(text, path, format, slice));
  return std::pair{std::move(jobs), format};
}

int RunReplay(const SimulateFlags& f) {
  auto format = simulator::ParseTraceFormat(f.format);
  if (!format.ok()) {
    std::cerr << "--format: " << format.status().message() << "\n";
    return 2;
  }
  std::string notes;
  auto cluster = BuildCluster(f.cluster, &notes);
  std::cerr << notes;
  if (!cluster.ok()) {
    std::cerr << cluster.status().message() << "\n";
    return 2;
  }
  auto policy = scheduler::LoadPolicyOrDefault(f.policy, plugins::BuiltinRegistry());
  if (!policy.ok()) {
    std::cerr << policy.status().message() << "\n";
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  auto trace = LoadTrace(f.trace, *format, f.slice);
  if (!trace.ok()) {
    std::cerr << trace.status().message() << "\n";
    return 2;
  }
  format = trace->second;
  simulator::AppModels models;
  if (!f.apps.empty()) {
    auto loaded = simulator::LoadAppModels(f.apps);
    if (!loaded.ok()) {
      std::cerr << loaded.status().message() << "\n";
      return 2;
    }
    models = *std::move(loaded);
  }
  const bool elastic = std::find(policy->actions.begin(), policy->actions.end(), "elastic") != policy->actions.end();
  if (auto s = simulator::AttachAppModels(trace->first, models, elastic, f.trace); !s.ok()) {
    std::cerr << s.message() << "\n";
    return 2;
  }
  simulator::ReplayOptions o;
  o.seed = f.seed;
  o.check = f.check;
  o.fast_paths = !f.no_fast_paths;
  o.cycle_period_s = f.cycle_period_s;
  o.comm_fraction = f.comm_fraction;
  o.reform_pause_s = f.reform_pause_s;
  o.restart_cost_s = f.restart_cost_s;
  o.node_mtbf_s = f.mtbf_s;
  o.node_mttr_s = f.mttr_s;
  std::optional<ProgressBar> bar;
  if (!f.quiet && isatty(STDERR_FILENO)) {
    bar.emplace();
    o.progress = [&bar](int64_t, int64_t done, int64_t total) { bar->Update(done, total); };
  }
  auto r = simulator::Replay(*std::move(cluster), *std::move(policy), trace->first, f.trace, o);
  bar.reset();
  if (!r.ok()) {
    std::cerr << r.status().message() << "\n";
    return 2;
  }
  const simulator::RunInfo info{
      f.trace,
      std::string(simulator::TraceFormatName(*format)),
      f.policy.empty() ? "default" : f.policy, f.seed,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
  if (f.plot && f.out.empty()) {
    std::cerr << "--plot: needs --out DIR\n";
    return 2;
  }
  if (!f.out.empty()) {
    if (auto s = simulator::WriteReplayOutputs(f.out, *r, info); !s.ok()) {
      std::cerr << s.message() << "\n";
      return 1;
    }
  }
  PrintSummary(*r, info);
  if (f.plot) {
    const std::string title = std::filesystem::path(f.trace).filename().string();
    if (auto s = simulator::WritePlotInputs(f.out, *r, title); !s.ok()) {
      std::cerr << s.message() << "\n";
      return 1;
    }
    if (!RunGnuplot(f.out)) return 1;
    std::cout << "plots: " << f.out << "/alloc.png, jct_cdf.png, queue_delay.png\n";
  }
  if (r->violation) {
    std::cerr << absl::StrFormat("invariant broken after cycle %d at t=%.3f s: %s\njobs of that cycle: %s\n",
                                 r->violation->cycle, r->violation->time_ms / 1000.0, r->violation->message,
                                 absl::StrJoin(r->violation->jobs, ", "));
    return 1;
  }
  if (f.check) std::cout << "invariants: ok after every cycle\n";
  return 0;
}

void AddFgdFlags(CLI::App& sim, SimulateFlags& f) {
  sim.add_option("--placement", f.placement, "fgd protocol: fgd, bestfit, dotprod, gpuclustering, gpupacking or random");
  sim.add_option("--tune", f.tune, "fgd protocol: arrivals stop at this multiple of GPU capacity (1.3)");
  sim.add_option("--driver", f.driver,
                 "fgd protocol, placement always through ringmaster's engine (one cycle per pod, gpu-share "
                 "places). engine (default): ringmaster's scheduler; direct: the FGD authors' loop as an "
                 "engine configuration (a fidelity replay): --nodes-to-score 0, --ties lowest, "
                 "--fgd-score exact, --typical-pct 100 unless given")
      ->check(CLI::IsMember({"direct", "engine"}));
  sim.add_option("--ties", f.ties,
                 "fgd protocol, gpu-share's ties: planner (the earlier candidate in best-fit order; engine "
                 "default), lowest (lowest node index; direct default) or random (seeded draw among the equal "
                 "best nodes, as upstream Kubernetes)")
      ->check(CLI::IsMember({"planner", "random", "lowest"}));
  sim.add_option("--fgd-score", f.fgd_score,
                 "fgd protocol, gpu-share's score: normalized (engine default), exact (the policy's score; "
                 "direct default) or authors (placement fgd: the FGD authors' integer sigmoid score 0..100)")
      ->check(CLI::IsMember({"normalized", "authors", "exact"}));
  sim.add_option("--typical-pct", f.typical_pct,
                 "fgd protocol: gpu-share is given FGD's workload, the most popular task classes covering "
                 "this % of the pod list (the FGD authors' runs: 95; direct default 100); absent: learned")
      ->check(CLI::Range(1.0, 100.0));
  sim.add_option("--relearn-pct", f.relearn_pct,
                 "fgd protocol, learned workload: gpu-share rebuilds its model once the pods seen since "
                 "reach this % of those it was built from (0: on every pod; default)")
      ->check(CLI::Range(0, 100));
  sim.add_option("--half-life", f.half_life,
                 "fgd protocol, learned workload: gpu-share's halfLife, in pods (1, default; 0: never forget)")
      ->check(CLI::Range(0, 1000000));
  sim.add_option("--nodes-to-score", f.nodes_to_score,
                 "fgd protocol: the policy's nodesToScore (16, default; 0: every feasible node; direct: 0)")
      ->check(CLI::Range(0, 1000000));
}

// An option of one mode (or driver) given to the other would be silently
// ignored: refuse it. Returns the exit code (0: fine).
int CheckModeFlags(const CLI::App& sim, const SimulateFlags& f) {
  const bool fgd = !f.protocol.empty();
  const bool engine = f.driver == "engine";
  const std::vector<const char*> fgd_only = {"--placement", "--tune", "--driver", "--ties", "--fgd-score",
                                             "--typical-pct", "--relearn-pct", "--half-life", "--nodes-to-score"};
  const std::vector<const char*> replay_only = {"--format", "--policy", "--check", "--no-fast-paths", "--plot", "--quiet", "--cycle-period",
                                                "--comm-fraction", "--reform-pause", "--restart-cost", "--mtbf", "--mttr", "--gpus-per-node", "--nodes-per-rack",
                                                "--racks-per-spine", "--apps", "--from", "--until", "--max-jobs", "--one-queue",
                                                "--walltime-oracle", "--checkpoint-interval"};
  for (const char* opt : fgd ? replay_only : fgd_only) {
    if (sim.count(opt) > 0) {
      std::cerr << opt << (fgd ? ": applies to a trace replay only (not --protocol fgd)\n"
                               : ": applies to --protocol fgd only\n");
      return 2;
    }
  }
  if (!fgd) return 0;
  // --driver direct sets nodesToScore; a given workload is not learned.
  if (!engine && sim.count("--nodes-to-score") > 0) {
    std::cerr << "--nodes-to-score: --driver direct scores every node (nodesToScore 0)\n";
    return 2;
  }
  const bool given_workload = !engine || sim.count("--typical-pct") > 0;
  for (const char* opt : {"--relearn-pct", "--half-life"}) {
    if (given_workload && sim.count(opt) > 0) {
      std::cerr << opt << ": applies to a learned workload only (not with "
                << (engine ? "--typical-pct" : "--driver direct") << ", which gives gpu-share the workload)\n";
      return 2;
    }
  }
  return 0;
}

}  // namespace

void RegisterSimulateCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<SimulateFlags>();
  CLI::App* sim = app.add_subcommand("simulate", "replay a trace (or the FGD protocol) on a simulated cluster");
  sim->add_option("--trace", f->trace, "trace file (docs/TRACE_FORMAT.md; with --protocol fgd an openb pod list)")
      ->required();
  sim->add_option("--format", f->format,
                  "trace format: auto, native, philly, gavel, tiresias, alibaba2023, dlrm2025, pollux");
  sim->add_option("--apps", f->apps,
                  "folder of application models (one subfolder each: placements.csv, scalability.csv, "
                  "validation-<B>.csv; docs/TRACE_FORMAT.md) for the jobs whose trace names an application")
      ->check(CLI::ExistingDirectory);
  AddClusterFlags(*sim, f->cluster);
  sim->add_option("--policy", f->policy, "policy file (YAML); built-in default when absent")->check(CLI::ExistingFile);
  sim->add_option("--seed", f->seed, "random seed (42)");
  sim->add_option("--out", f->out, "output folder (summary.json, jobs.csv, timeline.csv, stops.csv)");
  sim->add_flag("--check", f->check, "check every invariant after each cycle; stop at the first violation");
  sim->add_flag("--no-fast-paths", f->no_fast_paths,
                "try every waiting gang and run every wake-up cycle (the same decisions, slower: for comparisons)");
  sim->add_flag("--plot", f->plot, "draw alloc.png, jct_cdf.png and queue_delay.png in --out with gnuplot");
  sim->add_flag("--quiet", f->quiet, "no progress bar");
  sim->add_option("--cycle-period", f->cycle_period_s, "seconds between scheduling cycles (1)")
      ->check(CLI::Range(0.001, 86400.0));
  sim->add_option("--comm-fraction", f->comm_fraction,
                  "share of a job's step spent in all-reduce, when the trace gives none (0.1)")
      ->check(CLI::Range(0.0, 1.0));
  sim->add_option("--reform-pause", f->reform_pause_s,
                  "seconds without progress after a job's resize (shrink, grow, a lost node) while its "
                  "gang re-forms, for jobs whose trace gives no reform_pause_s (5)")
      ->check(CLI::Range(0.0, 1e9));
  sim->add_option("--restart-cost", f->restart_cost_s,
                  "seconds added to a stopped job's remaining time when it starts again (30)")
      ->check(CLI::Range(0.0, 1e9));
  sim->add_option("--mtbf", f->mtbf_s, "failure injection: each node's mean time between failures, s (0: none)")
      ->check(CLI::Range(0.0, 1e12));
  sim->add_option("--mttr", f->mttr_s, "failure injection: mean time to repair a failed node, s (3600)")
      ->check(CLI::Range(0.001, 1e12));
  sim->add_option("--from", f->slice.from_s, "replay the jobs submitted from this second of the trace on (0)")
      ->check(CLI::Range(0.0, 1e12));
  sim->add_option("--until", f->slice.until_s, "... and before this second (the end)")->check(CLI::Range(0.0, 1e12));
  sim->add_option("--max-jobs", f->slice.max_jobs, "at most this many jobs, the first submitted (all)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  sim->add_option("--one-queue", f->slice.one_queue, "put every job in this queue (ignore the trace's queues)");
  sim->add_flag("--walltime-oracle", f->slice.walltime_oracle,
                "a job without a walltime gets its traced duration as walltime (for sjf and backfill)");
  sim->add_option("--checkpoint-interval", f->slice.checkpoint_interval_s,
                  "seconds between checkpoints of jobs whose trace gives none (0: none; a stopped job "
                  "restarts from its last checkpoint)")
      ->check(CLI::Range(0.0, 1e12));
  sim->add_option("--protocol", f->protocol, "experiment protocol instead of a trace replay: fgd (FGD, ATC'23)")
      ->check(CLI::IsMember({"fgd"}));
  AddFgdFlags(*sim, *f);
  sim->callback([f, sim, exit_code] {
    const bool fgd = !f->protocol.empty();
    if (const int bad = CheckModeFlags(*sim, *f); bad != 0) {
      *exit_code = bad;
      return;
    }
    *exit_code = fgd ? RunFgd(*sim, *f) : RunReplay(*f);
  });
}

}  // namespace ringmaster::cli
