"""themis_ckpt: the themis checkpoint protocol for PyTorch training loops.

One module, no dependencies beyond the standard library and torch (imported
only by the functions that need it). It does what docs/checkpoints.md asks of
a workload, so a training loop needs a handful of lines (docs/pytorch.md has a
before/after diff of a typical loop):

    import themis_ckpt
    job = themis_ckpt.Job()                   # signal handlers, env, gang
    state = job.load()                        # newest complete checkpoint, or None
    step = state["step"] if state else 0
    ...restore model, optimizer, scheduler from state...
    for batch in loader:                      # a StepSampler: the data position is the step
        if job.should_stop():                 # checkpoint signal or notice file, agreed by every rank
            job.save(step, {"step": step, "model": ..., "opt": ..., "sched": ...})
            return 0                          # exit 0 before the deadline
        step += 1
        ...train one step...
        job.report(step, total, loss)         # progress for the scheduler

What it does, and the protocol rules behind each part:

* Resume point (Job.resume_from): $THEMIS_RESUME_FROM, the newest complete
  checkpoint the themis driver found; empty means there is none. Where the
  variable is not set at all (a docker, exec or raw_exec task with the
  stanza in meta, docs/drivers.md, or a run by hand), the newest complete
  checkpoint in $THEMIS_CHECKPOINT_DIR by the driver's own rule
  (latest_complete): a subdirectory whose name does not start with "." and
  that holds a regular file COMPLETE; newest by the marker's modification
  time, ties broken by the greater name.
* Atomic save (save_checkpoint): the checkpoint is written into a temporary
  ".tmp-<name>-*" directory, every file is synced, COMPLETE is written and
  synced last, the directory is renamed to <name> and the parent synced. A
  process killed at any point leaves either no new complete checkpoint or a
  whole one.
* Stop requests (Job.should_stop): a handler for the checkpoint signals (any
  of SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, the signals the
  stanza's checkpoint_signal may name) only sets a flag, so a signal never
  interrupts a step or a save; the notice file $THEMIS_NOTICE_FILE is polled
  too (the driver writes it before it signals). The loop asks between
  steps, so the step in progress finishes and the checkpoint is written
  right after it. In a process group of several ranks the answer is
  all-reduced (MAX), so every rank stops after the same step even when the
  signal reaches the nodes at different times.
* Deadline: the notice names when the driver kills the job (Job.notice);
  Job.save logs a warning when the last save took longer than the time
  left, the one thing a job can still change (checkpoint less, or more
  often).
* Progress (Job.report): {"iteration", "total", "loss"} to
  $THEMIS_PROGRESS_FILE, replaced whole (temporary file, rename); rank 0
  only.
* Gangs (gang_env, Job.rank): the driver's THEMIS_GANG_SIZE/RANK,
  THEMIS_GPUS_PER_NODE, MASTER_ADDR/MASTER_PORT; under torchrun the worker's
  RANK/WORLD_SIZE/LOCAL_RANK. Rank 0 writes the gang's checkpoints, every
  rank resumes from the same one (Job.load checks that they agree).
  `python3 themis_ckpt.py torchrun [--nproc-per-node N] SCRIPT ARGS...`
  starts torchrun from the driver's environment (torchrun_command).
* Data position (StepSampler): a batch sampler whose position is the
  global step (each epoch a permutation seeded by the epoch, sharded by
  rank), so a resumed job reads the batches the preempted one would have.
"""

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Callable, List, Optional

MARKER = "COMPLETE"
TEMP_PREFIX = ".tmp-"
STATE_FILE = "state.pt"

# The signals the stanza's checkpoint_signal may name (planner/spec).
CHECKPOINT_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")


# ---------------------------------------------------------------------------
# Finding checkpoints: the driver's rule (driver/checkpoint).


@dataclass
class Checkpoint:
    path: str
    name: str
    completed_ns: int  # the marker's modification time


