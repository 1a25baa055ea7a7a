#!/usr/bin/env bash
# examples/local-elastic/run.sh: the whole loop scheduler -> coordinator ->
# shim on one machine, with real processes.
#
#   1. `ringmaster serve --local-executor` on loopback, with one node of 4
#      GPUs (nothing is run on a GPU: the trainer is CPU-only Gloo).
#   2. An elastic job of 4 workers (min 2) running examples/elastic_trainer,
#      a C++ data-parallel trainer that checks every sample of every step.
#   3. A priority-100 job that needs 2 GPUs: the engine shrinks the first
#      job to 2; its two leavers leave at a step boundary and the two
#      survivors' communicator re-forms in the same processes.
#   4. The priority job runs and ends; the first job grows back to 4 (two
#      new processes join) and trains to the end.
#   5. Checks: no sample lost or repeated (the trainer's own accounting),
#      the final weights equal a serial run's, the survivors never
#      restarted, and the membership went 4 -> 2 -> 4.
#
# Usage: examples/local-elastic/run.sh            (builds build/release first)
#        RINGMASTER=path ELASTIC_TRAINER=path examples/local-elastic/run.sh
# Exit 0 when every check passed; the work directory is kept on failure
# (KEEP=1 keeps it always).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
if [[ -z ${RINGMASTER:-} || -z ${ELASTIC_TRAINER:-} ]]; then
  echo "== building ringmaster and elastic_trainer (build/release)"
  cmake -S "$root" -B "$root/build/release" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DRINGMASTER_BUILD_TESTS=OFF -DRINGMASTER_BUILD_BENCH=OFF >/dev/null
  cmake --build "$root/build/release" --target ringmaster elastic_trainer -j "$(nproc)" >/dev/null
  RINGMASTER=$root/build/release/cli/ringmaster
  ELASTIC_TRAINER=$root/build/release/examples/elastic_trainer/elastic_trainer
fi
# The trainer: 4 x 2048 samples in global batches of 32 (256 steps), 120 ms a
# step: about half a minute, long enough for the shrink and the grow.
STEP_MS=${STEP_MS:-120}
TRAIN_ARGS=(--samples 2048 --epochs 4 --batch 32 --commit-every 4 --step-delay-ms "$STEP_MS")
URGENT_ARGS=(--samples 256 --epochs 2 --batch 32 --step-delay-ms 150)

work=$(mktemp -d /tmp/local-elastic.XXXXXX)
mkdir -p "$work/state" "$work/logs"
serve_pid=""
ok=0
cleanup() {
  if [[ -n $serve_pid ]] && kill -0 "$serve_pid" 2>/dev/null; then
    kill -TERM "$serve_pid" 2>/dev/null || true
    wait "$serve_pid" 2>/dev/null || true
  fi
  if [[ $ok == 1 && -z ${KEEP:-} ]]; then rm -rf "$work"; else echo "work directory kept: $work"; fi
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  echo "--- serve log (last 40 lines)"; tail -40 "$work/serve.err" || true
  exit 1
}
rm_() { "$RINGMASTER" "$@" --server "127.0.0.1:$port"; }
phase_of() { rm_ job "$1" --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["phase"])' 2>/dev/null || echo "?"; }
# wait_phase JOB PHASE SECONDS (PHASE may list several: "Running|Completed")
wait_phase() {
  local t0=$SECONDS
  while [[ "|$2|" != *"|$(phase_of "$1")|"* ]]; do
    (( SECONDS - t0 < $3 )) || fail "$1 not $2 after $3 s (phase $(phase_of "$1"))"
    sleep 0.3
  done
}

echo "== ringmaster serve --local-executor (1 node x 4 GPUs, loopback)"
"$RINGMASTER" serve --local-executor --nodes 1 --gpus-per-node 4 --policy "$here/policy.yaml" \
  --state "$work/state" --executor-logs "$work/logs" --grpc 127.0.0.1:0 --http 127.0.0.1:0 \
  --period-ms 200 --no-bind >"$work/serve.out" 2>"$work/serve.err" &
