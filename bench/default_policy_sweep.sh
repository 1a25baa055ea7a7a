#!/usr/bin/env bash
# The default policy against FIFO gang, SJF (with the walltime oracle) and
# LAS on contended replays of real traces, without the walltime oracle for
# every policy but sjf (docs/POLICY.md, docs/BENCHMARKS.md "The default
# policy on real traces"). One command:
#
#   bench/default_policy_sweep.sh [BUILD_DIR]          # default build-rel
#   CASES="philly-week gavel" bench/default_policy_sweep.sh build/ci
#   POLICIES="las default" PAR=2 bench/default_policy_sweep.sh build/ci
#   PLOTS=docs/plots bench/default_policy_sweep.sh build/ci   # + JCT CDF SVGs
#   POLICY_DIR=/tmp/trial POLICIES="las default mine" ...   # /tmp/trial/mine.yaml
#
# PLOTS=DIR (relative to the repository root, like OUT) also writes
# DIR/default-policy-CASE.svg per case (PLOT_CASES: those cases only, by the
# names the tables print, e.g. "philly-d24 gavel-2869ce") with
# bench/jct_cdf.py: each job's JCT under every policy of the sweep
# (PLOT_POLICIES: those only), one line per policy.
#
# Cases: philly-week (days 24-31, 8,327 jobs, 64 x 8 GPUs), philly-weeks
# (days 40-47 and 55-62, held out), philly-all (the whole trace, 82,247 jobs,
# 64 x 8), gavel (each of Gavel's 15 per-VC Philly traces on a third of its
# average demand over its arrival span: ceil(sum(GPUs x duration) / span / 8
# / 3) nodes of 8 GPUs; at the full demand nothing waits), and alibaba
# (Alibaba's 2023 GPU-sharing pod list, openb_pod_list_default, on 4 nodes x
# 8 GPUs; on 8 or more nothing waits), and philly-windows (more 7-day windows
# of the Philly trace on 64 x 8, for the criteria's margins: WINDOWS, the
# first days, default "17 31 47 62 69 76 83 90"; bench/criteria_margins.py
# prints what each criterion has to spare). The whole trace under FIFO takes about
# 25 min on 2 cores (issue 22's backlog cost); the rest a few minutes. One queue each (--one-queue default), checkpoints every
# 10 min, seed 1. "default" is `ringmaster policy default`
# (examples/policies/ringmaster.yaml). Prints a table per case with the
# issue's criteria (avg <= LAS's, p99 <= FIFO gang's, preemptions <= half
# LAS's) for `default` and every other policy named besides fifo-gang, sjf
# and las (e.g. POLICIES="fifo-gang las default gittins": an example
# policy by its file name), and leaves the outputs in $OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-rel}
BIN=$(realpath "$BUILD/cli/ringmaster")
[[ -x $BIN ]] || { echo "no $BUILD/cli/ringmaster: cmake -S . -B $BUILD -G Ninja -DCMAKE_BUILD_TYPE=Release && ninja -C $BUILD ringmaster" >&2; exit 2; }
CASES=${CASES:-"philly-week philly-weeks philly-all gavel alibaba"}
POLICIES=${POLICIES:-"fifo-gang sjf las default"}
PAR=${PAR:-2}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
"$BIN" policy default > "$OUT/default.yaml"
PHILLY=data/traces/philly/philly.csv
COMMON="--one-queue default --checkpoint-interval 600 --seed 1 --quiet"

# A policy by name: default, POLICY_DIR/NAME.yaml (variants being tried), or
# examples/policies/NAME.yaml.
policy_file() {
  if [[ $1 == default ]]; then echo "$OUT/default.yaml"
  elif [[ -n ${POLICY_DIR:-} && -f $POLICY_DIR/$1.yaml ]]; then echo "$POLICY_DIR/$1.yaml"
  else echo "examples/policies/$1.yaml"; fi
}

