#!/usr/bin/python3
"""ckptrun and the job's processes, driving the real binaries (stdlib only).

Run:  /usr/bin/python3 tests/integration/test_proc.py [-v] [Class.test...]
Binaries come from $CKPT_BIN (set by ctest), else ./build/bin.

  Tree       the request signal reaches the topmost handler of each branch
             (never a data-loader worker that inherited it); SIGKILL of
             ckptrun leaves no process of the tree (double-fork, setsid);
             leftovers get SIGTERM, then SIGKILL after --grace
  WholeJob   SIGTERM to every process at once, to the job's process group,
             to ckptrun only: exit 75 with a checkpoint taken after the
             signal, then a fresh machine resumes byte-identical (the
             Python helper, and c_trainer through libckpt)
  Trust      a forged `committed` from a process outside the job is ignored;
             the run's key admits one
  CtrlC      on a pseudo-terminal: the first Ctrl-C saves and then
             interrupts (exit 130, state stopped, recover leaves it unless
             --resume-stopped), a second one interrupts at once, an
             unmodified trainer is interrupted as without ckptrun
  Lease      a runner killed with SIGKILL is taken over at once on this host
  Reason     SIGUSR1 / SIGXCPU / a notice are recorded as what they were
"""
import fcntl
import glob
import json
import os
import pty
import random
import re
import select
import signal
import subprocess
import sys
import tempfile
import termios
import threading
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ckpt_testlib as T  # noqa: E402
from ckpt_testlib import C_TRAINER, CKPTRUN, PY, Proc, alive, descendants, wait_for  # noqa: E402
from ckpt_testlib import MOCK  # noqa: E402,F401  (test_py_ckptrun.py takes it from here)

TRAINER = os.path.join(HERE, "helper_trainer.py")
SEED = int(os.environ.get("CKPT_TEST_SEED", str(int(time.time()))))
RNG = random.Random(SEED)


class Case(T.Case):
    TRAINER = TRAINER
    PREFIX = "ckpt-proc-"

    def events(self, type_):
        out = []
        for path in sorted(glob.glob(os.path.join(self.store_dir, "job", "events", "*.json"))):
            with open(path) as f:
                ev = json.load(f)
            if ev.get("type") == type_:
                out.append(ev)
        return out

    def keeper_of(self, p):
        """The keeper (ckptrun's child) and every process below it."""
        kids = [c for c in descendants(p.p.pid)]
        return kids

    def resume_identical(self, ref, *args):
        """A fresh machine resumes the run and ends with the reference bytes."""
        self.fresh("resume%d" % RNG.randrange(1 << 30))
        out = os.path.join(self.work, "out")
        rc, _, err = self.ckptrun("--", *self.trainer(*args, "--out", out, "--sleep-ms", "0"))
        self.assertEqual(rc, 0, err)
        self.assertRegex(err, r"start at step [1-9]")
        with open(out, "rb") as f:
            self.assertEqual(f.read(), ref)


RANK = r"""
import os, signal, sys, time
d = sys.argv[1]
def got(sig, frame):
    with open(os.path.join(d, "got-%d" % os.getpid()), "w") as f:
        f.write("x")
signal.signal(signal.SIGUSR1, got)
pid = os.fork()  # a data-loader worker: inherits the handler
if pid == 0:
    open(os.path.join(d, "worker-%d" % os.getpid()), "w").close()
    while True:
        time.sleep(0.1)
open(os.path.join(d, "rank-%d" % os.getpid()), "w").close()
while not any(n.startswith("got-") for n in os.listdir(d)):
    time.sleep(0.05)
time.sleep(0.5)
os.kill(pid, signal.SIGKILL)
"""

DAEMON = r"""
import os, sys, time
d = sys.argv[1]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open(os.path.join(d, "daemon-%d" % os.getpid()), "w").close()
        while True:
            time.sleep(1)
    os._exit(0)
time.sleep(1000)
"""


