#!/usr/bin/env bash
# The worker-shim measurements for the lent GPU machine (16 cores, one GPU,
# nothing installable), from a bundle made by bench/device_bundle.sh. One
# pass, each step under its own time limit so a hang costs only that step;
# everything goes to $OUT/results.txt (JSON lines after "== step" headers):
#   1. machine facts, and every NCCL library on it (with or without
#      ncclCommRevoke / ncclCommShrink);
#   2. nccl_smoke (bench/gpu_smoke.sh's test) on the NCCL the binary finds,
#      and again on the first library found that has ncclCommRevoke;
#   3. re-formation latency (reform_bench) at 2, 4, 8, 16 workers, planned
#      shrink and kill -9, TRIALS each (a core per worker on that machine);
#   4. MORE (default 50) more kill -9 trials at 2, 4, 8, 16 workers (looking
#      for the Gloo timeout stall, see docs/BENCHMARKS.md);
#   5. all-reduce, shim vs raw Gloo (allreduce_bench --np 2 and --np 4, not
#      pinned: with --pin a rank's Gloo I/O thread shares its one core).
# Usage: [MORE=50] bench/device_run.sh [BUNDLE] [TRIALS] [ROUNDS]
#   (defaults 20 and 61; the separate device calls these steps come from
#   ran 30-160 s each, docs/results/2026-11-30-device; on the 2-core
#   container with MORE=2, TRIALS 2, ROUNDS 3 the script takes 42 s)
set -uo pipefail
bundle=$(cd "${1:-build-dev}" && pwd)
trials=${2:-20}
rounds=${3:-61}
more=${MORE:-50}
out=${OUT:-/tmp/device-out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
bin=$bundle/bin
res=$out/results.txt
step() { echo "== $(date -u +%T) $*" | tee -a "$res"; }

step machine
{
  date -u; nproc; uname -r; grep PRETTY /etc/os-release; uptime
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  lscpu | grep -E 'Model name|^CPU\(s\)|Thread|Socket'
} >> "$res" 2>&1
newer=""
while read -r f; do
  r=no; s=no
  grep -qa ncclCommRevoke "$f" && r=yes
  grep -qa ncclCommShrink "$f" && s=yes
  echo "$f revoke=$r shrink=$s" >> "$res"
  if [[ $r == yes && -z $newer ]]; then newer=$(dirname "$f"); fi
done < <(find / -xdev -name 'libnccl.so*' -type f 2>/dev/null | sort)

if [[ -x $bin/nccl_smoke ]]; then
  step "nccl_smoke"
  timeout 120 "$bin/nccl_smoke" >> "$res" 2>&1; echo "rc=$?" >> "$res"
  if [[ -n $newer ]]; then
    step "nccl_smoke with the NCCL in $newer"
    LD_LIBRARY_PATH="$newer:$LD_LIBRARY_PATH" timeout 120 "$bin/nccl_smoke" \
      >> "$res" 2>&1
    echo "rc=$?" >> "$res"
  fi
fi

for n in 2 4 8 16; do
  for kind in planned kill9; do
    step "reform $n $kind"
    timeout 150 "$bin/reform_bench" --trainer "$bin/elastic_trainer" \
      --workers "$n" --kind "$kind" --trials "$trials" >> "$res" 2>/dev/null
    echo "rc=$?" >> "$res"
  done
done
for n in 2 4 8 16; do
  step "kill9 $n, more trials"
  timeout 100 "$bin/reform_bench" --trainer "$bin/elastic_trainer" \
    --workers "$n" --kind kill9 --trials "$more" >> "$res" 2>/dev/null
  echo "rc=$?" >> "$res"
done
for np in 2 4; do
  step "allreduce --np $np"
  timeout 250 "$bin/allreduce_bench" --np "$np" $((64 << 20)) \
    $((np == 2 ? rounds : (rounds + 1) / 2)) 20 >> "$res" 2>&1
  echo "rc=$?" >> "$res"
done
step done
tail -c 3000 "$res"
