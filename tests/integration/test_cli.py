#!/usr/bin/python3
"""The command line as a user meets it: mistyped subcommands, progress and result lines, --json,
consistent answers for missing runs, one-line errors with a level, colour
only on a terminal, the status dashboard, the shared rules, plain-http
warnings and failing fast on a dead store, `ls` as a table of runs and the
items of a checkpoint, "did you mean" for options, run names and relative
file:// stores; with --build, the generated manual page and completions,
installation, the Makefile's hygiene and the package sets of scripts/deps.sh.

Run:  /usr/bin/python3 tests/integration/test_cli.py [-v] [--build] [TestName...]
Binaries from $CKPT_BIN (ctest sets it), else ./build/bin; the build tree
from $CKPT_BUILD (else ./build). Loopback only: stores are file:// or
tests/tools/mock_s3.py (behind tests/tools/faultproxy.py where a slow or
vanishing link is needed). Terminal tests run the command under util-linux
`script`, which records what was drawn and when (--log-timing).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ckpt_testlib as T  # noqa: E402
from ckpt_testlib import (BUILD, C_TRAINER, CKPTRUN, HAVE_S3, REPO, TOOLS, Server,  # noqa: E402
                          free_port, tty_run)


class Case(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ckpt-cli-")
        self.store_dir = os.path.join(self.tmp, "store")
        self.store = "file://" + self.store_dir
        self.work = os.path.join(self.tmp, "work")
        self.home = os.path.join(self.tmp, "home")
        os.makedirs(self.work)
        os.makedirs(self.home)
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("CKPT_", "AWS_", "AZURE_")) and
                    k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy",
                                      "no_color")}
        self.env.update(HOME=self.home, CKPT_STORE=self.store, CKPT_RUN="job",
                        CKPT_NOTICE="none", AWS_EC2_METADATA_DISABLED="true",
                        XDG_DATA_HOME=os.path.join(self.home, "xdg"))
        self.servers = []

    def tearDown(self):
        for s in self.servers:
            s.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def ckptrun(self, *args, env=None, timeout=60, cwd=None):
        r = subprocess.run([CKPTRUN] + list(args), env=env or self.env, cwd=cwd or self.work,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=timeout)
        return r.returncode, r.stdout, r.stderr

    def lines(self, err):
        return [l for l in err.splitlines() if l.strip()]

    def one_error(self, err):
        """Exactly one line, and it is an error with a level."""
        ls = self.lines(err)
        self.assertEqual(len(ls), 1, err)
        self.assertRegex(ls[0], r"^ckptrun: error: ", err)
        return ls[0]

    def src(self, name, size, seed=0):
        d = os.path.join(self.work, "src", name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "m.bin"), "wb") as f:
            f.write(os.urandom(size) if seed == 0 else bytes([seed % 256]) * size)
        return d

    def save(self, step, path, *extra):
        rc, out, err = self.ckptrun("save", "--step", str(step), path, *extra)
        self.assertEqual(rc, 0, err)
        return out, err

    def nothing_created(self):
        self.assertFalse(os.path.exists(self.store_dir), "the store was created")
        self.assertFalse(os.path.exists(os.path.join(self.work, "checkpoints")),
                         "./checkpoints was created")
        self.assertEqual(os.listdir(os.path.join(self.home)), [], "HOME was written to")

    def s3_env(self, port, env=None):
        e = dict(env or self.env)
        e.update(AWS_ENDPOINT_URL="http://127.0.0.1:%d" % port, AWS_REGION="us-east-1",
                 AWS_ACCESS_KEY_ID="MOCKAK", AWS_SECRET_ACCESS_KEY="mock/secret+key",
                 CKPT_STORE="s3://ckpt-test/cli")
        return e

    def mock_s3(self):
        s = T.MockS3()
        self.servers.append(s)
        return s


class Subcommands(Case):
    """17.1: a mistyped subcommand is not run as the training command."""

    def test_mistyped_words_are_refused_before_anything(self):
        for args, hint in ((["stauts", "--store", self.store, "--run", "demo"], "status"),
                           (["version"], "--version"), (["list"], "ls"),
                           (["--store", self.store, "verfy"], "verify")):
            rc, out, err = self.ckptrun(*args)
            self.assertEqual(rc, 64, (args, err))
            line = self.one_error(err)
            self.assertIn("did you mean `ckptrun %s`" % hint, line)
            self.nothing_created()

    def test_operands_are_checked_before_anything(self):
        """Every administration command checks its operands the same way
        (ckptrun/cmd/open.c), says what it got, and opens nothing."""
        d = self.src("c", 100)
        for args, want in ((["ls", "x"], "ls takes no arguments (got 'x'; see ckptrun ls --help)"),
                           (["status", "x"], "status takes no arguments (got 'x'; see ckptrun "
                                             "status --help)"),
                           (["gc", "x"], "gc takes no arguments (got 'x'; see ckptrun gc --help)"),
                           (["verify", "7"], "verify takes no arguments (got '7'; use --step N; "
                                             "see ckptrun verify --help)"),
                           (["restore"], "restore needs exactly one DIR (see ckptrun restore "
                                         "--help)"),
                           (["restore", "a", "b"], "restore needs exactly one DIR (got 2; see "
                                                   "ckptrun restore --help)"),
                           (["save", "--step", "1"], "save needs at least one PATH (see ckptrun "
                                                     "save --help)"),
                           (["save", d], "save needs --step N"),
                           (["save", "--step", "1", d, os.path.join(self.tmp, "nope")],
                            "nope: No such file or directory"),
                           (["ls", "--step", "1", "--run", ""], "ls --step needs the run")):
            rc, out, err = self.ckptrun(*args)
            self.assertEqual(rc, 64, (args, err))
            self.assertIn(want, self.one_error(err), args)
            self.nothing_created()

    def test_programs_still_run(self):
        # a program on PATH, a path to one, and anything after -- or run
        rc, _, err = self.ckptrun("true", "--dir", os.path.join(self.tmp, "ck"))
        self.assertEqual(rc, 0, err)
        script = os.path.join(self.work, "train.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\nexit 3\n")
        os.chmod(script, 0o755)
        rc, _, err = self.ckptrun("./train.sh", "--dir", os.path.join(self.tmp, "ck"))
        self.assertEqual(rc, 3, err)
        rc, _, err = self.ckptrun("--dir", os.path.join(self.tmp, "ck"), "--", "stauts")
        self.assertEqual(rc, 127, err)  # asked for explicitly: run, and fail as exec does
        rc, _, err = self.ckptrun("run", "--dir", os.path.join(self.tmp, "ck"), "stauts")
        self.assertEqual(rc, 127, err)

    def test_options_before_the_subcommand(self):
        self.save(1, self.src("c1", 1000))
        rc, out, err = self.ckptrun("--store", self.store, "--run", "job", "ls", "--json")
        self.assertEqual(rc, 0, err)
        self.assertEqual([c["step"] for c in json.loads(out)], [1])

    def test_help_for_an_unknown_command(self):
        rc, out, err = self.ckptrun("help", "stauts")
        self.assertEqual(rc, 64)
        self.assertIn("unknown command 'stauts'", self.one_error(err))
        self.assertIn("did you mean `ckptrun status`", err)
        for c in ("status", "doctor", "run"):
            rc, out, _ = self.ckptrun("help", c)
            self.assertEqual(rc, 0)
            self.assertIn("Usage: ckptrun %s" % c, out)


class Progress(Case):
    """17.2: progress on a terminal only; a result line always (-q hides it)."""

    @unittest.skipUnless(HAVE_S3 and shutil.which("script"), "needs s3:// and script(1)")
    def test_progress_drawn_in_place_on_a_terminal(self):
        s3 = self.mock_s3()
        # a link of 8 MB/s: a 40 MiB save lasts about five seconds
        proxy = Server(os.path.join(TOOLS, "faultproxy.py"), "--upstream",
                       "127.0.0.1:%d" % s3.port, "--rate", "0", "--upload-bps", "8000000")
        self.servers.append(proxy)
        env = self.s3_env(proxy.port)
        path = self.src("big", 40 << 20)
        rc, frames = tty_run([CKPTRUN, "save", "--codec", "none", "--step", "1", path], env,
                             self.work)
        self.assertEqual(rc, 0, frames)
        text = b"".join(d for _, d in frames).decode(errors="replace")
        draws = [t for t, d in frames if re.search(rb"save +\d+%", d)]
        self.assertGreaterEqual(len(draws), 4, text)
        self.assertLess(draws[0], 1.0, "first progress line after %.2f s" % draws[0])
        gaps = sorted(b - a for a, b in zip(draws, draws[1:]))
        self.assertLess(gaps[len(gaps) // 2], 0.5, "redrawn every %s s" % gaps)
        self.assertIn("\r", text)
        self.assertRegex(text, r"\d+% +[\d.]+ MiB / 40\.0 MiB +[\d.]+ [KM]iB/s")
        self.assertRegex(text, r"ETA ")
        # the line is cleared, then the result is said once
        self.assertRegex(text, r"ckptrun: save: step 1 committed: 1 files, 40\.0 MiB")
        # not on a pipe
        rc, out, err = self.ckptrun("save", "--codec", "none", "--step", "2", path, env=env,
                                    timeout=120)
        self.assertEqual(rc, 0, err)
        self.assertNotIn("\r", err)
        self.assertEqual(len(self.lines(err)), 1, err)
        self.assertRegex(err, r"^ckptrun: save: step 2 committed")

    def test_every_admin_command_ends_with_a_result(self):
        d = self.src("checkpoint-1", 200000)
        _, err = self.save(1, d)
        self.assertRegex(err, r"^ckptrun: save: step 1 committed: 1 files, 195 KiB, .* stored "
                              r"\(.* new\), .*/s in [\d.]+s\n$")
        rc, _, err = self.ckptrun("restore", os.path.join(self.tmp, "r"))
        self.assertEqual(rc, 0, err)
        self.assertRegex(err, r"^ckptrun: restore: step 1 into .*: 1 files, 195 KiB in [\d.]+s "
                              r"\(.*/s\)\n$")
        rc, _, err = self.ckptrun("verify")
        self.assertEqual(rc, 0, err)
        self.assertRegex(err, r"^ckptrun: verify: 1 checkpoint intact: 1 files, 1 chunks, "
                              r"195 KiB checked in [\d.]+s")
        rc, _, err = self.ckptrun("gc", "--keep", "1", "--min-age", "0")
        self.assertEqual(rc, 0, err)
        self.assertRegex(err, r"^ckptrun: gc: kept 1 checkpoint; deleted 0 objects, freed 0 B")
        # -q: nothing at all
        for args in (["save", "--step", "2", d], ["verify"], ["gc", "--keep", "1"],
                     ["restore", os.path.join(self.tmp, "r2")]):
            rc, _, err = self.ckptrun("-q", *args)
            self.assertEqual((rc, err), (0, ""), args)
        # gc frees what it deletes, and says how much
        self.save(3, self.src("checkpoint-3", 300000))
        rc, _, err = self.ckptrun("gc", "--keep", "1", "--min-age", "0")
        self.assertRegex(err, r"deleted [1-9]\d* objects, freed (19\d|20\d) KiB")


class Json(Case):
    """17.3: --json is one JSON document on stdout, with the documented fields."""

    def test_every_result_is_json(self):
        d = self.src("checkpoint-5", 100000)
        rc, out, err = self.ckptrun("save", "--step", "5", d, "--json")
        self.assertEqual(rc, 0, err)
        j = json.loads(out)
        self.assertEqual((j["step"], j["files"], j["raw_bytes"]), (5, 1, 100000))
        for k in ("run", "stored_bytes", "new_bytes", "seconds", "bytes_per_s"):
            self.assertIn(k, j)
        rc, out, err = self.ckptrun("restore", os.path.join(self.tmp, "r"), "--json")
        j = json.loads(out)
        self.assertEqual((rc, j["step"], j["files"], j["bytes"]), (0, 5, 1, 100000))
        self.assertIn("bytes_per_s", j)
        rc, out, err = self.ckptrun("verify", "--json")
        j = json.loads(out)
        self.assertEqual((rc, j["intact"], j["checkpoints"], j["files"], j["chunks"],
                          j["bytes"]), (0, True, 1, 1, 1, 100000))
        rc, out, err = self.ckptrun("gc", "--keep", "1", "--json")
        j = json.loads(out)
        self.assertEqual((rc, j["retained"], j["deleted"]), (0, 1, 0))
        self.assertIn("freed_bytes", j)
        rc, out, err = self.ckptrun("ls", "--json")
        self.assertEqual([c["step"] for c in json.loads(out)], [5])
        self.assertEqual([c["world_size"] for c in json.loads(out)], [1])  # one writer
        rc, out, err = self.ckptrun("status", "--json")
        j = json.loads(out)
        self.assertEqual((j["last_step"], j["newest"]["raw_bytes"], j["last_commit"]["step"]),
                         (5, 100000, 5))
        # damage: still one document, and exit 1
        for root, _, files in os.walk(os.path.join(self.store_dir, "job", "chunks")):
            for f in files:
                with open(os.path.join(root, f), "r+b") as fh:
                    fh.seek(60)
                    fh.write(b"XXXX")
        rc, out, err = self.ckptrun("verify", "--json")
        j = json.loads(out)
        self.assertEqual((rc, j["intact"]), (1, False))
        self.assertIn("expected", j["error"])


class Consistent(Case):
    """17.4 and 15.2 (save): answers that agree, read-only commands that write nothing."""

    def test_missing_run_is_an_error_and_nothing_is_created(self):
        self.save(1, self.src("c", 1000))
        for cmd in (["ls"], ["status"], ["verify"], ["restore", os.path.join(self.tmp, "x")]):
            rc, out, err = self.ckptrun(*cmd, "--run", "typo")
            self.assertEqual(rc, 1, (cmd, err))
            self.assertIn("run typo not found", self.one_error(err))
            self.assertFalse(os.path.exists(os.path.join(self.store_dir, "typo")), cmd)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "x")), "restore created DIR")
        # a store that does not exist is not created by reading it
        missing = os.path.join(self.tmp, "nostore")
        for cmd in (["ls"], ["ls", "--run", "job"], ["status"], ["verify"]):
            rc, out, err = self.ckptrun("--store", "file://" + missing, *cmd)
            self.assertEqual(rc, 1, (cmd, err))
            self.one_error(err)
            self.assertFalse(os.path.exists(missing), cmd)

    def test_lower_step_needs_force(self):
        d = self.src("c", 1000)
        self.save(2, d)
        rc, _, err = self.ckptrun("save", "--step", "1", d)
        self.assertEqual(rc, 64, err)
        self.assertIn("lower than run job's newest checkpoint (step 2)", self.one_error(err))
        self.assertIn("--force", err)
        self.save(2, d)  # the same step again is fine
        self.save(1, d, "--force")
        rc, out, _ = self.ckptrun("ls", "--json")
        self.assertIn(1, [c["step"] for c in json.loads(out)])

    def test_one_size_convention(self):
        self.save(1, self.src("c", 3 << 20))
        rc, _, err = self.ckptrun("ls", "--max-rate", "50MB")
        self.assertEqual(rc, 0, err)
        self.assertRegex(err, r"level=warn .*'50MB' is 50000000 bytes.*50M or 50MiB")
        rc, _, err = self.ckptrun("ls", "--max-rate", "50M")
        self.assertEqual((rc, err), (0, ""))
        rc, _, err = self.ckptrun("ls", env=dict(self.env, CKPT_MAX_RATE="2GB"))
        self.assertIn("CKPT_MAX_RATE '2GB' is 2000000000 bytes", err)
        rc, out, _ = self.ckptrun("ls", "--run", "job")
        self.assertIn("3.00 MiB", out)


class Errors(Case):
    """17.5: one line with a level, in text and --log-json; colour only on a terminal."""

    def test_one_line_with_a_level(self):
        self.save(1, self.src("c", 100000))
        for root, _, files in os.walk(os.path.join(self.store_dir, "job", "chunks")):
            for f in files:
                with open(os.path.join(root, f), "r+b") as fh:
                    fh.seek(60)
                    fh.write(b"XXXX")
        rc, _, err = self.ckptrun("restore", os.path.join(self.tmp, "r"))
        self.assertEqual(rc, 1)
        self.assertIn("damaged", self.one_error(err))
        for args in (["--store", "nope://x", "ls"], ["--codec", "zstd:20", "ls"],
                     ["--keep", "0", "ls"], ["restore"], ["--run", "a b", "ls"]):
            rc, _, err = self.ckptrun(*args)
            self.assertEqual(rc, 64, (args, err))
            self.one_error(err)
        rc, _, err = self.ckptrun("--log-json", "restore", os.path.join(self.tmp, "r"))
        self.assertEqual(rc, 1)
        ls = self.lines(err)
        self.assertEqual(len(ls), 1, err)
        j = json.loads(ls[0])
        self.assertEqual((j["event"], j["level"]), ("error", "error"))
        self.assertIn("damaged", j["msg"])

    @unittest.skipUnless(shutil.which("script"), "needs script(1)")
    def test_colour_only_on_a_terminal_and_never_with_no_color(self):
        esc = b"\x1b["
        rc, frames = tty_run([CKPTRUN, "ls", "--run", "typo"], self.env, self.work)
        self.assertEqual(rc, 1)
        self.assertIn(esc, b"".join(d for _, d in frames))
        rc, frames = tty_run([CKPTRUN, "ls", "--run", "typo"], dict(self.env, NO_COLOR="1"),
                             self.work)
        self.assertEqual(rc, 1)
        self.assertNotIn(esc, b"".join(d for _, d in frames))
        rc, _, err = self.ckptrun("ls", "--run", "typo")
        self.assertNotIn("\x1b", err)


class Status(Case):
    """17.6: relative times, the last commit's size and speed, lost work explained."""

    def test_dashboard(self):
        d = self.src("c", 300000)
        self.save(7, d)
        with open(os.path.join(self.store_dir, "job", "LEASE"), "w") as f:
            json.dump({"format": 1, "holder": "h:1:n", "epoch": 3, "released": False,
                       "expires_ms": int(time.time() * 1000) + 60000,
                       "heartbeat_ms": int(time.time() * 1000) - 180000}, f)
        rc, out, err = self.ckptrun("status")
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"heartbeat +\S+Z \(3 min ago\)")
        self.assertRegex(out, r"expiry +\S+Z \(in 5\d s\)")
        self.assertRegex(out, r"newest +step 7, \S+Z \((just now|\d+ s ago)\), 1 items, 293 KiB")
        self.assertRegex(out, r"last commit +step 7 .*: 293 KiB, 293 KiB new, .*/s in [\d.]+s")
        self.assertRegex(out, r"lost work +\S+ \(estimate, 0 stops, 0 failures, 0 crashes: "
                              r"training done after a session's last commit")


