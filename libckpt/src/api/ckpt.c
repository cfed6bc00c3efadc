/* ckpt.c -- the API surface: open/close, protection, requests, saves, progress. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/codec.h"
#include "api/config.h"
#include "control/control.h"
#include "core/ctx.h"
#include "cuda/cuda.h"
#include "format/itemset.h"
#include "core/pool.h"
#include "ranks/ranks.h"
#include "restore/restore.h"
#include "run/runload.h"
#include "core/runstate.h"
#include "control/signals.h"
#include "save/snapshot.h"

/* Detail of the calling thread's last failed ckpt_open(): the context is
 * gone by then, so ckpt_errmsg(NULL) returns this. */
static __thread char open_err[CKPT_ERR_MAX];

const char *ckpt_errmsg(struct ckpt_ctx *ctx)
{
    return ctx ? ctx->errmsg : open_err; /* the caller's thread: never redirected */
}

static void load_job(void *arg, struct ckpt_codec_ws *ws)
{
    struct ckpt_ctx *ctx = arg;
    (void)ws;
    ckpt__ctx_err_redirect(ctx->load_err);
    ckpt__load_run(ctx, true);
    ckpt__ctx_err_redirect(NULL);
}

ckpt_status ckpt_open(const struct ckpt_config *cfg, struct ckpt_ctx **out)
{
    struct ckpt_settings set;
    struct ckpt_ctx *ctx;
    ckpt_status st, cst;
    char err[CKPT_ERR_MAX] = "";

    if (!out)
        return CKPT_E_INVAL;
    *out = NULL;
    open_err[0] = '\0';
    cst = ckpt__config_resolve(cfg, &set, err); /* config.h */
    if (cst == CKPT_E_INVAL) {
        snprintf(open_err, sizeof open_err, "%s", err);
        return cst;
    }
    ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return CKPT_E_NOMEM;
    pthread_mutex_init(&ctx->err_mu, NULL);
    ckpt__staging_init(&ctx->staging);
    ckpt__packs_init(&ctx->packs);
    ckpt__flight_init(&ctx->flight);
    ckpt__run_init(&ctx->rs);
    ckpt__mcache_init(&ctx->mcache);
    ckpt__ranks_init(&ctx->ranks);
    ctx->world_size = 1;
    ckpt__logger_init(&ctx->log, set.log_fn, set.log_user, set.log_level);
    *out = ctx; /* from here on, ckpt_close() cleans up; reset on failure */
    st = cst;
    if (st) {
        ckpt__set_ctx_err(ctx, "%s", err);
        goto fail;
    }
    ctx->rank = set.rank;
    ctx->world_size = set.world_size;
    ctx->coll = set.world_size > 1 ? set.collective : NULL;
    ctx->ranks_store = set.world_size > 1 && !set.collective;
    set.store_cfg.log_fn = ctx->log.fn;
    set.store_cfg.log_user = ctx->log.user;
    set.store_cfg.log_level = ctx->log.level;
    st = ckpt_store_open(set.store_url, &set.store_cfg, &ctx->store, err);
    if (st) {
        ckpt__set_ctx_err(ctx, "store: %s", err);
        goto fail;
    }
    ckpt__config_fit_store(&set, ctx->store);
    ctx->codec = set.codec;
    ctx->level = set.level;
    ctx->chunk_bytes = set.chunk_bytes;
    ctx->workers = set.workers;
    ctx->staging_max = set.staging_max;
    ctx->keep = set.keep;
    ctx->on_busy = set.on_busy;
    ctx->interval_ms = set.interval_ms;
    ctx->epoch = set.epoch;
    ctx->pinned_max = set.pinned_max;
    ctx->pack_bytes = set.pack_bytes;
    ctx->pack_inflight = set.pack_inflight;
    ctx->restore_sync = set.restore_sync;
    ctx->run = ckpt__strdup(set.run);
    ctx->store_url = ckpt__strdup(ctx->store->url);
    if (!ctx->run || !ctx->store_url) {
        st = CKPT_E_NOMEM;
        goto fail;
    }
    ckpt__staging_setup(&ctx->staging, ctx->chunk_bytes, ctx->staging_max);
    st = ckpt__pool_start(&ctx->pool, ctx->workers, ctx->chunk_bytes);
    if (st)
        goto fail;
    ctx->last_save_mono_ns = ckpt__mono_ns();
    /* Learn what the run already holds in the background, so the first save
     * can skip known chunks without stalling the caller. Chunk jobs wait
     * for that load: when it cannot be queued, they must not (they then
     * write every chunk, and the commit reads HEAD itself). */
    if (ckpt__pool_submit(ctx->pool, load_job, ctx) != CKPT_OK) {
        ckpt__log(&ctx->log, CKPT_LOG_WARN, "open", "cannot queue the run's load (out of "
                  "memory): the first save writes every chunk");
        ckpt__run_skip_load(&ctx->rs);
    }
    if (set.control_socket && ckpt__control_open(ctx, set.control_socket) != CKPT_OK)
        ckpt__log(&ctx->log, CKPT_LOG_WARN, "control",
                  "cannot connect to ckptrun at %s: running standalone", set.control_socket);
    if (set.stop_grace_ms)
        ckpt__signals_install_alone(ctx, set.stop_grace_ms); /* no ckptrun: signals.c */
    if (ctx->coll && (st = ckpt__ranks_open(ctx, CKPT_OK)) != CKPT_OK)
        goto fail_checked;
    ckpt__log(&ctx->log, CKPT_LOG_DEBUG, "open",
              "store %s run %s codec %s chunk %zu pack %zu workers %u rank %u of %u (%s)",
              ctx->store_url, ctx->run, ckpt__codec_name(ctx->codec), ctx->chunk_bytes,
              ctx->pack_bytes, ctx->workers, ctx->rank, ctx->world_size, set.rank_source);
    return CKPT_OK;
fail:
    /* the other ranks are in the check: tell them this one failed */
    if (ctx->coll)
        ckpt__ranks_open(ctx, st);
fail_checked:
    ctx->coll = NULL; /* ckpt_close calls no collective for a context never opened */
    ckpt__log(&ctx->log, CKPT_LOG_ERROR, "open", "%s", ckpt__errmsg(ctx));
    snprintf(open_err, sizeof open_err, "%s", ckpt__errmsg(ctx)[0] ? ckpt__errmsg(ctx) : ckpt_strerror(st));
    ckpt_close(ctx);
    *out = NULL;
    return st;
}

