#!/usr/bin/python3
"""ckptrun's watcher under writers that behave like the trainers people run
(tests/integration/writers.py): Hugging Face Trainer (checkpoint-N/ with a
marker written before the other ranks' shards, rotation), PyTorch Lightning
(temporary file renamed into place, last.ckpt link remade, older files
deleted) and torch.save overwriting last.pt in place. Each runs under the real
ckptrun, is stopped with SIGTERM, and every checkpoint committed is restored
with a fresh HOME and CKPT_DIR and checked whole and consistent; then a fresh
machine resumes and ends byte-identical to an uninterrupted run. The
`Repro*` tests reproduce, deterministically, failures that such writers
once caused.

Run:  /usr/bin/python3 tests/integration/test_writers.py [-v] [TestName...]
Binaries come from $CKPT_BIN (set by ctest), else ./build/bin. `Torch*`
classes need torch (skipped without it).
"""
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import writers  # noqa: E402
from test_ckptrun import CKPTRUN, PY, Case  # noqa: E402

WRITER = os.path.join(HERE, "writers.py")
SEED = int(os.environ.get("CKPTRUN_TEST_SEED", str(int(time.time()))))
RNG = random.Random(SEED)
try:
    import torch  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


class WriterCase(Case):
    def writer(self, *args):
        return [PY, WRITER] + list(args)

    def reference_cmd(self, out, *args):
        return self.writer(*args, "--out", out)  # reference(): an uninterrupted writer

    def infos(self):
        rc, out, err = self.ckptrun("ls", "--json")
        self.assertEqual(rc, 0, err)
        return json.loads(out)

    def restored(self, step=None):
        """A checkpoint restored as a new machine would: fresh HOME and dir."""
        d = tempfile.mkdtemp(dir=self.tmp, prefix="restore-")
        env = dict(self.env, HOME=tempfile.mkdtemp(dir=self.tmp, prefix="home-"),
                   CKPT_DIR=os.path.join(d, "unused"))
        args = ["restore"] + (["--step", str(step)] if step is not None else []) + [
            os.path.join(d, "ck")]
        rc, _, err = self.ckptrun(*args, env=env)
        self.assertEqual(rc, 0, err)
        return os.path.join(d, "ck")

    def check_every_checkpoint(self, check, text=""):
        """check(dir, step) on every committed checkpoint, and on the newest,
        which must be the highest step. @return the newest step."""
        steps = [i["step"] for i in self.infos()]
        self.assertTrue(steps, text)
        for s in steps:
            check(self.restored(s), s)
        newest = self.restored()
        check(newest, max(steps))
        return max(steps)

    def commits(self, p):
        return [l for l in p.lines if re.search(r" commit step=\d+", l)]

    def stop_at_random(self, p, after=r" commit step=\d+", span=(0.0, 1.2)):
        """SIGTERM once `after` was logged, a random moment later. @return
        ckptrun's exit code."""
        try:
            p.wait_line(after, timeout=60)
        except AssertionError:
            if p.p.poll() == 0:
                return 0
            raise
        time.sleep(RNG.uniform(*span))
        if p.p.poll() is not None:
            return p.wait()
        p.p.send_signal(signal.SIGTERM)
        return p.wait()


def check_hf(test, ranks=2):
    def check(d, step):
        names = os.listdir(d)
        test.assertEqual(names, ["checkpoint-%d" % step], d)
        got, _ = writers.hf_check(os.path.join(d, names[0]), ranks)
        test.assertEqual(got, step)
    return check


