#!/usr/bin/python3
"""What each of issue 23's criteria has to spare, per case and policy.

Reads the outputs of bench/default_policy_sweep.sh (OUT/CASE-POLICY/summary.json
and jobs.csv, with fifo-gang and las among the policies) and prints, for each
policy besides fifo-gang, sjf and las, and each contended case (one where
fifo-gang's and las's figures differ):
  - avg: LAS's average JCT minus the policy's, in seconds (>= 0: met) and as a
    share of LAS's;
  - p99: the jobs the nearest-rank p99 allows over FIFO gang's p99 (n -
    ceil(0.99 n)) minus the jobs over it (>= 0: met; one job more than
    allowed loses the criterion, whatever its JCT);
  - stops: half of LAS's preemptions minus the policy's (>= 0: met).
Then one line per policy: the criteria met, and those met by one job, one
stop or 0.5 % of the average or less (at the bar); then the margins summed
over the cases (the average's as shares of LAS's, the p99's in jobs, the
stops' as shares of half LAS's; in brackets the failing ones alone) and the
criteria lost and gained against the first policy named.

  bench/criteria_margins.py OUT "default V1 V2" [--cases "philly-d24 ..."]
"""
import argparse
import csv
import json
import math
import os
import sys


def load(out, case, policy):
    d = os.path.join(out, f"{case}-{policy}")
    try:
        s = json.load(open(os.path.join(d, "summary.json")))
    except OSError:
        return None
    jct = []
    with open(os.path.join(d, "jobs.csv")) as f:
        for row in csv.DictReader(f):
            if row["end_s"]:
                jct.append(float(row["jct_s"]))
    return {"avg": s["avg_jct_s"], "p99": s["p99_jct_s"], "stops": s["preemptions"], "jct": jct}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("policies")
    ap.add_argument("--cases", default="")
    a = ap.parse_args()
    policies = [p for p in a.policies.split() if p not in ("fifo-gang", "sjf", "las")]
    cases = a.cases.split() or sorted(
        {e[: -len("-fifo-gang")] for e in os.listdir(a.out) if e.endswith("-fifo-gang")})
    rows, totals = [], {p: [0, 0, []] for p in policies}  # met, counted, at the bar
    for c in cases:
        f, l = load(a.out, c, "fifo-gang"), load(a.out, c, "las")
        if not f or not l:
            continue
        if (f["avg"], f["p99"], f["stops"]) == (l["avg"], l["p99"], l["stops"]):
            continue  # decides nothing
        for p in policies:
            g = load(a.out, c, p)
            if not g:
                continue
            n = len(g["jct"])
            allowed = n - math.ceil(0.99 * n)
            over = sum(1 for x in g["jct"] if x > f["p99"])
            m_avg = l["avg"] - g["avg"]
            m_p99 = allowed - over
            m_stop = l["stops"] / 2 - g["stops"]
            met = [m_avg >= 0, m_p99 >= 0, m_stop >= 0]
            bar = [abs(m_avg) <= 0.005 * l["avg"], m_p99 in (0, -1), abs(m_stop) <= 1]
            t = totals[p]
            t[0] += sum(met)
            t[1] += 3
            t[2] += [f"{c} {k}{'' if m else '✗'}" for k, m, b in zip(("avg", "p99", "stops"), met, bar) if b]
            rows.append((c, p, m_avg, m_avg / l["avg"], m_p99, allowed, m_stop, met))
    print("| case | policy | avg: LAS's - it (s, share) | p99: jobs to spare over FIFO's (allowed) | stops: LAS/2 - it |")
    print("|---|---|---|---|---|")
    yn = lambda ok, s: s if ok else f"**{s}**"
    for c, p, ma, ra, mp, al, ms, met in rows:
        print(f"| {c} | {p} | {yn(met[0], f'{ma:+,.0f} ({ra:+.2%})')} | {yn(met[1], f'{mp:+d} ({al})')} | "
              f"{yn(met[2], f'{ms:+.1f}')} |")
    print()
    print("| policy | criteria met | at the bar (one job, one stop, 0.5 % of the average) |")
    print("|---|---|---|")
    for p, (m, n, bar) in totals.items():
        print(f"| {p} | {m} of {n} | {', '.join(bar) or 'none'} |")
    # Summed margins, and the criteria each policy loses and gains against
    # the first one named (the default, as a rule): over the cases each was
    # run on, the average's margins as shares of LAS's, the p99's in jobs,
    # the stops' as shares of LAS's half; "short" sums the failing ones only.
    if not rows:
        return
    ref = policies[0]
    met_of = {(c, p): met for c, p, *_, met in rows}
    print()
    print(f"| policy | cases | avg: sum of shares (short) | p99: sum of jobs to spare (short) | "
          f"stops: sum of shares of LAS/2 (short) | lost vs {ref} | gained |")
    print("|---|---|---|---|---|---|---|")
    for p in policies:
        mine = [r for r in rows if r[1] == p]
        sa = sum(r[3] for r in mine)
        sa_short = sum(min(r[3], 0) for r in mine)
        sp = sum(r[4] for r in mine)
        sp_short = sum(min(r[4], 0) for r in mine)
        half = {r[0]: r for r in mine}
        ss, ss_short = 0.0, 0.0
        for c, _, _, _, _, _, ms, _ in mine:
            lstops = load(a.out, c, "las")["stops"]
            share = ms / (lstops / 2) if lstops else 0.0
            ss += share
            ss_short += min(share, 0)
        lost, gained = [], []
        for c, _, *_, met in mine:
            base = met_of.get((c, ref))
            if base is None or p == ref:
                continue
            for k, m, b in zip(("avg", "p99", "stops"), met, base):
                if b and not m:
                    lost.append(f"{c} {k}")
                if m and not b:
                    gained.append(f"{c} {k}")
        print(f"| {p} | {len(mine)} | {sa:+.2%} ({sa_short:+.2%}) | {sp:+d} ({sp_short:+d}) | "
              f"{ss:+.2f} ({ss_short:+.2f}) | {', '.join(lost) or 'none'} | {', '.join(gained) or 'none'} |")


if __name__ == "__main__":
    sys.exit(main())
