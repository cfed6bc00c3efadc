/*
 * progress.h -- the counters behind ckpt_progress() (ckpt.h). The pipeline,
 * restore and verify paths bump them with relaxed atomics (one add per chunk:
 * nothing they do waits on a display); ckpt_progress() reads them from any
 * thread.
 */
#ifndef CKPT_PROGRESS_H
#define CKPT_PROGRESS_H

#include <stdatomic.h>
#include <stdint.h>

struct ckpt__progress {
    atomic_int phase;
    atomic_uint_fast64_t step, bytes_done, bytes_total, chunks_done, chunks_total;
    atomic_uint_fast64_t stored_bytes, checkpoints_done;
    atomic_int_fast64_t started_ms;
};

/* A new phase: every counter back to zero, then the phase and its start. */
void ckpt__progress_begin(struct ckpt__progress *p, int phase, uint64_t step);

static inline void ckpt__progress_add(atomic_uint_fast64_t *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

#endif
