#!/usr/bin/env python3
"""Markdown tables of examples/sweeps/hived-sweep.sh's runs (docs/hived.md).

Usage: python3 examples/sweeps/hived-table.py OUT [SIZES] [MODES]
Reads OUT/<size>-<mode>/summary.json.
"""
import json
import os
import sys

out = sys.argv[1]
sizes = (sys.argv[2] if len(sys.argv) > 2 else "480 960 1440").split()
modes = (sys.argv[3] if len(sys.argv) > 3 else "hived hived-overflow quota quota-yarn quota-gandiva").split()


def num(x, nd=0):
    return "-" if x is None else f"{x:,.{nd}f}"


def load(n, m):
    p = os.path.join(out, f"{n}-{m}", "summary.json")
    return json.load(open(p)) if os.path.exists(p) else None


print("| GPUs | mode | avg queue (s) | private avg queue (s) | p95 queue (s) | anomalies | largest excess (s) | VCs waiting less than private | preemptions |")
print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for n in sizes:
    for m in modes:
        s = load(n, m)
        if s is None:
            continue
        vs = [v for v in s["vcs"] if v["finished"] and v["private_finished"]]
        less = sum(1 for v in vs if v["avg_queue_s"] < v["private_avg_queue_s"] - 1e-3)
        pre = sum(v["preemptions"] for v in s["vcs"])
        print(f"| {n} | {m} | {num(s['avg_queue_s'])} | {num(s.get('private_avg_queue_s'))} | {num(s['p95_queue_s'])} | "
              f"{s['sharing_anomalies']} | {num(s['max_excess_queue_s'])} | {less} of {len(vs)} | {pre:,} |")

for n in sizes:
    runs = {m: load(n, m) for m in modes}
    runs = {m: s for m, s in runs.items() if s is not None}
    if not runs:
        continue
    first = next(iter(runs.values()))
    print(f"\n{n} GPUs: average / p95 queueing delay per VC (s); * marks a sharing anomaly.\n")
    print("| VC | GPUs | jobs | private | " + " | ".join(runs) + " |")
    print("| --- | ---: | ---: | ---: | " + " | ".join("---:" for _ in runs) + " |")
    for i, v in enumerate(first["vcs"]):
        cells = []
        for m, s in runs.items():
            w = s["vcs"][i]
            cells.append(f"{num(w['avg_queue_s'])} / {num(w['p95_queue_s'])}" + (" *" if w["anomaly"] else ""))
        print(f"| {v['name']} | {v['gpus']} | {v['jobs']:,} | {num(v['private_avg_queue_s'])} / {num(v['private_p95_queue_s'])} | " + " | ".join(cells) + " |")