def list_complete(directory: str) -> List[Checkpoint]:
    """The complete checkpoints in directory, newest first; none when the
    directory does not exist. A checkpoint is a subdirectory (not a symlink)
    whose name does not start with "." and that holds a regular file
    COMPLETE."""
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return []
    out = []
    for e in entries:
        if e.name.startswith(".") or not e.is_dir(follow_symlinks=False):
            continue
        try:
            st = os.lstat(os.path.join(e.path, MARKER))
        except OSError:
            continue
        if not _is_regular(st.st_mode):
            continue
        out.append(Checkpoint(path=e.path, name=e.name, completed_ns=st.st_mtime_ns))
    out.sort(key=lambda c: (c.completed_ns, c.name), reverse=True)
    return out


def latest_complete(directory: str) -> Optional[Checkpoint]:
    """The newest complete checkpoint in directory, or None."""
    all_ = list_complete(directory)
    return all_[0] if all_ else None


def _is_regular(mode: int) -> bool:
    import stat

    return stat.S_ISREG(mode)


def checkpoint_name(step: int) -> str:
    """Names that sort in the order they are written: step-000000042."""
    return f"step-{step:09d}"


# ---------------------------------------------------------------------------
# Writing checkpoints.


def _fsync_path(path: str, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_checkpoint(root: str, name: str, fill: Callable[[str], None],
                    on_stage: Optional[Callable[[str], None]] = None) -> Checkpoint:
    """Writes a complete checkpoint named name into root: fill(tmp) writes
    its files into a temporary directory; then every file there is synced,
    COMPLETE is written and synced last, the directory is renamed to name and
    root is synced. Killed at any point, it leaves no new complete
    checkpoint or a whole one (a ".tmp-" leftover is not a checkpoint; the
    driver prunes it). A complete checkpoint of that name already there is
    kept and returned (the same step saved twice); an incomplete one is
    replaced. on_stage(stage) is called after each stage (tests kill the
    process there)."""
    if not name or name.startswith(".") or os.sep in name:
        raise ValueError(f"checkpoint name {name!r}: must be one path element not starting with '.'")
    stage = on_stage or (lambda s: None)
    final = os.path.join(root, name)
    os.makedirs(root, exist_ok=True)
    if os.path.lexists(final):
        if os.path.isdir(final) and not os.path.islink(final) and _is_complete(final):
            return Checkpoint(final, name, os.lstat(os.path.join(final, MARKER)).st_mtime_ns)
    tmp = tempfile.mkdtemp(prefix=TEMP_PREFIX + name + "-", dir=root)
    stage("temp-created")
    try:
        fill(tmp)
        stage("filled")
        for dirpath, _, files in os.walk(tmp):
            for f in files:
                _fsync_path(os.path.join(dirpath, f))
            _fsync_path(dirpath, directory=True)
        stage("synced")
        marker = os.path.join(tmp, MARKER)
        with open(marker, "x") as f:
            f.write(time.strftime("%Y-%m-%dT%H:%M:%SZ\n", time.gmtime()))
            f.flush()
            os.fsync(f.fileno())
        _fsync_path(tmp, directory=True)
        stage("marker-written")
        if os.path.lexists(final):  # an incomplete leftover of that name
            _remove_tree(final)
        os.rename(tmp, final)
        stage("renamed")
    except BaseException:
        _remove_tree(tmp)
        raise
    _fsync_path(root, directory=True)
    stage("root-synced")
    return Checkpoint(final, name, os.lstat(os.path.join(final, MARKER)).st_mtime_ns)


def _is_complete(path: str) -> bool:
    try:
        return _is_regular(os.lstat(os.path.join(path, MARKER)).st_mode)
    except OSError:
        return False


def _remove_tree(path: str) -> None:
    import shutil

    if os.path.islink(path) or not os.path.isdir(path):
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
        return
    shutil.rmtree(path, ignore_errors=True)


def prune(root: str, keep: int) -> List[str]:
    """Removes all but the newest keep complete checkpoints of root (the
    driver does this itself at task start and exit: call it only where no
    driver does, e.g. under docker)."""
    if keep < 1:
        raise ValueError(f"keep must be at least 1, got {keep}")
    doomed = [c.path for c in list_complete(root)[keep:]]
    for p in doomed:
        _remove_tree(p)
    return doomed


# ---------------------------------------------------------------------------
# Progress.


def write_progress(path: str, iteration: int, total: Optional[int] = None, loss: Optional[float] = None) -> None:
    """Replaces the progress file whole: {"iteration", "total", "loss"}."""
    doc = {"iteration": int(iteration)}
    if total is not None:
        doc["total"] = int(total)
    if loss is not None and loss == loss:  # not NaN: JSON has no NaN
        doc["loss"] = float(loss)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f)
    os.replace(tmp, path)


