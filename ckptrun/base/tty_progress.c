/* tty_progress.c -- see tty_progress.h. */
#include "base/tty_progress.h"
#include "base/runlog.h"
#include "base/parse.h"
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
    /* progress_start_run (guarded by mu): what to show */
    int run_mode;
    int active;
    char waiting[96];
    int64_t deadline;    /* mono ms, 0 none */
    int64_t since;       /* mono ms something has been to show */
    int64_t cur_started; /* started_ms of the save the window measures */
};

/* "what  41%  1.23 GiB / 3.00 GiB  96.3 MiB/s  ETA 19.0s": `eta_ms` < 0
 * leaves the ETA out. */
static char *line_text(const char *what, uint64_t done, uint64_t total, double rate,
                       int64_t eta_ms, char *buf, size_t n)
{
    char d[32], t[32], r[32], eta[32] = "";

    ckpt__fmt_bytes(done, d, sizeof d);
    ckpt__fmt_rate(rate, r, sizeof r);
    if (total && done <= total) {
        if (eta_ms >= 0) {
            char e[32];
            snprintf(eta, sizeof eta, "  ETA %s",
                     ckpt__fmt_duration((uint64_t)eta_ms, e, sizeof e));
        }
        snprintf(buf, n, "%s %3u%%  %s / %s  %s%s", what, (unsigned)(done * 100 / total), d,
                 ckpt__fmt_bytes(total, t, sizeof t), r, eta);
    } else {
        snprintf(buf, n, "%s  %s  %s", what, d, r);
    }
    return buf;
}

char *progress_text(const char *what, uint64_t done, uint64_t total, double rate,
                    char *buf, size_t n)
{
    int64_t eta = -1;
    if (total && rate > 0 && done < total)
        eta = (int64_t)((double)(total - done) / rate * 1000.0);
    return line_text(what, done, total, rate, eta, buf, n);
}

uint64_t progress_save_count(const struct ckpt_progress *pr)
{
    return pr->flags & CKPT_PROGRESS_SENT ? pr->sent_bytes : pr->bytes_done;
}

char *progress_save_text(const char *what, const struct ckpt_progress *pr, double rate,
                         int64_t took_ms, char *buf, size_t n)
{
    char a[32], d[32];
    int reading = pr->bytes_done < pr->bytes_total;
    uint64_t will, sent;
    double frac;

    ckpt__fmt_duration((uint64_t)(took_ms > 0 ? took_ms : 0), d, sizeof d);
    if (!(pr->flags & CKPT_PROGRESS_SENT)) {
        /* the store cannot tell what has left: what has been read, then
         * how long the writing takes */
        if (reading)
            return progress_text(what, pr->bytes_done, pr->bytes_total, rate, buf, n);
        snprintf(buf, n, "%s  %s read, writing to the store, %s in", what,
                 ckpt__fmt_bytes(pr->bytes_total, a, sizeof a), d);
        return buf;
    }
    /* What the save will send: the encoded bytes once every chunk is read,
     * until then as many more as there are raw bytes left to read. */
    will = pr->encoded_bytes;
    if (reading && pr->bytes_done)
        will = (uint64_t)((double)pr->encoded_bytes * (double)pr->bytes_total /
                          (double)pr->bytes_done);
    sent = pr->sent_bytes;
    if (!reading && sent >= will) { /* every chunk is out: manifest, HEAD */
        snprintf(buf, n, "%s  %s sent, committing, %s in", what, ckpt__fmt_bytes(sent, a, sizeof a),
                 d);
        return buf;
    }
    if (!will) /* nothing new encoded yet: nothing to measure against */
        return line_text(what, 0, pr->bytes_total, rate, -1, buf, n);
    if (sent > will)
        sent = will;
    /* the share sent, on the checkpoint's raw scale; the rate and what is
     * left in bytes sent */
    frac = (double)sent / (double)will;
    return line_text(what, (uint64_t)(frac * (double)pr->bytes_total), pr->bytes_total, rate,
                     rate > 0 ? (int64_t)((double)(will - sent) / rate * 1000.0) : -1, buf, n);
}

/* Bytes per second over the last two seconds (8 draws), not since the
 * start, so a stall shows; since the start until the window has filled a
 * bit. A count that went down (bytes sent taken back for a retry) gives 0,
 * not a negative rate. */
