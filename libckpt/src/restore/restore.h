/* restore.h -- one checkpoint tried for a restore, and the marking of the
 * damaged ones: shared by ckpt_restore (restore.c) and the collective
 * restore of multi-rank jobs (ranks.c). */
#ifndef CKPT_RESTORE_H
#define CKPT_RESTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "format/head.h"
#include "base/idset.h"
#include "format/manifest.h"

struct ckpt_ctx;

/* Why a checkpoint was not restored, besides its status. */
enum ckpt__misfit {
    CKPT__FIT = 0, /* nothing against it but the status (damage, a store error...) */
    CKPT__SHAPE,   /* the program's items do not fit it (CKPT_E_SIZE, CKPT_E_MISMATCH;
                      for ckpt_restore_alloc, its caller said so): the program changed, or
                      the manifest lies -- older checkpoints tell. Nothing written. */
    CKPT__SKIP     /* not of the kind its caller restores (ckpt_restore_alloc's
                      index items absent, CKPT_E_NOENT): passed over as if HEAD did not
                      name it, neither damaged nor a misfit */
};

/* Memory a restore's caller gives per item instead of the protected items
 * (ckpt_restore_alloc, restalloc.c): set in ctx->into for the length of
 * that call. The restore paths (this file, ranks.c) reach the caller
 * through these members only, so the allocating restore sits above them
 * and they know nothing of it. */
struct ckpt_into {
    /* The checkpoint m (rank's view; world: its world size) is tried: the
     * memory given for the one tried before is released, then the caller
     * is asked (round 0: the index items, restored at once with
     * ckpt__restore_write; round 1: the rest). A checkpoint without index
     * items is CKPT_E_NOENT with *why CKPT__SKIP; a refusal (CKPT_E_SIZE,
     * CKPT_E_MISMATCH) has *why CKPT__SHAPE; CKPT_E_WORLD when the caller
     * takes an item that is not replicated from a checkpoint of another
     * world size. The reason is the context's message. */
    ckpt_status (*prepare)(struct ckpt_ctx *ctx, const struct ckpt_manifest *m, unsigned world,
                           enum ckpt__misfit *why);
    /* The restore fell back (ckpt__restore_fell_back): its message stays. */
    void (*fell_back)(struct ckpt_into *in);
    /* Where item i of the manifest prepared goes (NULL: nowhere, or
     * written already). */
    uint8_t *(*dest)(const struct ckpt_into *in, size_t i);
    /* >= 0 (ckpt_restore_alloc_any): a checkpoint of another world size
     * than the job's is read as this part sees it, its own items allowed;
     * -1: refused as for ckpt_restore(). */
    int other_part;
};

/* Restore HEAD entry e as rank `view` sees it, into dir or (NULL) the
 * protected items. A checkpoint of another world size than the job's is
 * CKPT_E_WORLD (naming both), unless any_world (a part: ckpt_restore_part;
 * no part `view` there is CKPT_E_NOENT) or every protected item is
 * replicated. Damaged or missing data: CKPT_E_CORRUPT; *why: a misfit
 * (above). The reason is the context's message; chunks found damaged go
 * into bad. With ctx->into set (ckpt_restore_alloc, above) and no
 * dir, the items go where its caller says, never into protected ones. */
ckpt_status ckpt__restore_try(struct ckpt_ctx *ctx, const struct ckpt_head_entry *e, unsigned view,
                              bool any_world, const char *dir, struct ckpt_idset *bad,
                              enum ckpt__misfit *why);
/* ckpt__restore_try in two halves, for the ranks of a collective restore,
 * which agree that every rank's items fit before any rank writes (ranks.c).
 * The check reads the manifest into *m (the caller frees it; nothing is
 * left there on an error) and refuses as ckpt__restore_try does, nothing
 * written; the write restores *m as ckpt__restore_try would. */
ckpt_status ckpt__restore_check(struct ckpt_ctx *ctx, const struct ckpt_head_entry *e,
                                unsigned view, bool any_world, const char *dir,
                                struct ckpt_manifest *m, enum ckpt__misfit *why);
ckpt_status ckpt__restore_write(struct ckpt_ctx *ctx, const struct ckpt_manifest *m,
                                const char *dir, struct ckpt_idset *bad);
/* An older checkpoint than the newest was restored: why, logged (warn)
 * and left as the context's message (ckpt_errmsg() after CKPT_OK). */
void ckpt__restore_fell_back(struct ckpt_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Mark the checkpoints of `keys` damaged in HEAD (logged when it fails;
 * the context's message is kept). */
void ckpt__restore_mark(struct ckpt_ctx *ctx, const char **keys, size_t n);
/* ckpt_restore() of a context that restores alone (one rank, or parts
 * agreed through the store): the newest committed step that verifies. */
ckpt_status ckpt__restore_latest(struct ckpt_ctx *ctx, uint64_t *step);
/* ckpt_restore_step() of such a context: the checkpoint at `step` only. */
ckpt_status ckpt__restore_step(struct ckpt_ctx *ctx, uint64_t step, uint64_t *restored);

#endif
