#!/usr/bin/python3
"""ckptrun on every node of a job: two 'nodes' on one machine.

Each node is `ckptrun --nnodes 2 --node-rank K --job-id ID` with its own
HOME and CKPT_DIR over `torchrun --nnodes 2 --node_rank K --nproc_per_node 2
--master_addr 127.0.0.1` running examples/python/ddp_train.py (DDP, gloo,
CPU; only global rank 0 writes checkpoint-N/, as HF does), one store.

  1. A notice (tests/tools/metadata_mock.py) on node 1 only: node 0 learns
     it through the store, the ranks agree (ckpt_helper) on one step, node
     0 writes its part (checkpoint-N/), node 1 an empty part; node 0
     commits the global step; both nodes exit 75 with the same step. A
     SIGTERM to node 0 later in the window starts no second checkpoint.
  2. A new generation resumes that step on both nodes; SIGTERM to node 1's
     ckptrun only reaches node 0 through the store, and node 0's ckptrun is
     SIGKILLed once its rank 0 saved: no global step above the last one is
     ever committed (node 1 ends 74 or with the job's failure, never 75).
  3. Restart of both with a new job id: the newest global step resumes,
     and the run ends with the bytes of one never interrupted.
  4. A different node count on restore: the documented error (exit 78,
     "written by 2 node(s)").
  5. (test_whole_node_stop_fast_hf_writer, ctest ckptrun_nodes_stop) an
     unmodified trainer saving on each node as HF does, every ~0.8 s, and a
     SIGTERM to one node's ckptrun, whose torchrun dies of it at once: the
     checkpoints complete before the stop make one global step, both nodes
     exit 75, a new generation resumes it on both.

Needs /usr/bin/python3 with torch and /usr/bin/torchrun; exits 77 (skip)
without them.
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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ckpt_testlib as T  # noqa: E402
from ckpt_testlib import CKPTRUN, PY, REPO, Proc, free_port  # noqa: E402

TRAINER = os.path.join(REPO, "examples", "python", "ddp_train.py")
DDP_TRAINER = os.path.join(HERE, "ddp_trainer.py")  # HF's order of writes
TORCHRUN = "/usr/bin/torchrun"
STEPS = 400


def launcher(node, port, out, sleep_ms):
    return [TORCHRUN, "--nnodes", "2", "--node_rank", str(node), "--nproc_per_node", "2",
            "--master_addr", "127.0.0.1", "--master_port", str(port),
            "--redirects", "1", "--tee", "1",
            TRAINER, "--steps", str(STEPS), "--out", out, "--sleep-ms", str(sleep_ms)]


class Nodes(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ckpt-nodes-")
        self.store = "file://" + os.path.join(self.tmp, "store")
        self.procs = []
        self.gen = 0

    def tearDown(self):
        for p in self.procs:
            p.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def env(self, node, tag):
        work = os.path.join(self.tmp, "%s-node%d" % (tag, node))
        os.makedirs(os.path.join(work, "home"), exist_ok=True)
        # PYTHONFAULTHANDLER: a rank that hangs is sent SIGABRT by ended()
        # and prints every thread's Python stack first
        env = T.clean_env(drop=("PET_",), HOME=os.path.join(work, "home"), CKPT_STORE=self.store,
                          CKPT_RUN="job", CKPT_DIR=os.path.join(work, "ck"), CKPT_NOTICE="none",
                          PYTHONFAULTHANDLER="1")
        return env, work

    def start_job(self, tag, sleep_ms=20, extra=None):
        """Both nodes under a new job generation. @return ([proc0, proc1], out path)."""
        self.gen += 1
        job = "gen%d" % self.gen
        port = free_port()
        out = os.path.join(self.tmp, "out-%s" % tag)
        procs = []
        for node in (0, 1):
            env, work = self.env(node, tag)
            args = ["--nnodes", "2", "--node-rank", str(node), "--job-id", job,
                    "--signal", "USR1", "--complete-marker", "trainer_state.json",
                    "--settle", "30s", "--grace", "20s"]
            args += (extra or {}).get(node, [])
            p = Proc(args + ["--"] + launcher(node, port, out, sleep_ms), env, work)
            self.procs.append(p)
            procs.append(p)
        starts = []
        for node, p in enumerate(procs):
            for r in (2 * node, 2 * node + 1):
                m = p.wait_line(r"ddp_train: rank %d of 4 start at step (\d+)" % r, timeout=150)
                starts.append(int(m.group(1)))
        self.assertEqual(len(set(starts)), 1, starts)
        return procs, out, starts[0]

    def stopped(self, procs, after):
        """Both nodes exit 75 with one global step above `after`."""
        steps = []
        for p in procs:
            self.ended(procs, p, 150)
        for p in procs:
            self.assertEqual(p.p.returncode, 75, "\n---- node 0:\n%s\n---- node 1:\n%s" %
                             (procs[0].text(), procs[1].text()))
            got = [int(s) for s in re.findall(r" global-commit step=(\d+)", p.text())]
            self.assertTrue(got, p.text())
            steps.append(max(got))
        self.assertEqual(steps[0], steps[1], [p.text() for p in procs])
        self.assertGreater(steps[0], after)
        # node 0 wrote checkpoint-N/, node 1 nothing: its part is empty
        self.assertRegex(procs[0].text(), r" part step=%d .*entry=checkpoint-%d" %
                         (steps[0], steps[0]))
        self.assertRegex(procs[1].text(), r" part step=%d node=1 empty=true" % steps[0])
        return steps[0]

    def ls(self):
        env, work = self.env(0, "admin")
        r = subprocess.run([CKPTRUN, "ls", "--json"], env=env, cwd=work, capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def newest(self):
        return max((c["step"] for c in self.ls()), default=None)

    def ended(self, procs, p, timeout):
        """p's exit status; one that does not end in time fails the test with
        what every node printed and the process tree under each (a hang,
        seen once in CI, said nothing: whose it was must show)."""
        try:
            return p.wait(timeout)
        except subprocess.TimeoutExpired:
            tree = []
            for q in procs:
                for pid in [q.p.pid] + T.descendants(q.p.pid):
                    try:
                        with open("/proc/%d/wchan" % pid) as f:
                            wchan = f.read()
                    except OSError:
                        wchan = "?"
                    tree.append("  %d %s (under node pid %d) waits in %s" %
                                (pid, T.comm(pid), q.p.pid, wchan))
            # where the ranks' Python is: faulthandler prints every thread's
            # stack on SIGABRT (PYTHONFAULTHANDLER in env()), into the node's
            # output (the ranks' stderr is not redirected)
            for q in procs:
                for pid in T.descendants(q.p.pid):
                    if T.comm(pid).startswith("python"):
                        try:
                            os.kill(pid, signal.SIGABRT)
                        except OSError:
                            pass
            time.sleep(3)
            self.fail("not ended within %d s; processes:\n%s\n%s" % (
                timeout, "\n".join(tree), "".join(
                    "\n---- node %d:\n%s" % (i, q.text()) for i, q in enumerate(procs))))

    def reference(self):
        """The uninterrupted run's bytes (plain torchrun, no ckptrun).

        The master port is picked free here and bound by node 0's torchrun
        later; a test beside this one (ctest -j) may take it between, and
        once node 0's torchrun waited the whole 300 s (CI, no output). A
        run that hangs is killed (both nodes' process groups) and tried
        again on a new port, once; what it printed goes in the failure."""
        out = os.path.join(self.tmp, "ref")
        hung = ""
        for attempt in (1, 2):
            port = free_port()
            ps = []
            for node in (0, 1):
                env, _ = self.env(node, "ref")
                ps.append(subprocess.Popen(launcher(node, port, out, 0), env=env,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                           text=True, start_new_session=True))
            try:
                for p in ps:
                    _, err = p.communicate(timeout=120)
                    self.assertEqual(p.returncode, 0, err)
                break
            except subprocess.TimeoutExpired:
                for node, p in enumerate(ps):
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    hung += "\n---- attempt %d, node %d (port %d):\n%s" % (
                        attempt, node, port, p.communicate()[1][-3000:])
                if attempt == 2:
                    self.fail("the reference run hung twice:" + hung)
                sys.stderr.write("reference run hung on port %d: again on a new port%s\n" %
                                 (port, hung))
        with open(out, "rb") as f:
            return f.read()

    def test_two_nodes(self):
        # 1. a notice on node 1 only; node 0's own SIGTERM later in the same
        #    window starts no second checkpoint
        mock = T.metadata_mock("aws")
        try:
            port = mock.port
            procs, _, _ = self.start_job("notice", extra={
                1: ["--notice", "aws", "--metadata-url", "http://127.0.0.1:%d" % port]})
            time.sleep(1.0)
            t0 = time.monotonic()
            urllib.request.urlopen("http://127.0.0.1:%d/_mock/notice?kind=terminate&in=90"
                                   % port, data=b"").read()
            procs[1].wait_line(r" notice ", timeout=30)
            procs[0].wait_line(r"stop from node 1", timeout=30)
            procs[0].p.send_signal(signal.SIGTERM)
            last = self.stopped(procs, 0)
            print("notice on one node to exit 75 on both: %.1f s" % (time.monotonic() - t0),
                  file=sys.stderr)
            self.assertEqual(len(re.findall(r" request reason=stop", procs[0].text())), 1,
                             procs[0].text())
        finally:
            mock.stop()
        self.assertEqual(self.newest(), last)
        self.assertEqual([c.get("world_size") for c in self.ls() if c["step"] == last], [2])

        # 2. a new generation resumes that step; SIGTERM on node 1 only reaches
        #    node 0, and node 0's ckptrun is SIGKILLed once its rank 0 saved:
        #    no global step above the last, ever
        procs, _, start = self.start_job("kill", sleep_ms=40,
                                         extra={1: ["--grace", "8s"]})
        self.assertEqual(start, last)  # both resumed the global step
        time.sleep(1.0)
        procs[1].p.send_signal(signal.SIGTERM)
        procs[0].wait_line(r"stop from node 1", timeout=30)
        procs[0].wait_line(r"ddp_train: saved step", timeout=60)
        procs[0].p.kill()
        procs[0].wait(30)
        rc = self.ended(procs, procs[1], 150)
        self.assertNotEqual(rc, 75, procs[1].text())
        self.assertEqual(self.newest(), last)

        # 3. a new generation resumes the newest global step, ends identical
        procs, out, start = self.start_job("final", sleep_ms=0)
        self.assertEqual(start, last)
        for p in procs:
            self.assertEqual(self.ended(procs, p, 300), 0, p.text())
        with open(out, "rb") as f:
            self.assertEqual(f.read(), self.reference())

        # 4. another node count: the documented error
        env, work = self.env(0, "world")
        r = subprocess.run([CKPTRUN, "--nnodes", "3", "--node-rank", "0", "--job-id", "w3",
                            "--", "true"], env=env, cwd=work, capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 78, r.stderr)
        self.assertIn("written by 2 node(s); this job has 3", r.stderr)
        r = subprocess.run([CKPTRUN, "--", "true"], env=env, cwd=work, capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 78, r.stderr)
        self.assertIn("written by 2 nodes; this job has 1", r.stderr)

    def test_sigterm_shell_trainer(self):
        """SIGTERM on node 1 only, over a signal-aware shell trainer (no torch):
        node 0 writes checkpoint-N/ on its request, node 1 nothing; both
        commit the same global step and exit 75."""
        trainer = (r'step=0; want=0; trap "want=1" USR1; trap "exit 143" TERM; '
                   r'echo "sh-trainer: $((40+2)) ready" >&2; '
                   r'while :; do step=$((step+1)); sleep 0.02; '
                   r'if [ $want = 1 ]; then want=0; if [ "$NODE" = 0 ]; then '
                   r't="$CKPT_DIR/.t$step"; mkdir -p "$t"; echo $step > "$t/state"; '
                   r'echo "{}" > "$t/trainer_state.json"; mv "$t" "$CKPT_DIR/checkpoint-$step"; '
                   r'fi; fi; done')
        procs = []
        for node in (0, 1):
            env, work = self.env(node, "sh")
            env["NODE"] = str(node)
            p = Proc(["--nnodes", "2", "--node-rank", str(node), "--job-id", "sh1",
                      "--signal", "USR1", "--complete-marker", "trainer_state.json",
                      "--", "bash", "-c", trainer], env, work)
            self.procs.append(p)
            procs.append(p)
        for p in procs:
            p.wait_line(r"sh-trainer: 42 ready", timeout=30)
        procs[1].p.send_signal(signal.SIGTERM)
        step = self.stopped(procs, 0)
        self.assertIn("stop from node 1 (SIGTERM)", procs[0].text())
        self.assertEqual(self.newest(), step)

    def test_whole_node_stop_fast_hf_writer(self):
        """Issue 26, item 6: save-on-each-node, unmodified (no helper, no
        --signal): every node's local rank 0 writes checkpoint-N/'s marker,
        then each rank its shard, in its node's CKPT_DIR, the two newest
        kept, every ~0.8 s. SIGTERM to node 1's ckptrun: its torchrun dies
        of it at once, node 0's ranks of the broken gloo connection. The
        entries complete before the stop count on both nodes: one global
        step, both exit 75, and a new generation resumes it on both."""
        hf = ["--hf-order", "--keep", "2", "--each-node", "--no-saved", "--every", "20"]

        def start(tag, job, port, sleep_ms):
            procs = []
            for node in (0, 1):
                env, work = self.env(node, tag)
                cmd = ["env", "-u", "CKPT_SOCKET", TORCHRUN, "--nnodes", "2", "--node_rank",
                       str(node), "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
                       "--master_port", str(port), "--redirects", "1", "--tee", "1",
                       DDP_TRAINER, "--steps", "2000", "--out", os.path.join(self.tmp, "o"),
                       "--sleep-ms", str(sleep_ms)] + hf
                p = Proc(["--nnodes", "2", "--node-rank", str(node), "--job-id", job,
                          "--complete-marker", "trainer_state.json", "--grace", "20s", "--"] +
                         cmd, env, work)
                self.procs.append(p)
                procs.append(p)
            return procs

        procs = start("hf", "hf1", free_port(), 30)
        for p in procs:
            p.wait_line(r"trainer: rank \d start at step 0 ", timeout=150)
        # parts and global steps come while the trainer saves
        procs[0].wait_line(r" global-commit step=\d+ nodes=2", timeout=60)
        deadline = time.monotonic() + 60
        while len(re.findall(r" global-commit step=", procs[0].text())) < 3:
            self.assertLess(time.monotonic(), deadline, procs[0].text())
            time.sleep(0.1)
        procs[1].p.send_signal(signal.SIGTERM)
        for p in procs:
            self.ended(procs, p, 150)
        text = "\n---- node 0:\n%s\n---- node 1:\n%s" % (procs[0].text(), procs[1].text())
        for p in procs:
            self.assertEqual(p.p.returncode, 75, text)
            self.assertIn("final committed=true", p.text(), text)
        newest = self.newest()
        self.assertIsNotNone(newest)
        for p in procs:
            self.assertIn(" global-commit step=%d nodes=2" % newest, p.text(), text)

        # a new generation resumes the newest global step on both nodes (each
        # rank loads its shard from its own node's restored checkpoint-N/)
        procs = start("hf-resume", "hf2", free_port(), 30)
        for node, p in enumerate(procs):
            for r in (2 * node, 2 * node + 1):
                p.wait_line(r"trainer: rank %d start at step %d " % (r, newest), timeout=150)
        procs[0].wait_line(r" global-commit step=\d+ nodes=2", timeout=60)
        procs[0].p.send_signal(signal.SIGTERM)
        for p in procs:
            self.assertEqual(self.ended(procs, p, 150), 75, p.text())

    def test_options(self):
        env, work = self.env(0, "opts")

        def run(*args, **extra):
            e = dict(env, **extra)
            return subprocess.run([CKPTRUN] + list(args) + ["--", "true"], env=e, cwd=work,
                                  capture_output=True, text=True, timeout=60)
        r = run("--nnodes", "2", "--node-rank", "2", "--job-id", "x")
        self.assertEqual(r.returncode, 64, r.stderr)
        r = run("--nnodes", "2", "--node-rank", "0")
        self.assertEqual(r.returncode, 64, r.stderr)
        self.assertIn("--job-id", r.stderr)
        r = run("--nnodes", "2", "--node-rank", "1", "--job-id", "bad/id")
        self.assertEqual(r.returncode, 64, r.stderr)
        # a batch script is not a job step: SLURM_NNODES alone is one node
        r = run(SLURM_NNODES="2", SLURM_NODEID="0", SLURM_JOB_ID="7")
        self.assertEqual(r.returncode, 0, r.stderr)
        # node 0 alone: its part of step 5 waits for node 1's; ls and status
        # say which part is missing
        p = Proc(["--nnodes", "2", "--node-rank", "0", "--job-id", "A", "--grace", "3s",
                  "--lease", "3s",
                  "--", "sh", "-c",
                  'd="$CKPT_DIR/.t"; mkdir -p "$d"; echo x > "$d/w"; '
                  'mv "$d" "$CKPT_DIR/checkpoint-5"; sleep 30'], env, work)
        self.procs.append(p)
        p.wait_line(r" lease action=acquired", timeout=30)
        p.wait_line(r" part step=5 .*node=0", timeout=60)
        r = subprocess.run([CKPTRUN, "status", "--json"], env=env, cwd=work,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        st = json.loads(r.stdout)
        self.assertEqual([(x["step"], x["parts"], x["missing"]) for x in st["pending"]],
                         [(5, [0], [1])], st)
        self.assertEqual(st["lease"]["job"], "A")
        r = subprocess.run([CKPTRUN, "ls"], env=env, cwd=work, capture_output=True, text=True,
                           timeout=60)
        self.assertIn("step 5: parts 1/2, missing node 1", r.stdout, r.stdout + r.stderr)
        # a node of another generation is refused once the live lease is
        # renewed (its generation is alive: a dead one's is waited out)
        env1, work1 = self.env(1, "opts")
        r = subprocess.run([CKPTRUN, "--nnodes", "2", "--node-rank", "1", "--job-id", "B",
                            "--", "true"], env=env1, cwd=work1, capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 78, r.stderr)
        self.assertIn("of job A", r.stderr)
        # the same from the environment: a SLURM job step (generation
        # SLURM_JOB_ID.SLURM_RESTART_COUNT), Kubeflow's PET_* variables
        r = subprocess.run([CKPTRUN, "--", "true"], env=dict(
            env1, SLURM_STEP_ID="0", SLURM_NNODES="2", SLURM_NODEID="1", SLURM_JOB_ID="7",
            SLURM_RESTART_COUNT="2"), cwd=work1, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 78, r.stderr)
        self.assertIn("this node is of job 7.2", r.stderr)
        r = subprocess.run([CKPTRUN, "--job-id", "C", "--", "true"], env=dict(
            env1, PET_NNODES="2", PET_NODE_RANK="1"), cwd=work1, capture_output=True,
            text=True, timeout=60)
        self.assertEqual(r.returncode, 78, r.stderr)
        self.assertIn("this node is of job C", r.stderr)
        p.p.send_signal(signal.SIGTERM)
        p.wait(60)


if __name__ == "__main__":
    if not (os.access(TORCHRUN, os.X_OK) and
            subprocess.run([PY, "-c", "import torch.distributed"],
                           capture_output=True).returncode == 0):
        print("SKIP: torchrun or torch not available (needs /usr/bin/torchrun and "
              "python3-torch)", file=sys.stderr)
        sys.exit(77)
    unittest.main()
