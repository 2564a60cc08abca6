"""A CUDA training job that keeps the themis checkpoint protocol
(docs/checkpoints.md), for the driver's real-GPU test (driver/gpu_test.go).

A multi-layer perceptron learns a fixed random linear teacher on CUDA with
Adam and a step learning-rate schedule. Every step's batch comes from a
generator seeded by the step number, so where the data loader stands is the
step count, and a run preempted and resumed ends with the same weights as an
uninterrupted one (deterministic algorithms on; the test sets
CUBLAS_WORKSPACE_CONFIG).

  resume:      from $THEMIS_RESUME_FROM/state.pt (model, optimizer, schedule, step)
  checkpoint:  on SIGTERM, SIGINT or SIGUSR1, or when $THEMIS_NOTICE_FILE appears,
               after the step in progress: a temporary ".step-N-*" dir, state.pt
               synced, COMPLETE last, renamed to step-N; then exit 0
  progress:    $THEMIS_PROGRESS_FILE, replaced whole every report
  output:      "train: step N loss L", "train: checkpointed at step N in S s (B bytes), exiting",
               "train: resumed from step N in S s", "train: done step N loss L digest D"
"""
import argparse
import hashlib
import json
import os
import signal
import sys
import tempfile
import time

import torch

asked = False


def on_signal(signum, frame):
    global asked
    asked = True


def build(args, dev):
    torch.manual_seed(args.seed)
    layers = []
    for _ in range(args.layers):
        layers += [torch.nn.Linear(args.hidden, args.hidden), torch.nn.ReLU()]
    layers.append(torch.nn.Linear(args.hidden, 16))
    model = torch.nn.Sequential(*layers).to(dev)
    teacher = torch.randn(args.hidden, 16, generator=torch.Generator().manual_seed(args.seed + 1)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=100, gamma=0.7)
    return model, teacher, opt, sched


def batch(args, step, teacher, dev):
    g = torch.Generator(device=dev)
    g.manual_seed(args.seed * 1_000_003 + step)
    x = torch.randn(args.batch, args.hidden, generator=g, device=dev)
    return x, x @ teacher / args.hidden**0.5


def save(step, model, opt, sched):
    start = time.monotonic()
    root = os.environ["THEMIS_CHECKPOINT_DIR"]
    name = f"step-{step:09d}"
    tmp = tempfile.mkdtemp(prefix="." + name + "-", dir=root)
    path = os.path.join(tmp, "state.pt")
    with open(path, "wb") as f:
        torch.save({"step": step, "model": model.state_dict(), "opt": opt.state_dict(),
                    "sched": sched.state_dict()}, f)
        f.flush()
        os.fsync(f.fileno())
    size = os.path.getsize(path)
    with open(os.path.join(tmp, "COMPLETE"), "w") as f:
        f.write(f"step {step}\n")
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, os.path.join(root, name))
    fd = os.open(root, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    return time.monotonic() - start, size


def report(step, total, loss):
    path = os.environ.get("THEMIS_PROGRESS_FILE")
    if not path:
        return
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"iteration": step, "total": total, "loss": loss}, f)
    os.replace(tmp, path)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, required=True, help="the step to finish at")
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--report-every", type=int, default=10)
    p.add_argument("--device", default="cuda", help="cpu: a smoke test of the protocol without a GPU")
    args = p.parse_args()
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
        signal.signal(s, on_signal)
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device(args.device)
    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(0)
        print(f"train: device {props.name} uuid GPU-{getattr(props, 'uuid', '')} count {torch.cuda.device_count()} "
              f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')}", flush=True)
    else:
        print(f"train: device {dev.type} uuid none count 0 CUDA_VISIBLE_DEVICES=", flush=True)
    model, teacher, opt, sched = build(args, dev)
    params = sum(p.numel() for p in model.parameters())
    print(f"train: model {params} parameters, {params * 4 >> 20} MiB of weights", flush=True)
    step = 0
    resume = os.environ.get("THEMIS_RESUME_FROM", "")
    if resume:
        start = time.monotonic()
        state = torch.load(os.path.join(resume, "state.pt"), map_location=dev)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        step = state["step"]
        if dev.type == "cuda":
            torch.cuda.synchronize()
        print(f"train: resumed from step {step} in {time.monotonic() - start:.3f} s", flush=True)
    notice = os.environ.get("THEMIS_NOTICE_FILE", "")
    first = step + 1
    loss = None
    while step < args.steps:
        if asked or (notice and os.path.exists(notice)):
            secs, size = save(step, model, opt, sched)
            print(f"train: checkpointed at step {step} in {secs:.3f} s ({size} bytes), exiting", flush=True)
            return 0
        step += 1
        x, y = batch(args, step, teacher, dev)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if step == first or step % args.report_every == 0:
            value = loss.item()
            print(f"train: step {step} loss {value:.6f}", flush=True)
            report(step, args.steps, value)
    digest = hashlib.sha256()
    for t in model.state_dict().values():
        digest.update(t.detach().cpu().contiguous().numpy().tobytes())
    final = loss.item() if loss is not None else float("nan")
    print(f"train: done step {step} loss {final:.6f} digest {digest.hexdigest()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
