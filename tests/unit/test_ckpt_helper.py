"""Unit tests of examples/python/ckpt_helper.py (standard library only).

    cd tests/unit && PYTHONPATH=../../examples/python /usr/bin/python3 -m unittest -v test_ckpt_helper

A fake ckptrun (a Unix socket server in a temporary directory) stands in for
the control socket. The shim path of requested() is exercised here with a
stand-in for the shim's functions; the real shim is exercised by
tests/integration/test_preload.py.
"""

import importlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples",
                        "python")
if EXAMPLES not in sys.path:
    sys.path.insert(0, EXAMPLES)

import ckpt_helper  # noqa: E402

ENV_KEYS = ("CKPT_SOCKET", "CKPT_DIR", "CKPT_STEP", "CKPT_RESUMED",
            "CKPT_SIGNAL", "CKPT_HELPER_SOCKET")


class FakeServer:
    """Accepts connections on a Unix socket and collects JSON lines."""

    def __init__(self, path):
        self.path = path
        self.lines = []
        self.accepted = 0
        self.cv = threading.Condition()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(8)
        self.conns = []
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with self.cv:
                self.accepted += 1
                self.conns.append(c)
            threading.Thread(target=self._read, args=(c,), daemon=True).start()

    def _read(self, c):
        buf = b""
        while True:
            try:
                d = c.recv(4096)
            except OSError:
                return
            if not d:
                return
            buf += d
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                with self.cv:
                    self.lines.append(json.loads(line))
                    self.cv.notify_all()

    def wait(self, n, timeout=5.0):
        end = time.monotonic() + timeout
        with self.cv:
            while len(self.lines) < n and time.monotonic() < end:
                self.cv.wait(end - time.monotonic())
            return list(self.lines)

    def close(self):
        self.sock.close()
        with self.cv:
            for c in self.conns:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                c.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class FakeShim:
    """Stands in for libckpt_preload.so's in-process API."""

    def __init__(self):
        self.pending = 0
        self.ctx_opened = 0

    def ckpt_preload_take_request(self):
        r, self.pending = self.pending, 0
        return r

    def ckpt_preload_ctx(self):
        self.ctx_opened += 1
        return 1234


