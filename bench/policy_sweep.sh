#!/usr/bin/env bash
# FIFO gang, SJF, LAS (Tiresias' 2D-LAS with preemption) and ringmaster's own
# policy (topology-aware, elastic, backfill) replayed on one trace slice on a
# contended cluster, then `ringmaster compare` side by side. Policies:
# examples/policies/{fifo-gang,sjf,las,ringmaster}.yaml. Figures go to
# docs/BENCHMARKS.md, "Policy comparison".
#
# Default: one week of the Philly trace (days 24-31 after its first job,
# 8,327 jobs) on 64 nodes x 8 GPUs (8 nodes per rack), all jobs in one queue
# (as the literature's simulators treat the cluster), the walltime oracle
# (walltime = traced duration, for sjf and backfill) and a checkpoint every
# 10 min (a preempted job loses at most that). On Philly's own 2,490 GPUs no
# job waits, and every policy gives JCT = duration.
#
#   bench/policy_sweep.sh [BUILD_DIR]                  # default build-rel
#   FROM_DAY=40 UNTIL_DAY=41 NODES=16 bench/policy_sweep.sh build/dev
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-rel}
BIN=$BUILD/cli/ringmaster
[[ -x $BIN ]] || { echo "no $BIN: cmake -S . -B $BUILD -G Ninja -DCMAKE_BUILD_TYPE=Release && ninja -C $BUILD ringmaster" >&2; exit 2; }
TRACE=${TRACE:-data/traces/philly/philly.csv}
FROM_DAY=${FROM_DAY:-24}
UNTIL_DAY=${UNTIL_DAY:-31}
NODES=${NODES:-64}
GPUS=${GPUS:-8}
PER_RACK=${PER_RACK:-8}
POLICIES=${POLICIES:-"fifo-gang sjf las ringmaster"}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"

echo "machine: $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg); trace $TRACE days $FROM_DAY-$UNTIL_DAY on $NODES x $GPUS GPUs"
dirs=()
for p in $POLICIES; do
  /usr/bin/time -f "%e" -o "$OUT/$p.time" "$BIN" simulate --trace "$TRACE" \
    --nodes "$NODES" --gpus-per-node "$GPUS" --nodes-per-rack "$PER_RACK" \
    --from $((FROM_DAY * 86400)) --until $((UNTIL_DAY * 86400)) \
    --one-queue default --walltime-oracle --checkpoint-interval 600 \
    --policy "examples/policies/$p.yaml" --quiet --out "$OUT/$p" > "$OUT/$p.txt"
  printf '%-11s %6.1f s wall  %s\n' "$p" "$(cat "$OUT/$p.time")" "$(grep -E '^JCT' "$OUT/$p.txt")"
  dirs+=("$OUT/$p")
done
echo
"$BIN" compare "${dirs[@]}"
echo "outputs in $OUT"
