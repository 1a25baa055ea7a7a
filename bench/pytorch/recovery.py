#!/usr/bin/python3
"""ringmaster against torchrun (TorchElastic) on one machine: the time from
`kill -9` of one of N workers to the survivors' next completed training
step, and (ringmaster only: torchrun has no resize) from a planned shrink
or grow to the next step at the new size.

Both run examples/pytorch/train_mlp.py, the same model, data and global
batch, from the same PyTorch: ringmaster through `ringmaster shim run --mode
inprocess` (ringmaster.torch, in-process re-formation, rollback to the last
in-memory commit); torchrun as `python3 -m torch.distributed.run` with c10d
rendezvous and --max-restarts (every worker restarted, DDP from scratch;
a real job would also reload a checkpoint, which is not counted here).

Rank 0 appends a line per completed step to a log (`step <unix time> ...`);
the recovery time is the first step line after the kill that belongs to
the recovered job (ringmaster: a newer generation; torchrun: the restarted
workers' first step) minus the time of the kill. The killed worker is the
last rank (never rank 0, whose log is read).

  /usr/bin/python3 bench/pytorch/recovery.py --build build/py --n 2 4 8 \\
      --trials 3 --out /tmp/recovery.json
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
TRAIN = os.path.join(SOURCE, "examples", "pytorch", "train_mlp.py")
PY = "/usr/bin/python3"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train_args(a, log):
    return ["--samples", str(a.samples), "--epochs", "100", "--batch",
            str(a.batch), "--dim", str(a.dim), "--hidden", str(a.hidden),
            "--commit-every", str(a.commit_every), "--boundary-every",
            str(getattr(a, "boundary_every", 1)), "--step-log", log]


def read_steps(log):
    """[(kind, unix time, fields...)] from rank 0's step log."""
    out = []
    try:
        with open(log) as f:
            for line in f:
                p = line.split()
                if len(p) >= 2:
                    out.append((p[0], float(p[1]), p[2:]))
    except OSError:
        pass
    return out


def wait_steps(log, count, timeout, after=0.0, pred=lambda e: True):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        steps = [e for e in read_steps(log)
                 if e[0] == "step" and e[1] > after and pred(e)]
        if len(steps) >= count:
            return steps
        time.sleep(0.01)
    raise TimeoutError(f"{count} steps not seen in {timeout} s in {log}")


def kill_group(procs):
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for p in procs:
        p.wait()


class Ringmaster:
    name = "ringmaster"

    def __init__(self, a, n, d):
        self.a, self.n, self.d = a, n, d
        self.bin = os.path.join(a.build, "cli", "ringmaster")
        self.env = dict(os.environ, PYTHONPATH=os.path.join(a.build, "python"),
                        OMP_NUM_THREADS="1")
        self.coord = subprocess.Popen(
            [self.bin, "coordinator", "--listen", "127.0.0.1:0"],
            stdout=subprocess.PIPE, text=True, start_new_session=True)
        self.addr = self.coord.stdout.readline().split()[-1]
        self.log = os.path.join(d, "steps.log")
        self.workers = {}

    def spawn(self, w):
        out = open(os.path.join(self.d, f"{w}.log"), "w")
        self.workers[w] = subprocess.Popen(
            [self.bin, "shim", "run", "--mode", "inprocess", "--coordinator",
             self.addr, "--job", "bench", "--worker", w, "--workers",
             str(self.n), "--", PY, TRAIN] + train_args(self.a, self.log),
            stdout=out, stderr=subprocess.STDOUT, env=self.env,
            start_new_session=True)
        out.close()

    def start(self):
        for i in range(self.n):
            self.spawn(f"w{i}")

    def victim_pid(self):
        return self.workers[f"w{self.n - 1}"].pid

    @staticmethod
    def gen(e):
        return int(e[2][e[2].index("gen") + 1])

    def recovered(self, before_gen):
        return lambda e: self.gen(e) > before_gen

    def resize(self, n):
        r = subprocess.run([self.bin, "resize", "bench", "--workers", str(n),
                            "--coordinator", self.addr],
                           capture_output=True, text=True, timeout=20)
        if r.returncode != 0:
            raise RuntimeError(f"resize to {n}: {r.stderr.strip()}")

    def stop(self):
        kill_group(list(self.workers.values()) + [self.coord])
        self.coord.stdout.close()