class HelperTest(unittest.TestCase):

    def setUp(self):
        self.saved_env = {k: os.environ.get(k) for k in ENV_KEYS}
        for k in ENV_KEYS:
            os.environ.pop(k, None)
        self.tmp = tempfile.mkdtemp(prefix="ckpt-helper-")
        self.servers = []
        # Fresh module state for each test.
        ckpt_helper._conn = None
        ckpt_helper._lib = None
        ckpt_helper._ctx_opened = False
        ckpt_helper._pending[0] = False

    def tearDown(self):
        for s in self.servers:
            s.close()
        if ckpt_helper._conn:
            ckpt_helper._conn[0].close()
            ckpt_helper._conn = None
        for k, v in self.saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(self.tmp, ignore_errors=True)

    def server(self):
        path = os.path.join(self.tmp, "ctl.sock")
        s = FakeServer(path)
        self.servers.append(s)
        os.environ["CKPT_SOCKET"] = path
        return s

    # ------------------------------------------------------------ dirs/steps

    def test_checkpoint_dir(self):
        self.assertEqual(ckpt_helper.checkpoint_dir(), "./checkpoints")
        os.environ["CKPT_DIR"] = "/data/ck"
        self.assertEqual(ckpt_helper.checkpoint_dir(), "/data/ck")
        os.environ["CKPT_DIR"] = ""
        self.assertEqual(ckpt_helper.checkpoint_dir(), "./checkpoints")

    def test_restored_step(self):
        self.assertIsNone(ckpt_helper.restored_step())
        os.environ["CKPT_RESUMED"] = "0"
        os.environ["CKPT_STEP"] = "5"
        self.assertIsNone(ckpt_helper.restored_step())
        os.environ["CKPT_RESUMED"] = "1"
        self.assertEqual(ckpt_helper.restored_step(), 5)
        os.environ["CKPT_STEP"] = "18446744073709551615"
        self.assertEqual(ckpt_helper.restored_step(), 2 ** 64 - 1)
        os.environ["CKPT_STEP"] = "junk"
        self.assertIsNone(ckpt_helper.restored_step())
        del os.environ["CKPT_STEP"]
        self.assertIsNone(ckpt_helper.restored_step())

    # ------------------------------------------------------------ saved

    def test_saved_without_ckptrun(self):
        self.assertFalse(ckpt_helper.saved("checkpoint-3", 3))

    def test_saved_sends_file_message(self):
        srv = self.server()
        d = os.path.join(self.tmp, "checkpoints", "checkpoint-7")
        self.assertTrue(ckpt_helper.saved(d, 7))
        rel = os.path.relpath(d)
        self.assertTrue(ckpt_helper.saved(rel, 8))
        got = srv.wait(2)
        self.assertEqual(got[0], {"type": "file", "path": d,
                                  "event": "renamed", "step": 7})
        self.assertEqual(got[1]["path"], os.path.abspath(rel))
        self.assertEqual(got[1]["step"], 8)
        self.assertEqual(srv.accepted, 1)  # one connection, kept

    def test_saved_escapes_path(self):
        srv = self.server()
        p = os.path.join(self.tmp, 'a "b"\\c\n')
        self.assertTrue(ckpt_helper.saved(p, 1))
        self.assertEqual(srv.wait(1)[0]["path"], p)

    def test_saved_too_long(self):
        self.server()
        self.assertFalse(ckpt_helper.saved("/" + "x" * 5000, 1))

    def test_saved_server_gone(self):
        srv = self.server()
        self.assertTrue(ckpt_helper.saved("/a", 1))
        srv.wait(1)
        srv.close()
        # Never raises; False once nobody listens.
        results = [ckpt_helper.saved("/b", 2) for _ in range(3)]
        self.assertFalse(results[-1])

    def test_saved_reconnects(self):
        srv = self.server()
        self.assertTrue(ckpt_helper.saved("/a", 1))
        srv.wait(1)
        srv.close()
        srv2 = self.server()  # ckptrun restarted on the same path
        ok = False
        for _ in range(3):
            ok = ckpt_helper.saved("/b", 2)
            if ok and srv2.wait(1, timeout=1.0):
                break
        self.assertTrue(ok)
        self.assertEqual(srv2.wait(1)[0]["path"], "/b")

    def test_saved_after_fork_uses_new_connection(self):
        srv = self.server()
        self.assertTrue(ckpt_helper.saved("/parent", 1))
        srv.wait(1)
        pid = os.fork()
        if pid == 0:
            code = 0 if ckpt_helper.saved("/child", 2) else 1
            os._exit(code)
        _, st = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(st), 0)
        got = srv.wait(2)
        self.assertEqual([m["path"] for m in got], ["/parent", "/child"])
        self.assertEqual(srv.accepted, 2)

    # ------------------------------------------------------------ requested

    def test_requested_by_signal(self):
        ckpt_helper._lib = False  # no shim in this process
        ckpt_helper._handler_installed = False
        old = signal.getsignal(signal.SIGUSR1)
        signal.signal(signal.SIGUSR1, signal.SIG_DFL)
        try:
            self.assertFalse(ckpt_helper.requested())  # installs the handler
            os.kill(os.getpid(), signal.SIGUSR1)
            time.sleep(0.05)
            self.assertTrue(ckpt_helper.requested())
            self.assertFalse(ckpt_helper.requested())  # once per request
        finally:
            signal.signal(signal.SIGUSR1, old)

    def test_requested_other_signal(self):
        ckpt_helper._lib = False
        ckpt_helper._handler_installed = False
        os.environ["CKPT_SIGNAL"] = "SIGUSR2"
        old = signal.getsignal(signal.SIGUSR2)
        signal.signal(signal.SIGUSR2, signal.SIG_DFL)
        try:
            self.assertFalse(ckpt_helper.requested())
            os.kill(os.getpid(), signal.SIGUSR2)
            time.sleep(0.05)
            self.assertTrue(ckpt_helper.requested())
        finally:
            signal.signal(signal.SIGUSR2, old)

    def test_program_handler_kept(self):
        ckpt_helper._lib = False
        ckpt_helper._handler_installed = False
        got = []
        old = signal.signal(signal.SIGUSR1, lambda s, f: got.append(s))
        try:
            ckpt_helper.requested()
            os.kill(os.getpid(), signal.SIGUSR1)
            time.sleep(0.05)
            self.assertEqual(got, [signal.SIGUSR1])
            self.assertFalse(ckpt_helper.requested())
        finally:
            signal.signal(signal.SIGUSR1, old)

    def test_signal_name_parsing(self):
        for value, want in (("", signal.SIGUSR1), ("SIGUSR2", signal.SIGUSR2),
                            ("usr2", signal.SIGUSR2), ("10", 10),
                            ("none", None), ("NONE", None), ("bogus", None)):
            os.environ["CKPT_SIGNAL"] = value
            self.assertEqual(ckpt_helper._request_signal(), want, value)

    def test_requested_via_shim(self):
        shim = FakeShim()
        ckpt_helper._lib = shim
        self.assertFalse(ckpt_helper.requested())
        self.assertEqual(shim.ctx_opened, 0)  # no ckptrun: no context
        shim.pending = 1
        self.assertTrue(ckpt_helper.requested())
        self.assertFalse(ckpt_helper.requested())

    def test_shim_context_only_when_asked(self):
        self.server()
        shim = FakeShim()
        ckpt_helper._lib = shim
        ckpt_helper.requested()
        self.assertEqual(shim.ctx_opened, 0)  # default: signal only
        os.environ["CKPT_HELPER_SOCKET"] = "1"
        for _ in range(5):
            ckpt_helper.requested()
        self.assertEqual(shim.ctx_opened, 1)  # once

    def test_no_shim_detected_in_plain_python(self):
        # This interpreter was not started with LD_PRELOAD.
        if "libckpt_preload" in os.environ.get("LD_PRELOAD", ""):
            self.skipTest("running under the shim")
        self.assertIsNone(ckpt_helper._shim())

    def test_import_keeps_process_alive(self):
        # A fresh interpreter importing the helper survives SIGUSR1 at once.
        code = ("import os, signal, time, ckpt_helper\n"
                "os.kill(os.getpid(), signal.SIGUSR1)\n"
                "time.sleep(0.05)\n"
                "print(ckpt_helper.requested(), ckpt_helper.requested())\n")
        env = dict(os.environ, PYTHONPATH=EXAMPLES)
        env.pop("LD_PRELOAD", None)
        r = subprocess.run([sys.executable, "-c", code], env=env,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "True False")