def check_lightning(test, strict=False):
    """last.ckpt is a link to an epoch file of the same checkpoint, which
    holds the checkpoint's step (strict: always the newest one)."""
    def check(d, step):
        last = os.path.join(d, "last.ckpt")
        test.assertTrue(os.path.islink(last), "%s: last.ckpt is not a link: %s" %
                        (d, sorted(os.listdir(d))))
        target = os.readlink(last)
        test.assertFalse(os.path.isabs(target), target)
        test.assertEqual(os.path.dirname(target), "", target)
        test.assertTrue(os.path.isfile(os.path.join(d, target)), "%s -> %s dangles" %
                        (last, target))
        got, _ = writers.lightning_check(last)
        steps = []
        for n in os.listdir(d):
            if n != "last.ckpt":
                s, _ = writers.lightning_check(os.path.join(d, n))
                test.assertEqual(n, "epoch=%d-step=%d.ckpt" % (s // 40, s))
                steps.append(s)
        # The checkpoint's step is its newest file's; last.ckpt points to it
        # unless the writer was stopped between its rename and the new link.
        test.assertEqual(max(steps), step, d)
        test.assertLessEqual(got, step)
        if strict:
            test.assertEqual(got, step, d)
    return check


class HFTrainer(WriterCase):
    ARGS = ("hf", "--steps", "60", "--every", "10", "--limit", "2", "--ranks", "2",
            "--rank-delay-ms", "150", "--write-ms", "40", "--sleep-ms", "25")
    RUN = ["--complete-marker", "trainer_state.json", "--settle", "3s", "--grace", "10s"]

    def test_stopped_and_resumed_with_rotation_and_rank_shards(self):
        ref = self.reference(*self.ARGS[:-2], "--sleep-ms", "0", "--write-ms", "0")
        for cycle in range(3):
            self.fresh("c%d" % cycle)
            out = os.path.join(self.work, "out")
            p = self.start(self.RUN + ["--"] + self.writer(*self.ARGS, "--out", out))
            rc = self.stop_at_random(p) if cycle < 2 else p.wait(120)
            if rc == 0:
                break
            self.assertEqual(rc, 75, p.text())
            self.assertNotIn("commit-failed", p.text())
            self.check_every_checkpoint(check_hf(self), p.text())
        else:
            self.fail("did not finish")
        self.assertEqual(rc, 0, p.text())
        with open(out, "rb") as f:
            self.assertEqual(f.read(), ref)
        self.check_every_checkpoint(check_hf(self))


class ReproHF(WriterCase):
    RUN = ["--complete-marker", "trainer_state.json", "--settle", "1s", "--grace", "10s"]

    def test_rotation_deleting_slowly_then_sigterm_restores_newest_whole(self):
        # checkpoint-10 and -20 committed; save_total_limit=1 then deletes
        # checkpoint-10 one file at a time (its trainer_state.json last) and
        # ckptrun is stopped half-way. Before: the half-deleted checkpoint-10
        # was committed again and became what resumes.
        go = os.path.join(self.work, "go")
        p = self.start(self.RUN + ["--"] + self.writer(
            "hf", "--steps", "20", "--every", "10", "--limit", "1", "--sleep-ms", "1",
            "--slow-rmtree-ms", "400", "--pause-before-rotate", go, "--linger-s", "30"))
        p.wait_line(r" commit step=10 ", timeout=30)
        open(go + "-10", "w").close()  # nothing to rotate yet
        p.wait_line(r" commit step=20 ", timeout=30)
        open(go + "-20", "w").close()  # now checkpoint-10 goes
        p.wait_line(r"writer: deleted checkpoint-10/optimizer.pt", timeout=30)
        p.wait_line(r"writer: deleted checkpoint-10/rng_state_1.pth", timeout=30)
        p.p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(), 75, p.text())
        self.assertNotIn("commit-failed", p.text())
        self.assertEqual(sorted(i["step"] for i in self.infos()), [10, 20], p.text())
        self.assertEqual(self.check_every_checkpoint(check_hf(self), p.text()), 20)

    def test_rank_shard_after_the_marker_is_in_the_first_commit(self):
        # Rank 1 writes rng_state_1.pth 700 ms after rank 0 closed
        # trainer_state.json. Before: committed at the marker without it.
        p = self.start(["--complete-marker", "trainer_state.json", "--"] + self.writer(
            "hf", "--steps", "10", "--every", "10", "--rank-delay-ms", "700",
            "--linger-s", "5"))
        p.wait_line(r" commit step=10 ", timeout=30)
        commits = self.commits(p)
        self.assertEqual(len(commits), 1, p.text())
        self.assertIn(" files=6 ", commits[0], p.text())
        p.p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(), 75, p.text())
        self.check_every_checkpoint(check_hf(self), p.text())

    def test_entry_removed_while_it_is_read_is_dropped(self):
        # checkpoint-10 holds a 2 GiB sparse file (about 1.5 s for libckpt to
        # read, stored as one chunk) and is deleted while its commit reads
        # it. Before: a commit-failed warning (or a checkpoint missing files).
        script = ("import os, time\n"
                  "d = os.path.join(os.environ['CKPT_DIR'], 'checkpoint-10'); os.makedirs(d)\n"
                  "with open(os.path.join(d, 'big.bin'), 'wb') as f: f.truncate(2 << 30)\n"
                  "open(os.path.join(d, 'model.bin'), 'wb').write(os.urandom(65536))\n"
                  "open(os.path.join(d, 'trainer_state.json'), 'w').write('{}')\n"
                  "time.sleep(30)\n")
        p = self.start(self.RUN + ["--", PY, "-c", script])
        p.wait_line(r" complete entry=checkpoint-10 step=10 by=marker", timeout=30)
        time.sleep(0.8)
        shutil.rmtree(os.path.join(self.env["CKPT_DIR"], "checkpoint-10"))
        # the commit's outcome, whichever it is
        p.wait_line(r" commit step=10 | drop entry=checkpoint-10 | commit-failed ", timeout=60)
        p.p.send_signal(signal.SIGTERM)
        p.wait()
        print(p.text(), file=sys.stderr) if os.environ.get("SHOW") else None
        self.assertNotIn("commit-failed", p.text())
        for i in self.infos():  # whole, if it got in before the deletion
            self.assertEqual(i["items"], 3, p.text())
        if not self.infos():
            self.assertRegex(p.text(), r" drop entry=checkpoint-10 step=10 why=\"removed")

    def test_entry_left_by_a_hard_kill_is_committed_at_start(self):
        # checkpoint-10 reached the store; checkpoint-20 was written but the
        # machine was killed before its upload; a restart on the same disk
        # must commit it. Before: taken as already committed.
        rc, _, err = self.ckptrun(*self.RUN, "--", *self.writer("hf", "--steps", "10",
                                                                 "--every", "10"))
        self.assertEqual(rc, 0, err)
        self.assertEqual([i["step"] for i in self.infos()], [10], err)
        ck = self.env["CKPT_DIR"]
        subprocess.run(self.writer("hf", "--steps", "20", "--every", "10", "--limit", "2"),
                       env=self.env, check=True, capture_output=True)
        self.assertEqual(sorted(os.listdir(ck)), ["checkpoint-10", "checkpoint-20"])
        rc, _, err = self.ckptrun(*self.RUN, "--", PY, "-c", "import time; time.sleep(3)")
        self.assertEqual(rc, 0, err)
        self.assertIn("complete entry=checkpoint-20 step=20 by=marker", err)
        self.assertNotIn("entry=checkpoint-10 ", err)  # the store has it
        self.assertEqual(sorted(i["step"] for i in self.infos()), [10, 20], err)
        self.assertEqual(self.check_every_checkpoint(check_hf(self), err), 20)


