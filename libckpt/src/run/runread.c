/* runread.c -- a run's keys and its single manifests read from the store
 * (runread.h). */
#include <stdio.h>
#include <stdlib.h>

#include "core/ctx.h"
#include "run/runread.h"

void ckpt__run_key(const struct ckpt_ctx *ctx, const char *rel, char *out, size_t n)
{
    snprintf(out, n, "%s/%s", ctx->run, rel);
}

ckpt_status ckpt__read_one_manifest(struct ckpt_ctx *ctx, const char *rel,
                                    struct ckpt_manifest *m)
{
    char key[1024], err[CKPT_ERR_MAX] = "";
    void *buf = NULL;
    size_t len;
    ckpt_status st;
    ckpt__run_key(ctx, rel, key, sizeof key);
    st = ctx->store->ops->get(ctx->store, key, CKPT_MANIFEST_MAX, 0, &buf, &len, NULL, err);
    if (st) {
        ckpt__set_ctx_err(ctx, "reading manifest %s: %s", key, err);
        return st;
    }
    st = ckpt__manifest_decode(buf, len, m, err);
    free(buf);
    if (st == CKPT_E_UNSUPPORTED) /* newer, not damaged: the reason says "upgrade" */
        ckpt__set_ctx_err(ctx, "manifest %s: %s", key, err);
    else if (st)
        ckpt__set_ctx_err(ctx, "manifest %s is damaged: %s", key, err);
    return st;
}