class StopSignalTest(unittest.TestCase):
    """Under ckptrun (CKPT_SOCKET set) the helper connects at import, says
    `helper`, reads requests and `stopping`, and takes SIGTERM/SIGINT as
    stops. Each case runs a fresh interpreter against a fake ckptrun."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ckpt-helper-")
        self.srv = FakeServer(os.path.join(self.tmp, "ctl.sock"))

    def tearDown(self):
        self.srv.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def child(self, code, stdin=None):
        env = {k: v for k, v in os.environ.items() if k not in ENV_KEYS}
        env.update(PYTHONPATH=EXAMPLES, CKPT_SOCKET=self.srv.path, CKPT_SOCKET_KEY="ab" * 16,
                   CKPT_SIGNAL="none")
        env.pop("LD_PRELOAD", None)
        return subprocess.Popen([sys.executable, "-c", code], env=env, stdin=stdin,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def send(self, msg):
        with self.srv.cv:
            conns = list(self.srv.conns)
        for c in conns:
            c.sendall((json.dumps(msg) + "\n").encode())

    def lines_of(self, type_, n=1, timeout=10):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            got = [m for m in self.srv.wait(0) if m.get("type") == type_]
            if len(got) >= n:
                return got
            time.sleep(0.02)
        self.fail("no %d %r message in %r" % (n, type_, self.srv.wait(0)))

    def test_helper_hello_and_requests_over_the_socket(self):
        p = self.child("import sys, time, ckpt_helper\n"
                       "print('up', flush=True)\n"
                       "while not ckpt_helper.requested(): time.sleep(0.01)\n"
                       "print('requested', flush=True)\n")
        self.assertEqual(p.stdout.readline().strip(), "up")
        hello = self.lines_of("helper")[0]
        self.assertEqual(hello["pid"], p.pid)
        self.assertEqual(sorted(hello["signals"]), ["SIGINT", "SIGTERM"])
        self.assertEqual(hello["key"], "ab" * 16)
        self.send({"type": "request", "reason": "periodic", "deadline_ms": 0, "id": 1})
        out, err = p.communicate(timeout=20)
        self.assertEqual(p.returncode, 0, err)
        self.assertIn("requested", out)

    def test_first_sigterm_is_a_save_then_stopping_lets_it_end(self):
        p = self.child("import os, sys, time, ckpt_helper\n"
                       "print('up', flush=True)\n"
                       "while not ckpt_helper.requested(): time.sleep(0.01)\n"
                       "print('saving', flush=True)\n"
                       "time.sleep(60)\n")
        self.assertEqual(p.stdout.readline().strip(), "up")
        self.lines_of("helper")
        os.kill(p.pid, signal.SIGTERM)
        self.assertEqual(p.stdout.readline().strip(), "saving")  # survived: a request
        rep = self.lines_of("signal")[0]
        self.assertEqual((rep["signal"], rep["pid"]), ("SIGTERM", p.pid))
        self.assertGreater(rep["mono_ms"], 0)
        # ckptrun's own stop request after that is the same save
        self.send({"type": "stopping", "reason": "SIGTERM", "signal": "SIGTERM"})
        self.assertEqual(self.lines_of("stopping")[0]["pid"], p.pid)  # acknowledged
        os.kill(p.pid, signal.SIGTERM)
        p.communicate(timeout=20)
        self.assertEqual(p.returncode, -signal.SIGTERM)

    def test_sigterm_after_the_stop_request_is_the_same_stop(self):
        # ckptrun got the job-wide SIGTERM first and asked for the save: the
        # trainer's own copy of that SIGTERM asks for no second one
        p = self.child("import os, sys, time, ckpt_helper\n"
                       "print('up', flush=True)\n"
                       "n = 0\n"
                       "end = time.monotonic() + 3\n"
                       "while time.monotonic() < end:\n"
                       "    if ckpt_helper.requested():\n"
                       "        n += 1\n"
                       "        print('saving', flush=True)\n"
                       "    time.sleep(0.01)\n"
                       "print('saves', n, flush=True)\n")
        self.assertEqual(p.stdout.readline().strip(), "up")
        self.lines_of("helper")
        self.send({"type": "request", "reason": "stop", "deadline_ms": 0, "id": 1})
        self.assertEqual(p.stdout.readline().strip(), "saving")
        os.kill(p.pid, signal.SIGTERM)
        self.assertEqual(self.lines_of("signal")[0]["signal"], "SIGTERM")  # still told
        out, err = p.communicate(timeout=20)
        self.assertEqual(p.returncode, 0, err)  # absorbed, not the default action
        self.assertIn("saves 1", out)

    # The helper's clock, in a child: its `time` module is replaced by one
    # whose monotonic() is frozen until the test moves it ("advance S" on
    # stdin) and counts its reads (_on_stop reads it once per signal); each
    # line on stdin is answered "reads N".
    TEST_CLOCK = ("import os, sys, time, ckpt_helper\n"
                  "class Clock:\n"
                  "    now, reads = 1000.0, 0\n"
                  "    def monotonic(self):\n"
                  "        Clock.reads += 1\n"
                  "        return Clock.now\n"
                  "    def __getattr__(self, name):\n"
                  "        return getattr(time, name)\n"
                  "ckpt_helper.time = Clock()\n"
                  "print('up', flush=True)\n"
                  "for line in sys.stdin:\n"
                  "    if line.startswith('advance '):\n"
                  "        Clock.now += float(line.split()[1])\n"
                  "    print('reads', Clock.reads, flush=True)\n")

    def clock_reads(self, p, line="reads"):
        """Send `line` to a TEST_CLOCK child; @return its clock's reads."""
        p.stdin.write(line + "\n")
        p.stdin.flush()
        got = p.stdout.readline()
        if not got.startswith("reads "):
            p.kill()
            self.fail("the child answered %r, exit %s: %s" % (got, p.wait(), p.stderr.read()))
        return int(got.split()[1])

    def test_second_sigterm_ends_at_once_but_a_quick_repeat_does_not(self):
        p = self.child(self.TEST_CLOCK, stdin=subprocess.PIPE)
        self.addCleanup(lambda: p.poll() is None and p.kill())
        self.assertEqual(p.stdout.readline().strip(), "up")
        self.lines_of("helper")
        os.kill(p.pid, signal.SIGTERM)
        rep = self.lines_of("signal")[0]
        self.assertEqual(rep["mono_ms"], 1000000)  # taken at the test's clock
        os.kill(p.pid, signal.SIGTERM)  # forwarded by a launcher: the same stop
        end = time.monotonic() + 10
        while self.clock_reads(p) < 2:  # each answer also shows it is alive
            if time.monotonic() > end:
                self.fail("the second SIGTERM was not handled within 10 s")
            time.sleep(0.02)
        self.assertIsNone(p.poll())
        self.assertEqual(self.clock_reads(p, "advance 1.0"), 2)
        os.kill(p.pid, signal.SIGTERM)  # a second one, later: now
        try:
            p.stdin.write("reads\n")  # wakes the main thread, should the handler wait for it
            p.stdin.flush()
        except BrokenPipeError:
            pass
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.fail("a SIGTERM 1 s after the first (by the helper's clock) did not end it")
        p.communicate()
        self.assertEqual(p.returncode, -signal.SIGTERM)
        self.assertEqual(len(self.lines_of("signal")), 1)

    def test_sigint_is_a_user_stop_then_keyboardinterrupt(self):
        p = self.child("import os, sys, time, ckpt_helper\n"
                       "print('up', flush=True)\n"
                       "while not ckpt_helper.requested(): time.sleep(0.01)\n"
                       # inside the try: under load the main thread can still
                       # be in this print when the second SIGINT comes (CI)
                       "try:\n    print('saving', flush=True)\n    time.sleep(60)\n"
                       "except KeyboardInterrupt:\n    print('interrupted', flush=True)\n")
        self.assertEqual(p.stdout.readline().strip(), "up")
        self.lines_of("helper")
        os.kill(p.pid, signal.SIGINT)
        self.assertEqual(p.stdout.readline().strip(), "saving")
        self.assertEqual(self.lines_of("signal")[0]["signal"], "SIGINT")
        self.send({"type": "stopping", "reason": "SIGINT", "signal": "SIGINT"})
        self.lines_of("stopping")
        os.kill(p.pid, signal.SIGINT)
        out, _ = p.communicate(timeout=20)
        self.assertIn("interrupted", out)
        self.assertEqual(p.returncode, 0)

    def test_program_handler_wins_and_forked_child_gets_default(self):
        # A handler installed before the import is kept: no stop taken.
        p = self.child("import os, signal, sys, time\n"
                       "signal.signal(signal.SIGTERM, lambda *a: print('mine', flush=True))\n"
                       "import ckpt_helper\n"
                       "print('up', flush=True)\n"
                       "pid = os.fork()\n"
                       "if pid == 0:\n"
                       "    time.sleep(60)\n"
                       "print(pid, flush=True)\n"
                       "time.sleep(0.5)\n"
                       "os.kill(pid, signal.SIGINT)\n"
                       "_, st = os.waitpid(pid, 0)\n"
                       "print('child', st, flush=True)\n"
                       "os.kill(os.getpid(), signal.SIGTERM)\n"
                       "time.sleep(0.5)\n")
        self.assertEqual(p.stdout.readline().strip(), "up")
        out, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 0, err)
        self.assertIn("mine", out)
        self.assertEqual(self.lines_of("helper")[0]["signals"], ["SIGINT"])
        # the forked child: SIGINT is its default (KeyboardInterrupt, exit 1)
        self.assertRegex(out, r"child (256|2)\b")
        self.assertEqual([m for m in self.srv.wait(0) if m.get("type") == "signal"], [])


if __name__ == "__main__":
    unittest.main()
