#!/usr/bin/env bash
# Installs what the build needs, builds with -Werror, runs every test through
# ctest, then builds again with AddressSanitizer + UndefinedBehaviorSanitizer
# and runs the same tests; then builds the libFuzzer targets with clang and
# runs each for a few seconds (FUZZ_SECONDS, default 8).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh

JOBS="${JOBS:-$(nproc)}"
# Let ccache reuse objects across clones in different folders.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
export CTEST_OUTPUT_ON_FAILURE=1
# Every test runs once: a failure fails the run; nothing is retried (a retry
# hides a flaky test, and a test that races is fixed to wait on what it
# needs, with a deadline). To hunt a suspected flake, repeat that test:
#   ctest --test-dir build/ci -R NAME --repeat until-fail:50

echo "== build (RelWithDebInfo, -Werror)"
cmake -S . -B build/ci -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRINGMASTER_WERROR=ON
cmake --build build/ci -j "$JOBS"
echo "== tests"
ctest --test-dir build/ci -j "$JOBS" --timeout 600

echo "== build (AddressSanitizer + UndefinedBehaviorSanitizer + libstdc++ assertions)"
# _GLIBCXX_ASSERTIONS checks bounds and iterators inside libstdc++ (ASan once
# missed a use-after-free inside its tree code).
cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g -D_GLIBCXX_ASSERTIONS" \
  -DRINGMASTER_WERROR=ON -DRINGMASTER_SANITIZE=ON -DRINGMASTER_BUILD_BENCH=OFF
cmake --build build/asan -j "$JOBS"
echo "== tests under sanitizers"
ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1" \
UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
  ctest --test-dir build/asan -j "$JOBS" --timeout 900
echo "== fuzz every parser of outside input briefly (clang + libFuzzer; docs/FUZZING.md)"
FUZZ_SECONDS="${FUZZ_SECONDS:-8}"
bash scripts/fuzz.sh --all "$FUZZ_SECONDS"
echo "== all tests passed (plain, sanitized and fuzzed)"
