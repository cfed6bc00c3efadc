/* fetch.h -- fetching a checkpoint's chunks from the store over the worker
 * pool, for restore and verify: one job per chunk object, one per range of
 * a pack (neighbouring chunks merged); each chunk is checked and delivered
 * (deliver.h) as its bytes arrive, and a transfer whose chunks fail their
 * checksums is made again: a transfer damaged in flight must not pass for
 * a damaged checkpoint. */
#ifndef CKPT_FETCH_H
#define CKPT_FETCH_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "base/idset.h"
#include "format/manifest.h"

struct ckpt_ctx;
struct ckpt_batch;
struct ckpt_dest;

/* One chunk to fetch, and where it goes. */
struct ckpt_fetch {
    const struct ckpt_chunk_ref *c;
    struct ckpt_dest *d;    /* NULL: only verified (ckptrun verify) */
    uint64_t off;           /* in the item */
    const char *item;       /* for messages: the item's name and ... */
    size_t idx;             /* ... the chunk's index in it */
};

/* The manifest of a checkpoint to restore or verify, `rel` (relative to
 * the run): as ckpt__read_manifest, and CKPT_E_UNSUPPORTED (with the
 * reason as the context's message) for what this version cannot restore. */
ckpt_status ckpt__fetch_manifest(struct ckpt_ctx *ctx, const char *rel,
                                 struct ckpt_manifest *m);
/* Queue the fetches of n chunks of manifest m (sorts fs) in batch b, whose
 * token the caller holds. A restore (bad NULL) stops at the first damage;
 * verify counts damaged chunks in *bad and goes on. */
ckpt_status ckpt__fetch_plan(struct ckpt_ctx *ctx, struct ckpt_batch *b,
                             const struct ckpt_manifest *m, struct ckpt_fetch *fs, size_t n,
                             size_t *bad);
/* Fetch and check every chunk of m not in `seen` (added there); damaged
 * ones are logged and counted in *bad. */
ckpt_status ckpt__verify_manifest(struct ckpt_ctx *ctx, const struct ckpt_manifest *m,
                                  struct ckpt_idset *seen, size_t *bad, char *err);

#endif
