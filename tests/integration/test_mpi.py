#!/usr/bin/python3
"""Multi-rank checkpoints with MPI: one ckptrun over `mpirun -np 4` running
examples/mpi_trainer (replicated weights and Adam moments, per-rank RNG and
gradient EMA; docs/multirank.md), four libckpt clients on one control
socket, on a file:// store.

  Stop       SIGTERM to ckptrun: every rank saves the same step, rank 0
             commits it once (world_size 4 in `ckptrun ls --json`), ckptrun
             waits for that global commit and exits 75; a fresh machine
             resumes from it and ends byte-identical (--out: every rank's
             state) to an uninterrupted run
  Alone      mpirun without ckptrun, SIGTERM to it: every rank saves the
             same step, waits for its global commit and dies of the
             SIGTERM (libckpt alone); a fresh machine resumes it and ends
             byte-identical
  RankKilled a rank stops right after its ckpt_save() of a step (its part in
             flight, the commit impossible without it) and is SIGKILLed there
             (rank 3, then rank 0, the committer): that step never becomes
             visible, every rank resumes from the previous global step, and
             the run still ends byte-identical
  WorldSize  a checkpoint of 4 ranks resumed on 2: refused (CKPT_E_WORLD,
             exit 65); with --reshard each rank takes its old part (and the
             replicated state) through ckpt_restore_part, byte for byte,
             and saves global steps of 2 from then on
  Trials     random SIGKILLs (a rank, or ckptrun) a few milliseconds after
             the ranks' saving lines, i.e. during the parts' upload and the
             global commit: only whole global steps are ever listed, every
             restart resumes the newest of them on all ranks, and the end is
             byte-identical. CKPT_MPI_TRIALS trials (3 here; `make stress`:
             40)

Run:  /usr/bin/python3 tests/integration/test_mpi.py [-v] [Class.test...]
Binaries from $CKPT_BIN (set by ctest), else ./build/bin. Exits 77 (skip)
with the reason when mpirun or the mpi_trainer (built only when CMake finds
MPI) is missing.
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ckpt_testlib as T  # noqa: E402
from ckpt_testlib import BIN, CKPTRUN, Proc, alive, wait_for  # noqa: E402

SEED = int(os.environ.get("CKPT_TEST_SEED", str(int(time.time()))))
RNG = random.Random(SEED)

MPI_TRAINER = os.path.join(BIN, "mpi_trainer")
MPIRUN = shutil.which("mpirun")
NP = 4
STEPS = 400
TRAIN = ["--hidden", "256", "--input", "128", "--batch", "2"]
TRIALS = int(os.environ.get("CKPT_MPI_TRIALS", "3"))


def mpirun(*args, np=NP):
    return [MPIRUN, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
            "-np", str(np), MPI_TRAINER] + TRAIN + list(args)


def clean_env(**kw):
    # Open MPI: no warnings about the loopback-only network, shared memory
    # and the loopback TCP transport only
    return T.clean_env(OMPI_MCA_btl="self,vader,tcp", OMPI_MCA_btl_tcp_if_include="lo",
                       OMPI_MCA_oob_tcp_if_include="lo",
                       OMPI_MCA_btl_base_warn_component_unused="0", **kw)


class Mpi(unittest.TestCase):
    ref = None

    @classmethod
    def setUpClass(cls):
        cls.ctmp = tempfile.mkdtemp(prefix="ckpt-mpi-ref-")
        out = os.path.join(cls.ctmp, "ref.out")
        env = clean_env(HOME=cls.ctmp, CKPT_STORE="file://" + os.path.join(cls.ctmp, "store"),
                        CKPT_RUN="ref")
        t0 = time.monotonic()
        r = subprocess.run(mpirun("--steps", str(STEPS), "--every", "100", "--quiet",
                                  "--out", out), env=env, cwd=cls.ctmp, capture_output=True,
                           text=True, timeout=300)
        if r.returncode != 0:
            raise AssertionError("the uninterrupted run failed:\n" + r.stdout + r.stderr)
        cls.ref_s = time.monotonic() - t0
        with open(out, "rb") as f:
            cls.ref = f.read()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.ctmp, ignore_errors=True)

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ckpt-mpi-")
        self.store = "file://" + os.path.join(self.tmp, "store")
        self.procs = []
        self.n = 0
        self.fresh()

    def tearDown(self):
        for p in self.procs:
            p.kill()
        if os.environ.get("CKPT_TEST_KEEP"):
            print("kept %s" % self.tmp, file=sys.stderr)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def fresh(self):
        """A new machine: fresh HOME, CKPT_DIR and working directory."""
        self.n += 1
        self.work = os.path.join(self.tmp, "m%d" % self.n)
        os.makedirs(os.path.join(self.work, "home"))
        self.env = clean_env(HOME=os.path.join(self.work, "home"), CKPT_STORE=self.store,
                             CKPT_RUN="job", CKPT_DIR=os.path.join(self.work, "ck"),
                             CKPT_NOTICE="none")

    def start(self, *trainer_args, sleep_ms=5, ckptrun_args=()):
        """ckptrun -- mpirun -np 4 mpi_trainer ...; its output and the ranks'
        (mpirun forwards them) in one stream."""
        args = list(ckptrun_args) + ["--"] + mpirun(
            "--steps", str(STEPS), "--sleep-ms", str(sleep_ms),
            "--out", os.path.join(self.work, "out"), *trainer_args)
        p = Proc(args, self.env, self.work, stdout=Proc.MERGE)
        self.procs.append(p)
        return p

    def ranks(self, p):
        """@return {rank: pid} once every rank said hello to ckptrun, and the
        step they start at (the same on every rank)."""
        pids = {}
        for r in range(NP):
            m = p.wait_line(r"mpi_trainer: rank %d of %d pid (\d+)" % (r, NP), timeout=120)
            pids[r] = int(m.group(1))
        for r in range(NP):
            p.wait_line(r" connect pid=%d " % pids[r], timeout=60)
        start = int(p.wait_line(r"mpi_trainer: %d ranks start at step (\d+)" % NP,
                                timeout=120).group(1))
        for r in range(NP):
            m = p.wait_line(r"mpi_trainer: rank %d (?:resumed from step (\d+)|starting fresh)" % r)
            self.assertEqual(int(m.group(1) or 0), start, p.text())
        return pids, start

    def ls(self):
        r = subprocess.run([CKPTRUN, "ls", "--json"], env=self.env, cwd=self.work,
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0 and "does not exist" in r.stderr:
            return []  # nothing saved yet: no store
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def assert_whole(self, entries, text=""):
        """Every listed checkpoint is a global one of the 4 ranks."""
        for e in entries:
            self.assertEqual(e.get("world_size"), NP, "%s\n%s" % (e, text))
            self.assertEqual(e["items"], 4 + 2 * NP, e)  # 4 replicated, 2 per rank

    def finish(self):
        """A fresh machine resumes the run to its end under ckptrun: the
        final state of every rank is the uninterrupted run's."""
        self.fresh()
        before = self.ls()
        p = self.start(sleep_ms=0)
        _, start = self.ranks(p)
        self.assertEqual(start, before[0]["step"] if before else 0, p.text())
        self.assertEqual(p.wait(300), 0, p.text())
        with open(os.path.join(self.work, "out"), "rb") as f:
            self.assertEqual(f.read(), self.ref, "final state differs from the uninterrupted "
                             "run's (seed %d)" % SEED)
        return start


