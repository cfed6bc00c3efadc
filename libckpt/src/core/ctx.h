/* ctx.h -- the context behind ckpt.h's handle: the settings ckpt_open
 * resolved, the protected items, and one part per step of the save path,
 * each owned by its module, its mutex beside its state:
 *   staging (staging.h)   the snapshot's blocks
 *   packs (packbuf.h)     pack buffers kept between saves
 *   flight (save.h)       the save in flight, how the last one ended
 *   rs (runstate.h)       what this writer knows of its run: HEAD, the
 *                         dedup index (the commit works on it under its
 *                         lock, see runstate.h)
 * The context's own state is the request flags (atomics: any thread, signal
 * handlers), the lease epoch (atomic), the progress counters (atomics) and
 * the message ckpt_errmsg() returns (err_mu). */
#ifndef CKPT_CTX_H
#define CKPT_CTX_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "core/fileread.h"
#include "core/mcache.h"
#include "base/log.h"
#include "core/packbuf.h"
#include "core/rankstate.h"
#include "base/progress.h"
#include "core/runstate.h"
#include "core/save.h"
#include "core/staging.h"
#include "ckpt_store.h"

/* A protected item (ckpt_protect*): changed only by the training thread,
 * and never while a save is in flight. */
struct ckpt_item {
    char *name;
    int kind;              /* CKPT_ITEM_* (manifest.h) */
    void *ptr;             /* host or device pointer */
    size_t size;
    unsigned elem_size;
    char *path;            /* files: the path; links: the target text */
    bool as_is;            /* files: CKPT_FILE_AS_IS, `version` is the one to commit */
    struct ckpt_fversion version;
    bool replicated;       /* ckpt_protect_replicated: the same bytes on every rank */
    bool no_stage;         /* CKPT_REGION_NO_STAGE: no staging reserved for it */
    struct ckpt_arena *stage; /* host regions without a staging cap: a private
                              copy of the whole region, so a save is one
                              large memcpy (streaming stores) per region */
    struct ckpt_item *next;
};

struct ckpt_pool;
struct ckpt_into;
struct ckpt_control;
struct ckpt_cuda;

struct ckpt_ctx {
    /* settings: resolved by ckpt_open, fixed afterwards */
    struct ckpt_logger log;
    struct ckpt_store *store;
    char *store_url;
    char *run;
    ckpt_codec codec;
    int level;
    size_t chunk_bytes;
    unsigned workers;
    size_t staging_max;
    unsigned keep;
    ckpt_busy_policy on_busy;
    uint64_t interval_ms;
    size_t pinned_max;
    /* Packing (object stores): chunks go into packs of about pack_bytes,
     * at most pack_inflight of them uploading at once. */
    size_t pack_bytes;
    unsigned pack_inflight;
    /* ckpt_restore_dir fsyncs each file before renaming it (CKPT_RESTORE_SYNC) */
    bool restore_sync;

    /* Ranks (ckpt.h "Ranks"), resolved at ckpt_open: world_size 1 is a
     * single writer; `coll` the program's collective (NULL: none; with
     * world_size > 1 then ranks_store). ranks (ranks.h): the global step in
     * progress. */
    unsigned rank, world_size;
    const struct ckpt_collective *coll;
    bool ranks_store;
    struct ckpt_ranks ranks;

    struct ckpt_item *items, *items_tail;
    size_t nitems;
    /* ckpt_restore_alloc() in progress (restore.h): the restore paths put
     * items where its caller says instead of into the protected ones.
     * Training thread only, set for the length of that call. */
    struct ckpt_into *into;

    /* Requests (any thread, signal handlers). */
    atomic_int requested;
    atomic_int req_codec;
    uint64_t last_save_mono_ns;

    /* The lease epoch this writer commits under (0: none, libckpt alone);
     * ckptrun's `epoch` message and ckpt_fence() change it. */
    _Atomic uint64_t epoch;

    struct ckpt_pool *pool;        /* pool.h */
    struct ckpt_staging staging;
    struct ckpt_packs packs;
    struct ckpt_flight flight;
    struct ckpt_run rs;
    struct ckpt_mcache mcache;     /* mcache.h: manifests read last (run/runread.c) */
    struct ckpt_control *control;  /* control.h, NULL without ckptrun */
    struct ckpt_cuda *cuda;        /* cuda/cuda.h, NULL until a device region */

    pthread_mutex_t err_mu;
    char errmsg[CKPT_ERR_MAX];
    char load_err[CKPT_ERR_MAX]; /* the background load's messages */
    /* headscan.c: the damage of HEAD was logged (once until HEAD reads well) */
    atomic_int head_damage_told;

    struct ckpt__progress progress; /* ckpt_progress(): atomics, any thread */
};

/* Set the message ckpt_errmsg() returns (any thread). */
void ckpt__set_ctx_err(struct ckpt_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The message of this thread's last ckpt__set_ctx_err: the context's, or
 * where ckpt__ctx_err_redirect sent this thread's messages. Code that a
 * background job runs reads it here, never as ctx->errmsg. */
const char *ckpt__errmsg(const struct ckpt_ctx *ctx);
/* This thread's messages go to buf (CKPT_ERR_MAX bytes) instead of the
 * context's, until called again with NULL: the background load
 * (ckpt_open) runs beside the caller's own calls, whose messages are the
 * ones ckpt_errmsg() must show. */
void ckpt__ctx_err_redirect(char *buf);

/* ckpt_request(): the next ckpt_should_save() is true; the next save uses
 * `codec` unless CKPT_CODEC_DEFAULT. Any thread. */
void ckpt__request(struct ckpt_ctx *ctx, ckpt_codec codec);

#endif
