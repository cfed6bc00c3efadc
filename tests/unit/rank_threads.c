/* rank_threads.c -- ranks as threads over a fake collective (rank_threads.h). */
#include <stdarg.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "rank_threads.h"

int f_allreduce(void *user, uint64_t *v, size_t n, ckpt_reduce_op op)
{
    struct frank *r = user;
    struct fcoll *f = r->f;
    struct timespec until;
    uint64_t gen;
    int rc = 0;
    if (n > 4096)
        return -1;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 60; /* a rank that never comes fails the call, never hangs the test */
    pthread_mutex_lock(&f->mu);
    gen = f->gen;
    if (f->arrived == 0) {
        memcpy(f->acc, v, n * sizeof *v);
        f->len = n;
        f->op = (int)op;
        f->mismatch = 0;
    } else {
        if (n != f->len || (int)op != f->op)
            f->mismatch = 1;
        for (size_t i = 0; i < n && i < f->len; i++)
            f->acc[i] = op == CKPT_REDUCE_SUM ? f->acc[i] + v[i]
                        : op == CKPT_REDUCE_MAX ? (v[i] > f->acc[i] ? v[i] : f->acc[i])
                                                : (v[i] < f->acc[i] ? v[i] : f->acc[i]);
    }
    if (++f->arrived == f->n) {
        memcpy(f->result, f->acc, f->len * sizeof *v);
        f->arrived = 0;
        f->gen++;
        f->calls++;
        pthread_cond_broadcast(&f->cv);
    } else {
        while (f->gen == gen && rc == 0)
            rc = pthread_cond_timedwait(&f->cv, &f->mu, &until);
    }
    if (f->gen != gen) {
        rc = f->mismatch ? -1 : 0;
        memcpy(v, f->result, n * sizeof *v);
    } else {
        rc = -1;
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

int f_barrier(void *user)
{
    uint64_t x = 0;
    return f_allreduce(user, &x, 1, CKPT_REDUCE_MAX);
}

struct ckpt_config rank_cfg(const char *url, const char *run, unsigned keep)
{
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    cfg.store = url;
    cfg.run = run;
    cfg.chunk_bytes = CHUNK;
    cfg.codec = CKPT_CODEC_NONE;
    cfg.no_control = 1;
    cfg.workers = 2;
    cfg.keep = keep;
    cfg.log_level = CKPT_LOG_OFF;
    cfg.log_fn = NULL;
    return cfg;
}


/* Counts the failed-step events (events.c logs them as subject "save",
 * "step N not committed: ..."); every other line is dropped. */
static void rank_log(void *user, ckpt_log_level level, const char *subject, const char *msg)
{
    struct thr *t = user;
    if (level == CKPT_LOG_ERROR && strcmp(subject, "save") == 0 &&
        strstr(msg, " not committed: "))
        atomic_fetch_add(&t->j->failed_events[t->r], 1);
}

static void *rank_main(void *arg)
{
    struct thr *t = arg;
    struct job *j = t->j;
    struct ckpt_config cfg = rank_cfg(j->url, j->run, j->keep);
    struct ckpt_ctx *ctx = NULL;
    cfg.collective = &j->fr[t->r].coll;
    cfg.log_fn = rank_log;
    cfg.log_user = t;
    cfg.log_level = CKPT_LOG_ERROR;
    j->open_st[t->r] = ckpt_open(&cfg, &ctx);
    if (j->open_st[t->r] != CKPT_OK) {
        snprintf(j->open_err[t->r], CKPT_ERR_MAX, "%s", ckpt_errmsg(NULL));
        return NULL;
    }
    j->fn(j, t->r, ctx);
    ckpt_close(ctx);
    return NULL;
}


/* Run fn on n ranks; fails the test on any rank's CHECK. */
void run_job(struct job *j, unsigned n, const char *run, rank_fn fn, bool expect_open)
{
    pthread_t th[MAXR];
    struct thr t[MAXR];
    j->n = n;
    j->run = run;
    j->fn = fn;
    memset(&j->f, 0, sizeof j->f);
    pthread_mutex_init(&j->f.mu, NULL);
    pthread_cond_init(&j->f.cv, NULL);
    j->f.n = n;
    for (unsigned r = 0; r < n; r++) {
        j->fr[r].f = &j->f;
        j->fr[r].coll = (struct ckpt_collective){ .version = CKPT_COLLECTIVE_VERSION,
                                                  .rank = j->same_rank ? 0 : r,
                                                  .size = n,
                                                  .user = &j->fr[r],
                                                  .allreduce_u64 = f_allreduce,
                                                  .barrier = f_barrier };
        j->fail_line[r] = 0;
        t[r].j = j;
        t[r].r = r;
        assert_int_equal(pthread_create(&th[r], NULL, rank_main, &t[r]), 0);
    }
    for (unsigned r = 0; r < n; r++)
        pthread_join(th[r], NULL);
    pthread_mutex_destroy(&j->f.mu);
    pthread_cond_destroy(&j->f.cv);
    for (unsigned r = 0; r < n; r++) {
        if (expect_open && j->open_st[r] != CKPT_OK)
            fail_msg("rank %u: ckpt_open: %s (%s)", r, ckpt_status_name(j->open_st[r]),
                     j->open_err[r]);
        if (j->fail_line[r])
            fail_msg("rank %u, line %d: %s", r, j->fail_line[r], j->fail_msg[r]);
    }
}


struct job *job_new(const char *url)
{
    struct job *j = calloc(1, sizeof *j);
    assert_non_null(j);
    j->keep = 3;
    j->url = url;
    return j;
}

