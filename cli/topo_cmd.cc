// `ringmaster topo ...`: tools for the cluster description.
//   topo import-nvidia-smi FILE   parse `nvidia-smi topo -m` output and print
//                                 the `links:` block of a cluster-file node
//                                 group (NVLink islands, PCIe switches, NUMA).
//   topo check FILE               load a cluster file and summarize it.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "topology/cluster_file.h"
#include "topology/node_lists.h"
#include "topology/nvidia_smi.h"

namespace ringmaster::cli {

void RegisterTopoCommand(CLI::App& app, int* exit_code) {
  CLI::App* topo = app.add_subcommand("topo", "work with the cluster description");
  topo->require_subcommand(1);

  auto smi_file = std::make_shared<std::string>();
  CLI::App* smi = topo->add_subcommand(
      "import-nvidia-smi", "print the cluster-file links of a node from `nvidia-smi topo -m` output");
  smi->add_option("FILE", *smi_file, "saved output of `nvidia-smi topo -m` (- for stdin)")->required();
  smi->callback([smi_file, exit_code] {
    std::string text;
    if (*smi_file == "-") {
      text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    } else {
      auto t = topology::ReadTextFile(*smi_file);
      if (!t.ok()) {
        std::cerr << t.status().message() << "\n";
        *exit_code = 1;
        return;
      }
      text = *std::move(t);
    }
    auto topo = topology::ParseNvidiaSmiTopo(text, *smi_file == "-" ? "<stdin>" : *smi_file);
    if (!topo.ok()) {
      std::cerr << topo.status().message() << "\n";
      *exit_code = 2;
      return;
    }
    std::cout << "# " << topo->gpus.size() << " GPUs, from " << *smi_file << "\n"
              << topology::LinkGroupsYaml(*topo);
    *exit_code = 0;
  });

  auto cluster_file = std::make_shared<std::string>();
  CLI::App* check = topo->add_subcommand("check", "validate a cluster file and summarize it");
  check->add_option("FILE", *cluster_file, "cluster file (YAML)")->required();
  check->callback([cluster_file, exit_code] {
    auto c = topology::LoadClusterFile(*cluster_file);
    if (!c.ok()) {
      std::cerr << c.status().message() << "\n";
      *exit_code = 2;
      return;
    }
    std::cout << "ok: " << c->num_nodes() << " nodes, " << c->total_gpus() << " GPUs";
    for (int t = 1; t <= c->num_tiers(); ++t) {
      std::cout << ", " << c->domains(t).size() << " " << c->tier(t).name << " (" << c->tier(t).bandwidth_gbps
                << " Gbit/s)";
    }
    std::cout << "\n";
    *exit_code = 0;
  });
}

}  // namespace ringmaster::cli
