#!/usr/bin/python3
"""Integration tests of ckptrun driving the real binaries (stdlib only).

Run:  /usr/bin/python3 tests/integration/test_ckptrun.py [-v] [TestName...]
Binaries come from $CKPT_BIN (set by ctest), else ./build/bin.
Every test works in its own temporary directory with its own file:// store,
HOME and CKPT_DIR; nothing touches the network.
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
import ckpt_testlib as T  # noqa: E402
from ckpt_testlib import CKPTRUN, C_TRAINER, PY, wait_for_exec  # noqa: E402

TRAINER = os.path.join(HERE, "ckptrun_trainer.py")
SEED = int(os.environ.get("CKPTRUN_TEST_SEED", str(int(time.time()))))
RNG = random.Random(SEED)


class Case(T.Case):
    TRAINER = TRAINER
    PREFIX = "ckptrun-test-"

    def steps(self):
        rc, out, err = self.ckptrun("ls", "--json")
        self.assertEqual(rc, 0, err)
        return [c["step"] for c in json.loads(out)]


class BadInput(Case):
    def one_line(self, err):
        lines = [l for l in err.splitlines() if l.strip()]
        self.assertEqual(len(lines), 1, err)
        return lines[0]

    def test_unknown_option(self):
        rc, _, err = self.ckptrun("--frobnicate", "--", "true")
        self.assertEqual(rc, 64)
        self.assertIn("unknown option '--frobnicate'", self.one_line(err))

    def test_no_command(self):
        rc, _, err = self.ckptrun("--")
        self.assertEqual(rc, 64)
        self.assertIn("no command", self.one_line(err))
        # a bare ckptrun prints the usage (on stderr: nothing ran), exit 64
        rc, out, err = self.ckptrun()
        self.assertEqual(rc, 64)
        self.assertEqual(out, "")
        self.assertIn("Usage:\n  ckptrun [run]   [OPTIONS] -- COMMAND [ARG...]", err)
        self.assertIn("ckptrun recover", err)

    def test_bad_values(self):
        for args in (["--grace", "soon", "--", "true"], ["--keep", "0", "--", "true"],
                     ["--codec", "gzip", "--", "true"], ["--signal", "SIGFOO", "--", "true"],
                     ["--notice", "ibm", "--", "true"], ["--interval"],
                     ["save", "PATH"], ["restore"], ["gc", "extra"]):
            rc, _, err = self.ckptrun(*args)
            self.assertEqual(rc, 64, (args, err))
            self.one_line(err)

    def test_bad_env_is_config(self):
        rc, _, err = self.ckptrun("--", "true", env=dict(self.env, CKPT_SIGNAL="bogus"))
        self.assertEqual(rc, 78)
        self.assertIn("CKPT_SIGNAL", self.one_line(err))

    def test_unwritable_dir(self):
        f = os.path.join(self.work, "a-file")
        open(f, "w").close()
        rc, _, err = self.ckptrun("--dir", f, "--", "true")
        self.assertEqual(rc, 78)
        self.assertIn("not usable", self.one_line(err))

    def test_preload_missing(self):
        rc, _, err = self.ckptrun("--preload", "--", "true",
                                  env=dict(self.env, CKPT_PRELOAD_LIB="/nonexistent/lib.so"))
        self.assertEqual(rc, 78)
        self.assertIn("--preload", self.one_line(err))

    def test_bad_store(self):
        # a bad value on the command line is usage; in the environment, configuration
        rc, _, err = self.ckptrun("--store", "nope://x", "--", "true")
        self.assertEqual(rc, 64)
        self.one_line(err)
        rc, _, err = self.ckptrun("--", "true", env=dict(self.env, CKPT_STORE="nope://x"))
        self.assertEqual(rc, 78)
        self.one_line(err)

    def test_unreachable_store(self):
        rc, _, err = self.ckptrun("--store", "file:///dev/null/store", "--", "true")
        self.assertEqual(rc, 69)
        self.one_line(err)

    def test_help_and_version(self):
        for cmd in ([], ["save"], ["restore"], ["ls"], ["status"], ["verify"], ["gc"], ["run"]):
            rc, out, _ = self.ckptrun(*cmd, "--help")
            self.assertEqual(rc, 0)
            self.assertIn("Exit", out)
        rc, out, _ = self.ckptrun("--version")
        self.assertEqual(rc, 0)
        self.assertRegex(out, r"^ckptrun \d+\.\d+\.\d+")


class Admin(Case):
    def save_dir(self, name, step, data):
        d = os.path.join(self.work, "src", name)
        os.makedirs(d)
        with open(os.path.join(d, "m.bin"), "wb") as f:
            f.write(data)
        rc, _, err = self.ckptrun("save", "--step", str(step), d)
        self.assertEqual(rc, 0, err)

    def test_save_ls_restore_verify_gc(self):
        for i in range(1, 5):
            self.save_dir("checkpoint-%d" % i, i, os.urandom(50000))
        self.assertEqual(self.steps(), [4, 3, 2])  # --keep defaults to 3
        rc, out, _ = self.ckptrun("ls", env={k: v for k, v in self.env.items() if k != "CKPT_RUN"})
        self.assertEqual((rc, [l.split()[0] for l in out.splitlines()]), (0, ["RUN", "job"]))
        dest = os.path.join(self.tmp, "r")
        rc, _, err = self.ckptrun("restore", "--step", "3", dest)
        self.assertEqual(rc, 0, err)
        with open(os.path.join(dest, "checkpoint-3", "m.bin"), "rb") as a, \
                open(os.path.join(self.work, "src", "checkpoint-3", "m.bin"), "rb") as b:
            self.assertEqual(a.read(), b.read())
        rc, _, err = self.ckptrun("gc", "--keep", "1", "--min-age", "0")
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.steps(), [4])
        rc, _, err = self.ckptrun("verify", "--step", "4")
        self.assertEqual(rc, 0, err)
        rc, _, err = self.ckptrun("restore", "--step", "3", dest)
        self.assertEqual(rc, 1, err)
        # --sync: the same files, made durable before their rename
        rc, _, err = self.ckptrun("restore", "--sync", dest)
        self.assertEqual(rc, 0, err)
        with open(os.path.join(dest, "checkpoint-4", "m.bin"), "rb") as a, \
                open(os.path.join(self.work, "src", "checkpoint-4", "m.bin"), "rb") as b:
            self.assertEqual(a.read(), b.read())
        rc, _, err = self.ckptrun("restore", dest, env=dict(self.env, CKPT_RESTORE_SYNC="yes"))
        self.assertEqual(rc, 78, err)
        self.assertIn("CKPT_RESTORE_SYNC", err)

    def test_status_shows_lease(self):
        self.save_dir("c1", 1, b"x" * 1000)
        with open(os.path.join(self.tmp, "store", "job", "LEASE"), "w") as f:
            json.dump({"format": 1, "holder": "h:1:n", "epoch": 3, "released": False,
                       "expires_ms": int(time.time() * 1000) + 60000, "heartbeat_ms": 1}, f)
        st = self.status()
        self.assertEqual((st["lease"]["holder"], st["lease"]["epoch"], st["lease"]["live"]),
                         ("h:1:n", 3, True))
        self.assertEqual((st["checkpoints"], st["last_step"]), (1, 1))
        rc, out, _ = self.ckptrun("status")
        self.assertRegex(out, r"lease +h:1:n, epoch 3, live")

    def chunk_of(self, step):
        """A chunk object of the checkpoint at `step`, named by its manifest
        (docs/FORMAT.md: JSON, then a checksum line)."""
        rc, out, err = self.ckptrun("ls", "--json")
        self.assertEqual(rc, 0, err)
        key = [c["manifest"] for c in json.loads(out) if c["step"] == step]
        self.assertEqual(len(key), 1, out)
        with open(os.path.join(self.tmp, "store", key[0])) as f:
            man = json.loads(f.read().rsplit("\n#xxh64:", 1)[0])
        cid = man["items"][0]["chunks"][0][0]
        return os.path.join(self.tmp, "store", "job", "chunks", cid[:2], cid)

    def test_damage_verify_fails_restore_falls_back(self):
        self.save_dir("c1", 1, os.urandom(100000))
        self.save_dir("c2", 2, os.urandom(100000))
        with open(self.chunk_of(2), "r+b") as f:
            f.seek(60)
            f.write(b"XXXX")
        rc, _, err = self.ckptrun("verify")
        self.assertEqual(rc, 1, err)
        dest = os.path.join(self.tmp, "r")
        rc, _, err = self.ckptrun("restore", dest)
        self.assertEqual(rc, 0, err)
        self.assertIn("fallback", err)
        self.assertEqual(os.listdir(os.path.join(dest, "c1")), ["m.bin"])
        # (libckpt may leave an empty directory from the damaged attempt)
        self.assertEqual(os.listdir(os.path.join(dest, "c2")) if os.path.isdir(
            os.path.join(dest, "c2")) else [], [])


    def test_local_restore_failure_starts_nothing(self):
        """A checkpoint that cannot be written into CKPT_DIR (a full local disk)
        stops `run` before the command: an older checkpoint must not be
        resumed in its place (the trainer could never resume past the intact
        newer one), and a fresh start would waste the run."""
        self.save_dir("c1", 1, os.urandom(100000))
        self.save_dir("c2", 2, os.urandom(3 << 20))
        mnt = os.path.join(self.tmp, "tiny")
        os.makedirs(mnt)
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt],
                          capture_output=True).returncode != 0:
            self.skipTest("cannot mount a tmpfs here")
        try:
            marker = os.path.join(self.tmp, "started")
            env = dict(self.env, CKPT_DIR=os.path.join(mnt, "ck"))
            rc, _, err = self.ckptrun("run", "--", "sh", "-c", "touch " + marker, env=env)
            self.assertEqual(rc, 78, err)
            self.assertIn("this machine", err)
            self.assertNotIn("fallback", err)
            self.assertFalse(os.path.exists(marker), "the command was started")
            self.assertEqual(self.steps(), [2, 1])  # nothing marked damaged
        finally:
            subprocess.run(["umount", mnt])


class ChildExit(Case):
    def test_completed_runs_hook(self):
        mark = os.path.join(self.work, "hook")
        rc, _, err = self.ckptrun(
            "--on-complete", "echo $CKPT_STATE $CKPT_EXIT $CKPT_RUN > " + mark,
            "--", "sh", "-c", 'test "$CKPT_RESUMED" = 0 && test -n "$CKPT_SOCKET" && '
            'test "$CKPT_DIR" = "%s"' % os.path.join(self.work, "ck"))
        self.assertEqual(rc, 0, err)
        with open(mark) as f:
            self.assertEqual(f.read().split(), ["completed", "0", "job"])
        self.assertEqual(self.status()["state"], "completed")
        self.assertEqual(os.stat(os.path.join(self.work, "ck")).st_mode & 0o777, 0o700)

    def test_crash_code_and_failed(self):
        mark = os.path.join(self.work, "hook")
        rc, _, err = self.ckptrun("--on-failure", "echo $CKPT_STATE $CKPT_EXIT > " + mark,
                                  "--", "sh", "-c", "exit 3")
        self.assertEqual(rc, 3, err)
        with open(mark) as f:
            self.assertEqual(f.read().split(), ["failed", "3"])
        self.assertEqual(self.status()["state"], "failed")
        rc, _, err = self.ckptrun("--", "sh", "-c", "kill -SEGV $$")
        self.assertEqual(rc, 128 + signal.SIGSEGV, err)

    @unittest.skipUnless(shutil.which("script"), "script(1) not installed")
    def test_child_gets_the_terminal(self):
        # Under a pseudo-terminal the child's process group is the foreground.
        cmd = "%s -q -- sh -c 'ps -o pgid= -o tpgid= -p $$'" % CKPTRUN
        r = subprocess.run(["script", "-qec", cmd, "/dev/null"], env=self.env, cwd=self.work,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        # (the terminal also shows ckptrun's warning: this child wrote no checkpoint)
        pgid, tpgid = re.search(r"^\s*(\d+)\s+(\d+)\s*$", r.stdout, re.M).groups()
        self.assertEqual(pgid, tpgid, r.stdout)

    # A shell line that leaves an orphan (a `sleep 0.2` whose parent exits at
    # once) and waits until it is gone, reaped, for at most 20 s; a zombie
    # stays listed by ps, so one nobody reaps is still there after.
    ORPHAN = ("o=$( (sleep 0.2 >/dev/null 2>&1 & echo $!) ); end=$(($(date +%s) + 20)); "
              "while ps -o pid= -p $o >/dev/null; do "
              "[ $(date +%s) -lt $end ] || { echo orphan $o not reaped in 20 s; break; }; "
              "sleep 0.05; done; ")

    def test_orphans_are_reaped(self):
        # The job's orphans come to ckptrun (subreaper) and are reaped.
        rc, out, err = self.ckptrun("--", "sh", "-c", self.ORPHAN + "ps -o stat= --ppid $PPID")
        self.assertEqual(rc, 0, err)
        self.assertNotIn("Z", out, out)

    def test_as_pid1_reaps_orphans(self):
        probe = subprocess.run(["unshare", "-pf", "--mount-proc", "true"], capture_output=True)
        if probe.returncode != 0:
            self.skipTest("cannot create a PID namespace here")
        r = subprocess.run(["unshare", "-pf", "--mount-proc", CKPTRUN, "--", "sh", "-c",
                            self.ORPHAN + "ps -eo pid=,stat="],
                           env=self.env, cwd=self.work, capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("Z", " ".join(l.split()[1] for l in r.stdout.splitlines()), r.stdout)

    def test_missing_command(self):
        rc, _, err = self.ckptrun("--", "/nonexistent/trainer")
        self.assertEqual(rc, 127)
        self.assertIn("cannot run '/nonexistent/trainer'", err)

    def test_sigkill_of_ckptrun_kills_child(self):
        p = self.start(["--", PY, "-c", "import time; time.sleep(60)"])
        pid = int(p.wait_line(r" start .* child_pid=(\d+)").group(1))
        os.kill(p.p.pid, signal.SIGKILL)
        p.wait()
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            # a zombie until its new parent reaps it counts as dead
            with open("/proc/%d/stat" % pid) as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
            time.sleep(0.05)
        else:
            self.fail("child %d survived ckptrun's SIGKILL" % pid)


class Signals(Case):
    def test_sigint_is_forwarded_and_run_stopped(self):
        # An unmodified trainer gets the interrupt as without ckptrun; the
        # run is the user's stop (state stopped, exit 130), not a failure.
        p = self.start(["--log-json", "--", PY, "-c",
                        "import time,sys\ntry:\n print('ready', file=sys.stderr, flush=True)\n"
                        " time.sleep(30)\nexcept KeyboardInterrupt:\n sys.exit(7)"])
        p.wait_line(r"^ready$")
        p.p.send_signal(signal.SIGINT)
        self.assertEqual(p.wait(), 130, p.text())
        events = [json.loads(l) for l in p.lines if l != "ready"]  # every other line is JSON
        self.assertLessEqual({"forward", "child-exit", "exit"}, {e["event"] for e in events})
        self.assertIn({"code": 7}, [{"code": e["code"]} for e in events if e["event"] == "child-exit"])
        self.assertEqual(self.status()["state"], "stopped")

    def test_scheduler_notice_sigusr1(self):
        p = self.start(["--signal", "USR1", "--lead", "4s", "--settle", "5s", "--"] +
                       self.trainer("--steps", "100000", "--every", "100000", "--mode", "signal",
                                    "--out", os.path.join(self.work, "out"), "--sleep-ms", "5"))
        p.wait_line(r"trainer: start at step 0")  # its handler is installed
        t0 = time.monotonic()
        p.p.send_signal(signal.SIGUSR1)
        self.assertEqual(p.wait(), 75, p.text())
        self.assertLess(time.monotonic() - t0, 4.5)
        self.assertIn("stop reason=SIGUSR1", p.text())
        self.assertEqual(len(self.steps()), 1)

    def test_interval_requests_by_signal(self):
        # Each --interval tick reaches the trainer as the signal and its save
        # is committed; watched until two were (the ticks' timing is
        # test_stop's). A request before the trainer installed its handler
        # is not sent (an unprepared program dies of SIGUSR1: that is why
        # --signal is off by default).
        out = os.path.join(self.work, "out")
        p = self.start(["--signal", "USR1", "--interval", "300ms", "--settle", "5s", "--"] +
                       self.trainer("--steps", "100000", "--every", "100000", "--mode", "signal",
                                    "--out", out, "--sleep-ms", "10"))
        p.wait_count(r" request reason=periodic via=SIGUSR1", 2)
        p.wait_count(r" commit step=\d+", 2)
        p.p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(), 75, p.text())
        self.assertGreaterEqual(len(self.steps()), 2, p.text())


class Unmodified(Case):
    ARGS = ("--steps", "240", "--every", "20")

    def test_sigterm_at_random_moments_then_resume_identical(self):
        ref = self.reference(*self.ARGS)
        out = None
        for cycle in range(8):
            self.fresh("c%d" % cycle)
            out = os.path.join(self.work, "out")
            p = self.start(["--settle", "200ms", "--grace", "10s", "--"] +
                           self.trainer(*self.ARGS, "--out", out, "--sleep-ms", "8"))
            try:
                p.wait_line(r" commit step=\d+", timeout=30)
            except AssertionError:
                if p.p.poll() == 0:
                    break  # finished before its first commit of this cycle
                raise
            time.sleep(RNG.uniform(0, 0.6))
            if p.p.poll() is not None:
                self.assertEqual(p.wait(), 0, p.text())
                break
            p.p.send_signal(signal.SIGTERM)
            rc = p.wait()
            if rc == 0:
                break  # it finished just as we stopped it
            self.assertEqual(rc, 75, p.text())
            self.assertIn("final committed=true", p.text())
            self.assertTrue(self.steps())
        else:
            self.fail("did not finish in 8 cycles")
        with open(out, "rb") as f:
            self.assertEqual(f.read(), ref)
        st = self.status()
        self.assertEqual(st["state"], "completed")
        self.assertEqual(st["preemptions"], cycle)
        rc, _, err = self.ckptrun("verify")
        self.assertEqual(rc, 0, err)

    def test_half_written_entry_is_not_committed(self):
        # A directory that keeps growing slower than --settle is never taken.
        ck = os.path.join(self.work, "ck")
        script = ("import os,time\n"
                  "d=os.path.join(os.environ['CKPT_DIR'],'checkpoint-7'); os.makedirs(d)\n"
                  "f=open(os.path.join(d,'model.bin'),'wb')\n"
                  "for i in range(15): f.write(b'x'*1000); f.flush(); time.sleep(0.1)\n"
                  "os._exit(9)\n")  # crash with the file still open
        rc, _, err = self.ckptrun("--settle", "300ms", "--", PY, "-c", script)
        self.assertEqual(rc, 9, err)
        self.assertTrue(os.path.isdir(os.path.join(ck, "checkpoint-7")))
        self.assertEqual(self.steps(), [])

    def test_complete_marker(self):
        script = ("import os,time\n"
                  "d=os.path.join(os.environ['CKPT_DIR'],'run_5'); os.makedirs(d)\n"
                  "open(os.path.join(d,'w.bin'),'wb').write(b'w'*5000)\n"
                  "open(os.path.join(d,'DONE'),'w').write('ok')\n"
                  "time.sleep(1.5)\n")
        p = self.start(["--settle", "1h", "--complete-marker", "DONE", "--", PY, "-c", script])
        p.wait_line(r" complete entry=run_5 step=5 by=marker", timeout=10)
        p.wait_line(r" commit step=5 ", timeout=10)
        self.assertEqual(p.wait(), 0, p.text())
        self.assertEqual(self.steps(), [5], p.text())


class SignalAware(Case):
    ARGS = ("--steps", "400", "--every", "1000", "--mode", "signal")

    def test_stop_requests_checkpoint_by_signal(self):
        ref = self.reference(*self.ARGS)
        out = os.path.join(self.work, "out")
        p = self.start(["--signal", "USR1", "--settle", "5s", "--grace", "10s", "--"] +
                       self.trainer(*self.ARGS, "--out", out, "--sleep-ms", "5"))
        p.wait_line(r"trainer: start at step 0")
        time.sleep(RNG.uniform(0.3, 0.8))
        # SIGUSR2: checkpoint now and keep running
        p.p.send_signal(signal.SIGUSR2)
        first = p.wait_line(r" commit step=\d+", timeout=10).string
        self.assertIsNone(p.p.poll())
        time.sleep(RNG.uniform(0.1, 0.4))
        p.p.send_signal(signal.SIGTERM)
        rc = p.wait()
        self.assertEqual(rc, 75, p.text())
        self.assertIn("request reason=stop via=SIGUSR1", p.text())
        steps = self.steps()
        self.assertEqual(len(steps), 2, p.text())
        self.assertGreater(steps[0], int(re.search(r"step=(\d+)", first).group(1)))
        self.fresh("b")
        out = os.path.join(self.work, "out")
        rc, _, err = self.ckptrun("--signal", "USR1", "--", *self.trainer(
            *self.ARGS, "--out", out, "--sleep-ms", "0"))
        self.assertEqual(rc, 0, err)
        self.assertIn("start at step %d resumed=1 step_env=%d" % (steps[0], steps[0]), err)
        with open(out, "rb") as f:
            self.assertEqual(f.read(), ref)

    def test_signal_not_sent_to_a_command_without_a_handler(self):
        # A Python trainer has no SIGUSR1 handler while it imports, nor once it
        # is exiting: the request signal would kill it (exit 138, not 74/75).
        p = self.start(["--signal", "USR1", "--grace", "3s", "--", "sleep", "30"])
        p.wait_line(r" start command=")
        wait_for_exec(p.p.pid, "sleep")  # the command itself, not ckptrun's fork
        p.p.send_signal(signal.SIGTERM)
        rc = p.wait()
        self.assertEqual(rc, 74, p.text())
        self.assertIn("does not handle SIGUSR1 now", p.text())
        self.assertIn("signal=SIGTERM", p.text())  # stopped, not killed by USR1

    def test_child_ignoring_requests_is_stopped_in_time(self):
        # The real tree killed at the deadline (the deadline's split is
        # test_stop's: a short --grace is enough here).
        mark = os.path.join(self.work, "hook")
        p = self.start(["--signal", "USR1", "--settle", "200ms", "--grace", "1s",
                        "--on-preempt", "echo $CKPT_STATE $CKPT_EXIT $CKPT_STEP > " + mark, "--"] +
                       self.trainer("--steps", "100000", "--every", "20", "--mode", "ignore",
                                    "--out", os.path.join(self.work, "out"), "--sleep-ms", "5"))
        p.wait_line(r" commit step=\d+", timeout=20)
        before = self.steps()
        t0 = time.monotonic()
        p.p.send_signal(signal.SIGTERM)
        rc = p.wait()
        took = time.monotonic() - t0
        self.assertEqual(rc, 74, p.text())
        self.assertLess(took, 1.0 + 1.0, p.text())
        self.assertIn("SIGKILL", p.text())
        self.assertEqual(self.steps(), before)  # the earlier checkpoint is intact
        self.assertEqual(before, [20])
        with open(mark) as f:
            self.assertEqual(f.read().split(), ["preempted", "74", "20"])
        rc, _, err = self.ckptrun("verify")
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.status()["state"], "preempted")


class Lightning(Case):
    def test_lightning_names_and_last_link(self):
        args = ("--steps", "250", "--every", "100", "--mode", "lightning")
        out = os.path.join(self.work, "out")
        rc, _, err = self.ckptrun("--settle", "200ms", "--", *self.trainer(
            *args, "--out", out, "--sleep-ms", "2"))
        self.assertEqual(rc, 0, err)
        # 100 may be superseded by 200 before it goes out (each commit takes
        # the newest state); 200 is committed either way.
        self.assertIn(200, self.steps(), err)
        self.assertLessEqual(set(self.steps()), {100, 200}, err)
        dest = os.path.join(self.tmp, "restored")
        rc, _, err = self.ckptrun("restore", dest)
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(os.listdir(dest)), ["epoch=2-step=200.ckpt", "last.ckpt"])
        with open(os.path.join(dest, "last.ckpt"), "rb") as a, \
                open(os.path.join(dest, "epoch=2-step=200.ckpt"), "rb") as b:
            self.assertEqual(a.read(), b.read())
        self.assertEqual(os.stat(dest).st_mode & 0o777, 0o700)
        # A new machine resumes from last.ckpt, restored under its own name.
        self.fresh("b")
        rc, _, err = self.ckptrun("--settle", "200ms", "--", *self.trainer(
            *args, "--out", os.path.join(self.work, "out"), "--sleep-ms", "0"))
        self.assertEqual(rc, 0, err)
        self.assertIn("start at step 200 resumed=1", err)


@unittest.skipUnless(os.access(C_TRAINER, os.X_OK) and os.path.getsize(C_TRAINER) > 20000,
                     "c_trainer not built")
class LinkedTrainer(Case):
    ARGS = ["--steps", "2000", "--every", "1000000", "--input", "64", "--hidden", "64"]

    def c_ref(self):
        d = tempfile.mkdtemp(dir=self.tmp)
        env = dict(self.env, CKPT_STORE="file://" + os.path.join(d, "s"), CKPT_RUN="ref")
        out = os.path.join(d, "out")
        subprocess.run([C_TRAINER] + self.ARGS + ["--out", out, "--quiet"], env=env, check=True,
                       capture_output=True, timeout=120)
        with open(out, "rb") as f:
            return f.read()

    def test_periodic_and_manual_requests_over_socket(self):
        p = self.start(["--interval", "300ms", "--signal", "USR1", "--", C_TRAINER] + self.ARGS +
                       ["--out", os.path.join(self.work, "out"), "--sleep-ms", "1", "--quiet"])
        p.wait_line(r" connect pid=", timeout=20)  # requests go over the socket now
        p.p.send_signal(signal.SIGUSR2)
        p.wait_line(r" request reason=manual via=socket")
        self.assertEqual(p.wait(), 0, p.text())
        text = p.text()
        self.assertGreaterEqual(text.count("request reason=periodic via=socket"), 2, text)
        self.assertGreaterEqual(text.count("source=socket"), 3, text)
        self.assertNotIn("via=SIGUSR1", text)  # never a signal once connected
        self.assertEqual(self.status()["state"], "completed")

    def test_one_writer_per_run(self):
        # A linked trainer that also drops files into CKPT_DIR: its own
        # commits win, ckptrun's watcher stands down, nothing is refused.
        script = ("%s %s --out out --sleep-ms 1 --quiet & "
                  "for i in 1 2 3; do sleep 0.3; mkdir -p $CKPT_DIR/checkpoint-$i; "
                  "echo $i > $CKPT_DIR/checkpoint-$i/f; done; wait"
                  % (C_TRAINER, " ".join(self.ARGS)))
        rc, _, err = self.ckptrun("--interval", "200ms", "--settle", "100ms", "--",
                                  "sh", "-c", script)
        self.assertEqual(rc, 0, err)
        self.assertNotIn("commit-failed", err)
        self.assertIn("no longer committed by ckptrun", err)

    def test_socket_stop_and_resume_identical(self):
        ref = self.c_ref()
        out = os.path.join(self.work, "out")
        p = self.start(["--grace", "20s", "--", C_TRAINER] + self.ARGS +
                       ["--out", out, "--sleep-ms", "2", "--quiet"])
        p.wait_line(r" connect pid=", timeout=20)
        time.sleep(RNG.uniform(0.2, 1.0))
        p.p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=60)
        self.assertEqual(rc, 75, p.text())
        self.assertIn("request reason=stop via=socket", p.text())
        self.assertIn("final committed=true", p.text())
        step = int(re.search(r" commit step=(\d+) .*source=socket", p.text()).group(1))
        self.assertGreater(step, 0)
        st = self.status()
        self.assertEqual((st["state"], st["preemptions"]), ("preempted", 1))
        # A new machine: nothing in CKPT_DIR (memory checkpoints are not
        # files); libckpt restores inside the trainer.
        self.fresh("b")
        out = os.path.join(self.work, "out")
        rc, _, err = self.ckptrun("--", C_TRAINER, *self.ARGS, "--out", out, "--quiet")
        self.assertEqual(rc, 0, err)
        self.assertIn("resumed=false", err)  # no file checkpoint restored by ckptrun
        newest = max(int(m) for m in re.findall(r" commit step=(\d+) .*source=socket", p.text()))
        self.assertIn("restore=trainer newest=%d" % newest, err)  # ... but the trainer's
        self.assertEqual(os.listdir(os.path.join(self.work, "ck")), [])
        with open(out, "rb") as f:
            self.assertEqual(f.read(), ref)


if __name__ == "__main__":
    print("ckptrun integration tests: seed %d (CKPTRUN_TEST_SEED)" % SEED, file=sys.stderr)
    if not os.access(CKPTRUN, os.X_OK):
        sys.exit("ckptrun not found at %s (set CKPT_BIN)" % CKPTRUN)
    unittest.main()
