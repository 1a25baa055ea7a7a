#!/usr/bin/env bash
# GPU smoke test of the NCCL backend, for a machine with a GPU: configure
# with NCCL (found under /usr/local/cuda), build nccl_smoke, run it (one-rank
# communicator init, 64 MiB all-reduce, revoke, abort, re-init, backend
# failure re-form) and print its JSON timings.
# Usage: bench/gpu_smoke.sh [BUILD_DIR]   (output also in $OUT when set)
set -uo pipefail
build=${1:-build-gpu}
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-/tmp}
{
  echo "== machine"; nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
  echo "== tools"; for t in cmake ninja g++ protoc grpc_cpp_plugin; do command -v "$t" || echo "missing $t"; done
  ls /usr/local/cuda/include/nccl.h /usr/local/cuda/lib64/libnccl.so* 2>&1
} | tee "$out/gpu_smoke_env.txt"
if [[ ! -x "$build/bench/shim/nccl_smoke" ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DRINGMASTER_WITH_NCCL=ON \
    -DRINGMASTER_BUILD_TESTS=OFF > "$out/gpu_smoke_configure.txt" 2>&1 ||
    { echo "configure failed; see $out/gpu_smoke_configure.txt"; tail -20 "$out/gpu_smoke_configure.txt"; exit 1; }
  ninja -C "$build" nccl_smoke > "$out/gpu_smoke_build.txt" 2>&1 ||
    { echo "build failed"; tail -30 "$out/gpu_smoke_build.txt"; exit 1; }
fi
"$build/bench/shim/nccl_smoke" | tee "$out/gpu_smoke.json"
exit "${PIPESTATUS[0]}"