class ReproFastHF(WriterCase):
    # HF's order (marker, then the other rank's shard) every 0.5 s, the two
    # newest kept: each checkpoint-N/ lives about a second, less than the
    # marker's quiet time (2 s). Before: nothing committed while it ran.
    ARGS = ("hf", "--every", "10", "--sleep-ms", "50", "--limit", "2", "--rank-delay-ms", "20")

    def test_fast_saves_are_committed_while_they_come(self):
        p = self.start(["--complete-marker", "trainer_state.json", "--grace", "10s", "--"] +
                       self.writer(*self.ARGS, "--steps", "400"))
        for _ in range(3):
            n = len(self.commits(p))
            deadline = time.monotonic() + 30
            while len(self.commits(p)) <= n and time.monotonic() < deadline:
                time.sleep(0.05)
        during = self.commits(p)
        self.assertGreaterEqual(len(during), 3, p.text())
        p.p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(), 75, p.text())
        self.assertNotIn("commit-failed", p.text())
        self.assertIn("final committed=true", p.text())
        self.check_every_checkpoint(check_hf(self), p.text())

    def test_launcher_dying_of_the_stop_keeps_complete_entries(self):
        # A launcher that neither handles nor forwards SIGTERM dies of it at
        # once with its writers (no --signal, no helper: the child is
        # stopped at once). The entries complete before the stop are the
        # final checkpoint. Before: none was complete yet (quiet time), the
        # child died, nothing counted: exit 74.
        launcher = ("import subprocess, sys\n"
                    "sys.exit(subprocess.Popen(sys.argv[1:]).wait())\n")
        p = self.start(["--complete-marker", "trainer_state.json", "--grace", "10s", "--",
                        PY, "-c", launcher] + self.writer(*self.ARGS, "--steps", "400"))
        p.wait_line(r"writer: saved checkpoint-30", timeout=60)
        saved = [int(s) for s in re.findall(r"writer: saved checkpoint-(\d+)", p.text())]
        p.p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(), 75, p.text())
        self.assertIn("final committed=true", p.text())
        newest = self.check_every_checkpoint(check_hf(self), p.text())
        self.assertGreaterEqual(newest, max(saved), p.text())


