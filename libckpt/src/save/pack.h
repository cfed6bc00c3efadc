/* pack.h -- packs: on object stores chunk objects travel in objects of
 * about pack_bytes (docs/FORMAT.md, "Packs"). A save fills one open pack at
 * a time; the worker whose chunk fills it uploads it (at most
 * ctx->pack_inflight at once), and the chunk stage uploads the last one.
 * The buffers: packbuf.h. */
#ifndef CKPT_PACK_H
#define CKPT_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "format/manifest.h"

struct ckpt_ctx;
struct ckpt_save;

/* Append one encoded chunk object (header and payload) to the save's open
 * pack and point ref at it there; upload the pack if that filled it. */
ckpt_status ckpt__pack_append(struct ckpt_ctx *ctx, struct ckpt_save *sv, const void *hdr,
                              const void *payload, size_t plen, struct ckpt_chunk_ref *ref,
                              char *err);
/* Write one chunk object as a pack of its own (a fresh name), for ref. */
ckpt_status ckpt__pack_alone(struct ckpt_ctx *ctx, struct ckpt_save *sv, const void *obj,
                             size_t obj_len, struct ckpt_chunk_ref *ref, char *err);
/* The save's last, partly filled pack: uploaded unless the save failed,
 * and its buffer given back either way. */
ckpt_status ckpt__pack_flush(struct ckpt_ctx *ctx, struct ckpt_save *sv, char *err);
/* The slot in the save's pack list of an older pack a known chunk lives
 * in; UINT32_MAX without memory. */
uint32_t ckpt__pack_slot_of(struct ckpt_save *sv, const struct ckpt_pack *p);

#endif
