#!/usr/bin/env bash
# The jobs seen to end, which gittins and backfill's learned walltimes learn
# from, across serve restarts (server/daemon/ended_job_history.h): jobs of
# queues a and b run their commands to the end (serve --local-executor
# --state) and one is cancelled; `ringmaster queues` counts each queue's
# ended runs (ENDED-RUNS; the cancelled job teaches nothing). serve is
# stopped (SIGTERM) and started on the same --state: the counts are back,
# neither lost nor counted twice (the journal's jobs table ends those jobs
# again, but they did not run in the new process). Then two more end and,
# once their rows are committed (read beside serve), serve is killed with
# SIGKILL: the restarted one has them too. Last, --ended-jobs-kept 4 keeps
# the last 4.
set -euo pipefail
source "$(dirname "$0")/../support/serve_lib.sh"
BIN=$(realpath "$1")
work=$(mktemp -d)
pid=""
cleanup() {
  [[ -n $pid ]] && { kill -KILL "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
  kill_recorded
  rm -rf "$work"
}
trap cleanup EXIT
mkdir "$work/state"
cat >"$work/policy.yaml" <<'YAML'
actions: "enqueue, allocate, backfill"
configurations:
- name: backfill
  arguments: {learnedWalltimePercentile: 90, learnedWalltimeMinSamples: 2}
tiers:
- plugins:
  - name: gang
- plugins:
  - name: gittins
  - name: predicates
  - name: proportion
queues:
- {name: a}
- {name: b}
YAML
"$BIN" policy check "$work/policy.yaml" >/dev/null || fail "the test's policy does not check: $("$BIN" policy check "$work/policy.yaml")"
serve() { start --nodes 1 --gpus-per-node 8 --policy "$work/policy.yaml" "$@"; }
# ended_runs QUEUE: the queue's ended runs (the API's ended_runs; int64 is a
# JSON string, absent when 0).
ended_runs() {
  "$BIN" queues --json | /usr/bin/python3 -c '
import json, sys
for q in json.load(sys.stdin)["queues"]:
    if q["name"] == sys.argv[1]:
        print(int(q.get("ended_runs", 0)))' "$1"
}
# journal_rows: the rows of ended_jobs committed (read-only, beside serve).
journal_rows() {
  /usr/bin/python3 -c '
import sqlite3, sys
db = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True)
print(db.execute("SELECT count(*) FROM ended_jobs").fetchone()[0])' "$work/state/journal.db" 2>/dev/null || echo 0
}
completed() { for j in "$@"; do [[ $(phase "$j") == Completed ]] || return 1; done; }
expect_runs() {  # A B WHEN
  local a b
  a=$(ended_runs a); b=$(ended_runs b)
  [[ $a == "$1" && $b == "$2" ]] || fail "$3: queues shows $a ended runs in a and $b in b, not $1 and $2"
}

serve
for j in a1 a2 a3; do "$BIN" submit --name $j --queue a --gpus 1 -- sleep 0.3 >/dev/null || fail "submit $j"; done
for j in b1 b2; do "$BIN" submit --name $j --queue b --gpus 2 -- sleep 0.3 >/dev/null || fail "submit $j"; done
"$BIN" submit --name gone --queue a --gpus 1 -- sleep 30 >/dev/null || fail "submit gone"
gone_runs() { [[ $(phase gone) == Running ]]; }
wait_for gone_runs || fail "gone is $(phase gone), not Running"
"$BIN" cancel gone >/dev/null || fail "cancel gone"
wait_for completed a1 a2 a3 b1 b2 || fail "the jobs did not complete: a1 $(phase a1), b2 $(phase b2)"
aborted() { [[ $(phase gone) == Aborted ]]; }
wait_for aborted || fail "gone is $(phase gone), not Aborted"
expect_runs 3 2 "before any restart"
"$BIN" queues >"$work/table"
grep -q 'ENDED-RUNS' "$work/table" || fail "queues shows no ENDED-RUNS column: $(cat "$work/table")"
kill -TERM "$pid"; wait "$pid" || fail "serve did not exit 0 on SIGTERM"; pid=""
[[ $(journal_rows) == 5 ]] || fail "the journal holds $(journal_rows) ended jobs after SIGTERM, not 5"

serve
expect_runs 3 2 "after SIGTERM and a restart"
grep -q 'ended jobs restored.* jobs=5' "$work/err" || fail "no 'ended jobs restored' line with jobs=5 in serve's log"
echo "SIGTERM ok: 3 + 2 ended runs before the stop and after the restart"

# kill -9 once the two new rows are committed (the background thread writes
# within 0.1 s of an end; 10 s at most here).
for j in a4 a5; do "$BIN" submit --name $j --queue a --gpus 1 -- sleep 0.3 >/dev/null || fail "submit $j"; done
wait_for completed a4 a5 || fail "a4 and a5 did not complete"
expect_runs 5 2 "before kill -9"
seven() { [[ $(journal_rows) == 7 ]]; }
wait_for seven || fail "the journal holds $(journal_rows) ended jobs 10 s after a4 and a5 ended, not 7"
kill -KILL "$pid"; wait "$pid" 2>/dev/null || true; pid=""
serve
expect_runs 5 2 "after kill -9 and a restart"
kill -TERM "$pid"; wait "$pid" || fail "serve did not exit 0 on SIGTERM"; pid=""
echo "kill -9 ok: 5 + 2 ended runs after the restart"

serve --ended-jobs-kept 4
total=$(( $(ended_runs a) + $(ended_runs b) ))
[[ $total == 4 ]] || fail "--ended-jobs-kept 4: $total ended runs restored, not 4"
grep -q 'left_out_over_keep=3' "$work/err" || fail "no 'left_out_over_keep=3' in serve's log"
kill -TERM "$pid"; wait "$pid" || fail "serve did not exit 0 on SIGTERM"; pid=""
echo "--ended-jobs-kept 4 ok: the last 4 of 7 restored"
