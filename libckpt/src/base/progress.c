/* progress.c -- the counters behind ckpt_progress() (progress.h). */
#include "base/progress.h"
#include "ckpt_store.h"
#include "base/util.h"

void ckpt__progress_begin(struct ckpt__progress *p, int phase, uint64_t step)
{
    atomic_store(&p->sent_state, CKPT__SENT_NONE);
    atomic_store(&p->bytes_done, 0);
    atomic_store(&p->bytes_total, 0);
    atomic_store(&p->chunks_done, 0);
    atomic_store(&p->chunks_total, 0);
    atomic_store(&p->stored_bytes, 0);
    atomic_store(&p->checkpoints_done, 0);
    atomic_store(&p->encoded_bytes, 0);
    atomic_store(&p->sent_base, 0);
    atomic_store(&p->sent_final, 0);
    atomic_store(&p->step, step);
    atomic_store(&p->started_ms, ckpt__now_ms());
    atomic_store(&p->phase, phase);
}

void ckpt__progress_sent_begin(struct ckpt__progress *p, struct ckpt_store *st)
{
    uint64_t now;
    if (!ckpt_store_sent(st, &now))
        return;
    atomic_store(&p->sent_base, now);
    atomic_store(&p->sent_state, CKPT__SENT_LIVE); /* after its base (seq_cst) */
}

/* The store's count since the base; 0 if it went below (a put begun before
 * the save that failed during it). */
static uint64_t since_base(struct ckpt__progress *p, struct ckpt_store *st)
{
    uint64_t now, base = atomic_load(&p->sent_base);
    ckpt_store_sent(st, &now);
    return now > base ? now - base : 0;
}

void ckpt__progress_sent_end(struct ckpt__progress *p, struct ckpt_store *st)
{
    if (atomic_load(&p->sent_state) != CKPT__SENT_LIVE)
        return;
    atomic_store(&p->sent_final, since_base(p, st));
    atomic_store(&p->sent_state, CKPT__SENT_FINAL); /* after the value */
}

int ckpt__progress_sent(struct ckpt__progress *p, struct ckpt_store *st, uint64_t *out)
{
    int s = atomic_load(&p->sent_state);
    *out = s == CKPT__SENT_FINAL ? atomic_load(&p->sent_final)
           : s == CKPT__SENT_LIVE ? since_base(p, st)
                                  : 0;
    return s != CKPT__SENT_NONE;
}
