#include "topology/gpu_select.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace ringmaster::topology {
namespace {

// Group key of a GPU at a level: 0 island, 1 switch, 2 socket, 3 node.
int KeyAt(const Gpu& g, int level) {
  switch (level) {
    case 0:
      return g.nvlink_island;
    case 1:
      return g.pcie_switch;
    case 2:
      return g.numa;
    default:
      return 0;
  }
}

// Free GPU indices (ascending) per island within `members`.
std::map<int, std::vector<int>> ByIsland(std::span<const Gpu> gpus, const std::vector<int>& members) {
  std::map<int, std::vector<int>> out;
  for (int i : members) out[gpus[i].nvlink_island].push_back(i);
  return out;
}

// Fewest islands whose free counts reach k (islands sorted largest first).
int IslandsNeeded(const std::map<int, std::vector<int>>& islands, int k) {
  std::vector<int> sizes;
  for (const auto& [id, m] : islands) sizes.push_back(static_cast<int>(m.size()));
  std::sort(sizes.rbegin(), sizes.rend());
  int sum = 0, used = 0;
  for (int s : sizes) {
    if (sum >= k) break;
    sum += s;
    ++used;
  }
  return used;
}

}  // namespace

std::optional<std::vector<int>> SelectWholeGpus(std::span<const Gpu> gpus,
                                                std::span<const Quantity> used_milli, int k) {
  if (k <= 0) return std::vector<int>{};
  std::vector<int> free;
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (used_milli[i] == 0) free.push_back(static_cast<int>(i));
  }
  if (static_cast<int>(free.size()) < k) return std::nullopt;

  for (int level = 0; level <= 3; ++level) {
    std::map<int, std::vector<int>> groups;
    for (int i : free) groups[KeyAt(gpus[i], level)].push_back(i);
    // Best candidate group: (islands touched, free count, id).
    std::optional<std::tuple<int, int, int>> best;
    for (const auto& [id, members] : groups) {
      const int size = static_cast<int>(members.size());
      if (size < k) continue;
      const int islands = level == 0 ? 1 : IslandsNeeded(ByIsland(gpus, members), k);
      const std::tuple<int, int, int> cand{islands, size, id};
      if (!best || cand < *best) best = cand;
    }
    if (!best) continue;
    const std::vector<int>& members = groups[std::get<2>(*best)];
    if (level == 0) return std::vector<int>(members.begin(), members.begin() + k);

    // Whole islands largest first (ties: lower island id), remainder from
    // the smallest island that holds it.
    std::map<int, std::vector<int>> islands = ByIsland(gpus, members);
    std::vector<std::pair<int, int>> order;  // (-size, id)
    for (const auto& [id, m] : islands) order.push_back({-static_cast<int>(m.size()), id});
    std::sort(order.begin(), order.end());
    const int need = std::get<0>(*best);
    std::vector<int> chosen;
    int remaining = k;
    // Take the largest (need - 1) islands whole...
    std::vector<bool> taken(order.size(), false);
    for (int j = 0; j < need - 1; ++j) {
      for (int i : islands[order[j].second]) chosen.push_back(i);
      remaining -= -order[j].first;
      taken[j] = true;
    }
    // ...and the remainder from the smallest untaken island that fits.
    int pick = -1;
    for (size_t j = 0; j < order.size(); ++j) {
      if (taken[j] || -order[j].first < remaining) continue;
      if (pick < 0 || -order[j].first < -order[pick].first ||
          (-order[j].first == -order[pick].first && order[j].second < order[pick].second)) {
        pick = static_cast<int>(j);
      }
    }
    const std::vector<int>& last = islands[order[pick].second];
    chosen.insert(chosen.end(), last.begin(), last.begin() + remaining);
    std::sort(chosen.begin(), chosen.end());
    return chosen;
  }
  return std::nullopt;  // unreachable: level 3 holds all free GPUs
}

std::optional<int> SelectSharedGpu(std::span<const Quantity> used_milli, Quantity milli) {
  if (milli <= 0 || milli > kMilliPerGpu) return std::nullopt;
  std::optional<int> best;
  for (size_t i = 0; i < used_milli.size(); ++i) {
    if (used_milli[i] + milli > kMilliPerGpu) continue;
    if (!best || used_milli[i] > used_milli[*best]) best = static_cast<int>(i);
  }
  return best;
}

}  // namespace ringmaster::topology
