// `ringmaster simulate --protocol fgd ...`: the FGD experiment protocol
// (simulator/fgd_protocol.h) on an openb node list and pod list. Writes
// OUT/summary.json and OUT/curve.csv (arrived_pct,alloc_pct,frag_pct).
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <vector>

#include "absl/strings/str_format.h"
#include "cli/commands.h"
#include "simulator/fgd_protocol.h"
#include "topology/node_lists.h"

namespace ringmaster::cli {
namespace {

struct SimulateFlags {
  std::string protocol;
  std::string nodes;
  std::string trace;
  std::string placement = "fgd";
  double tune = 1.3;
  uint64_t seed = 42;
  std::string out;
  std::string driver = "engine";
  std::string ties = "lowest";
  std::string fgd_score = "exact";
  double typical_pct = 100;
  int relearn_pct = 0;
  int half_life = 1;
  int nodes_to_score = scheduler::kDefaultNodesToScore;
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

int RunFgd(const SimulateFlags& f) {
  auto policy = topology::ParseSharePolicy(f.placement);
  if (!policy.ok()) {
    std::cerr << "--placement: " << policy.status().message() << "\n";
    return 2;
  }
  if (!(f.tune > 0 && f.tune <= 10)) {
    std::cerr << "--tune: must be in (0, 10]\n";
    return 2;
  }
  auto nodes = topology::ReadOpenbNodeList(f.nodes);
  if (!nodes.ok()) {
    std::cerr << nodes.status().message() << "\n";
    return 2;
  }
  auto pods = simulator::ReadOpenbPodList(f.trace);
  if (!pods.ok()) {
    std::cerr << pods.status().message() << "\n";
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  simulator::FgdOptions options{*policy, f.tune, f.seed};
  options.random_ties = f.ties == "random";
  options.authors_fgd_score = f.fgd_score == "authors";
  options.typical_pct = f.typical_pct;
  options.relearn_pct = f.relearn_pct;
  options.half_life = f.half_life;
  options.nodes_to_score = f.nodes_to_score;
  auto r = f.driver == "engine" ? simulator::RunFgdProtocolOnEngine(*nodes, *pods, options)
                                : simulator::RunFgdProtocol(*nodes, *pods, options);
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!r.ok()) {
    std::cerr << r.status().message() << "\n";
    return 1;
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
          << "  \"nodes_file\": " << Quote(f.nodes) << ",\n  \"trace_file\": " << Quote(f.trace) << ",\n"
          << absl::StrFormat("  \"tune\": %.4g,\n  \"seed\": %d,\n", f.tune, f.seed)
          << (f.driver == "engine"
                  ? absl::StrFormat("  \"nodes_to_score\": %d,\n  \"half_life\": %d,\n  \"relearn_pct\": %d,\n",
                                    f.nodes_to_score, f.half_life, f.relearn_pct)
                  : absl::StrFormat("  \"ties\": \"%s\",\n  \"fgd_score\": \"%s\",\n  \"typical_pct\": %.4g,\n",
                                    f.ties, f.fgd_score, f.typical_pct))
          << absl::StrFormat("  \"nodes\": %d,\n  \"gpus\": %d,\n  \"pods\": %d,\n  \"failed_pods\": %d,\n",
                             r->nodes, r->capacity_milli / topology::kMilliPerGpu, r->pods, r->failed_pods)
          << absl::StrFormat("  \"gpu_alloc_ratio\": %.4f,\n  \"arrived_ratio\": %.4f,\n  \"frag_pct\": %.4f,\n",
                             r->gpu_alloc_ratio, r->arrived_ratio, r->frag_pct)
          << absl::StrFormat("  \"sim_wall_s\": %.4f\n}\n", wall);
  std::ofstream curve(f.out + "/curve.csv");
  curve << "arrived_pct,alloc_pct,frag_pct\n";
  for (const auto& p : r->curve) {
    curve << absl::StrFormat("%.4f,%.4f,%.4f\n", p.arrived_pct, p.alloc_pct, p.frag_pct);
  }
  if (!summary || !curve) {
    std::cerr << f.out << ": write failed\n";
    return 1;
  }
  std::cout << absl::StrFormat("%s seed %d: alloc %.2f%% at %.2f%% arrived, %d of %d pods failed, %.3f s\n",
                               topology::SharePolicyName(*policy), f.seed, r->gpu_alloc_ratio,
                               r->arrived_ratio, r->failed_pods, r->pods, wall);
  return 0;
}

}  // namespace

void RegisterSimulateCommand(CLI::App& app) {
  auto f = std::make_shared<SimulateFlags>();
  CLI::App* sim = app.add_subcommand("simulate", "replay a workload on a simulated cluster");
  sim->add_option("--protocol", f->protocol, "experiment protocol: fgd (FGD, ATC'23)")
      ->required()
      ->check(CLI::IsMember({"fgd"}));
  sim->add_option("--nodes", f->nodes, "node list (openb CSV: sn,cpu_milli,memory_mib,gpu,model)")
      ->required();
  sim->add_option("--trace", f->trace, "pod list (openb CSV)")->required();
  sim->add_option("--placement", f->placement,
                  "fgd, bestfit, dotprod, gpuclustering, gpupacking or random");
  sim->add_option("--tune", f->tune, "arrivals stop at this multiple of GPU capacity (1.3)");
  sim->add_option("--seed", f->seed, "random seed (42)");
  sim->add_option("--out", f->out, "output folder for summary.json and curve.csv")->required();
  sim->add_option("--driver", f->driver,
                  "engine: one cycle of ringmaster's scheduler::Engine with the gpu-share plugin "
                  "per pod (default); direct: the FGD authors' loop, every node scored with the "
                  "policy functions (a fidelity replay)")
      ->check(CLI::IsMember({"direct", "engine"}));
  sim->add_option("--ties", f->ties,
                  "direct driver: lowest (lowest node index; default) or random (seeded draw among "
                  "the equal best nodes, as upstream Kubernetes)")
      ->check(CLI::IsMember({"random", "lowest"}));
  sim->add_option("--fgd-score", f->fgd_score,
                  "direct driver, placement fgd: authors (integer sigmoid score 0..100 as the "
                  "authors' plugin) or exact (the exact fragmentation gradient; default)")
      ->check(CLI::IsMember({"authors", "exact"}));
  sim->add_option("--typical-pct", f->typical_pct,
                  "FGD's workload: the most popular task classes covering this % of the pod list "
                  "(100: all, default; the FGD authors' runs: 95)")
      ->check(CLI::Range(1.0, 100.0));
  sim->add_option("--relearn-pct", f->relearn_pct,
                  "engine driver: gpu-share rebuilds its workload model once the pods seen since "
                  "reach this % of those it was built from (0: on every pod; default)")
      ->check(CLI::Range(0, 100));
  sim->add_option("--half-life", f->half_life,
                  "engine driver: gpu-share's halfLife, in pods (1, default; 0: never forget)")
      ->check(CLI::Range(0, 1000000));
  sim->add_option("--nodes-to-score", f->nodes_to_score,
                  "engine driver: the policy's nodesToScore (16, default; 0: every feasible node)")
      ->check(CLI::Range(0, 1000000));
  sim->callback([f, sim] {
    // An option of one driver given to the other would be silently ignored.
    const bool engine = f->driver == "engine";
    for (const char* opt : engine ? std::vector<const char*>{"--ties", "--fgd-score", "--typical-pct"}
                                  : std::vector<const char*>{"--relearn-pct", "--half-life", "--nodes-to-score"}) {
      if (sim->count(opt) > 0) {
        std::cerr << opt << ": applies to --driver " << (engine ? "direct" : "engine") << " only\n";
        ExitCode() = 2;
        return;
      }
    }
    ExitCode() = RunFgd(*f);
  });
}

}  // namespace ringmaster::cli
