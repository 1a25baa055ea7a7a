#include "plugins/registry.h"

#include "plugins/binpack.h"
#include "plugins/drf.h"
#include "plugins/gittins.h"
#include "plugins/gang.h"
#include "plugins/gpu_affinity.h"
#include "plugins/gpu_share.h"
#include "plugins/las.h"
#include "plugins/most_free.h"
#include "plugins/network_topology.h"
#include "plugins/predicates.h"
#include "plugins/priority.h"
#include "plugins/proportion.h"
#include "plugins/sjf.h"
#include "plugins/speedup.h"

namespace ringmaster::plugins {

scheduler::PluginRegistry BuiltinRegistry() {
  scheduler::PluginRegistry r;
  r.Add(GangPlugin::kName, &GangPlugin::Create);
  r.Add(PriorityPlugin::kName, &PriorityPlugin::Create);
  r.Add(DrfPlugin::kName, &DrfPlugin::Create);
  r.Add(ProportionPlugin::kName, &ProportionPlugin::Create);
  r.Add(PredicatesPlugin::kName, &PredicatesPlugin::Create);
  r.Add(BinpackPlugin::kName, &BinpackPlugin::Create);
  r.Add(NetworkTopologyPlugin::kName, &NetworkTopologyPlugin::Create);
  r.Add(GpuAffinityPlugin::kName, &GpuAffinityPlugin::Create);
  r.Add(GpuSharePlugin::kName, &GpuSharePlugin::Create);
  r.Add(SjfPlugin::kName, &SjfPlugin::Create);
  r.Add(LasPlugin::kName, &LasPlugin::Create);
  r.Add(MostFreePlugin::kName, &MostFreePlugin::Create);
  r.Add(SpeedupPlugin::kName, &SpeedupPlugin::Create);
  r.Add(GittinsPlugin::kName, &GittinsPlugin::Create);
  // New plugins: one line here.
  return r;
}

}  // namespace ringmaster::plugins
