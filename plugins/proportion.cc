#include "plugins/proportion.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "queue/proportion.h"

namespace ringmaster::plugins {

using scheduler::QueueInfo;
using topology::Resources;

absl::StatusOr<std::unique_ptr<scheduler::Plugin>> ProportionPlugin::Create(const scheduler::PluginArgs& args) {
  RM_RETURN_IF_ERROR(args.Finish());
  return std::make_unique<ProportionPlugin>();
}

namespace {

// True when adding `extra` keeps q and every ancestor within capability.
bool WithinCapability(const scheduler::Session& s, scheduler::QueueId q, const Resources& used,
                      const Resources& extra, std::string* which) {
  const auto& tree = s.state().queues();
  int cur = static_cast<int>(q.value());
  while (cur >= 0) {
    const QueueInfo& info = s.queues()[cur];
    if (info.spec->capability) {
      Resources base = cur == static_cast<int>(q.value()) ? used : info.allocated() + info.inqueue;
      if (!queue::WithinCapability(base + extra, *info.spec->capability)) {
        if (which) *which = info.name();
        return false;
      }
    }
    cur = tree.parent(static_cast<uint32_t>(cur));
  }
  return true;
}

}  // namespace

double ProportionPlugin::Share(const QueueInfo& q) {
  return queue::DominantShare(q.allocated(), q.deserved);
}

bool ProportionPlugin::Overused(const QueueInfo& q) {
  // Overused when deserved <= allocated in every dimension the queue asks for.
  const Resources& d = q.deserved;
  const Resources& a = q.allocated();
  if (q.request.IsZero()) return false;
  if (q.request.gpu_milli() > 0 && a.gpu_milli() < d.gpu_milli()) return false;
  if (q.request.cpu_milli() > 0 && a.cpu_milli() < d.cpu_milli()) return false;
  if (q.request.memory() > 0 && a.memory() < d.memory()) return false;
  for (const auto& [name, v] : q.request.scalars()) {
    if (v > 0 && a.scalar(name) < d.scalar(name)) return false;
  }
  return true;
}

void ProportionPlugin::OnSessionOpen(scheduler::Session& s) {
  const auto& tree = s.state().queues();
  std::vector<Resources> request(tree.size());
  for (size_t q = 0; q < tree.size(); ++q) request[q] = s.queues()[q].request;
  std::vector<Resources> deserved = queue::ComputeDeserved(tree, s.state().total(), request);
  for (size_t q = 0; q < tree.size(); ++q) s.queues()[q].deserved = deserved[q];

  s.AddQueueOrderFn(kName, [](const QueueInfo& l, const QueueInfo& r) {
    const double ls = Share(l), rs = Share(r);
    if (ls == rs) return 0;
    return ls < rs ? -1 : 1;
  });
  s.AddOverusedFn(kName, &Overused);
  const scheduler::Session* sp = &s;
  s.AddAllocatableFn(kName, [sp](const QueueInfo& q, const scheduler::TaskRef& t) {
    return WithinCapability(*sp, q.id, q.allocated(), t.job->request(t.index), nullptr);
  });
  s.AddJobEnqueueableFn(kName, [sp](const scheduler::Job& job) {
    const QueueInfo& q = sp->queue(job.queue());
    std::string which;
    if (WithinCapability(*sp, q.id, q.allocated() + q.inqueue, job.min_request(), &which)) {
      return scheduler::Verdict::Fit();
    }
    const QueueInfo& limit = sp->queues()[*sp->state().queues().Find(which)];
    return scheduler::Verdict::Because(
        scheduler::Verdict::Code::kWait,
        absl::StrCat("queue '", which, "': minimum ", job.min_request().ToString(), " on top of ",
                     (limit.allocated() + limit.inqueue).ToString(), " in use or admitted exceeds its capability ",
                     limit.spec->capability->ToString()));
  });
  s.AddReclaimableFn(kName, [sp](const scheduler::TaskRef&, const std::vector<scheduler::TaskRef>& c) {
    std::vector<scheduler::TaskRef> out;
    for (const auto& t : c) {
      const QueueInfo& q = sp->queue(t.job->queue());
      if (q.spec->reclaimable && !q.allocated().LessEqual(q.deserved)) out.push_back(t);
    }
    return out;
  });
}

}  // namespace ringmaster::plugins
