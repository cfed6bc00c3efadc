/* progress.c -- the counters behind ckpt_progress() (progress.h). */
#include "progress.h"
#include "util.h"

void ckpt__progress_begin(struct ckpt__progress *p, int phase, uint64_t step)
{
    atomic_store(&p->bytes_done, 0);
    atomic_store(&p->bytes_total, 0);
    atomic_store(&p->chunks_done, 0);
    atomic_store(&p->chunks_total, 0);
    atomic_store(&p->stored_bytes, 0);
    atomic_store(&p->checkpoints_done, 0);
    atomic_store(&p->step, step);
    atomic_store(&p->started_ms, ckpt_now_ms());
    atomic_store(&p->phase, phase);
}
