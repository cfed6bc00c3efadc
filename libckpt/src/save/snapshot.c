/* snapshot.c -- the training thread's part of a save (snapshot.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "save/chunk.h"
#include "core/ctx.h"
#include "control/events.h"
#include "cuda/cuda.h"
#include "format/itemset.h"
#include "core/pool.h"
#include "core/save.h"
#include "control/signals.h"
#include "save/snapshot.h"
#include "core/staging.h"

static int cmp_name_idx(const void *a, const void *b, void *arg)
{
    const struct ckpt_save *sv = arg;
    return strcmp(sv->m.items[*(const size_t *)a].name, sv->m.items[*(const size_t *)b].name);
}

/* Replicated items (globalckpt.h): their chunks, all items' in name order, cut
 * into world_size contiguous ranges; this rank stores range `rank` and
 * only hashes the rest, so N ranks each upload about 1/N, small items
 * included. */
static ckpt_status spread_replicated(struct ckpt_ctx *ctx, struct ckpt_save *sv)
{
    size_t n = 0, *order, total = 0, at = 0, lo, hi;
    for (size_t i = 0; i < sv->m.nitems; i++)
        n += sv->m.items[i].replicated != 0;
    if (!n)
        return CKPT_OK;
    order = calloc(n, sizeof *order);
    if (!order)
        return CKPT_E_NOMEM;
    n = 0;
    for (size_t i = 0; i < sv->m.nitems; i++)
        if (sv->m.items[i].replicated)
            order[n++] = i;
    qsort_r(order, n, sizeof *order, cmp_name_idx, sv);
    for (size_t k = 0; k < n; k++)
        total += sv->m.items[order[k]].nchunks;
    lo = (size_t)((unsigned __int128)total * ctx->rank / ctx->world_size);
    hi = (size_t)((unsigned __int128)total * (ctx->rank + 1) / ctx->world_size);
    for (size_t k = 0; k < n; k++) {
        size_t i = order[k], nc = sv->m.items[i].nchunks;
        size_t a = lo > at ? lo - at : 0, b = hi > at ? hi - at : 0;
        sv->lo[i] = a > nc ? nc : a;
        sv->hi[i] = b > nc ? nc : b;
        if (sv->hi[i] < sv->lo[i])
            sv->hi[i] = sv->lo[i];
        sv->m.items[i].first = sv->lo[i];
        at += nc;
    }
    free(order);
    return CKPT_OK;
}

/* The save's shape, fixed here: an item per protected item, its size (files
 * are stat'ed now) and chunk count. Errors go to the context's message. */
static ckpt_status shape(struct ckpt_ctx *ctx, struct ckpt_save *sv, size_t *total_chunks)
{
    struct ckpt_item *it;
    size_t i;
    *total_chunks = 0;
    for (it = ctx->items, i = 0; it; it = it->next, i++) {
        struct ckpt_mitem *mi = &sv->m.items[i];
        mi->name = ckpt__strdup(it->name);
        mi->kind = it->kind;
        mi->elem_size = it->elem_size;
        mi->size = it->size;
        mi->mode = 0600;
        if (!mi->name)
            return CKPT_E_NOMEM;
        if (it->kind == CKPT_ITEM_LINK) {
            mi->mode = 0777;
            mi->target = ckpt__strdup(it->path);
            if (!mi->target)
                return CKPT_E_NOMEM;
        }
        if (it->kind == CKPT_ITEM_FILE) {
            struct ckpt_fsnap *f = &sv->files[i];
            if (ckpt__fversion_snap(it->path, &f->v, &f->mode) != 0) {
                int e = errno;
                ckpt__set_ctx_err(ctx, "protected file %s (%s): %s", it->name, it->path,
                                  e == ENOENT ? "does not exist (deleted before the save)"
                                  : e == EINVAL ? "not a regular file" : strerror(e));
                return e == ENOENT ? CKPT_E_NOENT : e == EINVAL ? CKPT_E_IO
                                                                : ckpt__errno_status(e);
            }
            if (it->as_is && !ckpt__fversion_same(&it->version, &f->v)) {
                ckpt__set_ctx_err(ctx, "protected file %s (%s) is no longer the version it "
                                  "was when protected: not saved", it->name, it->path);
                return CKPT_E_CHANGED;
            }
            f->as_is = it->as_is;
            mi->size = (uint64_t)f->v.size;
            mi->mode = f->mode;
            sv->paths[i] = ckpt__strdup(it->path);
            if (!sv->paths[i])
                return CKPT_E_NOMEM;
        }
        mi->nchunks = (size_t)((mi->size + ctx->chunk_bytes - 1) / ctx->chunk_bytes);
        mi->chunks = mi->nchunks ? calloc(mi->nchunks, sizeof *mi->chunks) : NULL;
        if (mi->nchunks && !mi->chunks)
            return CKPT_E_NOMEM;
        if (it->kind == CKPT_ITEM_FILE)
            sv->files[i].left = mi->nchunks;
        mi->replicated = it->replicated && ctx->world_size > 1;
        sv->lo[i] = 0;
        sv->hi[i] = mi->nchunks;
        sv->raw_bytes += mi->size;
        sv->raw_left += mi->size;
        *total_chunks += mi->nchunks;
    }
    if (spread_replicated(ctx, sv) != CKPT_OK)
        return CKPT_E_NOMEM;
    {
        /* the item set as a whole: names, directories, where links land */
        char err[CKPT_ERR_MAX] = "";
        ckpt_status st = ckpt__manifest_check(&sv->m, err);
        if (st) {
            ckpt__set_ctx_err(ctx, "step %" PRIu64 " not saved: %s", sv->step, err);
            return st == CKPT_E_NOMEM ? st : CKPT_E_INVAL;
        }
    }
    return CKPT_OK;
}

