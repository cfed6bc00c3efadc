/*
 * runs.h -- the runs of a store, for `ckptrun ls` without --run and for the
 * names suggested when a run is not found (docs/ckptrun.md, "ls").
 *
 * The store interface lists by prefix, with no delimiter: the runs come
 * from one walk of every key of the store (a LIST request per 1,000 keys on
 * S3 and GCS, per 5,000 on Azure), which also gives each run's object
 * count, bytes and newest object time at no further cost. A run is a first
 * key segment holding a HEAD (libckpt's commit point) or a RUN (ckptrun's
 * record). What the walk cannot tell -- the state, the newest committed
 * step -- runs_describe() reads from two small objects per run (RUN and
 * HEAD; and LEASE when RUN says `running`, to tell a live run from a stale
 * one), several runs at a time. A run whose HEAD is damaged (it exists but
 * does not decode) is read as libckpt's readers read it, from its
 * manifests (docs/FORMAT.md, "A damaged HEAD": a context on that run and
 * ckpt_list): only such a run costs more than those few small objects --
 * a listing of its manifests/ and a few GETs per checkpoint.
 */
#ifndef CKPTRUN_RUNS_H
#define CKPTRUN_RUNS_H

#include <stddef.h>
#include <stdint.h>
#include "ckpt.h"
#include "ckpt_store.h" /* CKPT_ERR_MAX */

struct ckpt_store;

struct run_sum {
    char *name;
    uint64_t objects, bytes;   /* every object under <run>/ */
    int64_t newest_ms;         /* newest object's time by the store's clock (0: unknown) */
    int has_head, has_run;
    /* runs_describe(): */
    const char *state;         /* RUN's state ("running", ...), "stale" (running but no
                                  live lease), "unknown" (no RUN), "?" (unreadable) */
    int have_step;             /* HEAD names a committed checkpoint */
    int head_bad;              /* HEAD there but unreadable (damaged, newer, store error) */
    int head_damaged;          /* HEAD damaged: have_step, step and checkpoints are what
                                  the run's manifests show */
    uint64_t step;             /* HEAD's newest step */
    unsigned checkpoints;      /* retained (HEAD) */
    ckpt_status error;         /* CKPT_OK, or what reading RUN/HEAD/LEASE met */
    char detail[CKPT_ERR_MAX]; /* which object, and the store's (or libckpt's) word */
};

struct runs {
    struct run_sum *v;         /* sorted by name after runs_walk */
    size_t n, cap;
    int truncated;             /* the walk stopped at max_keys */
};

/* Walk the store's keys (at most max_keys of them, 0: all) and fill `out`
 * with its runs, sorted by name. @return CKPT_OK, CKPT_E_NOMEM, store
 * errors (detail in err, CKPT_ERR_MAX). */
ckpt_status runs_walk(struct ckpt_store *st, uint64_t max_keys, struct runs *out, char *err);
/* Read the state and newest step of every run of `r` (RUN, HEAD, LEASE),
 * `parallel` at a time (at least 1). A run whose objects cannot be read
 * gets `error` and `detail`; the others are still described. */
void runs_describe(struct ckpt_store *st, struct runs *r, unsigned parallel);
void runs_free(struct runs *r);

#endif
