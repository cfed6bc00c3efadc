/* fence.c -- ckpt_fence(): HEAD records a new lease epoch, so that writers
 * of an older one (a runner that lost its lease) can no longer commit. */
#include <stdio.h>

#include "core/ctx.h"
#include "run/headscan.h"
#include "format/manifest.h" /* CKPT_FORMAT_VERSION */
#include "run/runload.h"
#include "run/runobj.h"

ckpt_status ckpt_fence(struct ckpt_ctx *ctx, uint64_t epoch)
{
    struct ckpt_head h;
    char etag[CKPT_ETAG_MAX] = "", err[CKPT_ERR_MAX] = "", key[1024];
    bool exists;
    unsigned scanned = 0;
    ckpt_status st;

    if (!ctx)
        return CKPT_E_INVAL;
    ckpt__flight_wait(&ctx->flight);
    /* A damaged HEAD is rewritten here from the manifests (headscan.h), by
     * the runner that just took the lease, conditionally on the damaged
     * bytes; a manifest of a newer format among them stops it. */
    st = ckpt__read_head_or_scan(ctx, &h, etag, &exists, &scanned, NULL);
    if (st)
        return st;
    if (scanned & CKPT_HEAD_NEWER) {
        ckpt__set_ctx_err(ctx,
                          "HEAD of run %s is damaged, and the run holds checkpoints of a "
                          "newer format than this ckpt (%d) reads: upgrade to rewrite it",
                          ctx->run, CKPT_FORMAT_VERSION);
        ckpt__head_free(&h);
        return CKPT_E_UNSUPPORTED;
    }
    h.epoch = epoch;
    h.time_ms = ckpt__now_ms();
    h.rev++;
    st = ckpt__put_head(ctx, &h, exists ? etag : NULL, NULL, err);
    ckpt__run_key(ctx, "HEAD", key, sizeof key);
    if (st)
        ckpt__set_ctx_err(ctx, "fencing %s: %s", key, err);
    else if (scanned & CKPT_HEAD_SCANNED)
        ckpt__log(&ctx->log, CKPT_LOG_WARN, "fence",
                  "run %s fenced at epoch %llu: HEAD "
                  "rewritten from its manifests (%zu checkpoint%s)",
                  ctx->run, (unsigned long long)epoch, h.n, h.n == 1 ? "" : "s");
    else
        ckpt__log(&ctx->log, CKPT_LOG_INFO, "fence", "run %s fenced at epoch %llu", ctx->run,
                  (unsigned long long)epoch);
    if (st == CKPT_E_NOENT)
        st = CKPT_E_PRECONDITION;
    ckpt__head_free(&h);
    /* our own view must follow, or our next commit would fence itself */
    atomic_store(&ctx->epoch, epoch);
    ckpt__load_run(ctx, true);
    return st;
}
