/* runobj.c -- a run's objects read from the store (HEAD, manifests, gc
 * records) and HEAD written (runobj.h). */
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "run/globalckpt.h"
#include "run/runobj.h"

ckpt_status ckpt__read_head(struct ckpt_ctx *ctx, struct ckpt_head *h, char *etag, bool *exists)
{
    char key[1024], err[CKPT_ERR_MAX] = "";
    void *buf = NULL;
    size_t len;
    ckpt_status st;
    memset(h, 0, sizeof *h);
    *exists = false;
    ckpt__run_key(ctx, "HEAD", key, sizeof key);
    st = ctx->store->ops->get(ctx->store, key, CKPT_HEAD_MAX, 0, &buf, &len, etag, err);
    if (st == CKPT_E_NOENT)
        return CKPT_OK;
    if (st) {
        ckpt__set_ctx_err(ctx, "reading %s: %s", key, err);
        return st;
    }
    st = ckpt__head_decode(buf, len, h, err);
    free(buf);
    if (st) {
        /* logged by whoever decides what it means (headscan.h: most
         * readers go on from the manifests) */
        ckpt__set_ctx_err(ctx, "%s is damaged: %s", key, err);
        return st;
    }
    *exists = true;
    return CKPT_OK;
}

ckpt_status ckpt__read_manifest_view(struct ckpt_ctx *ctx, const char *rel, unsigned view,
                                     struct ckpt_manifest *m)
{
    if (ckpt__is_commit_key(rel))
        return ckpt__read_global(ctx, rel, view, m);
    return ckpt__read_manifest(ctx, rel, m);
}

ckpt_status ckpt__read_manifest(struct ckpt_ctx *ctx, const char *rel, struct ckpt_manifest *m)
{
    if (ckpt__is_commit_key(rel))
        return ckpt__read_global(ctx, rel, ctx->rank, m);
    return ckpt__read_one_manifest(ctx, rel, m);
}

ckpt_status ckpt__put_head(struct ckpt_ctx *ctx, const struct ckpt_head *h, const char *etag,
                           char *new_etag, char *err)
{
    struct ckpt_put_opts po = { CKPT_PUT_PLAIN, etag, 0 };
    char key[1024], *buf = NULL;
    size_t len;
    ckpt_status st = ckpt__head_encode(h, &buf, &len);
    if (st) {
        ckpt__seterr(err, "out of memory");
        return st;
    }
    if (ckpt_store_can(ctx->store, CKPT_STORE_CONDITIONAL))
        po.cond = etag ? CKPT_PUT_IF_MATCH : CKPT_PUT_IF_NONE_MATCH;
    ckpt__run_key(ctx, "HEAD", key, sizeof key);
    st = ctx->store->ops->put(ctx->store, key, buf, len, &po, new_etag, err);
    free(buf);
    return st;
}

ckpt_status ckpt__read_gc_records(struct ckpt_ctx *ctx, const struct ckpt_head *h,
                                  struct ckpt_gc_victims *v)
{
    int64_t now = ckpt__now_ms();
    memset(v, 0, sizeof *v);
    for (size_t i = 0; i < h->ngc; i++) {
        char key[1024], err[CKPT_ERR_MAX] = "";
        void *buf = NULL;
        size_t len;
        ckpt_status st;
        if (now - h->gc[i].time_ms > CKPT_GC_RECORD_TTL_MS)
            continue; /* its gc stopped deleting long ago */
        ckpt__run_key(ctx, h->gc[i].record, key, sizeof key);
        st = ctx->store->ops->get(ctx->store, key, CKPT_MANIFEST_MAX, 0, &buf, &len, NULL, err);
        if (st == CKPT_OK)
            st = ckpt__gc_record_decode(buf, len, v, err);
        free(buf);
        if (st == CKPT_E_NOMEM)
            return st;
        if (st == CKPT_E_NOENT || st == CKPT_E_CORRUPT) {
            /* a gc writes its record before HEAD names it and deletes it
             * after: only someone else's hand makes it missing */
            ckpt__log(&ctx->log, CKPT_LOG_WARN, "load", "gc record %s: %s (ignored)", key, err);
            continue;
        }
        if (st) {
            ckpt__set_ctx_err(ctx, "reading gc record %s: %s", key, err);
            ckpt__gc_victims_free(v);
            return st;
        }
    }
    return CKPT_OK;
}
