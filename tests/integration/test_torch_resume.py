#!/usr/bin/python3
"""Kill examples/python/train.py (or train_helper.py) with SIGKILL at random
moments, restart it until it finishes, and check its output is byte-identical
to an uninterrupted run's.

    /usr/bin/python3 tests/integration/test_torch_resume.py [--trainer PATH]
        [--seed N] [--kills N]

Exit 0 on success, 1 on a mismatch or failure, 77 (ctest's skip code) when
torch cannot be imported. Half the kills land at a random time (during the
import, training or a save), half shortly after a new checkpoint appeared
(so a resume with lost work is certain, whatever the machine's load). Some
kills send SIGUSR1 first, so saves on request are exercised alongside the
periodic ones. Standard library only; the
trainer runs under /usr/bin/python3 (Debian's torch).
"""

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ckpt_testlib as T  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
PYTHON = "/usr/bin/python3"
STEPS = 2000
EVERY = 100


def have_torch():
    r = subprocess.run([PYTHON, "-c", "import torch"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return r.returncode == 0


def trainer_cmd(trainer, out, ckdir):
    return [PYTHON, trainer, "--steps", str(STEPS), "--every", str(EVERY),
            "--out", out, "--dir", ckdir]


def env_without_ckptrun():
    # The test drives the trainer directly: no ckptrun variables may leak in
    # from a surrounding run.
    env = dict(os.environ)
    for k in ("CKPT_SOCKET", "CKPT_DIR", "CKPT_STEP", "CKPT_RESUMED",
              "LD_PRELOAD"):
        env.pop(k, None)
    return env


def count_checkpoints(ckdir):
    try:
        return sum(1 for n in os.listdir(ckdir) if n.startswith("checkpoint-"))
    except FileNotFoundError:
        return 0


def wait_new_checkpoint(p, ckdir, timeout):
    """Wait until the trainer adds a checkpoint. @return seconds waited, or
    None if it exited or the timeout passed."""
    start = count_checkpoints(ckdir)
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if p.poll() is not None:
            return None
        if count_checkpoints(ckdir) > start:
            return time.monotonic() - t0
        time.sleep(0.005)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trainer",
                    default=os.path.join(ROOT, "examples", "python", "train.py"))
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--kills", type=int, default=8,
                    help="kills to aim for before letting it finish")
    ap.add_argument("--preload", metavar="SO",
                    help="run the interrupted trainer under this "
                         "libckpt_preload.so with a fake ckptrun socket")
    args = ap.parse_args()
    if not have_torch():
        print("SKIP: %s cannot import torch" % PYTHON)
        return 77
    seed = args.seed if args.seed is not None else int(time.time())
    rnd = random.Random(seed)
    print("seed %d, trainer %s" % (seed, args.trainer))
    env = env_without_ckptrun()
    work = tempfile.mkdtemp(prefix="ckpt-torch-resume-")
    try:
        ref = os.path.join(work, "ref.bin")
        t0 = time.monotonic()
        subprocess.run(trainer_cmd(args.trainer, ref, os.path.join(work, "ref")),
                       env=env, check=True)
        t_full = time.monotonic() - t0
        print("uninterrupted run: %.2fs" % t_full)

        out = os.path.join(work, "out.bin")
        ckdir = os.path.join(work, "ck")
        sink = None
        if args.preload:
            os.mkdir(ckdir)
            sock = os.path.join(work, "ctl.sock")
            sink = T.FakeControl(sock)
            env = dict(env, LD_PRELOAD=args.preload, CKPT_DIR=ckdir,
                       CKPT_SOCKET=sock)
        kills = signalled = runs = resumed = 0
        while True:
            runs += 1
            if runs > args.kills * 4 + 10:
                print("FAIL: no progress after %d runs" % runs)
                return 1
            p = subprocess.Popen(trainer_cmd(args.trainer, out, ckdir),
                                 env=env, stderr=subprocess.PIPE)
            killed = False
            if kills < args.kills:
                if kills % 2 == 0:
                    # Anywhere from during the import to the end of a full
                    # run, whatever the machine's load.
                    delay = rnd.uniform(0.05, t_full * 0.9)
                else:
                    # Shortly after a new checkpoint appeared: the next run
                    # must resume from it, and work since it is lost.
                    delay = wait_new_checkpoint(p, ckdir, t_full * 3)
                    delay = rnd.uniform(0.0, 0.3) if delay is not None else 0
                try:
                    p.wait(timeout=delay)
                except subprocess.TimeoutExpired:
                    if rnd.random() < 0.3:
                        p.send_signal(signal.SIGUSR1)
                        signalled += 1
                        time.sleep(rnd.uniform(0.0, 0.05))
                    p.send_signal(signal.SIGKILL)
                    kills += 1
                    killed = True
            _, err = p.communicate()
            if killed and p.returncode == 0:
                # the run ended between the timeout and the signal: that
                # kill did not land, and nothing was there to resume
                kills -= 1
            if b"resumed at step" in err:
                resumed += 1
            if p.returncode == -signal.SIGKILL:
                continue
            if p.returncode == -signal.SIGUSR1:
                # Sent before the interpreter ran the trainer's first lines
                # (no handler yet): as good as a kill for this test.
                continue
            if p.returncode != 0:
                print("FAIL: trainer exited %d:\n%s" % (p.returncode,
                                                        err.decode()))
                return 1
            break
        ckpts = sorted(os.listdir(ckdir))
        print("runs %d, kills %d (with SIGUSR1 first: %d), resumed %d times,"
              " checkpoints: %s" % (runs, kills, signalled, resumed,
                                    " ".join(ckpts)))
        if kills and not resumed:
            print("FAIL: killed %d times but never resumed" % kills)
            return 1
        if sink is not None:
            if not sink.drain():
                print("FAIL: the shim's connections still open 60 s after the "
                      "trainer's end")
                return 1
            renamed = {m["path"] for m in sink.messages()
                       if m.get("event") == "renamed"}
            final = {os.path.join(ckdir, n) for n in ckpts
                     if n.startswith("checkpoint-")}
            # Each announced entry is a complete checkpoint; a kill between
            # a rename and its message may cost only that message.
            if not renamed or not renamed <= final:
                print("FAIL: shim announced %s, checkpoints are %s"
                      % (sorted(renamed), sorted(final)))
                return 1
            print("shim announced %d of %d checkpoints"
                  % (len(renamed), len(final)))
        with open(ref, "rb") as a, open(out, "rb") as b:
            if a.read() != b.read():
                print("FAIL: output differs from the uninterrupted run "
                      "(seed %d)" % seed)
                return 1
        print("OK: identical output (%d bytes)" % os.path.getsize(ref))
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
