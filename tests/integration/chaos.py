#!/usr/bin/python3
"""A soak of the whole loop under a seeded schedule of faults (issue 25 §4).

`ringmaster serve --local-executor --state` with its coordinator on a fixed
address runs elastic and rigid jobs of examples/elastic_trainer and one
ringmaster.torch job (examples/pytorch/train_mlp.py), while a schedule drawn
from the seed injects faults:

  kill_worker   kill -9 of a random training process (the shim's survivors
                re-form; a rigid gang restarts whole)
  kill_serve    kill -9 of serve, and with it the coordinator; restarted on
                the same --state and the same addresses (the task processes
                are re-adopted, the shims re-join the new coordinator)
  policy        `ringmaster policy update` with another elastic cooldown
  urgent        a priority-100 job arrives (an elastic job shrinks for it)

An observer scans /proc every 0.2 s: each task process carries its node and
GPUs in its environment (RINGMASTER_NODE, RINGMASTER_GPUS, set by the local
executor), so two live tasks on one GPU of one node is a GPU held twice,
seen from the processes themselves, not from the engine's books.

At the end: every acknowledged job Completed; every trainer processed each
of its samples exactly once (its own all-reduced accounting) and ended at
the serial run's weights; no GPU held twice at any observed moment; serve
exits 0 on SIGTERM. The log of faults and of each job's generations is
printed.

Usage: chaos.py --ringmaster BIN --trainer BIN --source-dir DIR
                --python-stage DIR [--long] [--seed N] [--keep]
The seed is RINGMASTER_TEST_SEED when set, else drawn and printed; the same
seed gives the same schedule (times and choices; what a kill hits depends
on which processes run then).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

T0 = time.monotonic()


def now():
    return time.monotonic() - T0


def log(msg):
    print(f"[{now():7.2f}s] {msg}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Chaos:
    def __init__(self, a):
        self.a = a
        self.work = tempfile.mkdtemp(prefix="rm-chaos.")
        os.makedirs(f"{self.work}/state")
        os.makedirs(f"{self.work}/logs")
        self.grpc = f"127.0.0.1:{free_port()}"
        self.coord = f"127.0.0.1:{free_port()}"
        self.serve = None
        self.serve_lock = threading.Lock()
        self.faults = []       # (time, what)
        self.violations = []   # GPUs held twice
        self.snapshots = 0
        self.max_live = 0
        self.stop = threading.Event()
        self.acknowledged = []  # job names submitted with exit 0
        self.outputs = {}       # job -> (kind, output file, args)

    # --- serve ---------------------------------------------------------------
    def start_serve(self):
        env = dict(os.environ)
        env["PYTHONPATH"] = f"{self.a.python_stage}:{self.a.source_dir}/examples/pytorch"
        env["OMP_NUM_THREADS"] = "1"
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["RINGMASTER_CHAOS_RUN"] = self.work  # marks this run's processes for the observer
        out = open(f"{self.work}/serve.out", "w")
        err = open(f"{self.work}/serve.err", "a")
        self.serve = subprocess.Popen(
            [self.a.ringmaster, "serve", "--local-executor", "--no-bind",
             "--nodes", "3", "--gpus-per-node", "4", "--nodes-per-rack", "3",
             "--policy", f"{self.work}/policy.yaml", "--state", f"{self.work}/state",
             "--executor-logs", f"{self.work}/logs", "--grpc", self.grpc,
             "--coordinator", self.coord, "--http", "127.0.0.1:0", "--period-ms", "100",
             "--restart-grace-ms", "3000", "--cancel-grace-ms", "3000"],
            stdout=out, stderr=err, env=env, start_new_session=True)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.serve.poll() is not None:
                self.fail(f"serve exited {self.serve.returncode} at start")
            with open(f"{self.work}/serve.out") as f:
                if "admin API listening on" in f.read():
                    return
            time.sleep(0.05)
        self.fail("serve did not start in 20 s")

    def cli(self, *args, check=False, timeout=30):
        # RINGMASTER_SERVER, not --server: a submit's command follows "--".
        r = subprocess.run([self.a.ringmaster, *args], capture_output=True, text=True, timeout=timeout,
                           env=dict(os.environ, RINGMASTER_SERVER=self.grpc))
        if check and r.returncode != 0:
            self.fail(f"ringmaster {' '.join(args)} exited {r.returncode}: {r.stderr.strip()}")
        return r

    # --- jobs -----------------------------------------------------------------
    def trainer_args(self, samples, epochs, seed):
        return ["--samples", str(samples), "--epochs", str(epochs), "--batch", "32",
                "--commit-every", "4", "--seed", str(seed), "--step-delay-ms", "40"]

    def submit_trainer(self, name, replicas, elastic=None, priority=0, samples=2048, epochs=4, seed=1):
        out = f"{self.work}/{name}.json"
        args = self.trainer_args(samples, epochs, seed)
        cmd = ["submit", "--name", name, "--replicas", str(replicas), "--gpus", "1"]
        if elastic:
            cmd += ["--elastic", f"{elastic[0]}:{elastic[1]}"]
        if priority:
            cmd += ["--priority", str(priority)]
        cmd += ["--", self.a.trainer, *args, "--out", out]
        self.submit(name, cmd, ("trainer", out, args))

    def submit_torch(self, name, replicas, elastic):
        out = f"{self.work}/{name}.json"
        args = ["--samples", "1024", "--epochs", str(8 * self.scale), "--batch", "32", "--dim", "16",
                "--hidden", "32", "--dtype", "float64", "--commit-every", "4", "--check",
                "--step-delay-ms", "40"]
        cmd = ["submit", "--name", name, "--replicas", str(replicas), "--gpus", "1",
               "--elastic", f"{elastic[0]}:{elastic[1]}", "--", "/usr/bin/python3",
               f"{self.a.source_dir}/examples/pytorch/train_mlp.py", *args, "--out", out]
        self.submit(name, cmd, ("torch", out, args))

    def submit(self, name, cmd, output):
        for _ in range(50):  # serve may be restarting
            r = self.cli(*cmd)
            if r.returncode == 0:
                self.acknowledged.append(name)
                self.outputs[name] = output
                log(f"submitted {name}")
                return
            time.sleep(0.2)
        self.fail(f"submit {name} never acknowledged: {r.stderr.strip()}")

    # --- the observer ---------------------------------------------------------
    def observe(self):
        while not self.stop.is_set():
            held = {}  # (node, gpu) -> {task}
            live = 0
            for _, _, kv in self.run_processes():
                task = kv.get(b"RINGMASTER_TASK")
                if task is None:
                    continue
                live += 1
                node = kv.get(b"RINGMASTER_NODE", b"?").decode()
                for g in kv.get(b"RINGMASTER_GPUS", b"").decode().split(","):
                    if g:
                        held.setdefault((node, g), set()).add(task.decode())
            for where, tasks in held.items():
                if len(tasks) > 1:
                    self.violations.append((now(), where, sorted(tasks)))
            self.snapshots += 1
            self.max_live = max(self.max_live, live)
            self.stop.wait(0.2)

    def run_processes(self):
        """(pid, argv, environment) of this run's live processes (serve's
        environment marks them; zombies left out)."""
        mark = self.work.encode()
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    env = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)
                if env.get(b"RINGMASTER_CHAOS_RUN") != mark:
                    continue
                with open(f"/proc/{pid}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().split(b"\0")
            except OSError:
                continue
            if state not in ("Z", "X"):
                yield int(pid), cmd, env

    def training_processes(self):
        """(task, pid) of the live training processes (not their supervisors)."""
        found = []
        for pid, cmd, env in self.run_processes():
            exe = os.path.basename(cmd[0].decode(errors="replace")) if cmd and cmd[0] else ""
            if exe == "elastic_trainer" or any(c.endswith(b"train_mlp.py") for c in cmd):
                found.append((env.get(b"RINGMASTER_TASK", b"?").decode(), pid))
        return sorted(found)

    # --- faults ---------------------------------------------------------------
    def fault(self, what, rng):
        if what == "kill_worker":
            procs = self.training_processes()
            if not procs:
                self.faults.append((now(), "kill -9 worker: none running"))
                return
            task, pid = rng.choice(procs)
            try:
                os.kill(pid, signal.SIGKILL)
                self.faults.append((now(), f"kill -9 worker {task} (pid {pid})"))
            except ProcessLookupError:
                self.faults.append((now(), f"kill -9 worker {task}: already gone"))
        elif what == "kill_serve":
            self.serve.send_signal(signal.SIGKILL)
            self.serve.wait()
            down = rng.uniform(0.3, 1.5)
            self.faults.append((now(), f"kill -9 serve (and its coordinator); down {down:.1f} s"))
            time.sleep(down)
            self.start_serve()
            self.faults.append((now(), "serve restarted on the same state and addresses"))
        elif what == "policy":
            self.policy_flip = 1 - self.policy_flip
            path = f"{self.work}/policy{self.policy_flip}.yaml"
            for _ in range(50):
                r = self.cli("policy", "update", path)
                if r.returncode == 0:
                    break
                time.sleep(0.2)
            self.faults.append((now(), f"policy update (elastic cooldown {2 + 3 * self.policy_flip} s): "
                                       f"exit {r.returncode}"))
        elif what == "urgent":
            self.urgent += 1
            name = f"urgent-{self.urgent}"
            self.submit_trainer(name, 3, priority=100, samples=512, epochs=2, seed=7)
            self.faults.append((now(), f"{name} arrives (priority 100, 3 GPUs)"))
        log(self.faults[-1][1])

    # --- the run --------------------------------------------------------------
    def run(self):
        a = self.a
        seed = a.seed
        log(f"chaos seed {seed} (rerun with RINGMASTER_TEST_SEED={seed}); work {self.work}")
        rng = random.Random(seed)
        self.scale = 3 if a.long else 1
        base = open(f"{a.source_dir}/examples/local-elastic/policy.yaml").read()
        if "cooldown: 2" not in base:
            self.fail("examples/local-elastic/policy.yaml no longer has 'cooldown: 2'")
        shutil.copy(f"{a.source_dir}/examples/local-elastic/policy.yaml", f"{self.work}/policy.yaml")
        with open(f"{self.work}/policy0.yaml", "w") as f:
            f.write(base)
        with open(f"{self.work}/policy1.yaml", "w") as f:
            f.write(base.replace("cooldown: 2", "cooldown: 5"))
        self.policy_flip = 0
        self.urgent = 0
        self.start_serve()
        observer = threading.Thread(target=self.observe, daemon=True)
        observer.start()
        # 11 of the 12 GPUs: an urgent job of 3 needs a shrink.
        # About 40 s of training each (the fault window is 30 s), longer
        # with the faults' re-formations and restarts.
        self.submit_trainer("elastic-a", 4, elastic=(2, 4), epochs=12 * self.scale, seed=1)
        self.submit_trainer("elastic-b", 3, elastic=(1, 3), epochs=12 * self.scale, seed=2)
        self.submit_trainer("rigid", 2, samples=1024, epochs=24 * self.scale, seed=3)
        self.submit_torch("torch", 2, elastic=(1, 2))
        kinds = (["kill_worker"] * 3 + ["kill_serve", "policy", "urgent"]) * self.scale
        window = (4.0, 4.0 + 30.0 * self.scale)
        schedule = sorted((rng.uniform(*window), k) for k in kinds)
        plan = [(round(t, 1), k) for t, k in schedule]
        log(f"schedule: {plan}")
        for t, kind in schedule:
            if now() < t:
                time.sleep(t - now())
            self.fault(kind, rng)
        # Everything acknowledged ends.
        deadline = time.monotonic() + (150 if not a.long else 600)
        phases = {}
        while time.monotonic() < deadline:
            r = self.cli("jobs", "--json")
            if r.returncode == 0:
                phases = {j["name"]: j["phase"] for j in json.loads(r.stdout).get("jobs", [])}
                if all(phases.get(n) in ("Completed", "Failed", "Aborted") for n in self.acknowledged):
                    break
            time.sleep(0.5)
        self.stop.set()
        observer.join()
        self.serve.send_signal(signal.SIGTERM)
        try:
            serve_rc = self.serve.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.serve.kill()
            serve_rc = "timeout"
        return self.check(phases, serve_rc)

    def reference(self, kind, args):
        key = (kind, tuple(args))
        cache = self.__dict__.setdefault("_refs", {})
        if key not in cache:
            out = f"{self.work}/reference-{len(cache)}.json"
            if kind == "trainer":
                # The same run without the shim, --step-delay-ms and its value left out.
                cmd = [self.a.trainer, "--reference"]
                skip = False
                for x in args:
                    if skip:
                        skip = False
                        continue
                    if x == "--step-delay-ms":
                        skip = True
                        continue
                    cmd.append(x)
                cmd += ["--out", out]
                env = None
            else:
                cmd = ["/usr/bin/python3", f"{self.a.source_dir}/examples/pytorch/train_mlp.py", "--reference",
                       *[x for x in args if x not in ("--check",)], "--out", out]
                env = dict(os.environ, PYTHONPATH=f"{self.a.python_stage}:{self.a.source_dir}/examples/pytorch",
                           OMP_NUM_THREADS="1")
            subprocess.run(cmd, check=True, capture_output=True, env=env)
            cache[key] = json.load(open(out))
        return cache[key]

    def check(self, phases, serve_rc):
        bad = []

        def ok(cond, what):
            print(("ok   " if cond else "FAIL ") + what, flush=True)
            if not cond:
                bad.append(what)

        print("--- faults")
        for t, what in self.faults:
            print(f"  {t:7.2f}s  {what}")
        print("--- generations (serve's log, every run)")
        err = open(f"{self.work}/serve.err", errors="replace").read()
        gens = {}
        for line in err.splitlines():
            if 'msg="membership published"' not in line:
                continue
            job = re.search(r" job=(\S+)", line)
            reason = re.search(r"reason=(\S+)", line)
            members = re.search(r"members=(\S*)", line)
            if job and reason and members:
                n = len([m for m in members.group(1).strip('"').split(",") if m])
                gens.setdefault(job.group(1), []).append(f"{reason.group(1).replace('REASON_', '').lower()}({n})")
        for job in sorted(gens):
            print(f"  {job}: {' -> '.join(gens[job])}")
        print("--- checks")
        kills = sum(1 for _, f in self.faults if f.startswith("kill -9 worker ") and "(pid" in f)
        restarts = sum(1 for _, f in self.faults if f.startswith("serve restarted"))
        ok(kills >= 1 and restarts >= 1, f"{len(self.faults)} faults: {kills} workers and {restarts} serve killed -9")
        for name in self.acknowledged:
            ok(phases.get(name) == "Completed", f"{name}: {phases.get(name, 'not listed')}")
        for name, (kind, out, args) in sorted(self.outputs.items()):
            if not os.path.exists(out):
                ok(False, f"{name}: no result file (rank 0 never finished)")
                continue
            r = json.load(open(out))
            ref = self.reference(kind, args)
            dup, skipped = r.get("duplicate_samples", -1), r.get("skipped_samples", -1)
            inconsistent = r.get("inconsistent_steps", 0)
            if kind == "trainer":
                complete = r.get("samples_processed") == r.get("expected_samples")
                detail = f"{r.get('samples_processed')} of {r.get('expected_samples')} samples"
            else:
                complete = len(r.get("history", [])) == len(ref.get("history", []))
                detail = f"{len(r.get('history', []))} of {len(ref.get('history', []))} steps"
            ok(complete and dup == 0 and skipped == 0 and inconsistent == 0,
               f"{name}: {detail}, {dup} duplicated, {skipped} skipped, {inconsistent} inconsistent steps")
            w, rw = r.get("weights", []), ref.get("weights", [])
            rel = max((abs(x - y) / max(1e-12, abs(y)) for x, y in zip(w, rw)), default=float("inf"))
            tol = 1e-6 if kind == "trainer" else 1e-5
            ok(len(w) == len(rw) and rel < tol, f"{name}: final weights = the serial run's (max relative difference {rel:.1e})")
        ok(self.snapshots > 20 and self.max_live > 0,
           f"observer: {self.snapshots} snapshots of /proc, up to {self.max_live} live task processes")
        ok(not self.violations, f"no GPU held by two tasks at any observed moment ({len(self.violations)} seen"
           + (f"; first: {self.violations[0]}" if self.violations else "") + ")")
        ok(serve_rc == 0, f"serve exited {serve_rc} on SIGTERM")
        if bad:
            print(f"FAIL: {len(bad)} checks failed (seed {self.a.seed}); work directory kept: {self.work}")
            print("--- serve log (last 40 lines)")
            print("\n".join(err.splitlines()[-40:]))
            return 1
        print(f"PASS: chaos seed {self.a.seed}: {len(self.faults)} faults, {len(self.acknowledged)} jobs completed, "
              f"no sample lost or repeated, no GPU held twice")
        if not self.a.keep:
            shutil.rmtree(self.work, ignore_errors=True)
        return 0

    def fail(self, why):
        print(f"FAIL: {why} (seed {self.a.seed}); work directory kept: {self.work}", flush=True)
        try:
            print(open(f"{self.work}/serve.err", errors="replace").read()[-4000:])
        except OSError:
            pass
        self.stop.set()
        if self.serve and self.serve.poll() is None:
            self.serve.kill()
        sys.exit(1)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ringmaster", required=True)
    p.add_argument("--trainer", required=True)
    p.add_argument("--source-dir", required=True)
    p.add_argument("--python-stage", required=True)
    p.add_argument("--long", action="store_true", help="three times the faults and the training")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    a = p.parse_args()
    if a.seed is None:
        env = os.environ.get("RINGMASTER_TEST_SEED")
        a.seed = int(env) if env else random.SystemRandom().randrange(1, 1 << 31)
    c = Chaos(a)
    try:
        rc = c.run()
    finally:
        # Whatever happened, no task process outlives the test.
        c.stop.set()
        if c.serve and c.serve.poll() is None:
            c.serve.kill()
        for _, pid in c.training_processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    sys.exit(rc)


if __name__ == "__main__":
    main()
