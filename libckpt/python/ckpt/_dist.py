"""ckpt._dist -- libckpt's `struct ckpt_collective` over torch.distributed.

The ranks of a torchrun job agree through the job's own engine (ckpt.h,
"Ranks"). The calls go to a gloo group of our own, made at the first ckpt
call on every rank (new_group is itself collective): CPU tensors whatever
the job's backend (NCCL takes only CUDA ones), and our collectives never mix
with the trainer's. libckpt calls them only from the thread that calls
ckpt (the training thread), every rank in the same order.

libckpt reduces unsigned 64-bit integers; torch has no uint64, so values
travel as int64: shifted by 2**63 for MAX/MIN (an order-preserving map),
as their two's complement for SUM (the same bits modulo 2**64).
"""

import sys

from . import _lib as L

_OFFSET = 1 << 63
_MASK = (1 << 64) - 1


class TorchCollective:
    """A ckpt_collective on a gloo group of torch.distributed. Keep the
    object alive as long as the context that uses it."""

    def __init__(self, timeout=None):
        import torch.distributed as dist
        self.dist = dist
        kw = {"backend": "gloo"}
        if timeout is not None:
            kw["timeout"] = timeout
        self.group = dist.new_group(**kw)
        self.rank = dist.get_rank()
        self.size = dist.get_world_size()
        self.error = None  # the last failure, for the error message
        self._reduce = L.ALLREDUCE_FN(self._allreduce)
        self._barrier = L.BARRIER_FN(self._barrier_fn)
        self.struct = L.Collective(version=L.COLLECTIVE_VERSION, rank=self.rank,
                                   size=self.size, user=None, allreduce_u64=self._reduce,
                                   barrier=self._barrier)

    def _allreduce(self, _user, vals, n, op):
        try:
            import torch
            d = self.dist
            raw = [vals[i] for i in range(n)]
            if op == L.REDUCE_SUM:
                t = torch.tensor([v - (1 << 64) if v >= _OFFSET else v for v in raw],
                                 dtype=torch.int64)
                rop = d.ReduceOp.SUM
            else:
                t = torch.tensor([v - _OFFSET for v in raw], dtype=torch.int64)
                rop = d.ReduceOp.MAX if op == L.REDUCE_MAX else d.ReduceOp.MIN
            d.all_reduce(t, op=rop, group=self.group)
            for i, v in enumerate(t.tolist()):
                vals[i] = (v & _MASK) if op == L.REDUCE_SUM else v + _OFFSET
            return 0
        except BaseException as e:  # a callback must not raise into C
            self.error = e
            sys.stderr.write("ckpt: torch.distributed all_reduce failed on rank %d: %s\n"
                             % (self.rank, e))
            return 1

    def _barrier_fn(self, _user):
        try:
            self.dist.barrier(group=self.group)
            return 0
        except BaseException as e:
            self.error = e
            sys.stderr.write("ckpt: torch.distributed barrier failed on rank %d: %s\n"
                             % (self.rank, e))
            return 1


def world():
    """(rank, size, initialised) of torch.distributed as the job sees it:
    (0, 1, False) when it is not imported or not initialised."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return 0, 1, False
    return dist.get_rank(), dist.get_world_size(), True