/* Chunk c of item i (protected item `it`) into staging: a slice of the
 * region's own stage, a block (host and device regions), or nothing yet (a
 * protected file: its chunk job reads it). */
static ckpt_status stage_chunk(struct ckpt_ctx *ctx, struct ckpt_save *sv,
                               const struct ckpt_item *it, struct ckpt_chunk_job *j)
{
    char err[CKPT_ERR_MAX];
    ckpt_status st;
    if (it->stage) {
        j->raw = (const uint8_t *)it->stage->base + j->off;
        return CKPT_OK;
    }
    if (it->kind == CKPT_ITEM_FILE)
        return CKPT_OK;
    j->blk = ckpt__staging_get(&ctx->staging);
    if (!j->blk)
        return CKPT_E_NOMEM;
    if (it->kind != CKPT_ITEM_DEVICE) {
        memcpy(j->blk->data, (const uint8_t *)it->ptr + j->off, j->len);
        return CKPT_OK;
    }
    st = ckpt__cuda_snapshot_chunk(ctx, it, j->off, j->len, j->blk->data, err);
    if (st) {
        ckpt__set_ctx_err(ctx, "device region %s: %s", it->name, err);
        /* first failure wins: keeps the detail for ckpt_errmsg */
        ckpt__save_fail(sv, st, "device region %s: %s", it->name, err);
        ckpt__staging_put(&ctx->staging, j->blk);
    }
    return st;
}

/* A stop's save copies a region in pieces of this many bytes (still large
 * enough for memcpy's streaming stores), each piece's chunk jobs queued as
 * soon as it is copied. */
#define STOP_PIECE (64u << 20)

/* Copy every region into staging and queue a chunk job per chunk. `piece`:
 * chunks copied at once (SIZE_MAX: a whole region). `direct`: host regions
 * are not copied, their chunk jobs read them in place (a stop's save, whose
 * caller waits until they are read). */
static ckpt_status copy(struct ckpt_ctx *ctx, struct ckpt_save *sv, size_t piece, int direct)
{
    struct ckpt_item *it;
    ckpt_status st = CKPT_OK;
    size_t i;
    for (it = ctx->items, i = 0; it && !st; it = it->next, i++) {
        /* the shape as snapshotted: once its last job is queued, a file
         * read again may change its item */
        const uint64_t size = sv->m.items[i].size;
        const size_t nchunks = sv->m.items[i].nchunks;
        for (size_t c = 0; c < nchunks && !st; c++) {
            struct ckpt_chunk_job *j;
            int in_place = direct && it->kind == CKPT_ITEM_MEM;
            if (it->stage && !in_place && c % piece == 0) {
                /* One copy of the whole region (or of a stop's piece):
                 * large enough for memcpy's streaming stores, where
                 * chunk-sized copies would read every destination line
                 * first and take up to twice as long. */
                uint64_t from = (uint64_t)c * ctx->chunk_bytes;
                uint64_t to =
                    piece >= nchunks - c ? it->size : from + (uint64_t)piece * ctx->chunk_bytes;
                memcpy((uint8_t *)it->stage->base + from, (const uint8_t *)it->ptr + from,
                       (size_t)(to - from));
            }
            j = calloc(1, sizeof *j);
            if (!j) {
                st = CKPT_E_NOMEM;
                break;
            }
            j->sv = sv;
            j->item = i;
            j->chunk = c;
            j->off = (uint64_t)c * ctx->chunk_bytes;
            j->len = (size_t)(size - j->off < ctx->chunk_bytes ? size - j->off
                                                               : ctx->chunk_bytes);
            j->hash_only = c < sv->lo[i] || c >= sv->hi[i];
            if (in_place) {
                j->raw = (const uint8_t *)it->ptr + j->off;
                j->in_place = 1;
            } else {
                st = stage_chunk(ctx, sv, it, j);
            }
            if (st) {
                free(j);
                break;
            }
            ckpt__save_ref(sv);
            if (in_place) {
                pthread_mutex_lock(&sv->mu);
                sv->in_place++;
                pthread_mutex_unlock(&sv->mu);
            }
            st = ckpt__pool_submit(ctx->pool, ckpt__chunk_job, j);
            if (st) {
                if (in_place) {
                    pthread_mutex_lock(&sv->mu);
                    sv->in_place--;
                    pthread_mutex_unlock(&sv->mu);
                }
                ckpt__save_unref(sv); /* not the last: ours is held */
                ckpt__staging_put(&ctx->staging, j->blk);
                free(j);
            }
        }
    }
    ckpt__cuda_snapshot_end(ctx); /* device state captured (or the save failed) */
    return st;
}

