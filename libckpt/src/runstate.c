/* runstate.c -- what this writer knows of its run (runstate.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctx.h"
#include "runstate.h"

void ckpt__run_init(struct ckpt_run *rs)
{
    memset(rs, 0, sizeof *rs);
    pthread_mutex_init(&rs->mu, NULL);
    pthread_cond_init(&rs->cv, NULL);
    ckpt__dedup_init(&rs->idx);
    ckpt__idset_init(&rs->bad_chunks);
}

/* The state a load builds (not bad_chunks, which outlives loads). */
static void state_free(struct ckpt_run *rs)
{
    ckpt__gc_victims_free(&rs->gcv);
    ckpt__idlists_free(rs->damaged_ids, rs->head.ndamaged);
    rs->damaged_ids = NULL;
    ckpt__idlists_free(rs->retained_ids, rs->head.n);
    rs->retained_ids = NULL;
    ckpt__head_free(&rs->head);
    ckpt__dedup_free(&rs->idx);
}

void ckpt__run_destroy(struct ckpt_run *rs)
{
    state_free(rs);
    ckpt__idset_free(&rs->bad_chunks);
    pthread_mutex_destroy(&rs->mu);
    pthread_cond_destroy(&rs->cv);
}

void ckpt__run_key(const struct ckpt_ctx *ctx, const char *rel, char *out, size_t n)
{
    snprintf(out, n, "%s/%s", ctx->run, rel);
}

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
        ckpt__set_ctx_err(ctx, "%s is damaged: %s", key, err);
        ckpt__log(&ctx->log, CKPT_LOG_ERROR, "restore", "%s is damaged: %s", key, err);
        return st;
    }
    *exists = true;
    return CKPT_OK;
}

ckpt_status ckpt__read_manifest(struct ckpt_ctx *ctx, const char *rel, struct ckpt_manifest *m)
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
    if (st)
        ckpt__set_ctx_err(ctx, "manifest %s is damaged: %s", key, err);
    return st;
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
    if (ctx->store->ops->has_conditional(ctx->store))
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

ckpt_status ckpt__load_run(struct ckpt_ctx *ctx, bool ids)
{
    struct ckpt_run *rs = &ctx->rs;
    struct ckpt_head h;
    char etag[CKPT_ETAG_MAX] = "";
    bool exists;
    struct ckpt_idlist *lists = NULL;
    struct ckpt_dedup known;
    struct ckpt_gc_victims gcv = { 0 };
    struct ckpt_idlist *dlists = NULL;
    bool newer = false;
    ckpt_status st;

    ckpt__dedup_init(&known);
    st = ckpt__read_head(ctx, &h, etag, &exists);
    if (st)
        goto out;
    if (ids && h.ngc && (st = ckpt__read_gc_records(ctx, &h, &gcv)) != CKPT_OK)
        goto out;
    lists = calloc(h.n ? h.n : 1, sizeof *lists);
    dlists = calloc(h.ndamaged ? h.ndamaged : 1, sizeof *dlists);
    if (!lists || !dlists) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    /* damaged checkpoints: their objects are spared by retention (for
     * inspection), never used for dedup */
    for (size_t i = 0; ids && i < h.ndamaged; i++) {
        struct ckpt_manifest m;
        if (ckpt__read_manifest(ctx, h.damaged[i].manifest, &m) != CKPT_OK)
            continue;
        if (ckpt__manifest_objects(&m, &dlists[i]) != 0)
            st = CKPT_E_NOMEM;
        ckpt__manifest_free(&m);
        if (st)
            goto out;
    }
    /* Oldest first: where a chunk lives, the newest manifest's word wins. */
    for (size_t i = h.n; ids && i-- > 0;) {
        struct ckpt_manifest m;
        ckpt_status mst = ckpt__read_manifest(ctx, h.entries[i].manifest, &m);
        /* A damaged retained manifest only costs dedup: skip it. One of a
         * newer format forbids committing (see rs->newer). */
        if (mst == CKPT_E_UNSUPPORTED)
            newer = true;
        if (mst != CKPT_OK) {
            ckpt__log(&ctx->log, CKPT_LOG_WARN, "load", "%s", ctx->errmsg);
            continue;
        }
        if (ckpt__manifest_objects(&m, &lists[i]) != 0 ||
            ckpt__dedup_put_manifest(&known, &m) != 0)
            st = CKPT_E_NOMEM;
        ckpt__manifest_free(&m);
        if (st)
            goto out;
    }
out:
    pthread_mutex_lock(&rs->mu);
    if (st == CKPT_OK) {
        /* chunks a restore found damaged stay out of the index */
        for (size_t k = 0; k < rs->bad_chunks.cap; k++)
            if (rs->bad_chunks.used[k])
                ckpt__dedup_forget(&known, rs->bad_chunks.keys[k], CKPT_OBJ_CHUNK);
        state_free(rs);
        rs->head = h;
        rs->retained_ids = lists;
        rs->damaged_ids = dlists;
        rs->idx = known;
        rs->gcv = gcv;
        rs->newer = newer;
        rs->have_head = exists;
        rs->load_ok = true;
        snprintf(rs->head_etag, sizeof rs->head_etag, "%s", etag);
    } else {
        ckpt__log(&ctx->log, CKPT_LOG_WARN, "load", "cannot read the run's state: %s",
                  st == CKPT_E_NOMEM ? "out of memory" : ctx->errmsg);
        ckpt__dedup_free(&known);
        ckpt__idlists_free(lists, h.n);
        ckpt__idlists_free(dlists, h.ndamaged);
        ckpt__head_free(&h); /* zeroed when it was not read */
        ckpt__gc_victims_free(&gcv);
    }
    /* Loaded or not, savers may proceed: without the index they only write
     * more; the commit re-reads HEAD before it relies on it. */
    rs->loaded = true;
    pthread_cond_broadcast(&rs->cv);
    pthread_mutex_unlock(&rs->mu);
    return st;
}

