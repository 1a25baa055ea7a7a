#!/usr/bin/python3
"""JCT CDF plots for the Pollux sweep (docs/BENCHMARKS.md, "Pollux workloads").

Writes one self-contained SVG per load, OUT_DIR/pollux-jct-cdf-LOAD.svg: the
empirical CDF of per-job JCT pooled over the workloads, one line each for
published Tiresias+TunedJobs, every ringmaster policy of the sweep, and
published Pollux. Standard library only (Debian's /usr/bin/python3, no
matplotlib), and byte-identical output for the same inputs.

  bench/jct_cdf.py SWEEP_DIR OUT_DIR [--policies "tiresias-tuned default"]
      [--loads "0.5 1.0 1.5 2.0"] [--workloads "1 2 3 4 5 6 7 8"] [--peer DIR]
  bench/jct_cdf.py --cases "philly-d24 alibaba-default" SWEEP_DIR OUT_DIR
      [--policies "fifo-gang sjf las default"] [--prefix default-policy]
  bench/jct_cdf.py --self-test

With --cases (bench/default_policy_sweep.sh's PLOTS=DIR): one SVG per case,
OUT_DIR/PREFIX-CASE.svg, one line per policy, from SWEEP_DIR/CASE-POLICY/
jobs.csv, on the case's own x range; no published lines.

SWEEP_DIR is bench/pollux_sweep.sh's OUT: SWEEP_DIR/POLICY-LOAD-W/jobs.csv
(column jct_s, empty for a job that never finished). The published per-job
JCTs are PEER/{tiresias,pollux}-LOAD/summary.json, key "jcts":
{"workload-N": {job name: JCT s}}. A job that did not finish counts in the
denominator, so its line ends below 1.
"""
import argparse
import collections
import csv
import json
import math
import os
import sys
import tempfile
import xml.etree.ElementTree as ET
from xml.sax.saxutils import escape

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_PEER = os.path.join(REPO, "data", "peer-results", "pollux-osdi21", "results-jobload")

# Canvas and plot area in px (the plot area is where the lines go).
WIDTH, HEIGHT = 640, 400
LEFT, RIGHT, TOP, BOTTOM = 58, 28, 34, 46
PLOT_W = WIDTH - LEFT - RIGHT
PLOT_H = HEIGHT - TOP - BOTTOM

# Okabe-Ito colours (safe for colour-blind readers) and one dash pattern per
# series, so the lines stay apart when printed in grey.
PUBLISHED_STYLE = {
    "tiresias": ("Tiresias+TunedJobs (published)", "#E69F00", "7 4", 1.8),
    "pollux": ("Pollux (published)", "#009E73", "9 3 2 3", 1.8),
}
POLICY_STYLES = {
    "tiresias-tuned": ("#0072B2", "2 2", 1.8),
    "default": ("#D55E00", None, 2.2),
    "fifo-gang": ("#000000", "1 3", 1.8),
    "sjf": ("#009E73", "9 3 2 3", 1.8),
    "las": ("#0072B2", "2 2", 1.8),
}
OTHER_STYLES = [("#CC79A7", "4 2 1 2", 1.8), ("#000000", "1 3", 1.8), ("#56B4E9", "12 3", 1.8)]


class InputError(Exception):
    """A missing or malformed input; main() prints it and exits 2."""


def ecdf(finished, total):
    """[(jct, fraction of `total` jobs with JCT <= jct)] at each distinct JCT.

    `total` counts unfinished jobs too, so the last fraction is below 1 when
    some did not finish."""
    if total < len(finished):
        raise ValueError("total %d < %d finished jobs" % (total, len(finished)))
    points = []
    count = 0
    for value in sorted(finished):
        count += 1
        if points and points[-1][0] == value:
            points[-1] = (value, count / total)
        else:
            points.append((value, count / total))
    return points


def staircase(points):
    """The CDF's step line: up at each JCT, flat until the next one."""
    line = []
    below = 0.0
    for value, fraction in points:
        line.append((value, below))
        line.append((value, fraction))
        below = fraction
    return line