class Tree(Case):
    def test_request_signal_reaches_topmost_handlers_only(self):
        # A launcher that does not handle SIGUSR1 (sh, like torchrun or
        # mpirun), two ranks that do, each with a worker forked after its
        # handler was installed: the ranks get it, the workers do not.
        d = os.path.join(self.tmp, "marks")
        os.makedirs(d)
        rank = os.path.join(self.tmp, "rank.py")
        with open(rank, "w") as f:
            f.write(RANK)
        p = self.start(["--signal", "USR1", "--", "sh", "-c",
                        "%s %s %s & %s %s %s & wait" % (PY, rank, d, PY, rank, d)])
        wait_for(lambda: len([n for n in os.listdir(d) if n.startswith(("rank-", "worker-"))]) == 4,
                 what="ranks and workers")
        ranks = sorted(int(n[5:]) for n in os.listdir(d) if n.startswith("rank-"))
        workers = sorted(int(n[7:]) for n in os.listdir(d) if n.startswith("worker-"))
        p.p.send_signal(signal.SIGUSR2)  # a checkpoint now
        m = p.wait_line(r" request reason=manual via=SIGUSR1 pids=(\S+)")
        self.assertEqual(sorted(map(int, m.group(1).split(","))), ranks, p.text())
        self.assertEqual(p.wait(), 0, p.text())
        got = sorted(int(n[4:]) for n in os.listdir(d) if n.startswith("got-"))
        self.assertEqual(got, ranks)
        self.assertFalse(set(got) & set(workers))

    def test_sigkill_of_ckptrun_leaves_no_survivor(self):
        # Children, grandchildren and a double-forked setsid() daemon: all
        # are gone within 2 s of ckptrun's SIGKILL (there is no cgroup).
        d = os.path.join(self.tmp, "marks")
        os.makedirs(d)
        dm = os.path.join(self.tmp, "daemon.py")
        with open(dm, "w") as f:
            f.write(DAEMON)
        p = self.start(["--", "sh", "-c", "(sleep 1000 & sleep 1000 & wait) & %s %s %s & wait"
                        % (PY, dm, d)])
        wait_for(lambda: any(n.startswith("daemon-") for n in os.listdir(d)), what="daemon")
        daemon = int([n for n in os.listdir(d) if n.startswith("daemon-")][0][7:])
        tree = descendants(p.p.pid)
        self.assertIn(daemon, tree)  # re-parented to the job's keeper, not to init
        self.assertGreaterEqual(len(tree), 6, tree)
        os.kill(p.p.pid, signal.SIGKILL)
        t0 = time.monotonic()
        p.wait()
        wait_for(lambda: not any(alive(x) for x in tree), timeout=2,
                 what="every process of the tree to die: %s" % [x for x in tree if alive(x)])
        self.assertLess(time.monotonic() - t0, 2.0)

    def test_leftovers_get_sigterm_then_sigkill_after_grace(self):
        # The command exits 0 leaving a process that exits on SIGTERM and
        # one that ignores it: the first gets SIGTERM, the second SIGKILL
        # after --grace, and ckptrun ends only then.
        d = os.path.join(self.tmp, "marks")
        os.makedirs(d)
        polite = ("import os,signal,sys,time\n"
                  "def bye(*_):\n open(os.path.join(%r,'term-%%d'%%os.getpid()),'w').close()\n"
                  " sys.exit(0)\n"
                  "signal.signal(signal.SIGTERM, bye)\n"
                  "open(os.path.join(%r,'p-%%d'%%os.getpid()),'w').close()\n"
                  "time.sleep(1000)\n" % (d, d))
        stubborn = ("import os,signal,time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                    "open(os.path.join(%r,'s-%%d'%%os.getpid()),'w').close()\n"
                    "time.sleep(1000)\n" % d)
        script = ("%s -c %s & %s -c %s & while [ $(ls %s | wc -l) -lt 2 ]; do sleep 0.05; done"
                  % (PY, sh_quote(polite), PY, sh_quote(stubborn), d))
        t0 = time.monotonic()
        p = self.start(["--grace", "1500ms", "--", "sh", "-c", script])
        self.assertEqual(p.wait(), 0, p.text())
        took = time.monotonic() - t0
        names = os.listdir(d)
        pol = [int(n[2:]) for n in names if n.startswith("p-")][0]
        stb = [int(n[2:]) for n in names if n.startswith("s-")][0]
        self.assertIn("term-%d" % pol, names)  # asked politely first
        self.assertFalse(alive(pol) or alive(stb))
        self.assertGreaterEqual(took, 1.5, p.text())
        self.assertLess(took, 15, p.text())
        self.assertEqual(self.status()["state"], "completed")


