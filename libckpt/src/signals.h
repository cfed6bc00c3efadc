/* signals.h -- SIGTERM/SIGINT reaching the process directly become a stop
 * while a context talks to ckptrun (see signals.c). */
#ifndef CKPT_SIGNALS_H
#define CKPT_SIGNALS_H

struct ckpt_ctx;

/* @return 1 if a handler was installed (the program had left a signal at
 * its default). */
int ckpt__signals_install(struct ckpt_ctx *ctx);
void ckpt__signals_uninstall(struct ckpt_ctx *ctx); /* before ctx is freed */
int ckpt__signals_wake_fd(void);    /* readable when a report is pending, -1 none */
/* One pending report: the signal and when it came. @return 1, or 0 none. */
int ckpt__signals_take(int *sig, long long *when_ms);
int ckpt__signals_taken(void);      /* a signal was already taken as a stop */
void ckpt__signals_stopping(void);  /* ckptrun said `stopping` */
void ckpt__signals_stop_requested(void); /* ckptrun asked for the stop's save */

#endif
