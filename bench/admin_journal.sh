#!/usr/bin/env bash
# SubmitJob throughput with durable journaling, and restart time with a large
# journal (issue 11 §8): starts `ringmaster serve --state DIR` on loopback,
# submits N one-GPU jobs from T client threads (bench/admin_submit.cc: every
# OK is journaled, synchronous=FULL), stops it, then restarts it on the same
# journal and times from exec to the first answered GetJob ("serving").
#
#   bench/admin_journal.sh BUILD_DIR [N=100000] [T=32] [NODES=12500]
# NODES x 8 GPUs: with 12,500 nodes every job runs, so the restart also
# re-adopts N running jobs.
set -euo pipefail
BUILD=${1:?build dir}
N=${2:-100000}
T=${3:-32}
NODES=${4:-12500}
BIN=$BUILD/cli/ringmaster
GEN=$BUILD/bench/admin_submit
work=$(mktemp -d)
pid=""
trap '[[ -n $pid ]] && kill -KILL $pid 2>/dev/null; rm -rf "$work"' EXIT

start() {
  : >"$work/out"
  "$BIN" serve --no-bind --http 127.0.0.1:0 --grpc 127.0.0.1:0 --nodes "$NODES" --gpus-per-node 8 \
    --nodes-per-rack 32 --state "$work" --period-ms 1000 >"$work/out" 2>"$work/err" &
  pid=$!
  port=""
  while [[ -z $port ]]; do
    port=$(sed -n 's/^admin API listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$work/out")
    kill -0 "$pid" || { cat "$work/err"; exit 1; }
    sleep 0.005
  done
}
stop() { kill -TERM "$pid"; wait "$pid" || true; pid=""; }
cpu() { awk '{print ($14 + $15) / 100}' "/proc/$pid/stat"; }  # the daemon's user+sys seconds (USER_HZ 100)

start
echo "== SubmitJob, durable: $N jobs, $T client threads, $NODES nodes"
c0=$(cpu)
"$GEN" "127.0.0.1:$port" "$N" "$T" job
c1=$(cpu)
echo "    daemon CPU during the submissions: $(echo "$c1 - $c0" | bc) s ($(echo "$N / ($c1 - $c0)" | bc) jobs per daemon CPU-second)"
sleep 2  # a cycle or two: the jobs get placed and their placements journaled
stop
ls -l "$work"/journal.db* | awk '{print "   ", $5, $9}'

echo "== restart with $N jobs in the journal: exec -> admin API listening -> first GetJob answered"
t0=$(date +%s.%N)
start
tl=$(date +%s.%N)
until "$BIN" job job-0 --server "127.0.0.1:$port" --timeout 5 >/dev/null 2>&1; do sleep 0.005; done
t1=$(date +%s.%N)
sed 's/^/    /' "$work/out" | grep recovered
echo "    exec to listening: $(echo "$tl - $t0" | bc) s (daemon CPU $(cpu) s)"
"$BIN" jobs --phase Running --server "127.0.0.1:$port" --json | grep -c '"phase": "Running"' | sed 's/^/    running after restart: /'
echo "    exec to first GetJob answered (a ringmaster CLI process per try): $(echo "$t1 - $t0" | bc) s"
stop