def sh_quote(s):
    return "'" + s.replace("'", "'\\''") + "'"


class WholeJob(Case):
    ARGS = ("--steps", "1500", "--every", "100000")

    def stop_and_check(self, how, extra=(), trainer=None):
        ref = self.reference(*self.ARGS)
        out = os.path.join(self.work, "out")
        p = self.start(["--grace", "20s"] + list(extra) + ["--"] +
                       self.trainer(*self.ARGS, "--out", out, "--sleep-ms", "4"))
        p.wait_line(r"trainer: start at step 0")
        p.wait_line(r" connect pid=\d+ kind=helper")
        time.sleep(RNG.uniform(0.3, 1.0))
        self.signal(p, how)
        rc = p.wait()
        self.assertEqual(rc, 75, p.text())
        text = p.text()
        self.assertIn("final committed=true", text)
        m = re.search(r"trainer: saved step (\d+)", text)
        self.assertTrue(m, text)
        self.assertRegex(text, r"commit step=%s .*entry=checkpoint-%s" % (m.group(1), m.group(1)))
        st = self.status()
        self.assertEqual(st["state"], "preempted")
        self.assertEqual(st["last_step"], int(m.group(1)))
        self.resume_identical(ref, *self.ARGS)
        return text

    def signal(self, p, how):
        if how == "ckptrun":
            p.p.send_signal(signal.SIGTERM)
        elif how == "group":
            child = int(re.search(r" child_pid=(\d+)", p.text()).group(1))
            os.killpg(os.getpgid(child), signal.SIGTERM)
        elif how == "all":
            # every process of the job at once, as SLURM, systemd's
            # KillMode=control-group or a pod deletion do
            for pid in [p.p.pid] + descendants(p.p.pid):
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass

    def test_helper_sigterm_to_every_process(self):
        text = self.stop_and_check("all")
        self.assertIn("child-signal", text)  # the trainer took it as a stop

    def test_helper_sigterm_to_the_group(self):
        text = self.stop_and_check("group")
        self.assertIn("group-signal signal=SIGTERM", text)

    def test_helper_sigterm_to_ckptrun(self):
        text = self.stop_and_check("ckptrun")
        self.assertIn("request reason=stop via=socket", text)

    def test_helper_sigterm_with_forked_workers(self):
        # Workers forked after the helper took the signals: a SIGTERM that
        # reaches them ends them (they have nothing to save); the trainer
        # saves; nothing of the job is left.
        ARGS = self.ARGS + ("--children", "2")
        ref = self.reference(*self.ARGS)
        out = os.path.join(self.work, "out")
        p = self.start(["--grace", "20s", "--"] +
                       self.trainer(*ARGS, "--out", out, "--sleep-ms", "4"))
        m = p.wait_line(r"trainer: start at step 0 pid \d+ children (\d+),(\d+)")
        kids = [int(m.group(1)), int(m.group(2))]
        p.wait_line(r" connect pid=\d+ kind=helper")
        time.sleep(0.3)
        self.signal(p, "all")
        self.assertEqual(p.wait(), 75, p.text())
        self.assertFalse(any(alive(k) for k in kids))
        self.resume_identical(ref, *self.ARGS)

    @unittest.skipUnless(os.access(C_TRAINER, os.X_OK), "c_trainer not built")
    def test_libckpt_sigterm_to_every_process_and_group(self):
        args = ["--steps", "3000", "--every", "1000000", "--input", "64", "--hidden", "64"]
        d = tempfile.mkdtemp(dir=self.tmp)
        env = dict(self.env, CKPT_STORE="file://" + os.path.join(d, "s"), CKPT_RUN="ref")
        ref_out = os.path.join(d, "out")
        subprocess.run([C_TRAINER] + args + ["--out", ref_out, "--quiet"], env=env, check=True,
                       capture_output=True, timeout=120)
        for how in ("all", "group"):
            self.fresh(how)
            out = os.path.join(self.work, "out")
            p = self.start(["--grace", "20s", "--", C_TRAINER] + args +
                           ["--out", out, "--sleep-ms", "2", "--quiet"])
            p.wait_line(r" connect pid=")
            time.sleep(RNG.uniform(0.2, 0.8))
            self.signal(p, how)
            self.assertEqual(p.wait(), 75, p.text())
            text = p.text()
            self.assertIn("final committed=true", text)
            self.assertRegex(text, r"commit step=\d+ .*source=socket")
            self.assertEqual(self.status()["state"], "preempted")
            self.fresh(how + "-b")
            out = os.path.join(self.work, "out")
            rc, _, err = self.ckptrun("--", C_TRAINER, *args, "--out", out, "--quiet")
            self.assertEqual(rc, 0, err)
            with open(out, "rb") as f, open(ref_out, "rb") as g:
                self.assertEqual(f.read(), g.read())


