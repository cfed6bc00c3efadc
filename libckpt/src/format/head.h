/* head.h -- a run's HEAD: the checkpoints it retains in the resume order,
 * the damaged ones kept for inspection, and the gc records in force
 * (docs/FORMAT.md, "HEAD"). */
#ifndef CKPT_HEAD_H
#define CKPT_HEAD_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"

#define CKPT_HEAD_MAX (16u << 20)
#define CKPT_HEAD_FORMAT 1           /* HEAD: 1, or the highest manifest format above 2
                                        among its entries (docs/FORMAT.md) */
#define CKPT_HEAD_FORMAT_MAX 4       /* what this reader accepts */
#define CKPT_GC_MAX_REFS 64          /* gc records HEAD may name */

struct ckpt_head_entry {
    char *manifest;        /* key relative to the run */
    uint64_t step, seq;
    unsigned format;       /* the manifest's format (0: not recorded, 1 or 2) */
    int64_t marked_ms;     /* damaged entries: when marked (the marker's clock) */
    unsigned world_size;   /* ranks of a global checkpoint (format 4: `manifest` is
                              its commit record); 0 or 1: one writer */
};

/* A gc in progress (or one that stopped before it finished): its record
 * object lists what it deletes; while HEAD names it, no commit may use any
 * of those objects (docs/FORMAT.md, "Garbage collection"). */
struct ckpt_gc_ref {
    char *record;          /* key relative to the run: "gc/<32 hex>" */
    int64_t time_ms;       /* when the gc published it (its clock) */
};

struct ckpt_head {
    unsigned version;
    uint64_t rev;          /* +1 at every write: no rewrite looks like an older HEAD
                              to a conditional write on a content etag */
    uint64_t seq, step, epoch;
    int64_t time_ms;
    size_t n;              /* retained committed checkpoints, highest step first
                              (then newest commit first): the resume order */
    struct ckpt_head_entry *entries;
    size_t ndamaged;       /* checkpoints a restore found damaged: out of the
                              resume order, kept for inspection until gc */
    struct ckpt_head_entry *damaged;
    size_t ngc;            /* gc records in force */
    struct ckpt_gc_ref *gc;
};

void ckpt__head_free(struct ckpt_head *h);
/* Sort entries into the resume order: step descending, then seq descending. */
void ckpt__head_sort(struct ckpt_head_entry *e, size_t n);
ckpt_status ckpt__head_encode(const struct ckpt_head *h, char **out, size_t *len);
ckpt_status ckpt__head_decode(const void *buf, size_t len, struct ckpt_head *h, char *err);

#endif
