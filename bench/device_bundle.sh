#!/usr/bin/env bash
# Packs the shim benchmarks and the libraries they need (everything ldd
# resolves but glibc, the dynamic loader, CUDA's driver and NCCL, which the
# target machine brings) into one folder, for a machine that cannot install
# Debian packages (the lent GPU machine; bench/device_run.sh runs there).
# Usage: bench/device_bundle.sh BUILD_DIR OUT_DIR
#   BUILD_DIR: configured with -DRINGMASTER_WITH_NCCL=ON when nccl_smoke is
#   wanted; the targets are built here first.
set -euo pipefail
build=${1:?build dir}
out=${2:?output dir}
targets=(reform_bench elastic_trainer allreduce_bench)
if grep -q 'RINGMASTER_HAVE_NCCL:INTERNAL=1\|nccl_smoke' "$build/build.ninja" 2>/dev/null; then
  targets+=(nccl_smoke)
fi
ninja -C "$build" "${targets[@]}"
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
for t in "${targets[@]}"; do
  src=$(find "$build" -type f -name "$t" -perm -u+x | head -1)
  [[ -n "$src" ]] || { echo "no binary for $t" >&2; exit 1; }
  cp "$src" "$out/bin/$t"
  strip --strip-debug "$out/bin/$t"
  ldd "$src" | awk '/=> \//{print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|\
      libcuda.so*|libnccl.so*|libnvidia*) ;;
      *) cp -n "$lib" "$out/lib/" ;;
    esac
  done
done
strip --strip-debug "$out"/lib/* 2>/dev/null || true
du -sh "$out"
