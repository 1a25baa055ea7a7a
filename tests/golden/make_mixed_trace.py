#!/usr/bin/python3
"""Writes mixed_philly.csv: a native trace (docs/TRACE_FORMAT.md) derived from
the bundled Philly trace, so that the golden replays also cover what Philly
alone does not: elastic gangs, two queues and two priorities.

The 400 Philly jobs submitted first from day 40 of the trace on (by submit
time, ties by row), with their traced GPUs and durations (capped at 6 h so the
replay stays short). Job k (0-based): queue `research` when k % 3 != 2, else
`product`; priority 5 when k % 7 == 0, else 0; job k is elastic when
k % 4 == 0: max(2, min(its GPUs, 16)) tasks of 1 GPU, min_tasks half that,
max_tasks twice that (at most 16). Walltime = duration, checkpoint every 600 s.

Run once; the output is committed (tests/golden/README.md).
"""
import csv
import datetime
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
src = os.path.join(here, "..", "..", "data", "traces", "philly", "philly.csv")
rows = []
with open(src, newline="") as f:
    for i, r in enumerate(csv.DictReader(f)):
        if not r.get("timestamp"):
            continue
        t = datetime.datetime.strptime(r["timestamp"], "%Y-%m-%d %H:%M:%S")
        rows.append((t, i, float(r["duration"]), int(r["num_gpus"])))
start = min(t for t, *_ in rows)
day40 = start + datetime.timedelta(days=40)
picked = sorted(x for x in rows if x[0] >= day40)[:400]
out = os.path.join(here, "mixed_philly.csv")
with open(out, "w", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["job_id", "submit_time_s", "duration_s", "queue", "priority", "tasks", "gpus_per_task",
                "min_tasks", "max_tasks", "walltime_s", "checkpoint_interval_s"])
    t0 = picked[0][0]
    for k, (t, row, dur, gpus) in enumerate(picked):
        dur = max(1, min(int(dur), 6 * 3600))
        queue = "product" if k % 3 == 2 else "research"
        prio = 5 if k % 7 == 0 else 0
        if k % 4 == 0:
            tasks = max(2, min(gpus, 16))
            per, lo, hi = 1, tasks // 2, min(16, 2 * tasks)
        else:
            per = min(gpus, 8)
            tasks, lo, hi = gpus // per, "", ""
        w.writerow([f"mixed-{row}", int((t - t0).total_seconds()), dur, queue, prio, tasks, per, lo, hi, dur, 600])
print(f"wrote {out}: {len(picked)} jobs", file=sys.stderr)