# ---------------------------------------------------------------------------
# The gang environment.


@dataclass
class Gang:
    size: int  # parts (nodes) of the gang; 1 for a one-node job
    rank: int  # this part's rank
    gpus_per_node: int
    master_addr: str
    master_port: int
    peers: List[str]


def gang_env(env=None) -> Gang:
    """What the themis driver tells a part of a gang (docs/gangs.md)."""
    env = os.environ if env is None else env

    def num(key, default):
        v = env.get(key, "")
        if v == "":
            return default
        try:
            return int(v)
        except ValueError:
            raise ValueError(f"{key}={v!r}: not a whole number") from None

    size, rank = num("THEMIS_GANG_SIZE", 1), num("THEMIS_GANG_RANK", 0)
    if size < 1 or not 0 <= rank < size:
        raise ValueError(f"THEMIS_GANG_RANK={rank} THEMIS_GANG_SIZE={size}: rank must be in 0..size-1")
    peers = [p for p in env.get("THEMIS_GANG_PEERS", "").split(",") if p]
    return Gang(size=size, rank=rank, gpus_per_node=num("THEMIS_GPUS_PER_NODE", 0),
                master_addr=env.get("MASTER_ADDR", "127.0.0.1"), master_port=num("MASTER_PORT", 29500), peers=peers)


def torchrun_command(script_and_args: List[str], nproc_per_node: Optional[int] = None,
                     python: Optional[str] = None, env=None) -> List[str]:
    """The torchrun (torch.distributed.run) command line for this part of
    the gang: --nnodes and --node_rank from the gang, the master from
    MASTER_ADDR/MASTER_PORT, and nproc_per_node processes (default: the
    part's GPUs, THEMIS_GPUS_PER_NODE, or 1 where there are none)."""
    g = gang_env(env)
    n = nproc_per_node if nproc_per_node else (g.gpus_per_node or 1)
    return [python or sys.executable, "-m", "torch.distributed.run",
            f"--nnodes={g.size}", f"--node_rank={g.rank}", f"--nproc_per_node={n}",
            f"--master_addr={g.master_addr}", f"--master_port={g.master_port}"] + list(script_and_args)


# ---------------------------------------------------------------------------
# The job.


