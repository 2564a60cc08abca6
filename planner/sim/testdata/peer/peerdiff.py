#!/usr/bin/env python3
"""Differential test data from the Tiresias simulator (the peer).

Generates random small traces, runs the peer's simulator on each under its
fifo, dlas-gpu, dlas-gpu-gittins, shortest and shortest-gpu disciplines
(scheme "count"; dlas-gpu and dlas-gpu-gittins also under "yarn", where the
peer counts GPUs just the same), and writes what it finds as facts for
planner/sim's TestPeerDifferential:

  traces.csv    trace,gpus_per_node,nodes,job_id,num_gpu,submit_time,duration
  expected.csv  trace,schedule,scheme,job_id,jct   (the peer's job.csv JCT)

  expected-yarn.csv  the same for fifo, shortest and shortest-gpu under
                     "yarn" (--yarn; the same traces, from the same seed)

(gzip -9 -n them afterwards: the test reads traces.csv.gz,
expected.csv.gz and expected-yarn.csv.gz; --sixty writes sixty-*.csv,
read as they are.)

The peer is not part of this repository. Bring it here (SymbioticLab/
Tiresias, Apache-2.0; e.g. the fetch tool, then
`git -C <dir> archive HEAD simulator | tar -x -C /tmp/peer`) and pass its
simulator/ folder with --peer. This script copies it to a temporary folder
and ports it to python3 there, changing only what python3 reads differently
(docs/tiresias.md lists the edits): sys.maxint, the integer divisions of
run_sim.py, numpy.mean (statistics.mean) and lp.py's CPLEX import (unused
by these disciplines).

Run by hand (about 15 minutes on two shared cores):
  python3 planner/sim/testdata/peer/peerdiff.py --peer /tmp/peer/simulator \\
      --traces 200 --out planner/sim/testdata/peer
"""
import argparse
import csv
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

SCHEDULES = ["fifo", "dlas-gpu", "dlas-gpu-gittins", "shortest", "shortest-gpu"]
YARN_TOO = {"dlas-gpu", "dlas-gpu-gittins"}


def port(src, dst):
    shutil.copytree(src, dst)
    for name in os.listdir(dst):
        if not name.endswith(".py"):
            continue
        p = os.path.join(dst, name)
        s = open(p).read().replace("sys.maxint", "sys.maxsize")
        if name == "jobs.py":
            s = s.replace("import numpy\n", "import statistics as numpy\n")
        if name == "run_sim.py":
            # run_sim.py has no `from __future__ import division`: its
            # int / int is floor division.
            s = s.replace("rjob['executed_time'])/rjob['num_gpu']", "rjob['executed_time'])//rjob['num_gpu']")
            s = s.replace("e_sum / (job_data['num'] - idx)", "e_sum // (job_data['num'] - idx)")
        if name == "lp.py":
            s = "def placement(job):\n    raise NotImplementedError\n"
        open(p, "w").write(s)


def gen(rng, n):
    """One random trace: a cluster and n jobs that each fit it."""
    gpn = rng.choice([4, 8])
    nodes = rng.choice([1, 2, 3, 4, 8])
    total = gpn * nodes
    sizes = [g for g in [1, 1, 1, 2, 2, 4, 8, 16, 32] if g <= total]
    t = 0
    jobs = []
    for i in range(n):
        t += int(rng.expovariate(1 / rng.choice([5, 60, 600])))
        kind = rng.random()
        if kind < 0.5:
            d = rng.randint(1, 600)
        elif kind < 0.85:
            d = rng.randint(600, 8000)
        else:
            d = rng.randint(8000, 40000)
        jobs.append((i, rng.choice(sizes), t, d))
    return gpn, nodes, jobs


def run_peer(peer, trace_file, spec, schedule, scheme, logdir):
    cmd = [sys.executable, "run_sim.py", "--cluster_spec=" + spec, "--scheme=" + scheme,
           "--trace_file=" + trace_file, "--schedule=" + schedule, "--log_path=" + logdir]
    subprocess.run(cmd, cwd=peer, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=600)
    with open(os.path.join(logdir, "job.csv")) as f:
        return [(r["job_id"], int(r["JCT"])) for r in csv.DictReader(f)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer", required=True, help="the peer's simulator/ folder")
    ap.add_argument("--traces", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", required=True)
    ap.add_argument("--yarn", action="store_true",
                    help="instead, the same traces' fifo, shortest and shortest-gpu runs under scheme yarn (expected-yarn.csv)")
    ap.add_argument("--sixty", action="store_true",
                    help="instead, the peer's own 60_job.csv on 2 and 4 nodes of 4 GPUs (sixty-*.csv)")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    tmp = tempfile.mkdtemp(prefix="peerdiff-")
    peer = os.path.join(tmp, "simulator")
    port(a.peer, peer)
    prefix = "sixty-" if a.sixty else ""
    tf = open(os.devnull if a.yarn else os.path.join(a.out, prefix + "traces.csv"), "w", newline="")
    ef = open(os.path.join(a.out, prefix + ("expected-yarn.csv" if a.yarn else "expected.csv")), "w", newline="")
    tw, ew = csv.writer(tf), csv.writer(ef)
    tw.writerow(["trace", "gpus_per_node", "nodes", "job_id", "num_gpu", "submit_time", "duration"])
    ew.writerow(["trace", "schedule", "scheme", "job_id", "jct"])
    cases = range(a.traces)
    if a.sixty:
        with open(os.path.join(peer, "60_job.csv")) as f:
            sixty = [(int(r["job_id"]), int(r["num_gpu"]), int(r["submit_time"]), int(float(r["duration"])))
                     for r in csv.DictReader(f)]
        cases = [(4, 2, sixty), (4, 4, sixty)]
    for k, case in enumerate(cases):
        if a.sixty:
            gpn, nodes, jobs = case
            name = "60job-n%dg%d" % (nodes, gpn)
        else:
            gpn, nodes, jobs = gen(rng, rng.randint(10, 150))
            name = "r%03d" % k
        trace_file = os.path.join(tmp, name + ".csv")
        with open(trace_file, "w") as f:
            f.write("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n")
            for (i, g, t, d) in jobs:
                f.write("%d,%d,%d,1,resnet50,%d,0\n" % (i, g, t, d))
                tw.writerow([name, gpn, nodes, i, g, t, d])
        spec = os.path.join(tmp, name + "-spec.csv")
        with open(spec, "w") as f:
            f.write("num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n1,%d,%d,128,256\n" % (nodes, gpn))
        for s in SCHEDULES:
            schemes = ["count", "yarn"] if s in YARN_TOO else ["count"]
            if a.yarn:
                schemes = [] if s in YARN_TOO else ["yarn"]
            for scheme in schemes:
                logdir = os.path.join(tmp, "%s-%s-%s" % (name, s, scheme))
                for job_id, jct in run_peer(peer, trace_file, spec, s, scheme, logdir):
                    ew.writerow([name, s, scheme, job_id, jct])
        print(name, len(jobs), "jobs", file=sys.stderr)
    tf.close()
    ef.close()
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
