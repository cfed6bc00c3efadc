#!/usr/bin/python3
"""A small, fully deterministic PyTorch trainer that checkpoints and resumes.

This is way 2 of docs/ckptrun.md, "How the trainer takes part" ("signal-aware"): it writes its
own checkpoints as `checkpoint-N/` directories in its checkpoint directory and
resumes from the newest one; ckptrun (if any) commits each directory to the
store once it has been renamed into place, and restores the newest committed
one into CKPT_DIR before starting us again.

    /usr/bin/python3 train.py --steps 200 --every 50 --out final.bin
    ckptrun -- /usr/bin/python3 train.py --steps 200 --every 50 --out final.bin

Guarantee: killed at any instant (SIGKILL included) and restarted until it
finishes, the bytes written to --out are identical to those of a run that was
never interrupted. That holds because
  * every source of randomness is a seeded generator whose state is saved,
  * the arithmetic is deterministic (one thread, deterministic algorithms),
  * a checkpoint is written into a temporary directory, fsynced, and renamed
    into place, so a `checkpoint-N/` that exists is always complete,
  * the step counter saved is the number of steps already applied, so resume
    continues exactly where the saved state left off.

Standard library + torch only. Run with Debian's /usr/bin/python3.
"""

import argparse
import json
import os
import re
import shutil
import signal
import sys

# A checkpoint request (SIGUSR1) may come at any time, even while torch is
# still importing (a second or more): record it from the very start, instead
# of dying of the signal's default action. The save happens at the next safe
# point (between steps), never inside the handler.
_requested = []
if __name__ == "__main__":
    signal.signal(signal.SIGUSR1, lambda signum, frame: _requested.append(1))

import torch  # noqa: E402 -- after the handler, on purpose

SEED = 1234
IN_FEATURES = 16
HIDDEN = 32
BATCH = 64
LR = 1e-2

CKPT_RE = re.compile(r"^checkpoint-(\d+)$")
TMP_PREFIX = ".tmp-checkpoint-"


# ---------------------------------------------------------------- model & data

def setup_determinism():
    """One thread and deterministic kernels: the same inputs give the same
    bits, run after run, on this machine."""
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(SEED)


def build():
    """@return (model, optimizer, data generator), freshly seeded."""
    torch.manual_seed(SEED)
    model = torch.nn.Sequential(
        torch.nn.Linear(IN_FEATURES, HIDDEN),
        torch.nn.Tanh(),
        torch.nn.Dropout(p=0.1),  # uses the global RNG: its state is saved too
        torch.nn.Linear(HIDDEN, 1),
    )
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    gen = torch.Generator().manual_seed(SEED + 1)
    return model, opt, gen


def train_step(model, opt, gen):
    """One optimisation step on a synthetic batch drawn from `gen`."""
    x = torch.randn(BATCH, IN_FEATURES, generator=gen)
    noise = 0.01 * torch.randn(BATCH, 1, generator=gen)
    y = torch.sin(x.sum(dim=1, keepdim=True)) + noise
    model.train()
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()


def final_bytes(model):
    """The trainer's final state as bytes: every parameter, in order."""
    return b"".join(p.detach().contiguous().numpy().tobytes()
                    for p in model.parameters())


# ---------------------------------------------------------------- checkpoints

def default_dir():
    return os.environ.get("CKPT_DIR") or "./checkpoints"


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _save_file(obj, path):
    with open(path, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())


def save_checkpoint(ckpt_dir, step, model, opt, gen):
    """Write `checkpoint-<step>/` atomically: temp dir, fsync, rename, fsync.

    @return the final path. A crash before the rename leaves only a temp dir
    (removed at the next start); after it, a complete checkpoint."""
    final = os.path.join(ckpt_dir, "checkpoint-%d" % step)
    tmp = os.path.join(ckpt_dir, "%s%d-%d" % (TMP_PREFIX, step, os.getpid()))
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp, mode=0o700)
    _save_file(model.state_dict(), os.path.join(tmp, "model.pt"))
    _save_file(opt.state_dict(), os.path.join(tmp, "optimizer.pt"))
    _save_file({"torch": torch.get_rng_state(), "data": gen.get_state()},
               os.path.join(tmp, "rng.pt"))
    with open(os.path.join(tmp, "trainer_state.json"), "w") as f:
        json.dump({"step": step, "seed": SEED}, f)
        f.flush()
        os.fsync(f.fileno())
    fsync_dir(tmp)
    if os.path.isdir(final):
        # Same step saved twice (e.g. a periodic save and a signal at the
        # same safe point, or a resumed run re-saving): the content is
        # identical by determinism, so keep the one already in place.
        shutil.rmtree(tmp)
        return final
    os.rename(tmp, final)
    fsync_dir(ckpt_dir)
    return final


