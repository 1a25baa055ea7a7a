#!/usr/bin/env bash
# Learned speed models end to end (issue 24 §4): `serve --local-executor`
# with two elastic trainers whose scaling differs, on one node of 6 GPUs.
#   flat: 400 ms of compute a step split over the workers, plus 150 ms of
#         synchronization per further worker (1: 400 ms, 2: 350, 3: 433);
#   lin:  the same compute, no synchronization cost (1: 400, 2: 200, 4: 100).
# Both start on 1 GPU beside two rigid 2-GPU blockers. Their workers report
# step times; serve fits each job a model. blocker1 is cancelled: each job
# grows to 2 (one member a cycle; the models seen at one size say nothing
# yet) and is measured there. blocker2 is cancelled: both idle GPUs go to
# lin (4), none to flat (2), and serve's log says why (the grow's reason
# names the model and the gain). Without the reports, the elastic action
# grows jobs in job order (flat first): tests/server/speed_learner_test.cc
# is that control.
#   speed_learning_test.sh RINGMASTER ELASTIC_TRAINER
set -euo pipefail
BIN=$1
TRAINER=$2
work=$(mktemp -d)
mkdir "$work/state" "$work/logs"
pid=""
. "$(dirname "$0")/../support/serve_lib.sh"
cleanup() {
  if [[ -n $pid ]]; then kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/policy.yaml" <<'YAML'
actions: "enqueue, allocate, elastic, backfill"
configurations:
- name: elastic
  arguments: {growIdle: 1, cooldown: 3, maxGrowPerCycle: 1}
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: speedup
  - name: binpack
YAML
yaml_list() { local out="[" a; for a in "$@"; do out+="\"$a\", "; done; echo "${out%, }]"; }
# Long enough for the whole test (it cancels them at the end).
long=(--samples 100000 --epochs 1 --batch 32 --commit-every 2)
cat >"$work/jobs.yaml" <<YAML
jobs:
- name: flat
  elastic: {min: 1, max: 4}
  roles: [{name: worker, replicas: 1, gpus: 1}]
  command: $(yaml_list "$TRAINER" "${long[@]}" --compute-ms 400 --allreduce-ms 150)
- name: lin
  elastic: {min: 1, max: 4}
  roles: [{name: worker, replicas: 1, gpus: 1}]
  command: $(yaml_list "$TRAINER" "${long[@]}" --compute-ms 400)
- name: blocker1
  roles: [{name: worker, replicas: 2, gpus: 1}]
  command: $(yaml_list "$TRAINER" "${long[@]}" --step-delay-ms 200)
- name: blocker2
  roles: [{name: worker, replicas: 2, gpus: 1}]
  command: $(yaml_list "$TRAINER" "${long[@]}" --step-delay-ms 200)
YAML

start --nodes 1 --gpus-per-node 6 --policy "$work/policy.yaml" --executor-logs "$work/logs"
"$BIN" submit -f "$work/jobs.yaml" >/dev/null || fail "submit"
ready() { "$BIN" job "$1" --json | sed -n 's/^ *"tasks_ready": \([0-9]*\),*$/\1/p' | head -1; }
# wait_until SECONDS CONDITION...
wait_until() {
  local limit=$1 t0=$SECONDS
  shift
  until "$@"; do (( SECONDS - t0 < limit )) || return 1; sleep 0.3; done
}
learned() { grep -q "msg=\"speed model\" job=$1 model=\"learned from [0-9]* reports ($2)" "$work/err"; }
at() { [[ $(ready "$1") == "$2" ]]; }

wait_until 60 learned flat "1 GPUs on 1 node" || fail "no model learned for flat at 1 GPU"
wait_until 60 learned lin "1 GPUs on 1 node" || fail "no model learned for lin at 1 GPU"
"$BIN" cancel blocker1 >/dev/null || fail "cancel blocker1"
wait_until 60 at flat 2 || fail "flat did not grow to 2: $(ready flat)"
wait_until 60 at lin 2 || fail "lin did not grow to 2: $(ready lin)"
wait_until 60 learned flat "1 GPUs on 1 node, 2 GPUs on 1 node" || fail "flat not measured at 2"
wait_until 60 learned lin "1 GPUs on 1 node, 2 GPUs on 1 node" || fail "lin not measured at 2"
"$BIN" cancel blocker2 >/dev/null || fail "cancel blocker2"
wait_until 60 at lin 4 || fail "lin did not grow to 4: $(ready lin) (flat $(ready flat))"
# Two more growth chances (growIdle 1 s, cooldown 3 s) for flat: it stays.
sleep 5
[[ $(ready flat) == 2 ]] || fail "flat grew past 2: $(ready flat)"
[[ $(ready lin) == 4 ]] || fail "lin not at 4: $(ready lin)"
why=$(grep -o 'grew into idle GPUs: 2 -> 3 GPUs on 1 -> 1 node, x[0-9.]* the rate (speed model: learned from [^)]*)' "$work/err" | head -1)
[[ -n $why ]] || fail "the log does not say why lin grew"
"$BIN" job lin | grep -q '^speed model: *learned from' || fail "job lin shows no speed model: $("$BIN" job lin)"
echo "lin grew: $why"
"$BIN" job lin | grep '^speed model:'
"$BIN" job flat | grep '^speed model:'
for j in flat lin; do "$BIN" cancel "$j" >/dev/null || fail "cancel $j"; done
kill -TERM "$pid"
wait "$pid" || fail "serve exited $? on SIGTERM"
pid=""
echo "speed learning: ok"
