#include "plugins/gang.h"

#include "absl/container/flat_hash_map.h"

#include "absl/strings/str_cat.h"

namespace ringmaster::plugins {

using scheduler::Job;
using scheduler::TaskRef;

absl::StatusOr<std::unique_ptr<scheduler::Plugin>> GangPlugin::Create(const scheduler::PluginArgs& args) {
  if (auto s = args.Finish(); !s.ok()) return s;
  return std::make_unique<GangPlugin>();
}

void GangPlugin::OnSessionOpen(scheduler::Session& s) {
  s.AddJobValidFn(kName, &Valid);
  s.AddJobReadyFn(kName, &Ready);
  s.AddJobPipelinedFn(kName, &Pipelined);
  s.AddJobStarvingFn(kName, &Starving);
  s.AddJobOrderFn(kName, &Order);
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

bool GangPlugin::Ready(const Job& job) { return job.ReadyCount() >= job.min_member(); }

scheduler::Verdict GangPlugin::Pipelined(const Job& job) {
  return job.ReadyCount() + job.PipelinedCount() >= job.min_member()
             ? scheduler::Verdict::Fit()
             : scheduler::Verdict::Unschedulable("gang: not enough tasks pipelined");
}

bool GangPlugin::Starving(const Job& job) { return job.ReadyCount() < job.min_member(); }

int GangPlugin::Order(const Job& l, const Job& r) {
  const bool lr = Ready(l), rr = Ready(r);
  if (lr == rr) return 0;
  return lr ? 1 : -1;  // not-ready first
}

std::vector<TaskRef> GangPlugin::Victims(const std::vector<TaskRef>& candidates) {
  // Per job: how many of its tasks are candidates, and how many of them were
  // seen so far (a task's position among its job's candidates). O(n).
  struct Count {
    int total = 0;
    int seen = 0;
  };
  absl::flat_hash_map<const Job*, Count> count;
  count.reserve(candidates.size());
  for (const TaskRef& t : candidates) ++count[t.job].total;
  std::vector<TaskRef> out;
  out.reserve(candidates.size());
  for (const TaskRef& t : candidates) {
    const Job* j = t.job;
    Count& c = count[j];
    const int pos = c.seen++;
    const int ready = j->ReadyCount();
    const int spare = ready - j->min_member();
    const bool all = c.total >= ready;
    if (all || pos < spare) out.push_back(t);
  }
  return out;
}

}  // namespace ringmaster::plugins
