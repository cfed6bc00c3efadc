#!/usr/bin/python3
"""A deterministic 2-rank DDP trainer (torch.distributed, gloo, CPU) that
takes part through ckpt_helper, written the way HF Trainer checkpoints a
distributed run: checkpoint-N/ holds one shard per rank (rank-R.pt), and
rank 0 writes the marker trainer_state.json last, after a barrier (so the
entry is complete -- `--complete-marker trainer_state.json` -- only once
every shard is in place). Run it with torchrun; test_torchrun.py drives it.

With --hf-order it saves as HF Trainer really does: rank 0 writes the
marker first, then every rank its shard in place (torch.save to the final
name, no rename), then the checkpoints beyond --keep are deleted
(save_total_limit); with --each-node every node's local rank 0 writes the
marker and rotates in that node's own CKPT_DIR (save_on_each_node), and
each rank's shard goes to its own node's directory. --no-saved leaves
ckpt_helper.saved() out (an unmodified trainer).

A request (ckpt_helper.requested(): SIGUSR1 with --signal SIGUSR1, or a
request over the socket, or a SIGTERM/SIGINT the helper took as a stop) on
any rank becomes a save on every rank: the ranks agree each step with an
all_reduce (a save is collective). Same --out bytes whether it ran through
or was stopped and resumed any number of times.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "python"))
import ckpt_helper  # noqa: E402  (first: the helper takes its signals at import)

import argparse  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

MARKER = "trainer_state.json"


def batch(step, rank):
    g = torch.Generator().manual_seed(1000003 * step + rank)
    x = torch.randn(16, 8, generator=g)
    y = x.sum(dim=1, keepdim=True) * 0.5
    return x, y


def newest(ckdir):
    best = None
    for name in os.listdir(ckdir) if os.path.isdir(ckdir) else []:
        m = re.fullmatch(r"checkpoint-(\d+)", name)
        if m and os.path.exists(os.path.join(ckdir, name, MARKER)):
            if best is None or int(m.group(1)) > best:
                best = int(m.group(1))
    return best


def hf_save(args, ckdir, d, step, rank, world, writer, model, opt):
    """As HF Trainer: the marker (trainer_state.json) first, then each rank's
    shard written in place, then rotation. No temporary names: an entry is
    complete only once every rank is done with it."""
    if writer:
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, MARKER), "w") as f:
            json.dump({"global_step": step, "world_size": world}, f)
    dist.barrier()  # the marker is there before any shard
    torch.save({"step": step, "rank": rank, "model": model.state_dict(),
                "opt": opt.state_dict()}, os.path.join(d, "rank-%d.pt" % rank))
    dist.barrier()
    if writer:
        if args.keep:
            have = sorted(int(m.group(1)) for n in os.listdir(ckdir)
                          for m in [re.fullmatch(r"checkpoint-(\d+)", n)] if m)
            for s in have[:-args.keep]:
                shutil.rmtree(os.path.join(ckdir, "checkpoint-%d" % s), ignore_errors=True)
        if rank == 0 and not args.no_saved:
            ckpt_helper.saved(d, step)
        print("trainer: rank %d saved step %d" % (rank, step), file=sys.stderr, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--every", type=int, default=100000)
    ap.add_argument("--out", required=True)
    ap.add_argument("--sleep-ms", type=float, default=10)
    ap.add_argument("--hf-order", action="store_true", help="marker first, shards in place")
    ap.add_argument("--keep", type=int, default=0, help="save_total_limit (0: keep all)")
    ap.add_argument("--each-node", action="store_true", help="save_on_each_node")
    ap.add_argument("--no-saved", action="store_true", help="never call ckpt_helper.saved()")
    args = ap.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(0)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    ckdir = ckpt_helper.checkpoint_dir()
    os.makedirs(ckdir, exist_ok=True)

    # Resume: rank 0 picks the newest complete checkpoint, everyone loads
    # its own shard of it.
    found = torch.tensor([newest(ckdir) or 0 if rank == 0 else 0])
    dist.broadcast(found, 0)
    local = int(os.environ.get("LOCAL_RANK", rank))
    writer = local == 0 if args.each_node else rank == 0  # marker, rotation
    step = int(found.item())
    if step:
        st = torch.load(os.path.join(ckdir, "checkpoint-%d" % step, "rank-%d.pt" % rank))
        assert st["step"] == step and st["rank"] == rank
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
    ddp = DDP(model)
    print("trainer: rank %d start at step %d pid %d" % (rank, step, os.getpid()),
          file=sys.stderr, flush=True)

    while step < args.steps:
        x, y = batch(step, rank)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        step += 1
        time.sleep(args.sleep_ms / 1000.0)
        want = torch.tensor([1 if (ckpt_helper.requested() or step % args.every == 0) else 0])
        dist.all_reduce(want, op=dist.ReduceOp.MAX)
        if not want.item():
            continue
        d = os.path.join(ckdir, "checkpoint-%d" % step)
        if args.hf_order:
            hf_save(args, ckdir, d, step, rank, world, writer, model, opt)
            continue
        os.makedirs(d, exist_ok=True)
        tmp = os.path.join(d, "rank-%d.pt.tmp" % rank)
        torch.save({"step": step, "rank": rank, "model": model.state_dict(),
                    "opt": opt.state_dict()}, tmp)
        os.rename(tmp, os.path.join(d, "rank-%d.pt" % rank))
        dist.barrier()  # every shard is in place
        if rank == 0:
            with open(os.path.join(d, MARKER), "w") as f:
                json.dump({"global_step": step, "world_size": world}, f)
            if not args.no_saved:
                ckpt_helper.saved(d, step)
            print("trainer: saved step %d" % step, file=sys.stderr, flush=True)
        dist.barrier()

    if rank == 0:
        with open(args.out, "wb") as f:
            for p in model.parameters():
                f.write(p.detach().numpy().tobytes())
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