class Torchrun:
    name = "torchrun"

    def __init__(self, a, n, d):
        self.a, self.n, self.d = a, n, d
        self.log = os.path.join(d, "steps.log")
        self.env = dict(os.environ, PYTHONPATH=os.path.join(a.build, "python"),
                        OMP_NUM_THREADS="1")
        self.agent = None

    def start(self):
        out = open(os.path.join(self.d, "torchrun.log"), "w")
        self.agent = subprocess.Popen(
            [PY, "-m", "torch.distributed.run", "--nnodes", "1",
             "--nproc_per_node", str(self.n), "--rdzv_backend", "c10d",
             "--rdzv_endpoint", f"127.0.0.1:{free_port()}", "--rdzv_id",
             "bench", "--max_restarts", "3", "--monitor_interval",
             str(self.a.monitor_interval), "--redirects", "1", "--tee", "1",
             "--log_dir", os.path.join(self.d, "tlogs"), TRAIN,
             "--plain-ddp"] + train_args(self.a, self.log),
            stdout=out, stderr=subprocess.STDOUT, env=self.env,
            start_new_session=True)
        out.close()

    def victim_pid(self):
        # The worker of the last local rank: a child of the agent whose
        # environment says LOCAL_RANK=n-1.
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                if ppid != self.agent.pid:
                    continue
                with open(f"/proc/{pid}/environ", "rb") as f:
                    env = f.read().split(b"\0")
                if f"LOCAL_RANK={self.n - 1}".encode() in env:
                    return int(pid)
            except (OSError, ValueError, IndexError):
                continue
        raise RuntimeError("torchrun worker not found")

    def recovered(self, kill_time):
        starts = [e[1] for e in read_steps(self.log)
                  if e[0] == "start" and e[1] > kill_time]
        return lambda e: bool(starts) and e[1] > starts[0]

    def stop(self):
        kill_group([self.agent])


def reform_detail(log, since, until):
    """ringmaster only: the last re-formation before `until` (rank 0's
    "reform" line): ms from `since` to its publication, and its phases
    (ms after the publication: the shim's communicator formed, the process
    group, the state sync, the DDP wrap)."""
    last = None
    for kind, t, f in read_steps(log):
        if kind == "reform" and since < t <= until:
            last = f
    if last is None or "pub" not in last:
        return None
    pub = float(last[last.index("pub") + 1])
    d = {"published": round((pub - since) * 1000, 1)}
    d.update(json.loads(last[-1]))
    return d


def kill_trial(system, a, n, trial):
    d = tempfile.mkdtemp(prefix=f"rm_bench_{system.name}_{n}_")
    s = system(a, n, d)
    try:
        s.start()
        wait_steps(s.log, a.warm_steps, 120)
        before = read_steps(s.log)[-1]
        pid = s.victim_pid()
        t_kill = time.time()
        os.kill(pid, signal.SIGKILL)
        if isinstance(s, Ringmaster):
            pred = s.recovered(Ringmaster.gen(before))
            steps = wait_steps(s.log, 1, 120, after=t_kill, pred=pred)
        else:
            deadline = time.monotonic() + 180
            steps = []
            while not steps and time.monotonic() < deadline:
                pred = s.recovered(t_kill)
                steps = [e for e in read_steps(s.log)
                         if e[0] == "step" and e[1] > t_kill and pred(e)]
                time.sleep(0.02)
            if not steps:
                raise TimeoutError("torchrun did not recover")
        ms = (steps[0][1] - t_kill) * 1000
        detail = reform_detail(s.log, t_kill, steps[0][1]) or {}
        detail["load1"] = os.getloadavg()[0]
        print(f"{system.name} N={n} trial {trial}: kill -9 -> next step "
              f"{ms:.0f} ms {detail or ''}", flush=True)
        return ms, detail
    finally:
        s.stop()