static double window_rate(struct progress *p, uint64_t done, int64_t now)
{
    unsigned slot = p->win_n % 8, oldest;
    double moved;

    p->win_bytes[slot] = done;
    p->win_ms[slot] = now;
    p->win_n++;
    oldest = p->win_n >= 8 ? p->win_n % 8 : 0;
    if (p->win_n >= 3 && now > p->win_ms[oldest]) {
        moved = (double)done - (double)p->win_bytes[oldest];
        return moved > 0 ? moved * 1000.0 / (double)(now - p->win_ms[oldest]) : 0;
    }
    return now > p->t0 ? (double)done * 1000.0 / (double)(now - p->t0) : 0;
}

/* The supervisor's line: the commit in flight, or what a stop waits for,
 * and the time left to its deadline. mu is held while drawing, so a
 * progress_run_state() that goes idle never sees its clear overdrawn. */
static void draw_run(struct progress *p)
{
    struct ckpt_progress pr;
    char line[400], tmp[256], label[48], left[48] = "", d[32];
    int64_t now = ckpt__mono_ms();

    pthread_mutex_lock(&p->mu);
    if ((!p->active && !p->waiting[0]) || now - p->since < FIRST_MS)
        goto out;
    if (p->deadline)
        snprintf(
            left, sizeof left, "  %s left",
            ckpt__fmt_duration((uint64_t)(p->deadline > now ? p->deadline - now : 0), d, sizeof d));
    if (p->active && ckpt_progress(p->ctx, &pr) == CKPT_OK && pr.phase != CKPT_PROGRESS_IDLE) {
        if (pr.started_ms != p->cur_started) { /* a new commit: a new window */
            p->cur_started = pr.started_ms;
            p->win_n = 0;
            p->t0 = now;
        }
        if (pr.phase == CKPT_PROGRESS_RESTORE)
            snprintf(label, sizeof label, "restore step %llu", (unsigned long long)pr.step);
        else
            snprintf(label, sizeof label, "commit step %llu", (unsigned long long)pr.step);
        if (pr.phase == CKPT_PROGRESS_SAVE)
            progress_save_text(label, &pr, window_rate(p, progress_save_count(&pr), now),
                               pr.started_ms ? ckpt__now_ms() - pr.started_ms : 0, tmp, sizeof tmp);
        else
            progress_text(label, pr.bytes_done, pr.bytes_total,
                          window_rate(p, pr.bytes_done, now), tmp, sizeof tmp);
        snprintf(line, sizeof line, "%s%s", tmp, left);
    } else if (p->waiting[0]) {
        snprintf(line, sizeof line, "%s%s", p->waiting, left);
    } else {
        goto out;
    }
    log_status(line);
out:
    pthread_mutex_unlock(&p->mu);
}

static void draw(struct progress *p)
{
    struct ckpt_progress pr;
    char line[320], tmp[256];
    int64_t now = ckpt__mono_ms();

    if (p->run_mode) {
        draw_run(p);
        return;
    }
    if (ckpt_progress(p->ctx, &pr) != CKPT_OK || pr.phase == CKPT_PROGRESS_IDLE)
        return;
    if (pr.phase == CKPT_PROGRESS_SAVE)
        progress_save_text(p->what, &pr, window_rate(p, progress_save_count(&pr), now),
                           pr.started_ms ? ckpt__now_ms() - pr.started_ms : 0, tmp, sizeof tmp);
    else
        progress_text(p->what, pr.bytes_done, pr.bytes_total,
                      window_rate(p, pr.bytes_done, now), tmp, sizeof tmp);
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

static struct progress *start(struct ckpt_ctx *ctx, const char *what, int run_mode)
{
    struct progress *p;

    if (!ctx || !log_interactive())
        return NULL;
    p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->ctx = ctx;
    p->what = what;
    p->run_mode = run_mode;
    p->t0 = ckpt__mono_ms();
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    /* signals stay with the main thread (as the library's threads do) */
    if (ckpt__thread_start(&p->thread, run, p) != 0) {
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
        free(p);
        return NULL;
    }
    return p;
}

struct progress *progress_start(struct ckpt_ctx *ctx, const char *what)
{
    return start(ctx, what, 0);
}

struct progress *progress_start_run(struct ckpt_ctx *ctx)
{
    return start(ctx, "commit", 1);
}

void progress_run_state(struct progress *p, int active, const char *waiting, int64_t deadline_mono)
{
    int was, on = active || (waiting && *waiting);

    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    was = p->active || p->waiting[0];
    if (on && !was)
        p->since = ckpt__mono_ms();
    p->active = active;
    snprintf(p->waiting, sizeof p->waiting, "%s", waiting ? waiting : "");
    p->deadline = deadline_mono;
    if (was && !on)
        log_status(NULL);
    pthread_mutex_unlock(&p->mu);
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
