#!/usr/bin/python3
"""No silent loss in `ckptrun run`/`recover` (docs/ckptrun.md, "What a run
tells you"), driving the real ckptrun (stdlib only):

  FailingStore   a store that stops accepting checkpoints: a real 20 MiB
                 tmpfs (needs mount: skipped, saying why, without it) and a
                 fault seam (the run's chunks/ is a plain file); the last
                 attempt; exit 74 and state uncommitted; status; the next
                 recover commits what was left before anything else;
                 `ckptrun -- true` and a child writing nothing exit 0
  Unprotected    a request that reaches nobody, a CKPT_DIR that stays
                 empty, a final checkpoint that did not commit says why,
                 doctor's advice on --interval
  LastLine       every run ends with one line: outcome, step, the command
                 that resumes it (run as printed: it resumes); --log-json
  Progress       the commit in flight and a stop's final commit drawn on a
                 pseudo-terminal (script(1)), nothing on a pipe, --log-json
                 unchanged (mock_s3.py behind faultproxy.py at 8 MB/s)

Run:  /usr/bin/python3 tests/integration/test_sup_report.py [-v] [TestName...]
Binaries from $CKPT_BIN (ctest sets it), else ./build/bin. Loopback only.
"""
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ckpt_testlib as T  # noqa: E402  (Proc, Server, tty_run, the tools)
import test_ckptrun as tc  # noqa: E402  (Case: one store, HOME, CKPT_DIR per test)

CKPTRUN, PY, TRAINER = T.CKPTRUN, T.PY, tc.TRAINER
HAVE_S3 = T.HAVE_S3

# A trainer that renames N checkpoints of SIZE random bytes into CKPT_DIR,
# GAP seconds apart, then exits with EXIT.
WRITER = r'''
import os, sys, time
n, size, gap, code = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
d = os.environ["CKPT_DIR"]
for i in range(1, n + 1):
    tmp = os.path.join(d, "tmp-%d" % i)
    os.makedirs(tmp)
    with open(os.path.join(tmp, "model.bin"), "wb") as f:
        f.write(os.urandom(size))
    os.rename(tmp, os.path.join(d, "checkpoint-%d" % (i * 10)))
    time.sleep(gap)
sys.exit(code)
'''

# Writes checkpoint-10, waits until the run record holds a failed commit,
# then (with UNBLOCK=1) makes the store usable again and exits 0: only a
# last attempt at the end can commit it.
WAITER = r'''
import glob, os, sys, time
d, store = os.environ["CKPT_DIR"], os.environ["STORE_DIR"]
os.makedirs(os.path.join(d, "tmp"))
with open(os.path.join(d, "tmp", "model.bin"), "wb") as f:
    f.write(os.urandom(100000))
os.rename(os.path.join(d, "tmp"), os.path.join(d, "checkpoint-10"))
end = time.monotonic() + 20
while time.monotonic() < end:
    if any("commit-failed" in open(p).read() for p in glob.glob(store + "/job/events/*.json")):
        break
    time.sleep(0.05)
else:
    sys.exit("no commit-failed event in the record")
if os.environ.get("UNBLOCK") == "1":
    os.remove(os.path.join(store, "job", "chunks"))
'''


class Case(tc.Case):
    def script(self, name, text):
        p = os.path.join(self.tmp, name)
        with open(p, "w") as f:
            f.write(text)
        return p

    def writer(self, n, size, gap, code=0):
        return [PY, self.script("writer.py", WRITER), str(n), str(size), str(gap), str(code)]

    def last_line(self, err, command="run"):
        lines = [l for l in err.splitlines() if l.strip()]
        self.assertRegex(lines[-1], r"^ckptrun: %s: " % command, err)
        return lines[-1]

    def resume_words(self, line):
        """The resume command of a last line, as words (shlex reads it as sh would)."""
        m = re.search(r"\. Resume: (.*)$", line)
        self.assertIsNotNone(m, line)
        words = shlex.split(m.group(1))
        self.assertEqual(words[0], "cd", line)
        self.assertEqual(words[2], "&&", line)
        return m.group(1), words


