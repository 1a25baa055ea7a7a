"""Helpers of the ringmaster.torch tests: a standalone coordinator (the
`ringmaster coordinator` binary), worker processes under `ringmaster shim
run --mode inprocess`, resize, and the single-process reference.

Every process gets a deadline (WORKER_MAX_S) and is killed (SIGKILL) when
the test ends, whatever happened. Torch is required: a test that cannot import it fails
and says how to install it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

try:
    import torch  # noqa: F401
    TORCH_ERROR = None
except ImportError as e:  # pragma: no cover - the failure path
    TORCH_ERROR = e


def require_torch(test):
    if TORCH_ERROR is not None:
        test.fail(f"these tests need PyTorch (Debian's python3-torch, "
                  f"installed by scripts/setup.sh) under {sys.executable}: "
                  f"{TORCH_ERROR}")


RINGMASTER = os.environ.get("RINGMASTER_BIN", "ringmaster")
SOURCE = os.environ.get("RINGMASTER_SOURCE_DIR",
                        os.path.join(os.path.dirname(__file__), "..", ".."))
TRAIN_MLP = os.path.join(SOURCE, "examples", "pytorch", "train_mlp.py")
# Every worker exits by itself after this long, and the coordinator 10 s
# later, even if the test that started them is killed (ctest's TIMEOUT is
# 120 s).
WORKER_MAX_S = 110


def _thread_sample(pid: int, tid: int):
    """(state letter, voluntary context switches, wait channel) of a thread,
    from /proc; None once it is gone."""
    d = f"/proc/{pid}/task/{tid}/"
    try:
        with open(d + "stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        with open(d + "status") as f:
            switches = next(int(line.split()[1]) for line in f
                            if line.startswith("voluntary_ctxt_switches:"))
        with open(d + "wchan") as f:
            wchan = f.read().strip()
    except (OSError, IndexError, StopIteration):
        return None
    return state, switches, wchan


def wait_until(predicate, timeout_s: float, poll_s: float = 0.005) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
    return True


class SleepWatch:
    """Whether a thread of `pid` has sat in one nanosleep (asleep, in a
    *nanosleep wait channel, without a context switch) for `quiet_s`: a
    delay longer than any the process sleeps in its loop."""

    def __init__(self, pid: int, quiet_s: float):
        self.pid, self.quiet_s, self.seen = pid, quiet_s, {}

    def __call__(self) -> bool:
        now = time.monotonic()
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{self.pid}/task")]
        except OSError:
            return False
        found = False
        for tid in tids:
            s = _thread_sample(self.pid, tid)
            asleep = s is not None and s[0] == "S" and "nanosleep" in s[2]
            last = self.seen.get(tid)
            if not asleep or last is None or last[0] != s[1]:
                self.seen[tid] = (s[1] if asleep else None, now)
            elif now - last[1] >= self.quiet_s:
                found = True
        return found


class NoSleepWatch:
    """Whether the main thread of each of `pids` has gone `quiet_s` without
    being seen in a nanosleep (the training loop's step delay), asleep in
    another wait (an all-reduce waiting in slices) when last seen."""

    def __init__(self, pids, quiet_s: float):
        self.quiet_s = quiet_s
        self.since = {pid: None for pid in pids}

    def __call__(self) -> bool:
        now = time.monotonic()
        done = True
        for pid in self.since:
            s = _thread_sample(pid, pid)
            waiting = s is not None and "nanosleep" not in s[2]
            if not waiting:
                self.since[pid] = None
            elif self.since[pid] is None:
                self.since[pid] = now
            if (self.since[pid] is None or now - self.since[pid] < self.quiet_s
                    or s[0] != "S"):
                done = False
        return done


class Coordinator:
    """`ringmaster coordinator --listen 127.0.0.1:0`; address from its first
    line of output."""

    def __init__(self, heartbeat_timeout_ms: int = 5000):
        # Under `timeout`: gone even if this test is killed (ctest's limit).
        self.proc = subprocess.Popen(
            ["timeout", str(WORKER_MAX_S + 10), RINGMASTER, "coordinator",
             "--listen", "127.0.0.1:0",
             "--heartbeat-timeout-ms", str(heartbeat_timeout_ms)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            self.stop()
            raise RuntimeError(f"coordinator did not start: {line!r}")
        self.address = line.strip().rsplit(" ", 1)[-1]

    def resize(self, job: str, workers: int) -> int:
        out = subprocess.run(
            [RINGMASTER, "resize", job, "--workers", str(workers),
             "--coordinator", self.address],
            capture_output=True, text=True, timeout=20, check=True).stdout
        return int(out.strip().rsplit(" ", 1)[-1])  # "... at generation N"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()


class Job:
    """Workers of one job training examples/pytorch/train_mlp.py."""

    def __init__(self, test, coordinator: Coordinator, name: str,
                 train_args, workers: int = 4, env=None):
        self.test = test
        self.coordinator = coordinator
        self.name = name
        self.train_args = list(train_args)
        self.workers = workers
        self.dir = tempfile.mkdtemp(prefix=f"rm_torch_{name}_")
        self.out = os.path.join(self.dir, "result.json")
        self.progress = os.path.join(self.dir, "progress.json")
        self.env = dict(os.environ)
        self.env.update(env or {})
        self.procs = {}

    def spawn(self, worker: str, extra_args=(), join_when: str = "") -> str:
        """Starts `worker`. With join_when, it prepares (python, torch, the
        data) and waits to join until join(join_when) is called; returns
        that handle (a file)."""
        log = open(os.path.join(self.dir, f"{worker}.log"), "w")
        cmd = [RINGMASTER, "shim", "run", "--mode", "inprocess",
               "--coordinator", self.coordinator.address, "--job", self.name,
               "--worker", worker, "--workers", str(self.workers), "--",
               sys.executable, TRAIN_MLP, "--out", self.out,
               "--progress", self.progress,
               "--max-seconds", str(WORKER_MAX_S)] + self.train_args
        cmd += list(extra_args)
        if join_when:
            join_when = os.path.join(self.dir, f"{join_when}.join")
            cmd += ["--join-when", join_when]
        self.procs[worker] = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env,
            start_new_session=True)
        log.close()
        return join_when

    @staticmethod
    def join(handle: str, delay_s: float = 0.0) -> None:
        """Lets the workers spawned with this join_when handle join, at
        now + delay_s (plus each one's --join-offset-ms)."""
        tmp = f"{handle}.tmp"
        with open(tmp, "w") as f:
            f.write(f"{time.time() + delay_s:.6f}")
        os.replace(tmp, handle)

    def log(self, worker: str) -> str:
        with open(os.path.join(self.dir, f"{worker}.log")) as f:
            return f.read()

    def logs(self) -> str:
        return "\n".join(f"--- {w}\n{self.log(w)[-3000:]}" for w in self.procs)

    def read_progress(self):
        try:
            with open(self.progress) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def wait_for(self, predicate, timeout_s: float, what: str):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            p = self.read_progress()
            if p is not None and predicate(p):
                return p
            for w, proc in self.procs.items():
                if proc.poll() not in (None, 0):
                    self.test.fail(f"{w} exited with {proc.returncode} while "
                                   f"waiting for {what}\n{self.logs()}")
            time.sleep(0.02)
        self.test.fail(f"timed out waiting for {what}; progress "
                       f"{self.read_progress()}\n{self.logs()}")

    def kill9(self, worker: str, stop_first: bool = False) -> None:
        """SIGKILL to `worker`. With stop_first, it is frozen first (SIGSTOP),
        and killed once the other workers wait in the step's all-reduce:
        their training threads seen out of the step delay's nanosleep for
        0.3 s (several steps' delays), asleep in a wait."""
        proc = self.procs[worker]
        if stop_first:
            os.kill(proc.pid, signal.SIGSTOP)
            stopped = wait_until(
                lambda: (_thread_sample(proc.pid, proc.pid) or ("?",))[0]
                in ("T", "t"), 10)
            self.test.assertTrue(stopped, f"{worker} did not stop")
            others = [p.pid for w, p in self.procs.items()
                      if w != worker and p.poll() is None]
            self.test.assertTrue(
                wait_until(NoSleepWatch(others, 0.3), 20),
                f"the others never waited in an all-reduce with {worker} "
                f"frozen\n{self.logs()}")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        self.test.assertEqual(proc.returncode, -signal.SIGKILL)

    def expect_clean_exit(self, worker: str, timeout_s: float = 90) -> None:
        proc = self.procs[worker]
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.test.fail(f"{worker} did not finish in {timeout_s} s\n"
                           f"{self.logs()}")
        self.test.assertEqual(proc.returncode, 0,
                              f"{worker} exit status\n{self.logs()}")

    def result(self):
        with open(self.out) as f:
            return json.load(f)

    def cleanup(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
        if not os.environ.get("RINGMASTER_KEEP_TEST_DIRS"):
            shutil.rmtree(self.dir, ignore_errors=True)


def reference(train_args):
    """The single-process run over the same samples (in this process)."""
    import train_mlp
    with tempfile.TemporaryDirectory(prefix="rm_torch_ref_") as d:
        out = os.path.join(d, "ref.json")
        rc = train_mlp.main(["--reference", "--out", out] + list(train_args))
        assert rc == 0
        with open(out) as f:
            return json.load(f)


def relative_error(weights, ref_weights) -> float:
    w = torch.tensor(weights, dtype=torch.float64)
    r = torch.tensor(ref_weights, dtype=torch.float64)
    return float((w - r).norm() / r.norm())