class Lightning(WriterCase):
    ARGS = ("lightning", "--steps", "200", "--every", "20", "--top-k", "2",
            "--write-ms", "30", "--sleep-ms", "12")
    RUN = ["--settle", "2s", "--grace", "10s"]

    def test_stopped_and_resumed_with_links(self):
        ref = self.reference(*self.ARGS[:-2], "--sleep-ms", "0", "--write-ms", "0")
        for cycle in range(3):
            self.fresh("c%d" % cycle)
            out = os.path.join(self.work, "out")
            p = self.start(self.RUN + ["--"] + self.writer(*self.ARGS, "--out", out))
            rc = self.stop_at_random(p) if cycle < 2 else p.wait(120)
            if rc == 0:
                break
            self.assertEqual(rc, 75, p.text())
            self.assertNotIn("commit-failed", p.text())
            self.check_every_checkpoint(check_lightning(self), p.text())
        else:
            self.fail("did not finish")
        self.assertEqual(rc, 0, p.text())
        with open(out, "rb") as f:
            self.assertEqual(f.read(), ref)
        self.check_every_checkpoint(check_lightning(self))


class ReproLightning(WriterCase):
    def test_link_remade_after_the_rename_is_in_every_commit(self):
        # last.ckpt is remade 100 ms after the rename. Before: the commit
        # went out at the rename, without it (or with the old one).
        p = self.start(["--settle", "2s", "--"] + self.writer(
            "lightning", "--steps", "60", "--every", "20", "--link-delay-ms", "100",
            "--sleep-ms", "30", "--linger-s", "30"))
        p.wait_line(r" commit step=60 ", timeout=30)
        p.wait_line(r"saved epoch=\d+-step=60\.ckpt", timeout=30)  # last.ckpt remade
        p.p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(), 75, p.text())
        self.assertEqual(sorted(i["step"] for i in self.infos()), [20, 40, 60], p.text())
        self.assertEqual(self.check_every_checkpoint(check_lightning(self, True), p.text()), 60)


@unittest.skipUnless(HAVE_TORCH, "torch not installed")
class TorchOverwrite(WriterCase):
    ARGS = ("overwrite", "--steps", "400", "--every-s", "3", "--mb", "4", "--sleep-ms", "50")

    def check(self, d, step):
        """last.pt whole; a higher checkpoint step holds a later save (its
        step is a counter: the name carries no number)."""
        self.assertEqual(os.listdir(d), ["last.pt"])
        got, _ = writers.overwrite_check(os.path.join(d, "last.pt"))
        for s, g in self.seen.items():
            self.assertEqual(s < step, g < got, (self.seen, step, got))
        self.seen[step] = got

    def test_overwrite_every_3s_is_committed_each_time_and_resumes(self):
        # torch.save into last.pt every 3 s, shorter than --settle (10 s).
        # Before: never committed ("lost work").
        ref = self.reference(*self.ARGS[:-2], "--sleep-ms", "0")
        self.seen = {}
        out = os.path.join(self.work, "out")
        p = self.start(["--grace", "10s", "--"] + self.writer(*self.ARGS, "--out", out))
        p.wait_line(r"writer: saved last.pt", timeout=30)
        p.wait_line(r" commit step=\d+ ", timeout=10)
        deadline = time.monotonic() + 15
        while len(self.commits(p)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertGreaterEqual(len(self.commits(p)), 2, p.text())
        time.sleep(RNG.uniform(0, 2.5))
        saves = len([l for l in p.lines if "writer: saved" in l])
        p.p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(), 75, p.text())
        self.assertNotIn("commit-failed", p.text())
        # Every save is committed (the last one may have been cut by the stop).
        self.assertGreaterEqual(len(self.commits(p)), saves - 1, p.text())
        self.check_every_checkpoint(self.check, p.text())
        self.fresh("b")
        out = os.path.join(self.work, "out")
        rc, _, err = self.ckptrun("--", *self.writer(*self.ARGS[:-2], "--sleep-ms", "0",
                                                    "--out", out), timeout=120)
        self.assertEqual(rc, 0, err)
        self.assertNotIn("writer: start at step 0", err)
        with open(out, "rb") as f:
            self.assertEqual(f.read(), ref)


