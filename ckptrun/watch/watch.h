/*
 * watch.h -- commit the checkpoints an unmodified trainer writes into
 * CKPT_DIR (DESIGN.md §3, "Unmodified"; the rules are the contract of
 * docs/ckptrun.md, "Watched directory").
 *
 * An *entry* is a file or directory directly under the directory (hidden
 * and temporary names never are). It is complete when
 *   - the trainer reported it (saved(path, step): watch_saved) as it is now,
 *     and nobody writes in it; once the trainer reports, the rules below
 *     but the last are off, or
 *   - it was renamed into place, or
 *   - a file matching the marker glob in it was closed after writing (or is
 *     there when the entry is first seen), no process writes in it, and it
 *     holds the same files as the last complete entry with a marker, or a
 *     newer entry has its marker, or nothing in it changed for the quiet
 *     time (the smaller of settle_ms and 2 s), or
 *   - (a file) its writer closed it, and 300 ms later nobody has it open for
 *     writing, that writer is alive and the child is not being stopped, or
 *   - nothing changed in it for `settle_ms` and no process holds a file
 *     under it open for writing.
 * An entry that loses a file or directory (deleted, moved away) is being
 * removed: it is never complete again unless its marker is written again.
 * Its step is the trainer's (saved(), trainer_state.json, the name), else a
 * counter value above every step seen.
 *
 * Each commit is a snapshot: the complete entries of the newest step plus
 * every complete entry with a counted step plus the symbolic links of the
 * directory (as links to items of the same checkpoint, or as what they
 * point to), at its entries' trainer step (else the highest counted one).
 * Commits run one at a time on a worker thread that owns its own libckpt
 * context; results come back through a pipe the supervisor polls.
 * Everything else runs on the supervisor's thread.
 */
#ifndef CKPTRUN_WATCH_H
#define CKPTRUN_WATCH_H

#include <stdint.h>
#include <sys/types.h>
#include "watch/commit.h"
#include "watch/commit_files.h"
#include "watch/events.h"
#include "watch/steps.h"

struct watch;
struct watch_job;
struct record;

/* Watch `dir` (must exist); commits go through `ctx`, which the watcher
 * owns from now on (closed by watch_close). Entries already in `dir` are
 * compared with what the store holds: those named in the `files/` marks of
 * the run's checkpoints (read through `rec`, which may be NULL: then none)
 * are taken as committed, the others are new and committed once complete.
 * The step counter starts above the highest step in the store.
 * @return 0 or -1 (logged). */
int watch_open(struct watch **out, const char *dir, const char *marker, uint64_t settle_ms,
               struct ckpt_ctx *ctx, struct record *rec);
/* Stop the worker and free everything. With wait == 0 and a commit in
 * flight, the worker is abandoned (the process is about to exit). */
void watch_close(struct watch *w, int wait);

int watch_inotify_fd(const struct watch *w);
int watch_result_fd(const struct watch *w);

/* Counted steps (entries nothing gives a step) are above every step seen,
 * `step` included. */
void watch_note_step(struct watch *w, uint64_t step);
/* The child's process group once it runs (its closes are judged as its). */
void watch_set_pgid(struct watch *w, pid_t pgid);
/* The child exited with `code` (as a shell reports it: 128+N for signal N).
 * A clean exit (0, before ckptrun signalled it) leaves no writer: entries
 * still settling are complete at once. After any exit the links are read
 * again and the newest checkpoint is committed again if they changed. */
void watch_child_exit(struct watch *w, int code);
/* ckptrun is about to SIGTERM/SIGKILL the child's group: the directory is
 * looked at once more (what is complete now counts, whatever the child dies
 * of next; an entry with its marker unchanged for 300 ms with no writer too,
 * its quiet time over or not); what changes or is closed from now on may be
 * torn by the kill and is not complete. */
void watch_stopping(struct watch *w);
/* Stop committing entries for good (commits in flight finish): the child
 * commits the run through libckpt itself, and a run has one writer --
 * two would refuse each other's HEAD updates. */
void watch_pause(struct watch *w);
/* The next commit uses `codec` (a faster one when a stop is short of time).
 * Thread-safe (ckpt_request). */
void watch_next_codec(struct watch *w, ckpt_codec codec);
/* Shorter settle time while stopping (the trainer was asked to save). */
void watch_set_settle(struct watch *w, uint64_t settle_ms);

/* Run completeness checks and queue the next commit. @return the monotonic
 * ms at which it wants to be called again, or -1 when nothing is pending. */
int64_t watch_tick(struct watch *w);
/* 1 when events arrived that watch_tick should look at before the time it
 * asked for (new entries, renames, closes, markers, results): ticking on
 * every wake-up would walk settling trees once per inotify event. */
int watch_dirty(const struct watch *w);

/* Take one finished commit (after poll says the result fd is readable).
 * Commits dropped because an entry vanished or changed while being read are
 * handled here (logged, read again once complete) and never returned.
 * @return a result to free with watch_result_free, or NULL. */
struct watch_result *watch_take_result(struct watch *w);
/* (free it with watch_result_free, watch/commit.h) */

/* Commits queued or in flight. */
int watch_busy(struct watch *w);
/* The newest complete state of the directory that the store does not hold:
 * the complete entries the next snapshot would take (those of the newest
 * step, and those without a number) whose version is not committed -- its
 * commit failed, or none was made yet. fn (may be NULL) gets each one's
 * name, step and what a walk of it found (files, bytes). With `retry`,
 * their failures are forgotten so that the next watch_tick commits them
 * again (the supervisor's last attempt when the child ends). Nothing while
 * paused (the child commits through libckpt). Supervisor's thread only.
 * @return how many entries. */
int watch_uncommitted(struct watch *w, int retry,
                      void (*fn)(void *user, const char *name, uint64_t step,
                                 const struct commit_print *print),
                      void *user);

#endif
