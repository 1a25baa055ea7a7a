#!/usr/bin/env bash
# proportion's usageHalfLife across serve restarts (docs/POLICY.md,
# "Time-decayed fair share"): a job of queue a holds 8 GPUs; `ringmaster
# queues` shows a's decayed usage; serve is stopped (SIGTERM) and started on
# the same --state: a's usage is back, not less than before the stop; then,
# with the usage journaled every second (--queue-usage-every 1), serve is
# killed with SIGKILL once a write valued after a reading is in the journal:
# the restarted one has at least that reading and at most what a could have
# used since (the bound: a write period's use is lost at most).
set -euo pipefail
BIN=$1
work=$(mktemp -d)
pid=""
cleanup() {
  [[ -n $pid ]] && { kill -KILL "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  echo "--- serve stderr"; tail -40 "$work/err" || true
  exit 1
}
# ctest's timeout kills this script alone, with SIGKILL (no cleanup): this
# watchdog then ends the serve it left.
( while kill -0 $$ 2>/dev/null; do sleep 1; done
  [[ -f $work/serve.pid ]] && kill -KILL "$(cat "$work/serve.pid")" 2>/dev/null
  rm -rf "$work" ) >/dev/null 2>&1 &
mkdir "$work/state"
cat >"$work/policy.yaml" <<'YAML'
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
    arguments: {usageHalfLife: 3600}
queues:
- {name: a}
- {name: b}
YAML

start() {  # serve on the state dir with the policy, SERVE-FLAGS...; sets pid and RINGMASTER_SERVER
  : >"$work/out"
  "$BIN" serve --no-bind --http 127.0.0.1:0 --grpc 127.0.0.1:0 --nodes 1 --gpus-per-node 8 --period-ms 50 \
    --policy "$work/policy.yaml" --state "$work/state" "$@" >"$work/out" 2>>"$work/err" &
  pid=$!
  echo "$pid" >"$work/serve.pid"
  local port=""
  for _ in $(seq 100); do
    port=$(sed -n 's/^admin API listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$work/out" 2>/dev/null || true)
    [[ -n $port ]] && break
    sleep 0.1
  done
  [[ -n $port ]] || fail "serve did not start"
  export RINGMASTER_SERVER=127.0.0.1:$port
}
# usage QUEUE: its decayed GPU-seconds now (the API's usage_gpu_seconds).
usage() {
  "$BIN" queues --json | /usr/bin/python3 -c '
import json, sys
for q in json.load(sys.stdin)["queues"]:
    if q["name"] == sys.argv[1]:
        print(q.get("usage_gpu_seconds", 0))' "$1"
}
# at_least A B [SLACK]: A >= B x (1 - SLACK) (SLACK 0.001: decay over 1 h
# half-life in the seconds a test takes).
at_least() { /usr/bin/python3 -c 'import sys; a, b = map(float, sys.argv[1:3]); sys.exit(0 if a >= b * 0.999 else 1)' "$1" "$2"; }
below() { /usr/bin/python3 -c 'import sys; a, b = map(float, sys.argv[1:3]); sys.exit(0 if a < b else 1)' "$1" "$2"; }
plus() { /usr/bin/python3 -c 'import sys; print(float(sys.argv[1]) + float(sys.argv[2]))' "$1" "$2"; }

start
"$BIN" submit --name a0 --queue a --gpus 8 >/dev/null || fail "a0 not accepted"
sleep 1.5
"$BIN" queues >"$work/table"
grep -q 'RECENT-USE' "$work/table" || fail "queues shows no decayed usage: $(cat "$work/table")"
grep -q 'usage half-life of 3600 s' "$work/table" || fail "queues names no half-life: $(cat "$work/table")"
before=$(usage a)
at_least "$before" 8 || fail "a held 8 GPUs for > 1 s but shows $before GPU-s"
[[ $(usage b) == 0 ]] || fail "b used nothing but shows $(usage b) GPU-s"
kill -TERM "$pid"; wait "$pid" || fail "serve did not exit 0 on SIGTERM"; pid=""

start --queue-usage-every 1
after=$(usage a)
at_least "$after" "$before" || fail "after SIGTERM and a restart a shows $after GPU-s, $before before"
echo "SIGTERM ok: a $before GPU-s before the stop, $after after the restart"

# kill -9: a reading, then SIGKILL once a periodic write valued after the
# reading is in the journal (read-only, beside serve: WAL readers do not
# disturb it), within 10 s.
# journaled_after MS: the journal's row of a was valued after MS (ms since the epoch).
journaled_after() {
  /usr/bin/python3 -c '
import sqlite3, sys
db = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True)
row = db.execute("SELECT valued_at FROM queue_usage WHERE queue = ?", ("a",)).fetchone()
sys.exit(0 if row and row[0] > int(sys.argv[2]) else 1)' "$work/state/journal.db" "$1" 2>/dev/null
}
sleep 1.2
read1=$(usage a)
t1=$(date +%s%3N)
for _ in $(seq 100); do journaled_after "$t1" && break; sleep 0.1; done
journaled_after "$t1" || fail "no queue usage journaled within 10 s (--queue-usage-every 1)"
t2=$(date +%s%3N)
kill -KILL "$pid"; wait "$pid" 2>/dev/null || true; pid=""
start
after=$(usage a)
at_least "$after" "$read1" || fail "after kill -9 a shows $after GPU-s, $read1 before the last write"
# At most 8 GPUs x (the time from the reading to the kill + 2 s) more.
below "$after" "$(plus "$read1" $(( 8 * ((t2 - t1) / 1000 + 2) )))" ||
  fail "after kill -9 a shows $after GPU-s, more than it could have used since $read1"
grep -q 'queue usage restored' "$work/err" || fail "no 'queue usage restored' line in serve's log"
kill -TERM "$pid"; wait "$pid" || fail "serve did not exit 0 on SIGTERM"; pid=""
echo "kill -9 ok: a $read1 GPU-s before the last write, $after after the restart"
