/* renewer.c -- the lease renewal thread (renewer.h). */
#include "sup/renewer.h"
#include "record/lease.h"
#include "base/runlog.h"
#include "ckpt_store.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static void *renew_main(void *arg)
{
    struct renewer *r = arg;
    const int64_t every = (int64_t)lease_ttl_ms(r->l) / 3;
    char err[CKPT_ERR_MAX];

    pthread_mutex_lock(&r->mu);
    while (!r->stop) {
        int64_t now = ckpt__mono_ms(), next = r->next;
        ckpt_status st;
        if (now < next) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_sec += (next - now) / 1000;
            ts.tv_nsec += ((next - now) % 1000) * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&r->cv, &r->mu, &ts);
            continue;
        }
        pthread_mutex_unlock(&r->mu);
        err[0] = '\0';
        st = lease_renew(r->l, err);
        pthread_mutex_lock(&r->mu);
        if (st == CKPT_OK) {
            /* A kick that came during this renewal is answered by it: the
             * write was conditional on our lease, so no takeover preceded
             * it, and none can follow before the lease it extended expires. */
            r->next = ckpt__mono_ms() + every;
            continue;
        }
        if (st == CKPT_E_FENCED || lease_expired(r->l)) {
            /* Refused, or no renewal got through before expiry: another
             * runner may hold the run now, so ours must stop committing. */
            if (st == CKPT_E_FENCED)
                snprintf(r->why, sizeof r->why, "%s",
                         err[0] ? err : "the lease was taken over by another runner");
            else
                snprintf(r->why, sizeof r->why, "it expired before a renewal got through (%s%s%.400s)",
                         ckpt_strerror(st), err[0] ? ": " : "", err);
            r->lost = 1;
            r->wake();
            break;
        }
        /* Transient: retry soon, until expiry. */
        log_msg(LOG_WARN, "lease", "renewal failed (%s%s%s); retrying", ckpt_strerror(st),
                err[0] ? ": " : "", err);
        r->next = ckpt__mono_ms() + (every / 10 < 1000 ? every / 10 : 1000);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

int renewer_start(struct renewer *r, struct lease *l, void (*wake)(void))
{
    pthread_condattr_t ca;
    int rc = -1;

    r->l = l;
    r->wake = wake;
    r->stop = r->lost = 0;
    r->why[0] = '\0';
    /* The first renewal is scheduled here, not by the thread: a
     * renewer_kick() made before the new thread first runs (a commit
     * fenced at once; a loaded machine) must not be overwritten by it. */
    r->next = ckpt__mono_ms() + (int64_t)lease_ttl_ms(l) / 3;
    pthread_mutex_init(&r->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&r->thr, NULL, renew_main, r) != 0) {
        pthread_mutex_destroy(&r->mu);
        pthread_cond_destroy(&r->cv);
        goto out;
    }
    r->running = 1;
    rc = 0;
out:
    return rc;
}

void renewer_stop(struct renewer *r)
{
    if (!r->running)
        return;
    pthread_mutex_lock(&r->mu);
    r->stop = 1;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->thr, NULL);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    r->running = 0;
}

void renewer_kick(struct renewer *r)
{
    if (!r->running)
        return;
    pthread_mutex_lock(&r->mu);
    r->next = 0;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

int renewer_lost(struct renewer *r, char *why, size_t n)
{
    int lost = 0;
    if (!r->running)
        return 0;
    pthread_mutex_lock(&r->mu);
    lost = r->lost;
    if (lost)
        snprintf(why, n, "%s", r->why);
    pthread_mutex_unlock(&r->mu);
    return lost;
}
