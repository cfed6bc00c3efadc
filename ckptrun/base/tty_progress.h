/*
 * tty_progress.h -- the progress display of a long library call (save, restore,
 * verify) on a terminal: a thread reads ckpt_progress() and draws one status
 * line (log_status) -- phase, percent, bytes, rate, ETA -- first after
 * 300 ms (quick calls draw nothing), then every 250 ms. Nothing is drawn
 * when stderr is not a terminal, with -q or with --log-json.
 *
 * A save is measured by its bytes as they leave for the store (ckpt.h,
 * sent_bytes): the share sent of what it will send (encoded_bytes, and
 * while reading goes on as much more as there is left to read), drawn on
 * the checkpoint's raw scale; its rate and ETA are the upload's. Once all
 * of it is sent, the manifest and HEAD: "committing". Where the store
 * cannot tell, the bytes read, then "writing to the store".
 */
#ifndef CKPTRUN_TTY_PROGRESS_H
#define CKPTRUN_TTY_PROGRESS_H

#include "ckpt.h"

struct progress;

/* Start showing ctx's progress under the label `what` ("restore").
 * @return a handle (NULL when nothing is shown: not a terminal, or out of
 * memory); progress_stop(NULL) is fine. */
struct progress *progress_start(struct ckpt_ctx *ctx, const char *what);
/* Stop the thread and clear the line. NULL-safe. */
void progress_stop(struct progress *p);

/* The supervisor's display (`run`, `recover`), for the whole run: nothing is
 * drawn until progress_run_state() says a commit is in flight (ctx: the
 * watcher's context) or a stop waits for its final checkpoint; then, after
 * the same 300 ms, "commit step 80  41%  1.23 GiB / 3.00 GiB  96.3 MiB/s
 * ETA 19.0s" (progress_save_text), followed during a stop by the time left
 * ("  12.0s left").
 * @return as progress_start. */
struct progress *progress_start_run(struct ckpt_ctx *ctx);
/* What to show now (thread-safe; cheap when nothing changed): `active` a
 * commit on ctx is in flight; else `waiting` (may be NULL: nothing) names
 * what a stop waits for; `deadline_mono` (0: none) is what the time left
 * counts down to. Going idle clears the line at once. NULL-safe. */
void progress_run_state(struct progress *p, int active, const char *waiting, int64_t deadline_mono);

/* "restore  41%  1.23 GiB / 3.00 GiB  96.3 MiB/s  ETA 19.0s" for `done`
 * of `total` bytes (0: unknown) at `rate` bytes/s, into buf. Pure. */
char *progress_text(const char *what, uint64_t done, uint64_t total, double rate,
                    char *buf, size_t n);

/* A save's line from its counters `pr` (phase CKPT_PROGRESS_SAVE), `rate`
 * the bytes/s of progress_save_count() and `took_ms` since it began, into
 * buf: "commit step 1  45%  3.60 MiB / 8.00 MiB  1.20 MiB/s  ETA 4.1s"
 * while its bytes leave, "commit step 1  8.00 MiB sent, committing, 3.1s
 * in" once they all have; where the store cannot tell (no
 * CKPT_PROGRESS_SENT), the bytes read, then "8.00 MiB read, writing to the
 * store, 3.1s in". Pure. */
char *progress_save_text(const char *what, const struct ckpt_progress *pr, double rate,
                         int64_t took_ms, char *buf, size_t n);
/* What a save's rate is measured on: its bytes sent, or where the store
 * cannot tell its bytes read. */
uint64_t progress_save_count(const struct ckpt_progress *pr);

#endif
