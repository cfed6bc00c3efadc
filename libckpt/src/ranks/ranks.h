/* ranks.h -- multi-rank jobs (ckpt.h "Ranks", docs/multirank.md): each
 * rank's save writes its part (a part manifest, on a worker:
 * ckpt__part_commit, partstore.h); with a collective, the ranks agree on the application
 * thread -- at ckpt_save, ckpt_should_save, ckpt_wait, ckpt_restore and
 * ckpt_close -- and rank 0 commits the global step once every part is
 * durable; without one (CKPT_RANKS_STORE), ckpt_commit_parts commits from
 * the store.
 *
 * The phases of a global step, the same on every rank at every collective
 * call (every transition follows from the result of an all-reduce):
 *   IDLE        nothing in progress;
 *   PART        the step was saved: parts in flight;
 *   COMMITTING  every part is durable and the ranks agreed on the
 *               replicated items: rank 0's worker writes the commit record
 *               and HEAD.
 * Threads: the part writer (a worker) sets the part's digests under mu;
 * everything else is the application thread's. */
#ifndef CKPT_RANKS_H
#define CKPT_RANKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"

struct ckpt_ctx;
struct ckpt_save;

/* ckpt_open, with a collective: every rank says it opened (`local`: this
 * rank's outcome so far) and claims its rank once. CKPT_E_CONFIG (a rank
 * claimed twice or not at all), CKPT_E_WORLD (another rank failed to open,
 * the collective failed). */
ckpt_status ckpt__ranks_open(struct ckpt_ctx *ctx, ckpt_status local);

/* The collective versions of ckpt_should_save, ckpt_save, ckpt_wait,
 * ckpt_restore and ckpt_close's wait (ctx->coll set, world_size > 1). */
int ckpt__ranks_should_save(struct ckpt_ctx *ctx, int want);
ckpt_status ckpt__ranks_save(struct ckpt_ctx *ctx, uint64_t step);
ckpt_status ckpt__ranks_wait(struct ckpt_ctx *ctx);
/* `want`: CKPT_STEP_LATEST (ckpt_restore: the newest step every rank
 * restores, falling back together), or one step (ckpt_restore_step: that
 * step only; every rank must pass the same). */
ckpt_status ckpt__ranks_restore(struct ckpt_ctx *ctx, uint64_t want, uint64_t *step);

/* ckpt_save without a collective (CKPT_RANKS_STORE): a part of its own nonce. */
ckpt_status ckpt__ranks_store_save(struct ckpt_ctx *ctx, uint64_t step);

/* A random 32-bit nonce. */
uint32_t ckpt__nonce32(void);

#endif