def planned_trial(a, n, trial):
    """ringmaster: resize N -> N-1, then grow back to N with a standby that
    has already joined; each timed from the resize to the first step at the
    new size."""
    d = tempfile.mkdtemp(prefix=f"rm_bench_planned_{n}_")
    s = Ringmaster(a, n, d)
    try:
        s.start()
        wait_steps(s.log, a.warm_steps, 120)
        t0 = time.time()
        s.resize(n - 1)
        shrink = wait_steps(s.log, 1, 60, after=t0,
                            pred=lambda e: e[2][e[2].index("world") + 1] == str(n - 1))
        shrink_ms = (shrink[0][1] - t0) * 1000
        shrink_detail = reform_detail(s.log, t0, shrink[0][1])
        wait_steps(s.log, 5, 60, after=shrink[0][1])
        s.spawn(f"w{n}")  # a standby (target is n-1)
        time.sleep(a.standby_wait_s)  # python + import torch + join
        t1 = time.time()
        s.resize(n)
        grow = wait_steps(s.log, 1, 60, after=t1,
                          pred=lambda e: e[2][e[2].index("world") + 1] == str(n))
        grow_ms = (grow[0][1] - t1) * 1000
        grow_detail = reform_detail(s.log, t1, grow[0][1])
        print(f"ringmaster N={n} trial {trial}: shrink -> next step "
              f"{shrink_ms:.0f} ms {shrink_detail}, grow -> next step "
              f"{grow_ms:.0f} ms {grow_detail}", flush=True)
        return shrink_ms, grow_ms, shrink_detail, grow_detail
    finally:
        s.stop()


def median_detail(details):
    keys = ["published", "shim_formed", "process_group", "state_sync",
            "ddp_wrap"]
    out = []
    for k in keys:
        v = [d[k] + (d["published"] if k != "published" else 0)
             for d in details if k in d]
        if v:
            out.append(f"{k} {statistics.median(v):.0f}")
    return ", ".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(SOURCE, "build", "py"))
    p.add_argument("--n", type=int, nargs="+", default=[2, 4, 8])
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--systems", nargs="+", default=["ringmaster", "torchrun"])
    p.add_argument("--samples", type=int, default=200000,
                   help="more than the run needs (it is killed at the end)")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--dim", type=int, default=32)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--commit-every", type=int, default=10)
    p.add_argument("--warm-steps", type=int, default=30)
    p.add_argument("--monitor-interval", type=float, default=5.0,
                   help="torchrun's (its default is 5 s)")
    p.add_argument("--standby-wait-s", type=float, default=8.0)
    p.add_argument("--planned", action="store_true",
                   help="also ringmaster's planned shrink and grow")
    p.add_argument("--gradients", choices=["auto", "torch", "shim"],
                   default="auto",
                   help="what carries ringmaster's gradient all-reduce "
                   "(RINGMASTER_GRADIENTS; auto: the process group)")
    p.add_argument("--out", default="")
    a = p.parse_args()
    os.environ["RINGMASTER_GRADIENTS"] = a.gradients  # the workers inherit it
    results = {"args": vars(a), "kill": {}, "planned": {}}
    systems = {"ringmaster": Ringmaster, "torchrun": Torchrun}
    for n in a.n:
        for name in a.systems:
            ms = [kill_trial(systems[name], a, n, t) for t in range(a.trials)]
            results["kill"].setdefault(name, {})[n] = ms
        if a.planned:
            results["planned"][n] = [planned_trial(a, n, t)
                                     for t in range(a.trials)]
    print("\nkill -9 of one of N workers -> survivors' next completed step "
          "(ms, median [min-max])")
    for n in a.n:
        row = [f"N={n}"]
        med = {}
        for name in a.systems:
            v = [x[0] for x in results["kill"][name][n]]
            med[name] = statistics.median(v)
            row.append(f"{name} {med[name]:.0f} [{min(v):.0f}-{max(v):.0f}]")
        if "ringmaster" in med and "torchrun" in med:
            row.append(f"ratio {med['torchrun'] / med['ringmaster']:.1f}x")
        print("  ".join(row))
    for n, v in results["planned"].items():
        sh = [x[0] for x in v]
        gr = [x[1] for x in v]
        print(f"N={n} ringmaster planned shrink {statistics.median(sh):.0f} "
              f"[{min(sh):.0f}-{max(sh):.0f}] ms, grow "
              f"{statistics.median(gr):.0f} [{min(gr):.0f}-{max(gr):.0f}] ms")
    print("\nringmaster re-formation phases (ms after the trigger; median):")
    for n in a.n:
        details = [x[1] for x in results["kill"].get("ringmaster", {}).get(n, [])
                   if x[1]]
        print(f"N={n} kill -9: {median_detail(details)}")
        if n in results["planned"]:
            v = results["planned"][n]
            print(f"N={n} shrink:  {median_detail([x[2] for x in v if x[2]])}")
            print(f"N={n} grow:    {median_detail([x[3] for x in v if x[3]])}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
