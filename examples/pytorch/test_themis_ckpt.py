"""Unit tests of themis_ckpt and train.py (stdlib unittest; `make test`
runs them with /usr/bin/python3):

    /usr/bin/python3 -m unittest discover -s examples/pytorch -v

The protocol tests need no torch. Those that train need Debian's
python3-torch: they skip without it, unless THEMIS_REQUIRE_TORCH=1 (CI),
where a missing torch fails them.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import themis_ckpt  # noqa: E402

try:
    import torch  # noqa: F401

    HAVE_TORCH, WHY_NO_TORCH = True, ""
except ImportError as e:  # pragma: no cover - depends on the machine
    HAVE_TORCH, WHY_NO_TORCH = False, f"{sys.executable} has no torch ({e}): apt-get install python3-torch"


def needs_torch(test):
    if HAVE_TORCH:
        return test
    if os.environ.get("THEMIS_REQUIRE_TORCH") == "1":
        def fail(self):
            self.fail(WHY_NO_TORCH + " (THEMIS_REQUIRE_TORCH=1)")
        return fail
    return unittest.skip(WHY_NO_TORCH)(test)


def child_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("THEMIS_")}
    env.update(PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=HERE, PYTHONUNBUFFERED="1")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def make_ckpt(root, name, marker=True, mtime_ns=None, payload=None):
    d = os.path.join(root, name)
    os.makedirs(d)
    if payload is not None:
        with open(os.path.join(d, "state.txt"), "w") as f:
            f.write(payload)
    if marker:
        m = os.path.join(d, themis_ckpt.MARKER)
        open(m, "w").close()
        if mtime_ns is not None:
            os.utime(m, ns=(mtime_ns, mtime_ns))
    return d


class LatestComplete(unittest.TestCase):
    """The driver's rule (driver/checkpoint): newest by the marker's time,
    ties by the greater name; incomplete, temporary, symlinked and marker-
    less entries never count."""

    def test_table(self):
        s = 1_700_000_000 * 10**9
        cases = [
            ("no dir", None, None),
            ("empty", [], None),
            ("one complete", [("step-000000001", True, s)], "step-000000001"),
            ("newest marker wins over greater name", [("step-000000009", True, s), ("step-000000002", True, s + 10**9)], "step-000000002"),
            ("tie broken by greater name", [("step-000000003", True, s), ("step-000000004", True, s)], "step-000000004"),
            ("incomplete newer is skipped", [("step-000000001", True, s), ("step-000000002", False, None)], "step-000000001"),
            ("temporary with marker is skipped", [("step-000000001", True, s), (".tmp-step-000000002-x", True, s + 10**9)], "step-000000001"),
            ("only incomplete", [("step-000000001", False, None)], None),
        ]
        for name, entries, want in cases:
            with self.subTest(name), tempfile.TemporaryDirectory() as tmp:
                root = os.path.join(tmp, "ckpt")
                if entries is not None:
                    os.makedirs(root)
                    for n, complete, t in entries:
                        make_ckpt(root, n, complete, t)
                got = themis_ckpt.latest_complete(root)
                self.assertEqual(got.name if got else None, want)

    def test_odd_entries_are_not_checkpoints(self):
        with tempfile.TemporaryDirectory() as root:
            make_ckpt(root, "step-000000001", True, 10**18)
            real = make_ckpt(os.path.join(root, ".."), os.path.basename(root) + "-elsewhere", True, 2 * 10**18)
            os.symlink(real, os.path.join(root, "step-000000009"))  # a symlink to a complete dir
            d = os.path.join(root, "step-000000008")
            os.makedirs(os.path.join(d, themis_ckpt.MARKER))  # marker is a directory
            d = os.path.join(root, "step-000000007")
            os.makedirs(d)
            os.symlink("/etc/hostname", os.path.join(d, themis_ckpt.MARKER))  # marker is a symlink
            open(os.path.join(root, "notice.json"), "w").close()
            self.assertEqual(themis_ckpt.latest_complete(root).name, "step-000000001")
            self.assertEqual([c.name for c in themis_ckpt.list_complete(root)], ["step-000000001"])


class ResumePoint(unittest.TestCase):
    def test_table(self):
        with tempfile.TemporaryDirectory() as root:
            make_ckpt(root, "step-000000005", True, 10**18)
            make_ckpt(root, "step-000000006", True, 2 * 10**18)
            make_ckpt(root, "step-000000007", False)
            cases = [
                ("driver names one", {"THEMIS_RESUME_FROM": os.path.join(root, "step-000000005")}, os.path.join(root, "step-000000005")),
                ("driver found none", {"THEMIS_RESUME_FROM": ""}, None),
                ("no driver: the newest complete in the dir", {}, os.path.join(root, "step-000000006")),
            ]
            for name, extra, want in cases:
                with self.subTest(name):
                    env = {"THEMIS_CHECKPOINT_DIR": root, **extra}
                    job = themis_ckpt.Job(env=env, signals=())
                    self.assertEqual(job.resume_from(), want)

    def test_no_dir_no_resume(self):
        self.assertIsNone(themis_ckpt.Job(env={}, signals=()).resume_from())


# A child that saves checkpoint step-000000002 (the dir already holds a
# complete step-000000001) and pauses at one stage, for the parent to kill.
SAVE_CHILD = textwrap.dedent("""
    import os, sys, time, themis_ckpt
    root, target = sys.argv[1], sys.argv[2]
    def stage(s):
        print("stage", s, flush=True)
        if s == target:
            time.sleep(60)
    def fill(tmp):
        with open(os.path.join(tmp, "state.txt"), "w") as f:
            f.write("two" * 1000)
        stage("writing")
    themis_ckpt.save_checkpoint(root, "step-000000002", fill, on_stage=stage)
    print("saved", flush=True)
