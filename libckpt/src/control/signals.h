/* signals.h -- SIGTERM/SIGINT reaching the process directly become a stop
 * while a context talks to ckptrun (see signals.c). */
#ifndef CKPT_SIGNALS_H
#define CKPT_SIGNALS_H

#include <stdint.h>

#include "ckpt.h"

struct ckpt_ctx;

/* @return 1 if a handler was installed (the program had left a signal at
 * its default). */
int ckpt__signals_install(struct ckpt_ctx *ctx);
void ckpt__signals_uninstall(struct ckpt_ctx *ctx); /* before ctx is freed */
/* Alone (no ckptrun): SIGTERM only, a stop once the program asks
 * (ckpt__signals_polled), with a save due within grace_ms (0: nothing is
 * installed). @return 1 if installed. */
int ckpt__signals_install_alone(struct ckpt_ctx *ctx, uint64_t grace_ms);
void ckpt__signals_polled(void);    /* ckpt_should_save was called */
/* No alone handler in this process from now on: the preload shim's context
 * serves a program that writes its own checkpoints (no ckpt_save would
 * answer the stop). */
void ckpt__signals_no_alone(void);
/* Alone, a save that began after the stop's SIGTERM: @return 1 once (the
 * caller then waits for its commit and calls ckpt__signals_alone_end). */
int ckpt__signals_alone_saving(struct ckpt_ctx *ctx);
/* Says how the stop's save ended (when `say`: one rank) and ends the
 * process with SIGTERM's default effect. Never returns. */
_Noreturn void ckpt__signals_alone_end(uint64_t step, ckpt_status st, const char *why, int say);
int ckpt__signals_wake_fd(void);    /* readable when a report is pending, -1 none */
/* One pending report: the signal and when it came. @return 1, or 0 none. */
int ckpt__signals_take(int *sig, long long *when_ms);
int ckpt__signals_taken(void);      /* a signal was already taken as a stop */
void ckpt__signals_stopping(void);  /* ckptrun said `stopping` */
void ckpt__signals_stop_requested(void); /* ckptrun asked for the stop's save */
/* A stop is under way in this process (ckptrun asked for the stop's save,
 * or a signal was taken as a stop): the next save is the last one kept. */
int ckpt__signals_stop_pending(void);

/* For tests only: the monotonic clock (ms) the handler reads to tell a
 * repeat within the 0.5 s window from a second signal, so a test moves time
 * instead of sleeping past the window (tests/unit/test_signals.c). NULL, the
 * default, is ckpt__mono_ms; nothing but a test sets it. It is called from
 * the signal handler: it must be async-signal-safe. */
typedef int64_t (*ckpt__signals_clock_fn)(void);
void ckpt__signals_test_clock(ckpt__signals_clock_fn now_ms);

#endif
