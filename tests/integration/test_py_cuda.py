#!/usr/bin/python3
"""`import ckpt` with CUDA tensors (label cuda): saved as libckpt device
regions (ckpt_protect_region with CKPT_REGION_DEVICE), loaded back onto
their device or where map_location says; tensors on two GPUs in one
process are refused. Exits 77 (skip, shown by ctest) without a CUDA
device usable by torch, or without CUDA in libckpt."""
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import py_util as U  # noqa: E402

try:
    import torch
except ImportError:
    torch = None
if torch is None or not torch.cuda.is_available():
    print("no CUDA device usable by torch here: skipped")
    sys.exit(77)

import ckpt  # noqa: E402


class Cuda(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ckpt-pycuda-")
        ckpt.init(store="file://" + os.path.join(self.tmp, "store"), run="cuda")

    def tearDown(self):
        ckpt.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_round_trip(self):
        g = torch.Generator(device="cuda").manual_seed(0)
        state = {"w": torch.randn(1 << 20, device="cuda", generator=g).to(torch.bfloat16),
                 "m": torch.randn(300, 200, device="cuda", generator=g).t(),
                 "cpu": torch.arange(10), "step": 4}
        try:
            ckpt.save(4, state)
        except ckpt.CkptError as e:
            if e.status == "CKPT_E_UNSUPPORTED":
                self.skipTest("libckpt without CUDA: %s" % e)
            raise
        state["w"].zero_()  # after the copy: not in the checkpoint
        ckpt.wait()
        got = ckpt.load()
        self.assertEqual(got["w"].device.type, "cuda")
        self.assertFalse(bool((got["w"] == 0).all()))
        self.assertEqual(got["m"].stride(), state["m"].stride())
        cpu = ckpt.load(map_location="cpu")
        self.assertEqual(cpu["m"].device.type, "cpu")
        self.assertTrue(torch.equal(cpu["m"], got["m"].cpu()))

    def test_two_gpus_refused(self):
        if torch.cuda.device_count() < 2:
            self.skipTest("one GPU")
        with self.assertRaises(ckpt.CkptError):
            ckpt.save(1, {"a": torch.ones(4, device="cuda:0"),
                          "b": torch.ones(4, device="cuda:1")})


if __name__ == "__main__":
    unittest.main()
