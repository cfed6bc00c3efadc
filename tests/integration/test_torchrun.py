#!/usr/bin/python3
"""ckptrun over a real launcher: `torchrun --standalone --nproc_per_node=2`
running a DDP trainer on gloo (CPU) that writes checkpoint-N/ with a shard
per rank and the marker last from rank 0 (ddp_trainer.py), taking part
through ckpt_helper.

  1. `--signal SIGUSR1` reaches the two ranks (torchrun does not handle it),
     the log names their pids, and the checkpoint holds both shards; then
     SIGTERM to ckptrun: exit 75.
  2. SIGTERM to the job's process group: exit 75.
  3. SIGTERM to every process at once (torchrun forwards it to the ranks
     as well): exit 75.
  4. SIGKILL of ckptrun: no process of the tree survives 2 s.
  5. A fresh HOME and CKPT_DIR resume from the store and end byte-identical
     to an uninterrupted run.
FastWriter (ctest ckptrun_torchrun_fast): an unmodified trainer saving as
HF Trainer does every ~0.7 s, the two newest kept, gets commits while it
runs, each one whole and resumable (issue 26, item 5).
Each step runs on a fresh machine (HOME, CKPT_DIR) with the same store, so
every start resumes from the previous one's checkpoint.

Needs /usr/bin/python3 with torch and /usr/bin/torchrun (Debian's, which
wants `--redirects 1 --tee 1` with Python 3.11); exits 77 (skip) without.
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ckpt_testlib as T  # noqa: E402
from ckpt_testlib import alive, descendants, wait_for  # noqa: E402
TRAINER = os.path.join(HERE, "ddp_trainer.py")
TORCHRUN = "/usr/bin/torchrun"
STEPS = "600"


def launcher(*args):
    return [TORCHRUN, "--standalone", "--nproc_per_node=2", "--redirects", "1", "--tee", "1",
            TRAINER, "--steps", STEPS] + list(args)


class Case(T.Case):
    PREFIX = "ckpt-torchrun-"


class Torchrun(Case):
    def start_job(self, extra=()):
        out = os.path.join(self.work, "out")
        p = self.start(["--signal", "USR1", "--complete-marker", "trainer_state.json",
                        "--settle", "30s", "--grace", "30s"] + list(extra) + ["--"] +
                       launcher("--out", out, "--sleep-ms", "10"))
        ranks = {}
        for r in (0, 1):
            m = p.wait_line(r"trainer: rank %d start at step (\d+) pid (\d+)" % r, timeout=120)
            ranks[r] = (int(m.group(1)), int(m.group(2)))
        p.wait_line(r" connect pid=%d kind=helper" % ranks[0][1])
        p.wait_line(r" connect pid=%d kind=helper" % ranks[1][1])
        return p, ranks

    def stopped(self, p, after):
        rc = p.wait(120)
        self.assertEqual(rc, 75, p.text())
        text = p.text()
        self.assertIn("final committed=true", text)
        steps = [int(s) for s in re.findall(r" commit step=(\d+) files=3 ", text)]
        self.assertTrue(steps and max(steps) > after, text)
        return max(steps)

    def test_torchrun_ddp(self):
        ref_dir = tempfile.mkdtemp(dir=self.tmp)
        r = subprocess.run(launcher("--out", os.path.join(ref_dir, "out"), "--sleep-ms", "0"),
                           env=dict(self.env, CKPT_DIR=os.path.join(ref_dir, "ck")),
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(os.path.join(ref_dir, "out"), "rb") as f:
            ref = f.read()

        # 1. the request signal reaches the ranks, not torchrun
        p, ranks = self.start_job()
        time.sleep(0.5)
        p.p.send_signal(signal.SIGUSR2)
        m = p.wait_line(r" request reason=manual via=SIGUSR1 pids=(\S+)")
        self.assertEqual(sorted(map(int, m.group(1).split(","))),
                         sorted(pid for _, pid in ranks.values()), p.text())
        p.wait_line(r" commit step=\d+ files=3 .*entry=checkpoint-\d+", timeout=60)
        p.p.send_signal(signal.SIGTERM)
        last = self.stopped(p, 0)
        self.assertIn("request reason=stop via=SIGUSR1", p.text())

        # 2. SIGTERM to the job's process group (torchrun and its ranks)
        self.fresh("group")
        p, ranks = self.start_job()
        self.assertEqual(ranks[0][0], last)  # resumed from the store
        time.sleep(0.5)
        child = int(re.search(r" child_pid=(\d+)", p.text()).group(1))
        os.killpg(os.getpgid(child), signal.SIGTERM)
        last = self.stopped(p, last)

        # 3. SIGTERM to every process at once
        self.fresh("all")
        p, ranks = self.start_job()
        self.assertEqual(ranks[0][0], last)
        time.sleep(0.5)
        for pid in [p.p.pid] + descendants(p.p.pid):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        last = self.stopped(p, last)

        # 4. SIGKILL of ckptrun: nothing of the tree survives
        self.fresh("kill")
        p, ranks = self.start_job()
        tree = descendants(p.p.pid)
        self.assertTrue({pid for _, pid in ranks.values()} <= set(tree), tree)
        os.kill(p.p.pid, signal.SIGKILL)
        t0 = time.monotonic()
        p.wait()
        wait_for(lambda: not any(alive(x) for x in tree), timeout=2,
                 what="the tree to die: %s" % [x for x in tree if alive(x)])
        self.assertLess(time.monotonic() - t0, 2.0)

        # 5. a fresh machine resumes and finishes identical
        self.fresh("final")
        out = os.path.join(self.work, "out")
        rc, _, err = self.ckptrun("--complete-marker", "trainer_state.json", "--",
                                  *launcher("--out", out, "--sleep-ms", "0"), timeout=300)
        self.assertEqual(rc, 0, err)
        self.assertIn("is gone: lease taken over at once", err)  # after the SIGKILL
        self.assertRegex(err, r"trainer: rank 0 start at step %d " % last)
        with open(out, "rb") as f:
            self.assertEqual(f.read(), ref)


class FastWriter(Case):
    """Issue 26, item 5: an unmodified 2-rank DDP trainer saving as HF Trainer
    does (the marker trainer_state.json first, then each rank's shard in
    place, the two newest checkpoint-N/ kept) every ~0.7 s. Each checkpoint
    lives about 1.5 s, shorter than the marker's quiet time: before, nothing
    was committed until the job exited. Every checkpoint committed while it
    runs must be complete (both shards of its step) and resume."""

    ARGS = ("--hf-order", "--keep", "2", "--no-saved", "--every", "20", "--sleep-ms", "30")

    def job(self, *extra):
        out = os.path.join(self.work, "out")
        # no CKPT_SOCKET: the trainer does not even import-connect the helper
        return ["env", "-u", "CKPT_SOCKET"] + launcher("--out", out, *self.ARGS) + list(extra)

    def shards_ok(self, d, step):
        import torch
        names = sorted(os.listdir(d))
        self.assertEqual(names, ["checkpoint-%d" % step], d)
        c = os.path.join(d, names[0])
        self.assertEqual(sorted(os.listdir(c)), ["rank-0.pt", "rank-1.pt", "trainer_state.json"])
        with open(os.path.join(c, "trainer_state.json")) as f:
            self.assertEqual(json.load(f)["global_step"], step)
        for r in (0, 1):
            st = torch.load(os.path.join(c, "rank-%d.pt" % r))
            self.assertEqual((st["step"], st["rank"]), (step, r))

    def test_fast_hf_writer_is_committed_while_it_runs(self):
        p = self.start(["--complete-marker", "trainer_state.json", "--grace", "20s", "--"] +
                       self.job())
        p.wait_line(r"trainer: rank 0 start at step 0 ", timeout=120)
        t0 = time.monotonic()
        # commits come while the trainer saves, each ~2 s at most after its save
        deadline = t0 + 60
        while len(re.findall(r" commit step=\d+ files=3 ", p.text())) < 4:
            self.assertLess(time.monotonic(), deadline, p.text())
            self.assertIsNone(p.p.poll(), p.text())
            time.sleep(0.1)
        saves = len(re.findall(r"trainer: rank 0 saved step", p.text()))
        commits = [int(s) for s in re.findall(r" commit step=(\d+) files=3 ", p.text())]
        print("fast writer: %d saves, %d commits in %.1f s" % (saves, len(commits),
              time.monotonic() - t0), file=sys.stderr)
        self.assertEqual(commits, sorted(set(commits)), p.text())  # each a newer one
        p.p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(120), 75, p.text())
        self.assertNotIn("commit-failed", p.text())
        infos = json.loads(self.ckptrun("ls", "--json")[1])
        self.assertTrue(infos, p.text())
        for i in infos:  # every retained checkpoint whole: its step's shards
            d = tempfile.mkdtemp(dir=self.tmp)
            rc, _, err = self.ckptrun("restore", "--step", str(i["step"]), d)
            self.assertEqual(rc, 0, err)
            self.shards_ok(d, i["step"])
        newest = max(i["step"] for i in infos)
        # a fresh machine resumes the newest and runs on
        self.fresh("resume")
        p = self.start(["--complete-marker", "trainer_state.json", "--grace", "20s", "--"] +
                       self.job())
        p.wait_line(r"trainer: rank 0 start at step %d " % newest, timeout=120)
        p.wait_line(r"trainer: rank 1 start at step %d " % newest, timeout=60)
        p.wait_line(r" commit step=\d+ files=3 ", timeout=60)
        p.p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(120), 75, p.text())


if __name__ == "__main__":
    if not (os.access(TORCHRUN, os.X_OK) and
            subprocess.run(["/usr/bin/python3", "-c", "import torch.distributed"],
                           capture_output=True).returncode == 0):
        print("SKIP: torchrun or torch not available", file=sys.stderr)
        sys.exit(77)
    unittest.main()
