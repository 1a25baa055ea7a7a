#!/usr/bin/env bash
# A cancel survives a daemon crash (serve --local-executor --state): a running
# gang whose processes ignore SIGTERM is cancelled with a grace period, so it
# stays Cancelling until the deadline's SIGKILL; serve is killed with SIGKILL
# in that window and restarted on the same --state. The job must come back
# Cancelling (not Running, not Pending: the cancel was journaled before it was
# acknowledged), its processes must be gone by the new deadline, it must end
# Aborted, and a job waiting for its GPUs must start only after that.
set -euo pipefail
source "$(dirname "$0")/../support/serve_lib.sh"
BIN=$(realpath "$1")
work=$(mktemp -d)
pid=""
cleanup() {
  [[ -n $pid ]] && { kill -KILL "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
  kill_recorded ${gang_pids:-}  # the task processes (their own process groups)
  rm -rf "$work"
}
trap cleanup EXIT
mkdir "$work/state"

start --nodes 1 --gpus-per-node 2 --cancel-grace-ms 3000
# Each task ignores SIGTERM: only the deadline's SIGKILL ends it.
"$BIN" submit --name stubborn --replicas 2 --gpus 1 -- sh -c "trap '' TERM; while :; do sleep 0.05; done" \
  >/dev/null || fail "submit stubborn"
two_records() { [[ $(records | wc -l) == 2 ]]; }
wait_for two_records || fail "the executor did not record 2 processes"
gang_pids=$(records)
running() { [[ $(phase stubborn) == Running ]]; }
wait_for running || fail "stubborn is $(phase stubborn), not Running"
# A job that needs both GPUs waits behind it.
"$BIN" submit --name next --replicas 1 --gpus 2 -- sh -c "sleep 30" >/dev/null || fail "submit next"

out=$("$BIN" cancel stubborn) || fail "cancel exited $?"
[[ $out == cancelling* ]] || fail "cancel said '$out', not cancelling"
[[ $(phase stubborn) == Cancelling ]] || fail "stubborn is $(phase stubborn) after cancel, not Cancelling"
# The crash, inside the grace period (3 s): the processes still run.
kill -KILL "$pid"; wait "$pid" 2>/dev/null || true; pid=""
for p in $gang_pids; do alive "$p" || fail "process $p ended before the deadline (it ignores SIGTERM)"; done

start --nodes 1 --gpus-per-node 2 --cancel-grace-ms 3000
[[ $(phase stubborn) == Cancelling ]] || fail "stubborn is $(phase stubborn) after the restart, not Cancelling"
[[ $(phase next) != Running ]] || fail "next runs while stubborn's processes are alive"
gone() { for p in $gang_pids; do ! alive "$p" || return 1; done; }
wait_for gone || fail "stubborn's processes outlived the cancel's deadline after the restart"
aborted() { [[ $(phase stubborn) == Aborted ]]; }
wait_for aborted || fail "stubborn is $(phase stubborn), not Aborted, once its processes are gone"
next_runs() { [[ $(phase next) == Running ]]; }
wait_for next_runs || fail "next is $(phase next), not Running, once stubborn's GPUs are free"
kill -TERM "$pid"
rc=0; wait "$pid" || rc=$?
pid=""
[[ $rc == 0 ]] || fail "serve exited $rc after SIGTERM"
echo "cancel across restart ok: Cancelling journaled, processes stopped at the deadline, Aborted, GPUs then reused"
