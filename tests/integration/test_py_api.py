#!/usr/bin/python3
"""`import ckpt` (libckpt/python/ckpt, docs/python.md) with real torch and
numpy, on file:// stores (and s3rver for a store that dies):

  RoundTrip  every dtype, layouts (transposed, sliced, channels-last), views
             and tied weights that come back sharing memory, the optimizer's
             int keys, OrderedDict, RNG states, numpy arrays, bytes, small
             values; an AdamW that resumes from load() in a fresh object;
             tensors inside pickled objects (a module, an optimizer,
             OneCycleLR's bound method) saved as items, not in the pickle
  Semantics  save -> change -> load: the change stays, the copy is the saved
             one; save returns once copied; an unchanged state costs ~no
             bytes, a changed tensor re-protected when its storage moved;
             load(step=N); load skips ckptrun's file checkpoints and falls
             back past a damaged one (marked in HEAD under ckptrun) and past
             a structure of a newer format; import touches nothing
  Failures   sparse, meta, overlapping, quantized tensors, keys that cannot
             be item names, unpicklable values, restricted unpickling, a
             store unreachable at the first call, a background save that
             fails (raised by the next save and by wait, with its cause;
             nothing committed is lost), WORLD_SIZE>1 without
             torch.distributed
  NumpyOnly  a trainer that never imports torch
  AloneSigterm  without ckptrun, SIGTERM to a trainer that calls requested()
             saves, commits and dies of it (the resumed run ends as one
             never stopped); one that never asks dies at once; a stuck one
             exits 143 after CKPT_STOP_GRACE; a second SIGTERM ends it now
  AloneException  a trainer alone that dies of an exception says which step
             a rerun resumes from
  ReadmeExample  README's example as copied: stopped after a requested save
             and resumed, it ends as a run never stopped; its last step is
             stored; docs/python.md shows the same example

Run: /usr/bin/python3 tests/integration/test_py_api.py [-v] (ctest sets
CKPT_BUILD, CKPT_BIN, CKPT_SRC). Exits 77 (skip) without torch.
"""
import collections
import glob
import json
import os
import pickle
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import py_util as U  # noqa: E402

try:
    import numpy as np
    import torch
except ImportError:
    print("torch or numpy missing: skipped")
    sys.exit(77)

import ckpt  # noqa: E402  (from <build>/python, py_util)


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ckpt-py-")
        self.store_dir = os.path.join(self.tmp, "store")
        self.store = "file://" + self.store_dir
        self.run_name = self.id().rsplit(".", 1)[-1]
        for k in [k for k in os.environ if k.startswith("CKPT_")]:
            del os.environ[k]
        ckpt.init(store=self.store, run=self.run_name)

    def tearDown(self):
        ckpt.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def reopen(self):
        ckpt.close()
        ckpt.init(store=self.store, run=self.run_name)


def model_and_opt(seed=0):
    torch.manual_seed(seed)
    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    m[0].to(torch.bfloat16)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    return m, opt


def train(m, opt, steps, seed=1):
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(4, 16, generator=g)
        y = m[2](m[1](m[0](x.to(torch.bfloat16)).float()))
        opt.zero_grad()
        y.square().mean().backward()
        opt.step()


