#!/usr/bin/env bash
# Issue 22, goal 2: the first N Philly jobs (by submit time) replayed under
# each shipped policy on a contended cluster (64 x 8 GPUs) and on an idle one
# (4096 x 8), with the engine's fast paths and (--ab) without them; prints
# sim_wall_s, cycles and whether the contended jobs.csv / timeline.csv agree.
#
#   bench/cycle_cost.sh BIN [N] [--ab]
set -euo pipefail
BIN=${1:?usage: cycle_cost.sh BIN [N] [--ab]}
N=${2:-10000}
AB=${3:-}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$BIN" policy default > "$work/default.yaml"
P=$root/examples/policies
field() { /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }
printf '%-12s %-10s %-8s %10s %8s %s\n' policy cluster paths sim_wall_s cycles same
for pol in fifo-gang sjf las default ringmaster elastic; do
  file=$P/$pol.yaml
  [[ $pol == default ]] && file=$work/default.yaml
  queue=()
  [[ $pol == elastic ]] && queue=(--one-queue research)  # elastic.yaml names its queues
  for cluster in contended idle; do
    nodes=64
    [[ $cluster == idle ]] && nodes=4096
    modes=(fast)
    [[ $AB == --ab && $cluster == contended ]] && modes=(fast slow)
    for mode in "${modes[@]}"; do
      out=$work/$pol-$cluster-$mode
      extra=()
      [[ $mode == slow ]] && extra=(--no-fast-paths)
      "$BIN" simulate --trace "$root/data/traces/philly/philly.csv" --max-jobs "$N" --nodes "$nodes" \
        --gpus-per-node 8 --checkpoint-interval 600 --seed 1 --policy "$file" --quiet --out "$out" "${queue[@]}" "${extra[@]}" >/dev/null
      same=-
      if [[ $mode == slow ]]; then
        same=no
        cmp -s "$out/jobs.csv" "$work/$pol-$cluster-fast/jobs.csv" &&
          cmp -s "$out/timeline.csv" "$work/$pol-$cluster-fast/timeline.csv" && same=yes
      fi
      printf '%-12s %-10s %-8s %10s %8s %s\n' "$pol" "$cluster" "$mode" \
        "$(field "$out/summary.json" sim_wall_s)" "$(field "$out/summary.json" cycles)" "$same"
    done
  done
done
