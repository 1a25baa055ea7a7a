// Random clusters for the topology property tests: up to 16 nodes, 0-3
// network tiers with a random tree of domains, 0-8 GPUs per node with nested
// link groups (NVLink islands inside PCIe switches inside sockets, or one
// NVSwitch island over the whole node). Seeded, so every failure repeats.
#ifndef RINGMASTER_TESTS_TOPOLOGY_RANDOM_CLUSTER_H_
#define RINGMASTER_TESTS_TOPOLOGY_RANDOM_CLUSTER_H_

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "topology/cluster.h"

namespace ringmaster::topology::testing {

inline int Uniform(std::mt19937_64& rng, int lo, int hi) {  // inclusive
  return lo + static_cast<int>(rng() % static_cast<uint64_t>(hi - lo + 1));
}

// GPUs of one node with nested groups: `mode` 0 = no NVLink, 1 = NVLink
// pairs, 2 = one NVSwitch island; switches of 2 or 4 GPUs; 1 or 2 sockets.
inline std::vector<Gpu> RandomGpus(std::mt19937_64& rng, int n) {
  const int mode = Uniform(rng, 0, 2);
  const int per_switch = Uniform(rng, 0, 1) ? 2 : 4;
  const int sockets = n >= 2 ? Uniform(rng, 1, 2) : 1;
  std::vector<Gpu> gpus;
  for (int i = 0; i < n; ++i) {
    Gpu g;
    g.index = i;
    g.model = "G";
    g.nvlink_island = mode == 0 ? i : mode == 1 ? i / 2 : 0;
    g.pcie_switch = i / per_switch;
    g.numa = i * sockets / n;
    // Keep switches inside sockets: a switch never straddles two sockets.
    g.pcie_switch = g.numa * 100 + g.pcie_switch;
    gpus.push_back(g);
  }
  return gpus;
}

inline Cluster RandomCluster(std::mt19937_64& rng, int max_nodes = 16, int max_tiers = 3) {
  const int nodes = Uniform(rng, 1, max_nodes);
  const int tiers = Uniform(rng, 0, max_tiers);
  std::vector<TierSpec> specs;
  for (int t = 1; t <= tiers; ++t) specs.push_back({absl::StrCat("tier", t), 400.0 / t});
  // Domain of each node at tier 1, then of each tier-t domain at tier t+1.
  std::vector<std::vector<int>> parent(tiers);  // [t-1][child] -> domain
  int children = nodes;
  for (int t = 0; t < tiers; ++t) {
    const int domains = Uniform(rng, 1, std::max(1, children));
    for (int c = 0; c < children; ++c) parent[t].push_back(Uniform(rng, 0, domains - 1));
    children = domains;
  }
  std::vector<NodeSpec> specs_n;
  for (int n = 0; n < nodes; ++n) {
    NodeSpec s;
    s.name = absl::StrCat("n", n);
    s.allocatable = Resources(64000, int64_t{1} << 36, 0);
    s.gpus = RandomGpus(rng, Uniform(rng, 0, 8));
    int d = n;
    for (int t = 0; t < tiers; ++t) {
      d = parent[t][d];
      s.domains.push_back(absl::StrCat("t", t + 1, "-", d));
    }
    specs_n.push_back(std::move(s));
  }
  auto c = Cluster::Build(std::move(specs), std::move(specs_n));
  if (!c.ok()) abort();
  return *std::move(c);
}

// The lowest tier spanned by a subset of nodes whose `holds` sum to at least
// `need`, by walking all 2^n subsets, each built from the subset without its
// lowest node (the tier a set spans is the highest tier between any member
// and one fixed member): 0 = one node, T + 1 = the whole cluster, T + 2 =
// nowhere. holds[i] < 0: node i is absent.
inline int LowestTierBySubsets(const Cluster& c, const std::vector<int64_t>& holds, int64_t need) {
  const int n = static_cast<int>(c.num_nodes());
  std::vector<int64_t> sum(1u << n, 0);
  std::vector<int> span(1u << n, 0);
  int best = c.num_tiers() + 2;
  for (uint32_t mask = 1; mask < (1u << n); ++mask) {
    const int low = __builtin_ctz(mask);
    const uint32_t rest = mask & (mask - 1);
    sum[mask] = sum[rest] + std::max<int64_t>(holds[low], 0);
    span[mask] = rest == 0 ? 0 : std::max(span[rest], c.CommonTier(NodeId(low), NodeId(__builtin_ctz(rest))));
    if (holds[low] >= 0 && sum[mask] >= need) best = std::min(best, span[mask]);
  }
  return best;
}

}  // namespace ringmaster::topology::testing

#endif  // RINGMASTER_TESTS_TOPOLOGY_RANDOM_CLUSTER_H_
