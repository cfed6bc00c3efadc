#!/usr/bin/python3
"""A deterministic trainer that takes part through ckpt_helper (stdlib only),
for the process-tree and stop tests (test_proc.py).

Its "model" is a SHA-256 chain, as in ckptrun_trainer.py: state(step+1) =
sha256(state(step) || step). It saves checkpoint-N/ (model.bin, then
state.json; written as tmp-checkpoint-N/ and renamed into place, then
ckpt_helper.saved()) whenever ckpt_helper.requested() says so and every
--every steps, and resumes from the newest checkpoint-N/ in CKPT_DIR. So a
run stopped and resumed any number of times ends with the same --out bytes
as one that ran straight through.

--socket-file F writes CKPT_SOCKET there (the trust test connects to it);
--save-ms makes each save take that long (a second Ctrl-C during it);
--children N forks N idle children after the helper's handlers are in
place (data-loader workers: they inherit the handlers and must not act
on them); --ignore-term hangs on SIGTERM (a trainer that ignores it).
"""
import argparse
import hashlib
import json
import os
import re
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "python"))
import ckpt_helper  # noqa: E402  (first: the helper takes its signals at import)

MODEL_BYTES = 64 * 1024


def model_bytes(state):
    out = bytearray()
    h = state
    while len(out) < MODEL_BYTES:
        h = hashlib.sha256(h).digest()
        out += h * 8
    return bytes(out[:MODEL_BYTES])


def newest(ckdir):
    best = None
    for name in os.listdir(ckdir) if os.path.isdir(ckdir) else []:
        m = re.fullmatch(r"checkpoint-(\d+)", name)
        if m and os.path.exists(os.path.join(ckdir, name, "state.json")):
            if best is None or int(m.group(1)) > best[0]:
                best = (int(m.group(1)), os.path.join(ckdir, name))
    return best


def load(path):
    with open(os.path.join(path, "state.json")) as f:
        st = json.load(f)
    with open(os.path.join(path, "model.bin"), "rb") as f:
        model = f.read()
    state = bytes.fromhex(st["state"])
    if model != model_bytes(state):
        raise SystemExit("trainer: checkpoint %s is torn" % path)
    return st["step"], state


def save(ckdir, step, state, save_ms):
    tmp = os.path.join(ckdir, "tmp-checkpoint-%d" % step)
    os.makedirs(tmp, exist_ok=True)
    with open(os.path.join(tmp, "model.bin"), "wb") as f:
        f.write(model_bytes(state))
    if save_ms:
        print("trainer: saving step %d" % step, file=sys.stderr, flush=True)
        time.sleep(save_ms / 1000.0)
    with open(os.path.join(tmp, "state.json"), "w") as f:
        json.dump({"step": step, "state": state.hex()}, f)
    final = os.path.join(ckdir, "checkpoint-%d" % step)
    os.rename(tmp, final)
    ckpt_helper.saved(final, step)
    print("trainer: saved step %d" % step, file=sys.stderr, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--every", type=int, default=100000)
    ap.add_argument("--out", required=True)
    ap.add_argument("--sleep-ms", type=float, default=5)
    ap.add_argument("--save-ms", type=float, default=0)
    ap.add_argument("--socket-file")
    ap.add_argument("--children", type=int, default=0)
    ap.add_argument("--ignore-term", action="store_true")
    args = ap.parse_args()

    ckdir = ckpt_helper.checkpoint_dir()
    os.makedirs(ckdir, exist_ok=True)
    step, state = 0, b"seed"
    found = newest(ckdir)
    if found:
        step, state = load(found[1])
    if args.ignore_term:
        signal.signal(signal.SIGTERM, lambda *_: None)
    if args.socket_file:
        with open(args.socket_file + ".tmp", "w") as f:
            f.write(os.environ.get("CKPT_SOCKET", ""))
        os.rename(args.socket_file + ".tmp", args.socket_file)
    kids = []
    for _ in range(args.children):
        pid = os.fork()
        if pid == 0:
            while True:
                time.sleep(1)
        kids.append(pid)
    print("trainer: start at step %d pid %d children %s" % (
        step, os.getpid(), ",".join(map(str, kids))), file=sys.stderr, flush=True)
    while step < args.steps:
        state = hashlib.sha256(state + step.to_bytes(8, "big")).digest()
        step += 1
        time.sleep(args.sleep_ms / 1000.0)
        if ckpt_helper.requested() or step % args.every == 0:
            save(ckdir, step, state, args.save_ms)
    for pid in kids:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    with open(args.out, "w") as f:
        f.write("%d %s\n" % (step, state.hex()))


if __name__ == "__main__":
    main()
