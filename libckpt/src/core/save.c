/* save.c -- one save in flight, and the slot for it (save.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/save.h"

struct ckpt_save *ckpt__save_new(struct ckpt_ctx *ctx, uint64_t step, size_t nitems)
{
    struct ckpt_save *sv = calloc(1, sizeof *sv);
    if (!sv)
        return NULL;
    pthread_mutex_init(&sv->mu, NULL);
    pthread_cond_init(&sv->cv, NULL);
    sv->ctx = ctx;
    sv->step = step;
    sv->m.step = step;
    sv->m.rank = 0;
    sv->m.world_size = 1;
    sv->m.items = calloc(nitems ? nitems : 1, sizeof *sv->m.items);
    sv->paths = calloc(nitems ? nitems : 1, sizeof *sv->paths);
    sv->files = calloc(nitems ? nitems : 1, sizeof *sv->files);
    sv->lo = calloc(nitems ? nitems : 1, sizeof *sv->lo);
    sv->hi = calloc(nitems ? nitems : 1, sizeof *sv->hi);
    if (!sv->m.items || !sv->paths || !sv->files || !sv->lo || !sv->hi) {
        ckpt__save_free(sv);
        return NULL;
    }
    sv->m.nitems = nitems;
    sv->pending = 1; /* the snapshot's reference */
    return sv;
}

void ckpt__save_free(struct ckpt_save *sv)
{
    if (!sv)
        return;
    if (sv->paths)
        for (size_t i = 0; i < sv->m.nitems; i++)
            free(sv->paths[i]);
    free(sv->paths);
    free(sv->files);
    free(sv->lo);
    free(sv->hi);
    ckpt__idset_free(&sv->packslot);
    ckpt__manifest_free(&sv->m);
    pthread_mutex_destroy(&sv->mu);
    pthread_cond_destroy(&sv->cv);
    free(sv);
}

void ckpt__save_fail(struct ckpt_save *sv, ckpt_status st, const char *fmt, ...)
{
    va_list ap;
    pthread_mutex_lock(&sv->mu);
    if (!sv->st) {
        sv->st = st;
        va_start(ap, fmt);
        vsnprintf(sv->err, sizeof sv->err, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&sv->mu);
}

void ckpt__save_ref(struct ckpt_save *sv)
{
    pthread_mutex_lock(&sv->mu);
    sv->pending++;
    pthread_mutex_unlock(&sv->mu);
}

int ckpt__save_unref(struct ckpt_save *sv)
{
    int last;
    pthread_mutex_lock(&sv->mu);
    last = --sv->pending == 0;
    pthread_mutex_unlock(&sv->mu);
    return last;
}

void ckpt__save_add_new(struct ckpt_save *sv, uint64_t bytes)
{
    pthread_mutex_lock(&sv->mu);
    sv->new_bytes += bytes;
    pthread_mutex_unlock(&sv->mu);
}

void ckpt__flight_init(struct ckpt_flight *f)
{
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    f->busy = false;
    f->last = CKPT_OK;
}

void ckpt__flight_destroy(struct ckpt_flight *f)
{
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
}

ckpt_status ckpt__flight_idle(struct ckpt_flight *f, bool skip, ckpt_status *prev)
{
    bool busy;
    if (skip) {
        pthread_mutex_lock(&f->mu);
        busy = f->busy;
        pthread_mutex_unlock(&f->mu);
        if (busy)
            return CKPT_E_BUSY;
    }
    *prev = ckpt__flight_wait(f);
    return CKPT_OK;
}

void ckpt__flight_begin(struct ckpt_flight *f)
{
    pthread_mutex_lock(&f->mu);
    f->busy = true;
    pthread_mutex_unlock(&f->mu);
}

void ckpt__flight_end(struct ckpt_flight *f, ckpt_status st)
{
    pthread_mutex_lock(&f->mu);
    f->busy = false;
    f->last = st;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

ckpt_status ckpt__flight_wait(struct ckpt_flight *f)
{
    ckpt_status st;
    pthread_mutex_lock(&f->mu);
    while (f->busy)
        pthread_cond_wait(&f->cv, &f->mu);
    st = f->last;
    f->last = CKPT_OK;
    pthread_mutex_unlock(&f->mu);
    return st;
}

void ckpt__flight_settle(struct ckpt_flight *f)
{
    pthread_mutex_lock(&f->mu);
    while (f->busy)
        pthread_cond_wait(&f->cv, &f->mu);
    pthread_mutex_unlock(&f->mu);
}

void ckpt__flight_peek(struct ckpt_flight *f, bool *busy, ckpt_status *last)
{
    pthread_mutex_lock(&f->mu);
    *busy = f->busy;
    *last = f->last;
    pthread_mutex_unlock(&f->mu);
}
