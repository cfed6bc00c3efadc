/* progress.c -- ckpt_progress() and its counters (progress.h, ckpt.h). */
#include <string.h>

#include "ctx.h"
#include "progress.h"

void ckpt__progress_begin(struct ckpt__progress *p, int phase, uint64_t step)
{
    atomic_store(&p->bytes_done, 0);
    atomic_store(&p->bytes_total, 0);
    atomic_store(&p->chunks_done, 0);
    atomic_store(&p->chunks_total, 0);
    atomic_store(&p->stored_bytes, 0);
    atomic_store(&p->checkpoints_done, 0);
    atomic_store(&p->step, step);
    atomic_store(&p->started_ms, ckpt__now_ms());
    atomic_store(&p->phase, phase);
}

ckpt_status ckpt_progress(struct ckpt_ctx *ctx, struct ckpt_progress *out)
{
    struct ckpt__progress *p;

    if (!ctx || !out)
        return CKPT_E_INVAL;
    p = &ctx->progress;
    memset(out, 0, sizeof *out);
    out->phase = (ckpt_progress_phase)atomic_load(&p->phase);
    out->step = atomic_load(&p->step);
    out->bytes_done = atomic_load(&p->bytes_done);
    out->bytes_total = atomic_load(&p->bytes_total);
    out->chunks_done = atomic_load(&p->chunks_done);
    out->chunks_total = atomic_load(&p->chunks_total);
    out->stored_bytes = atomic_load(&p->stored_bytes);
    out->checkpoints_done = atomic_load(&p->checkpoints_done);
    out->started_ms = atomic_load(&p->started_ms);
    return CKPT_OK;
}