# name|simulate arguments
runs=()
add() { runs+=("$1|$2"); }
for c in $CASES; do
  case $c in
    philly-week) add philly-d24 "--trace $PHILLY --from 2073600 --until 2678400 --nodes 64 --gpus-per-node 8 --nodes-per-rack 8" ;;
    philly-weeks)
      add philly-d40 "--trace $PHILLY --from 3456000 --until 4060800 --nodes 64 --gpus-per-node 8 --nodes-per-rack 8"
      add philly-d55 "--trace $PHILLY --from 4752000 --until 5356800 --nodes 64 --gpus-per-node 8 --nodes-per-rack 8" ;;
    philly-windows)
      for d in ${WINDOWS:-17 31 47 62 69 76 83 90}; do
        add "philly-d$d" "--trace $PHILLY --from $((d * 86400)) --until $(((d + 7) * 86400)) --nodes 64 --gpus-per-node 8 --nodes-per-rack 8"
      done ;;
    philly-all) add philly-all "--trace $PHILLY --nodes 64 --gpus-per-node 8 --nodes-per-rack 8" ;;
    gavel)
      for f in data/traces/gavel-philly-msr/seed0/*.trace; do
        n=$(/usr/bin/python3 - "$f" <<'EOF'
import math, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
work = sum(float(r[4]) * int(r[6]) for r in rows)
span = max(max(float(r[5]) for r in rows), 1.0)
print(max(math.ceil(work / span / 8 / 3), math.ceil(max(int(r[6]) for r in rows) / 8), 1))
EOF
)
        add "gavel-$(basename "$f" .trace)" "--trace $f --nodes $n --gpus-per-node 8 --nodes-per-rack 8"
      done ;;
    alibaba) add alibaba-default "--trace data/traces/alibaba-gpu-v2023/openb_pod_list_default.csv --nodes 4 --gpus-per-node 8 --nodes-per-rack 4" ;;
    *) echo "unknown case '$c' (philly-week, philly-weeks, philly-windows, philly-all, gavel, alibaba)" >&2; exit 2 ;;
  esac
done

echo "machine: $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg); $BIN; outputs in $OUT"
for r in "${runs[@]}"; do
  name=${r%%|*} args=${r#*|}
  for p in $POLICIES; do
    oracle=""; [[ $p == sjf ]] && oracle="--walltime-oracle"
    (
      # shellcheck disable=SC2086
      /usr/bin/time -f "%e %U" -o "$OUT/$name-$p.time" "$BIN" simulate $args $COMMON $oracle \
        --policy "$(policy_file "$p")" --out "$OUT/$name-$p" > "$OUT/$name-$p.txt" 2>&1 ||
        echo "FAILED: $name $p (see $OUT/$name-$p.txt)"
    ) &
    while (( $(jobs -r | wc -l) >= PAR )); do sleep 0.2; done
  done
done
wait

/usr/bin/python3 - "$OUT" "$POLICIES" "${runs[@]}" <<'EOF'
import json, os, sys
out, policies, runs = sys.argv[1], sys.argv[2].split(), sys.argv[3:]
def stats(d):
    s = json.load(open(os.path.join(d, "summary.json")))
    return s["avg_jct_s"], s["p99_jct_s"], s["preemptions"], s["jobs_completed"], s["jobs_total"], s["sim_wall_s"]
print()
print("| case | nodes | policy | avg JCT (s) | p99 JCT (s) | preemptions | jobs done | sim wall (s) |")
print("|---|---|---|---|---|---|---|---|")
verdicts = []
for r in runs:
    name, args = r.split("|", 1)
    nodes = args.split("--nodes ")[1].split()[0]
    got = {}
    for p in policies:
        d = os.path.join(out, f"{name}-{p}")
        if os.path.exists(os.path.join(d, "summary.json")):
            got[p] = stats(d)
    for p in policies:
        g = got.get(p)
        if g is None:
            print(f"| {name} | {nodes} | {p} | failed | | | | |")
            continue
        print(f"| {name} | {nodes} | {p} | {g[0]:,.0f} | {g[1]:,.0f} | {g[2]} | {g[3]}/{g[4]} | {g[5]:.2f} |")
    # The criteria for every policy but the references (default, and any
    # other named besides the references).
    for c in [p for p in policies if p not in ("fifo-gang", "sjf", "las")]:
        if not all(got.get(p) for p in ("fifo-gang", "las", c)):
            continue
        f, l, d = got["fifo-gang"], got["las"], got[c]
        verdicts.append((name, c, d[0] <= l[0], d[1] <= f[1], d[2] <= l[2] / 2, d[0] / l[0], d[1] / f[1],
                         d[2] / l[2] if l[2] else float("inf") if d[2] else 1.0))
if verdicts:
    print()
    print("| case | policy | avg <= LAS (ratio) | p99 <= FIFO (ratio) | preemptions <= LAS/2 (ratio) |")
    print("|---|---|---|---|---|")
    for n, c, a, p, q, ra, rp, rq in verdicts:
        yn = lambda b: "yes" if b else "**no**"
        print(f"| {n} | {c} | {yn(a)} ({ra:.3f}) | {yn(p)} ({rp:.3f}) | {yn(q)} ({rq:.2f}) |")
EOF

if [[ -n ${PLOTS:-} ]]; then
  cases=${PLOT_CASES:-$(for r in "${runs[@]}"; do echo "${r%%|*}"; done)}
  # shellcheck disable=SC2086
  /usr/bin/python3 bench/jct_cdf.py --policies "${PLOT_POLICIES:-$POLICIES}" --cases "$(echo $cases)" "$OUT" "$PLOTS"
fi