void ckpt__run_skip_load(struct ckpt_run *rs)
{
    pthread_mutex_lock(&rs->mu);
    rs->loaded = true; /* load_ok stays false: the commit loads */
    pthread_cond_broadcast(&rs->cv);
    pthread_mutex_unlock(&rs->mu);
}

int ckpt__run_lookup(struct ckpt_run *rs, const uint8_t *id, struct ckpt_loc *loc,
                     struct ckpt_pack *pack)
{
    int known;
    pthread_mutex_lock(&rs->mu);
    while (!rs->loaded)
        pthread_cond_wait(&rs->cv, &rs->mu);
    /* never a chunk (or pack) retention is deleting */
    known = ckpt__dedup_get(&rs->idx, id, loc, pack);
    pthread_mutex_unlock(&rs->mu);
    return known;
}

int ckpt__run_doomed(struct ckpt_run *rs, const uint8_t *id, int kind)
{
    int doomed;
    pthread_mutex_lock(&rs->mu);
    doomed = ckpt__objset_has(&rs->gcv.objs, id, kind);
    pthread_mutex_unlock(&rs->mu);
    return doomed;
}

void ckpt__run_forget_bad(struct ckpt_run *rs, const struct ckpt_idset *bad)
{
    pthread_mutex_lock(&rs->mu);
    for (size_t k = 0; k < bad->cap; k++)
        if (bad->used[k]) {
            ckpt__idset_put(&rs->bad_chunks, bad->keys[k], 1);
            ckpt__dedup_forget(&rs->idx, bad->keys[k], CKPT_OBJ_CHUNK);
        }
    pthread_mutex_unlock(&rs->mu);
}

void ckpt__run_forget(struct ckpt_run *rs, const uint8_t *id, int kind)
{
    ckpt__dedup_forget(&rs->idx, id, kind);
}

void ckpt__dropped_free(struct ckpt_dropped *d)
{
    for (size_t i = 0; i < d->n; i++)
        free(d->entries[i].manifest);
    free(d->entries);
    ckpt__idlists_free(d->ids, d->n);
    memset(d, 0, sizeof *d);
}

int ckpt__run_adopt(struct ckpt_run *rs, struct ckpt_head *nh, const size_t *src,
                    const char *etag, const struct ckpt_manifest *m,
                    struct ckpt_idlist *new_ids, struct ckpt_dropped *dropped)
{
    size_t nold = rs->head.n, at = 0;
    struct ckpt_idlist *retained = calloc(nh->n, sizeof *retained);
    char *kept = calloc(nold ? nold : 1, 1), *mkey = NULL;

    memset(dropped, 0, sizeof *dropped);
    dropped->entries = calloc(nold ? nold : 1, sizeof *dropped->entries);
    dropped->ids = calloc(nold ? nold : 1, sizeof *dropped->ids);
    while (at + 1 < nh->n && src[at] != SIZE_MAX)
        at++;
    mkey = ckpt__strdup(nh->entries[at].manifest);
    if (!retained || !kept || !dropped->entries || !dropped->ids || !mkey) {
        free(retained);
        free(kept);
        free(mkey);
        ckpt__dropped_free(dropped);
        return -1;
    }
    nh->entries[at].manifest = mkey;
    for (size_t k = 0; k < nh->n; k++) {
        if (src[k] == SIZE_MAX) {
            retained[k] = *new_ids;
            memset(new_ids, 0, sizeof *new_ids);
        } else {
            retained[k] = rs->retained_ids[src[k]];
            kept[src[k]] = 1;
        }
    }
    for (size_t i = 0; i < nold; i++)
        if (!kept[i]) {
            dropped->entries[dropped->n] = rs->head.entries[i];
            dropped->ids[dropped->n++] = rs->retained_ids[i];
        }
    free(kept);
    free(rs->head.entries);
    free(rs->retained_ids);
    /* nh shares the old HEAD's damaged entries and gc records */
    rs->head = *nh;
    memset(nh, 0, sizeof *nh);
    rs->retained_ids = retained;
    rs->have_head = true;
    snprintf(rs->head_etag, sizeof rs->head_etag, "%s", etag);
    /* best effort: a chunk left out of the index is only written again */
    (void)ckpt__dedup_put_manifest(&rs->idx, m);
    return 0;
}
