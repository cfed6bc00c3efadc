/* watch/plan.h -- the next snapshot, queued for the commit thread (watch/plan.c; the watcher's
 * insides: watch/int.h). Supervisor's thread only. */
#ifndef CKPTRUN_WATCH_PLAN_H
#define CKPTRUN_WATCH_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "watch/int.h"

void job_free(struct watch_job *j);
/* Decide and queue the next commit (one at a time). */
void watch_plan(struct watch *w, int64_t now, int64_t *next);

#endif