def list_checkpoints(ckpt_dir):
    """@return [(step, path)] of complete checkpoints, newest first."""
    out = []
    try:
        names = os.listdir(ckpt_dir)
    except FileNotFoundError:
        return out
    for name in names:
        m = CKPT_RE.match(name)
        path = os.path.join(ckpt_dir, name)
        if m and os.path.isdir(path):
            out.append((int(m.group(1)), path))
    out.sort(reverse=True)
    return out


def remove_temporaries(ckpt_dir):
    """Temp dirs are left only by a save that was killed: never complete."""
    try:
        names = os.listdir(ckpt_dir)
    except FileNotFoundError:
        return
    for name in names:
        if name.startswith(TMP_PREFIX):
            shutil.rmtree(os.path.join(ckpt_dir, name), ignore_errors=True)


def load_checkpoint(path, model, opt, gen):
    """Load a checkpoint directory into the objects. @return its step."""
    model.load_state_dict(torch.load(os.path.join(path, "model.pt")))
    opt.load_state_dict(torch.load(os.path.join(path, "optimizer.pt")))
    rng = torch.load(os.path.join(path, "rng.pt"))
    torch.set_rng_state(rng["torch"])
    gen.set_state(rng["data"])
    with open(os.path.join(path, "trainer_state.json")) as f:
        return int(json.load(f)["step"])


def resume(ckpt_dir, model, opt, gen):
    """Load the newest checkpoint that loads. @return its step, 0 if none.

    Only complete directories exist (they are renamed into place), but one
    restored by hand may still be damaged: fall back to an older one."""
    for step, path in list_checkpoints(ckpt_dir):
        try:
            return load_checkpoint(path, model, opt, gen)
        except Exception as e:  # noqa: BLE001 -- any damage: try older
            print("train.py: cannot load %s (%s), trying an older one"
                  % (path, e), file=sys.stderr)
            model, opt, gen = _reset(model, opt, gen)
    return 0


def _reset(model, opt, gen):
    # A failed load may have modified part of the state: start clean.
    fresh_model, fresh_opt, fresh_gen = build()
    model.load_state_dict(fresh_model.state_dict())
    opt.load_state_dict(fresh_opt.state_dict())
    gen.set_state(fresh_gen.get_state())
    torch.manual_seed(SEED)
    return model, opt, gen


def write_output(path, data):
    """Atomically write the final state, so a kill never leaves half of it."""
    tmp = "%s.tmp-%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# ---------------------------------------------------------------- main

def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, required=True, help="total steps")
    p.add_argument("--every", type=int, default=0,
                   help="checkpoint every K steps (0: only on SIGUSR1)")
    p.add_argument("--out", required=True, help="file for the final state")
    p.add_argument("--dir", default=None,
                   help="checkpoint directory (default $CKPT_DIR, else ./checkpoints)")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    ckpt_dir = args.dir or default_dir()
    os.makedirs(ckpt_dir, mode=0o700, exist_ok=True)

    requested = _requested
    signal.signal(signal.SIGUSR1, lambda signum, frame: requested.append(1))

    setup_determinism()
    model, opt, gen = build()
    remove_temporaries(ckpt_dir)
    step = resume(ckpt_dir, model, opt, gen)
    if step:
        print("train.py: resumed at step %d" % step, file=sys.stderr)

    while step < args.steps:
        train_step(model, opt, gen)
        step += 1
        periodic = args.every > 0 and step % args.every == 0
        if periodic or requested:
            requested.clear()
            save_checkpoint(ckpt_dir, step, model, opt, gen)

    write_output(args.out, final_bytes(model))
    return 0


if __name__ == "__main__":
    sys.exit(main())
