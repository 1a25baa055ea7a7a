#!/usr/bin/env bash
# Interleaved A/B of two engine_benchmark binaries: ROUNDS rounds, each runs A
# then B with REPS repetitions of every benchmark matching FILTER; prints, per
# benchmark and binary, the minimum, first quartile and median of all its
# repetitions (ms), and writes them all to OUT (JSON) when given.
#
#   bench/engine_ab.sh A_BIN B_BIN [ROUNDS=8] [REPS=5] [FILTER=BM_PreemptCycle] [OUT]
#
# Interleaving spreads this VM's slow spells over both binaries; the figures
# in docs/BENCHMARKS.md came from this script on a quiet machine.
set -euo pipefail

if (($# < 2)); then
  sed -n '2,8p' "$0" >&2
  exit 2
fi
a=$1
b=$2
rounds=${3:-8}
reps=${4:-5}
filter=${5:-BM_PreemptCycle}
out=${6:-}
for bin in "$a" "$b"; do
  [[ -x $bin ]] || { echo "engine_ab: $bin is not an executable" >&2; exit 2; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for ((r = 1; r <= rounds; ++r)); do
  "$a" --benchmark_filter="$filter" --benchmark_repetitions="$reps" --benchmark_format=json 2>/dev/null >"$tmp/A_$r.json"
  "$b" --benchmark_filter="$filter" --benchmark_repetitions="$reps" --benchmark_format=json 2>/dev/null >"$tmp/B_$r.json"
done

python3 - "$tmp" "$rounds" "$out" <<'PY'
import json, statistics, sys

tmp, rounds, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
result = {}
for side in "AB":
    by = {}
    for r in range(1, rounds + 1):
        with open(f"{tmp}/{side}_{r}.json") as f:
            for bm in json.load(f)["benchmarks"]:
                if bm.get("run_type") != "iteration":
                    continue
                name = bm["name"].rsplit("/iterations", 1)[0]
                by.setdefault(name, []).append(bm["real_time"])
    result[side] = by
    for name, v in by.items():
        s = sorted(v)
        print(f"{side} {name:<34} n={len(v):3d} min {s[0]:8.3f}  p25 {s[len(s) // 4]:8.3f}  "
              f"median {statistics.median(s):8.3f}")
if out:
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
PY
