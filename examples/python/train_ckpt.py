#!/usr/bin/python3
"""A PyTorch trainer that checkpoints with `import ckpt` (docs/python.md):
copy it, replace the model, the data and the step with yours.

Alone, with torchrun, and under ckptrun (notices, leases, recovery):

    /usr/bin/python3 train_ckpt.py --steps 600 --out final.bin
    ckptrun -- /usr/bin/python3 train_ckpt.py --steps 600 --out final.bin
    ckptrun -- torchrun --nproc_per_node 2 --redirects 1 --tee 1 \\
        train_ckpt.py --steps 600 --out final.bin

Stopped (SIGTERM, Ctrl-C, a cloud notice), ckptrun has the trainer save at
its next step, commits, exits 75 and prints the command that resumes it.
Alone (with or without torchrun), a SIGTERM or Ctrl-C has it save at its
next step, wait for the commit and stop saying so; run the same command to
resume.

Everything that decides the next step is in the checkpoint -- the model,
the optimizer's moments, the step and each rank's data generator -- so a
resumed run ends with exactly the parameters of one never stopped (--out:
their bytes, written by rank 0 at the end). Resumed on another number of
ranks (--nproc_per_node changed), it goes on from the model and optimizer
with a new data stream per rank.
"""
import argparse
import os
import sys
import time

import torch

import ckpt

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--steps", type=int, default=600, help="steps in all (default 600)")
ap.add_argument("--every", type=int, default=200,
                help="also save every N steps (default 200); ckptrun's requests are answered "
                     "at the next step whatever N is")
ap.add_argument("--sleep-ms", type=float, default=0, help="pause per step, to watch it")
ap.add_argument("--out", help="write the final parameters' bytes here (rank 0)")
args = ap.parse_args()

# Under torchrun (WORLD_SIZE > 1): DDP over gloo on CPU. ckpt agrees on every
# save and load through this same torch.distributed job.
world = int(os.environ.get("WORLD_SIZE", "1"))
ddp = world > 1
rank = 0
if ddp:
    import torch.distributed as dist
    dist.init_process_group("gloo")
    rank = dist.get_rank()

torch.manual_seed(0)  # the same initial model on every rank
model = torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.Tanh(), torch.nn.Linear(128, 32))
net = torch.nn.parallel.DistributedDataParallel(model) if ddp else model
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
data = torch.Generator().manual_seed(1000 + rank)  # each rank its own batches


def say(msg):
    # one write per line: print() writes the text and its newline apart, and
    # the ranks share the terminal
    sys.stderr.write("train_ckpt: rank %d %s\n" % (rank, msg))
    sys.stderr.flush()


# The newest committed checkpoint that verifies (every rank the same step),
# or None on a first start. other_world=0: one written by another number of
# ranks (the job back on fewer or more GPUs) gives every rank the model and
# optimizer with rank 0's step, instead of an error.
state, start = ckpt.load(other_world=0), 0
if state:
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optim"])
    start = state["step"] + 1
    if ckpt.loaded()["world_size"] == world:
        data.set_state(state["data"])
    else:  # each rank's batches cannot be split anew: a new stream per rank
        data.manual_seed(1000 + rank + 7919 * start)
        say("the checkpoint is of %d rank(s), this job has %d: new data streams"
            % (ckpt.loaded()["world_size"], world))
say("start at step %d" % start)

loss = None
for step in range(start, args.steps):
    x = torch.randn(64, 32, generator=data)
    loss = (net(x) - x.flip(1)).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if args.sleep_ms:
        time.sleep(args.sleep_ms / 1000)
    # requested(): ckptrun asks (a stop, a notice, --interval), or SIGUSR1
    # when alone; under torchrun true on every rank at the same step. Call it
    # at the same point of every step on every rank.
    if ckpt.requested() or step % args.every == 0 or step == args.steps - 1:
        # Returns once the tensors are copied: compression, dedup, upload and
        # the commit go on in the background while training continues. DDP's
        # model and optimizer are the same on every rank: stored once.
        ckpt.save(step, {"model": model.state_dict(), "optim": opt.state_dict(),
                         "step": step, "data": data.get_state()},
                  replicated=("model", "optim") if ddp else ())
ckpt.wait()  # the last save is committed (raises if it failed)

if rank == 0:
    say("done, %d steps%s" % (args.steps, "" if loss is None else
                                  ", last loss %.6f" % loss.item()))
    if args.out:
        with open(args.out + ".tmp", "wb") as f:
            for p in model.parameters():
                f.write(p.detach().contiguous().numpy().tobytes())
        os.replace(args.out + ".tmp", args.out)
if ddp:
    torch.distributed.destroy_process_group()
