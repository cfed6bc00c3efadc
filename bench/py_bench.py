#!/usr/bin/python3
"""py_bench.py -- `import ckpt` against torch.save / torch.load (docs/python.md,
"Performance"). Run by `make bench` (bench/run_python.sh); alone:

    /usr/bin/python3 bench/py_bench.py [--build build] [--mb 1024] [--reps 5]

The state (written down here, as the issue fixes it): BENCH_PY_MB (1024)
MiB on CPU, 10 bytes per parameter over 32 layers --
  model   bf16 weights                 N(0, 0.02)
  optim   AdamW exp_avg    fp32        N(0, 1e-3)
          AdamW exp_avg_sq fp32        U(0, 1e-6)
plus each layer's `step` and the param groups, as opt.state_dict() has
them. Every timing is the best of --reps runs. Between two timed saves
every tensor changes in one element per MiB, so every chunk is new (no
dedup helps a timed save) while the data stay what they were.

Rows (ratio = ckpt / peer, with the issue's target):
  stall        ckpt.save() returning   vs copying the tensors into
               preallocated buffers (the memory-copy floor), and vs
               torch.save to a local file
  committed    ckpt.save()+ckpt.wait() on a file:// store on the local disk
               vs torch.save + fsync of the file, same disk; on s3rver vs
               torch.save + `aws s3 cp` of the file (skipped without s3rver)
  stored       the checkpoint's bytes in the store vs `zstd -1` of
               torch.save's file and vs the file; after an update that
               changes 1% of the tensors, its new bytes vs the full
               checkpoint's
  load         ckpt.load() to new tensors vs torch.load of the local file
               (both from the page cache)
  memory       host memory a save adds (the staging copy libckpt keeps, and
               the peak during a save) and a load adds, vs the state
"""
import argparse
import gc
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--build", default="build")
ap.add_argument("--mb", type=int, default=int(os.environ.get("BENCH_PY_MB", "1024")))
ap.add_argument("--reps", type=int, default=int(os.environ.get("BENCH_PY_REPS", "5")))
ap.add_argument("--dir", default=os.environ.get("BENCH_DIR") or None,
                help="working directory on the local disk (not tmpfs)")
ap.add_argument("--no-s3", action="store_true")
args = ap.parse_args()

BUILD = os.path.abspath(args.build)
SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(BUILD, "python"))
import ckpt  # noqa: E402

LAYERS = 32
MIB = 1 << 20


def make_state(mb):
    params = (mb * MIB) // 10 // LAYERS // 1024 * 1024
    g = torch.Generator().manual_seed(0)
    model, ostate = {}, {}
    for i in range(LAYERS):
        model["layers.%d.weight" % i] = torch.empty(params // 1024, 1024).normal_(
            0, 0.02, generator=g).to(torch.bfloat16)
        ostate[i] = {"step": torch.tensor(1000.0),
                     "exp_avg": torch.empty(params // 1024, 1024).normal_(0, 1e-3, generator=g),
                     "exp_avg_sq": torch.empty(params // 1024, 1024).uniform_(0, 1e-6,
                                                                              generator=g)}
    groups = [{"lr": 1e-4, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01,
               "amsgrad": False, "maximize": False, "foreach": None, "capturable": False,
               "params": list(range(LAYERS))}]
    return {"model": model, "optim": {"state": ostate, "param_groups": groups}, "step": 1000}


def tensors(state):
    out = list(state["model"].values())
    for s in state["optim"]["state"].values():
        out += [s["exp_avg"], s["exp_avg_sq"]]
    return out


def nbytes(state):
    return sum(t.numel() * t.element_size() for t in tensors(state))


def perturb(state, k):
    """One element per MiB of every tensor changes: every chunk is new."""
    for t in tensors(state):
        flat = t.view(-1)
        step = MIB // t.element_size()
        flat[::step] = flat[::step] + (1e-7 * k if t.dtype == torch.float32 else 1e-3 * k)


def best(fn, reps, before=None):
    out = []
    for i in range(reps):
        if before:
            before(i)
        gc.collect()
        t0 = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - t0)
    return min(out)


def rss():
    with open("/proc/self/status") as f:
        d = dict(line.split(":", 1) for line in f)
    return int(d["VmRSS"].split()[0]) * 1024, int(d["VmHWM"].split()[0]) * 1024


def reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def fsync_path(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    dfd = os.open(os.path.dirname(path), os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def store_bytes(store, run, step=None):
    """(stored bytes of the checkpoint, new bytes it wrote) from ckptrun ls."""
    r = subprocess.run([os.path.join(BUILD, "bin", "ckptrun"), "ls", "--json", "--store", store,
                        "--run", run], capture_output=True, text=True, check=True)
    for e in json.loads(r.stdout):
        if step is None or e["step"] == step:
            return e["stored_bytes"], e["new_bytes"]
    raise RuntimeError("step %s not listed" % step)


rows = []


def row(what, mine, peer, peer_name, target, unit="s", cpu=None):
    """cpu: (ckpt's CPU seconds, the peer's), all threads, where they say
    more than the wall clock on a shared machine."""
    ratio = mine / peer if peer else float("nan")
    ok = "yes" if ratio <= target else "NO"
    rows.append((what, mine, peer, peer_name, ratio, target, ok, unit, cpu))


def cpu_of(fn, reps, before=None):
    """(best wall seconds, mean CPU seconds of this process) of fn."""
    c0 = os.times()
    wall = best(fn, reps, before)
    c1 = os.times()
    return wall, (c1.user + c1.system - c0.user - c0.system) / reps


def fmt(v, unit):
    if unit == "s":
        return "%.3f s" % v
    if unit == "B":
        return "%.1f MiB" % (v / MIB)
    return str(v)


def s3rver(tmp):
    node = shutil.which("node")
    mod = os.path.join(SRC, "tests/npm/node_modules/s3rver/bin/s3rver.js")
    if args.no_s3 or not node or not os.path.exists(mod) or not os.path.exists("/usr/bin/aws"):
        return None, None
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        port = so.getsockname()[1]
    os.makedirs(os.path.join(tmp, "s3rver"))
    p = subprocess.Popen([node, "--openssl-legacy-provider", mod, "-d",
                          os.path.join(tmp, "s3rver"), "-a", "127.0.0.1", "-p", str(port),
                          "--configure-bucket", "bench"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            break
        except OSError:
            time.sleep(0.05)
    os.environ.update(AWS_ACCESS_KEY_ID="S3RVER", AWS_SECRET_ACCESS_KEY="S3RVER",
                      AWS_REGION="us-east-1", AWS_ENDPOINT_URL="http://127.0.0.1:%d" % port,
                      AWS_EC2_METADATA_DISABLED="true", CKPT_S3_CONDITIONAL="0")
    return p, port


def main():
    tmp = tempfile.mkdtemp(prefix="ckpt-pybench-", dir=args.dir or "/var/tmp")
    for k in [k for k in os.environ if k.startswith("CKPT_")]:
        del os.environ[k]
    os.environ["HOME"] = tmp
    peer = None
    try:
        state = make_state(args.mb)
        size = nbytes(state)
        print("state: %.0f MiB in %d tensors (bf16 weights, fp32 AdamW moments); best of %d; "
              "torch %s, %d threads; work dir %s" % (size / MIB, len(tensors(state)), args.reps,
                                                     torch.__version__, torch.get_num_threads(),
                                                     tmp), flush=True)
        store = "file://" + os.path.join(tmp, "store")
        tfile = os.path.join(tmp, "state.pt")

        # ---- torch.save (to the page cache), + fsync
        t_save = best(lambda i: torch.save(state, tfile), args.reps)
        t_save_sync, sync_cpu = cpu_of(lambda i: (torch.save(state, tfile), fsync_path(tfile)),
                                       args.reps)
        file_bytes = os.path.getsize(tfile)
        z = subprocess.run("zstd -1 -c -q '%s' | wc -c" % tfile, shell=True, capture_output=True,
                           text=True, check=True)
        zstd_bytes = int(z.stdout.split()[0])

        # ---- ckpt: the first save allocates the staging copy (measured),
        # then stall and save-to-committed, every chunk new each time
        ckpt.init(store=store, run="bench")
        dst = [torch.empty_like(t) for t in tensors(state)]  # the floor's buffers
        for d in dst:
            d.zero_()
        gc.collect()
        reset_peak()
        r0, _ = rss()
        ckpt.save(0, state)
        ckpt.wait()
        r1, _ = rss()
        staging = r1 - r0
        # the stall and the memory-copy floor in turns, so both meet the same
        # machine (page cache writeback of the last commit, other load)
        floors = []

        def floor_then_wait(i):
            ckpt.wait()
            perturb(state, i + 1)
            t0 = time.perf_counter()
            for d, t in zip(dst, tensors(state)):
                d.copy_(t)
            floors.append(time.perf_counter() - t0)
        stall = best(lambda i: ckpt.save(10 + i, state), args.reps, before=floor_then_wait)
        floor = min(floors)
        del dst
        ckpt.wait()
        cpu0 = os.times()
        committed = best(lambda i: (ckpt.save(100 + i, state), ckpt.wait()), args.reps,
                         before=lambda i: perturb(state, 100 + i))
        cpu1 = os.times()
        save_cpu = (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / args.reps
        _, peak = rss()
        save_peak = peak - r0  # the staging copy, the pool's buffers, Python's own
        pool = min(os.cpu_count() or 1, 8) * 3 * 4 * MIB  # file://: workers x 3 x chunk

        # ---- stored bytes: a fresh run, then an update of 1% of the tensors
        ckpt.close()
        ckpt.init(store=store, run="bytes")
        ckpt.save(1, state)
        ckpt.wait()
        stored, _ = store_bytes(store, "bytes", 1)
        ts = tensors(state)
        n1 = max(1, round(len(ts) / 100))
        g = torch.Generator().manual_seed(7)
        for t in ts[LAYERS:LAYERS + n1]:  # exp_avg of the first layers
            t.normal_(0, 1e-3, generator=g)
        ckpt.save(2, state)
        ckpt.wait()
        _, new2 = store_bytes(store, "bytes", 2)

        # ---- load, from the page cache (torch.load's file, ckpt's store)
        ckpt.close()
        ckpt.init(store=store, run="bytes")
        for t in (0, 1):
            got = ckpt.load()  # warm: the store's files in the page cache
            del got
        cpu0 = os.times()
        t_load = best(lambda i: ckpt.load(), args.reps)
        cpu1 = os.times()
        load_cpu = (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / args.reps
        # what a load adds, in a process of its own (here freed memory is reused)
        probe = ("import sys, torch; sys.path.insert(0, %r); import ckpt\n"
                 "def st():\n    d = dict(l.split(':', 1) for l in open('/proc/self/status'))\n"
                 "    return int(d['VmRSS'].split()[0]) * 1024, int(d['VmHWM'].split()[0]) * 1024\n"
                 "ckpt.init(store=%r, run='bytes'); r0, _ = st(); s = ckpt.load(); _, p = st()\n"
                 "print(p - r0)\n" % (os.path.join(BUILD, "python"), store))
        load_peak = int(subprocess.run([sys.executable, "-c", probe], capture_output=True,
                                       text=True, check=True).stdout.split()[-1])
        torch.load(tfile)
        t_tload, tload_cpu = cpu_of(lambda i: torch.load(tfile), args.reps)
        ckpt.close()

        # ---- s3rver
        s3 = None
        peer, port = s3rver(tmp)
        if peer is not None:
            ckpt.init(store="s3://bench/py", run="s3")
            ckpt.save(0, state)
            ckpt.wait()
            s3_committed = best(lambda i: (ckpt.save(200 + i, state), ckpt.wait()), args.reps,
                                before=lambda i: perturb(state, 200 + i))
            ckpt.close()

            def save_cp(i):
                torch.save(state, tfile)
                subprocess.run(["/usr/bin/aws", "--endpoint-url", "http://127.0.0.1:%d" % port,
                                "s3", "cp", "--quiet", tfile, "s3://bench/torch/state.pt"],
                               check=True)
            s3_peer = best(save_cp, args.reps)
            s3 = (s3_committed, s3_peer)

        row("stall of ckpt.save", stall, floor, "copy into preallocated tensors", 1.2)
        row("stall of ckpt.save", stall, t_save, "torch.save to a local file", 0.2)
        row("save to committed, file:// local disk", committed, t_save_sync,
            "torch.save + fsync", 1.2, cpu=(save_cpu, sync_cpu))
        if s3:
            row("save to committed, s3rver", s3[0], s3[1], "torch.save + aws s3 cp", 1.0)
        row("stored bytes", stored, zstd_bytes, "zstd -1 of torch.save's file", 0.93, "B")
        row("stored bytes", stored, file_bytes, "torch.save's file", 0.85, "B")
        row("new bytes after a 1% update", new2, stored, "the full checkpoint", 0.05, "B")
        row("ckpt.load to tensors", t_load, t_tload, "torch.load of the local file", 1.0,
            cpu=(load_cpu, tload_cpu))
        row("memory saves add (peak)", save_peak, size, "the state (+ pool %.0f MiB)" % (
            pool / MIB), (size + pool) / size, "B")
        row("memory a load adds (peak)", load_peak, size, "the state (+ pool)", (size + pool) / size,
            "B")
        w = max(len(r[0]) for r in rows)
        wp = max(len(r[3]) for r in rows)
        print()
        print("%-*s  %12s  %12s  %-*s  %6s  %6s  %-3s  %s" % (
            w, "measure", "ckpt", "peer", wp, "peer is", "ratio", "target", "met",
            "CPU s ckpt/peer"))
        for what, mine, p, pn, ratio, target, ok, unit, cpu in rows:
            print("%-*s  %12s  %12s  %-*s  %6.3f  %6.2f  %-3s  %s" % (
                w, what, fmt(mine, unit), fmt(p, unit), wp, pn, ratio, target, ok,
                "%.2f/%.2f" % cpu if cpu else ""))
        print()
        print("staging libckpt keeps per context (the private copy a save stalls for): "
              "%.1f MiB = %.2fx the state; memory-copy floor %.0f MiB/s; ckpt stall %.0f MiB/s"
              % (staging / MIB, staging / size, size / floor / MIB, size / stall / MIB))
        print("CPU seconds (user+sys, all threads) per ckpt save to committed: %.2f; per "
              "ckpt.load: %.2f; %d CPUs, load average %s" % (
                  save_cpu, load_cpu, os.cpu_count(), " ".join("%.1f" % x for x in
                                                             os.getloadavg())))
    finally:
        ckpt.close()
        if peer is not None:
            peer.kill()
            peer.wait()
        shutil.rmtree(tmp, ignore_errors=True)


main()
