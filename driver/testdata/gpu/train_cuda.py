"""A CUDA training job that keeps the themis checkpoint protocol
(docs/checkpoints.md), for the driver's real-GPU test (driver/gpu_test.go).

A multi-layer perceptron learns a fixed random linear teacher on CUDA with
Adam and a step learning-rate schedule. Every step's batch comes from a
generator seeded by the step number, so where the data loader stands is the
step count, and a run preempted and resumed ends with the same weights as an
uninterrupted one (deterministic algorithms on; the test sets
CUBLAS_WORKSPACE_CONFIG).

The protocol is examples/pytorch/themis_ckpt.py's (the one implementation
of it in Python; docs/pytorch.md):

  resume:      from $THEMIS_RESUME_FROM/state.pt (model, optimizer, schedule, step)
  checkpoint:  on a checkpoint signal (SIGTERM, SIGINT, SIGUSR1, ...) or when
               $THEMIS_NOTICE_FILE appears, after the step in progress: a
               temporary ".tmp-step-N-*" dir, state.pt synced, COMPLETE last,
               renamed to step-N; then exit 0
  progress:    $THEMIS_PROGRESS_FILE, replaced whole every report
  output:      "train: step N loss L", "train: checkpointed at step N in S s (B bytes), exiting",
               "train: resumed from step N in S s", "train: done step N loss L digest D"
"""
import argparse
import hashlib
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples", "pytorch"))

import torch  # noqa: E402

import themis_ckpt  # noqa: E402


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
    job = themis_ckpt.Job()
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
    start = time.monotonic()
    state = job.load(map_location=dev)
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        step = state["step"]
        if dev.type == "cuda":
            torch.cuda.synchronize()
        print(f"train: resumed from step {step} in {time.monotonic() - start:.3f} s", flush=True)
    first = step + 1
    loss = None
    while step < args.steps:
        if job.should_stop():
            saved = job.save(step, {"step": step, "model": model.state_dict(), "opt": opt.state_dict(),
                                    "sched": sched.state_dict()})
            print(f"train: checkpointed at step {step} in {saved.seconds:.3f} s ({saved.bytes} bytes), exiting", flush=True)
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
            job.report(step, args.steps, value)
    digest = hashlib.sha256()
    for t in model.state_dict().values():
        digest.update(t.detach().cpu().contiguous().numpy().tobytes())
    final = loss.item() if loss is not None else float("nan")
    print(f"train: done step {step} loss {final:.6f} digest {digest.hexdigest()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
