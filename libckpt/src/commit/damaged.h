/* damaged.h -- marking checkpoints damaged: out of HEAD's resume order,
 * into its "damaged" list, kept for inspection until gc. Only the lease
 * holder (a context with an epoch) marks. */
#ifndef CKPT_DAMAGED_H
#define CKPT_DAMAGED_H

#include <stddef.h>

#include "ckpt.h"

struct ckpt_ctx;

/* Mark the retained checkpoints whose manifests are `keys` (relative to the
 * run) damaged in HEAD (a conditional write, retried). */
ckpt_status ckpt__mark_damaged(struct ckpt_ctx *ctx, char *const *keys, size_t n);

#endif
