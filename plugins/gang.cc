#include "plugins/gang.h"

#include "absl/container/flat_hash_map.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster::plugins {

using scheduler::Job;
using scheduler::TaskRef;

absl::StatusOr<std::unique_ptr<scheduler::Plugin>> GangPlugin::Create(const scheduler::PluginArgs& args) {
  RM_ASSIGN_OR_RETURN(auto reserve, args.Bool("reserve", true));
  RM_RETURN_IF_ERROR(args.Finish());
  return std::make_unique<GangPlugin>(reserve);
}

void GangPlugin::OnSessionOpen(scheduler::Session& s) {
  s.AddJobValidFn(kName, &Valid);
  s.AddJobReadyFn(kName, &Ready);
  s.AddJobPipelinedFn(kName, &Pipelined);
  if (reserve_) s.AddJobStarvingFn(kName, &Starving);
  // Not-ready first (Order): ready gangs key 1.
  s.AddJobOrderKeyFn(kName, [](const Job& j) { return static_cast<int64_t>(Ready(j)); });
  auto victims = [](const TaskRef&, const std::vector<TaskRef>& c) { return Victims(c); };
  s.AddPreemptableFn(kName, victims);
  s.AddReclaimableFn(kName, victims);
}

scheduler::Verdict GangPlugin::Valid(const Job& job) {
  const int tasks = static_cast<int>(job.tasks().size());
  if (tasks < job.min_member()) {
    return scheduler::Verdict::Because(scheduler::Verdict::Code::kUnresolvable,
                                       absl::StrCat("gang: job has ", tasks, " tasks, fewer than its minimum ",
                                                    job.min_member()));
  }
  return scheduler::Verdict::Fit();
}

bool GangPlugin::Ready(const Job& job) { return job.GangReady(); }

scheduler::Verdict GangPlugin::Pipelined(const Job& job) {
  return job.PipelinedCount() >= job.GangShortfall()
             ? scheduler::Verdict::Fit()
             : scheduler::Verdict::Unschedulable("gang: not enough tasks pipelined");
}

bool GangPlugin::Starving(const Job& job) { return !job.GangReady(); }

int GangPlugin::Order(const Job& l, const Job& r) {
  const bool lr = Ready(l), rr = Ready(r);
  if (lr == rr) return 0;
  return lr ? 1 : -1;  // not-ready first
}

std::vector<TaskRef> GangPlugin::Victims(const std::vector<TaskRef>& candidates) {
  // A job's candidates are all victims when they are all its ready tasks
  // (the whole gang goes); otherwise its first `ready - minimum` of them are
  // (surplus members). So per job: how many of its tasks are candidates, and
  // each one's position among them. O(n).
  struct Rule {
    bool all;
    int spare;
    bool operator()(int pos) const { return all || pos < spare; }
  };
  auto rule = [](const Job& j, int total) {
    return Rule{total >= j.ReadyCount(), j.GangSpare()};
  };
  std::vector<TaskRef> out;
  out.reserve(candidates.size());
  // The engine offers candidates job by job (its jobs in id order, each
  // one's tasks by index): then a job's candidates are one run, and the
  // walk needs no table.
  bool grouped = true;
  for (size_t k = 1; k < candidates.size() && grouped; ++k) {
    const TaskRef& a = candidates[k - 1];
    const TaskRef& b = candidates[k];
    grouped = a.job == b.job ? a.index < b.index : a.job->id() < b.job->id();
  }
  if (grouped) {
    for (size_t lo = 0; lo < candidates.size();) {
      size_t hi = lo + 1;
      while (hi < candidates.size() && candidates[hi].job == candidates[lo].job) ++hi;
      const Rule victim = rule(*candidates[lo].job, static_cast<int>(hi - lo));
      for (size_t k = lo; k < hi; ++k) {
        if (victim(static_cast<int>(k - lo))) out.push_back(candidates[k]);
      }
      lo = hi;
    }
    return out;
  }
  struct Count {
    int total = 0;
    int seen = 0;
  };
  absl::flat_hash_map<const Job*, Count> count;
  count.reserve(candidates.size());
  for (const TaskRef& t : candidates) ++count[t.job].total;
  for (const TaskRef& t : candidates) {
    Count& c = count[t.job];
    if (rule(*t.job, c.total)(c.seen++)) out.push_back(t);
  }
  return out;
}

}  // namespace ringmaster::plugins
