#!/usr/bin/env bash
# The worker-shim measurements for the lent GPU machine (16 cores, one GPU,
# nothing installable), from a bundle made by bench/device_bundle.sh. One
# pass, each step under its own time limit so a hang costs only that step:
#   1. machine facts, and every NCCL library on it (with or without
#      ncclCommRevoke / ncclCommShrink);
#   2. nccl_smoke (bench/gpu_smoke.sh's test) on the machine's NCCL, and
#      again on a newer one that has ncclCommRevoke, if one is found;
#   3. re-formation latency (reform_bench) at 2, 4, 8, 16 workers, planned
#      shrink and kill -9, with a core per worker;
#   4. all-reduce, shim vs raw Gloo, two ranks pinned to their own cores
#      (allreduce_bench --np 2 --pin), then unpinned;
#   5. while time is left (BUDGET_S, default 420 s from the start): more
#      kill -9 trials at 4 and 2 workers, looking for the Gloo-timeout stall.
# Usage: bench/device_run.sh [BUNDLE] [TRIALS] [ROUNDS]; results in $OUT.
set -uo pipefail
bundle=$(cd "${1:-build-dev}" && pwd)
trials=${2:-20}
rounds=${3:-31}
out=${OUT:-/tmp/device-out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
bin=$bundle/bin
stamp() { echo "== $(date -u +%T) $*" | tee -a "$out/log.txt"; }

stamp machine
{
  date -u; nproc; uname -r; grep PRETTY /etc/os-release; uptime
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  lscpu | grep -E 'Model name|^CPU\(s\)|Thread|Socket'
} > "$out/machine.txt" 2>&1
newer=""
while read -r f; do
  r=no; s=no
  grep -qa ncclCommRevoke "$f" && r=yes
  grep -qa ncclCommShrink "$f" && s=yes
  echo "$f revoke=$r shrink=$s" >> "$out/machine.txt"
  if [[ $r == yes && -z $newer ]]; then newer=$(dirname "$f"); fi
done < <(find / -xdev -name 'libnccl.so*' -type f 2>/dev/null | sort)
cat "$out/machine.txt"

if [[ -x $bin/nccl_smoke ]]; then
  stamp "nccl_smoke (machine's NCCL)"
  timeout 120 "$bin/nccl_smoke" > "$out/gpu_smoke.json" 2> "$out/gpu_smoke.err"
  echo "rc=$?"; cat "$out/gpu_smoke.json"
  if [[ -n $newer ]]; then
    stamp "nccl_smoke (NCCL in $newer)"
    LD_LIBRARY_PATH="$newer:$LD_LIBRARY_PATH" timeout 120 "$bin/nccl_smoke" \
      > "$out/gpu_smoke_newer.json" 2> "$out/gpu_smoke_newer.err"
    echo "rc=$?"; cat "$out/gpu_smoke_newer.json"
  fi
fi

for n in 2 4 8 16; do
  for kind in planned kill9; do
    stamp "reform $n $kind"
    timeout 150 "$bin/reform_bench" --trainer "$bin/elastic_trainer" \
      --workers "$n" --kind "$kind" --trials "$trials" \
      >> "$out/reform.jsonl" 2>> "$out/reform.err"
    echo "rc=$?"; tail -1 "$out/reform.jsonl"
  done
done

stamp "allreduce --np 2 --pin"
timeout 200 "$bin/allreduce_bench" --np 2 --pin $((64 << 20)) "$rounds" 20 \
  > "$out/allreduce.jsonl" 2> "$out/allreduce.err"
echo "rc=$?"; cat "$out/allreduce.jsonl"

budget=${BUDGET_S:-420}
if (( SECONDS < budget - 120 )); then
  stamp "allreduce --np 2 (not pinned)"
  timeout $((budget - SECONDS - 60)) "$bin/allreduce_bench" --np 2 \
    $((64 << 20)) "$rounds" 20 > "$out/allreduce_unpinned.jsonl" \
    2> "$out/allreduce_unpinned.err"
  echo "rc=$?"; tail -2 "$out/allreduce_unpinned.jsonl"
fi
for n in 4 2; do
  if (( SECONDS < budget - 60 )); then
    stamp "more kill9 trials at $n"
    timeout $((budget - SECONDS - 20)) "$bin/reform_bench" \
      --trainer "$bin/elastic_trainer" --workers "$n" --kind kill9 \
      --trials 100 >> "$out/kill9_more.jsonl" 2>> "$out/kill9_more.err"
    echo "rc=$?"; cat "$out/kill9_more.jsonl"
  fi
done
stamp done
uptime >> "$out/machine.txt"
