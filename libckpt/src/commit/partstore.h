/* partstore.h -- parts in the store: a rank's part manifest written by its
 * save. ckpt_pending and ckpt_commit_parts (ckpt.h), the parts not
 * committed yet and the commit of a global step from them, are this
 * file's public side (docs/multirank.md). */
#ifndef CKPT_PARTSTORE_H
#define CKPT_PARTSTORE_H

struct ckpt_ctx;
struct ckpt_save;

/* The chunk stage of a save is over (a worker): write this rank's part
 * manifest, create-only, and end the save (sv is freed). */
void ckpt__part_commit(struct ckpt_ctx *ctx, struct ckpt_save *sv);

#endif
