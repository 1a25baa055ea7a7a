#!/usr/bin/env bash
# Never lose what was accepted (issue 11 §4): a client streams submissions
# (`ringmaster submit` exits 0 only once the job is journaled), the daemon is
# killed with SIGKILL in the middle, restarted on the same --state; every
# acknowledged job must be there, and no job twice. Then a policy update
# (UpdatePolicy) and kill -9: the restarted daemon runs the updated policy.
set -euo pipefail
BIN=$1
work=$(mktemp -d)
pid=""
client=""
cleanup() {
  [[ -n $client ]] && {
    pkill -KILL -P "$client" 2>/dev/null || true  # the three loops
    kill -KILL "$client" 2>/dev/null || true
    wait "$client" 2>/dev/null || true
  }
  [[ -n $pid ]] && { kill -KILL "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir "$work/state"
# ctest's timeout kills this script alone, with SIGKILL (no cleanup): then
# this watchdog ends the serve it left (the submission loops end by
# themselves, see stream).
( while kill -0 $$ 2>/dev/null; do sleep 1; done
  [[ -f $work/serve.pid ]] && kill -KILL "$(cat "$work/serve.pid")" 2>/dev/null
  rm -rf "$work" ) >/dev/null 2>&1 &

start() {  # starts serve on the state dir; sets pid and RINGMASTER_SERVER
  : >"$work/out"
  "$BIN" serve --no-bind --http 127.0.0.1:0 --grpc 127.0.0.1:0 --nodes 4 --gpus-per-node 8 --period-ms 20 \
    --state "$work/state" >"$work/out" 2>>"$work/err" &
  pid=$!
  echo "$pid" >"$work/serve.pid"
  local port=""
  for _ in $(seq 100); do
    port=$(sed -n 's/^admin API listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$work/out" 2>/dev/null || true)
    [[ -n $port ]] && break
    sleep 0.1
  done
  [[ -n $port ]] || { cat "$work/err"; fail "serve did not start"; }
  export RINGMASTER_SERVER=127.0.0.1:$port
}

start
# Three clients: one job per call each, appending the name only after exit 0.
# Some jobs run (1 GPU each, 32 GPUs), the rest wait: both kinds are
# journaled. A loop ends with this script, even a killed one (the loops
# outlived a timed-out run and went on submitting for as long as the machine
# was up).
stream() {
  for i in $(seq 1 100000); do
    kill -0 $$ 2>/dev/null || return 0
    if "$BIN" submit --name "job-$1-$i" --gpus 1 --timeout 5 >/dev/null 2>&1; then echo "job-$1-$i" >>"$work/acked"; fi
  done
}
(stream a & stream b & stream c & wait) &
client=$!
# The running jobs as "NAME NODE GPUS" lines, sorted.
placements() {
  local n
  for n in $("$BIN" jobs --phase Running --json | sed -n 's/^ *"name": "\(job-[a-c]-[0-9]*\)",$/\1/p'); do
    "$BIN" job "$n" --json | /usr/bin/python3 -c '
import json, sys
j = json.load(sys.stdin)
print(j["name"], " ".join(t.get("node", "-") + ":" + ",".join(map(str, t.get("gpus", []))) for t in j.get("tasks", [])))'
  done | sort
}
acked_count() { if [[ -f $work/acked ]]; then wc -l <"$work/acked"; else echo 0; fi; }
# Let them get well into the stream (the 32 GPUs taken, jobs waiting).
for _ in $(seq 600); do
  [[ $(acked_count) -ge 40 ]] && break
  sleep 0.05
done
# Where the running jobs run. Placements are journaled without waiting, in
# order with the submissions: once one more submission is acknowledged,
# these placements are durable, and must come back as they are.
placements >"$work/placed"
[[ $(wc -l <"$work/placed") -ge 1 ]] || fail "no job runs before the kill"
snap=$(acked_count)
for _ in $(seq 600); do
  [[ $(acked_count) -gt $snap ]] && break
  sleep 0.05
done
[[ $(acked_count) -gt $snap ]] || fail "no submission acknowledged after the placements were read"
# Kill the daemon mid-flight.
kill -KILL "$pid"
wait "$pid" 2>/dev/null || true
pid=""
pkill -KILL -P "$client" 2>/dev/null || true  # the three loops (children of this test's own subshell)
kill -KILL "$client" 2>/dev/null || true
wait "$client" 2>/dev/null || true
client=""
sleep 0.2
acked=$(wc -l <"$work/acked")
[[ $acked -ge 40 ]] || fail "only $acked submissions acknowledged before the kill"

start
grep -q "^recovered [0-9]* jobs" "$work/out" || fail "no recovery line"
"$BIN" jobs --json >"$work/jobs.json"
names=$(sed -n 's/^ *"name": "\(job-[a-c]-[0-9]*\)",$/\1/p' "$work/jobs.json" | sort)
while read -r n; do
  grep -qx "$n" <<<"$names" || fail "acknowledged $n is missing after restart"
done <"$work/acked"
dups=$(uniq -d <<<"$names" | wc -l)
[[ $dups == 0 ]] || fail "$dups jobs listed twice"
total=$(wc -l <<<"$names")
# At most the three submissions in flight at the kill may be there unacknowledged.
[[ $total -le $((acked + 3)) ]] || fail "$total jobs after restart, $acked acknowledged"
# Every job that ran before the kill runs where it ran (jobs placed since
# may run too: the restarted daemon places waiting jobs).
placements >"$work/replaced"
missing=$(comm -23 "$work/placed" "$work/replaced")
[[ -z $missing ]] || fail "placements lost or moved by the restart:"$'\n'"$missing"$'\n'"after:"$'\n'"$(cat "$work/replaced")"
running=$(wc -l <"$work/placed")
echo "kill -9 ok: $acked acknowledged, $total recovered, $running placements back where they were, none twice"

# A policy update survives kill -9 (issue 26): serve runs without --policy,
# so after the restart the journal's policy is in force, and a job of the
# queue only that policy has comes back in it.
"$BIN" policy default >"$work/policy.yaml"
printf 'queues:\n- name: default\n- name: research\n  weight: 3\n' >>"$work/policy.yaml"
"$BIN" policy update "$work/policy.yaml" >/dev/null || fail "policy update refused"
"$BIN" submit --name in-research --queue research --gpus 1 >/dev/null || fail "no submission to the new queue"
kill -KILL "$pid"
wait "$pid" 2>/dev/null || true
pid=""
start
"$BIN" queues | grep -qE '^research +- +3 ' || fail "the updated policy is not in force after kill -9: $("$BIN" queues)"
"$BIN" job in-research --json | grep -q '"queue": "research"' || fail "in-research is not back in its queue"
kill -TERM "$pid"; wait "$pid"; pid=""
echo "policy update survived kill -9"
