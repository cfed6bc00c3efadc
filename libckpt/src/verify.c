/* verify.c -- ckpt_verify(): fetch and check every chunk of the retained
 * checkpoints (or one step's), as a restore would, writing nothing. */
#include <inttypes.h>
#include <stdio.h>

#include "ctx.h"
#include "fetch.h"
#include "runload.h"

ckpt_status ckpt_verify(struct ckpt_ctx *ctx, uint64_t step)
{
    struct ckpt_head h;
    bool exists;
    ckpt_status st, result = CKPT_OK;
    struct ckpt_idset seen;
    size_t bad = 0, matched = 0;
    if (!ctx)
        return CKPT_E_INVAL;
    ckpt__flight_wait(&ctx->flight);
    ckpt__progress_begin(&ctx->progress, CKPT_PROGRESS_VERIFY, step);
    st = ckpt__read_head(ctx, &h, NULL, &exists);
    if (st)
        return st;
    if (!exists || !h.n) {
        ckpt__set_ctx_err(ctx, "run %s has no committed checkpoint", ctx->run);
        ckpt__head_free(&h);
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
            ckpt__log(&ctx->log, CKPT_LOG_ERROR, "verify", "%s", ctx->errmsg);
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
            if (st) {
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
    ckpt__head_free(&h);
    if (!matched) {
        ckpt__set_ctx_err(ctx, "run %s has no committed checkpoint at step %" PRIu64, ctx->run,
                          step);
        return CKPT_E_NOENT;
    }
    if (bad && !result)
        result = CKPT_E_CORRUPT;
    return result;
}
