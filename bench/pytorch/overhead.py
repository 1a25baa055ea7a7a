#!/usr/bin/python3
"""Steady-state step time of ringmaster.torch against plain DDP under
torchrun, same model, data, global batch and PyTorch, one machine.

ringmaster's step adds what elastic training needs: the gradients go
through the shim's all-reduce (a DDP communication hook) instead of
PyTorch's Gloo process group, and every step ends with the step boundary
(an 8-byte all-reduce of the newest generation heard of); an in-memory
commit every --commit-every steps (a deep copy of the model and optimizer
state). Rank 0 logs a line per step; the figure is the median step
interval over --steps steps after --warm steps. The two systems alternate
(ringmaster, torchrun, ringmaster, ...) for --rounds rounds.

  /usr/bin/python3 bench/pytorch/overhead.py --build build/py --n 2 4 \\
      --rounds 3 --out /tmp/overhead.json
"""

from __future__ import annotations

import argparse
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


def measure(system, a, n):
    d = tempfile.mkdtemp(prefix=f"rm_overhead_{system.name}_{n}_")
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
    p.add_argument("--warm", type=int, default=20)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--monitor-interval", type=float, default=5.0)
    p.add_argument("--out", default="")
    a = p.parse_args()
    res = {"args": vars(a), "ms": {}}
    for n in a.n:
        for r in range(a.rounds):
            for system in (recovery.Ringmaster, recovery.Torchrun):
                ms = measure(system, a, n)
                res["ms"].setdefault(system.name, {}).setdefault(n, []).append(ms)
                print(f"N={n} round {r} {system.name}: median step "
                      f"{ms:.2f} ms", flush=True)
    print("\nmedian step time (ms), median over rounds [min-max]")
    for n in a.n:
        rm = res["ms"]["ringmaster"][n]
        tr = res["ms"]["torchrun"][n]
        over = (statistics.median(rm) / statistics.median(tr) - 1) * 100
        print(f"N={n}  ringmaster {statistics.median(rm):.2f} "
              f"[{min(rm):.2f}-{max(rm):.2f}]  plain DDP {statistics.median(tr):.2f} "
              f"[{min(tr):.2f}-{max(tr):.2f}]  overhead {over:+.1f} %")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