""")

STAGES = ["temp-created", "writing", "filled", "synced", "marker-written", "renamed", "root-synced"]


class AtomicSave(unittest.TestCase):
    def test_killed_at_every_stage(self):
        """SIGKILL at each stage of a save leaves the previous checkpoint as
        the newest complete one, or the new one whole; never a torn one."""
        for i, target in enumerate(STAGES):
            with self.subTest(target), tempfile.TemporaryDirectory() as root:
                make_ckpt(root, "step-000000001", True, None, payload="one")
                p = subprocess.Popen([sys.executable, "-c", SAVE_CHILD, root, target], stdout=subprocess.PIPE,
                                     text=True, env=child_env())
                try:
                    for line in p.stdout:
                        if line.strip() == f"stage {target}":
                            break
                    else:
                        self.fail(f"the child never reached {target}")
                    p.kill()
                finally:
                    p.wait()
                    p.stdout.close()
                c = themis_ckpt.latest_complete(root)
                newer = STAGES.index(target) >= STAGES.index("renamed")
                self.assertEqual(c.name, "step-000000002" if newer else "step-000000001")
                with open(os.path.join(c.path, "state.txt")) as f:
                    self.assertEqual(f.read(), "two" * 1000 if newer else "one")
                # What is left is either complete or hidden from the driver.
                for e in os.listdir(root):
                    if not e.startswith("."):
                        self.assertTrue(os.path.isfile(os.path.join(root, e, themis_ckpt.MARKER)), e)

    def test_saves_again_after_a_cut_save(self):
        with tempfile.TemporaryDirectory() as root:
            d = make_ckpt(root, "step-000000003", marker=False, payload="torn")
            c = themis_ckpt.save_checkpoint(root, "step-000000003", lambda tmp: write(os.path.join(tmp, "state.txt"), "whole"))
            self.assertEqual(c.path, d)
            with open(os.path.join(d, "state.txt")) as f:
                self.assertEqual(f.read(), "whole")
            # The same step again keeps the complete one.
            again = themis_ckpt.save_checkpoint(root, "step-000000003", lambda tmp: self.fail("filled twice"))
            self.assertEqual(again.path, d)

    def test_a_failing_fill_leaves_nothing(self):
        with tempfile.TemporaryDirectory() as root:
            def fill(tmp):
                raise OSError("disk full")
            with self.assertRaises(OSError):
                themis_ckpt.save_checkpoint(root, "step-000000001", fill)
            self.assertEqual(os.listdir(root), [])

    def test_bad_names(self):
        for name in ["", ".hidden", "a/b"]:
            with self.subTest(name), self.assertRaises(ValueError):
                themis_ckpt.save_checkpoint("/nonexistent", name, lambda tmp: None)

    def test_prune_keeps_the_newest(self):
        with tempfile.TemporaryDirectory() as root:
            for i in range(5):
                make_ckpt(root, themis_ckpt.checkpoint_name(i), True, (i + 1) * 10**18)
            removed = themis_ckpt.prune(root, 2)
            self.assertEqual(sorted(os.path.basename(p) for p in removed), [themis_ckpt.checkpoint_name(i) for i in range(3)])
            self.assertEqual(sorted(os.listdir(root)), [themis_ckpt.checkpoint_name(3), themis_ckpt.checkpoint_name(4)])


# A child with a Job whose save takes a second; the parent signals it in the
# middle of the save.
SIGNAL_CHILD = textwrap.dedent("""
    import os, sys, time, themis_ckpt
    job = themis_ckpt.Job(env={"THEMIS_CHECKPOINT_DIR": sys.argv[1]})
    def fill(tmp):
        print("saving", flush=True)
        for i in range(10):
            time.sleep(0.1)
        with open(os.path.join(tmp, "state.txt"), "w") as f:
            f.write("whole")
    themis_ckpt.save_checkpoint(sys.argv[1], "step-000000001", fill)
    print("saved; stop requested:", job.should_stop(), job.why(), flush=True)