class Trust(Case):
    def test_fake_committed_from_outside_is_ignored(self):
        # An unmodified child; a process outside the job (this test) forges
        # a libckpt client's `hello` and `committed`: ignored, the run's
        # last step is never 987654.
        sockf = os.path.join(self.tmp, "sock")
        script = ("import os,time\n"
                  "open(%r,'w').write(os.environ.get('CKPT_SOCKET',''))\n"
                  "os.rename(%r,%r)\n"
                  "time.sleep(60)\n" % (sockf + ".tmp", sockf + ".tmp", sockf))
        p = self.start(["--grace", "5s", "--", PY, "-c", script])
        path = wait_for(lambda: os.path.exists(sockf) and open(sockf).read(), what="socket")
        import socket as sk
        fake = sk.socket(sk.AF_UNIX, sk.SOCK_STREAM)
        fake.connect(path)
        fake.sendall(b'{"type":"hello","proto":1,"pid":1,"items":1}\n'
                     b'{"type":"committed","step":987654,"seq":1,"bytes":1,"stored":1}\n')
        p.wait_line(r"messages from pid %d ignored: not a process of the job" % os.getpid())
        # with the run's key (a process the job started outside our tree,
        # e.g. through srun) a client is admitted
        child = int(re.search(r" child_pid=(\d+)", p.text()).group(1))
        with open("/proc/%d/environ" % child, "rb") as f:
            env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
        key = env[b"CKPT_SOCKET_KEY"].decode()
        good = sk.socket(sk.AF_UNIX, sk.SOCK_STREAM)
        good.connect(path)
        good.sendall(('{"type":"helper","proto":1,"pid":424242,"key":"%s"}\n' % key).encode())
        p.wait_line(r" connect pid=424242 kind=helper")
        good.close()
        p.p.send_signal(signal.SIGTERM)
        p.wait()
        fake.close()
        self.assertNotIn("987654", p.text())
        ex = self.events("exit")[-1]
        self.assertNotEqual(ex.get("last_step"), 987654, ex)


def pty_start(case, args):
    """ckptrun on a pseudo-terminal it controls (session leader, foreground):
    returns (Proc, master fd)."""
    master, slave = pty.openpty()

    def ctty():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    p = Proc(args, case.env, case.work, stdin=slave, stdout=slave, preexec_fn=ctty)
    os.close(slave)
    case.procs.append(p)

    def drain():
        while True:
            try:
                r, _, _ = select.select([master], [], [], 0.5)
                if r and not os.read(master, 4096):
                    return
            except OSError:
                return
            if p.p.poll() is not None:
                return
    threading.Thread(target=drain, daemon=True).start()
    return p, master


