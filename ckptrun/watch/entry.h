/* watch/entry.h -- entries, inotify watches, signatures, the step counter (watch/entry.c; the
 * watcher's insides: watch/int.h). Supervisor's thread only. */
#ifndef CKPTRUN_WATCH_ENTRY_H
#define CKPTRUN_WATCH_ENTRY_H

#include <stddef.h>
#include <stdint.h>

#include "watch/int.h"

/* After a marker: min(settle, QUIET_MAX_MS) with no change. */
uint64_t quiet_ms(const struct watch *w);
void entry_path(const struct watch *w, const struct entry *e, char *p, size_t n);
struct entry *find_entry(struct watch *w, const char *name);
/* The entry of that name, if it is still the instance `gen`. */
struct entry *find_gen(struct watch *w, const char *name, uint64_t gen);
void add_wd(struct watch *w, int wd, const char *entry);
/* The entry an inotify watch belongs to ("" = the root), or NULL. */
const char *wd_entry(struct watch *w, int wd);
void drop_wd(struct watch *w, int wd);
/* Watch a directory inside an entry and every directory below it. */
void watch_tree(struct watch *w, const char *path, const char *entry, int depth);
void read_link(struct watch *w, struct entry *e);
/* (Re)initialize `e` as a new instance of what `name` is on disk now.
 * @return 0, or -1 when it is not a file, directory or link. */
int init_entry(struct watch *w, struct entry *e, const char *name, int64_t now);
/* The entry `name`, added when new. @return NULL when it is none (hidden,
 * temporary, too many, gone). */
struct entry *add_entry(struct watch *w, const char *name, int64_t now);
void remove_entry(struct watch *w, struct entry *e, int64_t now);
void entry_lost(struct watch *w, struct entry *e, const char *what);
/* @return 0, or -1 when something vanished during the walk. */
int entry_sig(struct watch *w, const struct entry *e, struct sig *s);
int sig_eq(const struct sig *a, const struct sig *b);
/* Complete, and may be part of a snapshot now. */
int includable(const struct entry *e);
/* Includable, and this version is neither committed nor failed already. */
int needs_commit(const struct entry *e);
/* An event touched it: walk it at the next tick. */
void touch(struct entry *e, int64_t now);
/* The step counter goes above `step` (watch_note_step, watch.h). */
void counter_note(struct watch *w, uint64_t step);
/* *next = the earlier of *next and due (-1: none). */
void due_min(int64_t *next, int64_t due);

#endif
