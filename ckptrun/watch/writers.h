/* watch/writers.h -- writers of an entry, from /proc (watch/writers.c; the watcher's insides:
 * watch/int.h). Supervisor's thread only. */
#ifndef CKPTRUN_WATCH_WRITERS_H
#define CKPTRUN_WATCH_WRITERS_H

#include <stddef.h>
#include <stdint.h>

#include "watch/int.h"

enum fate writer_fate(const struct wpid *wp);
/* Processes (other than ckptrun) holding `path` or a file under it open
 * for writing: up to `max` into out (out may be NULL: then the first one
 * ends the search). @return how many were found. */
int writers_of(struct watch *w, const char *path, struct wpid *out, int max);
int writer_under(struct watch *w, const struct entry *e);
/* Learn the writers of file entries being written, while they write. */
void scan_writers(struct watch *w, int64_t now, int64_t *next);

#endif
