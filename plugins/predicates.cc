#include "plugins/predicates.h"

#include "common/status_macros.h"

namespace ringmaster::plugins {

using scheduler::Verdict;

absl::StatusOr<std::unique_ptr<scheduler::Plugin>> PredicatesPlugin::Create(const scheduler::PluginArgs& args) {
  RM_RETURN_IF_ERROR(args.Finish());
  return std::make_unique<PredicatesPlugin>();
}

void PredicatesPlugin::OnSessionOpen(scheduler::Session& s) {
  const scheduler::State* state = &s.state();
  s.AddPredicateFn(kName, [state](const scheduler::TaskRef& t, scheduler::NodeId n) {
    return Check(*state, t, n);
  });
}

namespace {

bool Tolerates(const std::vector<scheduler::Toleration>& tols, const topology::Taint& taint) {
  static constexpr const char* kEffects[] = {"NoSchedule", "PreferNoSchedule", "NoExecute"};
  const char* effect = kEffects[static_cast<int>(taint.effect)];
  for (const auto& t : tols) {
    if (!t.effect.empty() && t.effect != effect) continue;
    if (t.op == scheduler::TolerationOp::kExists) {
      if (t.key.empty() || t.key == taint.key) return true;
    } else if (t.key == taint.key && t.value == taint.value) {
      return true;
    }
  }
  return false;
}

}  // namespace

Verdict PredicatesPlugin::Check(const scheduler::State& state, const scheduler::TaskRef& task,
                                scheduler::NodeId node) {
  const topology::NodeSpec& spec = state.cluster().node(node);
  const scheduler::JobSpec& js = task.job->spec();
  for (const auto& [k, v] : js.node_selector) {
    auto it = spec.labels.find(k);
    if (it == spec.labels.end() || it->second != v) return Verdict::Unresolvable("node selector mismatch");
  }
  for (const auto& taint : spec.taints) {
    if (taint.effect == topology::TaintEffect::kPreferNoSchedule) continue;
    if (!Tolerates(js.tolerations, taint)) return Verdict::Unresolvable("untolerated taint");
  }
  const scheduler::GpuRequest& g = task.job->gpu(task.index);
  if (g.count > 0) {
    if (static_cast<int>(spec.gpus.size()) < g.count) return Verdict::Unresolvable("too few GPUs on node");
    if (!js.gpu_models.empty()) {
      const std::string* allowed = nullptr;  // the last model found allowed
      for (const auto& d : spec.gpus) {
        if (allowed != nullptr && *allowed == d.model) continue;  // most nodes have one model
        if (!js.AllowsModel(d.model)) return Verdict::Unresolvable("GPU model mismatch");
        allowed = &d.model;
      }
    }
    if (g.whole()) {
      int free = 0;
      for (const auto& d : spec.gpus) {
        free += state.GpuFree(node, d.index, /*future=*/true) == topology::kMilliPerGpu;
      }
      if (free < g.count) return Verdict::Unschedulable("insufficient GPU");
    } else {
      bool any = false;
      for (const auto& d : spec.gpus) {
        if (state.GpuFree(node, d.index, /*future=*/true) >= g.milli) {
          any = true;
          break;
        }
      }
      if (!any) return Verdict::Unschedulable("insufficient GPU share");
    }
  }
  const topology::Resources& req = task.job->request(task.index);
  const scheduler::NodeState& ns = state.node(node);
  const topology::Resources& a = spec.allocatable;
  if (req.cpu_milli() > a.cpu_milli() - ns.used.cpu_milli() + ns.releasing.cpu_milli() - ns.pipelined.cpu_milli()) {
    return Verdict::Unschedulable("insufficient cpu");
  }
  if (req.memory() > a.memory() - ns.used.memory() + ns.releasing.memory() - ns.pipelined.memory()) {
    return Verdict::Unschedulable("insufficient memory");
  }
  for (const auto& [name, v] : req.scalars()) {
    if (v > a.scalar(name) - ns.used.scalar(name) + ns.releasing.scalar(name) - ns.pipelined.scalar(name)) {
      return Verdict::Unschedulable("insufficient scalar resource");
    }
  }
  return Verdict::Fit();
}

}  // namespace ringmaster::plugins
