#include "topology/rank_order.h"

#include <algorithm>
#include <tuple>

namespace ringmaster::topology {
namespace {

const Gpu* GpuOf(const Cluster& c, const RankSlot& s) {
  const NodeSpec& n = c.node(s.node);
  if (s.gpu < 0 || s.gpu >= static_cast<int>(n.gpus.size())) return nullptr;
  return &n.gpus[s.gpu];
}

}  // namespace

int LinkLevelOf(const Cluster& cluster, const RankSlot& a, const RankSlot& b) {
  if (a.node != b.node) return NetworkLevel(cluster.CommonTier(a.node, b.node));
  const Gpu* ga = GpuOf(cluster, a);
  const Gpu* gb = GpuOf(cluster, b);
  if (!ga || !gb) return kLevelSocket;
  if (ga->index == gb->index) return kLevelSameGpu;
  if (ga->nvlink_island == gb->nvlink_island) return kLevelNvLink;
  if (ga->pcie_switch == gb->pcie_switch) return kLevelPcieSwitch;
  if (ga->numa == gb->numa) return kLevelSocket;
  return kLevelCrossSocket;
}

std::vector<RankSlot> OrderRanks(const Cluster& cluster, std::span<const RankSlot> members) {
  // Key: domains from the top tier down, node, socket, switch, island, gpu.
  struct Keyed {
    std::vector<int64_t> key;
    RankSlot slot;
  };
  std::vector<Keyed> keyed;
  keyed.reserve(members.size());
  for (const RankSlot& s : members) {
    Keyed k{{}, s};
    for (int t = cluster.num_tiers(); t >= 1; --t) k.key.push_back(cluster.DomainOf(s.node, t).value());
    k.key.push_back(s.node.value());
    const Gpu* g = GpuOf(cluster, s);
    k.key.push_back(g ? g->numa : -1);
    k.key.push_back(g ? g->pcie_switch : -1);
    k.key.push_back(g ? g->nvlink_island : -1);
    k.key.push_back(s.gpu);
    keyed.push_back(std::move(k));
  }
  std::stable_sort(keyed.begin(), keyed.end(), [](const Keyed& a, const Keyed& b) { return a.key < b.key; });
  std::vector<RankSlot> out;
  out.reserve(keyed.size());
  for (const Keyed& k : keyed) out.push_back(k.slot);
  return out;
}

std::vector<int> RingCrossings(const Cluster& cluster, std::span<const RankSlot> ring) {
  std::vector<int> count(NumLinkLevels(cluster), 0);
  const size_t n = ring.size();
  if (n < 2) return count;
  for (size_t i = 0; i < n; ++i) {
    // A ring of two has one hop each way; count each direction once.
    if (n == 2 && i == 1) break;
    ++count[LinkLevelOf(cluster, ring[i], ring[(i + 1) % n])];
  }
  return count;
}

}  // namespace ringmaster::topology
