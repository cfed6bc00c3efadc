/* runload.c -- reading a run and loading it into the run state (runload.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctx.h"
#include "globalckpt.h"
#include "headscan.h"
#include "runload.h"

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
    int64_t now = ckpt_now_ms();
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

ckpt_status ckpt__load_run(struct ckpt_ctx *ctx, bool ids)
{
    struct ckpt_run_load ld;
    ckpt_status st;
    unsigned scanned = 0;

    memset(&ld, 0, sizeof ld);
    ckpt__dedup_init(&ld.idx);
    st = ckpt__read_head_or_scan(ctx, &ld.head, ld.etag, &ld.exists, &scanned, NULL);
    if (st)
        goto out;
    /* a manifest of a newer format among them: do not write over it */
    ld.newer = (scanned & CKPT_HEAD_NEWER) != 0;
    ld.scanned = (scanned & CKPT_HEAD_SCANNED) != 0;
    if (ids && ld.head.ngc && (st = ckpt__read_gc_records(ctx, &ld.head, &ld.gcv)) != CKPT_OK)
        goto out;
    ld.retained = calloc(ld.head.n ? ld.head.n : 1, sizeof *ld.retained);
    ld.damaged = calloc(ld.head.ndamaged ? ld.head.ndamaged : 1, sizeof *ld.damaged);
    if (!ld.retained || !ld.damaged) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    /* damaged checkpoints: their objects are spared by retention (for
     * inspection), never used for dedup */
    for (size_t i = 0; ids && i < ld.head.ndamaged; i++) {
        struct ckpt_manifest m;
        if (ckpt__read_manifest(ctx, ld.head.damaged[i].manifest, &m) != CKPT_OK)
            continue;
        if (ckpt__manifest_objects(&m, &ld.damaged[i]) != 0)
            st = CKPT_E_NOMEM;
        ckpt__manifest_free(&m);
        if (st)
            goto out;
    }
    /* Oldest first: where a chunk lives, the newest manifest's word wins. */
    for (size_t i = ld.head.n; ids && i-- > 0;) {
        struct ckpt_manifest m;
        ckpt_status mst = ckpt__read_manifest(ctx, ld.head.entries[i].manifest, &m);
        /* A damaged retained manifest only costs dedup: skip it. One of a
         * newer format forbids committing (see ckpt_run.newer). */
        if (mst == CKPT_E_UNSUPPORTED)
            ld.newer = true;
        if (mst != CKPT_OK) {
            ckpt__log(&ctx->log, CKPT_LOG_WARN, "load", "%s", ctx->errmsg);
            continue;
        }
        /* Over a HEAD rebuilt from the manifests, the gc records in force
         * are unknown: a chunk one of them is deleting would be trusted.
         * Dedup against nothing until HEAD is written again (one save
         * uploads everything). */
        if (ckpt__manifest_objects(&m, &ld.retained[i]) != 0 ||
            (!(scanned & CKPT_HEAD_SCANNED) && ckpt__dedup_put_manifest(&ld.idx, &m) != 0))
            st = CKPT_E_NOMEM;
        ckpt__manifest_free(&m);
        if (st)
            goto out;
    }
out:
    if (st)
        ckpt__log(&ctx->log, CKPT_LOG_WARN, "load", "cannot read the run's state: %s",
                  st == CKPT_E_NOMEM ? "out of memory" : ctx->errmsg);
    /* loaded or not, savers may proceed: without the index they only write
     * more; the commit re-reads HEAD before it relies on it */
    ckpt__run_install(&ctx->rs, &ld, st == CKPT_OK);
    return st;
}
