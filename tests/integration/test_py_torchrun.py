#!/usr/bin/python3
"""`import ckpt` in a 2-rank torchrun DDP job (gloo, CPU; py_trainer.py
--ddp saves with replicated=("model", "optim")):

  1. under ckptrun, SIGTERM: exit 75; every committed step is one global
     commit (one commit record naming one part per rank), and each rank
     uploaded about half of the replicated bytes (from the part manifests);
  2. `ckptrun recover` on a fresh machine resumes both ranks at the newest
     committed step and ends byte-identical to an uninterrupted job;
  3. one rank SIGKILLed while its part of a step is being written (a slow
     32 MiB part): that step is never committed, the previous global step
     stays the newest and the job resumes from it, identical again;
  4. a checkpoint of 2 ranks loaded by 1 process: refused, naming both
     sizes; a state saved all replicated loads in 1 process;
  5. no ckpt.wait() before the exit: the exit ends the step; with one rank
     gone first, the other's exit does not hang and reports the lost step.

Run: /usr/bin/python3 tests/integration/test_py_torchrun.py [-v]. Needs
/usr/bin/torchrun and torch (Debian's, which wants `--redirects 1 --tee 1`
with Python 3.11); exits 77 (skip) without."""
import glob
import json
import os
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

TORCHRUN = "/usr/bin/torchrun"
try:
    import torch  # noqa: F401
except ImportError:
    torch = None
if torch is None or not os.access(TORCHRUN, os.X_OK):
    print("torch or torchrun missing: skipped")
    sys.exit(77)

TRAINER = os.path.join(U.HERE, "py_trainer.py")
STEPS = 400
WIDTH = "256"  # 512 KiB weights: 8 chunks of 64 KiB each, spread over the ranks


def torchrun(script, *args):
    # static rendezvous on a free port: --standalone's c10d rendezvous polls
    # its store, and loses it on a loaded machine
    return [TORCHRUN, "--nnodes", "1", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
            "--master_port", str(U.free_port()), "--redirects", "1", "--tee", "1",
            script] + list(args)


def launcher(*args):
    return torchrun(TRAINER, "--ddp", "--steps", str(STEPS), "--width", WIDTH, *args)


class Job(T.Proc):
    """A process (ckptrun or torchrun) in a session of its own, its stdout
    read with its stderr (MERGE); a torchrun job takes minutes here."""

    def __init__(self, argv, env, cwd):
        super().__init__(argv, env, cwd, program=None, stdout=T.Proc.MERGE,
                         start_new_session=True)

    def wait_line(self, pattern, timeout=180):
        return super().wait_line(pattern, timeout)

    def wait(self, timeout=300):
        return super().wait(timeout)