class Stop(Mpi):
    def test_sigterm_one_global_commit_then_resume_identical(self):
        p = self.start("--every", "0")
        pids, start = self.ranks(p)
        self.assertEqual(start, 0)
        p.wait_line(r"mpi_trainer: step 50 loss")
        p.p.send_signal(signal.SIGTERM)
        rc = p.wait(120)
        text = p.text()
        self.assertEqual(rc, 75, text)
        self.assertIn("final committed=true", text)
        final = int(re.search(r" final committed=true step=(\d+)", text).group(1))
        self.assertGreaterEqual(final, 50)  # the request meets step 50 at the earliest
        # every rank saved that step (the request reached them all at the
        # same should_save), and nothing else
        for r in range(NP):
            saved = [int(s) for s in re.findall(r"mpi_trainer: rank %d saving step (\d+)" % r,
                                                text)]
            self.assertEqual(saved, [final], text)
        # one global commit, reported once (by rank 0), before ckptrun
        # signalled the job
        commits = re.findall(r" commit step=(\d+) .*source=socket", text)
        self.assertEqual(commits, [str(final)], text)
        self.assertLess(text.index(" commit step=%d " % final), text.index(" terminate "), text)
        entries = self.ls()
        self.assertEqual([e["step"] for e in entries], [final], entries)
        self.assert_whole(entries, text)
        for pid in pids.values():
            self.assertFalse(alive(pid))
        # a fresh machine resumes that step on all four ranks, identical end
        self.assertEqual(self.finish(), final)


