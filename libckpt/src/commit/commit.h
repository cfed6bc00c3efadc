/* commit.h -- committing a save whose chunks are all stored, on a worker:
 *   barrier   every chunk and pack of the save is durable;
 *   fence     the run is still this writer's: HEAD is not fenced at a newer
 *             lease epoch, holds nothing of a newer format, and no gc in
 *             force deletes what the save uses;
 *   manifest  written once, under a fresh key, after the chunks;
 *   HEAD      written conditionally on the etag this writer last saw, with
 *             the entries the keep rule retains; a HEAD rewritten meanwhile
 *             by a gc (or a damaged marking) is read again and the write
 *             tried again over it.
 * Then the run state takes the new HEAD, retention deletes what no
 * retained checkpoint uses, the `committed` (or `failed`) event goes out
 * and the save's slot is free. */
#ifndef CKPT_COMMIT_H
#define CKPT_COMMIT_H

#include <stddef.h>

#include "ckpt.h"

struct ckpt_ctx;
struct ckpt_save;
struct ckpt_manifest;

/* Commit sv (or, when it failed, report it) and end it: sv is freed. A
 * single writer's save; a rank's part goes to ckpt__part_commit (partstore.h)
 * instead. */
void ckpt__commit(struct ckpt_ctx *ctx, struct ckpt_save *sv);

/* Commit a global checkpoint gm composed from its durable parts (globalckpt.h):
 * fence, commit record (key in mkey), HEAD, retention, as a save's commit
 * does. The caller reports it. */
ckpt_status ckpt__commit_global(struct ckpt_ctx *ctx, struct ckpt_manifest *gm, char *mkey,
                                size_t keylen, char *err);

#endif
