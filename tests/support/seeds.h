// Seeds for the randomized (property) tests: a fixed set every run checks,
// plus a few drawn afresh each run, so that runs explore new cases; a
// failure names its seed, and RINGMASTER_TEST_SEED replays it alone
// (docs/TESTING.md):
//
//   for (uint32_t seed : TestSeeds(SeedRange(1, 300), 20)) {
//     SCOPED_TRACE(SeedTrace(seed));
//     std::mt19937 rng(seed);
//     ...
//   }
//
//   RINGMASTER_TEST_SEED=123456 build/ci/tests/scheduler/scheduler_tests --gtest_filter='SchedulingProperty.*'
#ifndef RINGMASTER_TESTS_SUPPORT_SEEDS_H_
#define RINGMASTER_TESTS_SUPPORT_SEEDS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace ringmaster::testing {

// RINGMASTER_TEST_SEED=N (decimal): only N. Otherwise `fixed`, then `random`
// seeds from std::random_device (RINGMASTER_TEST_RANDOM_SEEDS=K: K instead).
// The drawn seeds are printed once (stderr), so a log shows what ran. A
// malformed variable aborts: a typo must not silently run the usual set.
std::vector<uint32_t> TestSeeds(const std::vector<uint32_t>& fixed, int random);
// first, first + 1, ..., last.
std::vector<uint32_t> SeedRange(uint32_t first, uint32_t last);
// True when RINGMASTER_TEST_SEED names one seed: totals over the whole set
// (that the mixes exercise enough) do not apply.
bool ReplayingOneSeed();
// "seed N (replay: RINGMASTER_TEST_SEED=N)", for SCOPED_TRACE.
std::string SeedTrace(uint32_t seed);

}  // namespace ringmaster::testing

#endif  // RINGMASTER_TESTS_SUPPORT_SEEDS_H_
