/* tty_progress.c -- see tty_progress.h. */
#include "tty_progress.h"
#include "runlog.h"
#include "parse.h"
#include "ckpt_store.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FIRST_MS 300  /* a call that ends before this draws nothing */
#define EVERY_MS 250  /* redraws: 4 a second */

struct progress {
    struct ckpt_ctx *ctx;
    const char *what;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    int64_t t0;
    /* rate over a sliding window, not since the start: a stall shows */
    uint64_t win_bytes[8];
    int64_t win_ms[8];
    unsigned win_n;
};

char *progress_text(const char *what, uint64_t done, uint64_t total, double rate,
                    char *buf, size_t n)
{
    char d[32], t[32], r[32], eta[32] = "";

    ckpt_fmt_bytes(done, d, sizeof d);
    ckpt_fmt_rate(rate, r, sizeof r);
    if (total && done <= total) {
        if (rate > 0 && done < total) {
            char e[32];
            snprintf(eta, sizeof eta, "  ETA %s",
                     ckpt_fmt_duration((uint64_t)((double)(total - done) / rate * 1000.0), e,
                                  sizeof e));
        }
        snprintf(buf, n, "%s %3u%%  %s / %s  %s%s", what,
                 (unsigned)(total ? done * 100 / total : 0), d, ckpt_fmt_bytes(total, t, sizeof t),
                 r, eta);
    } else {
        snprintf(buf, n, "%s  %s  %s", what, d, r);
    }
    return buf;
}

static void draw(struct progress *p)
{
    struct ckpt_progress pr;
    char line[320], tmp[256];
    int64_t now = ckpt_mono_ms();
    unsigned slot = p->win_n % 8, oldest;
    double rate;

    if (ckpt_progress(p->ctx, &pr) != CKPT_OK || pr.phase == CKPT_PROGRESS_IDLE)
        return;
    p->win_bytes[slot] = pr.bytes_done;
    p->win_ms[slot] = now;
    p->win_n++;
    /* the rate over the last two seconds (8 draws), not since the start,
     * so a stall shows; since the start until the window has filled a bit */
    oldest = p->win_n >= 8 ? p->win_n % 8 : 0;
    if (p->win_n >= 3 && now > p->win_ms[oldest])
        rate = (double)(pr.bytes_done - p->win_bytes[oldest]) * 1000.0 /
               (double)(now - p->win_ms[oldest]);
    else
        rate = now > p->t0 ? (double)pr.bytes_done * 1000.0 / (double)(now - p->t0) : 0;
    progress_text(p->what, pr.bytes_done, pr.bytes_total, rate, tmp, sizeof tmp);
    if (pr.phase == CKPT_PROGRESS_VERIFY && pr.checkpoints_done > 1)
        snprintf(line, sizeof line, "%s  (%llu checkpoints)", tmp,
                 (unsigned long long)pr.checkpoints_done);
    else
        snprintf(line, sizeof line, "%s", tmp);
    log_status(line);
}

static void *run(void *arg)
{
    struct progress *p = arg;
    struct timespec ts;
    int64_t wait = FIRST_MS;

    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)(wait % 1000) * 1000000L;
        ts.tv_sec += wait / 1000 + ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        if (pthread_cond_timedwait(&p->cv, &p->mu, &ts) == 0 || p->stop)
            continue;
        pthread_mutex_unlock(&p->mu);
        draw(p);
        pthread_mutex_lock(&p->mu);
        wait = EVERY_MS;
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

struct progress *progress_start(struct ckpt_ctx *ctx, const char *what)
{
    struct progress *p;

    if (!ctx || !log_interactive())
        return NULL;
    p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->ctx = ctx;
    p->what = what;
    p->t0 = ckpt_mono_ms();
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    /* signals stay with the main thread (as the library's threads do) */
    if (ckpt_thread_start(&p->thread, run, p) != 0) {
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
        free(p);
        return NULL;
    }
    return p;
}

void progress_stop(struct progress *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    log_status(NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}
