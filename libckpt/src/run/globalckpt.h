/* globalckpt.h -- global checkpoints of multi-rank jobs (docs/FORMAT.md, format
 * 4): each rank's part manifest, the commit record that names every part,
 * and the one manifest a reader works on, composed from the parts.
 *
 * A commit record is sealed like a manifest (JSON + #xxh64 trailer), kind
 * "commit": step, seq, epoch, time, world size, the part manifests' keys in
 * rank order and the replicated items with their digests. HEAD names it.
 * Reading it reads every part and composes them (ckpt__parts_compose):
 * one rank's view (its own items and every replicated item, assembled from
 * the chunks each part uploaded), the other ranks' items as `others`, the
 * parts' keys as `parts` -- so retention, gc, the dedup index, verify and
 * ckpt_list see every object of the global checkpoint, and restore sees one
 * rank's items. Everything read is hostile: a part of another step or world
 * size, a replicated item whose parts disagree or whose assembled chunk ids
 * do not hash to its digest, is CKPT_E_CORRUPT. */
#ifndef CKPT_GLOBALCKPT_H
#define CKPT_GLOBALCKPT_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "format/manifest.h"

struct ckpt_ctx;

/* The digest of a replicated item: XXH3-64 of its size and its chunk ids in
 * order (all chunks of the item). */
uint64_t ckpt__replicated_digest(uint64_t size, const struct ckpt_chunk_ref *chunks, size_t n);

/* A commit record. */
struct ckpt_commit_rec {
    uint64_t step, seq, epoch;
    int64_t time_ms;
    uint32_t world_size;
    uint64_t new_bytes;
    char *writer, *parent;
    char **parts;          /* world_size keys, relative to the run, by rank */
    size_t nrep;           /* replicated items: names and digests */
    char **rep_names;
    uint64_t *rep_digests;
};
void ckpt__commit_rec_free(struct ckpt_commit_rec *r);
ckpt_status ckpt__commit_rec_encode(const struct ckpt_commit_rec *r, char **out, size_t *len);
ckpt_status ckpt__commit_rec_decode(const void *buf, size_t len, struct ckpt_commit_rec *r,
                                    char *err);

/* Compose the parts p[0..n) (rank order; taken: emptied) into *out, the
 * view of rank `view` (clamped to 0 when n <= view). `rec` (may be NULL:
 * before the record exists) gives step, seq, epoch, time, writer, parent and
 * the digests the parts must agree with; keys: the parts' keys (copied).
 * CKPT_E_CORRUPT with the reason in err. */
ckpt_status ckpt__parts_compose(struct ckpt_manifest *p, size_t n, const char *const *keys,
                                const struct ckpt_commit_rec *rec, unsigned view,
                                struct ckpt_manifest *out, char *err);

/* Read the global checkpoint whose commit record is `rel` (relative to the
 * run), as rank `view` sees it. Errors as ckpt__read_manifest (a part
 * missing: CKPT_E_NOENT), with the reason as the context's message. */
ckpt_status ckpt__read_global(struct ckpt_ctx *ctx, const char *rel, unsigned view,
                              struct ckpt_manifest *m);

/* Read the parts of a global step, keys[0..n) (relative, rank order), and
 * compose them as rank 0 sees them, for a commit (no record yet). */
ckpt_status ckpt__read_parts(struct ckpt_ctx *ctx, char *const *keys, size_t n,
                             struct ckpt_manifest *m, char *err);

#endif
