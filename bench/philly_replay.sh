#!/usr/bin/env bash
# The whole Philly trace (82,247 jobs) replayed on Philly's own cluster (552
# machines, 2,490 GPUs) through the engine, on one core: wall and CPU time,
# events/s and peak memory, with --check off and (CHECK=1) on. On a loaded
# machine the CPU time (user + sys) is the figure to trust. Figures go to
# docs/BENCHMARKS.md, "Trace replay".
#
#   bench/philly_replay.sh [BUILD_DIR]        # default build-rel
#   CHECK=1 bench/philly_replay.sh build-rel   # also the --check run (minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-rel}
BIN=$BUILD/cli/ringmaster
[[ -x $BIN ]] || { echo "no $BIN: cmake -S . -B $BUILD -G Ninja -DCMAKE_BUILD_TYPE=Release && ninja -C $BUILD ringmaster" >&2; exit 2; }
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"

run() {  # name, extra flags...
  local name=$1; shift
  /usr/bin/time -f "%e %M %U %S" -o "$OUT/$name.time" taskset -c 0 "$BIN" simulate \
    --trace data/traces/philly/philly.csv --cluster data/traces/philly-machines/cluster_machine_list \
    --out "$OUT/$name" --quiet "$@" > "$OUT/$name.txt"
  read -r wall rss user sys < "$OUT/$name.time"
  local events
  events=$(sed -n 's/.*"events": \([0-9]*\).*/\1/p' "$OUT/$name/summary.json")
  awk -v n="$name" -v w="$wall" -v c="$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" -v e="$events" -v r="$rss" \
    'BEGIN { printf "%-10s wall %7.2f s  cpu %7.2f s  events %d  events/s %9.0f (per cpu-s %9.0f)  peak RSS %6.1f MiB\n", n, w, c, e, e / w, e / c, r / 1024 }'
  grep -E '^(jobs|JCT|queue delay|makespan)' "$OUT/$name.txt" | sed 's/^/           /'
}

echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1), load $(cut -d' ' -f1 /proc/loadavg)"
run check-off
if [[ ${CHECK:-0} == 1 ]]; then run check-on --check; fi
echo "outputs in $OUT"
