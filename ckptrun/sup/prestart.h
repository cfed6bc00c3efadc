/*
 * prestart.h -- the restore before start (DESIGN.md §3, "The child"):
 * before `run` and `recover` start the command, the run's newest committed
 * checkpoint of files (marked in the run record) is restored into CKPT_DIR
 * under its original names, so the trainer's own resume logic finds it.
 * Checkpoints of memory regions are libckpt's to restore inside the process.
 *
 * A damaged checkpoint is passed over for an older one (and marked damaged
 * in HEAD, so the run's commits resume past it); any other failure (the
 * store, this machine) stops the start: an older checkpoint would hit the
 * same wall, or resume the trainer below an intact one.
 */
#ifndef CKPTRUN_PRESTART_H
#define CKPTRUN_PRESTART_H

#include <stdint.h>
#include "ckpt.h"

struct record;

struct prestart {
    int64_t last_step;        /* newest committed step of the run, -1 none */
    int resumed;              /* a checkpoint of files was restored */
    uint64_t restored_step;   /* ... at this step */
    int trainer_restores;     /* the newest checkpoint holds the trainer's memory */
    uint64_t trainer_step;    /* (libckpt, `import ckpt`): it restores it itself */
};

/* Restore into `dir` (absolute, existing) through `ctx` (fenced at our
 * epoch); `run` and `store` name them in messages. @return 0 (*out filled),
 * or an exit code (logged). */
int prestart_restore(struct ckpt_ctx *ctx, struct record *rec, const char *run,
                     const char *store, const char *dir, struct prestart *out);

#endif
