#!/usr/bin/python3
"""What waiting for a torch.distributed all-reduce costs, by the way the
caller waits (nothing of ringmaster's: two plain Python processes, a Gloo
process group over a TCPStore on 127.0.0.1). Why ringmaster.torch's DDP
hook waits with Work.wait(timeout) (docs/PYTORCH.md section 4).

Per way, the median over rounds of the wall and CPU time (the process's,
all threads) of one all-reduce of --numel floats on rank 0; the ways take
turns in rounds of --reps calls, so load drift hits them alike.

  wait          work.wait(): what plain DDP's reducer does (in C++)
  wait_timeout  work.wait(timeout) in slices of --slice-ms, retried when a
                slice runs out: ringmaster.torch's hook
  fut_wait      work.get_future().wait()
  event         a threading.Event set by a done-callback on the work's
                future, waited for in slices (the hook's earlier way)
  then          work.get_future().then(<Python callable>).wait()
  poll          work.is_completed() polled with 0.1 ms sleeps
  copies        wait_timeout, plus the hook's copies: the bucket into a
                host buffer one element longer (the flag), and back

  /usr/bin/python3 bench/pytorch/wait_costs.py
"""

from __future__ import annotations

import argparse
import datetime
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

PY = "/usr/bin/python3"


def args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--numel", type=int, default=99073,
                   help="floats per all-reduce (default: ab_overhead.py's "
                   "bucket)")
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--slice-ms", type=float, default=20.0)
    p.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def worker(a):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    store = dist.TCPStore("127.0.0.1", a.port, 2, a.rank == 0)
    dist.init_process_group("gloo", store=store, rank=a.rank, world_size=2)
    pg = dist.distributed_c10d._get_default_group()
    t = torch.randn(a.numel)
    stage = torch.empty(a.numel + 1)
    grads = stage.narrow(0, 0, a.numel)
    slice_td = datetime.timedelta(milliseconds=a.slice_ms)

    def wait():
        pg.allreduce([t]).wait()

    def wait_timeout(tensor=t):
        w = pg.allreduce([tensor])
        while True:
            try:
                w.wait(slice_td)
                return
            except RuntimeError:
                if w.is_completed():
                    w.wait()
                    return

    def fut_wait():
        pg.allreduce([t]).get_future().wait()

    def event():
        w = pg.allreduce([t])
        done = threading.Event()
        w.get_future().add_done_callback(lambda _f: done.set())
        while not done.wait(a.slice_ms / 1000):
            pass
        w.wait()

    def then():
        pg.allreduce([t]).get_future().then(lambda _f: None).wait()

    def poll():
        w = pg.allreduce([t])
        while not w.is_completed():
            time.sleep(0.0001)
        w.wait()

    def copies():
        grads.copy_(t)
        stage[a.numel] = 0.0
        wait_timeout(stage)
        float(stage[a.numel])
        t.copy_(grads)

    ways = {"wait": wait, "wait_timeout": wait_timeout, "fut_wait": fut_wait,
            "event": event, "then": then, "poll": poll, "copies": copies}
    res = {k: [] for k in ways}
    for r in range(a.rounds):
        order = list(ways) if r % 2 == 0 else list(ways)[::-1]
        for k in order:
            for _ in range(5):
                ways[k]()
            c0, w0 = time.process_time(), time.perf_counter()
            for _ in range(a.reps):
                ways[k]()
            res[k].append(((time.perf_counter() - w0) / a.reps * 1e6,
                           (time.process_time() - c0) / a.reps * 1e6))
    if a.rank == 0:
        print(f"2 ranks, {a.numel} floats, {a.rounds} rounds of {a.reps}; "
              f"load {os.getloadavg()[0]:.2f}")
        for k, v in res.items():
            wall = statistics.median(x[0] for x in v)
            cpu = statistics.median(x[1] for x in v)
            print(f"  {k:13s} wall {wall:8.1f} us   cpu {cpu:8.1f} us")
    dist.destroy_process_group()
    return 0


def main(argv=None):
    a = args(argv)
    if a.rank >= 0:
        return worker(a)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    base = [PY, os.path.abspath(__file__), "--numel", str(a.numel),
            "--rounds", str(a.rounds), "--reps", str(a.reps),
            "--slice-ms", str(a.slice_ms), "--port", str(port)]
    procs = [subprocess.Popen(base + ["--rank", str(r)], env=env)
             for r in (0, 1)]
    return max(p.wait() for p in procs)


if __name__ == "__main__":
    sys.exit(main())