class Alone(Mpi):
    def test_sigterm_to_mpirun_without_ckptrun(self):
        """mpirun alone, SIGTERM to it (it forwards the signal to every
        rank): each rank takes it as a stop (libckpt alone), all save the
        same step, rank 0 says it is committed, every rank dies of it; a
        fresh machine resumes that step and ends byte-identical."""
        log = os.path.join(self.work, "alone.log")
        cmd = mpirun("--steps", str(STEPS), "--sleep-ms", "5", "--every", "0",
                     "--out", os.path.join(self.work, "out"))
        with open(log, "w") as f:
            p = subprocess.Popen(cmd, env=self.env, cwd=self.work, stdout=f,
                                 stderr=subprocess.STDOUT)
        try:
            def at_50():
                with open(log) as f:
                    return "mpi_trainer: step 50 loss" in f.read()
            wait_for(at_50, timeout=120, what="step 50")
            p.send_signal(signal.SIGTERM)
            p.wait(120)
        finally:
            if p.poll() is None:
                p.kill()
        with open(log) as f:
            text = f.read()
        m = re.findall(r"^ckpt: SIGTERM: step (\d+) is committed; exiting", text, re.M)
        self.assertEqual(len(m), 1, text)  # said once, by rank 0
        final = int(m[0])
        self.assertGreater(final, 50, text)
        # --every 0: the stop's save is the only one, and it never returns
        # (the trainer says "saving" after ckpt_save): each rank ends in it
        self.assertNotIn("saving step", text)
        self.assertNotIn("mpi_trainer: done", text)
        entries = self.ls()
        self.assertEqual([e["step"] for e in entries], [final], entries)
        self.assert_whole(entries, text)
        self.assertEqual(self.finish(), final)


class RankKilled(Mpi):
    def kill_stalled(self, victim):
        stall = 30
        p = self.start("--every", "10", "--stall-rank", str(victim), "--stall-step", str(stall))
        pids, _ = self.ranks(p)
        p.wait_line(r"mpi_trainer: rank %d stalled after saving step %d" % (victim, stall))
        # the others reach step 30 too (their parts are in flight), then wait
        # in the next collective for the stalled rank
        for r in range(NP):
            p.wait_line(r"mpi_trainer: rank %d saving step %d" % (r, stall))
        listed = self.ls()
        self.assertNotIn(stall, [e["step"] for e in listed], p.text())
        os.kill(pids[victim], signal.SIGKILL)
        rc = p.wait(120)
        text = p.text()
        self.assertNotIn(rc, (0, 75), text)
        wait_for(lambda: not any(alive(x) for x in pids.values()), timeout=30,
                 what="the ranks to end after rank %d was killed" % victim)
        entries = self.ls()
        steps = [e["step"] for e in entries]
        self.assertNotIn(stall, steps, text)
        self.assertTrue(steps, text)
        self.assertTrue(all(s % 10 == 0 and s < stall for s in steps), steps)
        self.assert_whole(entries, text)
        # the previous global step restores on every rank, the end is identical
        self.assertEqual(self.finish(), steps[0])

    def test_sigkill_rank3_mid_save(self):
        self.kill_stalled(3)

    def test_sigkill_rank0_mid_save(self):
        self.kill_stalled(0)


