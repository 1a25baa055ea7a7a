// A policy whose plugins do not read the clock, for tests of what a cycle
// does when nothing changes (the built-in policy's las reads the clock: its
// levels, preemptAfter and levelCooldown are times).
#ifndef RINGMASTER_TESTS_SUPPORT_CLOCK_FREE_POLICY_H_
#define RINGMASTER_TESTS_SUPPORT_CLOCK_FREE_POLICY_H_

#include <string>

#include "tests/support/builders.h"

namespace ringmaster::testing {

// priority, gang / drf, predicates, proportion, binpack, as YAML to append
// to a policy that names its actions.
inline constexpr const char* kClockFreeTiers =
    "tiers:\n- plugins: [{name: priority}, {name: gang}]\n"
    "- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: binpack}]\n";

// enqueue, allocate, backfill over kClockFreeTiers (the built-in policy
// before it became least-attained-service with preemption).
inline scheduler::Policy ClockFreePolicy() {
  return PolicyFromYaml(std::string("actions: \"enqueue, allocate, backfill\"\n") + kClockFreeTiers);
}

}  // namespace ringmaster::testing

#endif  // RINGMASTER_TESTS_SUPPORT_CLOCK_FREE_POLICY_H_