/* The item set never changes under a save in flight. A local wait, never
 * collective: with a collective the part's outcome stays for the ranks'
 * next poll (ranks.h). */
static void idle(struct ckpt_ctx *ctx)
{
    if (ctx->coll)
        ckpt__flight_settle(&ctx->flight);
    else
        ckpt__flight_wait(&ctx->flight);
}

static struct ckpt_item *find_item(struct ckpt_ctx *ctx, const char *name)
{
    for (struct ckpt_item *it = ctx->items; it; it = it->next)
        if (!strcmp(it->name, name))
            return it;
    return NULL;
}

/* `flags`: CKPT_REGION_* (NO_STAGE and REPLICATED here; DEVICE is `kind`). */
static ckpt_status add_item(struct ckpt_ctx *ctx, const char *name, int kind, void *ptr,
                            size_t size, unsigned elem, const char *path, unsigned flags)
{
    struct ckpt_item *it;
    int stopping;
    if (!ctx || !ckpt__name_valid(name) ||
        (!ptr && size && kind != CKPT_ITEM_FILE && kind != CKPT_ITEM_LINK))
        return CKPT_E_INVAL;
    idle(ctx);
    if (find_item(ctx, name))
        return CKPT_E_EXISTS;
    it = calloc(1, sizeof *it);
    if (!it)
        return CKPT_E_NOMEM;
    it->name = ckpt__strdup(name);
    it->path = path ? ckpt__strdup(path) : NULL;
    if (!it->name || (path && !it->path)) {
        free(it->name);
        free(it->path);
        free(it);
        return CKPT_E_NOMEM;
    }
    it->kind = kind;
    it->ptr = ptr;
    it->size = size;
    it->elem_size = elem;
    it->no_stage = (flags & CKPT_REGION_NO_STAGE) != 0;
    it->replicated = (flags & CKPT_REGION_REPLICATED) != 0;
    if (ctx->items_tail)
        ctx->items_tail->next = it;
    else
        ctx->items = it;
    ctx->items_tail = it;
    ctx->nitems++;
    /* Once a stop is under way, the save that answers it reads host
     * regions in place (snapshot.h): nothing to reserve and touch for a
     * region protected now (the Python binding protects at its first
     * save), which would cost the stop seconds of page faults per GiB. */
    stopping = ckpt__signals_stop_pending() && ctx->world_size < 2;
    if (kind == CKPT_ITEM_MEM && !ctx->staging_max && size && !it->no_stage && !stopping) {
        /* a private stage for the region, mapped now and touched by an
         * idle job of the pool meanwhile (staging.h: it gives way to a
         * restore that follows), so the first save stalls only for its
         * copy. Exactly its size (one block: only its base is used): in
         * whole chunks, the many small regions of a framework's state (a
         * 4-byte `step` per parameter) each took a chunk, and a 6 MiB
         * tensor 8 MiB */
        it->stage = ckpt__arena_new_background(size, 1, ctx->pool);
        if (!it->stage)
            ckpt__log(&ctx->log, CKPT_LOG_WARN, "protect",
                      "cannot reserve %zu MiB of staging for %s now; saves will use "
                      "shared blocks", size >> 20, name);
    }
    if (kind != CKPT_ITEM_FILE && !stopping) {
        /* shared staging blocks for the regions without a stage of their
         * own, reserved now for the same reason */
        size_t blocks = 0;
        for (struct ckpt_item *i = ctx->items; i; i = i->next)
            if (i->kind != CKPT_ITEM_FILE && !i->stage && !i->no_stage)
                blocks += (i->size + ctx->chunk_bytes - 1) / ctx->chunk_bytes;
        if (ckpt__staging_reserve(&ctx->staging, blocks) != CKPT_OK)
            ckpt__log(&ctx->log, CKPT_LOG_WARN, "protect",
                      "cannot reserve %zu MiB of staging now; saves will allocate it",
                      blocks * (ctx->chunk_bytes >> 20));
    }
    return CKPT_OK;
}

