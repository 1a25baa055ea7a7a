#!/usr/bin/env bash
# Re-formation latency of the worker shim for 2, 4, 8 and 16 workers, planned
# shrink and kill -9 (see bench/shim/reform_bench.cc). One JSON line per case:
# workers, kind, trials, reform_ms_p50, reform_ms_p99, detect_ms.
# Usage: bench/reform.sh [BUILD_DIR] [TRIALS]
set -euo pipefail
build=${1:-build}
trials=${2:-10}
bin="$build/bench/shim/reform_bench"
trainer="$build/examples/elastic_trainer/elastic_trainer"
[[ -x "$bin" && -x "$trainer" ]] || {
  echo "build first: ninja -C $build reform_bench elastic_trainer" >&2; exit 1; }
for n in 2 4 8 16; do
  for kind in planned kill9; do
    "$bin" --trainer "$trainer" --workers "$n" --kind "$kind" --trials "$trials"
  done
done
