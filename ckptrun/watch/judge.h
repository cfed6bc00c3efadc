/* watch/judge.h -- completeness of an entry (watch/judge.c; the watcher's insides: watch/int.h).
 * Supervisor's thread only. */
#ifndef CKPTRUN_WATCH_JUDGE_H
#define CKPTRUN_WATCH_JUDGE_H

#include <stddef.h>
#include <stdint.h>

#include "watch/int.h"

void mark_ok(struct watch *w, struct entry *e, const char *by, int64_t now);
/* Is `e` complete now? Marks it, or says when to look again (*next). */
void judge(struct watch *w, struct entry *e, int64_t now, int64_t *next);
/* Warn once when entries keep changing and none is ever complete. */
void stuck_check(struct watch *w, int64_t now, int64_t *next);

#endif
