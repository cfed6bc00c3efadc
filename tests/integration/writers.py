#!/usr/bin/python3
"""Checkpoint writers that behave like the trainers people run, for
test_writers.py (stdlib only, except `overwrite`, which uses real torch).

Their "model" is a SHA-256 chain, state(step+1) = sha256(state(step) || step),
so a run stopped and resumed any number of times ends with the same --out
bytes as one that ran straight through. Each resumes the way its framework
does, from what it finds in CKPT_DIR, and refuses a torn checkpoint (exit 3).

  hf         like Hugging Face Trainer: checkpoint-N/ holding model.safetensors,
             optimizer.pt, scheduler.pt, then trainer_state.json (the marker),
             then rng_state_R.pth written by each of --ranks processes (rank 1
             is a separate process, --rank-delay-ms after the marker); then
             rotation with --limit (save_total_limit) through shutil.rmtree,
             or file by file with --slow-rmtree-ms. Resumes from the
             checkpoint-N with the highest N (get_last_checkpoint).
  lightning  like PyTorch Lightning's ModelCheckpoint(save_last="link"):
             epoch=E-step=N.ckpt written to a temporary name and renamed into
             place, last.ckpt removed and made again as a relative symbolic
             link to it (--link-delay-ms later), files beyond --top-k deleted.
             Resumes from last.ckpt (ckpt_path="last").
  overwrite  torch.save(state, CKPT_DIR/"last.pt") every --every-s seconds, in
             place. Resumes from last.pt.
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HF_FILES = ("model.safetensors", "optimizer.pt", "scheduler.pt", "trainer_state.json")
HF_SIZES = {"model.safetensors": 256 * 1024, "optimizer.pt": 192 * 1024, "scheduler.pt": 1024,
            "rng_state": 2048}


def advance(state, step):
    return hashlib.sha256(state + step.to_bytes(8, "big")).digest()


def payload(state, name, size):
    out = bytearray()
    h = hashlib.sha256(state + name.encode()).digest()
    while len(out) < size:
        h = hashlib.sha256(h).digest()
        out += h * 8
    return bytes(out[:size])


def log(msg):
    print("writer: " + msg, file=sys.stderr, flush=True)


def write_slowly(path, data, write_ms):
    """Open, write in pieces (taking about write_ms), close: a real save."""
    pieces = 8 if write_ms > 0 else 1
    step = (len(data) + pieces - 1) // pieces
    with open(path, "wb") as f:
        for i in range(0, len(data), step):
            f.write(data[i:i + step])
            f.flush()
            if write_ms > 0:
                time.sleep(write_ms / 1000.0 / pieces)


def blob(step, state, name, size):
    head = json.dumps({"step": step, "state": state.hex(), "file": name}).encode() + b"\n"
    return head + payload(state, name, size)


def read_blob(path, name):
    """(step, state) of a file written by blob(), or raise ValueError."""
    with open(path, "rb") as f:
        data = f.read()
    nl = data.index(b"\n")
    head = json.loads(data[:nl])
    state = bytes.fromhex(head["state"])
    size = len(data) - nl - 1
    if head["file"] != name or data[nl + 1:] != payload(state, name, size):
        raise ValueError("%s: torn" % path)
    return head["step"], state


# ---- hf ----------------------------------------------------------------------

def hf_check(d, ranks=2):
    """(step, state) of a complete HF-like checkpoint directory, else raise."""
    names = sorted(os.listdir(d))
    want = sorted(list(HF_FILES) + ["rng_state_%d.pth" % r for r in range(ranks)])
    if names != want:
        raise ValueError("%s holds %s, not %s" % (d, names, want))
    with open(os.path.join(d, "trainer_state.json")) as f:
        ts = json.load(f)
    step, state = ts["global_step"], bytes.fromhex(ts["state"])
    for name in names:
        if name == "trainer_state.json":
            continue
        s, st = read_blob(os.path.join(d, name), name)
        if (s, st) != (step, state):
            raise ValueError("%s/%s is of step %d, not %d" % (d, name, s, step))
    return step, state


def hf_last(ckdir):
    best = None
    for name in os.listdir(ckdir) if os.path.isdir(ckdir) else []:
        m = re.fullmatch(r"checkpoint-(\d+)", name)
        if m and os.path.isdir(os.path.join(ckdir, name)):
            if best is None or int(m.group(1)) > best[0]:
                best = (int(m.group(1)), os.path.join(ckdir, name))
    return best


def hf_rank(args):
    """Rank R > 0: writes its rng_state_R.pth into each checkpoint after rank 0
    has written the marker, like every process of a distributed HF run."""
    for line in sys.stdin:
        d, step, state = line.split()
        time.sleep(args.rank_delay_ms / 1000.0)
        name = "rng_state_%d.pth" % args.rank
        write_slowly(os.path.join(d, name), blob(int(step), bytes.fromhex(state), name,
                                                  HF_SIZES["rng_state"]), args.write_ms / 4)
        print("done", flush=True)


def rmtree_slowly(d, ms):
    """shutil.rmtree, one file at a time; the marker goes last (worst case)."""
    names = sorted(os.listdir(d), key=lambda n: (n == "trainer_state.json", n))
    for n in names:
        os.unlink(os.path.join(d, n))
        log("deleted %s/%s" % (os.path.basename(d), n))
        time.sleep(ms / 1000.0)
    os.rmdir(d)
    log("removed %s" % os.path.basename(d))


def hf_save(args, ckdir, step, state, ranks):
    d = os.path.join(ckdir, "checkpoint-%d" % step)
    os.makedirs(d, exist_ok=True)
    for name in HF_FILES[:3]:
        write_slowly(os.path.join(d, name), blob(step, state, name, HF_SIZES[name]), args.write_ms)
    with open(os.path.join(d, "trainer_state.json"), "w") as f:
        json.dump({"global_step": step, "state": state.hex(), "log_history": []}, f)
    for r in ranks:
        r.stdin.write("%s %d %s\n" % (d, step, state.hex()))
        r.stdin.flush()
    name = "rng_state_0.pth"
    write_slowly(os.path.join(d, name), blob(step, state, name, HF_SIZES["rng_state"]), 0)
    for r in ranks:  # barrier
        if r.stdout.readline().strip() != "done":
            raise SystemExit("writer: rank died")
    log("saved checkpoint-%d" % step)
    if args.pause_before_rotate:
        gate = "%s-%d" % (args.pause_before_rotate, step)
        while not os.path.exists(gate):
            time.sleep(0.02)
    if args.limit:
        have = sorted((int(m.group(1)), n) for n in os.listdir(ckdir)
                      for m in [re.fullmatch(r"checkpoint-(\d+)", n)] if m)
        for _, n in have[:-args.limit]:
            if args.slow_rmtree_ms:
                rmtree_slowly(os.path.join(ckdir, n), args.slow_rmtree_ms)
            else:
                shutil.rmtree(os.path.join(ckdir, n))


def hf_main(args, ckdir):
    step, state = 0, b"seed"
    found = hf_last(ckdir)
    if found:
        try:
            step, state = hf_check(found[1], args.ranks)
        except (ValueError, OSError, KeyError) as e:
            log("cannot resume: %s" % e)
            sys.exit(3)
    log("start at step %d" % step)
    ranks = [subprocess.Popen([sys.executable, __file__, "hf-rank", "--rank", str(r),
                               "--rank-delay-ms", str(args.rank_delay_ms),
                               "--write-ms", str(args.write_ms)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for r in range(1, args.ranks)]
    while step < args.steps:
        state = advance(state, step)
        step += 1
        time.sleep(args.sleep_ms / 1000.0)
        if step % args.every == 0:
            hf_save(args, ckdir, step, state, ranks)
    for r in ranks:
        r.stdin.close()
        r.wait()
    return step, state


# ---- lightning -----------------------------------------------------------------

def lightning_check(path):
    return read_blob(path, "lightning.ckpt")


def lightning_main(args, ckdir):
    step, state = 0, b"seed"
    last = os.path.join(ckdir, "last.ckpt")
    if os.path.lexists(last):
        try:
            step, state = lightning_check(last)
        except (ValueError, OSError, KeyError) as e:
            log("cannot resume from last.ckpt: %s" % e)
            sys.exit(3)
    log("start at step %d" % step)
    while step < args.steps:
        state = advance(state, step)
        step += 1
        time.sleep(args.sleep_ms / 1000.0)
        if step % args.every:
            continue
        name = "epoch=%d-step=%d.ckpt" % (step // (args.every * 2), step)
        tmp = os.path.join(ckdir, name + ".tmp")
        write_slowly(tmp, blob(step, state, "lightning.ckpt", 192 * 1024), args.write_ms)
        os.replace(tmp, os.path.join(ckdir, name))
        time.sleep(args.link_delay_ms / 1000.0)
        if os.path.lexists(last):
            os.remove(last)
        os.symlink(name, last)
        have = sorted((int(m.group(1)), n) for n in os.listdir(ckdir)
                      for m in [re.fullmatch(r"epoch=\d+-step=(\d+)\.ckpt", n)] if m)
        for _, n in have[:-args.top_k]:
            os.remove(os.path.join(ckdir, n))
        log("saved %s" % name)
    return step, state


# ---- overwrite (torch) ---------------------------------------------------------

def torch_state(torch, step, state, mb):
    n = mb * 1024 * 1024 // 4
    g = torch.Generator().manual_seed(int.from_bytes(state[:8], "big") & 0x7fffffffffffffff)
    return {"step": step, "state": state.hex(), "w": torch.rand(n, generator=g)}


def overwrite_check(path, mb=4):
    import torch
    obj = torch.load(path)
    step, state = obj["step"], bytes.fromhex(obj["state"])
    if not torch.equal(obj["w"], torch_state(torch, step, state, mb)["w"]):
        raise ValueError("%s: tensor does not match its step" % path)
    return step, state


def overwrite_main(args, ckdir):
    import torch
    step, state = 0, b"seed"
    last = os.path.join(ckdir, "last.pt")
    if os.path.exists(last):
        try:
            step, state = overwrite_check(last, args.mb)
        except Exception as e:  # a torn zip raises anything
            log("cannot resume from last.pt: %s" % e)
            sys.exit(3)
    log("start at step %d" % step)
    saved = time.monotonic()
    while step < args.steps:
        state = advance(state, step)
        step += 1
        time.sleep(args.sleep_ms / 1000.0)
        if time.monotonic() - saved >= args.every_s:
            torch.save(torch_state(torch, step, state, args.mb), last)
            saved = time.monotonic()
            log("saved last.pt at step %d" % step)
    return step, state


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["hf", "hf-rank", "lightning", "overwrite"])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--every-s", type=float, default=3.0)
    ap.add_argument("--sleep-ms", type=float, default=10)
    ap.add_argument("--write-ms", type=float, default=0, help="time to write each file")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--rank", type=int, default=1)
    ap.add_argument("--rank-delay-ms", type=float, default=50)
    ap.add_argument("--limit", type=int, default=0, help="save_total_limit")
    ap.add_argument("--slow-rmtree-ms", type=float, default=0)
    ap.add_argument("--pause-before-rotate", help="before rotating after step N, wait for "
                    "the file PATH-N")
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--link-delay-ms", type=float, default=2)
    ap.add_argument("--mb", type=int, default=4)
    ap.add_argument("--linger-s", type=float, default=0, help="sleep before exiting")
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.mode == "hf-rank":
        hf_rank(args)
        return
    ckdir = os.environ.get("CKPT_DIR", "checkpoints")
    os.makedirs(ckdir, exist_ok=True)
    step, state = {"hf": hf_main, "lightning": lightning_main,
                   "overwrite": overwrite_main}[args.mode](args, ckdir)
    log("done at step %d" % step)
    if args.out:
        with open(args.out, "w") as f:
            f.write("step=%d state=%s\n" % (step, state.hex()))
    time.sleep(args.linger_s)


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    main()
