"""Measures what a preemption costs train.py: preempts it --runs times the
way the themis driver does (the notice file, then SIGTERM) and resumes it
each time from its newest complete checkpoint, and prints the medians
(docs/pytorch.md, "What a preemption costs"):

    /usr/bin/python3 examples/pytorch/bench_preempt.py --runs 10
    /usr/bin/python3 examples/pytorch/bench_preempt.py --runs 10 -- --hidden 1024 --layers 4

Arguments after "--" go to train.py. For each preemption:

  stop       the signal to the process's exit: the step in progress, the
             checkpoint (torch.save, fsync, COMPLETE, rename), the exit
  save       the checkpoint alone, as the job timed it
  start      the next process's start to its checkpoint loaded (Python,
             import torch, the model built, torch.load)
  load       torch.load and the state restored, as the job timed it
  to step    the next process's start to its first new step done
  redone     steps trained before the stop that the resumed run trains again
             (the steps after its checkpoint): the work lost
  idle       stop + to step: the wall time the job trains nothing

This is the job's side alone; the scheduler's (the revoke, Nomad stopping
and placing allocations) is in the e2e tests' logs.
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import themis_ckpt  # noqa: E402

STEP = re.compile(r"^train: step (\d+) loss")
CKPT = re.compile(r"^train: checkpointed at step (\d+) in (\S+) s \((\d+) bytes\)")
RESUMED = re.compile(r"^train: resumed from step (\d+) in (\S+) s")
MODEL = re.compile(r"^train: model (\d+) parameters")


def one_run(ckpt, train_args, steps_between, deadline_s=60):
    """One process: resumes, trains steps_between steps, is preempted."""
    resume = themis_ckpt.latest_complete(ckpt)
    notice = os.path.join(ckpt, "notice.json")
    if os.path.exists(notice):
        os.remove(notice)  # as the driver does at start
    env = dict(os.environ, THEMIS_CHECKPOINT_DIR=ckpt, THEMIS_NOTICE_FILE=notice,
               THEMIS_RESUME_FROM=resume.path if resume else "", PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, os.path.join(HERE, "train.py"), "--steps", "100000000", "--log-every", "1"] + train_args,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    r = {"params": None, "loaded": None, "load": None, "first": None, "from": 0}
    last = None
    signalled = None
    for line in p.stdout:
        now = time.monotonic()
        if m := MODEL.match(line):
            r["params"] = int(m.group(1))
        elif m := RESUMED.match(line):
            r["loaded"], r["load"], r["from"] = now - t0, float(m.group(2)), int(m.group(1))
        elif m := STEP.match(line):
            last = int(m.group(1))
            if r["first"] is None:
                r["first"] = now - t0
            if signalled is None and last >= r["from"] + steps_between:
                deadline = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + deadline_s))
                with open(notice + ".tmp", "w") as f:
                    json.dump({"reason": "bench_preempt.py", "deadline": deadline, "signal": "SIGTERM"}, f)
                os.replace(notice + ".tmp", notice)
                signalled = time.monotonic()
                p.send_signal(signal.SIGTERM)
                r["last_before"] = last
        elif m := CKPT.match(line):
            r["at"], r["save"], r["bytes"] = int(m.group(1)), float(m.group(2)), int(m.group(3))
    p.wait()
    r["stop"] = time.monotonic() - signalled if signalled else None
    if p.returncode != 0 or "at" not in r:
        raise RuntimeError(f"train.py exited {p.returncode} without a checkpoint")
    # Steps printed after the one the checkpoint holds would be trained
    # again: the work a preemption loses.
    r["redone"] = max(0, (last or 0) - r["at"])
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10, help="preemptions to measure")
    ap.add_argument("--steps-between", type=int, default=30, help="steps each run trains before it is preempted")
    ap.add_argument("train_args", nargs="*", help="train.py flags (after --)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as ckpt:
        runs = [one_run(ckpt, a.train_args, a.steps_between) for _ in range(a.runs + 1)]
    # Preemption i: the stop of run i and the start of run i+1.
    rows = []
    for before, after in zip(runs, runs[1:]):
        assert after["from"] == before["at"], (before, after)
        rows.append({"stop": before["stop"], "save": before["save"], "start": after["loaded"], "load": after["load"],
                     "to step": after["first"], "redone": before["redone"] + (0 if after["from"] == before["at"] else 1),
                     "idle": before["stop"] + after["first"], "bytes": before["bytes"]})
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    print(f"train.py {' '.join(a.train_args) or '(defaults)'}: {runs[0]['params']} parameters, "
          f"checkpoint {med['bytes'] / 2**20:.1f} MiB; {len(rows)} preemptions, medians (min-max):")
    print("| stop (s) | of which save (s) | start to loaded (s) | of which load (s) | start to first step (s) | steps redone | idle (s) |")
    print("|---|---|---|---|---|---|---|")

    def cell(k, fmt="{:.3f}"):
        vs = [r[k] for r in rows]
        return f"{fmt.format(med[k])} ({fmt.format(min(vs))}-{fmt.format(max(vs))})"

    print("| " + " | ".join([cell("stop"), cell("save"), cell("start"), cell("load"), cell("to step"),
                             cell("redone", "{:.0f}"), cell("idle")]) + " |")


if __name__ == "__main__":
    main()
