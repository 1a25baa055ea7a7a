#!/usr/bin/env bash
# Issue 22: two builds' contended replays alternated (A, B, A, B, ...), so
# that a shared machine's load falls on both alike: the first N Philly jobs
# (by submit time) on 64 x 8 GPUs under each policy, ROUNDS times each;
# prints every sim_wall_s, the fastest of each, and whether A's and B's
# jobs.csv / timeline.csv agree (the last round's).
#
#   bench/cycle_ab.sh BIN_A BIN_B [N] [ROUNDS] [POLICIES]
set -euo pipefail
A=${1:?usage: cycle_ab.sh BIN_A BIN_B [N] [ROUNDS] [POLICIES]}
B=${2:?usage: cycle_ab.sh BIN_A BIN_B [N] [ROUNDS] [POLICIES]}
N=${3:-10000}
ROUNDS=${4:-3}
POLICIES=${5:-elastic las default ringmaster}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$B" policy default > "$work/default.yaml"
field() { /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }
printf '%-12s %-28s %-28s %s\n' policy "A runs (fastest)" "B runs (fastest)" same
for pol in $POLICIES; do
  file=$root/examples/policies/$pol.yaml
  [[ $pol == default ]] && file=$work/default.yaml
  queue=()
  [[ $pol == elastic ]] && queue=(--one-queue research)  # elastic.yaml names its queues
  ra=() rb=()
  for ((r = 0; r < ROUNDS; r++)); do
    for side in A B; do
      bin=$A
      [[ $side == B ]] && bin=$B
      "$bin" simulate --trace "$root/data/traces/philly/philly.csv" --max-jobs "$N" --nodes 64 --gpus-per-node 8 \
        --checkpoint-interval 600 --seed 1 --policy "$file" --quiet --out "$work/$side" "${queue[@]}" >/dev/null
      t=$(field "$work/$side/summary.json" sim_wall_s)
      if [[ $side == A ]]; then ra+=("$t"); else rb+=("$t"); fi
    done
  done
  same=no
  cmp -s "$work/A/jobs.csv" "$work/B/jobs.csv" && cmp -s "$work/A/timeline.csv" "$work/B/timeline.csv" && same=yes
  fa=$(printf '%s\n' "${ra[@]}" | sort -g | head -1)
  fb=$(printf '%s\n' "${rb[@]}" | sort -g | head -1)
  printf '%-12s %-28s %-28s %s\n' "$pol" "${ra[*]} ($fa)" "${rb[*]} ($fb)" "$same"
done
