#!/usr/bin/python3
"""Integration tests of `ckptrun recover`, leases and fencing.

Drives the real ckptrun and c_trainer on loopback only:
  a) 4 `recover` started at once, 10 rounds on file:// (and, when tests/npm
     is installed, 5 on Azurite and 3 on s3rver, which has no conditional
     writes: the weak lease): exactly one runs the command, the others exit
     0 naming the holder;
  b) the runner killed with SIGKILL: once its lease (--lease 3s) expires,
     another `recover` takes over and resumes; output identical;
  c) a runner frozen (SIGSTOP, ckptrun and child) past its lease, then
     SIGCONT: it cannot commit, stops with exit 74 and a clear line; the new
     holder's checkpoints verify and its output is identical;
  d) end to end: "machine A" (own HOME, CKPT_DIR) stopped by a mock AWS spot
     notice exits 75; "machine B", a cron-like loop of `recover` every
     second, finishes the run with output identical to an uninterrupted
     run; later `recover` calls exit 0 at once. On file:// and, when the
     build has S3, on tests/tools/mock_s3.py (which enforces conditional
     writes).

Run:  /usr/bin/python3 tests/integration/test_recover.py [--peers] [-v] [test_name...]
The subtests that need a peer from tests/npm (Azurite, s3rver) run only with
--peers (ctest: recover_peers), the others without it (recover_integration).
Exit 0 when every subtest passed, 77 when none failed but some were skipped
(ctest reports the test skipped, with the reasons on stdout: what did not
run is not counted as passed), else 1.

Environment: CKPT_BIN (build/bin), CKPT_SRC (source tree).
Standard library only: run with /usr/bin/python3.
"""
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
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ckpt_testlib as T  # noqa: E402
from ckpt_testlib import CKPTRUN, C_TRAINER as TRAINER  # noqa: E402
# small model: fast steps, small checkpoints; --sleep-ms sets the pace
TARGS = ["--every", "10", "--hidden", "32", "--input", "64", "--batch", "8", "--quiet"]


def base_env(home, store, ckdir):
    return T.clean_env(drop=("AWS_", "AZURE_"), HOME=home, CKPT_STORE=store, CKPT_DIR=ckdir,
                       CKPT_NOTICE="none", AWS_EC2_METADATA_DISABLED="true")


class Proc(T.Proc):
    """ckptrun in a session of its own (tearDown kills its whole group),
    with its stdout (the trainer's) read too."""

    def __init__(self, args, env, cwd):
        super().__init__(args, env, cwd, stdout=T.Proc.LINES, start_new_session=True)

    stderr = T.Proc.text
    stdout = T.Proc.out_text


class RecoverTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ckpt-recover-")
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            p.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- helpers ----------------------------------------------------------
    def machine(self, name, store):
        home = os.path.join(self.tmp, name)
        os.makedirs(home, exist_ok=True)
        return base_env(home, store, os.path.join(home, "ckpt")), home

    def start(self, args, env, cwd):
        p = Proc(args, env, cwd)
        self.procs.append(p)
        return p

    def ckptrun(self, args, env, cwd, timeout=60):
        r = subprocess.run([CKPTRUN] + args, env=env, cwd=cwd, capture_output=True,
                           timeout=timeout)
        return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")

    def reference(self, steps):
        out = os.path.join(self.tmp, "ref-%d.bin" % steps)
        if not os.path.exists(out):
            env = base_env(self.tmp, "file://" + os.path.join(self.tmp, "refstore"), self.tmp)
            subprocess.run([TRAINER, "--steps", str(steps), "--out", out, "--run", "ref%d" % steps]
                           + TARGS, env=env, check=True, capture_output=True, timeout=120)
        with open(out, "rb") as f:
            return f.read()

    def head_step(self, env, cwd, run):
        rc, out, _ = self.ckptrun(["ls", "--run", run, "--json"], env, cwd)
        if rc != 0:
            return -1
        try:
            data = json.loads(out)
        except ValueError:
            return -1
        steps = [int(c["step"]) for c in (data if isinstance(data, list) else
                                          data.get("checkpoints", []))]
        return max(steps) if steps else -1

    def wait_step(self, env, cwd, run, step, timeout=30):
        t0 = time.time()
        while time.time() - t0 < timeout:
            if self.head_step(env, cwd, run) >= step:
                return
            time.sleep(0.2)
        self.fail("run %s never reached step %d" % (run, step))

    def wait_stderr(self, p, pattern, what, timeout=60):
        """Wait until p's stderr matches `pattern`; fail saying `what` did not happen."""
        end = time.monotonic() + timeout
        while not re.search(pattern, p.stderr()):
            if time.monotonic() > end:
                self.fail("%s: no %r within %d s in:\n%s" % (what, pattern, timeout, p.stderr()))
            time.sleep(0.1)

    def trainer_cmd(self, steps, out, sleep_ms):
        return [TRAINER, "--steps", str(steps), "--out", out, "--sleep-ms", str(sleep_ms)] + TARGS

    def race(self, env, home, rounds):
        for rnd in range(rounds):
            run = "race%d" % rnd
            mark = os.path.join(home, run + ".mark")
            cmd = ["recover", "--run", run, "--lease", "5s", "--",
                   "sh", "-c", "echo ran >> '%s'; sleep 1" % mark]
            ps = [self.start(cmd, env, home) for i in range(4)]
            # longer than the store's retry budget (120 s): four writers of
            # one LEASE key at once can make s3rver answer 500 on a loaded
            # machine, and each runner rides that out before it decides
            try:
                codes = [p.wait(150) for p in ps]
            except subprocess.TimeoutExpired:
                for p in ps:
                    if p.p.poll() is None:
                        p.p.kill()
                self.fail("round %d: a runner did not finish: %s"
                          % (rnd, [p.stderr()[-2000:] for p in ps]))
            self.assertEqual(codes, [0, 0, 0, 0], [p.stderr() for p in ps])
            with open(mark) as f:
                self.assertEqual(f.read().count("ran"), 1, "round %d" % rnd)
            losers = [p for p in ps if "start command=" not in p.stderr()]
            self.assertEqual(len(losers), 3, [p.stderr() for p in ps])
            for p in losers:
                self.assertRegex(p.stderr(), r"(held by \S+:\d+:[0-9a-f]+ \(epoch \d+\), last "
                                             r"heartbeat|taken by another runner|is completed)")

    # ---- a) races ---------------------------------------------------------
    def test_a_four_at_once(self):
        env, home = self.machine("m", "file://" + os.path.join(self.tmp, "store"))
        self.race(env, home, 10)
        # a completed run: further recover calls do nothing, at once
        t0 = time.time()
        rc, _, err = self.ckptrun(["recover", "--run", "race0", "--", "false"], env, home)
        self.assertEqual(rc, 0, err)
        self.assertIn("is completed", err)
        self.assertLess(time.time() - t0, 5)
        # no name: usage error, even in a directory with a usable name
        rc, _, err = self.ckptrun(["recover", "--", "true"], env, home)
        self.assertEqual(rc, 64)
        self.assertIn("--run NAME or CKPT_RUN", err)

    def test_a_four_at_once_azurite(self):
        peer = T.NpmPeer("azurite", self.tmp)
        try:
            env, home = self.machine("m", "az://ckpt-test/recover")
            env.update(peer.env())  # the well-known Azurite development account
            self.race(env, home, 5)
        finally:
            peer.stop()

    def test_a_four_at_once_s3rver_weak(self):
        # s3rver has no conditional writes: the weak lease (write, settle,
        # read back) still lets exactly one of four simultaneous starts run
        peer = T.NpmPeer("s3rver", self.tmp)
        try:
            env, home = self.machine("m", "s3://ckpt-test/recover")
            env.update(peer.env())
            self.race(env, home, 3)
        finally:
            peer.stop()

    # ---- b) SIGKILL -------------------------------------------------------
    def test_b_sigkill_then_takeover(self):
        # A runner killed with SIGKILL on this machine: its lease names a
        # process of this boot and PID namespace that is gone, so the next
        # recover takes it over at once (no waiting for the 3 s expiry);
        # until then `status` calls it stale, not running.
        env, home = self.machine("m", "file://" + os.path.join(self.tmp, "store"))
        out = os.path.join(home, "b.bin")
        cmd = ["recover", "--run", "b", "--lease", "60s", "--"] + self.trainer_cmd(200, out, 25)
        a = self.start(cmd, env, home)
        self.wait_step(env, home, "b", 30)
        os.kill(a.p.pid, signal.SIGKILL)  # ckptrun only; the child dies with it
        a.wait()
        rc, sout, err = self.ckptrun(["status", "--run", "b", "--json"], env, home)
        self.assertEqual(rc, 0, err)
        st = json.loads(sout)
        self.assertEqual((st["state"], st["lease"]["state"], st["lease"]["live"]),
                         ("stale", "stale", False), sout)
        killed = time.time()
        p = self.start(cmd, env, home)
        self.assertEqual(p.wait(60), 0, p.stderr())
        self.assertLess(time.time() - killed, 30)
        self.assertRegex(p.stderr(), r"lease msg=\"run b was held by \S+ \(epoch 1\), whose "
                                     r"process \(pid %d on this host\) is gone" % a.p.pid)
        self.assertRegex(p.stderr(), r"lease action=acquired .*epoch=2 .*stale_holder=")
        self.assertRegex(p.stdout(), r"resumed from step [1-9]")
        with open(out, "rb") as f:
            self.assertEqual(f.read(), self.reference(200))

    def test_b2_sigkill_elsewhere_waits_for_expiry(self):
        # The same kill seen from another PID namespace (another container
        # on this host: same boot id): its PIDs mean nothing there, so only
        # the expiry counts -- recover names the live holder and does
        # nothing, and takes over once the 3 s lease has expired.
        probe = subprocess.run(["unshare", "-pf", "--mount-proc", "true"], capture_output=True)
        if probe.returncode != 0:
            self.skipTest("cannot create a PID namespace here")
        env, home = self.machine("m", "file://" + os.path.join(self.tmp, "store"))
        out = os.path.join(home, "b2.bin")
        cmd = ["recover", "--run", "b2", "--lease", "3s", "--"] + self.trainer_cmd(200, out, 25)
        a = subprocess.Popen(["unshare", "-pf", "--kill-child", "--mount-proc", CKPTRUN] + cmd,
                             env=env, cwd=home, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.wait_step(env, home, "b2", 30)
        a.kill()  # unshare, and with it the namespace: ckptrun and its child
        a.wait()
        killed = time.time()
        rc, _, err = self.ckptrun(cmd[:5] + ["--", "false"], env, home)
        self.assertEqual(rc, 0, err)
        self.assertRegex(err, r"held by \S+ \(epoch 1\), last heartbeat")
        taker = None
        while time.time() - killed < 30 and taker is None:
            p = self.start(cmd, env, home)
            rc = p.wait(60)
            self.assertIn(rc, (0,), p.stderr())
            if "start command=" in p.stderr():
                taker = p
            else:
                time.sleep(1)
        self.assertIsNotNone(taker, "nobody took over")
        self.assertGreaterEqual(time.time() - killed, 3)
        self.assertNotIn("stale_holder", taker.stderr())
        with open(out, "rb") as f:
            self.assertEqual(f.read(), self.reference(200))

    # ---- c) frozen past the lease -----------------------------------------
    def test_c_frozen_runner_is_fenced(self):
        store = "file://" + os.path.join(self.tmp, "store")
        env_a, home_a = self.machine("A", store)
        # A's trainer logs its failed commits to its stderr, A's: seen while
        # A's ckptrun is frozen
        env_a["CKPT_LOG"] = "error"
        env_b, home_b = self.machine("B", store)
        out_a, out_b = os.path.join(home_a, "c.bin"), os.path.join(home_b, "c.bin")
        a = self.start(["recover", "--run", "c", "--lease", "3s", "--grace", "3s", "--"]
                       + self.trainer_cmd(300, out_a, 20), env_a, home_a)
        self.wait_step(env_a, home_a, "c", 20)
        # freeze the whole "VM": ckptrun and its child's group
        child = int(re.search(r"child_pid=(\d+)", a.stderr()).group(1))
        pgid = os.getpgid(child)  # the job's process group (its keeper's)
        os.kill(a.p.pid, signal.SIGSTOP)
        os.killpg(pgid, signal.SIGSTOP)
        frozen = time.time()
        taker = None
        while time.time() - frozen < 30 and taker is None:
            time.sleep(1)
            p = self.start(["recover", "--run", "c", "--lease", "3s", "--"]
                           + self.trainer_cmd(300, out_b, 20), env_b, home_b)
            # a taker keeps running: tell it apart from a quick exit 0
            try:
                rc = p.wait(1.5)
                self.assertEqual(rc, 0, p.stderr())
            except subprocess.TimeoutExpired:
                taker = p
        self.assertIsNotNone(taker, "nobody took over")
        # a slow start (sanitizers) may not have logged the lease yet
        for _ in range(200):
            if re.search(r"lease action=acquired .*epoch=2", taker.stderr()):
                break
            time.sleep(0.1)
        self.assertRegex(taker.stderr(), r"lease action=acquired .*epoch=2")
        self.wait_stderr(taker, r" commit step=\d+ ", "B's first commit")  # B commits now
        # A's child wakes first and tries to commit (every 10 steps of 20 ms):
        # fenced, every time; then A's ckptrun wakes and learns it lost
        os.killpg(pgid, signal.SIGCONT)
        self.wait_stderr(a, r"libckpt: error save: step \d+ not committed: .*another runner took over",
                         "A's child fenced")
        os.kill(a.p.pid, signal.SIGCONT)
        self.assertEqual(a.wait(30), 74, a.stderr())
        self.assertRegex(a.stderr(), r"lease on run c \(epoch 1\) lost: .*exit 74")
        # (ckpt_strerror(CKPT_E_FENCED))
        self.assertRegex(a.stderr(), r"commit-failed .*error=\"another runner took over")
        self.assertEqual(taker.wait(60), 0, taker.stderr())
        with open(out_b, "rb") as f:
            self.assertEqual(f.read(), self.reference(300))
        rc, _, err = self.ckptrun(["verify", "--run", "c"], env_b, home_b)
        self.assertEqual(rc, 0, err)
        rc, out, err = self.ckptrun(["status", "--run", "c", "--json"], env_b, home_b)
        st = json.loads(out)
        self.assertEqual(st["state"], "completed", out)
        self.assertEqual((st["lease"]["epoch"], st["lease"]["released"]), (2, True), out)

    def test_c2_gc_is_not_a_takeover(self):
        # gc rewrites HEAD: the runner's next commit is refused as fenced,
        # but its lease renews fine, so it carries on (and `run` refuses a
        # second runner meanwhile, exit 78)
        env, home = self.machine("m", "file://" + os.path.join(self.tmp, "store"))
        out = os.path.join(home, "g.bin")
        a = self.start(["run", "--run", "g", "--lease", "3s", "--"]
                       + self.trainer_cmd(200, out, 20), env, home)
        self.wait_step(env, home, "g", 40)
        rc, _, err = self.ckptrun(["run", "--run", "g", "--", "true"], env, home)
        self.assertEqual(rc, 78, err)
        self.assertRegex(err, r"held by .*refusing to start a second runner")
        rc, _, err = self.ckptrun(["gc", "--run", "g", "--keep", "1", "--min-age", "1h"],
                                  env, home)
        self.assertEqual(rc, 0, err)
        self.assertEqual(a.wait(60), 0, a.stderr())
        self.assertNotIn("lost", a.stderr())
        with open(out, "rb") as f:
            self.assertEqual(f.read(), self.reference(200))

    # ---- d) end to end: notice on A, cron on B ----------------------------
    def e2e(self, store, extra_env=None):
        env_a, home_a = self.machine("A", store)
        env_b, home_b = self.machine("B", store)
        for e in (env_a, env_b):
            e.update(extra_env or {})
        # A polls the mock metadata service (loopback, --metadata-url)
        env_a.pop("AWS_EC2_METADATA_DISABLED", None)
        mock = T.metadata_mock("aws")
        try:
            murl = mock.url
            out_a, out_b = os.path.join(home_a, "d.bin"), os.path.join(home_b, "d.bin")
            a = self.start(["recover", "--run", "d", "--lease", "3s", "--notice", "aws",
                            "--metadata-url", murl, "--"] + self.trainer_cmd(300, out_a, 20),
                           env_a, home_a)
            self.wait_step(env_a, home_a, "d", 20)
            urllib.request.urlopen(urllib.request.Request(
                murl + "/_mock/notice?kind=terminate&in=30", method="POST"), timeout=5).read()
            # B: cron, every second
            b_codes, b_ran = [], 0
            t0 = time.time()
            while time.time() - t0 < 90:
                p = self.start(["recover", "--run", "d", "--lease", "3s", "--"]
                               + self.trainer_cmd(300, out_b, 20), env_b, home_b)
                b_codes.append(p.wait(120))
                if "start command=" in p.stderr():
                    b_ran += 1
                    self.assertRegex(p.stdout(), r"resumed from step [1-9]")
                    break
                if "is completed" in p.stderr():
                    break  # A was never stopped: fails below
                time.sleep(1)
            self.assertEqual(a.wait(60), 75, a.stderr())
            self.assertEqual(b_ran, 1)
            self.assertEqual(set(b_codes), {0}, b_codes)
            with open(out_b, "rb") as f:
                self.assertEqual(f.read(), self.reference(300))
            t1 = time.time()
            rc, _, err = self.ckptrun(["recover", "--run", "d", "--", "false"], env_b, home_b)
            self.assertEqual(rc, 0, err)
            self.assertIn("is completed", err)
            self.assertLess(time.time() - t1, 5)
            rc, out, err = self.ckptrun(["status", "--run", "d", "--json"], env_b, home_b)
            st = json.loads(out)
            self.assertEqual((st["state"], st["preemptions"]), ("completed", 1), out)
        finally:
            mock.stop()

    def test_d_end_to_end_file(self):
        self.e2e("file://" + os.path.join(self.tmp, "store"))

    def test_d_end_to_end_mock_s3(self):
        r = subprocess.run([CKPTRUN, "ls", "--store", "s3://probe/x"], capture_output=True,
                           env=base_env(self.tmp, "", self.tmp), timeout=30)
        if b"not built" in r.stderr or b"unsupported" in r.stderr.lower():
            self.skipTest("no S3 store in this build")
        mock = T.MockS3()
        try:
            self.e2e("s3://ckpt-test/recover", dict(mock.env(), CKPT_S3_CONDITIONAL="1"))
        finally:
            mock.stop()


# The subtests that start a peer from tests/npm (node).
PEER_TESTS = ("test_a_four_at_once_azurite", "test_a_four_at_once_s3rver_weak")
EXIT_SKIPPED = 77


def main(argv):
    peers = "--peers" in argv
    argv = [a for a in argv if a != "--peers"]
    names = [a for a in argv if not a.startswith("-")]
    loader = unittest.TestLoader()
    if names:
        suite = loader.loadTestsFromNames(names, sys.modules[__name__])
    else:
        suite = unittest.TestSuite(
            RecoverTest(n) for n in loader.getTestCaseNames(RecoverTest)
            if (n in PEER_TESTS) == peers)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    if not result.wasSuccessful():
        return 1
    if result.skipped:
        for test, why in result.skipped:
            print("SKIPPED %s: %s" % (test.id(), why))
        return EXIT_SKIPPED
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
