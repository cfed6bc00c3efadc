/* notice/report.c -- what a polling thread reports, and how it waits
 * (notice/int.h). Never a false notice: only a 200 reply that a strict
 * parser accepts becomes an event (notice/parse.c). */
#include "notice/int.h"
#include "base/runlog.h"
#include "notice/report.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

void notice_log(struct notice_poller *p, ckpt_log_level lv, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    if (!p->log_fn)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->log_fn(p->log_user, lv, "notice", msg);
}

/* The same condition told twice reads the same apart from durations:
 * libcurl says "Failed to connect to ... after 0 ms" one poll and "after 1 ms"
 * the next. Digits right before " ms" do not make a new condition. */
int notice_same_condition(const char *a, const char *b)
{
    for (;;) {
        if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
            const char *ea = a, *eb = b;
            while (isdigit((unsigned char)*ea))
                ea++;
            while (isdigit((unsigned char)*eb))
                eb++;
            if (strncmp(ea, " ms", 3) == 0 && strncmp(eb, " ms", 3) == 0) {
                a = ea;
                b = eb;
                continue;
            }
        }
        if (*a != *b)
            return 0;
        if (!*a)
            return 1;
        a++;
        b++;
    }
}

/* A poller that fails every second must not flood the log. */
void notice_cond_fail(struct nwatch *w, int slot, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (notice_same_condition(msg, w->last[slot]))
        return;
    snprintf(w->last[slot], sizeof w->last[slot], "%s", msg);
    notice_log(w->p, CKPT_LOG_WARN, "%s: %s (still polling)", w->p->provider, msg);
}

void notice_cond_ok(struct nwatch *w, int slot)
{
    if (!w->last[slot][0])
        return;
    notice_log(w->p, CKPT_LOG_INFO, "%s: recovered from: %s", w->p->provider, w->last[slot]);
    w->last[slot][0] = '\0';
}

int notice_nap(struct notice_poller *p, long ms)
{
    struct timespec ts;
    int stopping;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&p->mu);
    while (!atomic_load(&p->stop)) {
        if (pthread_cond_timedwait(&p->cv, &p->mu, &ts) == ETIMEDOUT)
            break;
    }
    stopping = atomic_load(&p->stop);
    pthread_mutex_unlock(&p->mu);
    return stopping;
}

long notice_poll_interval(const struct notice_poller *p, long dflt)
{
    return p->interval_ms > 0 ? p->interval_ms : dflt;
}

void notice_deliver(struct notice_poller *p, struct notice_event *ev)
{
    char key[400];
    unsigned i;

    ev->provider = p->provider;
    pthread_mutex_lock(&p->deliver_mu);
    if (atomic_load(&p->stop))
        goto out;
    if (ev->kind == NOTICE_TERMINATE) {
        /* One termination per instance, whichever path reported it first
         * (AWS serves it on two paths; Azure may list several events). */
        if (p->terminated)
            goto out;
        p->terminated = 1;
    } else {
        snprintf(key, sizeof key, "%d|%s|%s", (int)ev->kind, ev->id, ev->detail);
        for (i = 0; i < p->nkeys && i < KEYS; i++)
            if (strcmp(p->keys[i], key) == 0)
                goto out;
        snprintf(p->keys[p->nkeys % KEYS], sizeof p->keys[0], "%s", key);
        p->nkeys++;
    }
    notice_log(p, CKPT_LOG_INFO, "%s: %s notice, deadline in %lld ms: %s", p->provider,
               ev->kind == NOTICE_TERMINATE   ? "terminate"
               : ev->kind == NOTICE_REBALANCE ? "rebalance"
                                              : "maintenance",
               ev->deadline_ms ? (long long)(ev->deadline_ms - ckpt__now_ms()) : 0LL, ev->detail);
    p->cb(p->user, ev);
out:
    pthread_mutex_unlock(&p->deliver_mu);
}

void notice_result(struct nwatch *w, int slot, int r, struct notice_event *ev)
{
    if (r < 0) {
        notice_cond_fail(w, slot, "%s", ev->detail);
        return;
    }
    notice_cond_ok(w, slot);
    if (r > 0)
        notice_deliver(w->p, ev);
}

void notice_handle(struct nwatch *w, int slot, notice_parser parse, const char *body, size_t len)
{
    struct notice_event ev;
    notice_result(w, slot, parse(body, len, ckpt__now_ms(), &ev), &ev);
}
