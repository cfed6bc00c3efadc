/* fence.c -- ckpt_fence(): HEAD records a new lease epoch, so that writers
 * of an older one (a runner that lost its lease) can no longer commit. */
#include <stdio.h>

#include "ctx.h"
#include "runload.h"

ckpt_status ckpt_fence(struct ckpt_ctx *ctx, uint64_t epoch)
{
    struct ckpt_head h;
    char etag[CKPT_ETAG_MAX] = "", err[CKPT_ERR_MAX] = "", key[1024];
    bool exists;
    ckpt_status st;

    if (!ctx)
        return CKPT_E_INVAL;
    ckpt__flight_wait(&ctx->flight);
    st = ckpt__read_head(ctx, &h, etag, &exists);
    if (st)
        return st;
    h.epoch = epoch;
    h.time_ms = ckpt_now_ms();
    h.rev++;
    st = ckpt__put_head(ctx, &h, exists ? etag : NULL, NULL, err);
    ckpt__run_key(ctx, "HEAD", key, sizeof key);
    if (st)
        ckpt__set_ctx_err(ctx, "fencing %s: %s", key, err);
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