class CtrlC(Case):
    ARGS = ("--steps", "1500", "--every", "100000")

    def test_first_ctrl_c_saves_then_interrupts(self):
        ref = self.reference(*self.ARGS)
        out = os.path.join(self.work, "out")
        p, master = pty_start(self, ["--grace", "20s", "--"] +
                              self.trainer(*self.ARGS, "--out", out, "--sleep-ms", "4"))
        p.wait_line(r" connect pid=\d+ kind=helper")
        time.sleep(RNG.uniform(0.2, 0.8))
        os.write(master, b"\x03")
        self.assertEqual(p.wait(), 130, p.text())
        text = p.text()
        self.assertIn("stop reason=SIGINT user=true", text)
        m = re.search(r"trainer: saved step (\d+)", text)
        self.assertTrue(m, text)
        self.assertIn("final committed=true step=%s" % m.group(1), text)
        self.assertIn("KeyboardInterrupt", text)  # then the interrupt proceeded
        self.assertIn("exit state=stopped code=130", text)
        self.assertEqual(self.status()["state"], "stopped")
        os.close(master)
        # cron's recover leaves what the user stopped alone ...
        rc, _, err = self.ckptrun("recover", "--", "false")
        self.assertEqual(rc, 0, err)
        self.assertIn("stopped by its user", err)
        # ... unless asked
        self.fresh("b")
        out = os.path.join(self.work, "out")
        rc, _, err = self.ckptrun("recover", "--resume-stopped", "--",
                                  *self.trainer(*self.ARGS, "--out", out, "--sleep-ms", "0"))
        self.assertEqual(rc, 0, err)
        self.assertIn("start at step %s" % m.group(1), err)
        with open(out, "rb") as f:
            self.assertEqual(f.read(), ref)

    def test_second_ctrl_c_interrupts_at_once(self):
        out = os.path.join(self.work, "out")
        p, master = pty_start(self, ["--grace", "20s", "--"] +
                              self.trainer("--steps", "100000", "--out", out, "--sleep-ms", "4",
                                           "--save-ms", "6000"))
        p.wait_line(r" connect pid=\d+ kind=helper")
        p.wait_line(r"trainer: start at step")  # in its loop, handlers set
        os.write(master, b"\x03")
        first = time.monotonic()
        p.wait_line(r" child-signal pid=\d+ signal=SIGINT")
        p.wait_line(r"trainer: saving step")  # the save is under way (it takes 6 s)
        # A repeat within the helper's 0.5 s is a launcher forwarding the
        # same Ctrl-C: that much real time must pass before a second one.
        time.sleep(max(0.0, first + 0.6 - time.monotonic()))
        t0 = time.monotonic()
        os.write(master, b"\x03")
        self.assertEqual(p.wait(), 130, p.text())
        self.assertLess(time.monotonic() - t0, 4.0, p.text())
        self.assertNotIn("trainer: saved", p.text())
        self.assertEqual(self.status()["state"], "stopped")
        os.close(master)

    def test_ctrl_z_stops_and_fg_continues(self):
        # Ctrl-Z stops the job (the keeper relays it: ckptrun stops itself so
        # the shell sees the job stopped); `fg` (SIGCONT to ckptrun) goes on.
        ARGS = ("--steps", "400", "--every", "100000")
        ref = self.reference(*ARGS)
        out = os.path.join(self.work, "out")
        p, master = pty_start(self, ["--"] + self.trainer(*ARGS, "--out", out, "--sleep-ms", "5"))
        p.wait_line(r" connect pid=\d+ kind=helper")
        child = int(re.search(r" child_pid=(\d+)", p.text()).group(1))

        def state(pid):
            with open("/proc/%d/stat" % pid) as f:
                return f.read().rsplit(")", 1)[1].split()[0]
        os.write(master, b"\x1a")
        wait_for(lambda: state(child) == "T" and state(p.p.pid) == "T", what="job stopped")
        time.sleep(0.3)
        self.assertEqual((state(child), state(p.p.pid)), ("T", "T"))
        os.kill(p.p.pid, signal.SIGCONT)  # what the shell's `fg` does
        self.assertEqual(p.wait(), 0, p.text())
        with open(out, "rb") as f:
            self.assertEqual(f.read(), ref)
        os.close(master)

    def test_unmodified_trainer_is_interrupted(self):
        p, master = pty_start(self, ["--", PY, "-c",
                                     "import sys,time\nprint('ready',file=sys.stderr,flush=True)\n"
                                     "time.sleep(60)\n"])
        p.wait_line(r"^ready$")
        os.write(master, b"\x03")
        self.assertEqual(p.wait(), 130, p.text())
        self.assertIn("KeyboardInterrupt", p.text())
        self.assertIn("child-exit", p.text())
        self.assertEqual(self.status()["state"], "stopped")
        os.close(master)


