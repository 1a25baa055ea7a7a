#!/usr/bin/env bash
# Time and memory of one FGD-protocol run (`ringmaster simulate --protocol
# fgd`, through the engine) on one core: every openb pod list x placement fgd
# x SEEDS, one run at a time, pinned with taskset to CPU ${CPU:-0}. Reports
# the simulation time the binary prints (placement loop, CSV loading
# excluded), the process's CPU time (user + sys) and wall time, and peak RSS;
# replaces the table between the fgd-timing markers in docs/BENCHMARKS.md.
# CONFIG=authors times the fidelity replay of the FGD authors' loop instead
# (--driver direct --fgd-score authors --typical-pct 95, every node scored;
# the fgd-timing-authors markers).
# Usage: bench/fgd_timing.sh [RINGMASTER_BINARY] [OUT_DIR]
#   env SEEDS="42 43 44" PLACEMENT=fgd CPU=0 CONFIG=engine|authors
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:-$ROOT/build/cli/ringmaster}
OUT=${2:-$ROOT/build/fgd-timing}
DATA=$ROOT/data/traces/alibaba-gpu-v2023
SEEDS=${SEEDS:-"42 43 44"}
PLACEMENT=${PLACEMENT:-fgd}
CPU=${CPU:-0}
CONFIG=${CONFIG:-engine}
EXTRA=()
MARK=fgd-timing
case $CONFIG in
  engine) ;;
  authors) EXTRA=(--driver direct --fgd-score authors --typical-pct 95); MARK=fgd-timing-authors ;;
  *) echo "CONFIG: engine or authors" >&2; exit 2 ;;
esac
LISTS="cpu050 cpu100 cpu200 cpu250 default gpushare100 gpushare40 gpushare60 gpushare80 gpuspec10 gpuspec20 gpuspec25 gpuspec33 multigpu20 multigpu30 multigpu40 multigpu50"
[[ -x $BIN ]] || { echo "no ringmaster binary at $BIN" >&2; exit 2; }
mkdir -p "$OUT"
load_before=$(cut -d' ' -f1 /proc/loadavg)
: > "$OUT/runs.txt"
for l in $LISTS; do
  for s in $SEEDS; do
    d=$OUT/$l/$s
    mkdir -p "$d"
    /usr/bin/time -f "%e %U %S %M" -o "$d/time.txt" taskset -c "$CPU" "$BIN" simulate --protocol fgd \
      --cluster "$DATA/openb_node_list_gpu_node.csv" --trace "$DATA/openb_pod_list_$l.csv" \
      --placement "$PLACEMENT" --seed "$s" --out "$d" "${EXTRA[@]}" > /dev/null
    echo "$l $s $(python3 -c "import json;print(json.load(open('$d/summary.json'))['sim_wall_s'])") $(tail -1 "$d/time.txt")" >> "$OUT/runs.txt"
  done
done
load_after=$(cut -d' ' -f1 /proc/loadavg)
python3 - "$OUT/runs.txt" "$ROOT/docs/BENCHMARKS.md" "$load_before" "$load_after" "$PLACEMENT" "$SEEDS" "$(date -u +%F)" "$CONFIG" "$MARK" <<'PY'
import re, statistics, sys
runs_file, bench_md, lb, la, placement, seeds, day, config, mark = sys.argv[1:10]
if config == "authors": placement += ", the authors' loop replayed"
rows = [l.split() for l in open(runs_file) if l.strip()]
sim = [float(r[2]) for r in rows]; wall = [float(r[3]) for r in rows]
cpu = [float(r[4]) + float(r[5]) for r in rows]; rss = [int(r[6]) / 1024 for r in rows]
worst = max(rows, key=lambda r: float(r[2]))
def q(xs, p): xs = sorted(xs); return xs[min(len(xs) - 1, int(p * len(xs)))]
table = "\n".join([
    f"| {len(rows)} runs ({placement}, 17 lists x seeds {seeds}), one core | median | p90 | max |",
    "|---|---|---|---|",
    f"| simulation time (placement loop) | {statistics.median(sim):.3f} s | {q(sim, .9):.3f} s | {max(sim):.3f} s ({worst[0]}, seed {worst[1]}) |",
    f"| process CPU time (user + sys, with CSV loading) | {statistics.median(cpu):.3f} s | {q(cpu, .9):.3f} s | {max(cpu):.3f} s |",
    f"| process wall time | {statistics.median(wall):.2f} s | {q(wall, .9):.2f} s | {max(wall):.2f} s |",
    f"| peak RSS | {statistics.median(rss):.0f} MB | {q(rss, .9):.0f} MB | {max(rss):.0f} MB |",
    "",
    f"Measured {day} with `bench/fgd_timing.sh` (taskset to one CPU of the shared 2-core x86_64 "
    f"container; load average {lb} before, {la} after). Targets: <= 1 s and <= 200 MB per run.",
]) + "\n"
print(table)
md = open(bench_md).read()
b, e = f"<!-- {mark}:begin -->", f"<!-- {mark}:end -->"
if b in md and e in md:
    md = re.sub(re.escape(b) + ".*?" + re.escape(e), b + "\n" + table + e, md, flags=re.S)
    open(bench_md, "w").write(md)
PY
