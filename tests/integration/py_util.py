"""Helpers of the tests of the Python package (tests/integration/test_py_*.py):
where the build is, the environment a trainer gets, comparing states,
starting an npm store peer (s3rver) on a free loopback port."""
import os
import shutil
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("CKPT_SRC") or os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("CKPT_BUILD") or os.path.join(SRC, "build")
BIN = os.environ.get("CKPT_BIN") or os.path.join(BUILD, "bin")
PYDIR = os.path.join(BUILD, "python")
CKPTRUN = os.path.join(BIN, "ckptrun")
PY = "/usr/bin/python3"

if PYDIR not in sys.path:
    sys.path.insert(0, PYDIR)


def clean_env(**kw):
    """This process's environment without CKPT_*, launcher and SLURM
    variables, with the package on PYTHONPATH, plus kw."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CKPT_", "SLURM_", "OMPI_", "PMI_")) and
           k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LD_PRELOAD")}
    env["PYTHONPATH"] = PYDIR + (":" + HERE)
    env["CKPT_NOTICE"] = "none"
    env.update(kw)
    return env


def same(a, b, path="state"):
    """Raise AssertionError naming the first difference of two states:
    values, types, dtypes, shapes, strides, dict key order and key types."""
    import numpy as np
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor), (path, type(b))
        assert (a.dtype, tuple(a.shape), a.stride(), str(a.device)) == \
            (b.dtype, tuple(b.shape), b.stride(), str(b.device)), \
            (path, a.dtype, b.dtype, a.shape, b.shape, a.stride(), b.stride())
        assert torch.equal(a.cpu(), b.cpu()) if a.dtype != torch.bool else bool((a == b).all()), \
            path
        assert type(a) is type(b), (path, type(a), type(b))
        return
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape, path
        assert a.tobytes() == b.tobytes(), path
        return
    assert type(a) is type(b), (path, type(a), type(b))
    if isinstance(a, dict):
        assert list(a.keys()) == list(b.keys()), (path, list(a.keys()), list(b.keys()))
        for (ka, va), kb in zip(a.items(), b.keys()):
            assert type(ka) is type(kb), (path, ka, kb)
            same(va, b[kb], "%s/%r" % (path, ka))
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, "%s/%d" % (path, i))
    elif isinstance(a, float) and a != a:
        assert b != b, path
    else:
        assert a == b, (path, a, b)


def free_port():
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


class S3rver:
    """s3rver (tests/npm) on a free loopback port, bucket `bucket`; env()
    gives the variables a client needs. Raises unittest.SkipTest without
    node or the npm modules."""

    def __init__(self, tmp, bucket="ckpt-test"):
        import unittest
        node = shutil.which("node")
        mod = os.path.join(SRC, "tests/npm/node_modules/s3rver")
        if not node or not os.path.exists(mod):
            raise unittest.SkipTest("node or tests/npm/node_modules/s3rver missing")
        self.port = free_port()
        self.data = os.path.join(tmp, "s3rver")
        os.makedirs(self.data, exist_ok=True)
        self.p = subprocess.Popen(
            [node, "--openssl-legacy-provider", os.path.join(mod, "bin/s3rver.js"), "-d",
             self.data, "-a", "127.0.0.1", "-p", str(self.port), "--configure-bucket", bucket],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", self.port), 1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("s3rver did not start")

    def env(self):
        return dict(AWS_ACCESS_KEY_ID="S3RVER", AWS_SECRET_ACCESS_KEY="S3RVER",
                    AWS_REGION="us-east-1", AWS_ENDPOINT_URL="http://127.0.0.1:%d" % self.port,
                    AWS_EC2_METADATA_DISABLED="true", CKPT_S3_CONDITIONAL="0")

    def stop(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


def du(path):
    """Bytes of the files under path."""
    n = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                n += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return n