class FailingStore(Case):
    def mount_tmpfs(self, path, size):
        os.makedirs(path)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s,mode=0700" % size, "tmpfs",
                            path], capture_output=True, text=True)
        if r.returncode != 0:
            self.skipTest("cannot mount a tmpfs store here (%s): needs root or CAP_SYS_ADMIN"
                          % (r.stderr.strip() or "mount failed"))
        self.addCleanup(subprocess.run, ["umount", "-l", path], capture_output=True)

    def test_tmpfs_store_fills_up_exit_74_then_recover_commits_it(self):
        st = os.path.join(self.tmp, "tmpfs")
        self.mount_tmpfs(st, "20m")
        self.env["CKPT_STORE"] = self.store = "file://" + st
        # 10 MiB checkpoints: the first fits, then the store is full.
        rc, _, err = self.ckptrun("--", *self.writer(6, 10 << 20, 0.4))
        self.assertEqual(rc, 74, err)
        self.assertRegex(err, r"commit-failed level=warn entry=checkpoint-20 ")
        # the 3rd failure in a row is an error, and says what to do
        self.assertRegex(err, r"store level=error msg=\"3 commits in a row failed .*No space left"
                              r".*the store holds nothing newer than step 10.*ckptrun doctor")
        self.assertRegex(err, r"commit-failed level=error entry=checkpoint-40 .* in_row=3")
        self.assertRegex(err, r"msg=\"the child exited 0; step 60 \(checkpoint-60\) is not in the "
                              r"store .*: a last attempt\"")
        self.assertIn("exit state=uncommitted code=74", err)
        self.assertNotIn("state=completed", err)
        line = self.last_line(err)
        self.assertRegex(line, r"job ended by itself \(exit 0\) but step 60 is not in the store "
                               r"\(step 60: no space left.*exit 74: newest committed step 10\. ")
        js = self.status()
        self.assertEqual(js["state"], "uncommitted")
        self.assertGreaterEqual(js["commit_failures"], 6)
        self.assertEqual(js["last_step"], 10)
        self.assertEqual(js["last_error"]["step"], 60)
        self.assertIn("No space left", js["last_error"]["detail"])
        self.assertEqual(js["uncommitted"]["step"], 60)
        self.assertEqual(js["uncommitted"]["dir"], self.env["CKPT_DIR"])
        self.assertGreater(js["lost_ms"], 0)
        rc, out, err2 = self.ckptrun("status")
        self.assertEqual(rc, 0, err2)
        self.assertRegex(out, r"failures     0 runs, \d+ commits \(the last .*, step 60: no space")
        self.assertRegex(out, r"uncommitted  step 60 is complete on \S+ in %s but not in the "
                              r"store \(newest committed: step 10\)" % re.escape(self.env["CKPT_DIR"]))
        # Room again: recover commits checkpoint-60 first and the trainer
        # resumes from it (no older checkpoint restored over it).
        subprocess.run(["mount", "-o", "remount,size=80m", st], check=True)
        probe = self.script("probe.sh", 'echo "resumed=$CKPT_RESUMED step=$CKPT_STEP" >&2\n')
        rc, _, err = self.ckptrun("recover", "--", "sh", probe)
        self.assertEqual(rc, 0, err)
        self.assertIn("leftover msg=\"step 60 was left uncommitted by the last session", err)
        self.assertRegex(err, r"commit step=60 files=1 .*source=leftover entry=checkpoint-60")
        self.assertIn("resumed=1 step=60", err)
        self.assertEqual(self.steps()[0], 60)
        self.assertEqual(self.status()["state"], "completed")

    def block_store(self):
        """The fault seam: the run's chunks/ is a plain file, so every chunk
        write fails (ENOTDIR), root or not; removing it heals the store."""
        d = os.path.join(self.tmp, "store", "job")
        os.makedirs(d)
        open(os.path.join(d, "chunks"), "w").close()
        self.env["STORE_DIR"] = os.path.join(self.tmp, "store")

    def test_last_attempt_commits_what_failed_before(self):
        self.block_store()
        self.env["UNBLOCK"] = "1"
        rc, _, err = self.ckptrun("--", PY, self.script("waiter.py", WAITER))
        self.assertEqual(rc, 0, err)
        self.assertRegex(err, r"commit-failed level=warn entry=checkpoint-10 .*Not a directory")
        self.assertIn("a last attempt", err)
        self.assertRegex(err, r"commit step=10 .*source=watch")
        self.assertIn("exit state=completed code=0", err)
        self.assertEqual(self.steps(), [10])
        js = self.status()
        self.assertEqual((js["state"], js["commit_failures"]), ("completed", 1))
        self.assertNotIn("uncommitted", js)

    def test_store_refusing_everything_is_74_and_recover_waits(self):
        self.block_store()
        rc, _, err = self.ckptrun("--", PY, self.script("waiter.py", WAITER))
        self.assertEqual(rc, 74, err)
        self.assertIn("exit state=uncommitted code=74", err)
        self.assertRegex(self.last_line(err), r"exit 74: nothing committed\. Resume: ")
        js = self.status()
        self.assertEqual((js["state"], js["last_step"], js["uncommitted"]["step"]),
                         ("uncommitted", None, 10))
        # still refused: recover starts nothing and leaves the entry alone
        marker = os.path.join(self.tmp, "ran")
        rc, _, err = self.ckptrun("recover", "--", "touch", marker)
        self.assertEqual(rc, 69, err)
        self.assertRegex(err, r"error: cannot commit step 10 that the last session left in .*"
                              r"not starting the command")
        self.assertFalse(os.path.exists(marker))
        self.assertTrue(os.path.isdir(os.path.join(self.env["CKPT_DIR"], "checkpoint-10")))
        # on another machine the entries are gone: the newest committed step
        os.remove(os.path.join(self.tmp, "store", "job", "chunks"))
        self.fresh("b")
        rc, _, err = self.ckptrun("recover", "--", "touch", marker)
        self.assertEqual(rc, 0, err)
        self.assertRegex(err, r"leftover level=warn msg=\"step 10 was left uncommitted by the last "
                              r"session, but they are not in the directory")
        self.assertTrue(os.path.exists(marker))

    def test_true_and_a_child_writing_nothing_exit_0_with_a_warning(self):
        rc, _, err = self.ckptrun("--", "true")
        self.assertEqual(rc, 0, err)
        self.assertIn("exit level=warn msg=\"the child wrote no checkpoint", err)
        self.assertRegex(self.last_line(err), r"job completed, exit 0: nothing committed; the "
                                              r"trainer wrote no checkpoint into ")
        self.assertNotIn("Resume:", err)
        self.assertEqual(self.status()["state"], "completed")
        # a trainer writing its files elsewhere
        rc, _, err = self.ckptrun("--", "sh", "-c", "mkdir -p out && echo x > out/model.pt")
        self.assertEqual(rc, 0, err)
        self.assertIn("the child wrote no checkpoint", err)


