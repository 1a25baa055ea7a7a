#!/usr/bin/python3
"""Steady-state step overhead of ringmaster.torch against plain DDP, as a
paired, interleaved A/B measurement in the same two processes.

overhead.py starts a separate job per variant, so machine load that drifts
between runs (a shared 2-core VM) swamps a 2 % difference. Here both
variants live in the same worker processes, over the same data, and take
turns in blocks of --block steps, in the order AB, BA, AB, ... (--pairs
pairs), so drift hits both alike and each pair is compared on its own:

  A, plain DDP: DistributedDataParallel with its own all-reduce over
    torch.distributed's Gloo process group (the one ringmaster.torch.init
    created; after set-up it is an ordinary ProcessGroupGloo, as under
    torchrun), nothing else per step (--baseline forced: instead
    ringmaster as B but with the shim's 8-byte boundary all-reduce at every
    boundary, as before the flag rode on the gradient all-reduce; B - A is
    then what that saves);
  B, ringmaster: the same model architecture and initial weights wrapped
    by ElasticState.on_reform (ringmaster's DDP communication hook: the
    gradients and the boundary's flag through the process group, or with
    --gradients shim through the shim), the step boundary after every
    step, and an
    in-memory commit every --commit-every steps instead of the boundary
    (--boundary-every K: the boundary every K steps instead).

Each variant has its own copy of the model and optimizer (two DDP wrappers
of one module would both all-reduce). The first step of each block is not
timed. Per block: the median step wall time and CPU time (the process's,
all threads: Gloo's and the shim's too) on rank 0, and their means (the
median hides a commit that comes once a block; the mean charges it, so the
mean is what a user pays); per pair: B / A. The figure is the median of
the pair ratios with its distribution-free 95 % confidence interval (order
statistics of the binomial), in %.

  /usr/bin/python3 bench/pytorch/ab_overhead.py --build build/dev \\
      --pairs 40 --block 10 --out /tmp/ab.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _workers import run_workers  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
PY = "/usr/bin/python3"


def args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(SOURCE, "build", "dev"))
    p.add_argument("--n", type=int, default=2, help="workers")
    p.add_argument("--pairs", type=int, default=40)
    p.add_argument("--block", type=int, default=10, help="steps per block")
    p.add_argument("--warm", type=int, default=20,
                   help="untimed steps of each variant first")
    p.add_argument("--batch", type=int, default=512, help="global batch")
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=2, help="hidden layers")
    p.add_argument("--bucket-cap-mb", type=float, default=25.0,
                   help="DDP's bucket size, both variants")
    p.add_argument("--commit-every", type=int, default=10)
    p.add_argument("--boundary-every", type=int, default=1,
                   help="B's step boundary every K steps")
    p.add_argument("--force-boundary", action="store_true",
                   help="B runs the shim's boundary collective at every "
                   "boundary (the behaviour before the flag rode on the "
                   "gradient all-reduce)")
    p.add_argument("--baseline", choices=["ddp", "forced"], default="ddp",
                   help="A: plain DDP (default), or ringmaster with the "
                   "shim's boundary collective at every boundary (then "
                   "B - A is what carrying the flag on the gradient "
                   "all-reduce saves)")
    p.add_argument("--gradients", choices=["auto", "torch", "shim"],
                   default="auto",
                   help="what carries ringmaster's gradient all-reduce "
                   "(RINGMASTER_GRADIENTS): the process group (torch, the "
                   "default with Gloo) or the shim's communicator")
    p.add_argument("--python-path", default="",
                   help="the ringmaster package to import (default: the "
                   "build's staged copy, <build>/python)")
    p.add_argument("--out", default="")
    p.add_argument("--worker", default="", help=argparse.SUPPRESS)
    return p.parse_args(argv)


# -- the worker ------------------------------------------------------------

def make_model(a, torch):
    torch.manual_seed(1)
    layers, width = [], a.dim
    for _ in range(a.layers):
        layers += [torch.nn.Linear(width, a.hidden), torch.nn.Tanh()]
        width = a.hidden
    layers.append(torch.nn.Linear(width, 1))
    return torch.nn.Sequential(*layers)


def worker(a):
    import torch
    import ringmaster.torch as rmt
    torch.set_num_threads(1)
    ctx = rmt.init()
    rank, world = ctx.rank, ctx.world_size
    g = torch.Generator().manual_seed(100 + rank)
    local = a.batch // world
    x = torch.randn(local, a.dim, generator=g)
    y = torch.randn(local, 1, generator=g)

    model_a = make_model(a, torch)
    opt_a = torch.optim.SGD(model_a.parameters(), lr=1e-4, momentum=0.9)
    if a.baseline == "ddp":
        ddp_a = torch.nn.parallel.DistributedDataParallel(
            model_a, bucket_cap_mb=a.bucket_cap_mb)
    else:  # ringmaster with the shim's boundary collective every step
        state_a = rmt.ElasticState(
            model=model_a, optimizer=opt_a, step=0,
            ddp_kwargs={"bucket_cap_mb": a.bucket_cap_mb})
        state_a.on_reform()
        ddp_a = state_a.ddp_model

    model_b = make_model(a, torch)
    opt_b = torch.optim.SGD(model_b.parameters(), lr=1e-4, momentum=0.9)
    state = rmt.ElasticState(model=model_b, optimizer=opt_b, step=0,
                             ddp_kwargs={"bucket_cap_mb": a.bucket_cap_mb})
    state.on_reform()  # what @elastic.run does: DDP with the hook

    def elastic_step(st, forced):
        st.step += 1
        if st.step % a.commit_every == 0:
            if forced:  # commit() with the boundary's collective
                st.save()
                ctx.shim.commit(st.step, 0)
                ctx.step_boundary(force=True)
            else:
                st.commit()
        elif st.step % a.boundary_every == 0:
            if forced:
                ctx.step_boundary(force=True)
            else:
                st.check_host_updates()

    def step_a():
        opt_a.zero_grad()
        if a.baseline == "ddp":
            # DDP averages: scale to the same update as B's sum.
            loss = ((ddp_a(x) - y) ** 2).sum() * world / a.batch
        else:
            loss = ((state_a.ddp_model(x) - y) ** 2).sum() / a.batch
        loss.backward()
        opt_a.step()
        if a.baseline != "ddp":
            elastic_step(state_a, forced=True)

    def step_b():
        opt_b.zero_grad()
        loss = ((state.ddp_model(x) - y) ** 2).sum() / a.batch
        loss.backward()
        opt_b.step()
        elastic_step(state, forced=a.force_boundary)

    steps = {"A": step_a, "B": step_b}
    for _ in range(a.warm):
        step_a()
        step_b()
    blocks = []
    for pair in range(a.pairs):
        for v in ("AB" if pair % 2 == 0 else "BA"):
            wall, cpu = [], []
            steps[v]()  # untimed: the switch from the other model
            for _ in range(a.block):
                t0, c0 = time.perf_counter(), time.process_time()
                steps[v]()
                wall.append((time.perf_counter() - t0) * 1000)
                cpu.append((time.process_time() - c0) * 1000)
            blocks.append({"pair": pair, "variant": v, "wall_ms": wall,
                           "cpu_ms": cpu})
    if a.out:
        with open(f"{a.out}.rank{rank}", "w") as f:
            json.dump({"rank": rank, "world": world, "blocks": blocks,
                       "gradients": ctx.gradients,
                       "boundaries": {
                           "skipped": getattr(ctx, "boundaries_skipped", 0),
                           "full": getattr(ctx, "boundaries_full", 0)}}, f)
    rmt.shutdown(finished=True)
    return 0


# -- the driver ------------------------------------------------------------

def median_ci(values, level=0.95):
    """Median and its distribution-free confidence interval: order
    statistics k and n+1-k, k the largest with P(Bin(n, 1/2) < k) <= the
    tail."""
    v = sorted(values)
    n = len(v)
    tail = (1 - level) / 2
    k, cum = 0, 0.0
    while k < n:
        p = math.comb(n, k) / 2 ** n
        if cum + p > tail:
            break
        cum += p
        k += 1
    if k == 0:
        return statistics.median(v), v[0], v[-1]
    return statistics.median(v), v[k - 1], v[n - k]


def analyse(blocks, key, stat=statistics.median):
    med = {}
    for b in blocks:
        med[(b["pair"], b["variant"])] = stat(b[key])
    pairs = sorted({p for p, _ in med})
    ratios = [(med[(p, "B")] / med[(p, "A")] - 1) * 100 for p in pairs]
    m, lo, hi = median_ci(ratios)
    a = statistics.median([med[(p, "A")] for p in pairs])
    b = statistics.median([med[(p, "B")] for p in pairs])
    return {"plain_ms": a, "ringmaster_ms": b, "overhead_pct": m,
            "ci95_pct": [lo, hi], "pair_overheads_pct": ratios}


def main(argv=None):
    a = args(argv)
    if a.worker:
        return worker(a)
    rm = os.path.join(a.build, "cli", "ringmaster")
    d = tempfile.mkdtemp(prefix="rm_ab_")
    out = a.out or os.path.join(d, "ab.json")
    env = dict(os.environ,
               PYTHONPATH=a.python_path or os.path.join(a.build, "python"),
               OMP_NUM_THREADS="1", RINGMASTER_GRADIENTS=a.gradients)
    coord = subprocess.Popen([rm, "coordinator", "--listen", "127.0.0.1:0"],
                             stdout=subprocess.PIPE, text=True)
    addr = coord.stdout.readline().split()[-1]
    passthrough = ["--pairs", str(a.pairs), "--block", str(a.block),
                   "--warm", str(a.warm), "--batch", str(a.batch),
                   "--dim", str(a.dim), "--hidden", str(a.hidden),
                   "--layers", str(a.layers), "--bucket-cap-mb",
                   str(a.bucket_cap_mb), "--commit-every",
                   str(a.commit_every), "--boundary-every",
                   str(a.boundary_every), "--out", out, "--worker", "1"]
    if a.force_boundary:
        passthrough.append("--force-boundary")
    passthrough += ["--baseline", a.baseline]
    load_before = os.getloadavg()
    t0 = time.time()
    if not run_workers(rm, addr, "ab", a.n, [PY, os.path.abspath(__file__)] + passthrough,
                       env, d, coord):
        return 1
    with open(f"{out}.rank0") as f:
        r0 = json.load(f)
    res = {"args": {k: v for k, v in vars(a).items() if k != "worker"},
           "load_before": load_before, "load_after": os.getloadavg(),
           "seconds": time.time() - t0,
           "wall": analyse(r0["blocks"], "wall_ms"),
           "cpu": analyse(r0["blocks"], "cpu_ms"),
           "wall_mean": analyse(r0["blocks"], "wall_ms", statistics.fmean),
           "cpu_mean": analyse(r0["blocks"], "cpu_ms", statistics.fmean),
           "boundaries": r0.get("boundaries", {}),
           "gradients": r0.get("gradients", "shim"), "blocks": r0["blocks"]}
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
    print(f"N={a.n} pairs={a.pairs} block={a.block} model {a.dim}->"
          f"{a.hidden}x{a.layers}->1 batch {a.batch} bucket "
          f"{a.bucket_cap_mb} MB commit every {a.commit_every} boundary "
          f"every {a.boundary_every}"
          f"{' (forced)' if a.force_boundary else ''}, baseline "
          f"{a.baseline}, gradients through {res['gradients']}; "
          f"load {load_before[0]:.2f} -> {res['load_after'][0]:.2f}, "
          f"{res['seconds']:.0f} s")
    print(f"  step boundaries on rank 0 (both variants, one context): "
          f"{res['boundaries']}")
    label = "plain DDP" if a.baseline == "ddp" else "forced boundary"
    for key in ("wall", "cpu", "wall_mean", "cpu_mean"):
        s = res[key]
        print(f"  {key:9} step: {label} {s['plain_ms']:.2f} ms, ringmaster "
              f"{s['ringmaster_ms']:.2f} ms; overhead (median of "
              f"{len(s['pair_overheads_pct'])} pairs) {s['overhead_pct']:+.2f} "
              f"%, 95 % CI [{s['ci95_pct'][0]:+.2f}, {s['ci95_pct'][1]:+.2f}] %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
