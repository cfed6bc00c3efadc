/*
 * renewer.h -- the thread that keeps the run's lease (lease.h) renewed
 * while the supervisor runs.
 *
 * The supervisor's loop must never wait on a store's latency or retries,
 * and a renewal must not wait on the loop: the renewer owns the lease while
 * it runs (a lease is used by one thread at a time) and renews it every
 * TTL/3. A transient failure is retried soon (at most every second) until
 * the lease expires; a renewal refused (another runner took the run over)
 * or none getting through before expiry loses the lease: the renewer says
 * so through renewer_lost(), calls `wake` and ends.
 */
#ifndef CKPTRUN_RENEWER_H
#define CKPTRUN_RENEWER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include "ckpt.h"

struct lease;

struct renewer {
    /* set by renewer_start, read by the thread */
    struct lease *l;
    void (*wake)(void);       /* tells the loop the lease is lost */
    pthread_t thr;
    int running;              /* a thread was started (the caller's view) */
    /* shared with the thread: guarded by mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;        /* on CLOCK_MONOTONIC */
    int stop, lost;
    int64_t next;             /* mono ms of the next renewal (renewer_start
                                 sets the first, renewer_kick makes it now) */
    char why[700];            /* why the lease is lost */
};

/* Start renewing `l` (held: lease_acquire succeeded); `wake` (thread-safe)
 * is called once if the lease is lost. @return 0, or -1 (no thread). */
int renewer_start(struct renewer *r, struct lease *l, void (*wake)(void));
/* Stop and join the thread; the lease is the caller's again. No-op when
 * not running. */
void renewer_stop(struct renewer *r);
/* Renew now: a commit was refused as fenced, which a takeover does -- but
 * so does a `ckptrun gc` rewriting HEAD. The renewal tells them apart:
 * refused means the lease is gone. */
void renewer_kick(struct renewer *r);
/* 1 when the lease is lost, with why (size n); else 0. */
int renewer_lost(struct renewer *r, char *why, size_t n);

#endif
