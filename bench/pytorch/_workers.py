"""Shared by the paired benchmarks (ab_overhead.py, component_costs.py):
start N copies of a script as workers under `ringmaster shim run`, wait for
them, stop the coordinator, and print the tail of each failed worker's log."""
from __future__ import annotations

import os
import subprocess
import sys


def run_workers(rm, addr, job, n, argv, env, logdir, coord) -> bool:
    """Runs `argv` as workers w0..w{n-1} of `job`; True when all exit 0."""
    procs = []
    for i in range(n):
        with open(os.path.join(logdir, f"w{i}.log"), "w") as log:
            procs.append(subprocess.Popen(
                [rm, "shim", "run", "--mode", "inprocess", "--coordinator", addr,
                 "--job", job, "--worker", f"w{i}", "--workers", str(n), "--"] + argv,
                stdout=log, stderr=subprocess.STDOUT, env=env))
    rc = [p.wait() for p in procs]
    coord.terminate()
    coord.wait()
    if not any(rc):
        return True
    for i in range(n):
        with open(os.path.join(logdir, f"w{i}.log")) as f:
            sys.stderr.write(f"--- w{i}\n{f.read()[-2000:]}")
    return False