class Torchrun(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ckpt-pytr-")
        self.store_dir = os.path.join(self.tmp, "store")
        self.store = "file://" + self.store_dir
        self.jobs = []

    def tearDown(self):
        for j in self.jobs:
            if j.p.poll() is None:
                os.killpg(j.p.pid, signal.SIGKILL)
                j.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def machine(self, tag, run, **kw):
        work = os.path.join(self.tmp, tag)
        os.makedirs(os.path.join(work, "home"))
        env = U.clean_env(HOME=os.path.join(work, "home"), CKPT_STORE=self.store, CKPT_RUN=run,
                          CKPT_DIR=os.path.join(work, "ck"), CKPT_CHUNK_BYTES="65536",
                          OMP_NUM_THREADS="1", **kw)
        return env, work

    def job(self, argv, env, cwd):
        j = Job(argv, env, cwd)
        self.jobs.append(j)
        return j

    def out_of(self, work):
        with open(os.path.join(work, "out"), "rb") as f:
            return f.read()

    def commits(self, run):
        """{step: (commit records, part manifests)} of the run in the store."""
        out = {}
        for p in glob.glob(os.path.join(self.store_dir, run, "manifests", "*")):
            name = os.path.basename(p)
            if name.endswith(".ckc"):
                step = int(name.split("_")[1])
                out.setdefault(step, [[], []])[0].append(p)
            elif name.endswith(".ckp"):
                step = int(name.split("_")[0])
                out.setdefault(step, [[], []])[1].append(p)
        return out

    def ls(self, env, work):
        r = subprocess.run([U.CKPTRUN, "ls", "--json"], env=env, cwd=work, capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def test_ddp_replicated(self):
        # the reference: uninterrupted, no saves
        env, work = self.machine("ref", "ref")
        j = self.job(launcher("--out", os.path.join(work, "out"), "--every", "1000000000"),
                     env, work)
        self.assertEqual(j.wait(), 0, j.text())
        ref = self.out_of(work)

        # 1. under ckptrun; SIGTERM once both ranks saved a few steps
        env, work = self.machine("a", "ddp")
        env.pop("PYTHONPATH")  # ckptrun provides the package
        j = self.job([U.CKPTRUN, "--grace", "60s", "--"] +
                     launcher("--out", os.path.join(work, "out"), "--every", "20",
                              "--sleep-ms", "5"), env, work)
        j.wait_line(r"trainer: rank 1 saved step 60")
        os.kill(j.p.pid, signal.SIGTERM)
        self.assertEqual(j.wait(), 75, j.text())
        text = j.text()
        final = int(re.search(r"final committed=true step=(\d+)", text).group(1))
        self.assertIn("trainer: rank 0 saving step %d" % final, text)
        self.assertIn("trainer: rank 1 saving step %d" % final, text)
        commits = self.commits("ddp")
        listed = self.ls(env, work)
        self.assertEqual(listed[0]["step"], final)
        for entry in listed:
            recs, parts = commits[entry["step"]]
            self.assertEqual(len(recs), 1, (entry, recs))  # one global commit per step
            self.assertEqual(len(parts), 2, (entry, parts))
            self.assertEqual(entry["world_size"], 2, entry)
        # each rank uploaded about half of the replicated bytes
        sent = [0, 0]
        for p in commits[final][1]:
            with open(p) as f:
                m = json.loads(f.read().split("\n#xxh64:")[0])
            for it in m["items"]:
                if "replicated" in it:
                    sent[m["rank"]] += sum(c[1] for c in it["chunks"])
        total = sum(sent)
        self.assertGreater(total, 3 << 20)
        for r in (0, 1):
            self.assertGreater(sent[r], 0.35 * total, sent)
            self.assertLess(sent[r], 0.65 * total, sent)

        # 2. recover on a fresh machine: both ranks resume at final + 1
        env, work = self.machine("b", "ddp")
        env.pop("PYTHONPATH")
        j = self.job([U.CKPTRUN, "recover", "--"] +
                     launcher("--out", os.path.join(work, "out"), "--every", "40"), env, work)
        self.assertEqual(j.wait(), 0, j.text())
        for r in (0, 1):
            self.assertIn("trainer: rank %d start at step %d" % (r, final + 1), j.text())
        self.assertEqual(self.out_of(work), ref)

    def test_rank_killed_mid_save(self):
        env, work = self.machine("ref", "ref")
        j = self.job(launcher("--out", os.path.join(work, "out"), "--every", "1000000000",
                              "--steps", "200"), env, work)
        self.assertEqual(j.wait(), 0, j.text())
        ref = self.out_of(work)
        # rank 1's part of step 100 holds 32 MiB compressed at zstd level
        # 19: seconds to write; rank 1 is killed as soon as it is taken
        env, work = self.machine("a", "kill", CKPT_CODEC="zstd:19")
        j = self.job(launcher("--out", os.path.join(work, "out"), "--every", "20",
                              "--steps", "200", "--big-at", "100", "--sleep-ms", "2"), env, work)
        pid1 = int(j.wait_line(r"trainer: rank 1 start at step 0 pid (\d+)").group(1))
        j.wait_line(r"trainer: rank 1 saved step 100")
        os.kill(pid1, signal.SIGKILL)
        self.assertNotEqual(j.wait(), 0, j.text())
        listed = self.ls(env, work)
        self.assertEqual(listed[0]["step"], 80, listed)  # the previous global step
        self.assertEqual(self.commits("kill").get(100, [[], []])[0], [])
        # resumes from it, identical
        env, work = self.machine("b", "kill")
        j = self.job(launcher("--out", os.path.join(work, "out"), "--every", "20",
                              "--steps", "200"), env, work)
        self.assertEqual(j.wait(), 0, j.text())
        for r in (0, 1):
            self.assertIn("trainer: rank %d start at step 81" % r, j.text())
        self.assertEqual(self.out_of(work), ref)

    def test_other_world_size(self):
        script = os.path.join(self.tmp, "rep.py")
        with open(script, "w") as f:
            f.write("import sys, torch, torch.distributed as dist, ckpt\n"
                    "dist.init_process_group('gloo')\n"
                    "w = torch.arange(100000, dtype=torch.float32)\n"
                    "ckpt.save(1, {'w': w, 'step': 1}, replicated=True)\n"
                    "ckpt.save(2, {'w': w * 2, 'mine': torch.ones(3) * dist.get_rank()},\n"
                    "          replicated=('w',))\n"
                    "ckpt.wait()\n"
                    "dist.destroy_process_group()\n")
        env, work = self.machine("a", "world")
        j = self.job(torchrun(script), env, work)
        self.assertEqual(j.wait(), 0, j.text())
        load = ("import ckpt, torch\n"
                "try:\n    ckpt.load()\nexcept ckpt.CkptError as e:\n    print('ERR', e)\n"
                "s = ckpt.load(step=1)\n"
                "print('ONE', s['step'], torch.equal(s['w'], torch.arange(100000.)))\n")
        r = subprocess.run([U.PY, "-c", load], env=env, cwd=work, capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"ERR .*written by 2 ranks; this job has 1: resume it with "
                                   r"as many ranks, or load it with ckpt.load\(other_world=0\)")
        self.assertIn("ONE 1 True", r.stdout)
        # other_world=k: the replicated entries with rank k's own, said once
        load = ("import ckpt, torch\n"
                "s = ckpt.load(other_world=1)\n"
                "print('GOT', sorted(s), s['mine'].tolist(), torch.equal(s['w'], "
                "torch.arange(100000.) * 2), ckpt.loaded())\n"
                "try:\n    ckpt.load(other_world=2)\n"
                "except ckpt.CkptError as e:\n    print('ERR', e)\n")
        r = subprocess.run([U.PY, "-c", load], env=env, cwd=work, capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("GOT ['mine', 'w'] [1.0, 1.0, 1.0] True "
                      "{'step': 2, 'world_size': 2, 'part': 1}", r.stdout)
        self.assertIn("step 2 was written by 2 ranks, this job has 1: every rank took rank "
                      "1's own entries ('mine') with the replicated ones", r.stderr)
        self.assertRegex(r.stdout, r"ERR .*written by 2 ranks: it has no part 2")
        # and a checkpoint of one process on two ranks: each rank takes it
        # whole, as the first process wrote it; saved again by 2 ranks
        one = ("import ckpt, torch\n"
               "ckpt.save(5, {'w': torch.arange(1000.), 'step': 5})\n")
        two = os.path.join(self.tmp, "two.py")
        with open(two, "w") as f:
            f.write("import torch, torch.distributed as dist, ckpt\n"
                    "dist.init_process_group('gloo')\n"
                    "s = ckpt.load(other_world=0)\n"
                    "print('RANK', dist.get_rank(), s['step'], torch.equal(s['w'], "
                    "torch.arange(1000.)), ckpt.loaded(), flush=True)\n"
                    "ckpt.save(6, {'w': s['w'] + 1, 'step': 6}, replicated=True)\n"
                    "ckpt.wait()\n"
                    "dist.destroy_process_group()\n")
        env, work = self.machine("g", "grow")
        r = subprocess.run([U.PY, "-c", one], env=env, cwd=work, capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        j = self.job(torchrun(two), env, work)
        self.assertEqual(j.wait(), 0, j.text())
        for rank in (0, 1):
            self.assertIn("RANK %d 5 True {'step': 5, 'world_size': 1, 'part': 0}" % rank,
                          j.text())
        self.assertEqual(self.ls(env, work)[0]["step"], 6)
        self.assertEqual(self.ls(env, work)[0]["world_size"], 2)

    def test_exit_without_wait(self):
        # no ckpt.wait(): the exit ends the step (ckpt.close at exit), also
        # after destroy_process_group(); with a rank gone before it (no
        # exit handlers), the other does not hang and says the step is lost
        script = os.path.join(self.tmp, "nowait.py")
        with open(script, "w") as f:
            f.write("import os, sys, torch, torch.distributed as dist, ckpt\n"
                    "dist.init_process_group('gloo')\n"
                    "step, rank = int(sys.argv[1]), dist.get_rank()\n"
                    "ckpt.save(step, {'w': torch.ones(1 << 20) * step}, replicated=True)\n"
                    "dist.destroy_process_group()\n"
                    "if step == 4 and rank == 1:\n"
                    "    os._exit(0)\n")
        env, work = self.machine("a", "nowait")
        j = self.job(torchrun(script, "3"), env, work)
        self.assertEqual(j.wait(), 0, j.text())
        self.assertEqual(self.ls(env, work)[0]["step"], 3)
        t0 = time.monotonic()
        j = self.job(torchrun(script, "4"), env, work)
        self.assertEqual(j.wait(), 0, j.text())
        self.assertLess(time.monotonic() - t0, 120)
        self.assertIn("ckpt: the save of step 4 failed", j.text())
        self.assertEqual(self.ls(env, work)[0]["step"], 3)


if __name__ == "__main__":
    unittest.main()