def nice_floor(x):
    """Largest 1, 2 or 5 x 10^k <= x."""
    exp = math.floor(math.log10(x))
    for mult in (5, 2, 1):
        if mult * 10**exp <= x:
            return mult * 10**exp
    return 10**exp


def nice_ceil(x):
    """Smallest 1, 2 or 5 x 10^k >= x."""
    exp = math.floor(math.log10(x))
    for mult in (1, 2, 5, 10):
        if mult * 10**exp >= x:
            return mult * 10**exp
    return 10 ** (exp + 1)


class Axes:
    """Log-scale x (JCT s) and linear y (fraction) to pixels."""

    def __init__(self, x_lo, x_hi):
        self.log_lo, self.log_hi = math.log10(x_lo), math.log10(x_hi)
        self.x_lo, self.x_hi = x_lo, x_hi

    def px(self, jct):
        # A JCT of 0 (not seen in practice) sits on the left edge.
        return LEFT + (math.log10(max(jct, self.x_lo)) - self.log_lo) / (self.log_hi - self.log_lo) * PLOT_W

    def py(self, fraction):
        return TOP + (1.0 - fraction) * PLOT_H


def polyline_points(line, axes, tolerance=0.2):
    """Pixel points of a step line, rounded to 0.1 px, without the points
    that do not show: repeats, the middle of a straight horizontal or
    vertical run, and (Douglas-Peucker) any corner within `tolerance` px of
    the simplified line. With thousands of jobs most steps are a fraction of
    a pixel; this keeps each SVG to tens of kB."""
    pts = []
    for value, fraction in line:
        p = (round(axes.px(value), 1), round(axes.py(fraction), 1))
        if pts and pts[-1] == p:
            continue
        if len(pts) >= 2 and (pts[-2][0] == pts[-1][0] == p[0] or pts[-2][1] == pts[-1][1] == p[1]):
            pts[-1] = p
            continue
        pts.append(p)
    if len(pts) < 3:
        return pts
    keep = [False] * len(pts)
    keep[0] = keep[-1] = True
    spans = [(0, len(pts) - 1)]  # a stack, not recursion: thousands of points
    while spans:
        first, last = spans.pop()
        (x1, y1), (x2, y2) = pts[first], pts[last]
        length = math.hypot(x2 - x1, y2 - y1)
        worst, worst_at = -1.0, None
        for i in range(first + 1, last):
            x, y = pts[i]
            d = abs((x2 - x1) * (y1 - y) - (x1 - x) * (y2 - y1)) / length
            if d > worst:
                worst, worst_at = d, i
        if worst_at is not None and worst > tolerance:
            keep[worst_at] = True
            spans.append((first, worst_at))
            spans.append((worst_at, last))
    return [p for p, k in zip(pts, keep) if k]


def fmt(v):
    return "%.1f" % v


def thousands(v):
    return "{:,}".format(int(round(v)))


def tick_label(v):
    """50, 500, 1k, 20k, 200k: short enough for the 2 and 5 ticks."""
    return "%gk" % (v / 1000) if v >= 1000 else "%g" % v


def load_json(path):
    if not os.path.isfile(path):
        raise InputError("no file %s" % path)
    try:
        with open(path) as f:
            return json.load(f)
    except ValueError as e:
        raise InputError("%s: not JSON: %s" % (path, e))


def published_jcts(peer, system, load, workloads):
    """(finished JCTs, job count) pooled over the workloads of a published run."""
    path = os.path.join(peer, "%s-%s" % (system, load), "summary.json")
    jcts = load_json(path).get("jcts")
    if not isinstance(jcts, dict):
        raise InputError("%s: no \"jcts\" object" % path)
    values = []
    for w in workloads:
        per_job = jcts.get("workload-%s" % w)
        if not isinstance(per_job, dict):
            raise InputError("%s: no jcts[\"workload-%s\"]" % (path, w))
        values.extend(float(v) for v in per_job.values())
    return values, len(values)


def run_jcts(path, hint):
    """(finished JCTs, job count) of one run's jobs.csv; `hint` says how to make it."""
    if not os.path.isfile(path):
        raise InputError("no file %s (%s)" % (path, hint))
    values, total = [], 0
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if "jct_s" not in (reader.fieldnames or []):
            raise InputError("%s: no jct_s column" % path)
        for row in reader:
            total += 1
            if row["jct_s"]:
                values.append(float(row["jct_s"]))
    return values, total