class Trials(Mpi):
    def test_random_kills_during_global_commit(self):
        kills = 0
        last = 0
        for trial in range(TRIALS):
            self.fresh()
            before = self.ls()
            if before and before[0]["step"] + 21 >= STEPS:
                # too near the end for another kill (40 trials in `make
                # stress` reach it): this run ends as the uninterrupted one,
                # and the trials go on with a new one
                self.finish()
                self.store = "file://" + os.path.join(self.tmp, "store%d" % trial)
                self.fresh()
                before, last = [], 0
            self.assert_whole(before)
            p = self.start("--every", "7", sleep_ms=2)
            pids, start = self.ranks(p)
            # every restart resumes the newest global step, on all ranks
            self.assertEqual(start, before[0]["step"] if before else 0,
                             "trial %d (seed %d)\n%s" % (trial, SEED, p.text()))
            self.assertGreaterEqual(start, last)
            last = start
            # the second save after the start: its parts go up while the
            # ranks train on, rank 0 commits once all are durable
            p.wait_line(r"mpi_trainer: rank \d saving step %d$" % (start + 14), timeout=120)
            time.sleep(RNG.uniform(0, 0.03))
            victim = RNG.choice(["ckptrun"] + list(range(NP)))
            os.kill(p.p.pid if victim == "ckptrun" else pids[victim], signal.SIGKILL)
            kills += 1
            p.wait(120)
            wait_for(lambda: not any(alive(x) for x in pids.values()), timeout=30,
                     what="the ranks to end (trial %d, victim %s)" % (trial, victim))
            after = self.ls()
            self.assert_whole(after, p.text())
            self.assertTrue(all(s["step"] % 7 == 0 for s in after), after)
        self.assertEqual(kills, TRIALS)
        self.finish()


class WorldSize(Mpi):
    """A checkpoint of 4 ranks resumed on 2: refused by ckpt_restore
    (CKPT_E_WORLD naming both sizes, the trainer exits 65); with --reshard
    the trainer reads part r (its per-rank state) and the replicated state
    with ckpt_restore_part, and the next saves are global steps of 2."""

    def run_np(self, np, *args):
        return subprocess.run(mpirun(*args, np=np), env=self.env, cwd=self.work,
                              capture_output=True, text=True, timeout=300)

    @staticmethod
    def split(blob, world):
        """--out as (meta, replicated, [per-rank records])."""
        nparam = (len(blob) - 32 - 40 * world) // (12 + 4 * world)
        rep = blob[32:32 + 12 * nparam]
        rec = 40 + 4 * nparam
        base = 32 + 12 * nparam
        return blob[:32], rep, [blob[base + r * rec:base + (r + 1) * rec] for r in range(world)]

    def test_four_ranks_resumed_on_two(self):
        o4, o2 = os.path.join(self.work, "o4"), os.path.join(self.work, "o2")
        r = self.run_np(4, "--steps", "20", "--every", "10", "--out", o4)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        r = self.run_np(2, "--steps", "20", "--every", "10", "--out", o2)
        self.assertEqual(r.returncode, 65, r.stdout + r.stderr)
        self.assertIn("written by 4 ranks; this job has 2", r.stderr)
        self.assertFalse(os.path.exists(o2))
        r = self.run_np(2, "--steps", "20", "--every", "10", "--reshard", "--out", o2)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        for rank in (0, 1):
            self.assertIn("rank %d resharded step 20 of 4 ranks (part %d)" % (rank, rank),
                          r.stdout)
        with open(o4, "rb") as f:
            _, rep4, recs4 = self.split(f.read(), 4)
        with open(o2, "rb") as f:
            _, rep2, recs2 = self.split(f.read(), 2)
        self.assertEqual(rep2, rep4)  # weights and moments of step 20
        for rank in (0, 1):
            # RNG, counters, rank and gradient EMA of that rank; the world
            # field (bytes 36..40) is the new job's
            self.assertEqual(recs2[rank][:36], recs4[rank][:36])
            self.assertEqual(recs2[rank][40:], recs4[rank][40:])
        r = self.run_np(2, "--steps", "40", "--every", "10", "--reshard", "--out", o2)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        steps = {e["step"]: e["world_size"] for e in self.ls()}
        self.assertEqual(steps, {40: 2, 30: 2, 20: 4, 10: 4} if 10 in steps else
                         {40: 2, 30: 2, 20: 4}, steps)


