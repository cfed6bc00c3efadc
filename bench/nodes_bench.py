#!/usr/bin/env python3
"""Time from a stop on one node to the global commit of a two-node job.

Two ckptruns (--nnodes 2 --node-rank K --job-id ID, own CKPT_DIR each, one
file store) over a signal-aware shell trainer: on SIGUSR1 node 0's writes
checkpoint-N/ (--state-mb MiB, then the marker, renamed into place), node
1's writes nothing (as HF's ranks on other nodes). SIGTERM goes to node 1's
ckptrun only; printed: the time until each node logs the global commit of
the stop's step, and until both have exited (75).

    bench/nodes_bench.py BUILD_DIR [--state-mb 64] [--rounds 3]
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

TRAINER = r'''
step=0; want=0
trap 'want=1' USR1
trap 'exit 143' TERM
echo "bench-trainer: start node $NODE" >&2
while :; do
  step=$((step+1)); sleep 0.02
  if [ $want = 1 ]; then
    want=0
    if [ "$NODE" = 0 ]; then
      t="$CKPT_DIR/.tmp-$step"; mkdir -p "$t"
      head -c $((STATE_MB*1048576)) /dev/urandom > "$t/state.bin"
      echo "{\"step\":$step}" > "$t/trainer_state.json"
      mv "$t" "$CKPT_DIR/checkpoint-$step"
    fi
  fi
done
'''


class Node:
    def __init__(self, cmd, env):
        self.p = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.lines, self.cv = [], threading.Condition()
        threading.Thread(target=self.pump, daemon=True).start()

    def pump(self):
        for line in self.p.stderr:
            with self.cv:
                self.lines.append((time.monotonic(), line.rstrip()))
                self.cv.notify_all()

    def when(self, pattern, timeout=120):
        rx, end = re.compile(pattern), time.monotonic() + timeout
        with self.cv:
            while True:
                for t, l in self.lines:
                    if rx.search(l):
                        return t
                if time.monotonic() > end:
                    raise SystemExit("bench: no %r in node log:\n%s" %
                                     (pattern, "\n".join(l for _, l in self.lines)))
                self.cv.wait(0.05)


def round_(build, work, gen, state_mb):
    store = "file://" + os.path.join(work, "store")
    nodes = []
    for k in (0, 1):
        env = {x: v for x, v in os.environ.items() if not x.startswith(("CKPT_", "SLURM_", "PET_"))}
        env.update(HOME=os.path.join(work, "home%d" % k), CKPT_STORE=store, CKPT_RUN="bench",
                   CKPT_DIR=os.path.join(work, "g%d-ck%d" % (gen, k)), CKPT_NOTICE="none",
                   NODE=str(k), STATE_MB=str(state_mb))
        os.makedirs(env["HOME"], exist_ok=True)
        nodes.append(Node([os.path.join(build, "bin", "ckptrun"), "--nnodes", "2",
                           "--node-rank", str(k), "--job-id", "bench%d" % gen,
                           "--signal", "USR1", "--complete-marker", "trainer_state.json",
                           "--", "bash", "-c", TRAINER], env))
    for n in nodes:
        n.when(r"bench-trainer: start")
    time.sleep(0.5)
    t0 = time.monotonic()
    nodes[1].p.send_signal(signal.SIGTERM)
    commits = [n.when(r" global-commit step=") - t0 for n in nodes]
    rcs = [n.p.wait(120) for n in nodes]
    done = time.monotonic() - t0
    return commits, done, rcs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--state-mb", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ckpt-nodes-bench-")
    try:
        res = [round_(os.path.abspath(a.build), work, g, a.state_mb) for g in range(a.rounds)]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\n| %-56s | %-10s |" % ("two nodes, SIGTERM on node 1 only (%d MiB state)" % a.state_mb,
                                   "median"))
    print("|%s|%s|" % ("-" * 58, "-" * 12))
    med = lambda xs: sorted(xs)[len(xs) // 2]
    print("| %-56s | %7.0f ms |" % ("stop -> global commit seen by node 0",
                                     1000 * med([r[0][0] for r in res])))
    print("| %-56s | %7.0f ms |" % ("stop -> global commit seen by node 1 (the stopped one)",
                                     1000 * med([r[0][1] for r in res])))
    print("| %-56s | %7.0f ms |" % ("stop -> both ckptruns exited",
                                     1000 * med([r[1] for r in res])))
    codes = sorted({c for r in res for c in r[2]})
    print("exit codes: %s (75 expected)" % codes)
    return 0 if codes == [75] else 1


if __name__ == "__main__":
    sys.exit(main())
