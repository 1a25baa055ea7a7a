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

void OrderRankIndices(const Cluster& cluster, std::span<const RankSlot> members, std::vector<uint32_t>* order,
                      std::vector<int64_t>* keys) {
  // Key: domains from the top tier down, node, socket, switch, island, gpu;
  // every member's key has the same width, kept in one flat array.
  const size_t width = static_cast<size_t>(cluster.num_tiers()) + 5;
  keys->clear();
  keys->reserve(members.size() * width);
  for (const RankSlot& s : members) {
    for (int t = cluster.num_tiers(); t >= 1; --t) keys->push_back(cluster.DomainOf(s.node, t).value());
    keys->push_back(s.node.value());
    const Gpu* g = GpuOf(cluster, s);
    keys->push_back(g ? g->numa : -1);
    keys->push_back(g ? g->pcie_switch : -1);
    keys->push_back(g ? g->nvlink_island : -1);
    keys->push_back(s.gpu);
  }
  order->resize(members.size());
  for (uint32_t i = 0; i < order->size(); ++i) (*order)[i] = i;
  // The input position breaks ties: the order of a stable sort, with no
  // buffer to allocate.
  const int64_t* k = keys->data();
  std::sort(order->begin(), order->end(), [&](uint32_t a, uint32_t b) {
    const int64_t* ka = k + a * width;
    const int64_t* kb = k + b * width;
    for (size_t j = 0; j < width; ++j) {
      if (ka[j] != kb[j]) return ka[j] < kb[j];
    }
    return a < b;
  });
}

std::vector<RankSlot> OrderRanks(const Cluster& cluster, std::span<const RankSlot> members) {
  std::vector<uint32_t> order;
  std::vector<int64_t> keys;
  OrderRankIndices(cluster, members, &order, &keys);
  std::vector<RankSlot> out;
  out.reserve(order.size());
  for (uint32_t i : order) out.push_back(members[i]);
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