# One batch job: ckptrun in the background over one srun step of 4 tasks
# (Open MPI's ranks wired up by SLURM's PMIx plugin), the recipe of
# test_slurm.py otherwise. The ranks are slurmstepd's children, not
# ckptrun's: they reach its socket with the run's key (CKPT_SOCKET_KEY,
# which srun exports to them).
SLURM_RECIPE = r"""#!/bin/bash
export CKPT_STORE="{store}" CKPT_RUN=job CKPT_DIR="{ckdir}" CKPT_NOTICE=none HOME="{home}"
{ckptrun} run --grace 30s -- srun --mpi=pmix --ntasks={np} --kill-on-bad-exit=1 {trainer} &
pid=$!
echo "$pid" > "{pidfile}"
trap 'kill -USR1 "$pid"' USR1
while kill -0 "$pid" 2>/dev/null; do wait "$pid"; done
wait "$pid"; rc=$?
echo "ckptrun exit $rc"
exit "$rc"
"""


class Slurm(Mpi):
    """The trainer as 4 tasks of one job step (`srun --ntasks=4
    --mpi=pmix`) on a single-node SLURM started on loopback (test_slurm.py's
    Cluster, one slurmd). Several nodes were tried and do not work here:
    Debian's slurmd runs two per host (-N n0/n1, each its Port, spool, pid
    and log) and plain `srun -N2` tasks launch on both, but Open MPI ranks
    over two such nodes do not: srun's PMIx plugin names its directory
    /tmp/spmix_appdir_<uid>_<job>.<step> per node, which collides on one host
    (slurmstepd on n1: "Cannot create directory ... File exists"), and with a
    TmpFS of its own per node the ranks then never got past the PMIx
    wire-up (srun still running after 120 s; not diagnosed further). Inside
    the step every rank has SLURM_PROCID /
    SLURM_NTASKS (and PMIX_RANK); libckpt resolves rank and size at
    ckpt_open and checks them against the MPI collective's, and the trainer
    prints what libckpt resolved. The scheduler's warning (SIGUSR1 to
    ckptrun) stops the job with one global commit (exit 75); a second job
    resumes it and ends byte-identical to the mpirun-launched uninterrupted
    run. Skips (77) when the cluster cannot start or srun has no pmix."""

    @classmethod
    def setUpClass(cls):
        cls.stmp = tempfile.mkdtemp(prefix="ckpt-mpi-slurm-")
        cls.cluster = T.Cluster(os.path.join(cls.stmp, "cluster"))
        os.makedirs(cls.cluster.root)
        why = cls.cluster.start()
        if not why:
            r = cls.cluster.run("srun", "--mpi=list", check=False)
            if "pmix" not in r.stdout + r.stderr:
                why = "srun has no pmix plugin (srun --mpi=list: %s)" % (
                    (r.stdout + r.stderr).strip())
        if why:
            cls.cluster.stop()
            shutil.rmtree(cls.stmp, ignore_errors=True)
            print("SKIP: %s" % why, file=sys.stderr)
            sys.exit(77)
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls.cluster.stop()
        shutil.rmtree(cls.stmp, ignore_errors=True)

    def submit(self, name, sleep_ms):
        self.fresh()
        d = self.work
        job = {"log": os.path.join(d, "job.log"), "pidfile": os.path.join(d, "ckptrun.pid")}
        trainer = " ".join([MPI_TRAINER] + TRAIN + [
            "--steps", str(STEPS), "--sleep-ms", str(sleep_ms), "--every", "0",
            "--out", os.path.join(d, "out")])
        script = os.path.join(d, "job.sh")
        with open(script, "w") as f:
            f.write(SLURM_RECIPE.format(store=self.store, ckdir=os.path.join(d, "ck"),
                                        home=os.path.join(d, "home"), ckptrun=CKPTRUN,
                                        np=NP, trainer=trainer, pidfile=job["pidfile"]))
        r = self.cluster.run("sbatch", "--parsable", "-J", name, "--ntasks=%d" % NP,
                             "-o", job["log"], script)
        job["id"] = r.stdout.strip().split(";")[0]
        return job

    def log(self, job):
        return T.read_text(job["log"])

    def wait_log(self, job, pattern, timeout=120):
        return T.wait_file(job["log"], pattern, timeout=timeout, what="the job's output")

    def started(self, job):
        """@return the step the four tasks start at, once each said hello."""
        for r in range(NP):
            m = self.wait_log(job, r"mpi_trainer: rank %d of %d pid (\d+) libckpt rank (\d+) "
                                   r"of (\d+)" % (r, NP))
            self.assertEqual((int(m.group(2)), int(m.group(3))), (r, NP), self.log(job))
            self.wait_log(job, r" connect pid=%s " % m.group(1))
        return int(self.wait_log(job, r"mpi_trainer: %d ranks start at step (\d+)" % NP)
                   .group(1))

    def test_srun_tasks_stop_and_resume(self):
        job = self.submit("stop", 5)
        self.assertEqual(self.started(job), 0)
        self.wait_log(job, r"mpi_trainer: step 50 loss")
        with open(job["pidfile"]) as f:
            os.kill(int(f.read()), signal.SIGUSR1)  # the scheduler's warning
        rc = int(self.wait_log(job, r"^ckptrun exit (\d+)").group(1))
        text = self.log(job)
        self.assertEqual(rc, 75, text)
        final = int(re.search(r" final committed=true step=(\d+)", text).group(1))
        for r in range(NP):
            self.assertEqual(re.findall(r"mpi_trainer: rank %d saving step (\d+)" % r, text),
                             [str(final)], text)
        entries = self.ls()
        self.assertEqual([e["step"] for e in entries], [final], entries)
        self.assert_whole(entries, text)

        job = self.submit("resume", 0)
        self.assertEqual(self.started(job), final)
        rc = int(self.wait_log(job, r"^ckptrun exit (\d+)", timeout=300).group(1))
        self.assertEqual(rc, 0, self.log(job))
        with open(os.path.join(self.work, "out"), "rb") as f:
            self.assertEqual(f.read(), self.ref, "the srun job's final state differs from "
                             "the uninterrupted mpirun run's")


def main():
    if not MPIRUN:
        print("SKIP: mpirun is not installed (openmpi-bin; make deps)", file=sys.stderr)
        sys.exit(77)
    if not os.access(MPI_TRAINER, os.X_OK):
        print("SKIP: %s was not built (CMake found no MPI: libopenmpi-dev)" % MPI_TRAINER,
              file=sys.stderr)
        sys.exit(77)
    print("seed %d (CKPT_TEST_SEED)" % SEED, file=sys.stderr)
    unittest.main()


if __name__ == "__main__":
    main()