class Rules(Case):
    """16.8: ckptrun refuses what the library would refuse, before anything
    starts; an existing run opens under any name either side accepted."""

    def test_codec_levels_agree_with_the_library(self):
        rc, _, err = self.ckptrun("--codec", "zstd:20", "--dir", os.path.join(self.tmp, "ck"),
                                  "--", "true")
        self.assertEqual(rc, 64, err)
        self.assertIn("zstd[:1-19]", self.one_error(err))
        self.nothing_created()
        rc, _, err = self.ckptrun("--", "true", env=dict(self.env, CKPT_CODEC="zstd:22"))
        self.assertEqual(rc, 78, err)
        self.nothing_created()
        self.save(1, self.src("c", 1000), "--codec", "zstd:19")

    @unittest.skipUnless(os.path.exists(C_TRAINER), "needs the C trainer")
    def test_names_only_an_existing_run_may_have(self):
        long_name = "r" * 150
        for name in (".hidden", long_name):
            rc, _, err = self.ckptrun("save", "--run", name, "--step", "1", self.src("c", 10))
            self.assertEqual(rc, 64, err)
            self.assertIn("can only open an existing run", self.one_error(err))
            self.assertFalse(os.path.exists(os.path.join(self.store_dir, name)))
            # libckpt accepts the name (it always did): the run exists then
            env = dict(self.env, CKPT_RUN=name)
            subprocess.run([C_TRAINER, "--steps", "2", "--every", "1", "--quiet", "--out",
                            os.path.join(self.tmp, "o")], env=env, check=True,
                           capture_output=True, timeout=60)
            rc, out, err = self.ckptrun("ls", "--run", name, "--json")
            self.assertEqual(rc, 0, err)
            self.assertTrue(json.loads(out))
            rc, _, err = self.ckptrun("save", "--run", name, "--step", "9", self.src("c", 10))
            self.assertEqual(rc, 0, err)
        rc, _, err = self.ckptrun("ls", "--run", "r" * 201)
        self.assertEqual(rc, 64, err)


