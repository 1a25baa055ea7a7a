#!/usr/bin/env bash
# All-reduce bus bandwidth: the worker shim (Gloo backend) vs raw Gloo vs
# Open MPI's MPI_Allreduce, 1 KiB .. 64 MiB, same processes, same run (see
# bench/shim/allreduce_bench.cc: interleaved rounds, a raw-Gloo-vs-itself
# noise floor, min and median). Usage:
#   bench/allreduce.sh [BUILD_DIR] [NP] [ROUNDS] [TARGET_MS_PER_SAMPLE]
set -euo pipefail
build=${1:-build}
np=${2:-2}
rounds=${3:-31}
target_ms=${4:-20}
bin="$build/bench/shim/allreduce_bench"
[[ -x "$bin" ]] || { echo "build $bin first (ninja -C $build allreduce_bench)" >&2; exit 1; }
extra=()
if [[ $(id -u) -eq 0 ]]; then extra+=(--allow-run-as-root); fi
mpirun "${extra[@]}" --oversubscribe --bind-to none -np "$np" "$bin" \
  $((64 << 20)) "$rounds" "$target_ms"
