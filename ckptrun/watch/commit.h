/* watch/commit.h -- the commit thread and what its results settle (watch/commit.c; the watcher's
 * insides: watch/int.h). Supervisor's thread only, except the worker. */
#ifndef CKPTRUN_WATCH_COMMIT_H
#define CKPTRUN_WATCH_COMMIT_H

#include <stddef.h>
#include <stdint.h>

#include "watch/commit_files.h"

struct watch;
struct watch_job;

/* One finished commit of the watcher, as watch_take_result (watch.h) hands
 * it over. */
struct watch_result {
    char entry[256];        /* the newest entry of the snapshot, for the log */
    int64_t completed_mono; /* when the snapshot was taken */
    int64_t changed_mono;   /* newest change seen in its entries before that */
    struct commit_result res;
    char **entries; /* names of every top-level source (entries + links) */
    size_t nentries;
    const char *step_from; /* where its step comes from: "saved", "state"
                              (trainer_state.json), "name", or "counter"
                              (nothing gave one); static */
    struct watch_job *job; /* the watcher's own */
};

/* The commit thread (arg: the watch). */
void *watch_worker(void *arg);
/* A finished commit: @return 1 to hand it to the caller, 0 when handled
 * here (dropped, or to be read again). */
int watch_settle(struct watch *w, struct watch_result *r);
void watch_result_free(struct watch_result *r);

#endif
