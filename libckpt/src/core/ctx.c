/* ctx.c -- the context's own state: its message, requests (ctx.h). */
#include <stdarg.h>
#include <stdio.h>

#include "core/ctx.h"

void ckpt__set_ctx_err(struct ckpt_ctx *ctx, const char *fmt, ...)
{
    va_list ap;
    pthread_mutex_lock(&ctx->err_mu);
    va_start(ap, fmt);
    vsnprintf(ctx->errmsg, sizeof ctx->errmsg, fmt, ap);
    va_end(ap);
    pthread_mutex_unlock(&ctx->err_mu);
}

void ckpt__request(struct ckpt_ctx *ctx, ckpt_codec codec)
{
    if (codec != CKPT_CODEC_DEFAULT)
        atomic_store(&ctx->req_codec, (int)codec);
    atomic_store(&ctx->requested, 1);
}
