/* watch/commit.h -- the commit thread and what its results settle (watch/commit.c; the watcher's
 * insides: watch/int.h). Supervisor's thread only, except the worker. */
#ifndef CKPTRUN_WATCH_COMMIT_H
#define CKPTRUN_WATCH_COMMIT_H

#include <stddef.h>
#include <stdint.h>

#include "watch/int.h"

/* The commit thread (arg: the watch). */
void *watch_worker(void *arg);
/* A finished commit: @return 1 to hand it to the caller, 0 when handled
 * here (dropped, or to be read again). */
int watch_settle(struct watch *w, struct watch_result *r);

#endif
