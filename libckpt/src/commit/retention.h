/* retention.h -- what a run keeps, and deleting the rest, in one place for
 * the retention after every commit and for gc: the live set (every object
 * a kept checkpoint uses) and the deletion of what it does not hold. */
#ifndef CKPT_RETENTION_H
#define CKPT_RETENTION_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "base/idset.h"
#include "format/manifest.h"

struct ckpt_ctx;
struct ckpt_dropped;

/* Add the objects of n checkpoints (their lists) to the live set (an
 * object set, idset.h). -1 out of memory: an incomplete live set must
 * delete nothing. */
int ckpt__live_add(struct ckpt_idset *live, const struct ckpt_idlist *lists, size_t n);

/* Delete keys, at most 1000 to a request, manifests first (a checkpoint
 * goes as a whole before what it uses); with a deadline (mono ns, 0: none)
 * stop once it has passed, leaving the rest to the next gc. *deleted counts
 * what went; `who` is the log's subject. On failure the detail is in err. */
ckpt_status ckpt__delete_keys(struct ckpt_ctx *ctx, const char *who, const char **keys,
                              size_t n, uint64_t deadline_ns, uint64_t *deleted, char *err);

/* After a commit (the run state's mu held): delete the checkpoints it no
 * longer retains (their manifests) and the objects no checkpoint still kept
 * uses -- the retained ones (kept, nkept) and the damaged ones kept for
 * inspection (damaged, ndamaged) -- after forgetting those objects in the
 * dedup index: a save never points at an object being deleted. The new
 * HEAD is durable already: a crash here leaves only unreferenced objects,
 * which `ckptrun gc` removes. A pack goes when no kept checkpoint uses any
 * of its chunks. */
void ckpt__retention_after_commit(struct ckpt_ctx *ctx, const struct ckpt_idlist *kept,
                                  size_t nkept, const struct ckpt_idlist *damaged,
                                  size_t ndamaged, const struct ckpt_dropped *dropped);

#endif