class RoundTrip(Base):
    def test_every_type(self):
        dtypes = [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64,
                  torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool,
                  torch.complex64]
        g = torch.Generator().manual_seed(3)
        tensors = {str(d).replace("torch.", ""): (torch.randn(7, 5, generator=g) * 50).to(d)
                   for d in dtypes}
        base = torch.randn(6, 8, generator=g)
        img = torch.randn(2, 3, 4, 5, generator=g).to(memory_format=torch.channels_last)
        state = {
            "t": tensors,
            "layouts": {"transposed": base.t(), "sliced": base[1:5, ::3], "col": base[:, 2],
                        "scalar": torch.tensor(3.5), "channels_last": img,
                        "empty": torch.zeros(0, 4), "param": torch.nn.Parameter(torch.ones(3))},
            "views": [base, base[2:4]],             # one storage: one item
            7: {3: "int keys", (1, 2): "tuple key", None: "none key", 2.5: "float key"},
            "od": collections.OrderedDict([("b", 1), ("a", 2)]),
            "values": [None, True, False, 0, -(1 << 70), 1.5, float("inf"), "ü", (1, (2, 3))],
            "nan": float("nan"),
            "rng": {"torch": torch.get_rng_state(), "py": random.getstate(),
                    "np": np.random.get_state()},
            "np": {"f32": np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2],
                   "rev": np.arange(10, dtype=np.int16)[::-1],
                   "rec": np.zeros(3, dtype=[("a", "<i4"), ("b", "<f8", (2,))]),
                   "scalar": np.float64(2.25), "empty": np.zeros((0, 3))},
            "bytes": {"small": b"abc", "big": bytes(range(256)) * 40,
                      "ba": bytearray(b"xyz" * 700)},
            "dtype": torch.float16, "device": torch.device("cpu"), "size": torch.Size([2, 3]),
            "misc": {1, 2, 3},
        }
        ckpt.save(11, state)
        ckpt.wait()
        self.reopen()
        got = ckpt.load()
        U.same(state, got)
        # views of one storage come back sharing it
        v0, v1 = got["views"]
        self.assertEqual(v1.data_ptr(), v0[2:4].data_ptr())
        v0[2, 0] = 1234.0
        self.assertEqual(v1[0, 0].item(), 1234.0)
        self.assertIsInstance(got["layouts"]["param"], torch.nn.Parameter)

    def test_tied_weights_and_optimizer(self):
        m, opt = model_and_opt()
        train(m, opt, 3)
        sd = m.state_dict()
        sd["tied"] = sd["0.weight"]  # the same tensor twice (weight tying)
        state = {"model": sd, "optim": opt.state_dict(), "step": 3}
        ckpt.save(3, state)
        ckpt.wait()
        self.reopen()
        got = ckpt.load()
        U.same(state, got)
        self.assertEqual(got["model"]["tied"].data_ptr(), got["model"]["0.weight"].data_ptr())
        self.assertEqual(sorted(got["optim"]["state"].keys()), [0, 1, 2, 3])
        self.assertIsInstance(next(iter(got["optim"]["state"])), int)
        # a fresh model and optimizer (Adam's state created by load_state_dict)
        # resume exactly as the original goes on
        del got["model"]["tied"]
        m2, opt2 = model_and_opt(seed=99)
        m2.load_state_dict(got["model"])
        opt2.load_state_dict(got["optim"])
        train(m, opt, 2, seed=5)
        train(m2, opt2, 2, seed=5)
        U.same(m.state_dict(), m2.state_dict())


    def items(self, step):
        r = subprocess.run([U.CKPTRUN, "ls", "--store", self.store, "--run", self.run_name,
                            "--step", str(step), "--json"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        return {i["name"]: i["size"] for i in json.loads(r.stdout)}

    def test_tensors_inside_pickled_objects(self):
        # a whole module, an optimizer, and torch 1.13's OneCycleLR, whose
        # state_dict() holds a bound method (its scheduler, optimizer and
        # every parameter): the pickles hold the objects, the tensors are
        # items like any other, a storage already in the state saved once
        m, opt = model_and_opt()
        train(m, opt, 2)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=50)
        g = torch.Generator().manual_seed(4)
        big = torch.randn(1 << 20, generator=g)  # 4 MiB, only inside an object
        box = Frac(big)
        box.again, box.view, box.arr = big, big[10:20], np.arange(4096, dtype=np.float32)
        state = {"model": m.state_dict(), "optim": opt.state_dict(), "sched": sched.state_dict(),
                 "whole": m, "box": box, "step": 2}
        ckpt.save(2, state)
        ckpt.wait()
        items = self.items(2)
        # the module's parameters are the state dict's storages: no item of their own
        self.assertFalse([n for n in items if n.startswith("whole/")], items)
        self.assertEqual(items["box/0"], 4 << 20)
        self.assertEqual(items["box/2"], 4096 * 4)  # box.view shares box/0's storage
        self.assertNotIn("box/1", items)
        # the structure holds the objects, not their bytes
        self.assertLess(items[".ckpt/state"], 64 << 10, items)
        self.reopen()
        with self.assertRaises(pickle.UnpicklingError) as cm:
            ckpt.load()
        self.assertIn("state['sched']['anneal_func'] holds a pickled", str(cm.exception))
        got = ckpt.load(allow_pickle=True)
        U.same(state["model"], got["model"])
        b = got["box"]
        self.assertTrue(torch.equal(b.n, big))
        self.assertIs(b.again, b.n)  # one object, one object again
        self.assertEqual(b.view.data_ptr(), b.n[10:20].data_ptr())
        self.assertTrue(np.array_equal(b.arr, box.arr))
        w = got["whole"]
        self.assertIsInstance(w[0].weight, torch.nn.Parameter)
        self.assertTrue(w[0].weight.requires_grad)
        # the whole module's parameters and the state dict's tensors share memory
        self.assertEqual(w[0].weight.data_ptr(), got["model"]["0.weight"].data_ptr())
        s2 = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=50)
        s2.load_state_dict(got["sched"])
        with warnings.catch_warnings():  # step() without optimizer.step(): torch warns
            warnings.simplefilter("ignore")
            for _ in range(3):
                sched.step()
                s2.step()
        self.assertEqual(sched.get_last_lr(), s2.get_last_lr())
        # an optimizer pickled whole: its state still keyed by its own parameters
        ckpt.save(3, {"opt": opt, "model": m.state_dict()})
        ckpt.wait()
        o = ckpt.load(allow_pickle=True)["opt"]
        ps = o.param_groups[0]["params"]
        self.assertTrue(all(p in o.state for p in ps))
        self.assertTrue(torch.equal(o.state[ps[0]]["exp_avg"], opt.state[m[0].weight]["exp_avg"]))