ckpt_status ckpt__snapshot(struct ckpt_ctx *ctx, uint64_t step)
{
    struct ckpt_save *sv;
    ckpt_status st, prev;
    size_t total_chunks;
    /* A stop's save is the last one kept: what the trainer computes after
     * it is lost anyway, so its stall does not matter, the time to a
     * commit does. Its chunk jobs start while the copy goes on, so the
     * link is busy from the first piece on (a 1 GiB copy is ~0.3 s of an
     * idle link otherwise). */
    int stop = ckpt__signals_stop_pending();
    int hold = !ctx->staging_max && !stop;
    /* One rank's stop save reads its host regions in place, not copied:
     * no copy to wait for, no staging to touch (a region protected for
     * this save has none: ckpt.c); ckpt_save returns once every chunk is
     * read (compressed, hashed or put), so they do not change meanwhile --
     * and the training thread, which would only compute what is thrown
     * away, leaves the cores to the compression until then. Ranks copy as
     * always: a rank's next collective may be needed by the others. */
    int direct = stop && ctx->world_size < 2;
    ckpt_codec codec;

    if (!ctx->items && ctx->world_size < 2) /* a rank may have nothing: an empty part */
        return CKPT_E_INVAL;
    st = ckpt__flight_idle(&ctx->flight, ctx->on_busy == CKPT_BUSY_SKIP, &prev);
    if (st)
        return st;
    if (prev)
        ckpt__log(&ctx->log, CKPT_LOG_WARN, "save",
                  "the previous save failed (%s); the run keeps its last commit",
                  ckpt_strerror(prev));

    sv = ckpt__save_new(ctx, step, ctx->nitems);
    if (!sv)
        return CKPT_E_NOMEM;
    sv->t0_ns = ckpt__mono_ns();
    sv->m.chunk_bytes = ctx->chunk_bytes;
    if (ctx->world_size > 1) { /* a part: ranks.h fixed the job step's nonce and epoch */
        sv->m.rank = ctx->rank;
        sv->m.world_size = ctx->world_size;
        sv->m.nonce = ctx->ranks.nonce;
        sv->m.epoch = ctx->ranks.epoch;
    }
    codec = (ckpt_codec)atomic_exchange(&ctx->req_codec, 0);
    sv->codec = codec != CKPT_CODEC_DEFAULT ? codec : ctx->codec;
    sv->level = ctx->level;
    st = shape(ctx, sv, &total_chunks);
    if (st) {
        ckpt__save_free(sv);
        return st;
    }
    ckpt__progress_begin(&ctx->progress, CKPT_PROGRESS_SAVE, step);
    ckpt__progress_sent_begin(&ctx->progress, ctx->store);
    ckpt__progress_add(&ctx->progress.bytes_total, sv->raw_bytes);
    ckpt__progress_add(&ctx->progress.chunks_total, total_chunks);
    ckpt__flight_begin(&ctx->flight);

    if (hold)
        ckpt__pool_hold(ctx->pool, 1);
    st = copy(ctx, sv, stop ? STOP_PIECE / ctx->chunk_bytes : SIZE_MAX, direct);
    if (st)
        ckpt__save_fail(sv, st, "snapshot failed: %s", ckpt_strerror(st));
    if (hold)
        ckpt__pool_hold(ctx->pool, 0);
    if (direct) {
        /* the regions are read once no job reads them (the snapshot's
         * reference still holds the save: it cannot end meanwhile) */
        pthread_mutex_lock(&sv->mu);
        while (sv->in_place)
            pthread_cond_wait(&sv->cv, &sv->mu);
        pthread_mutex_unlock(&sv->mu);
    }
    atomic_store(&ctx->requested, 0);
    ctx->last_save_mono_ns = ckpt__mono_ns();
    ckpt__event(ctx, &(struct ckpt_event){ .type = CKPT_EVENT_SAVING, .step = step });
    /* Our reference goes last: no commit (nor its event) before `saving`.
     * When it is the last one, a worker ends the chunk stage. */
    if (ckpt__save_unref(sv) && ckpt__pool_submit(ctx->pool, ckpt__chunk_stage_end, sv) != CKPT_OK)
        ckpt__chunk_stage_end(sv, NULL); /* cannot queue: end it here */
    if (st) {
        ckpt__flight_wait(&ctx->flight);
        return st;
    }
    return CKPT_OK;
}
