/* runstate.h -- what this writer knows of its run, underneath the save
 * path: HEAD and its etag, the objects every retained (and damaged)
 * checkpoint uses, what the gc records in force are deleting, and the
 * dedup index. A load (runload.h) builds it from the store.
 *
 * Threads: every field of struct ckpt_run is guarded by its mu. A load
 * replaces the state whole (ckpt__run_install); chunk jobs look chunks up
 * (ckpt__run_lookup, waiting for the first load); the commit, the one
 * writer of HEAD in this process, holds mu from its fence check until it
 * has adopted the HEAD it wrote (ckpt__run_adopt), letting go only to load
 * the run again. */
#ifndef CKPT_RUNSTATE_H
#define CKPT_RUNSTATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "core/dedup.h"
#include "format/gcrecord.h"
#include "format/head.h"
#include "base/idset.h"
#include "format/manifest.h"
#include "ckpt_store.h"

struct ckpt_run {
    pthread_mutex_t mu;
    pthread_cond_t cv;             /* `loaded` became true */
    bool loaded;                   /* a load ended (well or not): savers may proceed */
    bool load_ok;                  /* the last load read HEAD (or learned there is none) */
    bool have_head;
    bool head_scanned; /* HEAD is damaged: `head` is its manifests' view
                          (headscan.h), head_etag the damaged one's */
    char head_etag[CKPT_ETAG_MAX];
    struct ckpt_head head;
    /* objects of the retained manifests, parallel to head.entries */
    struct ckpt_idlist *retained_ids;
    /* objects of HEAD's damaged entries, parallel to head.damaged: kept by
     * retention (for inspection), never used for dedup */
    struct ckpt_idlist *damaged_ids;
    /* what the gc records HEAD names are deleting: a commit never uses it */
    struct ckpt_gc_victims gcv;
    struct ckpt_dedup idx;         /* chunks durable in the run */
    /* chunks a restore found damaged: never used for dedup (kept across
     * loads of the run) */
    struct ckpt_idset bad_chunks;
    /* a retained checkpoint is of a newer format than this version reads:
     * this writer must not commit (its retention would push it out) */
    bool newer;
};

void ckpt__run_init(struct ckpt_run *rs);
void ckpt__run_destroy(struct ckpt_run *rs);

/* What one load of the run read (runload.h), for ckpt__run_install. */
struct ckpt_run_load {
    struct ckpt_head head;
    bool exists;
    char etag[CKPT_ETAG_MAX];
    struct ckpt_idlist *retained, *damaged; /* objects, parallel to head's */
    struct ckpt_gc_victims gcv;
    struct ckpt_dedup idx;
    bool newer;
    bool scanned; /* head is the manifests' view (headscan.h) */
};
/* The end of a load: when `ok`, what it read (taken) becomes the state,
 * else it is freed and the state stays; savers may proceed either way. */
void ckpt__run_install(struct ckpt_run *rs, struct ckpt_run_load *ld, bool ok);
/* No load will come (it could not be queued): savers go on without the
 * index, and the commit loads the run itself. */
void ckpt__run_skip_load(struct ckpt_run *rs);

/* Until the first load has ended (well or not). */
void ckpt__run_wait_loaded(struct ckpt_run *rs);

/* Chunk jobs: where the run holds chunk `id` (ckpt__dedup_get), once the
 * first load has ended; and whether a gc in force deletes object `id` of
 * `kind`. */
int ckpt__run_lookup(struct ckpt_run *rs, const uint8_t *id, struct ckpt_loc *loc,
                     struct ckpt_pack *pack);
int ckpt__run_doomed(struct ckpt_run *rs, const uint8_t *id, int kind);
/* Restore: chunks found damaged (ids of `bad`) are never used again. */
void ckpt__run_forget_bad(struct ckpt_run *rs, const struct ckpt_idset *bad);

/* The commit (mu held): object `id` of `kind` is being deleted: no save
 * may point at it again. */
void ckpt__run_forget(struct ckpt_run *rs, const uint8_t *id, int kind);

/* What a commit no longer retains: entries of the old HEAD and the objects
 * each used. */
struct ckpt_dropped {
    struct ckpt_head_entry *entries;
    struct ckpt_idlist *ids;
    size_t n;
};
void ckpt__dropped_free(struct ckpt_dropped *d);

/* The commit (mu held), once HEAD is durable: the HEAD it planned, nh,
 * becomes the run's, with its etag. src[k] says where entry k of nh comes
 * from: its index in the old HEAD, or SIZE_MAX for the new checkpoint m,
 * whose objects are *new_ids (taken). m's chunks go into the index. The
 * old entries nh does not keep come back in *dropped. nh's arrays are
 * taken and its borrowed strings kept; nh is emptied. -1 out of memory:
 * nothing changed (the caller loads the run again). */
int ckpt__run_adopt(struct ckpt_run *rs, struct ckpt_head *nh, const size_t *src,
                    const char *etag, const struct ckpt_manifest *m,
                    struct ckpt_idlist *new_ids, struct ckpt_dropped *dropped);

#endif
