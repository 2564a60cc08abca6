"""A real PyTorch training job that keeps the themis checkpoint protocol
through themis_ckpt (docs/pytorch.md).

A multi-layer perceptron (LayerNorm, GELU) learns to classify seeded
synthetic data: x ~ N(0, I) in --features dimensions, labelled by a fixed
random two-layer teacher network into --classes classes (a task an MLP can
learn, whose loss falls from ln(classes) over a few thousand steps). AdamW,
a learning rate that warms up linearly for --warmup steps and then decays on
a cosine to --steps, gradient clipping. The batches come from a
themis_ckpt.StepSampler: each epoch a seeded permutation of the data set,
so the data position is the step and survives a restart mid-epoch.

Under torchrun (WORLD_SIZE > 1) it forms a process group (gloo on CPU, nccl
on CUDA), wraps the model in DistributedDataParallel and gives each rank
its share of every batch; rank 0 writes the gang's checkpoints and every
rank resumes from the same one. Start a gang's part with

    python3 themis_ckpt.py torchrun train.py --steps 3000

Deterministic for a seed (torch.use_deterministic_algorithms, --threads
intra-op threads), so a run preempted and resumed ends with the same
weights, bit for bit, as one that never stopped.

Output (tests parse it; driver/testdata/gpu/train_cuda.py prints the same):

    train: device <name> uuid <id> count N CUDA_VISIBLE_DEVICES=<v>
    train: rank R of W (<backend>), master <addr>:<port>       (W > 1)
    train: model N parameters, M MiB of weights
    train: resumed from step N in S s
    train: data position epoch E batch B of K
    train: step N loss L lr X
    train: checkpointed at step N in S s (B bytes), exiting
    train: rank R stops at step N (rank 0 checkpoints the gang), exiting
    train: done step N loss L digest D
"""
import argparse
import hashlib
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import themis_ckpt  # noqa: E402


