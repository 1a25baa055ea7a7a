#!/usr/bin/python3
"""What each piece of ringmaster.torch's per-step machinery costs, one at a
time, in the same two worker processes (what ab_overhead.py measures as a
whole): per operation, the median over rounds of the wall and CPU time
(the process's, all threads) on rank 0. The operations take turns in
rounds of --reps each, so load drift hits them alike.

  pg_allreduce    torch.distributed.all_reduce of one gradient bucket over
                  torch's Gloo process group (what plain DDP does per step)
  shim_allreduce  the same bucket through the shim, in place (ctypes)
  hook            ringmaster.torch's DDP hook on that bucket, as configured
                  (default: copy into the host buffer, the flag, the
                  process group's all-reduce, copy back)
  hook_shim       the same hook with gradients="shim" (the shim's
                  all-reduce instead of the process group's)
  *_8B            the same two all-reduces of one int64
  boundary_skip   check_host_updates() after an unflagged hook (no
                  collective: the default path)
  boundary_full   the shim's step boundary (an 8-byte max all-reduce: what
                  every check_host_updates() cost before)
  save            ElasticState.save(): the in-memory copy of the model and
                  optimizer state (what commit() adds, besides the report)
  commit          ElasticState.commit() after an unflagged hook (save, the
                  progress report to the coordinator, the boundary)
The hook that precedes boundary_skip and commit is not timed; the
per-call renormalization of the bucket (one multiply) is not timed.

--thread-cpu N instead times the four all-reduces in blocks of N calls
(twice over) and charges the CPU of each block to the threads that spent
it (/proc/self/task, user and system, 10 ms ticks): where an all-reduce's
CPU goes (the caller, Gloo's device loop threads, torch's worker threads).

  /usr/bin/python3 bench/pytorch/component_costs.py --build build/dev
"""

from __future__ import annotations

import argparse
import json
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
OPS = ["pg_allreduce", "shim_allreduce", "hook", "hook_shim",
       "pg_allreduce_8B",
       "shim_allreduce_8B", "boundary_skip",
       "boundary_full", "save", "commit"]


def args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(SOURCE, "build", "dev"))
    p.add_argument("--n", type=int, default=2, help="workers")
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--reps", type=int, default=50, help="calls per round")
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--out", default="")
    p.add_argument("--thread-cpu", type=int, default=0, metavar="N",
                   help="per-thread CPU of the all-reduces, blocks of N")
    p.add_argument("--worker", default="", help=argparse.SUPPRESS)
    return p.parse_args(argv)


class _Bucket:
    """What DDP hands its hook: the flat gradients of one bucket."""

    def __init__(self, buf):
        self._buf = buf

    def buffer(self):
        return self._buf

    def index(self):
        return 0


