/* verify.c -- ckpt_verify(): fetch and check every chunk of the retained
 * checkpoints (or one step's), as a restore would, writing nothing.
 *
 * Verify reads HEAD once, then each checkpoint in turn, while the run may
 * go on committing: another writer's retention can delete a checkpoint
 * (its manifest, its chunks) after HEAD named it. What verify finds
 * missing or damaged is therefore checked against HEAD read again: a
 * checkpoint HEAD no longer names (neither retained nor marked damaged) is
 * gone, not damaged, and is neither counted nor reported as damage. A
 * damaged HEAD is itself damage: the checkpoints its manifests show are
 * verified (headscan.h) and the verdict is CKPT_E_CORRUPT, saying how HEAD
 * gets rewritten. */
#include <inttypes.h>
#include <stdio.h>

#include "core/ctx.h"
#include "restore/fetch.h"
#include "run/headscan.h"
#include "run/runobj.h"

/* The checkpoint of `e` is gone from HEAD since it was read (logged). */
static int gone(struct ckpt_ctx *ctx, const struct ckpt_head_entry *e)
{
    if (ckpt__head_retains(ctx, e->manifest))
        return 0;
    ckpt__log(&ctx->log, CKPT_LOG_INFO, "verify",
              "step %" PRIu64 ": removed from the run "
              "(retention after a newer commit) while verify read it: gone, not damaged",
              e->step);
    return 1;
}

ckpt_status ckpt_verify(struct ckpt_ctx *ctx, uint64_t step)
{
    struct ckpt_head h;
    bool exists;
    unsigned scanned;
    char why[CKPT_ERR_MAX];
    ckpt_status st, result = CKPT_OK;
    struct ckpt_idset seen;
    size_t bad = 0, matched = 0, ngone = 0;
    if (!ctx)
        return CKPT_E_INVAL;
    ckpt__flight_wait(&ctx->flight);
    /* the store's own bytes, not the copies this context kept (runread.c) */
    ckpt__mcache_clear(&ctx->mcache);
    ckpt__progress_begin(&ctx->progress, CKPT_PROGRESS_VERIFY, step);
    st = ckpt__read_head_or_scan(ctx, &h, NULL, &exists, &scanned, why);
    if (st)
        return st;
    if (!exists || !h.n) {
        ckpt__head_free(&h);
        if (scanned & CKPT_HEAD_SCANNED) {
            ckpt__set_ctx_err(ctx,
                              "%s, and no manifest of the run holds a checkpoint that "
                              "could replace it",
                              why);
            return CKPT_E_CORRUPT;
        }
        ckpt__set_ctx_err(ctx, "run %s has no committed checkpoint", ctx->run);
        return CKPT_E_NOENT;
    }
    ckpt__idset_init(&seen);
    for (size_t i = 0; i < h.n; i++) {
        struct ckpt_manifest m;
        if (step == CKPT_STEP_LATEST ? i > 0
                                     : (step != CKPT_STEP_ALL && h.entries[i].step != step))
            continue;
        matched++;
        /* the verdict restore gives: what this version cannot restore fails */
        st = ckpt__fetch_manifest(ctx, h.entries[i].manifest, &m);
        if (st) {
            if ((st == CKPT_E_NOENT || st == CKPT_E_CORRUPT) && gone(ctx, &h.entries[i])) {
                ngone++;
                continue;
            }
            ckpt__log(&ctx->log, CKPT_LOG_ERROR, "verify", "%s", ckpt__errmsg(ctx));
            if (!result || result == CKPT_E_CORRUPT)
                result = st == CKPT_E_NOENT ? CKPT_E_CORRUPT : st;
            bad++;
            continue;
        }
        {
            char err[CKPT_ERR_MAX] = "";
            uint64_t raw, stored, chunks, links;
            size_t bad0 = bad;
            st = ckpt__verify_manifest(ctx, &m, &seen, &bad, err);
            if ((st == CKPT_E_CORRUPT || (!st && bad > bad0)) && gone(ctx, &h.entries[i])) {
                bad = bad0; /* its chunks went with it */
                ngone++;
            } else if (st) {
                ckpt__set_ctx_err(ctx, "%s", err);
                if (!result)
                    result = st;
            } else if (bad == bad0) {
                ckpt__manifest_sizes(&m, &raw, &stored, &chunks, &links);
                ckpt__log(&ctx->log, CKPT_LOG_INFO, "verify",
                          "step %" PRIu64 ": %zu items (%" PRIu64 " links, their targets "
                          "inside the checkpoint), %" PRIu64 " chunks: intact",
                          m.step, m.nitems, links, chunks);
            }
        }
        ckpt__manifest_free(&m);
    }
    ckpt__idset_free(&seen);
    if (!matched || (ngone == matched && step != CKPT_STEP_ALL)) {
        if (matched)
            ckpt__set_ctx_err(ctx,
                              "checkpoint step %" PRIu64 " of run %s was removed (by "
                              "retention after a newer commit) while verify read it",
                              step == CKPT_STEP_LATEST ? h.entries[0].step : step, ctx->run);
        else
            ckpt__set_ctx_err(ctx, "run %s has no committed checkpoint at step %" PRIu64, ctx->run,
                              step);
        ckpt__head_free(&h);
        return CKPT_E_NOENT;
    }
    if (bad && !result)
        result = CKPT_E_CORRUPT;
    if (scanned & CKPT_HEAD_SCANNED) {
        /* HEAD itself is damage, whatever its manifests hold */
        if (result == CKPT_OK)
            ckpt__set_ctx_err(ctx,
                              "%s; the %zu checkpoint%s its manifests show verify intact: "
                              "the next commit rewrites HEAD (ckptrun run or recover when it "
                              "takes the lease, or any save); ls and restore read the "
                              "manifests meanwhile",
                              why, h.n, h.n == 1 ? "" : "s");
        else {
            char first[CKPT_ERR_MAX];
            snprintf(first, sizeof first, "%s", ckpt__errmsg(ctx));
            ckpt__set_ctx_err(ctx, "%s; and of the checkpoints its manifests show: %s", why, first);
        }
        if (result == CKPT_OK)
            result = CKPT_E_CORRUPT;
    }
    ckpt__head_free(&h);
    return result;
}
