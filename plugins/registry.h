// The one explicit list of built-in plugins.
#ifndef RINGMASTER_PLUGINS_REGISTRY_H_
#define RINGMASTER_PLUGINS_REGISTRY_H_

#include "scheduler/plugin.h"

namespace ringmaster::plugins {

// A registry holding every built-in plugin factory.
scheduler::PluginRegistry BuiltinRegistry();

}  // namespace ringmaster::plugins

#endif  // RINGMASTER_PLUGINS_REGISTRY_H_
