#!/usr/bin/python3
"""Steady-state step time of ringmaster.torch against plain DDP under
torchrun, same model, data, global batch and PyTorch, one machine.

ringmaster's step adds what elastic training needs: the gradients go
through the shim's all-reduce (a DDP communication hook) instead of
PyTorch's Gloo process group, and every step ends with the step boundary
(an 8-byte all-reduce of the newest generation heard of; every K steps
with --boundary-every K, one variant per K); an in-memory
commit every --commit-every steps (a deep copy of the model and optimizer
state). Rank 0 logs a line per step; the figure is the median step
interval over --steps steps after --warm steps. The variants alternate
(ringmaster K=1, K=10, torchrun, ringmaster K=1, ...) for --rounds rounds.

  /usr/bin/python3 bench/pytorch/overhead.py --build build/py --n 2 4 \\
      --rounds 3 --boundary-every 1 10 --out /tmp/overhead.json
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import recovery  # noqa: E402


def intervals(log, warm, steps):
    t = [e[1] for e in recovery.read_steps(log) if e[0] == "step"]
    t = t[warm:warm + steps + 1]
    return [(b - a) * 1000 for a, b in zip(t, t[1:])]


def measure(system, a, n, boundary_every=1):
    d = tempfile.mkdtemp(prefix=f"rm_overhead_{system.name}_{n}_")
    a = copy.copy(a)
    a.boundary_every = boundary_every  # read by recovery.train_args
    s = system(a, n, d)
    try:
        s.start()
        recovery.wait_steps(s.log, a.warm + a.steps + 1, 600)
        return statistics.median(intervals(s.log, a.warm, a.steps))
    finally:
        s.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(recovery.SOURCE, "build", "py"))
    p.add_argument("--n", type=int, nargs="+", default=[2, 4])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--samples", type=int, default=200000)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--commit-every", type=int, default=10)
    p.add_argument("--boundary-every", type=int, nargs="+", default=[1],
                   help="ringmaster's step boundary every K steps (one "
                   "ringmaster variant per K)")
    p.add_argument("--warm", type=int, default=20)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--monitor-interval", type=float, default=5.0)
    p.add_argument("--out", default="")
    a = p.parse_args()
    res = {"args": dict(vars(a)), "ms": {}, "load1": []}
    variants = [(f"ringmaster_k{k}", recovery.Ringmaster, k)
                for k in a.boundary_every]
    variants.append(("torchrun", recovery.Torchrun, 1))
    for n in a.n:
        for r in range(a.rounds):
            for name, system, k in variants:
                load = os.getloadavg()[0]
                ms = measure(system, a, n, k)
                res["ms"].setdefault(name, {}).setdefault(n, []).append(ms)
                res["load1"].append(load)
                print(f"N={n} round {r} {name}: median step {ms:.2f} ms "
                      f"(load {load:.1f})", flush=True)
    print("\nmedian step time (ms), median over rounds [min-max]; "
          "overhead against plain DDP (torchrun)")
    for n in a.n:
        tr = res["ms"]["torchrun"][n]
        row = [f"N={n}  plain DDP {statistics.median(tr):.2f} "
               f"[{min(tr):.2f}-{max(tr):.2f}]"]
        for name, _, _ in variants[:-1]:
            rm = res["ms"][name][n]
            over = (statistics.median(rm) / statistics.median(tr) - 1) * 100
            row.append(f"{name} {statistics.median(rm):.2f} "
                       f"[{min(rm):.2f}-{max(rm):.2f}] {over:+.1f} %")
        print("  ".join(row))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
