#!/usr/bin/env bash
# The whole plain test suite, again and again, under CPU load, with no retry:
# how issue 25 counts flakes ("20 runs in a row under load"). Each run is
# `ctest --test-dir BUILD -j2` while `stress --cpu 2` keeps both cores busy;
# a line per run goes to stdout (and every failed test's line), each run's
# full log to $OUT/run-N.log.
#
#   scripts/stress_suite.sh [RUNS] [BUILD]      # default 20 runs of build/ci
#
# Needs `stress` (Debian: apt-get install stress) and a built BUILD.
# Exit 0 when every run passed.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-20}
BUILD=${2:-build/ci}
OUT=${OUT:-$(mktemp -d /tmp/stress-suite.XXXXXX)}
command -v stress >/dev/null || { echo "stress_suite.sh: needs stress (apt-get install stress)" >&2; exit 2; }
[[ -f $BUILD/CTestTestfile.cmake ]] || { echo "stress_suite.sh: no tests in $BUILD (build it first)" >&2; exit 2; }
mkdir -p "$OUT"
stress --cpu 2 >/dev/null 2>&1 &
load=$!
trap 'kill $load 2>/dev/null || true' EXIT
failed=0
for i in $(seq "$RUNS"); do
  t0=$SECONDS
  rc=0
  ctest --test-dir "$BUILD" -j2 --timeout 600 >"$OUT/run-$i.log" 2>&1 || rc=$?
  echo "run $i: exit $rc, $((SECONDS - t0)) s, $(grep -E 'tests passed' "$OUT/run-$i.log" || echo 'no summary')"
  grep -E '\*\*\*(Failed|Timeout|Exception)' "$OUT/run-$i.log" || true
  [[ $rc == 0 ]] || failed=$((failed + 1))
done
echo "$failed of $RUNS runs failed (logs in $OUT)"
[[ $failed == 0 ]]
