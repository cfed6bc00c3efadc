/* restalloc.h -- ckpt_restore_alloc(): a restore into memory its caller
 * allocates per item. The fallback, the marking of damage and the ranks'
 * agreement are ckpt_restore()'s own (restore.c alone, ranks.c with a
 * collective): for the length of the call ctx->into is set, and the check
 * of each checkpoint tried (ckpt__restore_check) asks the caller for
 * memory here instead of fitting the protected items, and the write puts
 * each item where the caller said. */
#ifndef CKPT_RESTALLOC_H
#define CKPT_RESTALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "manifest.h"
#include "restore.h"

struct ckpt_ctx;
struct ckpt_into;

/* The checkpoint m (rank's view; world: its world size) is tried: the
 * memory given for the one tried before is released, then the caller is
 * asked (round 0: the index items, restored here at once; round 1: the
 * rest). A checkpoint without index items is CKPT_E_NOENT with *why
 * CKPT__SKIP; a refusal (CKPT_E_SIZE, CKPT_E_MISMATCH) has *why
 * CKPT__SHAPE; CKPT_E_WORLD when the caller takes an item that is not
 * replicated from a checkpoint of another world size. The reason is the
 * context's message. */
ckpt_status ckpt__into_prepare(struct ckpt_ctx *ctx, const struct ckpt_manifest *m, unsigned world,
                               enum ckpt__misfit *why);
/* The restore fell back (ckpt__restore_fell_back): its message stays. */
void ckpt__into_fell_back(struct ckpt_into *in);
/* Where item i of the manifest prepared goes (NULL: nowhere, or written
 * already). */
uint8_t *ckpt__into_dest(const struct ckpt_into *in, size_t i);

#endif