KILLED_WRITER = r"""
import os, signal, subprocess, sys, time
sys.path.insert(0, %(here)r)
import writers
path = os.path.join(os.environ["CKPT_DIR"], "last.bin")
def write(step, ms):
    return subprocess.Popen([sys.executable, "-c",
        "import sys; sys.path.insert(0, %(here)r); import writers; "
        "writers.write_slowly(%%r, writers.blob(%%d, b'st%%d', 'last.bin', 1 << 20), %%d)"
        %% (path, step, step, ms)])
write(1, 0).wait()
print("writer: version 1 written", file=sys.stderr, flush=True)
while not os.path.exists(%(go)r):
    time.sleep(0.05)
w = write(2, 2000)            # a rewrite in place, taking 2 s ...
time.sleep(0.6)
w.kill()                       # ... killed half-way: its files are closed;
time.sleep(0.5); w.wait()      # noticed as a launcher polling its workers does
print("writer: version 2 killed mid-write", file=sys.stderr, flush=True)
time.sleep(4)
"""


class ReproKilledWriter(WriterCase):
    def test_close_by_a_killed_writer_is_not_a_completion(self):
        # A process rewriting last.bin in place is killed half-way (the child
        # stays alive, then exits 0): its close is not the end of a save.
        # Before: committed torn once it had not changed for --settle.
        go = os.path.join(self.work, "go")
        script = KILLED_WRITER % {"here": HERE, "go": go}
        p = self.start(["--settle", "1s", "--", PY, "-c", script])
        p.wait_line(r" commit step=\d+ ", timeout=30)
        open(go, "w").close()
        self.assertEqual(p.wait(60), 0, p.text())
        self.assertIn("writer: version 2 killed mid-write", p.text())
        self.assertEqual(len(self.commits(p)), 1, p.text())
        self.assertRegex(p.text(), r"last\.bin was closed, but its writer was killed")
        d = self.restored()
        self.assertEqual(writers.read_blob(os.path.join(d, "last.bin"), "last.bin")[0], 1)

    def test_says_once_when_nothing_gets_complete(self):
        # A writer that keeps last.bin open and rewrites it every 200 ms
        # never finishes a version: ckptrun says so, once.
        script = ("import os, time\n"
                  "f = open(os.path.join(os.environ['CKPT_DIR'], 'last.bin'), 'wb')\n"
                  "for i in range(30):\n"
                  "    f.seek(0); f.write(os.urandom(4096)); f.flush(); time.sleep(0.2)\n")
        rc, _, err = self.ckptrun("--settle", "500ms", "--", PY, "-c", script)
        self.assertEqual(rc, 0, err)
        warns = [l for l in err.splitlines() if "has been complete for" in l]
        self.assertEqual(len(warns), 1, err)
        self.assertIn("level=warn", warns[0])
        self.assertIn("last.bin (open for writing by pid", warns[0])


