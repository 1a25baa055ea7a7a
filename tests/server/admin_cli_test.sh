#!/usr/bin/env bash
# The admin verbs against a real `ringmaster serve`: exit codes AND output
# of submit / jobs / job / queues / nodes / cancel / policy (docs/ADMIN.md),
# the token, --json, SIGHUP reload, and the daemon unreachable.
set -euo pipefail
BIN=$1
work=$(mktemp -d)
pid=""
cleanup() {
  if [[ -n $pid ]]; then kill -KILL "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
# run WANT_RC CMD...: runs, keeps stdout+stderr in $out, checks the exit code.
run() {
  local want=$1; shift
  set +e
  out=$("$@" 2>&1)
  local rc=$?
  set -e
  [[ $rc == "$want" ]] || fail "exit $rc, want $want: $*"$'\n'"$out"
}
expect() { grep -qE -- "$1" <<<"$out" || fail "no /$1/ in:"$'\n'"$out"; }
# until CMD... succeeds; 10 s at most.
wait_for() { for _ in $(seq 200); do "$@" && return 0; sleep 0.05; done; return 1; }
# CMD... exits 0 and its output (kept in $out) matches every REGEX given
# before it: shows REGEX... -- CMD...
shows() {
  local want=()
  while [[ $1 != -- ]]; do want+=("$1"); shift; done
  shift
  out=$("$@" 2>&1) || return 1
  local w
  for w in "${want[@]}"; do grep -qE -- "$w" <<<"$out" || return 1; done
}

# policy default: the built-in policy, which policy check accepts.
run 0 "$BIN" policy default
expect '^actions: '
echo "$out" >"$work/default.yaml"
run 0 "$BIN" policy check "$work/default.yaml"
expect '^ok$'

# A bad command line exits 2, whatever the argument parser found (not its
# own codes 105, 106, 109, 114), and sends nothing; --help exits 0.
run 2 "$BIN"                                        # no subcommand
expect 'A subcommand is required'
run 2 "$BIN" jobs --bogus                           # unknown option
expect 'bogus'
run 2 "$BIN" submit --name x --gpus 100             # out of range
expect 'gpus'
run 2 "$BIN" jobs --timeout                         # option without its value
expect 'timeout'
run 2 "$BIN" job                                    # missing argument
expect 'NAME is required'
run 2 "$BIN" jobs --phase Foo --server 127.0.0.1:1  # not a phase: refused before anything is sent
expect 'Foo not in'
run 2 "$BIN" serve --no-bind --token-file "$work/absent"
expect 'absent'
run 2 "$BIN" serve --no-bind --fresh-state          # needs --state
expect 'requires --state'
run 0 "$BIN" jobs --help
expect 'RINGMASTER_TOKEN, which holds the token itself'

# Nobody listening: exit 3, with the hint.
run 3 "$BIN" jobs --server 127.0.0.1:1 --timeout 2
expect 'is `ringmaster serve` running'

mkdir "$work/state"
echo s3cret >"$work/token"
cp "$work/default.yaml" "$work/policy.yaml"
"$BIN" serve --no-bind --http 127.0.0.1:0 --grpc 127.0.0.1:0 --nodes 2 --gpus-per-node 8 --period-ms 50 \
  --state "$work/state" --token-file "$work/token" --policy "$work/policy.yaml" >"$work/out" 2>"$work/err" &
pid=$!
port=""
for _ in $(seq 100); do
  port=$(sed -n 's/^admin API listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$work/out" 2>/dev/null || true)
  [[ -n $port ]] && break
  sleep 0.1
done
[[ -n $port ]] || { cat "$work/err"; fail "serve did not start"; }
export RINGMASTER_SERVER=127.0.0.1:$port

cat >"$work/jobs.yaml" <<'YAML'
jobs:
- name: train
  walltime: 3600
  roles: [{name: worker, replicas: 2, gpus: 8}]
- name: eval
  roles: [{name: worker, replicas: 1, gpus: 4}]
YAML
# No token: 4, and nothing was accepted.
run 4 "$BIN" submit -f "$work/jobs.yaml"
expect 'needs a token'
export RINGMASTER_TOKEN=s3cret
run 0 "$BIN" submit -f "$work/jobs.yaml"
expect '^train +default +(Pending|Inqueue|Running)$'
expect '^eval +default +(Pending|Inqueue)$'
run 5 "$BIN" submit --name train --gpus 1
expect "already submitted"
# Bad input file: 2, nothing sent.
run 2 "$BIN" submit -f "$work/policy.yaml"
expect 'jobs file is a map'
run 2 "$BIN" submit --name x --gpus 1.5
expect 'gpus'
# The daemon refuses: 1.
run 1 "$BIN" submit --name x --queue nope
expect "unknown queue 'nope'"

# The next cycles start train and leave eval waiting behind it.
wait_for shows '^train +default +0 +Running ' '^eval +default +0 +Inqueue ' -- "$BIN" jobs ||
  fail "train not Running or eval not Inqueue:"$'\n'"$out"
run 0 "$BIN" jobs
expect '^JOB +QUEUE +PRIO +PHASE +READY +GPUS +START +REASON$'
expect '^train +default +0 +Running +2/2 +16 +running'
expect '^eval +default +0 +Inqueue +0/1 +0 +in [0-9]+m'
run 0 "$BIN" job eval
expect '^pending reason: +.+'
expect '^expected start: +in (59|60)m$'
expect '^eval-worker-0 +Pending +- +- +-$'  # TASK STATE NODE GPUS RANK
run 0 "$BIN" job train --json
expect '"phase": "Running"'
expect '"gpu_milli": "16000"'
run 1 "$BIN" job nope
expect "job 'nope': no such job"
grep -q 'is `ringmaster serve` running' <<<"$out" && fail "the daemon answered, yet the CLI asks whether it runs"
run 0 "$BIN" queues
expect '^default +- +1 +16 +16 +- +1 +1$'
run 0 "$BIN" nodes
expect '^node-0000 +ready +H100 +8 +0 +1$'
run 0 "$BIN" jobs --phase Running --json
expect '"name": "train"'
grep -q '"name": "eval"' <<<"$out" && fail "--phase Running listed eval"

# Cancel: journaled, then eval starts in the freed GPUs.
run 0 "$BIN" cancel train
expect '^cancelled train \(Aborted\)$'
run 1 "$BIN" cancel train
expect 'already ended'
wait_for shows '^phase: +Running$' -- "$BIN" job eval || fail "eval did not start once train was cancelled:"$'\n'"$out"
run 0 "$BIN" job eval
expect '^phase: +Running$'

# Policy: an invalid update is refused with its errors (1); SIGHUP re-reads
# the file; a bad file on SIGHUP leaves the old policy.
printf 'actions: "allocate, shuffle"\ntiers: []\n' >"$work/bad.yaml"
run 1 "$BIN" policy update "$work/bad.yaml"
expect "UpdatePolicy:1:[0-9]+: actions: unknown action 'shuffle'"
expect 'keeps its policy'
printf '%s\nqueues:\n- name: default\n- name: research\n  weight: 2\n' "$(cat "$work/default.yaml")" >"$work/policy.yaml"
kill -HUP "$pid"
for _ in $(seq 50); do grep -q 'policy reloaded' "$work/err" && break; sleep 0.1; done
run 0 "$BIN" queues
expect '^research +- +2 '
cp "$work/bad.yaml" "$work/policy.yaml"
kill -HUP "$pid"
for _ in $(seq 50); do grep -q 'policy reload rejected' "$work/err" && break; sleep 0.1; done
grep -q "unknown action 'shuffle'" "$work/err" || fail "SIGHUP rejection not reported"
run 0 "$BIN" submit --name later --queue research --gpus 1
expect '^later +research +(Pending|Inqueue|Running)$'

kill -TERM "$pid"
set +e
wait "$pid"
rc=$?
set -e
pid=""
[[ $rc == 0 ]] || fail "serve exited $rc after SIGTERM"
grep -q 'jobs accepted' "$work/out" || fail "no summary"
echo "admin CLI ok"