# A trainer that writes nothing into CKPT_DIR (with ARG, into ARG/ every
# 0.25 s) until the file GO exists, then exits 0: it runs as long as the
# test needs to see what ckptrun says of it.
UNTIL = r'''
import os, sys, time
go, out = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None
print("trainer up", file=sys.stderr, flush=True)
end = time.monotonic() + 30
while not os.path.exists(go) and time.monotonic() < end:
    if out:
        os.makedirs(out, exist_ok=True)
        open(os.path.join(out, "model.pt"), "wb").write(os.urandom(1000))
    time.sleep(0.25 if out else 0.02)
'''


class Unprotected(Case):
    def until(self, *out):
        """The UNTIL trainer's command, and its GO file."""
        go = os.path.join(self.tmp, "go")
        return [PY, self.script("until.py", UNTIL), go] + list(out), go

    def test_interval_with_no_way_to_reach_the_trainer_warns_once(self):
        # Watched until two ticks reached nobody (-v shows each request; the
        # ticks' timing and the count are test_stop's).
        cmd, go = self.until()
        p = self.start(["-v", "--interval", "300ms", "--"] + cmd)
        p.wait_count(r" request reason=periodic via=none", 2)
        open(go, "w").close()
        self.assertEqual(p.wait(), 0, p.text())
        text = p.text()
        warn = p.wait_line(r"request level=warn msg=\"the periodic checkpoint request reached "
                           r"nobody: no --signal").string
        self.assertEqual(p.count(r"reached nobody"), 1, text)
        self.assertIn("--signal USR1 for a trainer that saves on it", warn)
        # not at start: after the first tick, once the trainer ran
        self.assertLess(text.index("trainer up"), text.index("reached nobody"), text)
        self.assertRegex(self.last_line(text), r"; no checkpoint request could reach the trainer "
                                               r"\([2-9] tried\)")
        # a trainer that saves on --signal: no such warning
        p = self.start(["--signal", "USR1", "--interval", "300ms", "--settle", "5s", "--"] +
                       self.trainer("--steps", "100000", "--every", "100000", "--mode", "signal",
                                    "--out", os.path.join(self.work, "out"), "--sleep-ms", "10"))
        p.wait_line(r" request reason=periodic via=SIGUSR1")
        p.p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(), 75, p.text())
        self.assertNotIn("reached nobody", p.text())
        self.assertNotIn("no checkpoint request could reach", p.text())

    def test_stop_reaching_nobody_says_why_nothing_committed(self):
        p = self.start(["--", PY, "-c", "import time, sys\nprint('up', file=sys.stderr, "
                        "flush=True)\ntime.sleep(60)"])
        p.wait_line(r"^up$")
        p.p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(), 74, p.text())
        self.assertIn("the stop checkpoint request reached nobody", p.text())
        final = p.wait_line(r" final level=warn committed=false").string
        self.assertRegex(final, r"level=warn .*why=\"no request could reach the trainer \(no "
                                r"--signal, no helper, `import ckpt` or libckpt connection\) and "
                                r"nothing complete is in CKPT_DIR; the run has no committed "
                                r"checkpoint\"")
        self.assertRegex(self.last_line(p.text()), r"job stopped \(SIGTERM\), final checkpoint "
                                                   r"not committed: no request could reach")

    def test_ckpt_dir_without_an_entry_warns_once(self):
        # the trainer writes into out/ while CKPT_DIR is ck/
        # (said once, and when: test_stop; here, what it says)
        env = dict(self.env, CKPT_WARN_NO_CHECKPOINT="1s")
        cmd, go = self.until(os.path.join(self.work, "out"))
        p = T.Proc(["--"] + cmd, env, self.work)
        line = p.wait_line(r"watch level=warn msg=\"no checkpoint for 1\.0s: nothing complete "
                           r"appeared in %s since the child started" %
                           re.escape(self.env["CKPT_DIR"])).string
        open(go, "w").close()
        self.assertEqual(p.wait(), 0, p.text())
        self.assertIn("point --dir (CKPT_DIR) there", line)
        self.assertEqual(p.count(r"no checkpoint for"), 1, p.text())
        # the same limit with a trainer saving every 0.3 s for longer: nothing said
        rc, _, err = self.ckptrun("--", *self.writer(5, 1000, 0.3), env=env)
        self.assertEqual(rc, 0, err)
        self.assertNotIn("no checkpoint for", err)
        self.assertNotIn("no new checkpoint for", err)
        # a bad value is configuration
        rc, _, err = self.ckptrun("--", "true", env=dict(self.env, CKPT_WARN_NO_CHECKPOINT="x"))
        self.assertEqual(rc, 78, err)
        self.assertIn("CKPT_WARN_NO_CHECKPOINT", err)

    def test_doctor_advises_interval_with_a_way_to_reach_the_trainer(self):
        rc, out, err = self.ckptrun("doctor", "--json", "--state-bytes", "1MiB", "--budget", "10s",
                                    timeout=60)
        j = json.loads(out)
        win = {c["name"]: c for c in j["checks"]}["window"]
        self.assertEqual(win["status"], "warn", out)
        self.assertIn("--interval", win["advice"])
        self.assertIn("a way to ask the trainer (--signal", win["advice"])
        self.assertIn("an unmodified trainer ignores requests", win["advice"])