@unittest.skipUnless(HAVE_S3, "object stores not built")
class Stores(Case):
    """16.10 and 16.11."""

    def test_cleartext_endpoint_off_this_machine_warns_once(self):
        # The endpoint names another host, but every request goes to a closed
        # proxy port on loopback: nothing leaves this machine.
        env = self.s3_env(1)
        env.update(AWS_ENDPOINT_URL="http://s3.example.com", http_proxy="http://127.0.0.1:9")
        rc, _, err = self.ckptrun("status", env=env, timeout=30)
        self.assertEqual(rc, 69, err)
        warn = [l for l in self.lines(err) if "plain http" in l]
        self.assertEqual(len(warn), 1, err)
        self.assertIn("level=warn", warn[0])
        self.assertIn("http://s3.example.com", warn[0])
        s3 = self.mock_s3()
        rc, _, err = self.ckptrun("ls", env=self.s3_env(s3.port))
        self.assertNotIn("plain http", err)
        rc, _, err = self.ckptrun("ls", env=dict(self.s3_env(s3.port),
                                                 AWS_ENDPOINT_URL="http://localhost:%d" % s3.port))
        self.assertNotIn("plain http", err)

    def test_a_store_that_never_answered_fails_within_seconds(self):
        env = self.s3_env(free_port())
        ck = os.path.join(self.tmp, "ck")
        for cmd in (["ls"], ["status"], ["verify"], ["restore", os.path.join(self.tmp, "r")],
                    ["save", "--step", "1", self.src("c", 1000)],
                    ["--dir", ck, "--", "true"], ["recover", "--dir", ck, "--", "true"]):
            t0 = time.monotonic()
            rc, _, err = self.ckptrun(*cmd, env=env, timeout=60)
            took = time.monotonic() - t0
            self.assertEqual(rc, 69, (cmd, err))
            self.assertLess(took, 8, (cmd, took))
            self.one_error(err)
            self.assertIn("unreachable", err)

    @unittest.skipUnless(shutil.which("script"), "needs script(1)")
    def test_each_retry_is_visible_on_a_terminal(self):
        rc, frames = tty_run([CKPTRUN, "ls", "--run", "r"], self.s3_env(free_port()), self.work)
        text = b"".join(d for _, d in frames).decode(errors="replace")
        self.assertEqual(rc, 69, text)
        self.assertRegex(text, r"retrying 2/3 in [\d.]+s: .*[Cc]onnect")
        self.assertRegex(text, r"retrying 3/3")

    def test_a_store_that_goes_away_after_answering_is_waited_for(self):
        s3 = self.mock_s3()
        port = free_port()
        stats = os.path.join(self.tmp, "proxy-stats.json")
        args = [os.path.join(TOOLS, "faultproxy.py"), "--upstream", "127.0.0.1:%d" % s3.port,
                "--rate", "0", "--port", str(port), "--upload-bps", "8000000", "--stats", stats]
        proxy = Server(*args)
        self.servers.append(proxy)
        env = self.s3_env(port)  # the default retry budget of a real run
        path = self.src("big", 24 << 20)
        p = subprocess.Popen([CKPTRUN, "save", "--codec", "none", "--step", "1", path], env=env,
                             cwd=self.work, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        # it has answered (HEAD), and the first pack is on its way
        end = time.monotonic() + 60
        while True:
            try:
                with open(stats) as f:
                    got = json.load(f)
            except (OSError, ValueError):
                got = {}
            if got.get("forwarded", 0) >= 1 and got.get("PUT", 0) >= 1:
                break
            if p.poll() is not None or time.monotonic() > end:
                self.fail("no reply and PUT through the proxy (%s): %s" % (got, p.stderr.read()
                          if p.poll() is not None else "still running after 60 s"))
            time.sleep(0.05)
        proxy.stop()            # gone: connections reset, new ones refused ...
        time.sleep(4)           # ... for longer than a never-answered store is given
        if p.poll() is not None:
            self.fail("save gave up while the store was away: %s" % p.communicate()[1])
        proxy2 = Server(*args)  # back on the same port
        self.servers.append(proxy2)
        out, err = p.communicate(timeout=120)
        self.assertEqual(p.returncode, 0, err)
        rc, out, err = self.ckptrun("verify", env=env, timeout=120)
        self.assertEqual(rc, 0, err)


FIXTURES = os.path.join(REPO, "tests", "fuzz", "corpus", "manifest")


def table(out):
    """A table ckptrun printed: its header's column names, then one dict per
    row. Cells are apart by two spaces or more, and hold no two spaces."""
    lines = [l for l in out.splitlines() if l.strip()]
    cols = re.split(r"\s{2,}", lines[0].strip())
    rows = []
    for l in lines[1:]:
        cells = re.split(r"\s{2,}", l.strip())
        assert len(cells) == len(cols), (cols, l)
        rows.append(dict(zip(cols, cells)))
    return cols, rows


class Listing(Case):
    """26.9: `ls` without a run is a table of the store's runs (state, newest
    step, updated, size; objects and bytes in --json), cheap per run; `ls
    --run R --step N` lists that checkpoint's items."""

    def write_json(self, path, obj):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(obj, f)

    def run_record(self, run, state, lease_expires_in_ms):
        now = int(time.time() * 1000)
        self.write_json(os.path.join(self.store_dir, run, "RUN"),
                        {"format": 1, "state": state, "updated_ms": now, "started_ms": now,
                         "host": "elsewhere", "pid": 1, "epoch": 3, "last_step": 1,
                         "preemptions": 0})
        self.write_json(os.path.join(self.store_dir, run, "LEASE"),
                        {"format": 1, "holder": "elsewhere:1:n", "epoch": 3, "released": False,
                         "expires_ms": now + lease_expires_in_ms, "heartbeat_ms": now})

    def du(self, run):
        n = size = 0
        for root, _, files in os.walk(os.path.join(self.store_dir, run)):
            for f in files:
                n += 1
                size += os.path.getsize(os.path.join(root, f))
        return n, size

    def test_runs_table_file_store(self):
        self.save(5, self.src("checkpoint-5", 300000), "--run", "alpha")
        self.save(12, self.src("checkpoint-12", 1000), "--run", "beta")
        self.save(3, self.src("checkpoint-3", 1000), "--run", "beta", "--force")  # older
        rc, _, err = self.ckptrun("--run", "done", "--dir", os.path.join(self.tmp, "ck"), "--",
                                  "true")
        self.assertEqual(rc, 0, err)
        for run, state, expires in (("live", "running", 60000), ("dead", "running", -60000)):
            self.save(1, self.src("c", 100), "--run", run)
            self.run_record(run, state, expires)
        # a prefix holding neither HEAD nor RUN is no run
        os.makedirs(os.path.join(self.store_dir, "junk"))
        open(os.path.join(self.store_dir, "junk", "x"), "w").close()
        env = {k: v for k, v in self.env.items() if k != "CKPT_RUN"}
        rc, out, err = self.ckptrun("ls", env=env)
        self.assertEqual((rc, err), (0, ""))
        cols, rows = table(out)
        self.assertEqual(cols, ["RUN", "STATE", "NEWEST STEP", "UPDATED", "SIZE"])
        by = {r["RUN"]: r for r in rows}
        self.assertEqual(sorted(by), ["alpha", "beta", "dead", "done", "live"])
        self.assertEqual([(by[r]["STATE"], by[r]["NEWEST STEP"]) for r in sorted(by)],
                         [("unknown", "5"), ("unknown", "12"), ("stale", "1"),
                          ("completed", "-"), ("running", "1")])
        self.assertRegex(by["alpha"]["UPDATED"], r"^(just now|\d+ s ago)$")
        self.assertRegex(by["alpha"]["SIZE"], r"^29\d KiB$")
        rc, out, err = self.ckptrun("ls", "--json", env=env)
        self.assertEqual(rc, 0, err)
        js = {j["run"]: j for j in json.loads(out)}
        for run in js:
            self.assertEqual((js[run]["objects"], js[run]["bytes"]), self.du(run), run)
        self.assertEqual((js["beta"]["newest_step"], js["beta"]["checkpoints"]), (12, 2))
        self.assertIsNone(js["done"]["newest_step"])
        self.assertEqual(js["done"]["state"], "completed")
        newest = max(os.path.getmtime(os.path.join(r, f))
                     for r, _, fs in os.walk(os.path.join(self.store_dir, "alpha")) for f in fs)
        self.assertLess(abs(js["alpha"]["updated_ms"] - newest * 1000), 2)
        # a damaged HEAD: that run says why, with the newest step its
        # manifests show marked '!' (it was '?'); the others are listed
        with open(os.path.join(self.store_dir, "beta", "HEAD"), "r+b") as f:
            f.seek(20)
            f.write(b"XX")
        rc, out, err = self.ckptrun("ls", env=env)
        self.assertEqual(rc, 0, err)
        self.assertEqual({r["RUN"]: r["NEWEST STEP"] for r in table(out)[1]}["beta"], "12!")
        self.assertRegex(err, r"level=warn .*run beta: beta/HEAD is damaged: .*read from its "
                         r"manifests instead .*'!' marks the newest step")
        self.assertEqual(len(self.lines(err)), 1, err)
        rc, out, err = self.ckptrun("ls", "--json", env=env)
        beta = {j["run"]: j for j in json.loads(out)}["beta"]
        self.assertEqual((beta["newest_step"], beta["checkpoints"], beta["head_damaged"]),
                         (12, 2, True))

    def test_items_of_a_checkpoint(self):
        d = self.src("checkpoint-4", 150000)
        with open(os.path.join(d, "config.json"), "w") as f:
            f.write("{}")
        self.save(4, d)
        rc, out, err = self.ckptrun("ls", "--step", "4")
        self.assertEqual(rc, 0, err)
        cols, rows = table(out)
        self.assertEqual(cols, ["NAME", "TYPE", "SIZE", "STORED"])  # no PART: one writer
        self.assertEqual(sorted((r["NAME"], r["TYPE"], r["SIZE"]) for r in rows),
                         [("checkpoint-4/config.json", "file", "2 B"),
                          ("checkpoint-4/m.bin", "file", "146 KiB")])
        rc, out, err = self.ckptrun("ls", "--step", "4", "--json")
        items = {i["name"]: i for i in json.loads(out)}
        self.assertEqual(items["checkpoint-4/m.bin"]["size"], 150000)
        self.assertGreater(items["checkpoint-4/m.bin"]["stored_bytes"], 150000)  # random bytes
        self.assertEqual((items["checkpoint-4/m.bin"]["part"],
                          items["checkpoint-4/m.bin"]["replicated"]), (0, False))
        # no such step, no such run, no run at all
        rc, _, err = self.ckptrun("ls", "--step", "5")
        self.assertEqual(rc, 1)
        self.assertIn("run job has no committed checkpoint at step 5", self.one_error(err))
        rc, _, err = self.ckptrun("ls", "--step", "4", "--run", "jbo")
        self.assertEqual(rc, 1)
        self.assertIn("run jbo not found", self.one_error(err))
        env = {k: v for k, v in self.env.items() if k != "CKPT_RUN"}
        rc, _, err = self.ckptrun("ls", "--step", "4", env=env)
        self.assertEqual(rc, 64)
        self.assertIn("--run", self.one_error(err))

    def test_items_links_and_regions(self):
        ck = os.path.join(self.tmp, "ck")
        script = ("printf abc > $CKPT_DIR/.t && mv $CKPT_DIR/.t $CKPT_DIR/epoch=1-step=3.ckpt"
                  " && ln -s epoch=1-step=3.ckpt $CKPT_DIR/last.ckpt")
        rc, _, err = self.ckptrun("--run", "lit", "--dir", ck, "--", "sh", "-c", script)
        self.assertEqual(rc, 0, err)
        rc, out, err = self.ckptrun("ls", "--run", "lit", "--step", "3")
        self.assertEqual(rc, 0, err)
        rows = {r["NAME"]: r for r in table(out)[1]}
        self.assertEqual((rows["last.ckpt -> epoch=1-step=3.ckpt"]["TYPE"],
                          rows["last.ckpt -> epoch=1-step=3.ckpt"]["STORED"]), ("link", "-"))
        self.assertEqual(rows["epoch=1-step=3.ckpt"]["SIZE"], "3 B")
        rc, out, err = self.ckptrun("ls", "--run", "lit", "--step", "3", "--json")
        link = [i for i in json.loads(out) if i["type"] == "link"]
        self.assertEqual([(i["name"], i["target"]) for i in link],
                         [("last.ckpt", "epoch=1-step=3.ckpt")])
        if os.path.exists(C_TRAINER):
            subprocess.run([C_TRAINER, "--steps", "2", "--every", "1", "--quiet", "--out",
                            os.path.join(self.tmp, "o")], env=dict(self.env, CKPT_RUN="mem"),
                           check=True, capture_output=True, timeout=60)
            rc, out, err = self.ckptrun("ls", "--run", "mem", "--step", "2", "--json")
            self.assertEqual(rc, 0, err)
            self.assertEqual({i["type"] for i in json.loads(out)}, {"region"})

    def test_items_of_a_multi_rank_checkpoint(self):
        # the format-4 fixtures as written by a 2-rank job: HEAD, the commit
        # record, both parts (no chunk is read to list items)
        run = os.path.join(self.store_dir, "ranks")
        with open(os.path.join(FIXTURES, "commit-ranks-v4")) as f:
            rec = json.loads(f.read().rsplit("\n#xxh64:", 1)[0])
        with open(os.path.join(FIXTURES, "head-ranks-v4")) as f:
            head = json.loads(f.read().rsplit("\n#xxh64:", 1)[0])
        os.makedirs(os.path.join(run, "manifests"))
        for src, key in (("head-ranks-v4", "HEAD"),
                         ("commit-ranks-v4", head["retained"][0]["manifest"]),
                         ("manifest-part-r0-v4", rec["parts"][0]),
                         ("manifest-part-r1-v4", rec["parts"][1])):
            shutil.copy(os.path.join(FIXTURES, src), os.path.join(run, key))
        rc, out, err = self.ckptrun("ls", "--run", "ranks", "--step", "40")
        self.assertEqual(rc, 0, err)
        cols, rows = table(out)
        self.assertEqual(cols, ["NAME", "TYPE", "SIZE", "STORED", "PART"])
        self.assertEqual([(r["NAME"], r["TYPE"], r["PART"]) for r in rows],
                         [("weights", "replicated", "all"), ("shard", "region", "0"),
                          ("shard", "region", "1")])
        rc, out, err = self.ckptrun("ls", "--run", "ranks", "--step", "40", "--json")
        self.assertEqual([(i["name"], i["part"], i["replicated"]) for i in json.loads(out)],
                         [("weights", None, True), ("shard", 0, False), ("shard", 1, False)])
        rc, out, err = self.ckptrun("ls", env={k: v for k, v in self.env.items()
                                               if k != "CKPT_RUN"})
        self.assertEqual(table(out)[1][0]["NEWEST STEP"], "40")

    @unittest.skipUnless(HAVE_S3, "object stores not built")
    def test_runs_table_s3rver_two_reads_per_run(self):
        peer = T.NpmPeer("s3rver", self.tmp)
        self.servers.append(peer)
        port = peer.port
        stats = os.path.join(self.tmp, "stats.json")
        proxy = Server(os.path.join(TOOLS, "faultproxy.py"), "--upstream",
                       "127.0.0.1:%d" % port, "--rate", "0", "--stats", stats)
        self.servers.append(proxy)
        env = self.s3_env(proxy.port)
        env.update(AWS_ACCESS_KEY_ID="S3RVER", AWS_SECRET_ACCESS_KEY="S3RVER")
        env.pop("CKPT_RUN")
        src = self.src("checkpoint-9", 40000)

        def ls():
            with open(stats) as f:
                before = json.load(f).get("GET", 0)
            rc, out, err = self.ckptrun("ls", "--json", env=env)
            self.assertEqual(rc, 0, err)
            with open(stats) as f:
                return json.loads(out), json.load(f).get("GET", 0) - before

        for i in range(2):
            rc, _, err = self.ckptrun("save", "--run", "r%d" % i, "--step", str(9 + i), src,
                                      env=env)
            self.assertEqual(rc, 0, err)
        runs, gets2 = ls()
        self.assertEqual([(r["run"], r["newest_step"], r["state"]) for r in runs],
                         [("r0", 9, "unknown"), ("r1", 10, "unknown")])
        self.assertTrue(all(r["bytes"] > 40000 and r["objects"] >= 4 for r in runs), runs)
        self.assertTrue(all(abs(r["updated_ms"] - time.time() * 1000) < 600000 for r in runs))
        for i in range(2, 5):
            rc, _, err = self.ckptrun("save", "--run", "r%d" % i, "--step", "1", src, env=env)
            self.assertEqual(rc, 0, err)
        runs, gets5 = ls()
        self.assertEqual(len(runs), 5)
        # one listing (one page here) whatever the count, then HEAD per run
        # (these runs have no RUN record: `save` writes none)
        self.assertEqual(gets5 - gets2, 3, (gets2, gets5))
        rc, out, err = self.ckptrun("ls", "--run", "r1", "--step", "10", env=env)
        self.assertEqual(rc, 0, err)
        self.assertEqual([(r["NAME"], r["TYPE"]) for r in table(out)[1]],
                         [("checkpoint-9/m.bin", "file")])
        rc, out, err = self.ckptrun("ls", env=env)
        self.assertEqual([r["RUN"] for r in table(out)[1]], ["r0", "r1", "r2", "r3", "r4"])


class DidYouMean(Case):
    """26.10: an unknown option, run name or a relative file:// store says
    what it resembles; bad command lines exit 64, bad environment 78."""

    def test_unknown_options_of_every_command(self):
        for args, hint in ((["ls", "--stroe", self.store], "did you mean --store?"),
                           (["--stroe=" + self.store, "status"], "did you mean --store?"),
                           (["save", "--stpe", "3", "x"], "did you mean --step?"),
                           (["gc", "--keep", "1", "--dryrun"], "did you mean --dry-run?"),
                           (["doctor", "--budjet", "5s"], "did you mean --budget?"),
                           (["--intervl", "5m", "--", "true"], "did you mean --interval?"),
                           (["recover", "--resume-stoped", "--", "true"],
                            "did you mean --resume-stopped?"),
                           (["restore", "--snyc", "d"], "did you mean --sync?"),
                           (["verify", "-store", self.store], "did you mean --store? (long "
                                                              "options take two dashes)"),
                           (["ls", "--setle", "3s"], "did you mean --settle? (an option of "
                                                     "ckptrun run)"),
                           (["ls", "--s", "x"], "'--s' is ambiguous: it could be --store, ")):
            rc, out, err = self.ckptrun(*args)
            self.assertEqual(rc, 64, (args, err))
            self.assertIn(hint, self.one_error(err), args)
            self.nothing_created()
        rc, _, err = self.ckptrun("ls", "--frobnicate")
        self.assertEqual(rc, 64)
        self.assertNotIn("did you mean", self.one_error(err))

    def test_unknown_run_names(self):
        for run in ("llama-7b-ft", "llama-7b-ft2", "other"):
            self.save(1, self.src("c", 100), "--run", run)
        for cmd in (["ls"], ["status"], ["verify"], ["restore", os.path.join(self.tmp, "x")],
                    ["ls", "--step", "1"], ["gc"], ["gc", "--dry-run"]):
            rc, _, err = self.ckptrun(*cmd, "--run", "llama-7b-fy")
            self.assertEqual(rc, 1, (cmd, err))
            self.assertIn("run llama-7b-fy not found in %s; did you mean llama-7b-ft?" %
                          self.store, self.one_error(err), cmd)
            rc, _, err = self.ckptrun(*cmd, "--run", "llama")  # a name cut short
            self.assertIn("did you mean llama-7b-ft or llama-7b-ft2?", self.one_error(err))
            rc, _, err = self.ckptrun(*cmd, "--run", "zzz")  # nothing close: the few there are
            self.assertIn("its runs: llama-7b-ft, llama-7b-ft2 and other", self.one_error(err))
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "x")))
        for i in range(5):
            self.save(1, self.src("c", 100), "--run", "r%d" % i)
        rc, _, err = self.ckptrun("status", "--run", "zzz")  # many: ls lists them
        self.assertNotIn(";", self.one_error(err))

    def test_relative_file_store(self):
        sub = os.path.join(self.work, "sub")
        os.makedirs(sub)
        for url, want in (("file://data/ckpt", "file://%s/data/ckpt" % sub),
                          ("file://./data", "file://%s/data" % sub),
                          ("file://.", "file://%s" % sub),
                          ("file:/abs/ckpt", "file:///abs/ckpt"),
                          ("/abs/ckpt", "file:///abs/ckpt"),
                          ("ckpt", "file://%s/ckpt" % sub)):
            rc, _, err = self.ckptrun("ls", "--store", url, cwd=sub)
            self.assertEqual(rc, 64, (url, err))
            line = self.one_error(err)
            self.assertIn("did you mean %s?" % want, line)
            if url.startswith("file://"):
                self.assertIn("relative path", line)
            rc, _, err = self.ckptrun("ls", env=dict(self.env, CKPT_STORE=url), cwd=sub)
            self.assertEqual(rc, 78, (url, err))
            self.assertIn("did you mean %s?" % want, self.one_error(err))
        rc, _, err = self.ckptrun("ls", "--store", "file://~/ckpt", cwd=sub)
        self.assertIn("did you mean file://%s/ckpt?" % self.home, self.one_error(err))
        self.assertFalse(os.path.exists(os.path.join(sub, "data")))
        self.assertEqual(os.listdir(sub), [])