serve_pid=$!
port=""
for _ in $(seq 100); do
  port=$(sed -n 's/^admin API listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$work/serve.out")
  [[ -n $port ]] && break
  sleep 0.1
done
[[ -n $port ]] || fail "serve did not start"
cat "$work/serve.out"

yaml_list() { local out="[" a; for a in "$@"; do out+="\"$a\", "; done; echo "${out%, }]"; }
cat >"$work/jobs.yaml" <<YAML
jobs:
- name: elastic-train
  elastic: {min: 2, max: 4}
  roles: [{name: worker, replicas: 4, gpus: 1}]
  command: $(yaml_list "$ELASTIC_TRAINER" "${TRAIN_ARGS[@]}" --out "$work/elastic-train.json")
YAML
cat >"$work/urgent.yaml" <<YAML
jobs:
- name: urgent
  priority: 100
  roles: [{name: worker, replicas: 2, gpus: 1}]
  command: $(yaml_list "$ELASTIC_TRAINER" "${URGENT_ARGS[@]}" --out "$work/urgent.json")
YAML

echo "== submit elastic-train: 4 workers (min 2) of examples/elastic_trainer"
rm_ submit -f "$work/jobs.yaml"
wait_phase elastic-train Running 20
# Let it train a few seconds on 4.
sleep 3
echo "== submit urgent: priority 100, 2 GPUs (the cluster is full)"
rm_ submit -f "$work/urgent.yaml"
# urgent runs about 2.5 s: on a loaded machine it may start and end between
# two polls (each poll is a CLI call), so Completed counts as having run.
wait_phase urgent "Running|Completed" 30
echo "urgent has started; elastic-train runs on 2:"
rm_ jobs
wait_phase urgent Completed 40
echo "== urgent completed; elastic-train grows back into the idle GPUs"
wait_phase elastic-train Completed 90
rm_ jobs
kill -TERM "$serve_pid"
wait "$serve_pid" || fail "serve exited $? on SIGTERM"
serve_pid=""
tail -1 "$work/serve.out"

echo "== checks"
"$ELASTIC_TRAINER" --reference "${TRAIN_ARGS[@]}" --out "$work/reference.json"
python3 - "$work" <<'PY' || fail "checks failed"
import json, re, sys, glob
work = sys.argv[1]
r = json.load(open(f"{work}/elastic-train.json"))
ref = json.load(open(f"{work}/reference.json"))
u = json.load(open(f"{work}/urgent.json"))
err = open(f"{work}/serve.err").read()
bad = []
def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok: bad.append(what)
check(r["samples_processed"] == r["expected_samples"] and r["duplicate_samples"] == 0 and r["skipped_samples"] == 0
      and r["inconsistent_steps"] == 0,
      f"elastic-train: {r['samples_processed']} of {r['expected_samples']} samples, "
      f"{r['duplicate_samples']} duplicated, {r['skipped_samples']} skipped, {r['inconsistent_steps']} inconsistent steps")
rel = max(abs(a - b) / max(1e-12, abs(b)) for a, b in zip(r["weights"], ref["weights"]))
check(rel < 1e-6, f"elastic-train: final weights = the serial run's (max relative difference {rel:.1e})")
check(r["final_world_size"] == 4, f"elastic-train: ended on {r['final_world_size']} workers")
check(u["duplicate_samples"] == 0 and u["skipped_samples"] == 0 and u["samples_processed"] == u["expected_samples"],
      f"urgent: {u['samples_processed']} of {u['expected_samples']} samples")
# The coordinator's generations of elastic-train (serve's log).
gens = []
for line in err.splitlines():
    if 'msg="membership published"' in line and "job=elastic-train " in line:
        reason = re.search(r"reason=(\S+)", line).group(1)
        members = re.search(r"members=(\S*)", line).group(1).strip('"')
        gens.append((reason.replace("REASON_", "").lower(), len([m for m in members.split(",") if m])))
print("     elastic-train generations: " + " -> ".join(f"{r}({n})" for r, n in gens))
seq = [(r, n) for r, n in gens]
def has_subseq(seq, pat):
    i = 0
    for x in seq:
        if i < len(pat) and x == pat[i]: i += 1
    return i == len(pat)
check(has_subseq(seq, [("initial", 4), ("planned_shrink", 2), ("grow", 4)]),
      "elastic-train: membership 4 -> 2 (planned shrink) -> 4 (grow)")
check(not any(r == "failure" for r, n in seq), "elastic-train: no failure generation")
# Processes: the survivors were started once; two leavers left at a step
# boundary (exit 0 while stopping) and two newcomers were started for the grow.
starts = re.findall(r'msg="task started" job=elastic-train task=(\S+) pid=(\d+) node=\S+ incarnation=(\d+)', err)
exits = re.findall(r'msg="task exited" job=elastic-train task=(\S+) pid=(\d+) how="([^"]+)" stopping=(\w+)', err)
left = [e for e in exits if e[3] == "true"]
check(len(starts) == 6, f"elastic-train: {len(starts)} processes started (4, then 2 for the grow)")
check(len(left) == 2 and all(e[2] == "exited with code 0" for e in left),
      f"elastic-train: {len(left)} shrunk workers left by themselves: {[e[2] for e in left]}")
survivors = {p for t, p, i in starts} - {p for t, p, h, s in left}
finals = [e for e in exits if e[3] == "false"]
check(len(finals) == 4 and all(e[2] == "exited with code 0" for e in finals),
      "elastic-train: the 4 final workers exited 0")
first = {p for t, p, i in starts[:4]}
kept = first & {p for t, p, h, s in finals}
check(len(kept) == 2, f"elastic-train: {len(kept)} of the first 4 processes ran from start to end (no restart)")
sys.exit(1 if bad else 0)
PY
ok=1
echo "PASS: shrink to 2 and back to 4 without a restart, no sample lost or repeated"