""")


class SignalDuringSave(unittest.TestCase):
    def test_each_checkpoint_signal(self):
        """A checkpoint signal in the middle of a save neither cuts it nor
        kills the process: the save completes, and the job then sees the
        request (SIGINT raises no KeyboardInterrupt)."""
        for name in themis_ckpt.CHECKPOINT_SIGNALS:
            with self.subTest(name), tempfile.TemporaryDirectory() as root:
                p = subprocess.Popen([sys.executable, "-c", SIGNAL_CHILD, root], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=child_env())
                self.assertEqual(p.stdout.readline().strip(), "saving")
                p.send_signal(getattr(signal, name))
                out, err = p.communicate(timeout=30)
                self.assertEqual(p.returncode, 0, err)
                self.assertIn(f"saved; stop requested: True {name}", out)
                self.assertEqual(themis_ckpt.latest_complete(root).name, "step-000000001")


class Notices(unittest.TestCase):
    def test_notice_file_requests_a_stop(self):
        with tempfile.TemporaryDirectory() as root:
            notice = os.path.join(root, "notice.json")
            job = themis_ckpt.Job(env={"THEMIS_CHECKPOINT_DIR": root, "THEMIS_NOTICE_FILE": notice}, signals=())
            self.assertFalse(job.should_stop())
            deadline = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 30))
            with open(notice, "w") as f:
                json.dump({"reason": "preempted by fitgpp for default/te", "deadline": deadline, "signal": "SIGTERM"}, f)
            self.assertTrue(job.should_stop())
            n = job.notice()
            self.assertEqual((n.reason, n.signal), ("preempted by fitgpp for default/te", "SIGTERM"))
            self.assertTrue(25 < n.seconds_left() <= 31, n.seconds_left())
            self.assertIn("preempted by fitgpp", job.why())

    def test_unreadable_notice_still_counts(self):
        with tempfile.TemporaryDirectory() as root:
            path = os.path.join(root, "notice.json")
            with open(path, "w") as f:
                f.write("{not json")
            n = themis_ckpt.read_notice(path)
            self.assertIsNotNone(n)
            self.assertIsNone(n.seconds_left())


class Progress(unittest.TestCase):
    def test_reports(self):
        cases = [
            ("all fields", (12, 100, 0.5), {"iteration": 12, "total": 100, "loss": 0.5}),
            ("no total", (3, None, 1.0), {"iteration": 3, "loss": 1.0}),
            ("NaN loss left out", (4, 10, float("nan")), {"iteration": 4, "total": 10}),
        ]
        for name, args, want in cases:
            with self.subTest(name), tempfile.TemporaryDirectory() as root:
                path = os.path.join(root, "themis-progress.json")
                job = themis_ckpt.Job(env={"THEMIS_CHECKPOINT_DIR": root, "THEMIS_PROGRESS_FILE": path}, signals=())
                job.report(*args)
                with open(path) as f:
                    self.assertEqual(json.load(f), want)
                self.assertFalse(os.path.exists(path + ".tmp"))

    def test_only_rank_0_reports(self):
        with tempfile.TemporaryDirectory() as root:
            path = os.path.join(root, "p.json")
            job = themis_ckpt.Job(env={"THEMIS_CHECKPOINT_DIR": root, "THEMIS_PROGRESS_FILE": path, "RANK": "1"}, signals=())
            job.report(1, 2, 3.0)
            self.assertFalse(os.path.exists(path))


class GangEnv(unittest.TestCase):
    def test_table(self):
        full = {"THEMIS_GANG_SIZE": "2", "THEMIS_GANG_RANK": "1", "THEMIS_GPUS_PER_NODE": "8",
                "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "4242", "THEMIS_GANG_PEERS": "10.0.0.1,10.0.0.2"}
        cases = [
            ("one-node job", {}, themis_ckpt.Gang(1, 0, 0, "127.0.0.1", 29500, []), None),
            ("a part", full, themis_ckpt.Gang(2, 1, 8, "10.0.0.1", 4242, ["10.0.0.1", "10.0.0.2"]), None),
            ("rank out of range", {**full, "THEMIS_GANG_RANK": "2"}, None, "rank must be in 0..size-1"),
            ("not a number", {**full, "MASTER_PORT": "x"}, None, "MASTER_PORT='x'"),
        ]
        for name, env, want, err in cases:
            with self.subTest(name):
                if err:
                    with self.assertRaisesRegex(ValueError, err):
                        themis_ckpt.gang_env(env)
                else:
                    self.assertEqual(themis_ckpt.gang_env(env), want)

    def test_torchrun_command(self):
        env = {"THEMIS_GANG_SIZE": "2", "THEMIS_GANG_RANK": "1", "THEMIS_GPUS_PER_NODE": "8",
               "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "4242"}
        self.assertEqual(themis_ckpt.torchrun_command(["train.py", "--steps", "9"], nproc_per_node=1, python="/usr/bin/python3", env=env),
                         ["/usr/bin/python3", "-m", "torch.distributed.run", "--nnodes=2", "--node_rank=1", "--nproc_per_node=1",
                          "--master_addr=10.0.0.1", "--master_port=4242", "train.py", "--steps", "9"])
        self.assertIn("--nproc_per_node=8", themis_ckpt.torchrun_command(["t.py"], env=env))


class Sampler(unittest.TestCase):
    @needs_torch
    def test_resumed_mid_epoch_reads_the_same_batches(self):
        whole = themis_ckpt.StepSampler(100, 8, seed=3)
        self.assertEqual(whole.per_epoch, 12)
        it = iter(whole)
        first = [next(it) for _ in range(40)]  # three epochs and a bit
        for start in [0, 5, 12, 17, 36]:
            with self.subTest(start=start):
                resumed = iter(themis_ckpt.StepSampler(100, 8, seed=3, start=start))
                self.assertEqual([next(resumed) for _ in range(40 - start)], first[start:])
        for e in range(3):  # each epoch visits distinct samples
            seen = sum(first[e * 12:(e + 1) * 12], [])
            self.assertEqual(len(set(seen)), 96)
        self.assertNotEqual(first[0], first[12], "epochs must be shuffled differently")
        self.assertEqual(whole.position(13), (1, 0))

    @needs_torch
    def test_ranks_split_each_batch(self):
        one = iter(themis_ckpt.StepSampler(64, 8, seed=1, world=1))
        r0 = iter(themis_ckpt.StepSampler(64, 4, seed=1, rank=0, world=2))
        r1 = iter(themis_ckpt.StepSampler(64, 4, seed=1, rank=1, world=2))
        for _ in range(20):
            a, b, whole = next(r0), next(r1), next(one)
            self.assertEqual(len(a), 4)
            self.assertEqual(sorted(a + b), sorted(whole))

    def test_batch_larger_than_data(self):
        with self.assertRaises(ValueError):
            themis_ckpt.StepSampler(10, 8, seed=1, world=2)


TRAIN = os.path.join(HERE, "train.py")
SMALL = ["--samples", "2048", "--hidden", "32", "--batch", "16", "--warmup", "10", "--log-every", "1"]


def losses(out):
    got = {}
    for line in out.splitlines():
        parts = line.split()
        if line.startswith("train: step "):
            got[int(parts[2])] = parts[4]
    return got


def field(out, prefix):
    for line in out.splitlines():
        if line.startswith(prefix):
            return line
    return None


class Training(unittest.TestCase):
    """train.py through the protocol: preempted (the notice file, then its
    signal, as the driver does) mid-epoch and resumed, it continues the
    same curve and ends with the same weights as a run that never stopped."""

    def run_train(self, ckpt, steps, extra_env=None, stop_after=None, torchrun=0):
        env = child_env(THEMIS_CHECKPOINT_DIR=ckpt, THEMIS_NOTICE_FILE=os.path.join(ckpt, "notice.json"),
                        THEMIS_PROGRESS_FILE=os.path.join(ckpt, "themis-progress.json"), **(extra_env or {}))
        cmd = [sys.executable, TRAIN, "--steps", str(steps)] + SMALL
        if torchrun:
            # What the driver gives a one-part gang; the launcher starts
            # torchrun from it.
            env.update(THEMIS_GANG_SIZE="1", THEMIS_GANG_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
            cmd = [sys.executable, os.path.join(HERE, "themis_ckpt.py"), "torchrun", "--nproc-per-node", str(torchrun),
                   TRAIN, "--steps", str(steps)] + SMALL
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
        out = []
        if stop_after is not None:
            for line in p.stdout:
                out.append(line)
                if line.startswith(f"train: step {stop_after} "):
                    with open(os.path.join(ckpt, "notice.json"), "w") as f:
                        json.dump({"reason": "test preemption", "deadline": "2099-01-01T00:00:00Z", "signal": "SIGTERM"}, f)
                    os.killpg(p.pid, signal.SIGTERM if not torchrun else signal.SIGUSR1)
                    break
        rest, err = p.communicate(timeout=300)
        out = "".join(out) + rest
        self.assertEqual(p.returncode, 0, f"stdout:\n{out}\nstderr:\n{err}")
        return out

    def check_continuity(self, torchrun=0):
        steps = 150
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            ref = self.run_train(a, steps, torchrun=torchrun)
            first = self.run_train(b, steps, stop_after=70, torchrun=torchrun)
            ck = field(first, "train: checkpointed at step ")
            self.assertIsNotNone(ck, first)
            at = int(ck.split()[4])
            self.assertGreaterEqual(at, 70)
            self.assertLess(at, steps)
            if torchrun > 1:
                self.assertIn(f"train: rank 1 stops at step {at} (rank 0 checkpoints the gang), exiting", first)
            os.remove(os.path.join(b, "notice.json"))  # the driver removes a stale notice at start
            resumed = self.run_train(b, steps, extra_env={"THEMIS_RESUME_FROM": os.path.join(b, themis_ckpt.checkpoint_name(at))},
                                     torchrun=torchrun)
            self.assertEqual(resumed.count(f"train: resumed from step {at} in "), max(1, torchrun))
            e, bt = (at) // (2048 // (16 * max(1, torchrun))), at % (2048 // (16 * max(1, torchrun)))
            self.assertIn(f"train: data position epoch {e} batch {bt} of ", resumed)
            r, before, after = losses(ref), losses(first), losses(resumed)
            self.assertEqual(min(after), at + 1, "the step count continues")
            for s, v in list(before.items()) + list(after.items()):
                self.assertEqual(v, r[s], f"step {s}")
            self.assertEqual(field(resumed, "train: done").split()[6], field(ref, "train: done").split()[6])
            with open(os.path.join(b, "themis-progress.json")) as f:
                self.assertEqual(json.load(f)["iteration"], steps)

    @needs_torch
    def test_preempted_and_resumed_equals_uninterrupted(self):
        self.check_continuity()

    @needs_torch
    def test_ddp_gang_over_gloo_preempted_and_resumed(self):
        """Two ranks under torchrun (gloo), started by the launcher: SIGUSR1
        to the process group (torchrun's agent ignores it, the workers
        handle it), both ranks stop after the same step, rank 0
        checkpoints, torchrun exits 0, both ranks resume from the
        checkpoint, and the end equals an uninterrupted two-rank run."""
        self.check_continuity(torchrun=2)


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    unittest.main()
