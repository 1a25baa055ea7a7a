#include "tests/support/seeds.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <random>

namespace ringmaster::testing {
namespace {

// The variable's value as a number; nullopt when unset or empty.
std::optional<uint64_t> EnvNumber(const char* name, uint64_t max) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v, &end, 10);
  if (errno != 0 || *end != '\0' || n > max || *v == '-') {
    std::cerr << name << "=" << v << ": not a number in [0, " << max << "]\n";
    std::abort();
  }
  return n;
}

}  // namespace

std::vector<uint32_t> TestSeeds(const std::vector<uint32_t>& fixed, int random) {
  if (auto one = EnvNumber("RINGMASTER_TEST_SEED", UINT32_MAX)) return {static_cast<uint32_t>(*one)};
  if (auto k = EnvNumber("RINGMASTER_TEST_RANDOM_SEEDS", 100'000'000)) random = static_cast<int>(*k);
  std::vector<uint32_t> seeds = fixed;
  std::random_device device;
  std::cerr << "seeds: " << fixed.size() << " fixed, " << random << " drawn:";
  for (int i = 0; i < random; ++i) {
    seeds.push_back(device());
    if (i < 20) std::cerr << " " << seeds.back();
  }
  std::cerr << (random > 20 ? " ...\n" : "\n");
  return seeds;
}

std::vector<uint32_t> SeedRange(uint32_t first, uint32_t last) {
  std::vector<uint32_t> seeds;
  for (uint64_t s = first; s <= last; ++s) seeds.push_back(static_cast<uint32_t>(s));
  return seeds;
}

bool ReplayingOneSeed() { return EnvNumber("RINGMASTER_TEST_SEED", UINT32_MAX).has_value(); }

std::string SeedTrace(uint32_t seed) {
  const std::string s = std::to_string(seed);
  return "seed " + s + " (replay: RINGMASTER_TEST_SEED=" + s + ")";
}

}  // namespace ringmaster::testing