def sweep_jcts(sweep, policy, load, workloads):
    """(finished JCTs, job count) pooled over the workloads of a sweep's runs."""
    values, total = [], 0
    for w in workloads:
        v, n = run_jcts(os.path.join(sweep, "%s-%s-%s" % (policy, load, w), "jobs.csv"),
                        "run bench/pollux_sweep.sh with this OUT, POLICIES and LOADS")
        values += v
        total += n
    return values, total


Series = collections.namedtuple("Series", "label colour dash width published finished total")


def series_for_load(sweep, peer, policies, load, workloads):
    """The lines of one plot in the compare table's order: published
    Tiresias, ringmaster's policies, published Pollux."""
    def published(system):
        label, colour, dash, width = PUBLISHED_STYLE[system]
        return Series(label, colour, dash, width, True, *published_jcts(peer, system, load, workloads))

    series = [published("tiresias")]
    others = iter(OTHER_STYLES)
    for policy in policies:
        colour, dash, width = POLICY_STYLES.get(policy) or next(others, ("#777777", "3 3", 1.8))
        series.append(Series("ringmaster " + policy, colour, dash, width, False,
                             *sweep_jcts(sweep, policy, load, workloads)))
    series.append(published("pollux"))
    return series


def render_svg(title, series, axes):
    out = []
    add = out.append
    add('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
        'font-family="DejaVu Sans, Arial, Helvetica, sans-serif" font-size="11">' % (WIDTH, HEIGHT, WIDTH, HEIGHT))
    add('<rect width="%d" height="%d" fill="#ffffff"/>' % (WIDTH, HEIGHT))
    add('<text x="%d" y="20" text-anchor="middle" font-size="13" font-weight="bold">%s</text>'
        % (WIDTH // 2, escape(title)))

    # Grid and ticks: y every 0.1 (labels every 0.2), x at 1-2-5 per decade
    # (labels at the powers of ten, and at 2 and 5 where a decade is wide).
    bottom, right = TOP + PLOT_H, LEFT + PLOT_W
    for i in range(11):
        y = fmt(axes.py(i / 10))
        major = i % 2 == 0
        add('<line x1="%d" y1="%s" x2="%d" y2="%s" stroke="%s" stroke-width="1"/>'
            % (LEFT, y, right, y, "#d9d9d9" if major else "#f0f0f0"))
        if major:
            add('<text x="%d" y="%s" text-anchor="end" dy="0.35em">%.1f</text>' % (LEFT - 6, y, i / 10))
    decades = range(math.floor(axes.log_lo), math.ceil(axes.log_hi) + 1)
    wide = PLOT_W / (axes.log_hi - axes.log_lo) > 120
    for exp in decades:
        for mult in range(1, 10):
            v = mult * 10**exp
            if not axes.x_lo <= v <= axes.x_hi:
                continue
            x = fmt(axes.px(v))
            major = mult == 1
            add('<line x1="%s" y1="%d" x2="%s" y2="%d" stroke="%s" stroke-width="1"/>'
                % (x, TOP, x, bottom, "#d9d9d9" if major else "#f0f0f0"))
            add('<line x1="%s" y1="%d" x2="%s" y2="%d" stroke="#000000" stroke-width="1"/>'
                % (x, bottom, x, bottom + (5 if major else 3)))
            if major or (wide and mult in (2, 5)):
                add('<text x="%s" y="%d" text-anchor="middle"%s>%s</text>'
                    % (x, bottom + 16, "" if major else ' fill="#555555"', tick_label(v)))
    add('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#000000" stroke-width="1"/>'
        % (LEFT, TOP, PLOT_W, PLOT_H))
    add('<text x="%d" y="%d" text-anchor="middle">job completion time (s, log scale)</text>'
        % (LEFT + PLOT_W // 2, HEIGHT - 8))
    add('<text transform="translate(14 %d) rotate(-90)" text-anchor="middle">fraction of jobs with JCT &#8804; x</text>'
        % (TOP + PLOT_H // 2))

    # The lines, clipped to the plot area (a partial CDF runs flat to the
    # right edge); the published ones first, so ringmaster's lie on top.
    add('<clipPath id="plot"><rect x="%d" y="%d" width="%d" height="%d"/></clipPath>' % (LEFT, TOP, PLOT_W, PLOT_H))
    add('<g clip-path="url(#plot)" fill="none" stroke-linejoin="round">')
    for s in sorted(series, key=lambda s: not s.published):
        line = staircase(ecdf(s.finished, s.total))
        if line:
            line.append((axes.x_hi, line[-1][1]))
        pts = " ".join("%s,%s" % (fmt(x), fmt(y)) for x, y in polyline_points(line, axes))
        add('<polyline points="%s" stroke="%s" stroke-width="%s"%s/>'
            % (pts, s.colour, s.width, ' stroke-dasharray="%s"' % s.dash if s.dash else ""))
    add("</g>")

    # Legend in the lower right, where every CDF is already near 1.
    rows = []
    for s in series:
        text = "%s, mean %s s" % (s.label, thousands(sum(s.finished) / len(s.finished))) if s.finished else s.label
        if s.total > len(s.finished):
            text += " (%d unfinished)" % (s.total - len(s.finished))
        rows.append((text, s.colour, s.dash, s.width))
    legend_w = 36 + 6.2 * max(len(r[0]) for r in rows)
    legend_h = 8 + 16 * len(rows)
    lx, ly = right - 8 - legend_w, bottom - 8 - legend_h
    add('<rect x="%s" y="%s" width="%s" height="%d" fill="#ffffff" fill-opacity="0.92" stroke="#999999"/>'
        % (fmt(lx), fmt(ly), fmt(legend_w), legend_h))
    for i, (text, colour, dash, width) in enumerate(rows):
        y = ly + 12 + 16 * i
        add('<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"%s/>'
            % (fmt(lx + 6), fmt(y), fmt(lx + 30), fmt(y), colour, width,
               ' stroke-dasharray="%s"' % dash if dash else ""))
        add('<text x="%s" y="%s" dy="0.35em">%s</text>' % (fmt(lx + 36), fmt(y), escape(text)))
    add("</svg>")
    return "\n".join(out) + "\n"


def write_plots(sweep, out_dir, policies, loads, workloads, peer):
    if not os.path.isdir(sweep):
        raise InputError("no sweep folder %s" % sweep)
    if not os.path.isdir(peer):
        raise InputError("no published-results folder %s" % peer)
    per_load = {load: series_for_load(sweep, peer, policies, load, workloads) for load in loads}
    # One x range for every load, so the plots compare side by side.
    values = [v for series in per_load.values() for s in series for v in s.finished if v > 0]
    if not values:
        raise InputError("no finished job in %s" % sweep)
    axes = Axes(nice_floor(min(values)), nice_ceil(max(values)))
    os.makedirs(out_dir, exist_ok=True)
    written = []
    for load in loads:
        series = per_load[load]
        path = os.path.join(out_dir, "pollux-jct-cdf-%s.svg" % load)
        with open(path, "w", newline="\n") as f:
            title = ("JCT CDF, Pollux workloads at load %s: %d workloads, %s jobs, 16 nodes x 4 GPUs"
                     % (load, len(workloads), thousands(series[0].total)))
            f.write(render_svg(title, series, axes))
        written.append(path)
    return written


def case_jcts(sweep, case, policy):
    """(finished JCTs, job count) of one run of bench/default_policy_sweep.sh."""
    return run_jcts(os.path.join(sweep, "%s-%s" % (case, policy), "jobs.csv"),
                    "run bench/default_policy_sweep.sh with this OUT, CASES and POLICIES")


def write_case_plots(sweep, out_dir, policies, cases, prefix):
    """One SVG per case, OUT_DIR/PREFIX-CASE.svg, a line per policy."""
    if not os.path.isdir(sweep):
        raise InputError("no sweep folder %s" % sweep)
    os.makedirs(out_dir, exist_ok=True)
    written = []
    for case in cases:
        series = []
        others = iter(OTHER_STYLES)
        for policy in policies:
            colour, dash, width = POLICY_STYLES.get(policy) or next(others, ("#777777", "3 3", 1.8))
            label = policy + (" (walltime oracle)" if policy == "sjf" else "")
            series.append(Series(label, colour, dash, width, False, *case_jcts(sweep, case, policy)))
        values = [v for s in series for v in s.finished if v > 0]
        if not values:
            raise InputError("no finished job of %s in %s" % (case, sweep))
        axes = Axes(nice_floor(min(values)), nice_ceil(max(values)))
        title = "JCT CDF, %s: %s jobs" % (case, thousands(series[0].total))
        summary = os.path.join(sweep, "%s-%s" % (case, policies[0]), "summary.json")
        if os.path.isfile(summary) and isinstance(load_json(summary).get("gpus"), int):
            title += " on %s GPUs" % thousands(load_json(summary)["gpus"])
        path = os.path.join(out_dir, "%s-%s.svg" % (prefix, case))
        with open(path, "w", newline="\n") as f:
            f.write(render_svg(title, series, axes))
        written.append(path)
    return written


def self_test():
    """Checks the CDF against hand-computed points and a tiny end-to-end run;
    returns the number of failures."""
    failures = []

    def check(name, got, want):
        if got != want:
            failures.append("%s: got %r, want %r" % (name, got, want))

    # 4 finished jobs (two tie at 200 s) and one unfinished: 5 in all.
    check("ecdf", ecdf([400, 200, 100, 200], 5), [(100, 0.2), (200, 0.6), (400, 0.8)])
    check("staircase", staircase([(100, 0.2), (200, 0.6), (400, 0.8)]),
          [(100, 0.0), (100, 0.2), (200, 0.2), (200, 0.6), (400, 0.6), (400, 0.8)])
    check("ecdf empty", ecdf([], 3), [])
    check("nice_floor", [nice_floor(v) for v in (75.9, 100, 0.3, 19999)], [50, 100, 0.2, 10000])
    check("tick_label", [tick_label(v) for v in (50, 500, 1000, 20000, 200000)], ["50", "500", "1k", "20k", "200k"])
    check("nice_ceil", [nice_ceil(v) for v in (175806.8, 100, 101, 0.3)], [200000, 100, 200, 0.5])
    axes = Axes(10, 1000)
    check("px", [round(axes.px(v), 6) for v in (10, 100, 1000)],
          [LEFT, round(LEFT + PLOT_W / 2, 6), LEFT + PLOT_W])
    check("py", [axes.py(0), axes.py(1)], [TOP + PLOT_H, TOP])

    # End to end: 2 workloads, one policy with an unfinished job.
    with tempfile.TemporaryDirectory() as tmp:
        peer, sweep, out = (os.path.join(tmp, d) for d in ("peer", "sweep", "plots"))
        published = {"tiresias": {"workload-1": {"a": 100, "b": 1000}, "workload-2": {"c": 10000}},
                     "pollux": {"workload-1": {"a": 100, "b": 100}, "workload-2": {"c": 1000}}}
        for system, jcts in published.items():
            os.makedirs(os.path.join(peer, system + "-1.0"))
            with open(os.path.join(peer, system + "-1.0", "summary.json"), "w") as f:
                json.dump({"jcts": jcts}, f)
        for w, rows in (("1", ["a,100.000", "b,"]), ("2", ["c,1000.000"])):
            os.makedirs(os.path.join(sweep, "default-1.0-" + w))
            with open(os.path.join(sweep, "default-1.0-" + w, "jobs.csv"), "w") as f:
                f.write("job_id,jct_s\n" + "\n".join(rows) + "\n")
        first = write_plots(sweep, out, ["default"], ["1.0"], ["1", "2"], peer)
        with open(first[0], "rb") as f:
            svg = f.read()
        write_plots(sweep, out, ["default"], ["1.0"], ["1", "2"], peer)
        with open(first[0], "rb") as f:
            check("deterministic", f.read() == svg, True)
        root = ET.fromstring(svg)
        lines = root.findall(".//{http://www.w3.org/2000/svg}polyline")
        # Tiresias: steps at 100, 1000, 10000 (6 points) + the flat end at
        # the right edge (which is 10000: the same x) -> 6 points. Pollux:
        # 2/3 at 100, 1 at 1000 -> 4 points + flat end -> 5. default: 1/3 at
        # 100, 2/3 at 1000 -> 4 + flat end -> 5, ending at y of 2/3.
        check("polylines", len(lines), 3)
        counts = [len(p.get("points").split()) for p in lines]
        check("points per line", counts, [6, 5, 5])
        last = lines[2].get("points").split()[-1]
        check("default ends at 2/3", last, "%s,%s" % (fmt(LEFT + PLOT_W), fmt(TOP + PLOT_H / 3)))
        legend = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text") if t.text and "mean" in t.text]
        check("legend", legend[1], "ringmaster default, mean 550 s (1 unfinished)")
        try:
            write_plots(os.path.join(tmp, "nope"), out, ["default"], ["1.0"], ["1"], peer)
            failures.append("missing sweep folder: no error")
        except InputError as e:
            check("missing folder message", str(e).startswith("no sweep folder"), True)
        try:
            write_plots(sweep, out, ["default"], ["2.0"], ["1"], peer)
            failures.append("missing summary.json: no error")
        except InputError as e:
            check("missing file message", str(e).startswith("no file ") and "tiresias-2.0" in str(e), True)

    # Cases: one plot per case, a line per policy.
    with tempfile.TemporaryDirectory() as tmp:
        sweep, out = os.path.join(tmp, "sweep"), os.path.join(tmp, "plots")
        for policy, rows in (("las", ["a,10.000", "b,100.000"]), ("default", ["a,10.000", "b,"])):
            os.makedirs(os.path.join(sweep, "c1-" + policy))
            with open(os.path.join(sweep, "c1-" + policy, "jobs.csv"), "w") as f:
                f.write("job_id,jct_s\n" + "\n".join(rows) + "\n")
        written = write_case_plots(sweep, out, ["las", "default"], ["c1"], "default-policy")
        check("case file", [os.path.basename(p) for p in written], ["default-policy-c1.svg"])
        with open(written[0], "rb") as f:
            root = ET.fromstring(f.read())
        check("case polylines", len(root.findall(".//{http://www.w3.org/2000/svg}polyline")), 2)
        legend = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text") if t.text and "mean" in t.text]
        check("case legend", legend, ["las, mean 55 s", "default, mean 10 s (1 unfinished)"])
        try:
            write_case_plots(sweep, out, ["sjf"], ["c1"], "default-policy")
            failures.append("missing case run: no error")
        except InputError as e:
            check("missing case message", "c1-sjf" in str(e), True)

    for f in failures:
        print("FAIL " + f, file=sys.stderr)
    print("self-test: %s" % ("%d failed" % len(failures) if failures else "all checks passed"))
    return len(failures)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep", nargs="?", help="bench/pollux_sweep.sh's OUT folder")
    parser.add_argument("out", nargs="?", help="folder for the SVGs")
    parser.add_argument("--policies", default="tiresias-tuned default")
    parser.add_argument("--loads", default="0.5 1.0 1.5 2.0")
    parser.add_argument("--workloads", default="1 2 3 4 5 6 7 8")
    parser.add_argument("--peer", default=DEFAULT_PEER, help="the published results-jobload folder")
    parser.add_argument("--cases", help="bench/default_policy_sweep.sh's cases: one plot each")
    parser.add_argument("--prefix", default="default-policy", help="with --cases: PREFIX-CASE.svg")
    parser.add_argument("--self-test", action="store_true", help="check the CDF code and exit")
    args = parser.parse_args()
    if args.self_test:
        return 1 if self_test() else 0
    if not args.sweep or not args.out:
        parser.error("SWEEP_DIR and OUT_DIR are required (or --self-test)")
    try:
        if args.cases:
            written = write_case_plots(args.sweep, args.out, args.policies.split(), args.cases.split(), args.prefix)
        else:
            written = write_plots(args.sweep, args.out, args.policies.split(), args.loads.split(),
                                  args.workloads.split(), args.peer)
        for path in written:
            print("wrote " + path)
    except InputError as e:
        print("jct_cdf.py: %s" % e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
