#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "scheduler/actions/action.h"
#include "scheduler/actions/victims.h"

namespace ringmaster::scheduler {

void SortJobsByKeys(const Session& s, Job** jobs, size_t n) {
  // Rows of (keys..., created, id) per job, reused across calls and cycles
  // (no per-cycle allocation once they have grown).
  thread_local std::vector<int64_t> rows;
  thread_local std::vector<uint32_t> order;
  thread_local std::vector<Job*> sorted;
  const size_t m = s.job_order_keys();
  const size_t w = m + 2;
  rows.resize(n * w);
  for (size_t i = 0; i < n; ++i) {
    int64_t* row = &rows[i * w];
    s.JobOrderKeys(*jobs[i], row);
    row[m] = jobs[i]->created();
    row[m + 1] = static_cast<int64_t>(jobs[i]->id().value());
  }
  const int64_t* base = rows.data();
  auto before = [base, w](uint32_t a, uint32_t b) {
    const int64_t* x = base + static_cast<size_t>(a) * w;
    const int64_t* y = base + static_cast<size_t>(b) * w;
    for (size_t k = 0; k < w; ++k) {
      if (x[k] != y[k]) return x[k] < y[k];
    }
    return false;
  };
  bool in_order = true;
  for (size_t i = 1; i < n && in_order; ++i) in_order = !before(static_cast<uint32_t>(i), static_cast<uint32_t>(i - 1));
  if (in_order) return;
  order.resize(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<uint32_t>(i);
  std::sort(order.begin(), order.end(), before);
  sorted.resize(n);
  for (size_t i = 0; i < n; ++i) sorted[i] = jobs[order[i]];
  std::copy(sorted.begin(), sorted.end(), jobs);
}

const std::vector<std::string>& KnownActions() {
  static const std::vector<std::string> kNames = {"enqueue", "allocate", "preempt", "reclaim", "elastic",
                                                  "backfill"};
  return kNames;
}

absl::StatusOr<std::unique_ptr<Action>> MakeAction(std::string_view name, const PluginArgs& args) {
  if (name == "enqueue" || name == "allocate" || name == "backfill") {
    RM_RETURN_IF_ERROR(args.Finish());
    if (name == "enqueue") return NewEnqueueAction();
    if (name == "allocate") return NewAllocateAction();
    return NewBackfillAction();
  }
  if (name == "preempt" || name == "reclaim") {
    RM_ASSIGN_OR_RETURN(auto a, ReadEvictionArgs(args));
    return name == "preempt" ? NewPreemptAction(a) : NewReclaimAction(a);
  }
  if (name == "elastic") {
    RM_ASSIGN_OR_RETURN(auto a, ReadElasticArgs(args));
    return NewElasticAction(a);
  }
  return absl::NotFoundError(absl::StrCat("unknown action '", std::string(name), "' (known: ",
                                          absl::StrJoin(KnownActions(), ", "), ")"));
}

}  // namespace ringmaster::scheduler