ckpt_status ckpt_protect(struct ckpt_ctx *ctx, const char *name, void *ptr, size_t size)
{
    return add_item(ctx, name, CKPT_ITEM_MEM, ptr, size, 0, NULL, 0);
}

ckpt_status ckpt_protect_replicated(struct ckpt_ctx *ctx, const char *name, void *ptr,
                                    size_t size, ckpt_elem elem)
{
    return ckpt_protect_region(ctx, name, ptr, size, elem, CKPT_REGION_REPLICATED);
}

ckpt_status ckpt_protect_ex(struct ckpt_ctx *ctx, const char *name, void *ptr, size_t size,
                            ckpt_elem elem)
{
    return ckpt_protect_region(ctx, name, ptr, size, elem, 0);
}

ckpt_status ckpt_protect_device(struct ckpt_ctx *ctx, const char *name, void *dev_ptr,
                                size_t size)
{
    return ckpt_protect_region(ctx, name, dev_ptr, size, CKPT_ELEM_BYTES, CKPT_REGION_DEVICE);
}

ckpt_status ckpt_protect_region(struct ckpt_ctx *ctx, const char *name, void *ptr, size_t size,
                                ckpt_elem elem, unsigned flags)
{
    char err[CKPT_ERR_MAX] = "";
    ckpt_status st;
    unsigned es = (elem == CKPT_ELEM_F16 || elem == CKPT_ELEM_E2)   ? 2
                  : (elem == CKPT_ELEM_F32 || elem == CKPT_ELEM_E4) ? 4
                                                                    : 0;
    if ((unsigned)elem > CKPT_ELEM_E4 ||
        (flags & ~(CKPT_REGION_REPLICATED | CKPT_REGION_DEVICE | CKPT_REGION_NO_STAGE)))
        return CKPT_E_INVAL;
    if (!(flags & CKPT_REGION_DEVICE))
        return add_item(ctx, name, CKPT_ITEM_MEM, ptr, size, es, NULL, flags);
    if (!ctx)
        return CKPT_E_INVAL;
    if (!ckpt__cuda_available(err)) {
        ckpt__set_ctx_err(ctx, "device region '%s': %s", name ? name : "?", err);
        return CKPT_E_UNSUPPORTED;
    }
    if (!ckpt__name_valid(name) || (!ptr && size))
        return CKPT_E_INVAL;
    idle(ctx); /* the pinned pool is not resized under a save in flight */
    st = ckpt__cuda_protect(ctx, ptr, size, err);
    if (st) {
        ckpt__set_ctx_err(ctx, "device region '%s': %s", name, err);
        return st;
    }
    return add_item(ctx, name, CKPT_ITEM_DEVICE, ptr, size, es, NULL, flags);
}

ckpt_status ckpt_protect_file(struct ckpt_ctx *ctx, const char *name, const char *path)
{
    return ckpt_protect_file_ex(ctx, name, path, 0);
}

