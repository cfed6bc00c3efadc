#!/usr/bin/python3
"""examples/python/train_ckpt.py used as its docstring says, the way a new
user would: alone, then under ckptrun on the default store (a HOME of its
own), stopped with SIGTERM at a random moment, then resumed by running the
"Resume:" command ckptrun printed, through the shell, on a fresh HOME (a new
machine). It must exit 75 with the final checkpoint committed, resume at the
step after it and end with the bytes of the uninterrupted run. Once with one
process, once under torchrun with 2 ranks (DDP, gloo) when Debian's torchrun
is there (with --redirects 1 --tee 1: docs/python.md, "Ranks"). And the
same alone, without ckptrun: SIGTERM to the trainer (or to torchrun) saves,
commits and says so; the same command again resumes to the same bytes; and
Ctrl-C to the process group, as a terminal sends it. And
2 ranks stopped, then recovered on a machine of one GPU (one process): it
goes on from the model and optimizer and says the data streams are new.

Run: /usr/bin/python3 tests/integration/test_py_example.py [-v]
(exits 77 without torch)."""
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ckpt_testlib as T  # noqa: E402
import py_util as U  # noqa: E402

try:
    import torch  # noqa: F401
except ImportError:
    print("torch missing: skipped")
    sys.exit(77)

EXAMPLE = os.path.join(T.REPO, "examples", "python", "train_ckpt.py")
TORCHRUN = "/usr/bin/torchrun"
SEED = int(os.environ.get("CKPT_TEST_SEED", str(int(time.time()))))
RNG = random.Random(SEED)
STEPS = "600"