class Semantics(Base):
    def test_save_change_load(self):
        t = torch.arange(1000, dtype=torch.float32)
        ckpt.save(1, {"t": t})
        t.add_(1)  # the caller may change it at once
        got = ckpt.load()  # in the same process
        self.assertTrue(torch.equal(got["t"], torch.arange(1000, dtype=torch.float32)))
        self.assertEqual(t[0].item(), 1.0)  # load never writes what save() was given
        self.assertNotEqual(got["t"].data_ptr(), t.data_ptr())
        ckpt.save(2, {"t": t})
        ckpt.wait()
        self.assertEqual(ckpt.load()["t"][0].item(), 1.0)
        # loaded(): what the last load() returned; other_world= changes
        # nothing at this job's world size, and is a rank
        self.assertEqual(ckpt.loaded(), {"step": 2, "world_size": 1, "part": 0})
        self.assertEqual(ckpt.load(step=1, other_world=3)["t"][0].item(), 0.0)
        self.assertEqual(ckpt.loaded(), {"step": 1, "world_size": 1, "part": 0})
        for bad in ("0", -1, True, 1.0):
            with self.assertRaisesRegex(ValueError, "other_world is a rank"):
                ckpt.load(other_world=bad)
        self.reopen()
        self.assertIsNone(ckpt.loaded())

    def test_dedup_and_reprotect(self):
        g = torch.Generator().manual_seed(0)
        state = {"w%d" % i: torch.randn(256 * 1024, generator=g) for i in range(10)}  # 10 MiB
        ckpt.save(1, state)
        ckpt.wait()
        first = U.du(self.store_dir)
        ckpt.save(2, state)  # unchanged: costs a manifest
        ckpt.wait()
        self.assertLess(U.du(self.store_dir) - first, 64 << 10)
        state["w3"] = torch.randn(256 * 1024, generator=g)  # storage moved: re-protected
        state["w4"].mul_(2)                                   # changed in place
        state["new"] = torch.ones(5)
        del state["w9"]
        before = U.du(self.store_dir)
        ckpt.save(3, state)
        ckpt.wait()
        grew = U.du(self.store_dir) - before
        self.assertGreater(grew, 1 << 20)
        self.assertLess(grew, 3 << 20)  # about the 2 changed MiB, compressed
        U.same(state, ckpt.load())
        self.assertEqual(ckpt.load(step=2)["w3"].shape, (256 * 1024,))
        with self.assertRaises(ckpt.CkptError) as cm:
            ckpt.load(step=5)
        self.assertEqual(cm.exception.status, "CKPT_E_NOENT")

    def test_checkpoints_listed(self):
        self.assertEqual(ckpt.checkpoints(), [])  # a run with none
        t = torch.zeros(1 << 20)  # 4 MiB of zeros: compresses to little
        before = time.time()
        ckpt.save(1, {"t": t})
        t[0] = 1
        ckpt.save(5, {"t": t, "u": torch.ones(3)})
        ckpt.wait()
        rows = ckpt.checkpoints()
        self.assertEqual([r["step"] for r in rows], [5, 1])  # newest first, as load() tries
        for r in rows:
            self.assertGreaterEqual(r["raw_bytes"], 4 << 20)
            self.assertLess(r["stored_bytes"], 1 << 20)
            self.assertGreater(r["stored_bytes"], 0)
            self.assertEqual(r["world_size"], 1)
            self.assertGreaterEqual(r["time"], before - 1)
            self.assertLessEqual(r["time"], time.time() + 1)
        self.assertLessEqual(rows[0]["new_bytes"], rows[0]["stored_bytes"])
        self.assertGreater(rows[0]["items"], rows[1]["items"])  # "u" too
        self.reopen()  # another process would see the same
        self.assertEqual([r["step"] for r in ckpt.checkpoints()], [5, 1])

    def test_save_stalls_only_for_the_copy(self):
        # a slow store: the save returns long before its commit
        ckpt.close()
        os.environ["CKPT_CODEC"] = "zstd:19"  # a slow codec: seconds to persist
        try:
            ckpt.init(store=self.store, run=self.run_name)
            t = torch.randn(2 << 20)  # 8 MiB
            t0 = time.monotonic()
            ckpt.save(1, {"t": t})
            stall = time.monotonic() - t0
            ckpt.wait()
            total = time.monotonic() - t0
        finally:
            del os.environ["CKPT_CODEC"]
        self.assertLess(stall * 4, total, (stall, total))

    def test_skips_file_checkpoints_and_damage(self):
        state = {"a": torch.arange(100000, dtype=torch.int32), "s": 1}
        ckpt.save(5, state)
        ckpt.wait()
        state2 = {"a": torch.arange(100000, dtype=torch.int32) * 3, "s": 2}
        before = set(glob.glob(os.path.join(self.store_dir, self.run_name, "chunks", "*", "*")))
        ckpt.save(6, state2)
        ckpt.wait()
        six = set(glob.glob(os.path.join(self.store_dir, self.run_name, "chunks", "*", "*")))
        # a file checkpoint of the same run at a higher step (ckptrun save)
        f = os.path.join(self.tmp, "model.bin")
        with open(f, "wb") as fh:
            fh.write(b"file checkpoint")
        r = subprocess.run([U.CKPTRUN, "save", "--store", self.store, "--run", self.run_name,
                            "--step", "9", f], capture_output=True, text=True,
                           env=U.clean_env())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.reopen()
        self.assertEqual(ckpt.load()["s"], 2)  # step 9 is not save()'s
        # step 6's own chunks damaged (not step 9's file): load falls back to
        # step 5, with a warning
        for p in six - before:
            with open(p, "r+b") as fh:
                fh.seek(60)
                fh.write(b"\xff\x00\xff\x00")
        self.reopen()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            got = ckpt.load()
        self.assertEqual(got["s"], 1)
        U.same(state, got)
        self.assertTrue(any("instead of the newer step 6, which is damaged" in str(x.message)
                            for x in w), [str(x.message) for x in w])
        with self.assertRaises(ckpt.CkptError) as cm:
            ckpt.load(step=6)  # that step only: no fallback
        self.assertEqual(cm.exception.status, "CKPT_E_CORRUPT")
        # alone (no lease), nothing is marked: step 6 is still listed; a
        # trainer under ckptrun (the lease holder) marks it damaged in HEAD,
        # as libckpt's restore does, so the next start does not read it again
        self.assertEqual(self.listed(), [9, 6, 5])
        ckpt.close()
        code = "import ckpt; print('LOADED', ckpt.load()['s'])"
        r = subprocess.run([U.CKPTRUN, "run", "--store", self.store, "--run", self.run_name,
                            "--dir", os.path.join(self.tmp, "ck"), "--", U.PY, "-c", code],
                           capture_output=True, text=True, timeout=120, env=U.clean_env())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("LOADED 1", r.stdout)
        self.assertEqual(self.listed(), [9, 5], r.stderr)

    def listed(self):
        """The steps `ckptrun ls` lists (the damaged ones HEAD marks are not)."""
        r = subprocess.run([U.CKPTRUN, "ls", "--store", self.store, "--run", self.run_name],
                           capture_output=True, text=True, timeout=60, env=U.clean_env())
        self.assertEqual(r.returncode, 0, r.stderr)
        return [int(line.split()[0]) for line in r.stdout.splitlines()[1:] if line.strip()]

    def test_newer_structure_falls_back(self):
        # a step whose structure has a format this version does not read
        # (a newer ckpt wrote it): load() takes the one before it, as
        # libckpt does for a manifest of a newer format, and marks nothing
        ckpt.save(1, {"a": torch.arange(10.0), "s": 1})
        ckpt.wait()
        fmt = ckpt._state.FORMAT
        ckpt._state.FORMAT = fmt + 1
        try:
            ckpt.save(2, {"a": torch.arange(10.0) * 2, "s": 2})
            ckpt.wait()
        finally:
            ckpt._state.FORMAT = fmt
        self.reopen()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            got = ckpt.load()
        self.assertEqual(got["s"], 1)
        self.assertTrue(torch.equal(got["a"], torch.arange(10.0)))
        self.assertTrue(any("instead of the newer step 2" in str(x.message) for x in w),
                        [str(x.message) for x in w])
        with self.assertRaises(ckpt.CkptError) as cm:
            ckpt.load(step=2)
        self.assertEqual(cm.exception.status, "CKPT_E_UNSUPPORTED")
        self.assertIn("format %d; this version reads %d" % (fmt + 1, fmt), str(cm.exception))

    def test_import_touches_nothing(self):
        # a store that does not exist and a socket nobody listens on: import
        # neither opens them nor loads libckpt
        code = ("import sys, ckpt; assert 'ckpt._lib' in sys.modules; "
                "assert ckpt._lib._lib is None; assert ckpt._ctx is None; "
                "print(ckpt.checkpoint_dir(), ckpt.restored_step(), ckpt.saved('x', 1))")
        r = subprocess.run([U.PY, "-c", code], capture_output=True, text=True, timeout=60,
                           env=U.clean_env(CKPT_STORE="s3://nope/x", CKPT_DIR="/ck",
                                           CKPT_RESUMED="1", CKPT_STEP="41"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["/ck", "41", "False"])


class Failures(Base):
    def check_value_error(self, state, *words):
        with self.assertRaises((ValueError, TypeError, KeyError)) as cm:
            ckpt.save(1, state)
        for w in words:
            self.assertIn(w, str(cm.exception))

    def test_bad_states(self):
        self.check_value_error({"s": torch.eye(3).to_sparse()}, "'s'", "dense")
        self.check_value_error({"m": torch.empty(3, device="meta")}, "meta")
        self.check_value_error({"e": torch.ones(1, 4).expand(3, 4)}, "overlapping")
        self.check_value_error({"a/b": torch.ones(2)}, "'a/b'")
        self.check_value_error({"x": {(1, 2): torch.ones(2)}}, "(1, 2)")
        self.check_value_error({"": torch.ones(2)}, "item name")
        self.check_value_error({"d": {0: torch.ones(2), "0": torch.ones(2)}}, "'d/0'")
        self.check_value_error({".ckpt": torch.ones(2)}, "reserved")
        self.check_value_error({"f": lambda: 1}, "function")
        self.check_value_error({"o": np.array([object()])}, "objects")
        self.check_value_error({"q": torch.quantize_per_tensor(torch.ones(3), 0.1, 0,
                                                               torch.qint8)}, "quantized")

    def test_nothing_saved_by_refusals(self):
        with self.assertRaises(ValueError):
            ckpt.save(1, {"a/b": torch.ones(2)})
        ckpt.save(2, {"ok": torch.ones(2)})
        ckpt.wait()
        self.assertEqual(list(ckpt.load().keys()), ["ok"])

    def test_restricted_unpickling(self):
        ckpt.save(1, {"od": collections.OrderedDict(a=1), "when": __import__("datetime").date(
            2024, 1, 2), "obj": Frac(3)})
        ckpt.wait()
        with self.assertRaises(Exception) as cm:
            ckpt.load()
        self.assertIn("allow_pickle=True", str(cm.exception))
        got = ckpt.load(allow_pickle=True)
        self.assertEqual(got["obj"].n, 3)
        self.assertEqual(got["when"].year, 2024)

    def test_unreachable_store(self):
        ckpt.close()
        port = U.free_port()  # nobody listens there
        os.environ.update(AWS_ACCESS_KEY_ID="k", AWS_SECRET_ACCESS_KEY="s",
                          AWS_REGION="us-east-1", AWS_ENDPOINT_URL="http://127.0.0.1:%d" % port,
                          AWS_EC2_METADATA_DISABLED="true", CKPT_RETRY_BUDGET_MS="500")
        try:
            with self.assertRaises(ckpt.CkptError) as cm:
                ckpt.init(store="s3://bucket/x", run="r")
                ckpt.load()  # the first call that reads the store
            self.assertEqual(cm.exception.status, "CKPT_E_UNREACHABLE")
            self.assertIn("127.0.0.1 port %d" % port, str(cm.exception))
        finally:
            for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION",
                      "AWS_ENDPOINT_URL", "AWS_EC2_METADATA_DISABLED", "CKPT_RETRY_BUDGET_MS"):
                os.environ.pop(k, None)

    def test_background_failure_file_store(self):
        t = torch.arange(300000, dtype=torch.float32)
        ckpt.save(1, {"t": t})
        ckpt.wait()
        # the store's manifests directory is moved away and a file takes its
        # place: the next commits fail
        mdir = os.path.join(self.store_dir, self.run_name, "manifests")
        os.rename(mdir, mdir + ".away")
        with open(mdir, "w") as f:
            f.write("in the way")
        t.add_(1)
        ckpt.save(2, {"t": t})  # taken; fails in the background
        with self.assertRaises(ckpt.CkptError) as cm:
            ckpt.save(3, {"t": t})  # reports step 2's failure, after taking step 3
        self.assertIn("step 2 failed", str(cm.exception))
        self.assertIn(mdir, cm.exception.detail)
        with self.assertRaises(ckpt.CkptError) as cm:
            ckpt.wait()  # step 3 failed the same way
        self.assertIn("step 3", str(cm.exception))
        ckpt.wait()  # reported once
        os.unlink(mdir)
        os.rename(mdir + ".away", mdir)
        self.reopen()
        got = ckpt.load()
        self.assertTrue(torch.equal(got["t"], torch.arange(300000, dtype=torch.float32)))

    def test_background_failure_s3(self):
        ckpt.close()
        peer = U.S3rver(self.tmp)
        saved_env = dict(os.environ)
        os.environ.update(peer.env(), CKPT_RETRY_BUDGET_MS="1000")
        try:
            ckpt.init(store="s3://ckpt-test/py", run="r")
            g = torch.Generator().manual_seed(1)
            t = torch.randn(1 << 20, generator=g)
            ckpt.save(1, {"t": t})
            ckpt.wait()
            peer.stop()
            ckpt.save(2, {"t": t * 2})
            with self.assertRaises(ckpt.CkptError) as cm:
                ckpt.wait()
            self.assertIn(cm.exception.status, ("CKPT_E_UNREACHABLE", "CKPT_E_TRANSIENT"))
            self.assertIn("127.0.0.1", str(cm.exception))
        finally:
            ckpt.close()
            peer.stop()
            os.environ.clear()
            os.environ.update(saved_env)

    def test_world_size_without_distributed(self):
        ckpt.close()
        r = subprocess.run([U.PY, "-c", "import ckpt; ckpt.requested()"], capture_output=True,
                           text=True, timeout=60,
                           env=U.clean_env(CKPT_STORE=self.store, WORLD_SIZE="2", RANK="0"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("WORLD_SIZE=2 but torch.distributed is not initialised", r.stderr)


class Frac:
    """A class of this module: pickled by reference, refused by default."""

    def __init__(self, n):
        self.n = n


NUMPY_TRAINER = r"""
import sys
sys.modules["torch"] = None  # the trainer never has torch
import numpy as np, ckpt
steps, out = int(sys.argv[1]), sys.argv[2]
state = ckpt.load()
if state:
    w, step, rng = state["w"], state["step"] + 1, state["rng"]
    np.random.set_state(rng)
else:
    np.random.seed(0)
    w, step = {"a": np.zeros((64, 64), np.float32), "b": np.ones(1000, np.float64)}, 0
for s in range(step, steps):
    w["a"] += np.random.standard_normal((64, 64)).astype(np.float32)
    w["b"] *= 1.0001
    if s % 7 == 0:
        ckpt.save(s, {"w": w, "step": s, "rng": np.random.get_state(), "tag": b"x" * 2000})
    if s == int(sys.argv[3]):
        ckpt.wait()
        sys.exit(3)  # "preempted"
ckpt.wait()
np.save(out, np.concatenate([w["a"].ravel(), w["b"].astype(np.float32)]))
assert "torch" not in sys.modules or sys.modules["torch"] is None
"""


class NumpyOnly(Base):
    def test_numpy_trainer(self):
        ckpt.close()
        script = os.path.join(self.tmp, "np_trainer.py")
        with open(script, "w") as f:
            f.write(NUMPY_TRAINER)

        def run(steps, out, stop, run_name):
            return subprocess.run([U.PY, script, str(steps), out, str(stop)],
                                  capture_output=True, text=True, timeout=120,
                                  env=U.clean_env(CKPT_STORE=self.store, CKPT_RUN=run_name))
        ref = os.path.join(self.tmp, "ref.npy")
        r = run(60, ref, -1, "ref")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = os.path.join(self.tmp, "out.npy")
        for stop in (25, 45):
            r = run(60, out, stop, "np")
            self.assertEqual(r.returncode, 3, r.stderr)
        r = run(60, out, -1, "np")
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(ref, "rb") as a, open(out, "rb") as b:
            self.assertEqual(a.read(), b.read())


# A trainer alone (no ckptrun) for SIGTERM (argv: mode, out, steps): "asks"
# calls requested() every step and saves on it (and every 20 steps),
# "never" only saves every 20 steps, "stuck" asks once and then sleeps.
SIGTERM_TRAINER = r"""
import sys, time
import torch
import ckpt
mode, out, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
torch.manual_seed(0)
w, start = torch.zeros(1000), 0
state = ckpt.load()
if state:
    w.copy_(state["w"]); torch.set_rng_state(state["rng"]); start = state["step"] + 1
print("start", start, flush=True)
if mode == "stuck":
    ckpt.requested()
    print("step 30", flush=True)
    time.sleep(120)
for step in range(start, steps):
    w += torch.randn(1000)
    if (mode == "asks" and ckpt.requested()) or step % 20 == 0:
        ckpt.save(step, {"w": w, "step": step, "rng": torch.get_rng_state()})
    print("step", step, flush=True)
    time.sleep(0.01)
with open(out, "wb") as f:
    f.write(w.numpy().tobytes())
"""


class Alone(Base):
    """SIGTERM_TRAINER run alone, stopped by a signal."""

    def setUp(self):
        super().setUp()
        ckpt.close()
        self.script = os.path.join(self.tmp, "term_trainer.py")
        with open(self.script, "w") as f:
            f.write(SIGTERM_TRAINER)

    def start(self, mode, out, steps=400, **env):
        p = subprocess.Popen([U.PY, self.script, mode, out, str(steps)], text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=U.clean_env(CKPT_STORE=self.store, CKPT_RUN=mode, **env))
        for line in p.stdout:
            if line.startswith("step ") and int(line.split()[1]) >= 30:
                return p
        self.fail("the trainer ended before step 30: " + p.stderr.read())

    def end(self, p, timeout=60):
        out, err = p.communicate(timeout=timeout)
        return p.returncode, err

    def newest(self, run):
        ckpt.init(store=self.store, run=run)
        try:
            return ckpt.load()["step"]
        finally:
            ckpt.close()

    def run_to_end(self, run, out):
        r = subprocess.run([U.PY, self.script, "asks", out, "100"], capture_output=True,
                           text=True, timeout=120,
                           env=U.clean_env(CKPT_STORE=self.store, CKPT_RUN=run))
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def stop_then_resume(self, sig, said, twice=False):
        """The "asks" trainer stopped by `sig` (twice within 0.1 s: a
        launcher's forward), which dies of it once the stop's save committed
        and says so (`said` with the step as group 1); the same command
        resumes at the next step and ends byte-identical. @return stderr."""
        ref, out = os.path.join(self.tmp, "ref.bin"), os.path.join(self.tmp, "out.bin")
        self.run_to_end("ref", ref)
        p = self.start("asks", out, 100)
        p.send_signal(sig)
        if twice:
            time.sleep(0.1)
            p.send_signal(sig)  # a launcher's forward: the same stop
        rc, err = self.end(p)
        self.assertEqual(rc, -sig, err)  # dies of it, once saved
        m = re.search(said, err)
        self.assertTrue(m, err)
        step = int(m.group(1))
        self.assertGreater(step, 30)  # the stop's save, not the periodic one at 20
        self.assertEqual(self.newest("asks"), step)
        self.assertIn("start %d" % (step + 1), self.run_to_end("asks", out))
        with open(ref, "rb") as a, open(out, "rb") as b:
            self.assertEqual(a.read(), b.read(), "resumed run differs from the one never stopped")
        return err, step



class AloneSigterm(Alone):
    """Without ckptrun, a SIGTERM to a trainer that asks (requested()) is a
    stop: it saves at its next step, waits for the commit, says so and dies
    of the SIGTERM; one that never asks dies at once; a stuck one exits 143
    after CKPT_STOP_GRACE; a second SIGTERM ends it now, a repeat within
    0.5 s (a launcher forwarding it) is absorbed."""

    def test_stop_saves_commits_and_resumes_exactly(self):
        self.stop_then_resume(signal.SIGTERM, r"ckpt: SIGTERM: step (\d+) is committed; exiting",
                              twice=True)

    def test_never_asks_dies_at_once(self):
        p = self.start("never", os.path.join(self.tmp, "o"))
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        rc, err = self.end(p)
        self.assertEqual(rc, -signal.SIGTERM, err)
        self.assertLess(time.monotonic() - t0, 5)
        self.assertNotIn("ckpt: SIGTERM", err)
        self.assertEqual(self.newest("never"), 20)

    def test_stuck_exits_after_grace_and_second_sigterm_now(self):
        p = self.start("stuck", os.path.join(self.tmp, "o"), CKPT_STOP_GRACE="1s")
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        rc, err = self.end(p)
        self.assertEqual(rc, 143, err)
        self.assertGreater(time.monotonic() - t0, 0.9)
        self.assertIn("ckpt: SIGTERM: no ckpt.save() within 1s of it (CKPT_STOP_GRACE): "
                      "exiting without a final checkpoint", err)
        p = self.start("stuck", os.path.join(self.tmp, "o"))
        p.send_signal(signal.SIGTERM)
        time.sleep(0.8)
        p.send_signal(signal.SIGTERM)
        rc, err = self.end(p, timeout=10)
        self.assertEqual(rc, -signal.SIGTERM, err)
        self.assertIn("ckpt: a second SIGTERM: exiting now", err)


class AloneCtrlC(Alone):
    """Without ckptrun, in one process, the first Ctrl-C (SIGINT) to a
    trainer that asks is a stop: it saves at its next step, waits for the
    commit, says so and raises KeyboardInterrupt from that save (exit 130,
    the traceback, then what resumes it); one that never asks is interrupted
    at once; a second Ctrl-C interrupts now; CKPT_STOP_GRACE=0 keeps the
    default."""

    def test_stop_saves_commits_and_resumes_exactly(self):
        # SIGINT: Python's end of a KeyboardInterrupt
        err, step = self.stop_then_resume(signal.SIGINT,
                                          r"ckpt: Ctrl-C: step (\d+) is committed; stopping\n")
        self.assertIn("ckpt: Ctrl-C: saving at the next ckpt.requested()", err)
        self.assertRegex(err, r"\nKeyboardInterrupt\nckpt: the trainer interrupted; step %d is "
                              r"committed: run the same command again" % step)

    def test_never_asks_dies_at_once(self):
        for run, env in (("never", {}), ("asks", {"CKPT_STOP_GRACE": "0"})):
            p = self.start(run, os.path.join(self.tmp, "o"), **env)
            t0 = time.monotonic()
            p.send_signal(signal.SIGINT)
            rc, err = self.end(p)
            self.assertEqual(rc, -signal.SIGINT, err)
            self.assertLess(time.monotonic() - t0, 5)
            self.assertNotIn("ckpt: Ctrl-C", err)
            self.assertIn("KeyboardInterrupt", err)
            self.assertEqual(self.newest(run), 20)

    def test_stuck_second_ctrl_c_now(self):
        # stuck after asking: the first Ctrl-C only says it; the second
        # interrupts now, and nothing was committed
        p = self.start("stuck", os.path.join(self.tmp, "o"))
        p.send_signal(signal.SIGINT)
        time.sleep(0.5)
        self.assertIsNone(p.poll())
        p.send_signal(signal.SIGINT)
        rc, err = self.end(p, timeout=10)
        self.assertEqual(rc, -signal.SIGINT, err)
        self.assertIn("(Ctrl-C again stops now)", err)
        self.assertIn("ckpt: the trainer interrupted; no checkpoint is committed yet", err)


class AloneLoaderWorkers(Base):
    """Alone, batches from 2 DataLoader workers in the trainer's process
    group: SIGTERM to the whole group (a spot VM's shutdown), then Ctrl-C
    (the terminal's SIGINT reaches the group) -- the workers leave the stop
    to the trainer (before, they died of it and the trainer's next batch
    raised before its save) --, each saved, committed and said; the run
    ends byte-identical to one never stopped, and no worker is left."""

    def run_trainer(self, run, out, stop=None):
        cmd = [U.PY, os.path.join(U.HERE, "py_trainer.py"), "--steps", "1200", "--every",
               "1000000000", "--sleep-ms", "3", "--loader-workers", "2", "--out", out]
        env = U.clean_env(CKPT_STORE=self.store, CKPT_RUN=run)
        if stop is None:
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr)
            return r.stderr
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
        line = p.stderr.readline()
        self.assertIn("start at step", line)
        time.sleep(random.uniform(0.5, 1.0))
        os.killpg(p.pid, stop)
        _, err = p.communicate(timeout=120)
        self.assertEqual(p.returncode, -stop, line + err)
        self.assertNotIn("exited unexpectedly", err)
        self.assertNotIn("killed by signal", err)
        return line + err

    def test_group_sigterm_then_ctrl_c(self):
        ckpt.close()
        ref, out = os.path.join(self.tmp, "ref"), os.path.join(self.tmp, "out")
        self.run_trainer("ref", ref)
        err = self.run_trainer("dl", out, signal.SIGTERM)
        m = re.search(r"ckpt: SIGTERM: step (\d+) is committed; exiting", err)
        self.assertTrue(m, err)
        n1 = int(m.group(1))
        err = self.run_trainer("dl", out, signal.SIGINT)
        self.assertIn("start at step %d " % (n1 + 1), err)
        m = re.search(r"ckpt: Ctrl-C: step (\d+) is committed; stopping", err)
        self.assertTrue(m, err)
        n2 = int(m.group(1))
        self.assertGreater(n2, n1)
        err = self.run_trainer("dl", out)
        self.assertIn("start at step %d " % (n2 + 1), err)
        with open(ref, "rb") as a, open(out, "rb") as b:
            self.assertEqual(a.read(), b.read(), "resumed run differs from the one never stopped")
        left = subprocess.run(["pgrep", "-f", "py_trainer.py.*" + re.escape(out)],
                              capture_output=True, text=True).stdout
        self.assertEqual(left, "", "workers left behind")


class WaitProgress(Base):
    """A wait for a save that lasts (a slow link; here a short threshold)
    says what waits, for which step, how far the upload is, and how it
    ended; CKPT_PROGRESS_AFTER=off says nothing."""

    SCRIPT = ("import torch, ckpt\n"
              "s = {'w': torch.randn(96 << 20)}\n"
              "ckpt.save(1, s)\n"
              "s['w'].add_(1)\n"
              "ckpt.save(2, s)\n"
              "ckpt.wait()\n")

    def run_script(self, after):
        r = subprocess.run([U.PY, "-c", self.SCRIPT], capture_output=True, text=True,
                           timeout=300, env=U.clean_env(CKPT_STORE=self.store, CKPT_RUN=after,
                                                        CKPT_PROGRESS_AFTER=after))
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stderr

    def test_progress_lines(self):
        ckpt.close()
        err = self.run_script("0.02s")
        self.assertRegex(err, r"ckpt: (ckpt\.save\(step 2\) waits for step 1|ckpt\.wait\(\) "
                              r"waits for step 2) to be committed \(\d+\.\d s\): [\d.]+ MiB "
                              r"of \S+ MiB sent, ([\d.]+ MB/s, )?\d+% of the state encoded\n")
        self.assertRegex(err, r"ckpt: (ckpt\.save\(step 2\)|ckpt\.wait\(\)): the wait ended "
                              r"after [\d.]+ s: committed\n")
        self.assertNotIn("waits for", self.run_script("off"))


class AloneException(Base):
    def test_exception_says_what_resumes(self):
        """A trainer alone that dies of an exception says, after the
        traceback, which step a rerun resumes from (its last save, waited
        for; else the newest in the store; else that there is none)."""
        ckpt.close()
        code = ("import sys, torch, ckpt\nst = ckpt.load()\nstart = st['step'] + 1 if st "
                "else 0\nif sys.argv[1] == 'now':\n    raise MemoryError('at once')\n"
                "for step in range(start, 100):\n    if step % 10 == 0:\n        ckpt.save("
                "step, {'w': torch.full((4,), float(step)), 'step': step})\n    if step == "
                "int(sys.argv[1]):\n        raise RuntimeError('out of memory (a test)')\n")
        env = U.clean_env(CKPT_STORE=self.store, CKPT_RUN="exc")

        def run(arg):
            r = subprocess.run([U.PY, "-c", code, arg], capture_output=True, text=True,
                               timeout=120, env=env)
            self.assertEqual(r.returncode, 1, r.stderr)
            return r.stderr.strip().splitlines()[-1]

        self.assertEqual(run("now"), "ckpt: the trainer ended by an exception; no checkpoint "
                                     "is committed yet")
        self.assertEqual(run("35"), "ckpt: the trainer ended by an exception; step 30 is "
                                    "committed: run the same command again to resume "
                                    "(ckpt.load() returns it)")
        self.assertRegex(run("now"), r"; step 30 is committed")  # none of its own: the store's
        r = subprocess.run([U.PY, "-c", code, "200"], capture_output=True, text=True,
                           timeout=120, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("ckpt:", r.stderr)  # a run that ends well says nothing


# The README's example as a user copies it: its ```python block runs as
# written around a model, an optimizer, `steps` and train_one_step() of
# this wrapper (argv: steps, out, request_at, crash_at). At request_at the
# wrapper sends itself SIGUSR1 (the request signal when alone), so the
# example's requested() saves that step; at crash_at it waits for that
# commit and dies without a word. It prints the step it starts at.
README_WRAPPER = r"""
import os, re, signal, sys
import torch
import ckpt

src = open(sys.argv[5]).read()
snippet = re.search(r"```python\n(.*?)```", src[src.index("## Three ways in"):], re.S).group(1)
steps, out = int(sys.argv[1]), sys.argv[2]
request_at, crash_at = int(sys.argv[3]), int(sys.argv[4])
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


def train_one_step():
    s = globals()["step"]
    if s == crash_at:
        ckpt.wait()
        os._exit(3)
    x = torch.randn(32, 8)  # the global RNG: a resume must restore it
    loss = (model(x) - x.sum(1, keepdim=True)).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if s == request_at:
        os.kill(os.getpid(), signal.SIGUSR1)


exec(snippet.replace("for step in", "print('start', start, flush=True)\nfor step in", 1))
with open(out, "wb") as f:
    for p in model.parameters():
        f.write(p.detach().numpy().tobytes())
"""


class ReadmeExample(Base):
    def test_readme_example_resumes_exactly(self):
        """README's example, copied as is: a run stopped after a requested
        save and resumed ends with the parameters of a run never stopped
        (the saved step is not trained twice, the RNG is restored), its
        newest checkpoint is the last step, and running it again after the
        end trains nothing. docs/python.md shows the same example."""
        def first_block(text):
            """The first python block past its `import ckpt` line (which
            docs/python.md comments)."""
            return text.split("```python\n", 1)[1].split("```", 1)[0].split("\n", 1)[1]

        readme = os.path.join(U.SRC, "README.md")
        with open(readme) as f, open(os.path.join(U.SRC, "docs", "python.md")) as g:
            self.assertEqual(first_block(f.read().split("## Three ways in", 1)[1]),
                             first_block(g.read()))
        ckpt.close()
        script = os.path.join(self.tmp, "readme_trainer.py")
        with open(script, "w") as f:
            f.write(README_WRAPPER)

        def life(run_name, out, request_at=-1, crash_at=-1):
            r = subprocess.run([U.PY, script, "40", out, str(request_at), str(crash_at), readme],
                               capture_output=True, text=True, timeout=120,
                               env=U.clean_env(CKPT_STORE=self.store, CKPT_RUN=run_name))
            return r.returncode, r.stdout + r.stderr

        ref, out = os.path.join(self.tmp, "ref.bin"), os.path.join(self.tmp, "out.bin")
        rc, text = life("ref", ref)
        self.assertEqual(rc, 0, text)
        self.assertIn("start 0", text)
        rc, text = life("readme", out, request_at=17, crash_at=18)
        self.assertEqual(rc, 3, text)
        rc, text = life("readme", out)
        self.assertEqual(rc, 0, text)
        self.assertIn("start 18", text)
        with open(ref, "rb") as a, open(out, "rb") as b:
            self.assertEqual(a.read(), b.read(), "resumed run differs from the one never stopped")
        ckpt.init(store=self.store, run="readme")
        self.assertEqual(ckpt.load()["step"], 39)  # the last step is in the store
        ckpt.close()
        rc, text = life("readme", out)
        self.assertEqual(rc, 0, text)
        self.assertIn("start 40", text)


if __name__ == "__main__":
    unittest.main()