ckpt_status ckpt_protect_file_ex(struct ckpt_ctx *ctx, const char *name, const char *path,
                                 unsigned flags)
{
    struct stat sb;
    ckpt_status st;

    if (!path || !*path || (flags & ~CKPT_FILE_AS_IS))
        return CKPT_E_INVAL;
    if (flags & CKPT_FILE_AS_IS) {
        /* the version to commit: read before the item exists, so a save
         * never sees an AS_IS item without it */
        if (stat(path, &sb) != 0) {
            int e = errno;
            if (ctx)
                ckpt__set_ctx_err(ctx, "protected file %s (%s): %s", name ? name : "?", path,
                                  strerror(e));
            return e == ENOENT || e == ENOTDIR ? CKPT_E_NOENT : ckpt__errno_status(e);
        }
        if (!S_ISREG(sb.st_mode))
            return CKPT_E_INVAL;
    }
    st = add_item(ctx, name, CKPT_ITEM_FILE, NULL, 0, 0, path, 0);
    if (st == CKPT_OK && (flags & CKPT_FILE_AS_IS)) {
        struct ckpt_item *it = ctx->items_tail;
        it->as_is = true;
        ckpt__fversion_of(&it->version, &sb);
    }
    return st;
}

ckpt_status ckpt_protect_link(struct ckpt_ctx *ctx, const char *name, const char *target)
{
    /* Where the target lands is checked by ckpt_save() against the items
     * then protected: they may be registered in any order. */
    if (!ckpt__target_valid(target))
        return CKPT_E_INVAL;
    return add_item(ctx, name, CKPT_ITEM_LINK, NULL, 0, 0, target, 0);
}

ckpt_status ckpt_unprotect(struct ckpt_ctx *ctx, const char *name)
{
    struct ckpt_item **pp, *prev = NULL;
    if (!ctx || !name)
        return CKPT_E_INVAL;
    idle(ctx);
    for (pp = &ctx->items; *pp; prev = *pp, pp = &(*pp)->next) {
        struct ckpt_item *it = *pp;
        if (strcmp(it->name, name))
            continue;
        *pp = it->next;
        if (ctx->items_tail == it)
            ctx->items_tail = prev;
        ckpt__arena_free(it->stage);
        free(it->name);
        free(it->path);
        free(it);
        ctx->nitems--;
        return CKPT_OK;
    }
    return CKPT_E_NOENT;
}

ckpt_status ckpt_progress(struct ckpt_ctx *ctx, struct ckpt_progress *out)
{
    struct ckpt__progress *p;

    if (!ctx || !out)
        return CKPT_E_INVAL;
    p = &ctx->progress;
    memset(out, 0, sizeof *out);
    out->phase = (ckpt_progress_phase)atomic_load(&p->phase);
    out->step = atomic_load(&p->step);
    out->bytes_done = atomic_load(&p->bytes_done);
    out->bytes_total = atomic_load(&p->bytes_total);
    out->chunks_done = atomic_load(&p->chunks_done);
    out->chunks_total = atomic_load(&p->chunks_total);
    out->stored_bytes = atomic_load(&p->stored_bytes);
    out->checkpoints_done = atomic_load(&p->checkpoints_done);
    out->started_ms = atomic_load(&p->started_ms);
    out->encoded_bytes = atomic_load(&p->encoded_bytes);
    if (ckpt__progress_sent(p, ctx->store, &out->sent_bytes))
        out->flags |= CKPT_PROGRESS_SENT;
    return CKPT_OK;
}
/* 0.4.0's fields took three of 0.1.0's six reserved slots: same size. */
_Static_assert(sizeof(struct ckpt_progress) ==
                   offsetof(struct ckpt_progress, sent_bytes) + 6 * sizeof(uint64_t),
               "struct ckpt_progress keeps its 0.1.0 size");

int ckpt_should_save(struct ckpt_ctx *ctx)
{
    int want = 0;
    if (!ctx)
        return 0;
    ckpt__signals_polled(); /* alone, a SIGTERM is now a stop */
    if (atomic_load_explicit(&ctx->requested, memory_order_relaxed))
        want = 1;
    else if (ctx->interval_ms &&
             ckpt__mono_ns() - ctx->last_save_mono_ns >= ctx->interval_ms * 1000000ull)
        want = 1;
    if (ctx->coll)
        return ckpt__ranks_should_save(ctx, want); /* one all-reduce: ranks.h */
    return want;
}

void ckpt_request(struct ckpt_ctx *ctx, ckpt_codec codec)
{
    if (ctx)
        ckpt__request(ctx, codec);
}

int ckpt_take_request(struct ckpt_ctx *ctx)
{
    int want;
    if (!ctx)
        return 0;
    ckpt__signals_polled();
    want = atomic_exchange(&ctx->requested, 0) != 0;
    if (!want && ctx->interval_ms &&
        ckpt__mono_ns() - ctx->last_save_mono_ns >= ctx->interval_ms * 1000000ull)
        want = 1;
    if (want) /* the interval counts from the answer, as from a save */
        ctx->last_save_mono_ns = ckpt__mono_ns();
    return want;
}

