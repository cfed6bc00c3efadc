/* damaged.c -- marking checkpoints damaged (damaged.h, ckpt_mark_damaged). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "commit/damaged.h"
#include "run/headscan.h"
#include "format/manifest.h" /* CKPT_FORMAT_VERSION */
#include "run/runload.h"
#include "run/runobj.h"

ckpt_status ckpt__mark_damaged(struct ckpt_ctx *ctx, char *const *keys, size_t n)
{
    ckpt_status st = CKPT_E_PRECONDITION;
    uint64_t epoch = atomic_load(&ctx->epoch);
    size_t moved = 0;
    if (!epoch) {
        ckpt__set_ctx_err(ctx, "only the lease holder (a context with an epoch) marks "
                               "checkpoints damaged");
        return CKPT_E_INVAL;
    }
    for (int attempt = 0; attempt < 8 && st == CKPT_E_PRECONDITION; attempt++) {
        struct ckpt_head h;
        char etag[CKPT_ETAG_MAX] = "", err[CKPT_ERR_MAX] = "", hkey[1024];
        size_t w = 0;
        bool exists;
        unsigned scanned = 0;
        struct ckpt_head_entry *d;
        /* A damaged HEAD: the manifests' view, written over the damaged
         * one conditionally on its etag, as ckpt_fence writes it
         * (headscan.h) -- the lease holder rewrites it now rather than
         * leave the damaged checkpoints in the resume order. */
        st = ckpt__read_head_or_scan(ctx, &h, etag, &exists, &scanned, NULL);
        if (st)
            return st;
        if (!exists) {
            ckpt__set_ctx_err(ctx, "run %s has no HEAD", ctx->run);
            return CKPT_E_NOENT;
        }
        if (scanned & CKPT_HEAD_NEWER) {
            ckpt__set_ctx_err(ctx,
                              "HEAD of run %s is damaged, and the run holds checkpoints of a "
                              "newer format than this ckpt (%d) reads: upgrade to rewrite it",
                              ctx->run, CKPT_FORMAT_VERSION);
            ckpt__head_free(&h);
            return CKPT_E_UNSUPPORTED;
        }
        if (h.epoch > epoch) {
            ckpt__set_ctx_err(ctx, "run %s was fenced at epoch %" PRIu64 " (this context has "
                              "%" PRIu64 "): not marking anything", ctx->run, h.epoch, epoch);
            ckpt__head_free(&h);
            return CKPT_E_FENCED;
        }
        d = realloc(h.damaged, (h.ndamaged + h.n + 1) * sizeof *d);
        if (!d) {
            ckpt__head_free(&h);
            return CKPT_E_NOMEM;
        }
        h.damaged = d;
        moved = 0;
        for (size_t i = 0; i < h.n; i++) {
            int hit = 0;
            for (size_t k = 0; k < n && !hit; k++)
                hit = !strcmp(h.entries[i].manifest, keys[k]);
            if (hit) {
                h.damaged[h.ndamaged] = h.entries[i];
                h.damaged[h.ndamaged++].marked_ms = ckpt__now_ms();
                moved++;
            } else {
                h.entries[w++] = h.entries[i];
            }
        }
        h.n = w;
        if (!moved) {
            ckpt__head_free(&h);
            return CKPT_OK; /* someone did it already, or they are gone */
        }
        if (h.n)
            h.step = h.entries[0].step;
        h.rev++;
        if (scanned & CKPT_HEAD_SCANNED)
            h.epoch = epoch; /* the holder's lease, as its fence wrote it */
        st = ckpt__put_head(ctx, &h, etag, NULL, err);
        ckpt__run_key(ctx, "HEAD", hkey, sizeof hkey);
        if (st && st != CKPT_E_PRECONDITION)
            ckpt__set_ctx_err(ctx, "writing %s: %s", hkey, err);
        else if (!st && (scanned & CKPT_HEAD_SCANNED))
            ckpt__log(&ctx->log, CKPT_LOG_WARN, "restore",
                      "HEAD of run %s rewritten from its manifests (%zu checkpoint%s) to mark "
                      "damage",
                      ctx->run, h.n, h.n == 1 ? "" : "s");
        ckpt__head_free(&h);
    }
    if (st == CKPT_E_PRECONDITION)
        ckpt__set_ctx_err(ctx, "HEAD of run %s kept changing", ctx->run);
    if (st == CKPT_OK) {
        ckpt__log(&ctx->log, CKPT_LOG_WARN, "restore", "marked %zu damaged checkpoint%s of run "
                  "%s: out of the resume order, kept for inspection until gc (--min-age after "
                  "now)", moved, moved == 1 ? "" : "s", ctx->run);
        ckpt__load_run(ctx, true); /* our next commit follows the new HEAD */
    }
    return st;
}

ckpt_status ckpt_mark_damaged(struct ckpt_ctx *ctx, const uint64_t *steps, size_t n)
{
    struct ckpt_head h;
    bool exists;
    ckpt_status st;
    char **keys;
    size_t nk = 0;
    if (!ctx || (n && !steps))
        return CKPT_E_INVAL;
    if (!n)
        return CKPT_OK;
    ckpt__flight_wait(&ctx->flight);
    /* a damaged HEAD: the steps its manifests show (headscan.h) */
    {
        unsigned scanned;
        st = ckpt__read_head_or_scan(ctx, &h, NULL, &exists, &scanned, NULL);
    }
    if (st)
        return st;
    keys = calloc(n, sizeof *keys);
    if (!keys) {
        ckpt__head_free(&h);
        return CKPT_E_NOMEM;
    }
    /* the first entry of each step: the one a restore of that step tries */
    for (size_t k = 0; k < n; k++)
        for (size_t i = 0; i < h.n; i++)
            if (h.entries[i].step == steps[k]) {
                keys[nk++] = h.entries[i].manifest;
                break;
            }
    st = nk ? ckpt__mark_damaged(ctx, keys, nk) : CKPT_OK;
    free(keys);
    ckpt__head_free(&h);
    return st;
}

