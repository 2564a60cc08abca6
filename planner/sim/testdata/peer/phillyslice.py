#!/usr/bin/env python3
"""Write a slice of philly.csv in the Tiresias simulator's format.

The slice of issue #17 and docs/tiresias.md: the 14 days from
2017-10-01 00:00:00 (24,134 jobs), submit times in seconds from its start,
durations truncated to whole seconds (the peer reads them with int()),
model resnet50 for every job (the peer needs one; our peer-semantics mode
ignores it), job_id the row's place in submit order.

  python3 planner/sim/testdata/peer/phillyslice.py ../shared/traces/philly.csv > /tmp/slice14.csv
"""
import csv
import datetime
import sys


def main():
    src = sys.argv[1]
    start = datetime.datetime(2017, 10, 1) if len(sys.argv) < 3 else datetime.datetime.fromisoformat(sys.argv[2])
    days = 14 if len(sys.argv) < 4 else int(sys.argv[3])
    rows = []
    with open(src) as f:
        for r in csv.DictReader(f):
            t = datetime.datetime.strptime(r["timestamp"], "%Y-%m-%d %H:%M:%S")
            s = int((t - start).total_seconds())
            if 0 <= s < days * 86400:
                rows.append((s, int(float(r["duration"])), int(r["num_gpus"])))
    rows.sort(key=lambda x: x[0])  # stable: file order breaks ties
    out = sys.stdout
    out.write("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n")
    for i, (s, d, g) in enumerate(rows):
        out.write("%d,%d,%d,1,resnet50,%d,0\n" % (i, g, s, d))


if __name__ == "__main__":
    main()