class Build(unittest.TestCase):
    """17.7, 17.9, 17.10: generated manual page and completions, install,
    pkg-config, and make targets that leave the tree clean."""

    def help_options(self):
        opts = set()
        for cmd in ([], ["run"], ["recover"], ["save"], ["restore"], ["ls"], ["status"],
                    ["verify"], ["gc"], ["doctor"]):
            out = subprocess.run([CKPTRUN] + cmd + ["--help"], capture_output=True,
                                 text=True).stdout
            opts |= set(re.findall(r"^ +(?:-\w, )?(--[a-z][a-z-]*)", out, re.M))
        return opts

    @unittest.skipUnless(shutil.which("groff"), "groff missing (scripts/deps.sh installs it)")
    def test_man_page_and_completions_match_help(self):
        man = os.path.join(BUILD, "share", "man", "man1", "ckptrun.1")
        bash = os.path.join(BUILD, "share", "bash-completion", "completions", "ckptrun")
        zsh = os.path.join(BUILD, "share", "zsh", "site-functions", "_ckptrun")
        for f in (man, bash, zsh):
            self.assertTrue(os.path.exists(f), f)
        opts = self.help_options()
        self.assertGreater(len(opts), 30)
        r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", man], capture_output=True,
                           text=True)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        r = subprocess.run(["groff", "-man", "-Tascii", man], capture_output=True, text=True)
        rendered = re.sub(r".\x08", "", r.stdout)
        for o in opts:
            self.assertIn(o, rendered, "man page lacks " + o)
            self.assertIn(o, open(bash).read(), "bash completion lacks " + o)
            self.assertIn("'" + o, open(zsh).read(), "zsh completion lacks " + o)
        # the generator is the built binary: same text as now
        for kind, f in (("man", man), ("bash", bash), ("zsh", zsh)):
            out = subprocess.run([CKPTRUN, "__generate", kind], capture_output=True).stdout
            self.assertEqual(out, open(f, "rb").read(), kind)

    def complete(self, line):
        bash = os.path.join(BUILD, "share", "bash-completion", "completions", "ckptrun")
        words = line.split(" ")
        script = ('source "%s"; COMP_WORDS=(%s); COMP_CWORD=%d; _ckptrun; '
                  'printf "%%s\\n" "${COMPREPLY[@]}"' %
                  (bash, " ".join("'%s'" % w for w in words), len(words) - 1))
        return subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                              cwd=REPO).stdout.split()

    def test_bash_completion_works(self):
        self.assertIn("status", self.complete("ckptrun st"))
        self.assertIn("save", self.complete("ckptrun s"))
        self.assertIn("--force", self.complete("ckptrun save --f"))
        self.assertNotIn("--force", self.complete("ckptrun ls --f"))
        self.assertEqual(sorted(self.complete("ckptrun --notice a")), ["aliyun", "auto", "aws", "azure"])
        self.assertIn("zstd:19", self.complete("ckptrun save --codec z"))
        self.assertIn("python3", self.complete("ckptrun -- pyth"))

    @unittest.skipUnless(shutil.which("zsh"), "zsh not installed: its completion is only "
                         "checked for the options above")
    def test_zsh_completion_parses(self):
        zsh = os.path.join(BUILD, "share", "zsh", "site-functions", "_ckptrun")
        self.assertEqual(subprocess.run(["zsh", "-n", zsh]).returncode, 0)

    def test_install_and_pkg_config(self):
        prefix = tempfile.mkdtemp(prefix="ckpt-prefix-")
        try:
            subprocess.run(["cmake", "--install", BUILD, "--prefix", prefix], check=True,
                           capture_output=True)
            for f in ("share/man/man1/ckptrun.1", "share/bash-completion/completions/ckptrun",
                      "share/zsh/site-functions/_ckptrun", "bin/ckptrun", "include/ckpt.h",
                      "include/ckpt_mpi.h"):
                self.assertTrue(os.path.exists(os.path.join(prefix, f)), f)
            pcdir = [os.path.join(r, "") for r, d, fs in os.walk(prefix) if "ckpt.pc" in fs][0]
            env = dict(os.environ, PKG_CONFIG_PATH=pcdir)
            cflags = subprocess.run(["pkg-config", "--cflags", "ckpt"], env=env,
                                    capture_output=True, text=True, check=True).stdout.split()
            self.assertEqual(len(cflags), 1, cflags)  # ckpt's own include dir, nothing else
            self.assertTrue(os.path.samefile(cflags[0][2:], os.path.join(prefix, "include")))
            # libckpt.a with the libraries --static names
            libs = subprocess.run(["pkg-config", "--static", "--libs-only-l", "ckpt"], env=env,
                                  capture_output=True, text=True, check=True).stdout.split()
            libdir = os.path.dirname(os.path.dirname(pcdir))
            main = os.path.join(prefix, "m.c")
            with open(main, "w") as f:
                f.write('#include <ckpt.h>\n#include <stdio.h>\n'
                        'int main(void){puts(ckpt_version_string());return 0;}\n')
            exe = os.path.join(prefix, "m")
            r = subprocess.run(["cc", "-o", exe, main] + cflags +
                               [os.path.join(libdir, "libckpt.a")] +
                               [l for l in libs if l != "-lckpt"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertRegex(subprocess.run([exe], capture_output=True, text=True).stdout,
                             r"^\d+\.\d+\.\d+")
            subprocess.run(["make", "-C", REPO, "install", "BUILD=" + BUILD,
                            "PREFIX=" + os.path.join(prefix, "via-make")], check=True,
                           capture_output=True)
            self.assertTrue(os.path.exists(os.path.join(prefix, "via-make", "share", "man",
                                                        "man1", "ckptrun.1")))
        finally:
            shutil.rmtree(prefix, ignore_errors=True)

    def deps(self, *sets):
        return subprocess.run(["bash", os.path.join(REPO, "scripts", "deps.sh")] +
                              list(sets) + ["--list"], capture_output=True, text=True,
                              check=True).stdout.split()

    def test_package_sets(self):
        # 26.11: `make demo` asks for the demo set only, which has none of
        # the tests' heavy packages; `make test` for the test set, `make
        # deps` for all of them
        heavy = {"python3-torch", "slurm-wlm", "munge", "openmpi-bin", "libopenmpi-dev",
                 "nodejs", "npm", "libcmocka-dev"}
        demo, test, full = self.deps("--demo"), self.deps("--test"), self.deps("--all")
        self.assertFalse(heavy & set(demo), demo)
        self.assertTrue({"cmake", "pkg-config", "libzstd-dev", "libcurl4-openssl-dev"} <=
                        set(demo), demo)
        self.assertTrue(heavy | set(demo) <= set(test), test)
        self.assertTrue(set(test) | {"awscli", "time", "clang"} <= set(full), full)
        self.assertEqual(self.deps(), test)  # the default
        for target, want in (("demo", "scripts/deps.sh --demo"), ("test", "scripts/deps.sh --test"),
                             ("deps", "scripts/deps.sh --all")):
            r = subprocess.run(["make", "-n", target], cwd=REPO, capture_output=True, text=True)
            self.assertIn(want, r.stdout, target)
            if target == "demo":
                self.assertNotIn("--test", r.stdout)
        r = subprocess.run(["bash", os.path.join(REPO, "scripts", "deps.sh"), "--tset"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 64, r.stderr)

    @unittest.skipUnless(shutil.which("dpkg"), "needs dpkg: the demo set's pkg-config files")
    def test_demo_set_configures_and_install_builds_only_what_it_installs(self):
        # The demo's build sees only the demo set's libraries (pkg-config
        # limited to their .pc files, MPI and CUDA not looked for: neither
        # is in the set); then `make install` in that fresh build directory
        # builds what it installs and nothing else.
        tmp = tempfile.mkdtemp(prefix="ckpt-demo-")
        try:
            pc = os.path.join(tmp, "pc")
            os.makedirs(pc)
            for p in self.deps("--demo"):
                files = subprocess.run(["dpkg", "-L", p], capture_output=True,
                                       text=True).stdout.split()
                for f in files:
                    if f.endswith(".pc") and os.path.exists(f):
                        dst = os.path.join(pc, os.path.basename(f))
                        if not os.path.exists(dst):
                            os.symlink(f, dst)
            self.assertTrue(os.path.exists(os.path.join(pc, "libzstd.pc")), os.listdir(pc))
            build, prefix = os.path.join(tmp, "b"), os.path.join(tmp, "prefix")
            env = dict(os.environ, PKG_CONFIG_LIBDIR=pc)
            r = subprocess.run(["make", "-C", REPO, "install", "BUILD=" + build, "PREFIX=" + prefix,
                                "CMAKE_FLAGS=-DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON "
                                "-DCKPT_WITH_CUDA=OFF"], env=env, capture_output=True,
                               text=True, timeout=900)
            self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
            log = open(os.path.join(build, "configure.log")).read()
            self.assertIn("cmocka (libcmocka-dev) missing: tests not built", log)
            self.assertEqual(sorted(os.listdir(os.path.join(build, "bin"))), ["ckptrun"])
            self.assertFalse(os.path.exists(os.path.join(build, "tests")))
            for f in ("bin/ckptrun", "include/ckpt.h", "share/man/man1/ckptrun.1"):
                self.assertTrue(os.path.exists(os.path.join(prefix, f)), f)
            self.assertTrue([f for _, _, fs in os.walk(prefix) for f in fs
                             if f.startswith("libckpt_preload")])
            # the demo's other program builds from the same set
            r = subprocess.run(["cmake", "--build", build, "--target", "c_trainer"], env=env,
                               capture_output=True, text=True, timeout=600)
            self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
            # and the Python package (make demo builds it): a user's own
            # `import ckpt` trainer runs under that ckptrun with no setup
            r = subprocess.run(["cmake", "--build", build, "--target", "ckpt_python"], env=env,
                               capture_output=True, text=True, timeout=600)
            self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
            if os.path.exists("/usr/bin/python3"):
                env2 = dict(os.environ, HOME=tmp)
                env2.pop("PYTHONPATH", None)
                r = subprocess.run([os.path.join(build, "bin", "ckptrun"), "--store",
                                    "file://" + os.path.join(tmp, "store"), "--run", "py", "--",
                                    "/usr/bin/python3", "-c",
                                    "import ckpt, os; print('ckpt from', os.path.dirname("
                                    "os.path.dirname(ckpt.__file__)))"],
                                   cwd=tmp, env=env2, capture_output=True, text=True, timeout=120)
                self.assertIn("ckpt from " + os.path.realpath(os.path.join(build, "python")),
                              r.stdout, r.stdout[-3000:] + r.stderr[-3000:])
            # ctest there refuses to pass with no tests (make test's ctest)
            r = subprocess.run(["ctest", "--no-tests=error"], cwd=build, capture_output=True)
            self.assertNotEqual(r.returncode, 0)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    @unittest.skipUnless(os.path.isdir(os.path.join(REPO, ".git")) or
                         os.path.isfile(os.path.join(REPO, ".git")), "not a git checkout")
    def test_make_leaves_the_tree_clean_and_demo_builds_what_it_runs(self):
        def status():
            return subprocess.run(["git", "-C", REPO, "status", "--porcelain",
                                   "--untracked-files=all"], capture_output=True,
                                  text=True).stdout
        before = status()
        r = subprocess.run(["make", "-n", "demo"], cwd=REPO, capture_output=True, text=True)
        self.assertIn("--target ckptrun c_trainer ckpt_python", r.stdout)
        build = "build-clitest-%d" % os.getpid()
        try:
            r = subprocess.run(["make", "configure", "BUILD=" + build], cwd=REPO,
                               capture_output=True, text=True, timeout=600)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertTrue(os.path.exists(os.path.join(REPO, build, "configure.log")))
            self.assertEqual(status(), before, "make configure changed the tree")
        finally:
            shutil.rmtree(os.path.join(REPO, build), ignore_errors=True)
        tracked = subprocess.run(["git", "-C", REPO, "ls-files"], capture_output=True,
                                 text=True).stdout.split()
        self.assertFalse([f for f in tracked if f.endswith("configure.log")], tracked)


if __name__ == "__main__":
    if "--build" in sys.argv:
        sys.argv.remove("--build")
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(Build)
    else:
        names = [a for a in sys.argv[1:] if not a.startswith("-")]
        if names:
            suite = unittest.defaultTestLoader.loadTestsFromNames(names, sys.modules[__name__])
        else:
            suite = unittest.TestSuite(
                unittest.defaultTestLoader.loadTestsFromTestCase(c)
                for c in (Subcommands, Progress, Json, Consistent, Errors, Status, Rules,
                          Stores, Listing, DidYouMean))
    verbosity = 2 if "-v" in sys.argv else 1
    sys.exit(0 if unittest.TextTestRunner(verbosity=verbosity).run(suite).wasSuccessful()
             else 1)