FLAT_WRITER = r"""
import os, sys, time
sys.path.insert(0, %(here)r)
import writers
d = os.environ["CKPT_DIR"]
def save(name, step):
    writers.write_slowly(os.path.join(d, name), writers.blob(step, b"s%%d" %% step, name, 65536), 0)
save("config.json", 0)
for step in (10, 20):
    save("model_%%d.pt" %% step, step)
    time.sleep(0.1)
    save("optim_%%d.pt" %% step, step)
    while not os.path.exists(%(go)r + "-%%d" %% step):  # the test saw the step committed
        time.sleep(0.05)
os.symlink("model_10.pt", os.path.join(d, "best.pt"))
print("writer: linked", file=sys.stderr, flush=True)
time.sleep(30)
"""


class ReproFlat(WriterCase):
    def test_entries_of_a_step_and_what_links_point_to_are_one_checkpoint(self):
        # model_N.pt and optim_N.pt (plus config.json, no number) are written
        # one after the other; then best.pt links to the older model_10.pt.
        # Each checkpoint holds every entry of its step and the unnumbered
        # one, and the link with its target, at the highest step. Before:
        # one checkpoint per file, the newest holding optim_20.pt alone.
        go = os.path.join(self.work, "go")
        p = self.start(["--settle", "1s", "--", PY, "-c",
                        FLAT_WRITER % {"here": HERE, "go": go}])
        # each step committed whole before the next is written (step 10's
        # checkpoint may take config.json's counter value, 11)
        p.wait_line(r" commit step=1\d files=3 ", timeout=30)
        open(go + "-10", "w").close()
        p.wait_line(r" commit step=20 files=3 ", timeout=30)
        open(go + "-20", "w").close()
        p.wait_line(r"writer: linked", timeout=30)
        p.wait_line(r" commit step=20 files=4 links=1 ", timeout=10)
        p.p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(), 75, p.text())
        d = self.restored()
        self.assertEqual(sorted(os.listdir(d)), ["best.pt", "config.json", "model_10.pt",
                                                 "model_20.pt", "optim_20.pt"], p.text())
        self.assertEqual(os.readlink(os.path.join(d, "best.pt")), "model_10.pt")
        for n in ("model_10.pt", "model_20.pt", "optim_20.pt", "config.json"):
            writers.read_blob(os.path.join(d, n), n)
        steps = [i["step"] for i in self.infos()]
        self.assertEqual(max(steps), 20, p.text())
        # Step 10's: its files and config.json, whose counter value (11 when
        # model_10.pt was seen first: above every step seen) may be its step.
        first = [s for s in steps if 10 <= s < 20]
        self.assertEqual(len(first), 1, p.text())
        d = self.restored(first[0])
        self.assertEqual(sorted(os.listdir(d)), ["config.json", "model_10.pt", "optim_10.pt"],
                         p.text())


SAVED_TRAINER = r"""
import json, os, sys, time
sys.path.insert(0, %(helper)r)
import ckpt_helper
d = ckpt_helper.checkpoint_dir()
os.makedirs(d, exist_ok=True)
path = os.path.join(d, "last.pt")
step = 0
if os.path.exists(path):
    with open(path) as f:
        step = json.load(f)["step"]
print("trainer: start at step %%d restored_step=%%s CKPT_STEP=%%s" %% (
    step, ckpt_helper.restored_step(), os.environ.get("CKPT_STEP")), file=sys.stderr, flush=True)
while step < %(steps)d:
    step += 1
    time.sleep(0.01)
    if ckpt_helper.requested() or step %% 20 == 0:
        with open(path + ".tmp", "w") as f:
            json.dump({"step": step}, f)
        os.rename(path + ".tmp", path)
        ckpt_helper.saved(path, step)
        print("trainer: saved step %%d" %% step, file=sys.stderr, flush=True)
"""


