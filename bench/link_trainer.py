#!/usr/bin/python3
"""link_trainer.py -- the Python trainer of bench/run_link.sh: `import ckpt`
(libckpt/python/ckpt) under ckptrun, with the state bench/py_bench.py
uses -- bf16 weights N(0, 0.02) and AdamW's fp32 exp_avg and exp_avg_sq, 10
bytes a parameter over 32 layers, --mb MiB in all.

    link_trainer.py --build BUILD --mb MB [--steps N]

Each step is an AdamW update of every tensor from a fixed pseudo-gradient
(so a step costs what an optimizer step costs, and the moments stay dense);
at ckpt.requested() (ckptrun's notice) it saves the state, as a trainer
does. It resumes from ckpt.load() and stops after --steps steps (recover:
the step it resumed from), printing "resumed from step N" or "starting
fresh" first.
"""
import argparse
import os
import sys

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--build", required=True)
ap.add_argument("--mb", type=int, default=1024)
ap.add_argument("--steps", type=int, default=1 << 40)
args = ap.parse_args()
sys.path.insert(0, os.path.join(os.path.abspath(args.build), "python"))
import ckpt  # noqa: E402

LAYERS = 32
params = (args.mb << 20) // 10 // LAYERS // 1024 * 1024
torch.set_num_threads(max(1, os.cpu_count() or 1))
state = ckpt.load()
if state is not None:
    step = state["step"]
    print("link_trainer: resumed from step %d" % step, flush=True)
else:
    g = torch.Generator().manual_seed(0)
    model, ostate = {}, {}
    for i in range(LAYERS):
        model["layers.%d.weight" % i] = torch.empty(params // 1024, 1024).normal_(
            0, 0.02, generator=g).to(torch.bfloat16)
        ostate[i] = {"exp_avg": torch.zeros(params // 1024, 1024),
                     "exp_avg_sq": torch.zeros(params // 1024, 1024)}
    state = {"model": model, "optim": {"state": ostate}, "step": 0}
    step = 0
    print("link_trainer: starting fresh", flush=True)
grad = torch.empty(params // 1024, 1024).normal_(0, 1e-3, generator=torch.Generator().manual_seed(1))
while step < args.steps:
    step += 1
    for i in range(LAYERS):
        w = state["model"]["layers.%d.weight" % i]
        s = state["optim"]["state"][i]
        g = grad * (1.0 + 0.01 * i)
        s["exp_avg"].mul_(0.9).add_(g, alpha=0.1)
        s["exp_avg_sq"].mul_(0.999).addcmul_(g, g, value=0.001)
        upd = s["exp_avg"] / (s["exp_avg_sq"].sqrt() + 1e-8)
        w.copy_((w.float() * (1 - 1e-6) - 1e-4 * upd).to(torch.bfloat16))
    state["step"] = step
    if ckpt.requested():
        ckpt.save(step, state)
ckpt.wait()
ckpt.close()