class LastLine(Case):
    def test_outcomes_and_the_resume_command(self):
        out = os.path.join(self.work, "out")
        args = ("--steps", "400", "--every", "20", "--out", out, "--sleep-ms", "10")
        ref = self.reference(*args)
        # stopped mid-run: 75, and the line's command resumes it (as cron
        # would run it: elsewhere, with none of our environment)
        p = self.start(["--interval", "90s", "--keep", "2", "--settle", "300ms", "--"] +
                       self.trainer(*args))
        p.wait_line(r" commit step=\d+ ")
        p.p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(), 75, p.text())
        line = self.last_line(p.text())
        # (an unmodified trainer: the stop's request reached nobody, and it says so)
        self.assertRegex(line, r"^ckptrun: run: job stopped \(SIGTERM\), final checkpoint "
                               r"committed, exit 75: newest committed step \d+; no checkpoint "
                               r"request could reach the trainer \(1 tried\)\. Resume: cd ")
        cmd, words = self.resume_words(line)
        self.assertEqual(words[1], self.work)
        self.assertEqual(words[3:10], [os.path.realpath(CKPTRUN), "recover", "--store",
                                       self.store, "--run", "job", "--dir"])
        self.assertEqual(words[10], self.env["CKPT_DIR"])
        for opt in (["--interval", "90s"], ["--keep", "2"], ["--settle", "300ms"]):
            self.assertIn(" ".join(opt), " ".join(words), line)
        self.assertEqual(words[words.index("--") + 1:], self.trainer(*args))
        cron_env = {"PATH": os.environ["PATH"], "HOME": os.path.join(self.work, "home"),
                    "CKPT_NOTICE": "none"}
        r = subprocess.run(["sh", "-c", cmd], env=cron_env, cwd="/", capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stderr, r"trainer: start at step [1-9]\d* resumed=1")
        with open(out, "rb") as f:
            self.assertEqual(f.read(), ref)
        self.assertRegex(self.last_line(r.stderr, "recover"), r"job completed, exit 0: newest "
                                                              r"committed step 400$")

    def test_words_are_quoted_and_failed_and_user_stop_lines(self):
        odd = ["a b", "it's", "$HOME", "*", ""]
        rc, _, err = self.ckptrun("--", "sh", "-c", "exit 3", *odd)
        self.assertEqual(rc, 3, err)
        line = self.last_line(err)
        self.assertRegex(line, r"job failed, exit 3: nothing committed; the trainer wrote no "
                               r"checkpoint into .*\. Resume: ")
        _, words = self.resume_words(line)
        self.assertEqual(words[words.index("--") + 1:], ["sh", "-c", "exit 3"] + odd)
        self.assertNotIn("--resume-stopped", words)
        # the user's stop: recover would leave it alone without --resume-stopped
        p = self.start(["--", PY, "-c", "import time, sys\ntry:\n print('up', file=sys.stderr,"
                        " flush=True)\n time.sleep(30)\nexcept KeyboardInterrupt:\n sys.exit(1)"])
        p.wait_line(r"^up$")
        p.p.send_signal(signal.SIGINT)
        self.assertEqual(p.wait(), 130, p.text())
        line = self.last_line(p.text())
        # a trainer that never takes part: the stop's final checkpoint is
        # said not committed, and why, as after a preemption
        self.assertRegex(line, r"job stopped by its user \(SIGINT\), final checkpoint not "
                               r"committed: no request could reach the trainer .*, exit 130: "
                               r"nothing committed")
        self.assertIn("--resume-stopped", self.resume_words(line)[1])
        # the same stop with --log-json: the result object carries the why
        p = self.start(["--log-json", "--", PY, "-c", "import time, sys\ntry:\n print('up', "
                        "file=sys.stderr, flush=True)\n time.sleep(30)\nexcept "
                        "KeyboardInterrupt:\n sys.exit(1)"])
        p.wait_line(r"^up$")
        p.p.send_signal(signal.SIGINT)
        self.assertEqual(p.wait(), 130, p.text())
        r = json.loads(p.text().splitlines()[-1])
        self.assertEqual((r["event"], r["state"], r["code"]), ("result", "stopped", 130), r)
        self.assertRegex(r["why"], r"^no request could reach the trainer")
        self.assertIn(r["why"], r["msg"])

    def test_log_json_has_one_result_event(self):
        rc, _, err = self.ckptrun("--log-json", "--", "sh", "-c", "exit 5")
        self.assertEqual(rc, 5, err)
        events = [json.loads(l) for l in err.splitlines() if l.strip()]
        results = [e for e in events if e["event"] == "result"]
        self.assertEqual(len(results), 1, err)
        r = results[0]
        self.assertIs(events[-1], r)
        self.assertEqual((r["command"], r["run"], r["state"], r["code"], r["step"]),
                         ("run", "job", "failed", 5, None))
        self.assertTrue(r["no_checkpoint"])
        self.assertIn(" recover --store ", r["resume"])
        self.assertIn(r["resume"], r["msg"])
        # completed: no resume command
        rc, _, err = self.ckptrun("--log-json", "--", *self.writer(1, 1000, 0))
        self.assertEqual(rc, 0, err)
        r = json.loads(err.splitlines()[-1])
        self.assertEqual((r["event"], r["state"], r["step"]), ("result", "completed", 10))
        self.assertNotIn("resume", r)
        self.assertNotIn("no_checkpoint", r)


