/* watch/events.h -- what the watcher hears (watch/events.c): inotify, and
 * the preload shim's and the control socket's file events. Supervisor's
 * thread only. */
#ifndef CKPTRUN_WATCH_EVENTS_H
#define CKPTRUN_WATCH_EVENTS_H

#include <stdint.h>

struct watch;

/* Read the inotify descriptor's events (after poll says it is readable). */
void watch_handle_inotify(struct watch *w);
/* A file event reported by the preload shim ("closed" or "renamed"). */
void watch_file_event(struct watch *w, const char *path, const char *event);
/* A `file` message of the control socket (docs/CONTROL.md): with a step
 * (has_step), the trainer's saved(path, step): the entry holding `path` is
 * complete as it is now, at that step; from the first one on, entries are
 * committed when the trainer reports them, and entries it never reports once
 * unchanged for --settle. Without a step, as watch_file_event. */
void watch_saved(struct watch *w, const char *path, const char *event, int has_step, uint64_t step);

#endif