class SyntheticTeacher(torch.utils.data.Dataset):
    """n samples x ~ N(0, I) labelled by argmax(W2 tanh(W1 x)) of a random
    teacher, all drawn from generators seeded by seed."""

    def __init__(self, n: int, features: int, classes: int, seed: int):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, features, generator=g)
        w1 = torch.randn(features, 4 * classes, generator=g) / features ** 0.5
        w2 = torch.randn(4 * classes, classes, generator=g)
        self.y = (torch.tanh(self.x @ w1) @ w2).argmax(dim=1)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def say(line: str) -> None:
    """Print one line of output in one write. A gang's ranks under torchrun
    share stdout, unbuffered (PYTHONUNBUFFERED): print would write the text
    and its newline apart, and another rank's line could land between
    them ("...exitingtrain: checkpointed ...")."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def build_model(features: int, hidden: int, layers: int, classes: int, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    mods, width = [], features
    for _ in range(layers):
        mods += [torch.nn.Linear(width, hidden), torch.nn.LayerNorm(hidden), torch.nn.GELU()]
        width = hidden
    mods.append(torch.nn.Linear(width, classes))
    return torch.nn.Sequential(*mods)


def lr_lambda(warmup: int, total: int):
    def f(step: int) -> float:  # step: scheduler steps taken so far
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return 0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * progress))
    return f


def digest_of(model: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for t in model.state_dict().values():
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, required=True, help="the step to finish at")
    p.add_argument("--samples", type=int, default=32768, help="samples in the data set")
    p.add_argument("--features", type=int, default=64)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--batch", type=int, default=64, help="samples per step and rank")
    p.add_argument("--lr", type=float, default=3e-3, help="peak learning rate")
    p.add_argument("--warmup", type=int, default=100, help="steps of linear warm-up")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--checkpoint-every", type=int, default=0, help="also checkpoint every N steps (0: only when asked)")
    p.add_argument("--keep", type=int, default=0, help="prune to the newest N checkpoints (only where no driver prunes)")
    p.add_argument("--log-every", type=int, default=10, help="print the loss every N steps")
    p.add_argument("--threads", type=int, default=1, help="intra-op CPU threads (results depend on it)")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    job = themis_ckpt.Job()  # first: no early signal may kill us
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if args.device == "cuda":
        torch.cuda.set_device(local_rank)
        dev = torch.device("cuda", local_rank)
        props = torch.cuda.get_device_properties(dev)
        say(f"train: device {props.name} uuid GPU-{getattr(props, 'uuid', '')} count {torch.cuda.device_count()} "
              f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')}")
    else:
        dev = torch.device("cpu")
        say(f"train: device cpu uuid none count 0 CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')}")
    if world > 1:
        import torch.distributed as dist

        backend = "nccl" if dev.type == "cuda" else "gloo"
        dist.init_process_group(backend, init_method="env://")
        say(f"train: rank {dist.get_rank()} of {dist.get_world_size()} ({backend}), "
              f"master {os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}")
        # Leave the gang's process group before the interpreter exits: gloo's
        # worker threads still hold tensors, and tearing them down during
        # finalization aborts the rank ("terminate called without an active
        # exception", SIGABRT) now and then after a clean stop.
        try:
            return train(args, job, dev, world, local_rank)
        finally:
            dist.destroy_process_group()
    return train(args, job, dev, world, local_rank)


def train(args, job, dev, world: int, local_rank: int) -> int:
    """Train from the job's latest checkpoint until the last step or until
    the job is asked to stop; 0 either way."""
    rank = job.rank

    data = SyntheticTeacher(args.samples, args.features, args.classes, args.seed)
    model = build_model(args.features, args.hidden, args.layers, args.classes, args.seed).to(dev)
    params = sum(p.numel() for p in model.parameters())
    if rank == 0:
        say(f"train: model {params} parameters, {params * 4 >> 20} MiB of weights")
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(args.warmup, args.steps))

    step = 0
    start = time.monotonic()
    state = job.load(map_location=dev)
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        step = state["step"]
        say(f"train: resumed from step {step} in {time.monotonic() - start:.3f} s")
    sampler = themis_ckpt.StepSampler(len(data), args.batch, args.seed, start=step, rank=rank, world=world)
    if rank == 0 and step > 0:
        e, b = sampler.position(step + 1)
        say(f"train: data position epoch {e} batch {b} of {sampler.per_epoch}")
    net = model
    if world > 1:
        net = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank] if dev.type == "cuda" else None)
    loader = torch.utils.data.DataLoader(data, batch_sampler=sampler)

    first, loss = step + 1, None
    batches = iter(loader)
    while step < args.steps:
        if job.should_stop():
            if rank == 0:
                e, b = sampler.position(step + 1)
                say(f"train: stopping: {job.why()}; data position epoch {e} batch {b} of {sampler.per_epoch}")
            saved = job.save(step, {"step": step, "model": model.state_dict(), "opt": opt.state_dict(),
                                    "sched": sched.state_dict(), "args": vars(args)}, keep=args.keep)
            if saved is not None:
                say(f"train: checkpointed at step {step} in {saved.seconds:.3f} s ({saved.bytes} bytes), exiting")
            elif rank != 0:
                say(f"train: rank {rank} stops at step {step} (rank 0 checkpoints the gang), exiting")
            return 0
        x, y = next(batches)
        x, y = x.to(dev), y.to(dev)
        step += 1
        loss = torch.nn.functional.cross_entropy(net(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step == first or step % args.log_every == 0 or step == args.steps:
            value = loss.detach()
            if world > 1:
                import torch.distributed as dist

                dist.all_reduce(value)
                value = value / world
            value = value.item()
            if rank == 0:
                say(f"train: step {step} loss {value:.6f} lr {sched.get_last_lr()[0]:.6g}")
            job.report(step, args.steps, value)
        if args.checkpoint_every and step % args.checkpoint_every == 0 and step < args.steps:
            job.save(step, {"step": step, "model": model.state_dict(), "opt": opt.state_dict(),
                            "sched": sched.state_dict(), "args": vars(args)}, keep=args.keep)
    # The final model as a checkpoint too: a job resumed after its end
    # finds it done.
    job.save(step, {"step": step, "model": model.state_dict(), "opt": opt.state_dict(),
                    "sched": sched.state_dict(), "args": vars(args)}, keep=args.keep)
    if rank == 0:
        final = loss.item() if loss is not None else float("nan")
        say(f"train: done step {step} loss {final:.6f} digest {digest_of(model)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