class Lease(Case):
    def test_run_after_sigkill_takes_the_stale_lease_at_once(self):
        out = os.path.join(self.work, "out")
        p = self.start(["--", *self.trainer("--steps", "100000", "--every", "50",
                                             "--out", out, "--sleep-ms", "2")])
        p.wait_line(r" commit step=\d+")
        os.kill(p.p.pid, signal.SIGKILL)
        p.wait()
        self.assertEqual(self.status()["state"], "stale")
        q = self.start(["--", "true"])
        self.assertEqual(q.wait(), 0, q.text())  # not 78: the holder is gone
        self.assertIn("is gone: lease taken over at once", q.text())


class Reason(Case):
    def stop_reason(self, sig):
        out = os.path.join(self.work, "out")
        p = self.start(["--signal", "USR1", "--lead", "10s", "--"] +
                       self.trainer("--steps", "100000", "--out", out, "--sleep-ms", "4"))
        p.wait_line(r"trainer: start at step 0")  # its handlers are in place
        p.wait_line(r" connect pid=\d+ kind=helper")
        p.p.send_signal(sig)
        self.assertEqual(p.wait(), 75, p.text())
        ex = self.events("exit")
        self.assertEqual(ex[-1]["stop"], signal.Signals(sig).name, ex)
        self.assertEqual(self.events("stop")[-1]["reason"], signal.Signals(sig).name)
        self.assertIn("child-exit", p.text())

    def test_sigusr1_recorded(self):
        self.stop_reason(signal.SIGUSR1)

    def test_sigxcpu_recorded(self):
        self.stop_reason(signal.SIGXCPU)

    def test_notice_recorded_with_provider(self):
        mock = T.metadata_mock("aws")
        try:
            port = mock.port
            out = os.path.join(self.work, "out")
            p = self.start(["--notice", "aws", "--metadata-url", "http://127.0.0.1:%d" % port,
                            "--"] + self.trainer("--steps", "100000", "--out", out,
                                                 "--sleep-ms", "4"))
            p.wait_line(r" connect pid=\d+ kind=helper")
            urllib.request.urlopen("http://127.0.0.1:%d/_mock/notice?kind=terminate&in=60"
                                   % port, data=b"").read()
            self.assertEqual(p.wait(), 75, p.text())
            ex = self.events("exit")[-1]
            self.assertEqual((ex["stop"], ex.get("provider")), ("notice", "aws"), ex)
        finally:
            mock.stop()


if __name__ == "__main__":
    print("ckptrun process tests: seed %d (CKPT_TEST_SEED)" % SEED, file=sys.stderr)
    if not os.access(CKPTRUN, os.X_OK):
        sys.exit("ckptrun not found at %s (set CKPT_BIN)" % CKPTRUN)
    unittest.main()
