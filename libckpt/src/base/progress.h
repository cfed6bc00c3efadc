/*
 * progress.h -- the counters behind ckpt_progress() (ckpt.h). The pipeline,
 * restore and verify paths bump them with relaxed atomics (one add per chunk:
 * nothing they do waits on a display); ckpt_progress() reads them from any
 * thread.
 *
 * A save's bytes sent are not counted here: the store counts what leaves
 * (ckpt_store_ops.sent, as the transport hands each piece of a body to the
 * network), and the save's share is the store's count less its reading when
 * the save began, frozen when the save ends (a context has its own store
 * handle, and one save at a time: nothing else of it uploads meanwhile).
 */
#ifndef CKPT_PROGRESS_H
#define CKPT_PROGRESS_H

#include <stdatomic.h>
#include <stdint.h>

struct ckpt_store;

/* Where a phase's count of bytes sent stands. */
enum {
    CKPT__SENT_NONE = 0, /* not a save, or the store cannot tell */
    CKPT__SENT_LIVE = 1, /* the store's count less sent_base */
    CKPT__SENT_FINAL = 2 /* the save is over: sent_final */
};

struct ckpt__progress {
    atomic_int phase;
    atomic_uint_fast64_t step, bytes_done, bytes_total, chunks_done, chunks_total;
    atomic_uint_fast64_t stored_bytes, checkpoints_done, encoded_bytes;
    atomic_int_fast64_t started_ms;
    atomic_int sent_state;                    /* CKPT__SENT_* */
    atomic_uint_fast64_t sent_base, sent_final;
};

/* A new phase: every counter back to zero, then the phase and its start. */
void ckpt__progress_begin(struct ckpt__progress *p, int phase, uint64_t step);
/* A save's count of bytes sent starts (after ckpt__progress_begin) from
 * the store's count now; nothing when the store cannot tell. */
void ckpt__progress_sent_begin(struct ckpt__progress *p, struct ckpt_store *st);
/* The save is over: its count of bytes sent stays what it is now. */
void ckpt__progress_sent_end(struct ckpt__progress *p, struct ckpt_store *st);
/* The save's bytes sent so far. @return 1, or 0 when not counted. */
int ckpt__progress_sent(struct ckpt__progress *p, struct ckpt_store *st, uint64_t *out);

static inline void ckpt__progress_add(atomic_uint_fast64_t *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

#endif
