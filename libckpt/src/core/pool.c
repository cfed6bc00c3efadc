/* pool.c -- the worker pool and batches (pool.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/pool.h"
#include "base/util.h"

struct qjob {
    ckpt_job_fn fn;
    void *arg;
    struct qjob *next;
};

struct ckpt_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct qjob *head, *tail;
    struct qjob *ihead, *itail; /* idle jobs: run when head is empty */
    int idle_running;           /* one idle job at a time */
    int hold, stop;
    unsigned n;
    size_t chunk_bytes;        /* of the workers' codec workspaces */
    pthread_t *threads;
};

static void *worker_main(void *arg)
{
    struct ckpt_pool *p = arg;
    struct ckpt_codec_ws *ws = ckpt__codec_ws_new(p->chunk_bytes);
    for (;;) {
        struct qjob *j;
        int idle = 0;
        pthread_mutex_lock(&p->mu);
        while (!p->stop && (p->hold || (!p->head && (!p->ihead || p->idle_running))))
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->head) {
            j = p->head;
            p->head = j->next;
            if (!p->head)
                p->tail = NULL;
        } else if (p->ihead && !p->idle_running) {
            j = p->ihead;
            p->ihead = j->next;
            if (!p->ihead)
                p->itail = NULL;
            p->idle_running = idle = 1;
        } else if (p->ihead) { /* stop: the last idle jobs, one at a time */
            pthread_cond_wait(&p->cv, &p->mu);
            pthread_mutex_unlock(&p->mu);
            continue;
        } else { /* stop, and nothing left */
            pthread_mutex_unlock(&p->mu);
            break;
        }
        pthread_mutex_unlock(&p->mu);
        /* A worker without its buffers still runs jobs: they report NOMEM. */
        j->fn(j->arg, ws);
        free(j);
        if (idle) {
            pthread_mutex_lock(&p->mu);
            p->idle_running = 0;
            pthread_cond_broadcast(&p->cv); /* the next idle job, or a stop */
            pthread_mutex_unlock(&p->mu);
        }
    }
    ckpt__codec_ws_free(ws);
    return NULL;
}

ckpt_status ckpt__pool_start(struct ckpt_pool **out, unsigned workers, size_t chunk_bytes)
{
    struct ckpt_pool *p = calloc(1, sizeof *p);
    *out = NULL;
    if (!p)
        return CKPT_E_NOMEM;
    p->threads = calloc(workers ? workers : 1, sizeof *p->threads);
    if (!p->threads) {
        free(p);
        return CKPT_E_NOMEM;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->chunk_bytes = chunk_bytes;
    for (unsigned i = 0; i < workers; i++) {
        if (ckpt__thread_start(&p->threads[i], worker_main, p) != 0)
            break;
        p->n++;
    }
    if (p->n == 0) {
        ckpt__pool_stop(p);
        return CKPT_E_NOMEM;
    }
    *out = p;
    return CKPT_OK;
}

void ckpt__pool_stop(struct ckpt_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    p->hold = 0;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->n; i++)
        pthread_join(p->threads[i], NULL);
    free(p->threads);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}

static ckpt_status submit(struct ckpt_pool *p, ckpt_job_fn fn, void *arg, int idle)
{
    struct qjob *j = ckpt__failpoint("pool_submit") ? NULL : malloc(sizeof *j);
    struct qjob **head = idle ? &p->ihead : &p->head, **tail = idle ? &p->itail : &p->tail;
    if (!j)
        return CKPT_E_NOMEM;
    j->fn = fn;
    j->arg = arg;
    j->next = NULL;
    pthread_mutex_lock(&p->mu);
    if (*tail)
        (*tail)->next = j;
    else
        *head = j;
    *tail = j;
    if (!p->hold)
        pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return CKPT_OK;
}

ckpt_status ckpt__pool_submit(struct ckpt_pool *p, ckpt_job_fn fn, void *arg)
{
    return submit(p, fn, arg, 0);
}

ckpt_status ckpt__pool_submit_idle(struct ckpt_pool *p, ckpt_job_fn fn, void *arg)
{
    return submit(p, fn, arg, 1);
}

bool ckpt__pool_wanted(struct ckpt_pool *p)
{
    bool w;
    pthread_mutex_lock(&p->mu);
    w = p->head != NULL;
    pthread_mutex_unlock(&p->mu);
    return w;
}

bool ckpt__pool_closing(struct ckpt_pool *p)
{
    bool c;
    pthread_mutex_lock(&p->mu);
    c = p->stop != 0;
    pthread_mutex_unlock(&p->mu);
    return c;
}

void ckpt__pool_hold(struct ckpt_pool *p, int hold)
{
    pthread_mutex_lock(&p->mu);
    p->hold = hold;
    if (!hold)
        pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* ---- batches ------------------------------------------------------------------- */
void ckpt__batch_init(struct ckpt_batch *b)
{
    memset(b, 0, sizeof *b);
    atomic_init(&b->failed, false);
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
}

void ckpt__batch_destroy(struct ckpt_batch *b)
{
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
}

void ckpt__batch_done(struct ckpt_batch *b, ckpt_status st, const char *err)
{
    pthread_mutex_lock(&b->mu);
    if (st && !b->st) {
        b->st = st;
        atomic_store(&b->failed, true);
        snprintf(b->err, sizeof b->err, "%s", err ? err : "");
    }
    if (--b->pending == 0)
        pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

ckpt_status ckpt__batch_wait(struct ckpt_batch *b)
{
    ckpt_status st;
    pthread_mutex_lock(&b->mu);
    while (b->pending)
        pthread_cond_wait(&b->cv, &b->mu);
    st = b->st;
    pthread_mutex_unlock(&b->mu);
    return st;
}

bool ckpt__batch_failed(struct ckpt_batch *b)
{
    return atomic_load(&b->failed);
}
