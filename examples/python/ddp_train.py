#!/usr/bin/python3
"""A deterministic DDP trainer that checkpoints the way Hugging Face's
Trainer does in a distributed run, taking part in ckpt through ckpt_helper.

    torchrun --nproc_per_node 2 --redirects 1 --tee 1 ddp_train.py --steps 400 --every 100 \
        --out final.bin
    ckptrun --signal SIGUSR1 -- torchrun --nproc_per_node 2 --redirects 1 --tee 1 ddp_train.py ...
    # (Debian 12's torchrun needs --redirects 1 --tee 1: docs/python.md, "Ranks")
    # several nodes: docs/multirank.md, "Several nodes"

The model is replicated by DDP (every rank holds the same weights), so, as
HF's default does, only global rank 0 saves: checkpoint-N/ holds model.pt,
optimizer.pt, and trainer_state.json written last (the marker:
`--complete-marker trainer_state.json`). It is written into a temporary
directory and renamed into place, so a checkpoint-N/ that exists is whole.
On every other rank -- and on every other node -- nothing is written.

When to save is agreed by every rank: ckpt_helper.requested() is called
once per step on every rank, and a request seen on any rank (a signal
ckptrun sent on one node only, say) makes it True on all of them at the
same step. That is what lets rank 0 save a step the others are at too.

At start every rank loads the newest complete checkpoint-N/ found in the
checkpoint directory by global rank 0 (ckptrun on node 0 restored it there;
other nodes' directories may be empty: rank 0 broadcasts the state). At the
end global rank 0 writes the final parameters to --out: the same bytes
however many times the run was stopped and resumed.

Runs on CPU with gloo (--backend nccl on GPUs: the helper's agreement has a
gloo group of its own).
"""
import os
import sys

import ckpt_helper as ckpt  # first: a request during `import torch` is kept

import argparse  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

MARKER = "trainer_state.json"


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--every", type=int, default=0, help="save every N steps (0: only on request)")
    ap.add_argument("--out", required=True, help="final parameters (global rank 0)")
    ap.add_argument("--dir", default=None, help="checkpoint directory (default CKPT_DIR)")
    ap.add_argument("--sleep-ms", type=float, default=0, help="pause per step (tests)")
    ap.add_argument("--backend", default="gloo")
    return ap.parse_args(argv)


def batch(step, rank):
    """Rank `rank`'s batch of `step`: a function of both, nothing else."""
    g = torch.Generator().manual_seed(1000003 * step + rank)
    x = torch.randn(16, 8, generator=g)
    return x, x.sum(dim=1, keepdim=True) * 0.5


def newest(ckdir):
    """@return the highest N with a complete checkpoint-N/ in ckdir, or 0."""
    best = 0
    for name in os.listdir(ckdir) if os.path.isdir(ckdir) else []:
        m = re.fullmatch(r"checkpoint-(\d+)", name)
        if m and os.path.exists(os.path.join(ckdir, name, MARKER)):
            best = max(best, int(m.group(1)))
    return best


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save(ckdir, step, model, opt, world):
    """Global rank 0: checkpoint-N/ through a temporary directory."""
    final = os.path.join(ckdir, "checkpoint-%d" % step)
    tmp = os.path.join(ckdir, ".tmp-checkpoint-%d-%d" % (step, os.getpid()))
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp, mode=0o700)
    for name, obj in (("model.pt", model.state_dict()), ("optimizer.pt", opt.state_dict())):
        with open(os.path.join(tmp, name), "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
    with open(os.path.join(tmp, MARKER), "w") as f:
        json.dump({"global_step": step, "world_size": world}, f)
        f.flush()
        os.fsync(f.fileno())
    fsync_dir(tmp)
    if os.path.exists(final):  # the same step saved again (a resumed stop)
        shutil.rmtree(final)
    os.rename(tmp, final)
    fsync_dir(ckdir)
    return final


def per_tensor_mean(world, bucket):
    """DDP communication hook: the mean of each gradient over the ranks,
    one all-reduce per parameter, so the order of every sum is the same
    whatever DDP's bucket layout (first iteration of a process or not)."""
    grads = bucket.gradients()
    for g in grads:
        dist.all_reduce(g)
        g /= world
    fut = torch.futures.Future()
    fut.set_result(torch.cat([g.reshape(-1) for g in grads]))
    return fut


def load_state(ckdir, step):
    """Global rank 0: the bytes of checkpoint-<step>/ (model, optimizer)."""
    d = os.path.join(ckdir, "checkpoint-%d" % step)
    with open(os.path.join(d, "model.pt"), "rb") as f:
        m = f.read()
    with open(os.path.join(d, "optimizer.pt"), "rb") as f:
        o = f.read()
    return m, o


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    ckdir = args.dir or ckpt.checkpoint_dir()
    os.makedirs(ckdir, mode=0o700, exist_ok=True)

    # Resume: global rank 0 reads the newest checkpoint and sends it to
    # every rank (other nodes' directories hold nothing of it).
    blob = [None]
    if rank == 0:
        step = newest(ckdir)
        blob[0] = (step, load_state(ckdir, step) if step else None)
    dist.broadcast_object_list(blob, src=0)
    step, state = blob[0]
    if step:
        model.load_state_dict(torch.load(io.BytesIO(state[0])))
        opt.load_state_dict(torch.load(io.BytesIO(state[1])))
    ddp = DDP(model)
    # DDP's own reducer sums gradients packed into buckets that it regroups
    # after its first iteration: a resumed process would add them up in
    # another order than an uninterrupted one (4 ranks: not bit-identical).
    ddp.register_comm_hook(world, per_tensor_mean)
    print("ddp_train: rank %d of %d start at step %d pid %d" % (rank, world, step, os.getpid()),
          file=sys.stderr, flush=True)

    while step < args.steps:
        x, y = batch(step, rank)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
        step += 1
        if args.sleep_ms:
            time.sleep(args.sleep_ms / 1000.0)
        # ckpt: every rank calls requested() once per step; they agree.
        if ckpt.requested() or (args.every and step % args.every == 0):
            if rank == 0:
                path = save(ckdir, step, model, opt, world)
                ckpt.saved(path, step)  # ckpt: tell ckptrun it is complete
                print("ddp_train: saved step %d" % step, file=sys.stderr, flush=True)
            dist.barrier()  # nobody runs ahead of a save (HF waits too)

    if rank == 0:
        tmp = args.out + ".tmp"
        with open(tmp, "wb") as f:
            for p in model.parameters():
                f.write(p.detach().numpy().tobytes())
        os.rename(tmp, args.out)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
