#include "queue/proportion.h"

#include <algorithm>

namespace ringmaster::queue {
namespace {

using topology::Quantity;

Quantity ScaleFloor(Quantity v, int64_t num, int64_t den) {
  if (den == 0) return 0;
  return static_cast<Quantity>((static_cast<__int128>(v) * num) / den);
}

Resources Scale(const Resources& r, int64_t num, int64_t den) {
  Resources out(ScaleFloor(r.cpu_milli(), num, den), ScaleFloor(r.memory(), num, den),
                ScaleFloor(r.gpu_milli(), num, den));
  for (const auto& [name, v] : r.scalars()) out.set_scalar(name, ScaleFloor(v, num, den));
  return out;
}

// `weights`: one per queue in place of the spec's, or null.
void Split(const QueueTree& tree, const std::vector<uint32_t>& children, const Resources& share,
           const std::vector<Resources>& request, const std::vector<int64_t>* weights,
           std::vector<Resources>& deserved) {
  if (children.empty()) return;
  auto weight = [&](uint32_t q) { return weights ? (*weights)[q] : tree.spec(q).weight; };
  // Target: what each child could use at most.
  std::vector<Resources> cap(children.size());
  for (size_t i = 0; i < children.size(); ++i) {
    const QueueSpec& s = tree.spec(children[i]);
    cap[i] = request[children[i]];
    if (s.capability) {
      cap[i] = Resources::Min(cap[i], *s.capability);
      for (const auto& [name, v] : request[children[i]].scalars()) {
        if (s.capability->scalar(name) == 0 && v > 0) cap[i].set_scalar(name, v);  // not limited
      }
    }
  }
  Resources remaining = share;
  // Step 1: guarantees.
  for (size_t i = 0; i < children.size(); ++i) {
    const QueueSpec& s = tree.spec(children[i]);
    Resources g = Resources::Min(Resources::Min(s.guarantee, cap[i]), remaining);
    g = Resources::Max(g, Resources());
    deserved[children[i]] = g;
    remaining -= g;
  }
  // Step 2: water-fill by weight.
  for (int round = 0; round < 64; ++round) {
    int64_t sum = 0;
    for (size_t i = 0; i < children.size(); ++i) {
      if (!cap[i].LessEqual(deserved[children[i]])) sum += weight(children[i]);
    }
    if (sum == 0 || remaining.IsZero()) break;
    Resources given;
    for (size_t i = 0; i < children.size(); ++i) {
      Resources& d = deserved[children[i]];
      if (cap[i].LessEqual(d)) continue;
      Resources add = Scale(remaining, weight(children[i]), sum);
      Resources next = Resources::Min(d + add, Resources::Max(cap[i], d));
      given += next - d;
      d = next;
    }
    if (given.IsZero()) {
      // Floors rounded every grant to zero: hand out what is left one child
      // at a time, in weight order then index, so nothing stays stranded.
      for (size_t i = 0; i < children.size() && !remaining.IsZero(); ++i) {
        Resources& d = deserved[children[i]];
        Resources next = Resources::Min(d + remaining, Resources::Max(cap[i], d));
        remaining -= next - d;
        d = next;
      }
      break;
    }
    remaining -= given;
  }
  for (uint32_t c : children) Split(tree, tree.children(c), deserved[c], request, weights, deserved);
}

}  // namespace

std::vector<Resources> ComputeDeserved(const QueueTree& tree, const Resources& total,
                                       const std::vector<Resources>& request) {
  std::vector<Resources> deserved(tree.size());
  Split(tree, tree.roots(), total, request, nullptr, deserved);
  return deserved;
}

std::vector<Resources> ComputeDeserved(const QueueTree& tree, const Resources& total,
                                       const std::vector<Resources>& request, const std::vector<int64_t>& weights) {
  std::vector<Resources> deserved(tree.size());
  Split(tree, tree.roots(), total, request, &weights, deserved);
  return deserved;
}

double DominantShare(const Resources& allocated, const Resources& total) {
  double share = 0;
  auto dim = [&](Quantity a, Quantity t) {
    if (t > 0) share = std::max(share, static_cast<double>(a) / static_cast<double>(t));
  };
  dim(allocated.cpu_milli(), total.cpu_milli());
  dim(allocated.memory(), total.memory());
  dim(allocated.gpu_milli(), total.gpu_milli());
  for (const auto& [name, v] : allocated.scalars()) dim(v, total.scalar(name));
  return share;
}

}  // namespace ringmaster::queue
