#!/usr/bin/env bash
# A restarted daemon re-attaches to its processes (serve --local-executor
# --state): serve runs a gang of 2 whose processes wait for a file; serve is
# killed with SIGKILL (its processes keep running), restarted on the same
# --state; it must re-adopt the same pids (no new process started), keep
# supervising them, and finish the job with the exit status the processes
# had (recorded by `ringmaster supervise`), though they are not its
# children. A stray recorded process whose job is gone is killed.
set -euo pipefail
source "$(dirname "$0")/../support/serve_lib.sh"
BIN=$(realpath "$1")
work=$(mktemp -d)
pid=""
cleanup() {
  [[ -n $pid ]] && { kill -KILL "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
  kill_recorded ${first_pids:-}  # the task processes (their own process groups)
  rm -rf "$work"
}
trap cleanup EXIT
mkdir "$work/state"

two_records() { [[ $(records | wc -l) == 2 ]]; }

start --nodes 1 --gpus-per-node 4 --restart-grace-ms 3000
# Each task waits for $work/go, then exits 0.
"$BIN" submit --name gang --replicas 2 --gpus 1 -- sh -c "while [ ! -f '$work/go' ]; do sleep 0.05; done; exit 0" \
  >/dev/null || fail "submit"
wait_for two_records || fail "the executor did not record 2 processes"
first_pids=$(records)
[[ $(phase gang) == Running ]] || fail "gang is $(phase gang), not Running"

kill -KILL "$pid"; wait "$pid" 2>/dev/null || true; pid=""
for p in $first_pids; do alive "$p" || fail "process $p died with the daemon"; done

start --nodes 1 --gpus-per-node 4 --restart-grace-ms 3000
grep -q "^recovered 1 jobs" "$work/out" || fail "no recovery line"
grep -q 'msg="task re-adopted"' "$work/err" || fail "no re-adoption logged"
[[ $(phase gang) == Running ]] || fail "gang is $(phase gang) after the restart, not Running"
wait_cycles 5 || fail "serve ran no 5 cycles after the restart"  # nothing is restarted in them
[[ $(records) == "$first_pids" ]] || fail "processes after restart: $(records | tr '\n' ' '), before: $(echo $first_pids)"
for p in $first_pids; do alive "$p" || fail "re-adopted process $p is gone"; done

# They finish: exit 0 through their supervisors, though not serve's children.
touch "$work/go"
completed() { [[ $(phase gang) == Completed ]]; }
wait_for completed || fail "gang is $(phase gang), not Completed, once its processes exited 0"
for p in $first_pids; do ! alive "$p" || fail "process $p still there"; done

# A failing gang across a restart: its processes exit 3 while serve is down.
rm -f "$work/go"
"$BIN" submit --name crash --replicas 2 --gpus 1 -- sh -c "while [ ! -f '$work/go' ]; do sleep 0.05; done; exit 3" \
  >/dev/null || fail "submit crash"
wait_for two_records || fail "the executor did not record the crash gang's processes"
second_pids=$(records)
first_pids="$first_pids $second_pids"
kill -KILL "$pid"; wait "$pid" 2>/dev/null || true; pid=""
touch "$work/go"
gone() { for p in $second_pids; do ! alive "$p" || return 1; done; }
wait_for gone || fail "the crash gang's processes did not exit"
rm -f "$work/go"
start --nodes 1 --gpus-per-node 4 --restart-grace-ms 3000
grep -q 'msg="task processes after restart".* ended=2' "$work/err" || fail "the ended processes were not reported"
# Reported failed (exit 3): the gang restarts whole, as new processes.
restarted() { [[ $(records | wc -l) == 2 && $(records) != "$second_pids" ]]; }
wait_for restarted || fail "the crash gang did not restart (records: $(records | tr '\n' ' '))"
"$BIN" job crash --json | grep -q "exited with code 3" || grep -q "exited with code 3" "$work/err" ||
  fail "the failure's exit code is not reported"
first_pids="$first_pids $(records)"
kill -TERM "$pid"; wait "$pid"; pid=""
echo "re-adoption ok: gang re-adopted and completed across kill -9; crash gang's exit 3 seen after restart"
