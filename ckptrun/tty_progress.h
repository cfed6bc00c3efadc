/*
 * tty_progress.h -- the progress display of a long library call (save, restore,
 * verify) on a terminal: a thread reads ckpt_progress() and draws one status
 * line (log_status) -- phase, percent, bytes, rate, ETA -- first after
 * 300 ms (quick calls draw nothing), then every 250 ms. Nothing is drawn
 * when stderr is not a terminal, with -q or with --log-json.
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

/* "restore  41%  1.23 GiB / 3.00 GiB  96.3 MiB/s  ETA 19.0s" for `done`
 * of `total` bytes (0: unknown) at `rate` bytes/s, into buf. Pure. */
char *progress_text(const char *what, uint64_t done, uint64_t total, double rate,
                    char *buf, size_t n);

#endif
