#!/usr/bin/python3
"""ckptrun under a real single-node SLURM.

The test starts its own cluster on loopback: a munge key and munged, a
generated slurm.conf (free ports, state in a temporary directory, the
default requeue settings: nothing requeues a job that exits 75 by itself),
slurmctld and slurmd; and stops them after. It skips (exit 77, with the
reason) only when that cluster cannot be started here.

Every job runs the batch-script recipe of docs/notices.md ("SLURM"): ckptrun
in the background, the scheduler's warning signal (B:USR1) forwarded to it,
and `scontrol requeue "$SLURM_JOB_ID"` when ckptrun exits 75 after that
warning -- never after a plain SIGTERM. Five jobs at once, each its own run:

  warn      scancel --signal=USR1 --batch: stop, 75, requeued by the script
  timelimit --time=1 --signal=B:USR1@30: the same, from the time limit
  requeue   scontrol requeue while it runs: SLURM requeues it
  hardkill  SIGKILL of ckptrun, then scontrol requeue: the requeued job takes
            the dead runner's lease at once (same host) and resumes
  cancel    plain scancel: the user's stop; the job ends (not requeued),
            the run is recorded as stopped with its final checkpoint
A requeued job waits on its BeginTime: the test releases it
(scontrol update StartTime=now). Every requeued job ends COMPLETED with the
trainer's output byte-identical to an uninterrupted run.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ckpt_testlib as T  # noqa: E402
from ckpt_testlib import CKPTRUN, PY  # noqa: E402

TRAINER = os.path.join(HERE, "helper_trainer.py")
STEPS = 2500
SLEEP_MS = 10

# The recipe of docs/notices.md, with this test's paths filled in.
RECIPE = r"""#!/bin/bash
#SBATCH --signal=B:USR1@30
#SBATCH --requeue
#SBATCH --open-mode=append
export CKPT_STORE="{store}" CKPT_RUN="{run}" CKPT_DIR="{ckdir}" CKPT_NOTICE=none HOME="{home}"
# ckptrun in the background: this script decides about the requeue.
{ckptrun} run --lead 20s --grace 8s -- {trainer} &
pid=$!
echo "$pid" > "{pidfile}"
warned=
trap 'warned=1; kill -USR1 "$pid"' USR1   # the scheduler's warning: checkpoint, stop, requeue
trap 'kill -TERM "$pid"' TERM             # scancel: stop; the job ends
while kill -0 "$pid" 2>/dev/null; do wait "$pid"; done
wait "$pid"; rc=$?
echo "ckptrun exit $rc warned=${{warned:-0}}"
if [ "$rc" = 75 ] && [ -n "$warned" ]; then
  scontrol requeue "$SLURM_JOB_ID"
