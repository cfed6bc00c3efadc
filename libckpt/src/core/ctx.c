/* ctx.c -- the context's own state: its message, requests (ctx.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/ctx.h"

/* Where this thread's messages go instead of the context's (the
 * background load's own buffer), NULL for the context's. */
static __thread char *err_redirect;

void ckpt__ctx_err_redirect(char *buf)
{
    err_redirect = buf;
}

const char *ckpt__errmsg(const struct ckpt_ctx *ctx)
{
    return err_redirect ? err_redirect : ctx->errmsg;
}

void ckpt__set_ctx_err(struct ckpt_ctx *ctx, const char *fmt, ...)
{
    char msg[sizeof ctx->errmsg];
    va_list ap;
    /* Formatted aside: callers pass the current message as an argument
     * ("...: %s", ckpt__errmsg(ctx)), which must not be the buffer being
     * written. */
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (err_redirect) {
        memcpy(err_redirect, msg, sizeof msg);
        return;
    }
    pthread_mutex_lock(&ctx->err_mu);
    memcpy(ctx->errmsg, msg, sizeof msg);
    pthread_mutex_unlock(&ctx->err_mu);
}

void ckpt__request(struct ckpt_ctx *ctx, ckpt_codec codec)
{
    if (codec != CKPT_CODEC_DEFAULT)
        atomic_store(&ctx->req_codec, (int)codec);
    atomic_store(&ctx->requested, 1);
}
