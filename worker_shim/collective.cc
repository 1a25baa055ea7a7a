// Reform planning shared by every backend; see collective.h.
#include "worker_shim/collective.h"

#include <algorithm>

namespace ringmaster::shim {

size_t SizeOf(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return 4;
    case DataType::kFloat64:
    case DataType::kInt64:
      return 8;
  }
  return 0;
}

ReformPlan PlanReform(const std::vector<std::string>& old_members,
                      const std::vector<std::string>& new_members,
                      const std::string& self, int64_t generation,
                      bool failure) {
  ReformPlan plan;
  plan.generation = generation;
  plan.world_size = static_cast<int>(new_members.size());
  plan.old_world_size = static_cast<int>(old_members.size());
  plan.failure = failure;
  auto index_of = [&](const std::vector<std::string>& v) {
    auto it = std::find(v.begin(), v.end(), self);
    return it == v.end() ? -1 : static_cast<int>(it - v.begin());
  };
  plan.rank = index_of(new_members);
  plan.old_rank = index_of(old_members);
  std::vector<std::string> kept;
  for (size_t i = 0; i < old_members.size(); ++i) {
    if (std::find(new_members.begin(), new_members.end(), old_members[i]) ==
        new_members.end()) {
      plan.excluded.push_back(static_cast<int>(i));
    } else {
      kept.push_back(old_members[i]);
    }
  }
  plan.only_removals = plan.old_rank >= 0 && kept == new_members;
  return plan;
}

}  // namespace ringmaster::shim
