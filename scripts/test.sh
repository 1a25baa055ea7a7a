#!/usr/bin/env bash
# Installs what the build needs, builds with -Werror, runs every test through
# ctest, then builds again with AddressSanitizer + UndefinedBehaviorSanitizer
# and runs the same tests, then builds the threaded targets with
# ThreadSanitizer and runs the tests labelled `threaded`; then builds the
# libFuzzer targets with clang and runs each for a few seconds (FUZZ_SECONDS,
# default 8).
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
echo "== build (ThreadSanitizer: the threaded targets only; docs/TESTING.md)"
# The tests labelled `threaded` and what they run: the coordinator, the shim,
# the journal's group commit, the extender's HTTP server, the local executor
# and the daemon end to end. tests/tsan/absl_sync_annotations.cc lets TSan
# see Debian's (uninstrumented) absl::Mutex; tests/tsan.supp lists, each with
# its reason, what TSan reports inside the other uninstrumented libraries.
TSAN_TARGETS=(tsan_selftest server_test extender_test admin_test daemon_loop_test
  worker_shim_test shim_integration_test elastic_trainer ringmaster)
cmake -S . -B build/tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" \
  -DRINGMASTER_WERROR=ON -DRINGMASTER_TSAN=ON -DRINGMASTER_BUILD_BENCH=OFF
cmake --build build/tsan -j "$JOBS" --target "${TSAN_TARGETS[@]}"
echo "== threaded tests under ThreadSanitizer"
# Every report goes to a file under build/tsan/reports (log_path), so that one
# from a daemon or worker a test kills, or whose exit status a script does not
# read, still fails the stage. Nothing is retried here either.
rm -rf build/tsan/reports && mkdir -p build/tsan/reports
tsan_rc=0
TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp:log_path=$PWD/build/tsan/reports/tsan" \
  ctest --test-dir build/tsan -L threaded -j "$JOBS" --timeout 900 || tsan_rc=$?
if compgen -G "build/tsan/reports/tsan*" >/dev/null; then
  echo "ThreadSanitizer reported:"
  cat build/tsan/reports/tsan*
  tsan_rc=1
fi
((tsan_rc == 0)) || { echo "== threaded tests under ThreadSanitizer failed"; exit 1; }
echo "== fuzz every parser of outside input briefly (clang + libFuzzer; docs/FUZZING.md)"
FUZZ_SECONDS="${FUZZ_SECONDS:-8}"
bash scripts/fuzz.sh --all "$FUZZ_SECONDS"
echo "== all tests passed (plain, sanitized, thread-sanitized and fuzzed)"
