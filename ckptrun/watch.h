/*
 * watch.h -- commit the checkpoints an unmodified trainer writes into
 * CKPT_DIR (DESIGN.md §3, "Unmodified").
 *
 * An *entry* is a file, directory or symbolic link directly under the
 * directory. It is complete when
 *   - it was renamed into place (IN_MOVED_TO), or
 *   - a file matching the marker glob in it (or the entry itself) was closed
 *     after writing, or exists when the entry is first seen, or
 *   - nothing changed in it for `settle_ms` and no process of the child's
 *     process group holds a file under it open for writing.
 * Hidden and temporary names (".x", "tmp-x", "x.tmp", "x.part") are never
 * entries. Entries present when watching starts are taken as committed.
 *
 * Each complete entry is committed as one checkpoint (together with the
 * symbolic links in the directory that point to it) by a worker thread that
 * owns its own libckpt context; results come back through a pipe the
 * supervisor polls. Everything else runs on the supervisor's thread.
 */
#ifndef CKPTRUN_WATCH_H
#define CKPTRUN_WATCH_H

#include <stdint.h>
#include <sys/types.h>
#include "commit.h"

struct watch;

struct watch_result {
    char entry[256];          /* top-level entry committed */
    int64_t completed_mono;   /* when the entry was found complete */
    int64_t changed_mono;     /* last change seen in it before that */
    struct commit_result res;
    char **entries;           /* names of every top-level source (entry + links) */
    size_t nentries;
};

/* Watch `dir` (must exist); commits go through `ctx`, which the watcher
 * owns from now on (closed by watch_close). @return 0 or -1 (logged). */
int watch_open(struct watch **out, const char *dir, const char *marker, uint64_t settle_ms,
               struct ckpt_ctx *ctx);
/* Stop the worker and free everything. With wait == 0 and a commit in
 * flight, the worker is abandoned (the process is about to exit). */
void watch_close(struct watch *w, int wait);

int watch_inotify_fd(const struct watch *w);
int watch_result_fd(const struct watch *w);

/* Steps are taken from names; names without a number get counter values
 * above every step seen, starting after `step`. */
void watch_note_step(struct watch *w, uint64_t step);
/* The child's process group, whose open files decide "no writer" (0: none). */
void watch_set_pgid(struct watch *w, pid_t pgid);
/* Stop committing entries for good (commits in flight finish): the child
 * commits the run through libckpt itself, and a run has one writer --
 * two would refuse each other's HEAD updates. */
void watch_pause(struct watch *w);
/* The next commit uses `codec` (a faster one when a stop is short of time).
 * Thread-safe (ckpt_request). */
void watch_next_codec(struct watch *w, ckpt_codec codec);
/* Shorter settle time while stopping (the trainer was asked to save). */
void watch_set_settle(struct watch *w, uint64_t settle_ms);

void watch_handle_inotify(struct watch *w);
/* A file event reported by the preload shim ("closed" or "renamed"). */
void watch_file_event(struct watch *w, const char *path, const char *event);
/* Run completeness checks. @return the monotonic ms at which it wants to be
 * called again, or -1 when nothing is pending. */
int64_t watch_tick(struct watch *w);
/* 1 when events arrived that watch_tick should look at before the time it
 * asked for (new entries, renames, markers): ticking on every wake-up would
 * walk settling trees once per inotify event. */
int watch_dirty(const struct watch *w);
/* The child exited cleanly: entries still settling have no writer left and
 * are complete now. (After a crash this is not called: they may be torn.) */
void watch_flush_pending(struct watch *w);

/* Take one finished commit (after poll says the result fd is readable).
 * @return a result to free with watch_result_free, or NULL. */
struct watch_result *watch_take_result(struct watch *w);
void watch_result_free(struct watch_result *r);

/* Commits queued or in flight. */
int watch_busy(struct watch *w);

#endif
