// Helpers shared by the libFuzzer targets in fuzz/: turning the raw input
// into what a parser takes, and failing loudly when a property breaks.
#ifndef RINGMASTER_FUZZ_FUZZ_INPUT_H_
#define RINGMASTER_FUZZ_FUZZ_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace ringmaster::fuzz {

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A broken property (not a rejected input): report and abort, so that
// libFuzzer saves the input as a crash.
[[noreturn]] inline void Fail(std::string_view what, std::string_view detail) {
  std::fprintf(stderr, "fuzz property broken: %.*s\n%.*s\n", int(what.size()), what.data(), int(detail.size()),
               detail.data());
  std::abort();
}

}  // namespace ringmaster::fuzz

// libFuzzer's entry point; every fuzz/*_fuzzer.cc defines it.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

#endif  // RINGMASTER_FUZZ_FUZZ_INPUT_H_