ckpt_status ckpt_report_file(struct ckpt_ctx *ctx, const char *path, uint64_t step)
{
    if (!ctx || !path || !*path)
        return CKPT_E_INVAL;
    if (!ctx->control) {
        ckpt__set_ctx_err(ctx,
                          "not connected to ckptrun (no CKPT_SOCKET, or it could not "
                          "be reached at ckpt_open): %s not reported",
                          path);
        return CKPT_E_NOENT;
    }
    return ckpt__control_report_file(ctx->control, path, step);
}

ckpt_status ckpt_save(struct ckpt_ctx *ctx, uint64_t step)
{
    ckpt_status st;
    if (!ctx)
        return CKPT_E_INVAL;
    if (ctx->coll)
        st = ckpt__ranks_save(ctx, step);
    else if (ctx->ranks_store)
        st = ckpt__ranks_store_save(ctx, step);
    else
        st = ckpt__snapshot(ctx, step);
    /* Alone, the save after a SIGTERM taken as a stop: nobody else ends
     * the process once it is committed (under ckptrun, ckptrun does). */
    if (st == CKPT_OK && ckpt__signals_alone_saving(ctx)) {
        st = ckpt_wait(ctx);
        ckpt__signals_alone_end(step, st, ckpt_errmsg(ctx), ctx->rank == 0);
    }
    return st;
}

ckpt_status ckpt_wait(struct ckpt_ctx *ctx)
{
    if (!ctx)
        return CKPT_E_INVAL;
    if (ctx->coll)
        return ckpt__ranks_wait(ctx);
    return ckpt__flight_wait(&ctx->flight);
}

unsigned ckpt_rank(const struct ckpt_ctx *ctx)
{
    return ctx ? ctx->rank : 0;
}

unsigned ckpt_world_size(const struct ckpt_ctx *ctx)
{
    return ctx ? ctx->world_size : 1;
}

void ckpt_close(struct ckpt_ctx *ctx)
{
    struct ckpt_item *it, *next;
    if (!ctx)
        return;
    if (ctx->pool && ctx->coll)
        ckpt__ranks_wait(ctx); /* the global step in progress ends on every rank */
    if (ctx->pool)
        ckpt__flight_wait(&ctx->flight);
    if (ctx->control)
        ckpt__control_close(ctx->control);
    else
        ckpt__signals_uninstall(ctx); /* alone's, if this context owns them */
    ckpt__pool_stop(ctx->pool);
    ctx->pool = NULL;
    ckpt__cuda_release(ctx);
    for (it = ctx->items; it; it = next) {
        next = it->next;
        ckpt__arena_free(it->stage);
        free(it->name);
        free(it->path);
        free(it);
    }
    ckpt__staging_destroy(&ctx->staging);
    ckpt__packs_destroy(&ctx->packs);
    ckpt__flight_destroy(&ctx->flight);
    ckpt__run_destroy(&ctx->rs);
    ckpt__mcache_destroy(&ctx->mcache);
    ckpt__ranks_destroy(&ctx->ranks);
    ckpt_store_close(ctx->store);
    free(ctx->store_url);
    free(ctx->run);
    pthread_mutex_destroy(&ctx->err_mu);
    free(ctx);
}

ckpt_status ckpt_restore(struct ckpt_ctx *ctx, uint64_t *step)
{
    if (!ctx)
        return CKPT_E_INVAL;
    if (!ctx->items) {
        ckpt__set_ctx_err(ctx, "nothing is protected: call ckpt_protect() before restoring");
        return CKPT_E_INVAL;
    }
    if (ctx->coll && ctx->world_size > 1)
        return ckpt__ranks_restore(ctx, CKPT_STEP_LATEST, step); /* the ranks agree (ranks.c) */
    return ckpt__restore_latest(ctx, step);
}

ckpt_status ckpt_restore_step(struct ckpt_ctx *ctx, uint64_t step, uint64_t *restored)
{
    if (step == CKPT_STEP_LATEST)
        return ckpt_restore(ctx, restored);
    if (!ctx)
        return CKPT_E_INVAL;
    if (!ctx->items) {
        ckpt__set_ctx_err(ctx, "nothing is protected: call ckpt_protect() before restoring");
        return CKPT_E_INVAL;
    }
    if (ctx->coll && ctx->world_size > 1)
        return ckpt__ranks_restore(ctx, step, restored);
    return ckpt__restore_step(ctx, step, restored);
}
