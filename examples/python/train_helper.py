#!/usr/bin/python3
"""train.py's trainer, taking part in ckpt through ckpt_helper.

The model, data, checkpoint format and resume logic are train.py's; what
changes is the five lines marked `ckpt:` -- requests come from ckpt_helper
(the preload shim's in-process API, or SIGUSR1), and ckptrun is told when a
checkpoint directory is complete. Same CLI, same output bytes as train.py.

    ckptrun -- /usr/bin/python3 train_helper.py --steps 200 --every 50 --out final.bin
    ckptrun --preload -- /usr/bin/python3 train_helper.py ...
"""

import os
import sys

import ckpt_helper as ckpt  # ckpt: first, so a request during imports is kept

import train  # noqa: E402


def main(argv=None):
    args = train.parse_args(argv)
    ckpt_dir = args.dir or ckpt.checkpoint_dir()  # ckpt: CKPT_DIR or ./checkpoints
    os.makedirs(ckpt_dir, mode=0o700, exist_ok=True)

    train.setup_determinism()
    model, opt, gen = train.build()
    train.remove_temporaries(ckpt_dir)
    step = train.resume(ckpt_dir, model, opt, gen)
    if step:
        print("train_helper.py: resumed at step %d (ckptrun restored %s)"
              % (step, ckpt.restored_step()), file=sys.stderr)  # ckpt: info

    while step < args.steps:
        train.train_step(model, opt, gen)
        step += 1
        # requested() first: a request is reported once, never lost behind
        # a periodic save.
        if ckpt.requested() or (args.every and step % args.every == 0):  # ckpt:
            path = train.save_checkpoint(ckpt_dir, step, model, opt, gen)
            ckpt.saved(path, step)  # ckpt: tell ckptrun it is complete

    train.write_output(args.out, train.final_bytes(model))
    return 0


if __name__ == "__main__":
    sys.exit(main())
