#!/usr/bin/python3
"""A trainer written only against `import ckpt` (docs/python.md): a small
model with bf16 and fp32 parameters, AdamW, data drawn from torch's global
RNG (saved with the state), so a resumed run is byte-identical to an
uninterrupted one. With --ranks it runs under torchrun as DDP (gloo, CPU)
and marks the model and optimizer replicated.

  --steps N        train N steps, then write the parameters' bytes to --out
  --every K        save every K steps (and whenever ckpt.requested())
  --sleep-ms MS    per step, to give a test time to act
  --files          write checkpoint files itself and report them with
                   ckpt.saved() instead of ckpt.save() (the helper's way)
  --loader-workers N  draw each step's batch through a torch DataLoader with
                   N worker processes (fork), from a generator seeded by the
                   step: the workers are in the trainer's process group
Prints "trainer: rank R start at step S pid P", "trainer: rank R saving step
S" (before a save) and "trainer: rank R saved step S" (after) to stderr.
"""
import argparse
import os
import sys
import time

import torch

import ckpt

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=300)
ap.add_argument("--every", type=int, default=25)
ap.add_argument("--sleep-ms", type=float, default=0)
ap.add_argument("--out", required=True)
ap.add_argument("--width", type=int, default=64)
ap.add_argument("--files", action="store_true")
ap.add_argument("--ddp", action="store_true")
ap.add_argument("--loader-workers", type=int, default=0)
ap.add_argument("--big-at", type=int, default=-1,
                help="at this step rank 1 also saves 32 MiB of random bytes (a slow part)")
args = ap.parse_args()

rank = 0
if args.ddp:
    import torch.distributed as dist
    dist.init_process_group("gloo")
    rank = dist.get_rank()

torch.manual_seed(1234)
W = args.width
model = torch.nn.Sequential(torch.nn.Linear(W, 2 * W), torch.nn.Tanh(), torch.nn.Linear(2 * W, W))
# bf16 (gloo of torch 1.13 has no bf16 collectives, CPU no fp16 matmul: fp32 under DDP)
LOW = torch.float32 if args.ddp else torch.bfloat16
model[0].to(LOW)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
net = model
if args.ddp:
    net = torch.nn.parallel.DistributedDataParallel(model)


def forward(x):
    if args.ddp:
        return net(x)  # through DDP: gradients averaged, replicas identical
    return net[2](net[1](net[0](x.to(LOW)).float()))


start = 0
if args.files:
    import pickle
    d = ckpt.checkpoint_dir()
    have = sorted(int(n.split("-")[1]) for n in os.listdir(d) if n.startswith("step-")) \
        if os.path.isdir(d) else []
    if have:
        with open(os.path.join(d, "step-%d" % have[-1]), "rb") as f:
            state = pickle.load(f)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optim"])
        torch.set_rng_state(state["rng"])
        start = state["step"] + 1
else:
    state = ckpt.load()
    if state:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optim"])
        torch.set_rng_state(state["rng"])
        start = state["step"] + 1
print("trainer: rank %d start at step %d pid %d" % (rank, start, os.getpid()), file=sys.stderr,
      flush=True)

torch.manual_seed(1000 + rank) if start == 0 and rank else None


class StepBatches(torch.utils.data.Dataset):
    """Batch i: drawn from a generator seeded by i (the same whoever draws it)."""

    def __len__(self):
        return args.steps

    def __getitem__(self, i):
        return torch.randn(16, W, generator=torch.Generator().manual_seed(7919 * i + rank))


batches = None
if args.loader_workers:
    batches = iter(torch.utils.data.DataLoader(
        torch.utils.data.Subset(StepBatches(), range(start, args.steps)), batch_size=None,
        num_workers=args.loader_workers))
for step in range(start, args.steps):
    x = next(batches) if batches is not None else torch.randn(16, W)
    loss = (forward(x) - x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if args.sleep_ms:
        time.sleep(args.sleep_ms / 1000)
    if ckpt.requested() or step % args.every == 0:
        state = {"model": model.state_dict(), "optim": opt.state_dict(), "step": step,
                 "rng": torch.get_rng_state()}
        # before: a stop's signal may end the process as soon as the save commits
        print("trainer: rank %d saving step %d" % (rank, step), file=sys.stderr, flush=True)
        if args.files:
            import pickle
            d = ckpt.checkpoint_dir()
            os.makedirs(d, exist_ok=True)
            tmp = os.path.join(d, ".tmp-%d" % step)
            with open(tmp, "wb") as f:
                pickle.dump(state, f)
            os.rename(tmp, os.path.join(d, "step-%d" % step))
            ckpt.saved(os.path.join(d, "step-%d" % step), step)
        elif args.ddp:
            if step == args.big_at and rank == 1:
                g = torch.Generator().manual_seed(step)  # not the training's RNG
                state["big"] = torch.randint(0, 255, (32 << 20,), dtype=torch.uint8,
                                             generator=g)
            ckpt.save(step, state, replicated=("model", "optim"))
        else:
            ckpt.save(step, state)
        print("trainer: rank %d saved step %d" % (rank, step), file=sys.stderr, flush=True)
ckpt.wait()
if rank == 0:
    with open(args.out + ".tmp", "wb") as f:
        for p in model.parameters():
            f.write(p.detach().contiguous().view(torch.uint8).numpy().tobytes())
    os.rename(args.out + ".tmp", args.out)
print("trainer: rank %d done" % rank, file=sys.stderr, flush=True)
if args.ddp:
    torch.distributed.destroy_process_group()