def _task_cpu():
    """{tid: (name, user ticks, system ticks)} of this process's threads."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                raw = f.read()
        except OSError:
            continue  # the thread ended
        fields = raw.rsplit(")", 1)[1].split()
        out[tid] = (raw[raw.index("(") + 1:raw.rindex(")")],
                    int(fields[11]), int(fields[12]))
    return out


def thread_cpu(ops, calls, renorm):
    """Per-thread CPU (us per call) of each all-reduce over blocks of
    `calls` calls, two passes."""
    tick_us = 1e6 / os.sysconf("SC_CLK_TCK")
    blocks = []
    for _ in range(2):
        for op in ["pg_allreduce", "shim_allreduce", "pg_allreduce_8B",
                   "shim_allreduce_8B"]:
            before = _task_cpu()
            t0 = time.perf_counter()
            for _ in range(calls):
                ops[op]()
                renorm()
            wall = (time.perf_counter() - t0) / calls * 1e6
            after = _task_cpu()
            threads = []
            for tid, (name, user, system) in after.items():
                u0, s0 = before.get(tid, (name, 0, 0))[1:]
                u = (user - u0) * tick_us / calls
                s = (system - s0) * tick_us / calls
                if u + s > 0:
                    threads.append({"tid": tid, "name": name,
                                    "user_us": u, "sys_us": s})
            threads.sort(key=lambda t: -(t["user_us"] + t["sys_us"]))
            blocks.append({"op": op, "wall_us": wall, "threads": threads})
    return blocks


def worker(a):
    import torch
    import torch.distributed as dist
    import ringmaster.torch as rmt
    from ringmaster._shim import DType, ReduceOp
    torch.set_num_threads(1)
    ctx = rmt.init()
    torch.manual_seed(1)
    layers, width = [], a.dim
    for _ in range(a.layers):
        layers += [torch.nn.Linear(width, a.hidden), torch.nn.Tanh()]
        width = a.hidden
    layers.append(torch.nn.Linear(width, 1))
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)
    x = torch.randn(8, a.dim)
    (model(x) ** 2).sum().backward()
    opt.step()  # the momentum buffers exist, as in training
    state = rmt.ElasticState(model=model, optimizer=opt, step=0)
    n = sum(p.numel() for p in model.parameters())
    grads = torch.randn(n) * 1e-3
    bucket = _Bucket(grads)
    one = torch.ones(1, dtype=torch.int64)

    def after_hook(fn):
        """fn timed after an untimed hook (as in a step: the boundary
        then needs no collective)."""
        def run():
            ctx.ddp_comm_hook(None, bucket)
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            return time.perf_counter() - t0, time.process_time() - c0
        return run

    def hook_shim():
        configured, ctx.gradients = ctx.gradients, "shim"
        try:
            ctx.ddp_comm_hook(None, bucket)
        finally:
            ctx.gradients = configured

    def timed(fn):
        def run():
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            return time.perf_counter() - t0, time.process_time() - c0
        return run

    ops = {
        "pg_allreduce": timed(lambda: dist.all_reduce(grads)),
        "shim_allreduce": timed(lambda: ctx.shim.allreduce(
            grads.data_ptr(), n, DType.FLOAT32, ReduceOp.SUM)),
        "hook": timed(lambda: ctx.ddp_comm_hook(None, bucket)),
        "hook_shim": timed(hook_shim),
        "pg_allreduce_8B": timed(lambda: dist.all_reduce(one)),
        "shim_allreduce_8B": timed(lambda: ctx.shim.allreduce(
            one.data_ptr(), 1, DType.INT64, ReduceOp.MAX)),
        "boundary_skip": after_hook(ctx.step_boundary),
        "boundary_full": timed(lambda: ctx.step_boundary(force=True)),
        "save": timed(state.save),
        "commit": after_hook(state.commit),
    }
    for op in OPS:  # warm
        for _ in range(5):
            ops[op]()
            grads.mul_(1.0 / a.n)  # keep the values bounded
    if a.thread_cpu > 0:
        blocks = thread_cpu(ops, a.thread_cpu, lambda: grads.mul_(1.0 / a.n))
        if a.out and ctx.rank == 0:
            with open(a.out, "w") as f:
                json.dump({"thread_cpu": blocks, "bucket_floats": n}, f)
        rmt.shutdown(finished=True)
        return 0
    rounds = []
    for r in range(a.rounds):
        order = OPS if r % 2 == 0 else OPS[::-1]
        row = {}
        for op in order:
            wall, cpu = 0.0, 0.0
            for _ in range(a.reps):
                w, c = ops[op]()
                wall += w
                cpu += c
                grads.mul_(1.0 / a.n)
            row[op] = {"wall_us": wall / a.reps * 1e6,
                       "cpu_us": cpu / a.reps * 1e6}
        rounds.append(row)
    if a.out and ctx.rank == 0:
        with open(a.out, "w") as f:
            json.dump({"rounds": rounds, "bucket_floats": n}, f)
    rmt.shutdown(finished=True)
    return 0


def main(argv=None):
    a = args(argv)
    if a.worker:
        return worker(a)
    rm = os.path.join(a.build, "cli", "ringmaster")
    d = tempfile.mkdtemp(prefix="rm_cc_")
    out = a.out or os.path.join(d, "cc.json")
    env = dict(os.environ, PYTHONPATH=os.path.join(a.build, "python"),
               OMP_NUM_THREADS="1")
    coord = subprocess.Popen([rm, "coordinator", "--listen", "127.0.0.1:0"],
                             stdout=subprocess.PIPE, text=True)
    addr = coord.stdout.readline().split()[-1]
    passthrough = ["--rounds", str(a.rounds), "--reps", str(a.reps),
                   "--dim", str(a.dim), "--hidden", str(a.hidden),
                   "--layers", str(a.layers), "--n", str(a.n),
                   "--out", out, "--worker", "1",
                   "--thread-cpu", str(a.thread_cpu)]
    load_before = os.getloadavg()
    t0 = time.time()
    if not run_workers(rm, addr, "cc", a.n, [PY, os.path.abspath(__file__)] + passthrough,
                       env, d, coord):
        return 1
    with open(out) as f:
        res = json.load(f)
    if a.thread_cpu > 0:
        print(f"N={a.n} per-thread CPU, blocks of {a.thread_cpu} calls; load "
              f"{load_before[0]:.2f} -> {os.getloadavg()[0]:.2f}")
        for b in res["thread_cpu"]:
            top = "  ".join(f"{t['tid']}: u{t['user_us']:.0f} s{t['sys_us']:.0f}"
                            for t in b["threads"][:4])
            print(f"  {b['op']:18} wall {b['wall_us']:7.0f} us/call   {top}")
        return 0
    res["load_before"], res["load_after"] = load_before, os.getloadavg()
    res["seconds"] = time.time() - t0
    summary = {}
    for op in OPS:
        summary[op] = {k: statistics.median(r[op][k] for r in res["rounds"])
                       for k in ("wall_us", "cpu_us")}
    res["median"] = summary
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
    print(f"N={a.n} bucket {res['bucket_floats']} floats, {a.rounds} rounds "
          f"of {a.reps}; load {load_before[0]:.2f} -> "
          f"{res['load_after'][0]:.2f}, {res['seconds']:.0f} s")
    for op in OPS:
        s = summary[op]
        print(f"  {op:15} wall {s['wall_us']:9.1f} us   cpu "
              f"{s['cpu_us']:9.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