# A trainer for the progress tests: renames checkpoint-1 (SIZE random
# bytes), sleeps SLEEP1 s, renames checkpoint-2, then either exits (STOP=0)
# or sends SIGTERM to its ckptrun (the keeper's parent) and waits to be
# stopped: the final checkpoint is the commit in flight.
SLOW = r'''
import os, signal, sys, time
size, sleep1, stop = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3] == "1"
d = os.environ["CKPT_DIR"]
def put(name):
    os.makedirs(os.path.join(d, "tmp"))
    with open(os.path.join(d, "tmp", "m.bin"), "wb") as f:
        f.write(os.urandom(size))
    os.rename(os.path.join(d, "tmp"), os.path.join(d, name))
put("checkpoint-1")
time.sleep(sleep1)
put("checkpoint-2")
if stop:
    keeper = os.getppid()
    with open("/proc/%d/stat" % keeper) as f:
        ckptrun = int(f.read().rsplit(")", 1)[1].split()[1])
    os.kill(ckptrun, signal.SIGTERM)
    time.sleep(60)
'''


@unittest.skipUnless(HAVE_S3 and shutil.which("script"), "needs s3:// and script(1)")
class Progress(Case):
    def setUp(self):
        super().setUp()
        s3 = self.server(T.MockS3())
        # a link of 3 MB/s: an 8 MiB commit lasts about three seconds
        proxy = self.server(T.Server(os.path.join(T.TOOLS, "faultproxy.py"), "--upstream",
                                     "127.0.0.1:%d" % s3.port, "--rate", "0",
                                     "--upload-bps", "3000000"))
        self.s3 = s3.env(proxy.port)
        self.on_s3("p")
        self.slow = self.script("slow.py", SLOW)

    def on_s3(self, prefix):
        self.env.update(self.s3, CKPT_STORE="s3://ckpt-test/" + prefix)
        self.store = self.env["CKPT_STORE"]

    def test_commit_and_final_commit_drawn_on_a_terminal_only(self):
        cmd = [CKPTRUN, "--codec", "none", "--grace", "40s", "--", PY, self.slow,
               str(8 << 20), "4", "1"]
        rc, frames = T.tty_run(cmd, self.env, self.work)
        text = b"".join(d for _, d in frames).decode(errors="replace")
        self.assertEqual(rc, 75, text)
        running = [t for t, d in frames if re.search(rb"commit step 1  ", d)]
        final = [t for t, d in frames if re.search(rb"commit step 2  [^\r\n]*  [\d.]+s left", d)]
        self.assertGreaterEqual(len(running), 3, text)
        self.assertGreaterEqual(len(final), 3, text)
        self.assertLess(max(b - a for a, b in zip(running, running[1:])), 0.6, running)
        # the bytes are read at once; the upload is what lasts, and the line
        # follows it: the share sent moves, with the link's rate and an ETA
        shares = [int(m) for m in re.findall(r"commit step 1 +(\d+)%  [\d.]+ MiB / 8\.00 MiB  "
                                            r"[\d.]+ [KM]iB/s  ETA ", text)]
        self.assertGreaterEqual(len(set(shares)), 3, text)
        self.assertEqual(shares, sorted(shares), text)
        self.assertTrue(any(s < 90 for s in shares), text)
        rates = [float(r) for r in re.findall(r"commit step 1 [^\r]*  ([\d.]+) MiB/s  ETA", text)]
        self.assertTrue(any(1.5 < r < 5 for r in rates), text)  # the 3 MB/s link, roughly
        # then the manifest and HEAD
        self.assertRegex(text, r"commit step 1  8\.00 MiB sent, committing, [1-4]\.\ds in\r")
        self.assertNotRegex(text, r"commit step 1 [^\n]* left")
        self.assertRegex(text, r"commit step 2  [^\n]*  3\d\.\ds left\r")
        self.assertIn("\r", text)
        # the line is erased before the log goes on, and the run's last line is whole
        self.assertRegex(text, r"\r\s*\rckptrun: \S+ commit step=1 ")
        self.assertRegex(text, r"ckptrun: run: job stopped \(SIGTERM\), final checkpoint "
                               r"committed, exit 75: newest committed step 2; [^\r\n]*\. "
                               r"Resume: [^\r\n]* -- %s %s \d+ 4 1\r\n$" % (PY, self.slow))
        # not on a pipe: no status line at all
        self.fresh("pipe")
        self.on_s3("q")
        rc, _, err = self.ckptrun("--codec", "none", "--", PY, self.slow, str(8 << 20), "0.5",
                                  "0", timeout=120)
        self.assertEqual(rc, 0, err)
        self.assertNotIn("\r", err)
        self.assertNotRegex(err, r"commit step \d+  ")
        self.assertTrue(all(l.startswith("ckptrun: ") for l in err.splitlines() if l), err)

    def test_log_json_on_a_terminal_draws_nothing(self):
        cmd = [CKPTRUN, "--log-json", "--codec", "none", "--", PY, self.slow, str(8 << 20),
               "0.5", "0"]
        rc, frames = T.tty_run(cmd, self.env, self.work)
        text = b"".join(d for _, d in frames).decode(errors="replace")
        self.assertEqual(rc, 0, text)
        self.assertNotRegex(text, r"commit step \d+  ")
        lines = [l for l in text.replace("\r\n", "\n").split("\n") if l.strip()]
        for l in lines:
            json.loads(l)  # every line an event, no status line in between
        self.assertEqual(json.loads(lines[-1])["event"], "result")


if __name__ == "__main__":
    unittest.main()
