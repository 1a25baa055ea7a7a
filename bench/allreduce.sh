#!/usr/bin/env bash
# All-reduce bus bandwidth: the worker shim (Gloo backend) vs raw Gloo (vs
# Open MPI's MPI_Allreduce where there is MPI), 1 KiB .. 64 MiB, same
# processes, same run (see bench/shim/allreduce_bench.cc: interleaved rounds,
# a raw-Gloo-vs-itself noise floor, min and median). Usage:
#   bench/allreduce.sh [BUILD_DIR] [NP] [ROUNDS] [TARGET_MS_PER_SAMPLE]
# Two modes:
#   mpi:   mpirun -np NP starts the ranks; variants mpi, gloo, shim, gloo2,
#          backend, gloo_late, gloo_wrapped (see allreduce_bench.cc).
#          The default when mpirun is on PATH and the binary was built with
#          MPI (allreduce_bench --has-mpi).
#   nompi: allreduce_bench --np NP forks the ranks itself (no MPI needed,
#          control traffic over a separate Gloo context); the same variants
#          but mpi. The default otherwise.
# Environment:
#   ALLREDUCE_MODE=auto|mpi|nompi  force a mode (default auto, as above).
#   PIN=1  pin rank r to CPU r (nompi: --pin, one CPU per rank if there
#          are NP CPUs; mpi: mpirun --bind-to core instead of --bind-to none).
#          A rank's Gloo I/O threads then share its one CPU: on the 16-core
#          GPU machine that made every variant about 35x slower and noisier
#          than not pinning (docs/BENCHMARKS.md).
#   MAX_BYTES  largest size (default 64 MiB).
# e.g. the quiet run on a 16-core box without MPI (as in docs/BENCHMARKS.md):
#   ALLREDUCE_MODE=nompi bench/allreduce.sh build 2 61 20
set -euo pipefail
build=${1:-build}
np=${2:-2}
rounds=${3:-31}
target_ms=${4:-20}
max_bytes=${MAX_BYTES:-$((64 << 20))}
mode=${ALLREDUCE_MODE:-auto}
pin=${PIN:-0}
bin="$build/bench/shim/allreduce_bench"
[[ -x "$bin" ]] || { echo "build $bin first (ninja -C $build allreduce_bench)" >&2; exit 1; }
have_mpi() { command -v mpirun >/dev/null 2>&1 && "$bin" --has-mpi; }
case "$mode" in
  auto) if have_mpi; then mode=mpi; else mode=nompi; fi ;;
  mpi) have_mpi || { echo "ALLREDUCE_MODE=mpi: needs mpirun on PATH and $bin built with MPI" >&2; exit 1; } ;;
  nompi) ;;
  *) echo "ALLREDUCE_MODE must be auto, mpi or nompi (not '$mode')" >&2; exit 1 ;;
esac
echo "allreduce.sh: mode $mode, $np ranks, pin=$pin" >&2
if [[ $mode == mpi ]]; then
  extra=()
  if [[ $(id -u) -eq 0 ]]; then extra+=(--allow-run-as-root); fi
  bind=(--bind-to none)
  if [[ $pin == 1 ]]; then bind=(--map-by core --bind-to core); fi
  exec mpirun "${extra[@]}" --oversubscribe "${bind[@]}" -np "$np" "$bin" \
    "$max_bytes" "$rounds" "$target_ms"
fi
flags=(--np "$np")
if [[ $pin == 1 ]]; then flags+=(--pin); fi
exec "$bin" "${flags[@]}" "$max_bytes" "$rounds" "$target_ms"
