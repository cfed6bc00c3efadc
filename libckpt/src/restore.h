/* restore.h -- one checkpoint tried for a restore, and the marking of the
 * damaged ones: shared by ckpt_restore (restore.c) and the collective
 * restore of multi-rank jobs (ranks.c). */
#ifndef CKPT_RESTORE_H
#define CKPT_RESTORE_H

#include <stdbool.h>
#include <stddef.h>

#include "ckpt.h"
#include "head.h"
#include "idset.h"
#include "manifest.h"

struct ckpt_ctx;

/* Restore HEAD entry e as rank `view` sees it, into dir or (NULL) the
 * protected items. A checkpoint of another world size than the job's is
 * CKPT_E_WORLD (naming both), unless any_world (a part: ckpt_restore_part;
 * no part `view` there is CKPT_E_NOENT) or every protected item is
 * replicated. Damaged or missing data: CKPT_E_CORRUPT; *shape: the
 * program's items do not fit the checkpoint (CKPT_E_SIZE, CKPT_E_MISMATCH),
 * nothing written. The reason is the context's message; chunks found
 * damaged go into bad. */
ckpt_status ckpt__restore_try(struct ckpt_ctx *ctx, const struct ckpt_head_entry *e,
                              unsigned view, bool any_world, const char *dir,
                              struct ckpt_idset *bad, bool *shape);
/* ckpt__restore_try in two halves, for the ranks of a collective restore,
 * which agree that every rank's items fit before any rank writes (ranks.c).
 * The check reads the manifest into *m (the caller frees it; nothing is
 * left there on an error) and refuses as ckpt__restore_try does, nothing
 * written; the write restores *m as ckpt__restore_try would. */
ckpt_status ckpt__restore_check(struct ckpt_ctx *ctx, const struct ckpt_head_entry *e,
                                unsigned view, bool any_world, const char *dir,
                                struct ckpt_manifest *m, bool *shape);
ckpt_status ckpt__restore_write(struct ckpt_ctx *ctx, const struct ckpt_manifest *m,
                                const char *dir, struct ckpt_idset *bad);
/* Mark the checkpoints of `keys` damaged in HEAD (logged when it fails;
 * the context's message is kept). */
void ckpt__restore_mark(struct ckpt_ctx *ctx, const char **keys, size_t n);
/* ckpt_restore() of a context that restores alone (one rank, or parts
 * agreed through the store): the newest committed step that verifies. */
ckpt_status ckpt__restore_latest(struct ckpt_ctx *ctx, uint64_t *step);
/* ckpt_restore_step() of such a context: the checkpoint at `step` only. */
ckpt_status ckpt__restore_step(struct ckpt_ctx *ctx, uint64_t step, uint64_t *restored);

#endif
