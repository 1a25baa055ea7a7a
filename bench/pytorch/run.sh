#!/usr/bin/env bash
# ringmaster.torch side by side with torchrun (TorchElastic), one machine:
# the figures of docs/BENCHMARKS.md ("PyTorch elastic training").
#
#   bench/pytorch/run.sh [BUILD_DIR] [OUT_DIR]
#
# BUILD_DIR (default build/py) must hold cli/ringmaster and the staged
# python/ package (cmake --build BUILD_DIR --target ringmaster
# ringmaster_python). Runs under Debian's /usr/bin/python3 (python3-torch).
#
# What each side runs, by hand (N workers of examples/pytorch/train_mlp.py):
#
#   ringmaster:
#     ringmaster coordinator --listen 127.0.0.1:7070 &
#     for i in $(seq 0 $((N-1))); do
#       ringmaster shim run --mode inprocess --coordinator 127.0.0.1:7070 \
#         --job bench --worker w$i --workers N -- \
#         /usr/bin/python3 examples/pytorch/train_mlp.py --samples 200000 \
#         --epochs 100 --batch 256 --dim 32 --hidden 64 --commit-every 10 \
#         --step-log /tmp/steps.log &
#     done
#     kill -9 <pid of w(N-1)>          # or: ringmaster resize bench --workers N-1
#
#   torchrun (same PyTorch, c10d rendezvous, restarts on failure):
#     /usr/bin/python3 -m torch.distributed.run --nnodes 1 \
#       --nproc_per_node N --rdzv_backend c10d --rdzv_endpoint 127.0.0.1:29400 \
#       --rdzv_id bench --max_restarts 3 --monitor_interval 5 \
#       --redirects 1 --tee 1 examples/pytorch/train_mlp.py --plain-ddp \
#       --samples 200000 --epochs 100 --batch 256 --dim 32 --hidden 64 \
#       --step-log /tmp/steps.log
#     kill -9 <pid of the worker with LOCAL_RANK=N-1>
#
# (--redirects 1 --tee 1: under Python 3.11 torchrun's default 0 is not
# parsed and it crashes.)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD="${1:-build/py}"
OUT="${2:-/tmp/rm_bench_pytorch}"
mkdir -p "$OUT"
export OMP_NUM_THREADS=1
uptime | tee "$OUT/load.txt"
/usr/bin/python3 bench/pytorch/recovery.py --build "$BUILD" --n 2 4 8 \
  --trials 3 --planned --out "$OUT/recovery.json" | tee "$OUT/recovery.txt"
/usr/bin/python3 bench/pytorch/overhead.py --build "$BUILD" --n 2 4 \
  --rounds 3 --steps 100 --boundary-every 1 10 --out "$OUT/overhead.json" | tee "$OUT/overhead.txt"
# The 2 % check: plain DDP and ringmaster interleaved in the same 2 processes
# (one per core), paired blocks; run it on a quiet machine (about 4 minutes).
/usr/bin/python3 bench/pytorch/ab_overhead.py --build "$BUILD" --pairs 200 \
  --block 10 --out "$OUT/ab.json" | grep -v '^ts=' | tee "$OUT/ab.txt"
# Why the hook waits with Work.wait(timeout) (no ringmaster involved).
/usr/bin/python3 bench/pytorch/wait_costs.py | tee "$OUT/wait_costs.txt"
uptime | tee -a "$OUT/load.txt"
