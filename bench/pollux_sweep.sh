#!/usr/bin/env bash
# Pollux's Figure 8a sweep: the 8 workloads at the 4 relative loads
# (data/traces/pollux/workloads{-0.5,,-1.5,-2.0}/, 80-320 jobs each) with
# the six measured application models (data/traces/pollux/apps/) on
# 16 nodes x 4 GPUs, 60 s scheduling intervals, once per policy; prints per
# load the mean over the 8 workloads of each run's average JCT beside the
# published figures (data/peer-results/pollux-osdi21/), per workload at
# load 1.0, and the simulator's wall time (summed sim_wall_s of the runs).
# Figures go to docs/BENCHMARKS.md, "Pollux workloads".
#
#   bench/pollux_sweep.sh [BUILD_DIR]                        # default build/ci
#   POLICIES="tiresias-tuned default" LOADS="1.0" bench/pollux_sweep.sh
#   PLOTS=docs/plots bench/pollux_sweep.sh build/ci        # + JCT CDF SVGs
# A policy name is examples/policies/NAME.yaml; `default` is the built-in
# policy (elastic: each job from 1 GPU to its model's largest size).
# PLOTS=DIR (relative to the repository root, like OUT) also writes
# DIR/pollux-jct-cdf-LOAD.svg per load with bench/jct_cdf.py: each job's JCT
# as a CDF beside the published Tiresias and Pollux ones.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/ci}
BIN=$BUILD/cli/ringmaster
[[ -x $BIN ]] || { echo "no $BIN: cmake --build $BUILD --target ringmaster" >&2; exit 2; }
POLICIES=${POLICIES:-"tiresias-tuned default"}
LOADS=${LOADS:-"0.5 1.0 1.5 2.0"}
WORKLOADS=${WORKLOADS:-"1 2 3 4 5 6 7 8"}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
echo "machine: $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg); 16 nodes x 4 GPUs; out $OUT"
for p in $POLICIES; do
  policy_flag=()
  [[ $p == default ]] || policy_flag=(--policy "examples/policies/$p.yaml")
  for l in $LOADS; do
    dir=data/traces/pollux/workloads$([[ $l == 1.0 ]] || echo "-$l")
    for w in $WORKLOADS; do
      "$BIN" simulate --trace "$dir/workload-$w.csv" --apps data/traces/pollux/apps \
        --nodes 16 --gpus-per-node 4 --cycle-period 60 "${policy_flag[@]}" --quiet \
        --out "$OUT/$p-$l-$w" > "$OUT/$p-$l-$w.txt"
    done
  done
done
/usr/bin/python3 - "$OUT" "$POLICIES" "$LOADS" "$WORKLOADS" <<'PY'
import json, sys
out, policies, loads, workloads = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4].split()
pub = {}
for p in ("tiresias", "pollux"):
    for l in loads:
        pub[p, l] = json.load(open(f"data/peer-results/pollux-osdi21/results-jobload/{p}-{l}/summary.json"))
def run(p, l, w):
    return json.load(open(f"{out}/{p}-{l}-{w}/summary.json"))
wall = 0.0
print("mean over workloads of the average JCT (s)")
print("load  published-tiresias  " + "  ".join(f"{p:>16}" for p in policies) + "  published-pollux")
for l in loads:
    row = []
    for p in policies:
        avgs = [run(p, l, w)["avg_jct_s"] for w in workloads]
        wall += sum(run(p, l, w)["sim_wall_s"] for w in workloads)
        unfinished = sum(run(p, l, w)["jobs_total"] - run(p, l, w)["jobs_completed"] for w in workloads)
        m = sum(avgs) / len(avgs)
        t = sum(pub["tiresias", l]["avgs"][f"workload-{w}"] for w in workloads) / len(workloads)
        row.append(f"{m:8.0f} ({m / t - 1:+5.1%})" + (f" {unfinished} unfinished" if unfinished else ""))
    t = sum(pub["tiresias", l]["avgs"][f"workload-{w}"] for w in workloads) / len(workloads)
    po = sum(pub["pollux", l]["avgs"][f"workload-{w}"] for w in workloads) / len(workloads)
    print(f"{l:4}  {t:18.0f}  " + "  ".join(f"{r:>16}" for r in row) + f"  {po:16.0f}")
if "1.0" in loads:
    print("\nload 1.0 per workload: published tiresias, then each policy (s, vs published tiresias)")
    for w in workloads:
        t = pub["tiresias", "1.0"]["avgs"][f"workload-{w}"]
        cells = "  ".join(f"{run(p, '1.0', w)['avg_jct_s']:7.0f} ({run(p, '1.0', w)['avg_jct_s'] / t - 1:+5.1%})" for p in policies)
        print(f"workload-{w}  {t:7.0f}  {cells}")
print(f"\nsimulator wall time, all {len(policies) * len(loads) * len(workloads)} runs: {wall:.2f} s")
PY
if [[ -n ${PLOTS:-} ]]; then
  /usr/bin/python3 bench/jct_cdf.py --policies "$POLICIES" --loads "$LOADS" --workloads "$WORKLOADS" "$OUT" "$PLOTS"
fi