class Example(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ckpt-example-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        shutil.copy(EXAMPLE, self.tmp)  # "copy it"

    def env(self, home):
        """A user's shell: this build's ckptrun first on PATH, a HOME of its
        own (the default store lives there), no CKPT_* variables but
        CKPT_NOTICE=none."""
        env = U.clean_env(HOME=os.path.join(self.tmp, home),
                          PATH=T.BIN + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"))
        env.pop("PYTHONPATH")  # ckptrun gives the trainer the package
        # (CKPT_NOTICE=none stays: no metadata endpoint is asked from a test)
        os.makedirs(env["HOME"], exist_ok=True)
        return env

    def launcher(self, ranks):
        if ranks == 1:
            return [U.PY]
        # --standalone: a free port of its own (tests may run side by side)
        return [TORCHRUN, "--standalone", "--nproc_per_node", str(ranks), "--redirects", "1",
                "--tee", "1"]

    refs = {}  # ranks -> the bytes of a run never stopped (the same in every test)

    def reference(self, ranks):
        if ranks not in Example.refs:
            Example.refs[ranks] = self.run_reference(ranks)
        return Example.refs[ranks]

    def run_reference(self, ranks):
        out = os.path.join(self.tmp, "ref.bin")
        env = self.env("ref-home")
        env["PYTHONPATH"] = U.PYDIR  # alone: the package of this build
        r = subprocess.run(self.launcher(ranks) + ["train_ckpt.py", "--steps", STEPS, "--out",
                                                   out], cwd=self.tmp, env=env,
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("train_ckpt: rank 0 done, %s steps" % STEPS, r.stderr)
        with open(out, "rb") as f:
            return f.read()

    def stop_then_resume(self, ranks):
        ref = self.reference(ranks)
        out = os.path.join(self.tmp, "final.bin")
        p = T.Proc(["--"] + self.launcher(ranks) +
                   ["train_ckpt.py", "--steps", STEPS, "--sleep-ms", "5", "--out", out],
                   self.env("home-a"), self.tmp, stdout=T.Proc.MERGE)
        try:
            for r in range(ranks):
                p.wait_line(r"train_ckpt: rank %d start at step 0$" % r, timeout=120)
            time.sleep(RNG.uniform(0.3, 1.5))
            p.p.send_signal(signal.SIGTERM)
            self.assertEqual(p.wait(120), 75, p.text())
        finally:
            p.kill()
        text = p.text()
        m = re.search(r"stopped \(SIGTERM\), final checkpoint committed, exit 75: newest "
                      r"committed step (\d+)\. Resume: (.*)$", text, re.M)
        self.assertTrue(m, text)
        step, resume = int(m.group(1)), m.group(2)
        self.assertLess(step, int(STEPS) - 1, "stopped after the last step: " + text)
        self.assertFalse(os.path.exists(out))

        # a new machine: an empty HOME, the printed command as typed
        r = subprocess.run(["sh", "-c", resume], env=self.env("home-b"), cwd="/",
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        for rank in range(ranks):
            self.assertIn("train_ckpt: rank %d start at step %d\n" % (rank, step + 1), r.stderr)
        self.assertRegex(r.stderr, r"recover: \S+ completed, exit 0: newest committed step %d"
                         % (int(STEPS) - 1))
        with open(out, "rb") as f:
            self.assertEqual(f.read(), ref, "resumed run differs (seed %d)" % SEED)

    def alone_stop_then_resume(self, ranks, ctrl_c=False):
        """Without ckptrun (the docstring's first line): a SIGTERM to the
        trainer, or to torchrun, which forwards it to its ranks, has it save
        at its next step, commit and die of it, saying so; the same command
        run again resumes at the step after and ends with the reference's
        bytes. ctrl_c: SIGINT to the whole process group instead, as a
        terminal's Ctrl-C (torchrun forwards it again): saved, committed,
        said, then KeyboardInterrupt."""
        ref = self.reference(ranks)
        out = os.path.join(self.tmp, "final.bin")
        env = self.env("home-c")
        env["PYTHONPATH"] = U.PYDIR
        cmd = self.launcher(ranks) + ["train_ckpt.py", "--steps", STEPS, "--sleep-ms", "5",
                                      "--out", out]
        log = os.path.join(self.tmp, "alone.log")
        with open(log, "w") as f:
            p = subprocess.Popen(cmd, cwd=self.tmp, env=env, stdout=f, stderr=subprocess.STDOUT,
                                 start_new_session=ctrl_c)
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                with open(log) as f:
                    text = f.read()
                if all("train_ckpt: rank %d start at step 0\n" % r in text for r in range(ranks)):
                    break
                self.assertIsNone(p.poll(), text)
                time.sleep(0.05)
            time.sleep(RNG.uniform(0.3, 1.5))
            if ctrl_c:
                os.killpg(p.pid, signal.SIGINT)
            else:
                p.send_signal(signal.SIGTERM)
            rc = p.wait(120)
        finally:
            if p.poll() is None:
                p.kill()
        with open(log) as f:
            text = f.read()
        # alone, it dies of the signal; torchrun reports its own (exit 1)
        sig = signal.SIGINT if ctrl_c else signal.SIGTERM
        self.assertEqual(rc, -sig if ranks == 1 else 1, text)
        if ctrl_c:
            m = re.search(r"^ckpt: Ctrl-C: step (\d+) is committed; stopping", text, re.M)
            self.assertTrue(m, text)
            self.assertEqual(text.count("ckpt: Ctrl-C: saving at the next"), 1, text)
            self.assertIn("KeyboardInterrupt", text)
            if ranks == 1:
                self.assertIn("ckpt: the trainer interrupted; step %s is committed: run the "
                              "same command again" % m.group(1), text)
        else:
            m = re.search(r"^ckpt: SIGTERM: step (\d+) is committed; exiting\. Run the same "
                          r"command again to resume", text, re.M)
            self.assertTrue(m, text)
        step = int(m.group(1))
        self.assertLess(step, int(STEPS) - 1, "stopped after the last step: " + text)
        self.assertFalse(os.path.exists(out))
        r = subprocess.run(cmd, cwd=self.tmp, env=env, capture_output=True, text=True,
                           timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        for rank in range(ranks):
            self.assertIn("train_ckpt: rank %d start at step %d\n" % (rank, step + 1), r.stderr)
        with open(out, "rb") as f:
            self.assertEqual(f.read(), ref, "resumed run differs (seed %d)" % SEED)

    def test_one_process(self):
        self.stop_then_resume(1)

    @unittest.skipUnless(os.access(TORCHRUN, os.X_OK), "no /usr/bin/torchrun")
    def test_other_number_of_ranks(self):
        # 2 ranks stopped under ckptrun; the new machine has one GPU: the
        # printed command with one process instead of torchrun resumes from
        # the model and optimizer, with a new data stream, and says so
        p = T.Proc(["--"] + self.launcher(2) +
                   ["train_ckpt.py", "--steps", "300", "--sleep-ms", "5"],
                   self.env("home-a"), self.tmp, stdout=T.Proc.MERGE)
        try:
            for r in range(2):
                p.wait_line(r"train_ckpt: rank %d start at step 0$" % r, timeout=120)
            time.sleep(RNG.uniform(0.3, 1.0))
            p.p.send_signal(signal.SIGTERM)
            self.assertEqual(p.wait(120), 75, p.text())
        finally:
            p.kill()
        m = re.search(r"newest committed step (\d+)\. Resume: (.*) -- (\S*torchrun .*)$",
                      p.text(), re.M)
        self.assertTrue(m, p.text())
        step, recover = int(m.group(1)), m.group(2)
        self.assertRegex(m.group(3), r"train_ckpt\.py --steps 300")
        resume = recover + " -- " + U.PY + " train_ckpt.py --steps 300"
        r = subprocess.run(["sh", "-c", resume], env=self.env("home-b"), cwd=self.tmp,
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("train_ckpt: rank 0 the checkpoint is of 2 rank(s), this job has 1: new "
                      "data streams\ntrain_ckpt: rank 0 start at step %d\n" % (step + 1),
                      r.stderr)
        self.assertIn("every rank took rank 0's own entries ('step', 'data')", r.stderr)
        self.assertRegex(r.stderr, r"recover: \S+ completed, exit 0: newest committed step 299")

    def test_one_process_alone(self):
        self.alone_stop_then_resume(1)

    @unittest.skipUnless(os.access(TORCHRUN, os.X_OK), "no /usr/bin/torchrun")
    def test_torchrun_two_ranks(self):
        self.stop_then_resume(2)

    @unittest.skipUnless(os.access(TORCHRUN, os.X_OK), "no /usr/bin/torchrun")
    def test_torchrun_two_ranks_alone(self):
        self.alone_stop_then_resume(2)

    def test_one_process_alone_ctrl_c(self):
        self.alone_stop_then_resume(1, ctrl_c=True)

    @unittest.skipUnless(os.access(TORCHRUN, os.X_OK), "no /usr/bin/torchrun")
    def test_torchrun_two_ranks_alone_ctrl_c(self):
        self.alone_stop_then_resume(2, ctrl_c=True)


if __name__ == "__main__":
    print("python example: seed %d (CKPT_TEST_SEED)" % SEED, file=sys.stderr)
    unittest.main()
