#!/usr/bin/env bash
# examples/local-elastic/run.sh as a test: its exit code AND the facts it
# prints (each check's "ok" line, none "FAIL"), within the ctest timeout.
set -uo pipefail
export RINGMASTER=$1 ELASTIC_TRAINER=$2
run=$3
out=$(bash "$run" 2>&1)
rc=$?
echo "$out"
fail() { echo "TEST FAIL: $*"; exit 1; }
[[ $rc == 0 ]] || fail "run.sh exited $rc"
for fact in \
  '^ok   elastic-train: ([0-9]+) of \1 samples, 0 duplicated, 0 skipped, 0 inconsistent steps$' \
  '^ok   elastic-train: final weights = the serial run' \
  '^ok   elastic-train: ended on 4 workers$' \
  '^ok   elastic-train: membership 4 -> 2 \(planned shrink\) -> 4 \(grow\)$' \
  '^ok   elastic-train: no failure generation$' \
  '^ok   elastic-train: 6 processes started' \
  '^ok   elastic-train: 2 shrunk workers left by themselves' \
  '^ok   elastic-train: 2 of the first 4 processes ran from start to end \(no restart\)$' \
  '^ok   urgent: ([0-9]+) of \1 samples$' \
  '^PASS: '; do
  grep -qE -- "$fact" <<<"$out" || fail "no /$fact/ in the output"
done
! grep -q '^FAIL' <<<"$out" || fail "a check failed"
echo "TEST PASS"