fi
exit "$rc"
"""


class Slurm(unittest.TestCase):
    cluster = None

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ckpt-slurm-")
        cls.cluster = T.Cluster(os.path.join(cls.tmp, "cluster"))
        os.makedirs(cls.cluster.root)
        why = cls.cluster.start()
        if why:
            cls.cluster.stop()
            shutil.rmtree(cls.tmp, ignore_errors=True)
            print("SKIP: cannot start a SLURM cluster here: %s" % why, file=sys.stderr)
            sys.exit(77)

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()
        if os.environ.get("CKPT_TEST_KEEP"):
            print("kept %s" % cls.tmp, file=sys.stderr)
        else:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def reference(self):
        d = os.path.join(self.tmp, "ref")
        env = {k: v for k, v in os.environ.items() if not k.startswith("CKPT_")}
        env["CKPT_DIR"] = os.path.join(d, "ck")
        out = os.path.join(d, "out")
        os.makedirs(d)
        subprocess.run([PY, TRAINER, "--steps", str(STEPS), "--out", out, "--sleep-ms", "0"],
                       env=env, check=True, capture_output=True, timeout=120)
        with open(out, "rb") as f:
            return f.read()

    def submit(self, name, extra=(), sleep_ms=SLEEP_MS):
        d = os.path.join(self.tmp, name)
        os.makedirs(os.path.join(d, "home"))
        job = {"name": name, "dir": d, "out": os.path.join(d, "final.out"),
               "log": os.path.join(d, "job.log"), "pidfile": os.path.join(d, "ckptrun.pid")}
        trainer = "%s %s --steps %d --every 150 --sleep-ms %d --out %s" % (
            PY, TRAINER, STEPS, sleep_ms, job["out"])
        script = os.path.join(d, "job.sh")
        with open(script, "w") as f:
            f.write(RECIPE.format(store="file://" + os.path.join(self.tmp, "store"), run=name,
                                  ckdir=os.path.join(d, "ck"), home=os.path.join(d, "home"),
                                  ckptrun=CKPTRUN, trainer=trainer, pidfile=job["pidfile"]))
        r = self.cluster.run("sbatch", "--parsable", "-J", name, "-o", job["log"],
                             *extra, script)
        job["id"] = r.stdout.strip().split(";")[0]
        return job

    def log(self, job):
        return T.read_text(job["log"])

    def wait_log(self, job, pattern, count=1, timeout=90):
        T.wait_file(job["log"], pattern, count, timeout, what=job["name"])

    def until_done(self, job, timeout=200):
        """Release the job whenever it waits on its BeginTime after a requeue;
        @return its final state."""
        end = time.monotonic() + timeout
        pending_since = None
        while time.monotonic() < end:
            info = self.cluster.job(job["id"])
            state = info.get("JobState")
            if state == "PENDING" and info.get("Reason") == "BeginTime":
                # SLURM holds a requeued job back (BeginTime) while slurmd
                # cleans up its previous instance; released too early,
                # slurmd refuses to launch it ("already killed"). Give the
                # cleanup a few seconds instead of SLURM's two minutes.
                if pending_since is None:
                    pending_since = time.monotonic()
                elif time.monotonic() - pending_since > 4:
                    self.cluster.run("scontrol", "update", "JobId=" + job["id"],
                                     "StartTime=now", check=False)
                    pending_since = None
            elif state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"):
                # The end once the last instance's script said how ckptrun
                # exited (each instance one line; SLURM may show the state
                # while the script still finishes), unless that is the
                # recipe's requeue case (75 after the warning): the script
                # requeues after its exit line.
                exits = re.findall(r"ckptrun exit (\d+) warned=(\d)", self.log(job))
                if len(exits) > int(info.get("Restarts", "0")) and exits[-1] != ("75", "1"):
                    return info
            else:
                pending_since = None
            time.sleep(0.5)
        raise AssertionError("%s did not finish: %s\n%s" % (job["name"],
                                                           self.cluster.job(job["id"]),
                                                           self.log(job)))

    def status(self, job):
        r = subprocess.run([CKPTRUN, "status", "--json", "--store",
                            "file://" + os.path.join(self.tmp, "store"), "--run", job["name"]],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def test_requeue_recipes(self):
        ref = self.reference()
        jobs = {n: self.submit(n) for n in ("warn", "requeue", "hardkill", "cancel")}
        # still training when the warning comes, 30 s before the 1 min
        # limit: 2500 steps of 20 ms
        jobs["timelimit"] = self.submit("timelimit", ("--time=1",), sleep_ms=20)
        for job in jobs.values():
            self.wait_log(job, r"trainer: start at step 0")
        # a checkpoint committed before the stops: the final one is not the first
        for job in jobs.values():
            self.wait_log(job, r" commit step=\d+")
        c = self.cluster
        c.run("scancel", "--signal=USR1", "--batch", jobs["warn"]["id"])
        c.run("scontrol", "requeue", jobs["requeue"]["id"])
        self.wait_log(jobs["hardkill"], r" commit step=\d+")  # a checkpoint to resume from
        with open(jobs["hardkill"]["pidfile"]) as f:
            os.kill(int(f.read()), signal.SIGKILL)
        self.wait_log(jobs["hardkill"], r"ckptrun exit 137")
        wait = time.monotonic() + 30
        while c.job(jobs["hardkill"]["id"]).get("JobState") not in ("FAILED", "COMPLETED") \
                and time.monotonic() < wait:
            time.sleep(0.2)
        c.run("scontrol", "requeue", jobs["hardkill"]["id"])
        c.run("scancel", jobs["cancel"]["id"])

        results = {}
        threads = [threading.Thread(target=lambda n=n: results.__setitem__(
            n, self.until_done(jobs[n]))) for n in jobs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for n in ("warn", "timelimit", "requeue", "hardkill"):
            job, info = jobs[n], results.get(n)
            self.assertIsNotNone(info, n)
            self.assertEqual(info.get("JobState"), "COMPLETED", "%s: %s\n%s" % (
                n, info, self.log(job)))
            self.assertGreaterEqual(int(info.get("Restarts", "0")), 1, n)
            self.assertRegex(self.log(job), r"trainer: start at step [1-9]")  # resumed
            with open(job["out"], "rb") as f:
                self.assertEqual(f.read(), ref, n)
            self.assertEqual(self.status(job)["state"], "completed")
        for n in ("warn", "timelimit"):
            self.assertIn("ckptrun exit 75 warned=1", self.log(jobs[n]), n)
        self.assertIn("is gone: lease taken over at once", self.log(jobs["hardkill"]))
        # scancel: the user's stop ends the job; the run is stopped with a
        # final checkpoint, and nothing brings it back
        job, info = jobs["cancel"], results["cancel"]
        self.assertEqual(info.get("JobState"), "CANCELLED", self.log(job))
        self.assertEqual(info.get("Restarts"), "0")
        self.assertIn("ckptrun exit 143 warned=0", self.log(job))
        self.assertIn("stop reason=SIGTERM user=true", self.log(job))
        self.assertIn("final committed=true", self.log(job))
        st = self.status(job)
        self.assertEqual(st["state"], "stopped")
        self.assertFalse(os.path.exists(job["out"]))


if __name__ == "__main__":
    if not os.access(CKPTRUN, os.X_OK):
        sys.exit("ckptrun not found at %s (set CKPT_BIN)" % CKPTRUN)
    unittest.main()
