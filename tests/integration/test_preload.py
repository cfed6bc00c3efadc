#!/usr/bin/python3
"""Integration tests of libckpt_preload.so with a fake ckptrun.

Runs unmodified programs (tests/integration/preload_probe.c and Python)
under LD_PRELOAD with CKPT_DIR and CKPT_SOCKET set, a fake control server
listening on the socket, and checks the `file` messages the shim sends
(docs/CONTROL.md) and how signals behave.

    PRELOAD_SO=build/lib/libckpt_preload.so PRELOAD_PROBE=build/bin/preload_probe \
        /usr/bin/python3 tests/integration/test_preload.py -v

Standard library only.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ckpt_testlib as T  # noqa: E402

SO = os.environ.get("PRELOAD_SO", "")
PROBE = os.environ.get("PRELOAD_PROBE", "")
PYTHON = "/usr/bin/python3"


@unittest.skipUnless(SO and os.path.exists(SO), "PRELOAD_SO not built")
class PreloadTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ckpt-preload-")
        self.dir = os.path.join(self.tmp, "ckpt")
        self.out = os.path.join(self.tmp, "elsewhere")
        os.mkdir(self.dir)
        os.mkdir(self.out)
        self.sock = os.path.join(self.tmp, "ctl.sock")
        self.srv = T.FakeControl(self.sock)

    def tearDown(self):
        self.srv.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def env(self, **extra):
        env = dict(os.environ)
        for k in list(env):
            if k.startswith("CKPT_"):
                del env[k]
        env.update(LD_PRELOAD=SO, CKPT_DIR=self.dir, CKPT_SOCKET=self.sock)
        env.update(extra)
        return env

    def probe(self, *args, env=None, **kw):
        self.assertTrue(PROBE and os.path.exists(PROBE), "PRELOAD_PROBE not built")
        return subprocess.run([PROBE] + list(args), env=env or self.env(),
                              capture_output=True, text=True, timeout=30, **kw)

    def files(self, msgs=None):
        msgs = self.srv.messages() if msgs is None else msgs
        return [(m["event"], m["path"]) for m in msgs if m.get("type") == "file"]

    # ---------------------------------------------------------- signals

    def test_c_no_handler_survives_signal(self):
        r = self.probe("nohandler")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("alive take=1", r.stdout)
        self.assertIn("again take=0", r.stdout)

    def test_c_without_shim_dies(self):
        # The control experiment: the same program dies of the signal.
        env = self.env()
        del env["LD_PRELOAD"]
        r = self.probe("nohandler", env=env)
        self.assertEqual(r.returncode, -signal.SIGUSR1)

    def test_c_own_handler_chained(self):
        for mode in ("handler", "signal"):
            r = self.probe(mode)
            self.assertEqual(r.returncode, 0, mode + r.stderr)
            self.assertIn("alive got=2 take=1", r.stdout)
            self.assertIn("dfl got=2", r.stdout)

    def test_other_signal_configured(self):
        r = self.probe("nohandler", env=self.env(CKPT_SIGNAL="SIGUSR2"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("alive take=1", r.stdout)

    def test_signal_none_leaves_default(self):
        r = self.probe("nohandler", env=self.env(CKPT_SIGNAL="none"))
        self.assertEqual(r.returncode, -signal.SIGUSR1)

    def test_external_signal_to_python(self):
        # An unmodified Python program with no handler, signalled from
        # outside while it runs: it lives, and the request is visible.
        code = ("import ctypes, signal, sys, time\n"
                "assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL\n"
                "print('ready', flush=True)\n"
                "sys.stdin.readline()\n"
                "time.sleep(0.2)\n"
                "print('take', ctypes.CDLL(None).ckpt_preload_take_request())\n")
        p = subprocess.Popen([PYTHON, "-c", code], env=self.env(),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        self.assertEqual(p.stdout.readline().strip(), "ready")
        p.send_signal(signal.SIGUSR1)
        out, err = p.communicate("go\n", timeout=30)
        self.assertEqual(p.returncode, 0, err)
        self.assertIn("take 1", out)

    def test_python_own_handler_chained(self):
        code = ("import os, signal\n"
                "got = []\n"
                "signal.signal(signal.SIGUSR1, lambda s, f: got.append(s))\n"
                "assert signal.getsignal(signal.SIGUSR1) is not signal.SIG_DFL\n"
                "os.kill(os.getpid(), signal.SIGUSR1)\n"
                "signal.signal(signal.SIGUSR1, signal.SIG_DFL)\n"
                "os.kill(os.getpid(), signal.SIGUSR1)\n"
                "print('got', len(got))\n")
        r = subprocess.run([PYTHON, "-c", code], env=self.env(),
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("got 1", r.stdout)

    def test_alone_sigterm_keeps_default(self):
        # No ckptrun: the shim's context takes no SIGTERM as a stop (its
        # program writes its own checkpoints; no ckpt_save would answer),
        # even once the program asks: SIGTERM ends it at once.
        code = ("import ctypes, sys, time\n"
                "lib = ctypes.CDLL(None)\n"
                "lib.ckpt_preload_ctx.restype = ctypes.c_void_p\n"
                "assert lib.ckpt_preload_ctx()\n"
                "lib.ckpt_preload_take_request()\n"
                "print('ready', flush=True)\n"
                "time.sleep(30)\n")
        env = self.store_env()
        del env["CKPT_SOCKET"]
        p = subprocess.Popen([PYTHON, "-c", code], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        self.assertEqual(p.stdout.readline().strip(), "ready")
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, -signal.SIGTERM, err)
        self.assertLess(time.monotonic() - t0, 5)
        self.assertNotIn("ckpt: SIGTERM", err)

    # ---------------------------------------------------------- in-process

    def store_env(self, **extra):
        store = os.path.join(self.tmp, "store")
        return self.env(CKPT_STORE="file://" + store, CKPT_RUN="preload-test",
                        **extra)

    def test_c_in_process_api(self):
        r = self.probe("api", env=self.store_env())
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("before=0", r.stdout)
        self.assertIn("after=1 take=1 cleared=1", r.stdout)

    def test_in_process_api_under_a_launcher(self):
        # torchrun's and Open MPI's rank variables: the shim has no
        # collective, so its context is one rank, not a refused 4-rank one
        for extra in ({"RANK": "2", "WORLD_SIZE": "4"},
                      {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2"}):
            r = self.probe("api", env=self.store_env(**extra))
            self.assertEqual(r.returncode, 0, str(extra) + r.stdout + r.stderr)
            self.assertIn("after=1 take=1 cleared=1", r.stdout)

    def test_helper_gets_socket_request(self):
        # ckpt_helper under the shim opens libckpt's context, which says
        # hello; the fake ckptrun answers with a request over the socket.
        self.srv.close()
        os.unlink(self.sock)
        self.srv = T.FakeControl(self.sock, reply_to_hello=(
            b'{"type":"request","reason":"manual","deadline_ms":0,"id":1}\n'))
        examples = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "examples", "python")
        code = ("import time, ckpt_helper as c\n"
                "assert c._shim() is not None\n"
                "end = time.monotonic() + 10\n"
                "while not c.requested():\n"
                "    assert time.monotonic() < end, 'no request'\n"
                "    time.sleep(0.01)\n"
                "print('requested', c.requested())\n")
        r = subprocess.run([PYTHON, "-c", code],
                           env=self.store_env(PYTHONPATH=examples,
                                              CKPT_HELPER_SOCKET="1"),
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("requested False", r.stdout)
        hello = [m for m in self.srv.messages() if m.get("type") == "hello"]
        self.assertEqual(len(hello), 1)

    # ---------------------------------------------------------- files

    def _half_then_close(self, mode, path):
        p = subprocess.Popen([PROBE, mode, path], env=self.env(),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        self.assertEqual(p.stdout.readline().strip(), "half")
        time.sleep(0.2)
        # Half-written: nothing may have been announced yet.
        self.assertEqual(self.files(), [])
        out, err = p.communicate("go\n", timeout=30)
        self.assertEqual(p.returncode, 0, err)
        msgs = self.srv.wait_for(1)
        self.assertEqual(self.files(msgs), [("closed", path)])
        with open(path) as f:
            self.assertEqual(f.read(), "half-done")

    def test_closed_only_on_close(self):
        self._half_then_close("write", os.path.join(self.dir, "ckpt-5.bin"))

    def test_fopen_fclose(self):
        self._half_then_close("fwrite", os.path.join(self.dir, "ckpt-6.bin"))

    def test_message_format(self):
        path = os.path.join(self.dir, 'we"ird\\name.bin')
        r = self.probe("rename", os.path.join(self.out, "x"), path)
        self.assertEqual(r.returncode, 0, r.stderr)
        msgs = self.srv.wait_for(1)
        self.assertEqual(self.srv.bad, [])
        m = msgs[0]
        self.assertEqual(m["type"], "file")
        self.assertEqual(m["path"], path)
        self.assertEqual(m["event"], "renamed")
        self.assertIsInstance(m.get("pid"), int)

    def test_rename_into_dir(self):
        src = os.path.join(self.out, "tmp.bin")
        dst = os.path.join(self.dir, "ckpt-7.bin")
        r = self.probe("rename", src, dst)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.files(self.srv.wait_for(1)), [("renamed", dst)])

    def test_other_calls(self):
        r = self.probe("misc", self.dir, self.out)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        j = lambda n: os.path.join(self.dir, n)  # noqa: E731
        self.assertEqual(self.files(self.srv.wait_for(5)), [
            ("closed", j("creat.bin")),
            ("closed", j("creat.bin")),
            ("closed", j("at64.bin")),
            ("renamed", j("renameat2.bin")),
            ("renamed", j("renameat.bin")),
        ])
        time.sleep(0.2)
        self.assertEqual(len(self.srv.messages()), 5)

    def test_relative_paths(self):
        # cwd inside CKPT_DIR's parent, relative names with "." and "..".
        r = self.probe("rename", "elsewhere/a.bin", "./ckpt/../ckpt/b.bin",
                       cwd=self.tmp)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.files(self.srv.wait_for(1)),
                         [("renamed", os.path.join(self.dir, "b.bin"))])

    def test_openat(self):
        r = self.probe("openat", self.dir, "c.bin")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.files(self.srv.wait_for(1)),
                         [("closed", os.path.join(self.dir, "c.bin"))])

    def test_symlinked_dir_reported_by_given_name(self):
        link = os.path.join(self.tmp, "link")
        os.symlink(self.dir, link)
        # CKPT_DIR is the link; the program writes through the real path.
        real = os.path.join(self.dir, "d.bin")
        r = self.probe("rename", os.path.join(self.out, "d"), real,
                       env=self.env(CKPT_DIR=link))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.files(self.srv.wait_for(1)),
                         [("renamed", os.path.join(link, "d.bin"))])

    def test_outside_dir_silent(self):
        r = self.probe("loop", self.out, "50")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.probe("rename", os.path.join(self.out, "a"),
                       os.path.join(self.out, "b"))
        self.assertEqual(r.returncode, 0, r.stderr)
        # A sibling whose name starts with CKPT_DIR's is outside it too.
        sib = self.dir + "-old"
        os.mkdir(sib)
        r = self.probe("rename", os.path.join(self.out, "c"),
                       os.path.join(sib, "c"))
        self.assertEqual(r.returncode, 0, r.stderr)
        time.sleep(0.3)
        self.assertEqual(self.srv.messages(), [])
        self.assertEqual(self.srv.conns, 0)

    def test_reading_is_silent(self):
        path = os.path.join(self.dir, "r.bin")
        with open(path, "w") as f:
            f.write("x")
        r = subprocess.run([PYTHON, "-c", "open(%r).read()" % path],
                           env=self.env(), capture_output=True, timeout=30)
        self.assertEqual(r.returncode, 0)
        time.sleep(0.3)
        self.assertEqual(self.srv.messages(), [])

    def test_fork(self):
        base = os.path.join(self.dir, "f.bin")
        r = self.probe("fork", base)
        self.assertEqual(r.returncode, 0, r.stderr)
        msgs = self.srv.wait_for(2)
        self.assertEqual(sorted(self.files(msgs)),
                         [("closed", base + ".child"), ("closed", base + ".parent")])
        # The child used a connection of its own.
        self.assertEqual(self.srv.conns, 2)

    def test_exec_reinjects(self):
        path = os.path.join(self.dir, "e.bin")
        p = subprocess.run([PROBE, "exec", path], env=self.env(),
                           input="go\n", capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.files(self.srv.wait_for(1)), [("closed", path)])

    def test_exec_once(self):
        path = os.path.join(self.dir, "e.bin")
        p = subprocess.run([PROBE, "exec", path],
                           env=self.env(CKPT_PRELOAD_ONCE="1"),
                           input="go\n", capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        time.sleep(0.3)
        self.assertEqual(self.srv.messages(), [])

    def test_threads(self):
        r = self.probe("threads", self.dir, "8")
        self.assertEqual(r.returncode, 0, r.stderr)
        msgs = self.srv.wait_for(8 * 20)
        got = self.files(msgs)
        self.assertEqual(len(got), 160)
        for i in range(8):
            p = os.path.join(self.dir, "t%d.bin" % i)
            self.assertEqual(got.count(("closed", p)), 20)

    def test_close_all_fds(self):
        a = os.path.join(self.dir, "a.bin")
        b = os.path.join(self.dir, "b.bin")
        r = self.probe("closeall", a, b)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("leaked=0", r.stdout)
        # Two connections (the first was closed by the program), read by two
        # server threads: no order between them.
        self.assertEqual(sorted(self.files(self.srv.wait_for(2))),
                         [("closed", a), ("closed", b)])
        self.assertEqual(self.srv.conns, 2)

    def test_no_server(self):
        # ckptrun gone: the program is not disturbed.
        self.srv.close()
        os.unlink(self.sock)
        r = self.probe("rename", os.path.join(self.out, "a"),
                       os.path.join(self.dir, "a"))
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_python_files(self):
        code = ("import os, sys\n"
                "d = os.environ['CKPT_DIR']\n"
                "tmp = os.path.join(d, '.tmp-checkpoint-3')\n"
                "os.mkdir(tmp)\n"
                "with open(os.path.join(tmp, 'model.pt'), 'wb') as f:\n"
                "    f.write(b'x' * 100)\n"
                "os.rename(tmp, os.path.join(d, 'checkpoint-3'))\n"
                "with open(os.path.join(%r, 'log.txt'), 'w') as f:\n"
                "    f.write('outside')\n" % self.out)
        r = subprocess.run([PYTHON, "-c", code], env=self.env(),
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.files(self.srv.wait_for(2)), [
            ("closed", os.path.join(self.dir, ".tmp-checkpoint-3", "model.pt")),
            ("renamed", os.path.join(self.dir, "checkpoint-3")),
        ])

    def test_python_torch_trainer(self):
        # The real example trainer, unmodified, under the shim.
        trainer = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                               "..", "..", "examples", "python", "train.py")
        if subprocess.run([PYTHON, "-c", "import torch"],
                          capture_output=True).returncode != 0:
            self.skipTest("no torch")
        r = subprocess.run([PYTHON, trainer, "--steps", "20", "--every", "10",
                            "--out", os.path.join(self.out, "final.bin")],
                           env=self.env(), capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        renamed = [p for e, p in self.files(self.srv.wait_for(10))
                   if e == "renamed"]
        self.assertEqual(renamed, [os.path.join(self.dir, "checkpoint-10"),
                                   os.path.join(self.dir, "checkpoint-20")])


if __name__ == "__main__":
    unittest.main()
