#!/usr/bin/env python3
"""The spread of one run's cells, as docs/methodology.md reports it.

Usage: scripts/run-spread.py RUN_DIR/results.json [...]

Prints, per run: cells, how many are accepted / flagged / rejected, the
flagged share, the median CV of req/s over the rounds the figures rest on
(cell summary), how many cells exceed the run's max_cv, and the rounds left
out (slowed machine, busy host) with their repeats. Reads results.json only.
"""
import json
import statistics
import sys


def spread(path):
    r = json.load(open(path))
    cells = r["cells"]
    status = [c["verdict"]["status"] for c in cells]
    max_cv = r["thresholds"]["max_cv"]
    cvs = [
        c["summary"]["throughput_rps"]["cv"]
        for c in cells
        if c.get("summary") and c["summary"]["throughput_rps"]["n"] >= 2
    ]
    rounds = sum(len(c["rounds"]) for c in cells)
    slowed = sum(1 for c in cells for x in c["rounds"] if x.get("slowed"))
    busy = sum(
        1
        for c in cells
        for x in c["verdict"]["reasons"]
        if x["kind"] == "host_busy"
    )
    repeats = sum(
        1 for c in cells for x in c["rounds"] if x["index"] >= c["rounds_planned"]
    )
    labels = {}
    for c in cells:
        if c["verdict"]["status"] != "flagged":
            continue
        for x in c["verdict"]["reasons"]:
            labels[x["kind"]] = labels.get(x["kind"], 0) + 1
    n = len(cells)
    print(f"{path}")
    print(
        f"  cells {n}: accepted {status.count('accepted')}, flagged "
        f"{status.count('flagged')} ({100 * status.count('flagged') / n:.0f}%), "
        f"rejected {status.count('rejected')}"
    )
    print(
        f"  median CV of req/s {100 * statistics.median(cvs):.1f}% over {len(cvs)} cells; "
        f"{sum(cv > max_cv for cv in cvs)} above max_cv {100 * max_cv:.0f}%"
    )
    print(
        f"  rounds {rounds}: slowed {slowed}, busy host {busy}, repeats {repeats}"
    )
    print(
        "  reasons on flagged cells: "
        + ", ".join(f"{k} {v}" for k, v in sorted(labels.items(), key=lambda kv: -kv[1]))
    )


for p in sys.argv[1:]:
    spread(p)