class TrainerSteps(WriterCase):
    """Issue 26, item 3: the store's steps are the trainer's. A trainer saving
    checkpoints/last.pt every 20 steps (and at a stop) and reporting each with
    ckpt_helper.saved(path, step). Before: ls showed 1, 2, 3, ... and a resume
    at training step N had CKPT_STEP and restored_step() say the count."""

    def trainer(self, steps):
        helper = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "python")
        return [PY, "-c", SAVED_TRAINER % {"helper": helper, "steps": steps}]

    def test_saved_steps_are_the_store_steps(self):
        p = self.start(["--grace", "10s", "--"] + self.trainer(100000))
        p.wait_line(r" commit step=[1-9]\d*0 ", timeout=60)
        p.p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(), 75, p.text())
        saved = [int(x) for x in re.findall(r"trainer: saved step (\d+)", p.text())]
        stop_step = saved[-1]
        commits = [int(x) for x in re.findall(r" commit step=(\d+) ", p.text())]
        self.assertEqual(commits[-1], stop_step, p.text())
        for c in commits:  # every commit at a step the trainer saved
            self.assertIn(c, saved, p.text())
        steps = sorted(i["step"] for i in self.infos())
        self.assertEqual(steps[-1], stop_step, p.text())
        rc, out, err = self.ckptrun("ls")
        self.assertEqual(rc, 0, err)
        self.assertNotIn("*", out)  # no counted step
        # a new machine resumes at the trainer's step, and is told it
        self.fresh("b")
        p = self.start(["--grace", "10s", "--"] + self.trainer(stop_step + 20))
        p.wait_line(r"trainer: start at step %d restored_step=%d CKPT_STEP=%d$" %
                    (stop_step, stop_step, stop_step), timeout=60)
        self.assertEqual(p.wait(60), 0, p.text())
        self.assertEqual(max(i["step"] for i in self.infos()), stop_step + 20)

    def test_counted_steps_are_marked(self):
        # no saved(), no number in the name: the counter, marked in ls
        script = ("import os\n"
                  "open(os.path.join(os.environ['CKPT_DIR'], 'state.bin'), 'w').write('x')\n"
                  "import time; time.sleep(1)\n")
        rc, _, err = self.ckptrun("--settle", "300ms", "--", PY, "-c", script)
        self.assertEqual(rc, 0, err)
        self.assertEqual([i.get("step_from") for i in self.infos()], ["counter"], err)
        rc, out, err = self.ckptrun("ls")
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"(?m)^1\* ")
        self.assertIn("counted by ckptrun", out)

    def test_a_step_below_the_runs_newest_is_kept_and_said(self):
        src = os.path.join(self.tmp, "a")
        with open(src, "w") as f:
            f.write("a")
        rc, _, err = self.ckptrun("save", "--step", "500", src)
        self.assertEqual(rc, 0, err)
        rc, _, err = self.ckptrun("--", *self.trainer(20))
        self.assertEqual(rc, 0, err)
        self.assertRegex(err, r"last\.pt is step 20 \(saved\(\)\), below step 500 .*level=warn"
                         r"|level=warn.*last\.pt is step 20 \(saved\(\)\), below step 500")
        self.assertEqual(sorted(i["step"] for i in self.infos()), [20, 500], err)


class ReproCounter(WriterCase):
    def test_counter_for_names_without_a_number_starts_above_the_highest_step(self):
        # The store holds step 50 and, committed after it, step 30. A file
        # without a number in its name must get a step above 50 (what resumes
        # is the highest step). Before: 31.
        src = os.path.join(self.tmp, "a")
        with open(src, "w") as f:
            f.write("a")
        for step in ("50", "30"):
            rc, _, err = self.ckptrun("save", "--step", step, src)
            if rc != 0:  # a save below the newest may need --force
                rc, _, err = self.ckptrun("save", "--force", "--step", step, src)
            self.assertEqual(rc, 0, err)
        script = ("import os\n"
                  "open(os.path.join(os.environ['CKPT_DIR'], 'state.bin'), 'w').write('x')\n"
                  "import time; time.sleep(1)\n")
        rc, _, err = self.ckptrun("--settle", "300ms", "--", PY, "-c", script)
        self.assertEqual(rc, 0, err)
        self.assertIn("complete entry=state.bin step=51 ", err)
        self.assertIn(51, [i["step"] for i in self.infos()], err)


if __name__ == "__main__":
    print("writer tests: seed %d (CKPTRUN_TEST_SEED)" % SEED, file=sys.stderr)
    if not os.access(CKPTRUN, os.X_OK):
        sys.exit("ckptrun not found at %s (set CKPT_BIN)" % CKPTRUN)
    unittest.main()
