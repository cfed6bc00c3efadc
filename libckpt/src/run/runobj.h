/* runobj.h -- a run's objects in the store: HEAD, its manifests (a commit
 * record's as the global checkpoint it commits) and its gc records read,
 * HEAD written conditionally. Below the run's loading (runload.h) and the
 * reading of a damaged HEAD's run from its manifests (headscan.h), above
 * the keys and single manifests (runread.h) and the global checkpoints
 * (globalckpt.h). Errors go to the context's message unless said. */
#ifndef CKPT_RUNOBJ_H
#define CKPT_RUNOBJ_H

#include <stdbool.h>
#include <stddef.h>

#include "ckpt.h"
#include "format/gcrecord.h"
#include "format/head.h"
#include "format/manifest.h"
#include "run/runread.h"

struct ckpt_ctx;

/* Read HEAD into h (*exists false, h empty, when the run has none); etag
 * may be NULL. A HEAD that exists but does not decode is CKPT_E_CORRUPT
 * ("RUN/HEAD is damaged: ..."), etag then the damaged one's: most callers
 * read the manifests instead (ckpt__read_head_or_scan, headscan.h). */
ckpt_status ckpt__read_head(struct ckpt_ctx *ctx, struct ckpt_head *h, char *etag, bool *exists);
/* A manifest, or (a commit record's key) the global checkpoint it commits
 * as this context's rank sees it (globalckpt.h). */
ckpt_status ckpt__read_manifest(struct ckpt_ctx *ctx, const char *rel, struct ckpt_manifest *m);
/* As ckpt__read_manifest, a global checkpoint as rank `view` sees it. */
ckpt_status ckpt__read_manifest_view(struct ckpt_ctx *ctx, const char *rel, unsigned view,
                                     struct ckpt_manifest *m);
/* Write h as HEAD: conditionally on `etag`, the HEAD read last (NULL: on
 * there being none), where the store has conditional writes.
 * CKPT_E_PRECONDITION (or, with an etag, CKPT_E_NOENT): someone wrote HEAD
 * meanwhile. new_etag (may be NULL): the etag of the HEAD written. The
 * store's detail goes to err, not to the context's message. */
ckpt_status ckpt__put_head(struct ckpt_ctx *ctx, const struct ckpt_head *h, const char *etag,
                           char *new_etag, char *err);
/* The victims of the gc records of h that are in force, into v. */
ckpt_status ckpt__read_gc_records(struct ckpt_ctx *ctx, const struct ckpt_head *h,
                                  struct ckpt_gc_victims *v);

#endif