@dataclass
class Notice:
    reason: str
    deadline: str  # RFC 3339
    signal: str

    def seconds_left(self) -> Optional[float]:
        """Seconds until the deadline, or None when it cannot be read."""
        import datetime

        try:
            d = datetime.datetime.strptime(self.deadline, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
        except ValueError:
            return None
        return d.timestamp() - time.time()


def read_notice(path: str) -> Optional[Notice]:
    """The driver's notice file, or None while there is none. A notice that
    cannot be parsed still counts as a notice."""
    if not path:
        return None
    try:
        with open(path) as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        return Notice(reason=f"notice file unreadable: {e}", deadline="", signal="")
    try:
        doc = json.loads(raw)
        return Notice(reason=str(doc.get("reason", "")), deadline=str(doc.get("deadline", "")), signal=str(doc.get("signal", "")))
    except (ValueError, AttributeError):
        return Notice(reason="notice file not JSON", deadline="", signal="")


@dataclass
class Saved:
    path: str
    step: int
    seconds: float
    bytes: int


class Job:
    """The protocol for one process of a training job (one rank).

    checkpoint_dir, resume_from, notice_file and progress_file default to
    the driver's THEMIS_* variables. signals: the names to treat as a
    checkpoint request (default: all six the stanza allows). log: where
    protocol messages go (default: stderr, "themis_ckpt: ..." lines).
    """

    def __init__(self, checkpoint_dir: Optional[str] = None, signals=CHECKPOINT_SIGNALS,
                 log: Optional[Callable[[str], None]] = None, env=None):
        env = os.environ if env is None else env
        self.env = env
        self.checkpoint_dir = checkpoint_dir if checkpoint_dir is not None else env.get("THEMIS_CHECKPOINT_DIR", "")
        self.notice_file = env.get("THEMIS_NOTICE_FILE", "")
        self.progress_file = env.get("THEMIS_PROGRESS_FILE", "")
        self.restart_count = int(env.get("THEMIS_RESTART_COUNT", "0") or 0)
        self.log = log or (lambda msg: print("themis_ckpt: " + msg, file=sys.stderr, flush=True))
        self.signalled: Optional[str] = None
        self.last_save_seconds: Optional[float] = None
        self._stop_agreed = False
        for name in signals:
            signal.signal(getattr(signal, name), self._on_signal)
        if self.checkpoint_dir:
            # Under the themis driver the dir exists; under another driver
            # the job's first run creates it (docs/drivers.md).
            os.makedirs(self.checkpoint_dir, exist_ok=True)

    def _on_signal(self, signum, frame):
        # Only a flag: the step or save in progress finishes first.
        self.signalled = signal.Signals(signum).name

    # -- ranks ---------------------------------------------------------

    @staticmethod
    def _dist():
        try:
            import torch.distributed as dist
        except ImportError:
            return None
        return dist if dist.is_available() and dist.is_initialized() else None

    @property
    def rank(self) -> int:
        d = self._dist()
        return d.get_rank() if d else int(self.env.get("RANK", "0") or 0)

    @property
    def world_size(self) -> int:
        d = self._dist()
        return d.get_world_size() if d else int(self.env.get("WORLD_SIZE", "1") or 1)

    # -- resuming ------------------------------------------------------

    def resume_from(self) -> Optional[str]:
        """The checkpoint to resume from, or None on a first start."""
        if "THEMIS_RESUME_FROM" in self.env:
            return self.env["THEMIS_RESUME_FROM"] or None
        if not self.checkpoint_dir:
            return None
        c = latest_complete(self.checkpoint_dir)
        return c.path if c else None

    def load(self, map_location=None, file: str = STATE_FILE):
        """torch.load of the resume point's state file, or None on a first
        start. With several ranks, every rank must resume from the same
        checkpoint: a RuntimeError says which rank differs."""
        import torch

        path = self.resume_from()
        d = self._dist()
        if d is not None and d.get_world_size() > 1:
            names = [None] * d.get_world_size()
            d.all_gather_object(names, os.path.basename(path) if path else "")
            if len(set(names)) != 1:
                raise RuntimeError(f"the ranks would resume from different checkpoints: {names}")
        if path is None:
            return None
        return torch.load(os.path.join(path, file), map_location=map_location)

    # -- stopping ------------------------------------------------------

    def notice(self) -> Optional[Notice]:
        return read_notice(self.notice_file)

    def stop_requested_here(self) -> bool:
        """This process was signalled or the notice file exists."""
        return self.signalled is not None or (bool(self.notice_file) and os.path.exists(self.notice_file))

    def should_stop(self) -> bool:
        """Whether to checkpoint and exit now, between two steps. With
        several ranks every rank must call it at every step: the request is
        all-reduced, so all stop after the same step."""
        if self._stop_agreed:
            return True
        here = self.stop_requested_here()
        d = self._dist()
        if d is not None and d.get_world_size() > 1:
            import torch

            backend = d.get_backend()
            dev = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
            flag = torch.tensor([1 if here else 0], dtype=torch.int32, device=dev)
            d.all_reduce(flag, op=d.ReduceOp.MAX)
            here = bool(flag.item())
        self._stop_agreed = here
        return here

    def why(self) -> str:
        """Why the job stops: the notice's reason or the signal."""
        n = self.notice()
        if n is not None:
            return f"{n.reason} (deadline {n.deadline or '?'})"
        if self.signalled:
            return self.signalled
        return "another rank was asked to stop"

    # -- saving --------------------------------------------------------

    def save(self, step: int, state, file: str = STATE_FILE, keep: int = 0) -> Optional[Saved]:
        """Rank 0 writes state (torch.save) as checkpoint step-<step>,
        atomically; with several ranks, every rank waits until it is
        complete (a barrier). Returns what rank 0 wrote, None on the other
        ranks or without a checkpoint dir. keep > 0 prunes to the newest
        keep checkpoints (only where no driver prunes)."""
        import torch

        d = self._dist()
        saved = None
        if self.rank == 0 and self.checkpoint_dir:
            start = time.monotonic()
            n = self.notice()
            left = n.seconds_left() if n else None
            if left is not None and self.last_save_seconds is not None and self.last_save_seconds > left:
                self.log(f"warning: the last checkpoint took {self.last_save_seconds:.2f} s, "
                         f"{left:.1f} s are left before the deadline")

            def fill(tmp):
                with open(os.path.join(tmp, file), "wb") as f:
                    torch.save(state, f)

            c = save_checkpoint(self.checkpoint_dir, checkpoint_name(step), fill)
            secs = time.monotonic() - start
            self.last_save_seconds = secs
            size = sum(os.path.getsize(os.path.join(c.path, f)) for f in os.listdir(c.path))
            saved = Saved(path=c.path, step=step, seconds=secs, bytes=size)
            if keep > 0:
                prune(self.checkpoint_dir, keep)
        elif not self.checkpoint_dir and self.rank == 0:
            self.log("THEMIS_CHECKPOINT_DIR is not set: no checkpoint written")
        if d is not None and d.get_world_size() > 1:
            d.barrier()
        return saved

    # -- progress ------------------------------------------------------

    def report(self, iteration: int, total: Optional[int] = None, loss: Optional[float] = None) -> None:
        """Progress for the scheduler (rank 0 only; failures are not fatal:
        progress is advice)."""
        if not self.progress_file or self.rank != 0:
            return
        try:
            write_progress(self.progress_file, iteration, total, loss)
        except OSError as e:
            self.log(f"progress not written: {e}")


# ---------------------------------------------------------------------------
# Data position.


class StepSampler:
    """A batch sampler whose position is the global step: batch s (1-based)
    is batch (s-1) % per_epoch of epoch (s-1) // per_epoch, each epoch a
    permutation of range(n) from a generator seeded by (seed, epoch), each
    batch split among world ranks (rank r takes every world-th index).
    Iterating yields the index lists of steps start+1, start+2, ... forever;
    give it to a DataLoader as batch_sampler. Incomplete last batches of an
    epoch are dropped."""

    def __init__(self, n: int, batch_size: int, seed: int, start: int = 0, rank: int = 0, world: int = 1):
        if batch_size * world > n:
            raise ValueError(f"a global batch of {batch_size}x{world} is larger than the {n} samples")
        self.n, self.batch_size, self.seed, self.start, self.rank, self.world = n, batch_size, seed, start, rank, world
        self.per_epoch = n // (batch_size * world)

    def position(self, step: int):
        """(epoch, batch within the epoch) of step (1-based), 0-based."""
        return (step - 1) // self.per_epoch, (step - 1) % self.per_epoch

    def _perm(self, epoch: int):
        import torch

        g = torch.Generator()
        g.manual_seed(self.seed * 1_000_003 + epoch)
        return torch.randperm(self.n, generator=g)

    def batch(self, step: int) -> List[int]:
        epoch, b = self.position(step)
        return self._batch(self._perm(epoch), b)

    def _batch(self, perm, b: int) -> List[int]:
        g = self.batch_size * self.world
        chunk = perm[b * g:(b + 1) * g]
        return chunk[self.rank::self.world].tolist()

    def __iter__(self):
        step = self.start
        epoch, perm = None, None
        while True:
            step += 1
            e, b = self.position(step)
            if e != epoch:
                epoch, perm = e, self._perm(e)
            yield self._batch(perm, b)

    def __len__(self):
        # DataLoader asks for a length; the stream is endless.
        return sys.maxsize


# ---------------------------------------------------------------------------
# Command line: the torchrun launcher.


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="themis_ckpt.py", description=(
        "torchrun: start this part of a gang with torch.distributed.run from the themis driver's environment "
        "(THEMIS_GANG_SIZE, THEMIS_GANG_RANK, THEMIS_GPUS_PER_NODE, MASTER_ADDR, MASTER_PORT). "
        "SIGUSR1 and SIGUSR2 are ignored by torchrun's agent (its workers handle them), so a job whose "
        "checkpoint_signal is one of them stops with exit 0: torchrun treats SIGTERM, SIGINT, SIGHUP and "
        "SIGQUIT as its own death and exits 1 after its workers stop."))
    sub = p.add_subparsers(dest="cmd", required=True)
    tr = sub.add_parser("torchrun", help="run torch.distributed.run for this part of the gang")
    tr.add_argument("--nproc-per-node", type=int, default=0,
                    help="processes on this node (default: THEMIS_GPUS_PER_NODE, or 1)")
    tr.add_argument("--print", action="store_true", help="print the command instead of running it")
    tr.add_argument("script", nargs=argparse.REMAINDER, help="the training script and its arguments")
    args = p.parse_args(argv)
    if not args.script:
        p.error("torchrun: name the training script")
    try:
        cmd = torchrun_command(args.script, nproc_per_node=args.nproc_per_node or None)
    except ValueError as e:
        print(f"themis_ckpt.py torchrun: {e}", file=sys.stderr)
        return 2
    if args.print:
        print(" ".join(cmd))
        return 0
    print("themis_ckpt: " + " ".join(cmd[1:]), file=sys.stderr, flush=True)
    # torchrun runs in this process, its workers are its children. Ignored
    # dispositions survive their exec; torchrun's agent does not touch these
    # two, and the workers' Job installs its own handlers.
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    from torch.distributed import run as torchrun

    _fix_std_from_str()
    torchrun.main(cmd[3:])
    return 0


def _fix_std_from_str() -> None:
    """torch 1.13's torchrun on Python 3.11 (Debian bookworm's python3-torch)
    fails at start ("'NoneType' object has no attribute 'get'"):
    Std.from_str("0") looks the value up by iterating the IntFlag Std, and
    since Python 3.11 iterating a flag enum skips its zero member NONE, so
    the default --redirects 0 becomes None. Map the lost zero back to
    Std.NONE; a torch that gets it right is left as it is."""
    from torch.distributed.elastic.multiprocessing import api

    if api.Std.from_str("0") is not None:
        return
    broken = api.Std.from_str

    def from_str(vm):
        r = broken(vm)
        if r is None:
            return api.Std.NONE
        if isinstance(r, dict):
            return {k: (api.Std.NONE if v is None else v) for k, v in r.items()}
        return r

    api.Std.from_str = from_str


if __name__ == "__main__":
    sys.exit(main())
