#!/usr/bin/python3
"""A small deterministic trainer for ckptrun's integration tests (stdlib only).

Its "model" is a SHA-256 chain: state(step+1) = sha256(state(step) || step).
It checkpoints into CKPT_DIR (default ./checkpoints) and, on start, resumes
from the newest checkpoint it finds there, so a run that is stopped and
resumed any number of times ends with the same --out bytes as one that ran
straight through.

Modes (how it takes part, DESIGN.md section 3):
  dirs       unmodified: writes checkpoint-N/ (model.bin, state.json) every
             --every steps, in place (no rename), like HF Trainer
  rename     unmodified: writes tmp-checkpoint-N/ then renames it into place
  signal     signal-aware: saves (renamed into place) at the next step after
             the CKPT_SIGNAL signal (SIGUSR1 by default); also every --every
  lightning  unmodified: writes epoch=E-step=N.ckpt files and a last.ckpt
             symbolic link to the newest, like PyTorch Lightning
  ignore     saves once, at step --every, and then never again; on SIGTERM
             or the request signal it hangs (never exits by itself): tests
             that ckptrun still stops it in time
"""
import argparse
import hashlib
import json
import os
import re
import signal
import sys
import time

MODEL_BYTES = 256 * 1024


def model_bytes(state):
    # Deterministic, incompressible-ish bytes derived from the state.
    out = bytearray()
    h = state
    while len(out) < MODEL_BYTES:
        h = hashlib.sha256(h).digest()
        out += h * 8
    return bytes(out[:MODEL_BYTES])


def newest(ckdir):
    best = None
    if not os.path.isdir(ckdir):
        return None
    for name in os.listdir(ckdir):
        m = re.fullmatch(r"checkpoint-(\d+)", name) or re.fullmatch(r"epoch=\d+-step=(\d+)\.ckpt", name)
        if m and (best is None or int(m.group(1)) > best[0]):
            best = (int(m.group(1)), os.path.join(ckdir, name))
    return best


def load(path):
    if os.path.isdir(path):
        with open(os.path.join(path, "state.json")) as f:
            st = json.load(f)
        with open(os.path.join(path, "model.bin"), "rb") as f:
            model = f.read()
    else:
        with open(path, "rb") as f:
            blob = f.read()
        n = int.from_bytes(blob[:4], "big")
        st = json.loads(blob[4:4 + n])
        model = blob[4 + n:]
    state = bytes.fromhex(st["state"])
    if model != model_bytes(state):
        raise SystemExit("trainer: checkpoint %s is torn (model does not match state)" % path)
    return st["step"], state


def write_dir(path, step, state):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "model.bin"), "wb") as f:
        f.write(model_bytes(state))
    with open(os.path.join(path, "state.json"), "w") as f:
        json.dump({"step": step, "state": state.hex()}, f)


def save(mode, ckdir, step, state, epoch):
    if mode in ("dirs", "ignore"):
        write_dir(os.path.join(ckdir, "checkpoint-%d" % step), step, state)
    elif mode in ("rename", "signal"):
        tmp = os.path.join(ckdir, "tmp-checkpoint-%d" % step)
        write_dir(tmp, step, state)
        os.rename(tmp, os.path.join(ckdir, "checkpoint-%d" % step))
    elif mode == "lightning":
        name = "epoch=%d-step=%d.ckpt" % (epoch, step)
        meta = json.dumps({"step": step, "state": state.hex()}).encode()
        with open(os.path.join(ckdir, name), "wb") as f:
            f.write(len(meta).to_bytes(4, "big") + meta + model_bytes(state))
        link = os.path.join(ckdir, "last.ckpt")
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(name, link)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--out", required=True)
    ap.add_argument("--mode", default="dirs",
                    choices=["dirs", "rename", "signal", "lightning", "ignore"])
    ap.add_argument("--sleep-ms", type=float, default=10)
    ap.add_argument("--exit", type=int, default=0, help="exit code at the end")
    args = ap.parse_args()

    ckdir = os.environ.get("CKPT_DIR", "checkpoints")
    os.makedirs(ckdir, exist_ok=True)
    step, state = 0, b"seed"
    found = newest(ckdir)
    if args.mode == "lightning" and os.path.exists(os.path.join(ckdir, "last.ckpt")):
        found = (0, os.path.join(ckdir, "last.ckpt"))
    if found:
        step, state = load(found[1])

    wanted = [False]
    signame = os.environ.get("CKPT_SIGNAL", "none")
    if args.mode == "signal" and signame != "none":
        signal.signal(getattr(signal, signame if signame.startswith("SIG") else "SIG" + signame),
                      lambda *_: wanted.__setitem__(0, True))
    hung = [False]
    if args.mode == "ignore":
        def hang(*_):
            hung[0] = True
        signal.signal(signal.SIGTERM, hang)
        if signame != "none":
            signal.signal(getattr(signal, signame if signame.startswith("SIG") else "SIG" + signame),
                          hang)

    # Printed once the handlers are installed: tests signal after this line.
    print("trainer: start at step %d resumed=%s step_env=%s" % (
        step, os.environ.get("CKPT_RESUMED"), os.environ.get("CKPT_STEP")), file=sys.stderr, flush=True)
    while step < args.steps:
        while hung[0]:
            time.sleep(1)
        state = hashlib.sha256(state + step.to_bytes(8, "big")).digest()
        step += 1
        time.sleep(args.sleep_ms / 1000.0)
        if args.mode == "ignore" and step > args.every:
            continue
        if step % args.every == 0 or wanted[0]:
            wanted[0] = False
            save(args.mode, ckdir, step, state, step // 100)
    with open(args.out, "w") as f:
        f.write("%d %s\n" % (step, state.hex()))
    sys.exit(args.exit)


if __name__ == "__main__":
    main()
