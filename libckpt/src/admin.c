/* admin.c -- list, verify and garbage-collect a run. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

static void manifest_sizes(const struct ckpt_manifest *m, uint64_t *raw, uint64_t *stored,
                           uint64_t *chunks)
{
    struct ckpt_idset seen;
    ckpt__idset_init(&seen);
    *raw = *stored = *chunks = 0;
    for (size_t i = 0; i < m->nitems; i++) {
        *raw += m->items[i].size;
        for (size_t c = 0; c < m->items[i].nchunks; c++) {
            const struct ckpt_chunk_ref *r = &m->items[i].chunks[c];
            if (ckpt__idset_get(&seen, r->id, NULL))
                continue;
            ckpt__idset_put(&seen, r->id, 1);
            *stored += r->stored_len;
            (*chunks)++;
        }
    }
    ckpt__idset_free(&seen);
}

ckpt_status ckpt_list(struct ckpt_ctx *ctx, ckpt_list_fn fn, void *user)
{
    struct ckpt_head h;
    bool exists;
    ckpt_status st;
    if (!ctx || !fn)
        return CKPT_E_INVAL;
    st = ckpt__read_head(ctx, &h, NULL, &exists);
    if (st || !exists)
        return st;
    for (size_t i = 0; i < h.n; i++) {
        struct ckpt_manifest m;
        struct ckpt_info info = { 0 };
        char key[1024];
        ckpt__run_key(ctx, h.entries[i].manifest, key, sizeof key);
        info.step = h.entries[i].step;
        info.seq = h.entries[i].seq;
        info.manifest = key;
        if (ckpt__read_manifest(ctx, h.entries[i].manifest, &m) == CKPT_OK) {
            info.epoch = m.epoch;
            info.time_ms = m.time_ms;
            info.items = m.nitems;
            info.new_bytes = m.new_bytes;
            manifest_sizes(&m, &info.raw_bytes, &info.stored_bytes, &info.chunks);
            ckpt__manifest_free(&m);
        } else {
            info.time_ms = -1; /* damaged: listed, flagged by time -1 */
        }
        if (fn(user, &info))
            break;
    }
    ckpt__head_free(&h);
    return CKPT_OK;
}

/* ---- verify ------------------------------------------------------------------------ */
ckpt_status ckpt_verify(struct ckpt_ctx *ctx, uint64_t step)
{
    struct ckpt_head h;
    bool exists;
    ckpt_status st, result = CKPT_OK;
    struct ckpt_idset seen;
    size_t bad = 0, matched = 0;
    if (!ctx)
        return CKPT_E_INVAL;
    ckpt__wait(ctx);
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
        st = ckpt__read_manifest(ctx, h.entries[i].manifest, &m);
        if (st) {
            ckpt__log(&ctx->log, CKPT_LOG_ERROR, "verify", "%s", ctx->errmsg);
            result = st == CKPT_E_NOENT ? CKPT_E_CORRUPT : st;
            bad++;
            continue;
        }
        {
            char err[CKPT_ERR_MAX] = "";
            st = ckpt__verify_manifest(ctx, &m, &seen, &bad, err);
            if (st) {
                ckpt__set_ctx_err(ctx, "%s", err);
                if (!result)
                    result = st;
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

/* ---- gc ----------------------------------------------------------------------------- */
struct objlist {
    char **keys;
    int64_t *mtime;
    uint64_t *size;
    size_t n, cap;
};

static int collect(void *user, const struct ckpt_obj_info *o)
{
    struct objlist *l = user;
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 256;
        char **k = realloc(l->keys, nc * sizeof *k);
        int64_t *m = k ? realloc(l->mtime, nc * sizeof *m) : NULL;
        uint64_t *s = m ? realloc(l->size, nc * sizeof *s) : NULL;
        if (k)
            l->keys = k;
        if (m)
            l->mtime = m;
        if (!s)
            return 1;
        l->size = s;
        l->cap = nc;
    }
    l->keys[l->n] = ckpt__strdup(o->key);
    if (!l->keys[l->n])
        return 1;
    l->mtime[l->n] = o->mtime_ms;
    l->size[l->n] = o->size;
    l->n++;
    return 0;
}

static void objlist_free(struct objlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->keys[i]);
    free(l->keys);
    free(l->mtime);
    free(l->size);
}

/* Chunk id from a chunk key ".../chunks/ab/<32 hex>", or -1. */
static int key_id(const char *key, uint8_t id[CKPT_ID_LEN])
{
    const char *slash = strrchr(key, '/');
    if (!slash || strlen(slash + 1) != CKPT_ID_HEX)
        return -1;
    return ckpt__unhex(slash + 1, id, CKPT_ID_LEN);
}

static ckpt_status delete_keys(struct ckpt_ctx *ctx, char **keys, size_t n, uint64_t *deleted)
{
    char err[CKPT_ERR_MAX] = "";
    for (size_t i = 0; i < n; i += 1000) {
        size_t k = n - i < 1000 ? n - i : 1000;
        ckpt_status st = ctx->store->ops->del(ctx->store, (const char *const *)keys + i, k, err);
        if (st) {
            ckpt__set_ctx_err(ctx, "delete: %s", err);
            return st;
        }
        *deleted += k;
    }
    return CKPT_OK;
}

static ckpt_status gc_once(struct ckpt_ctx *ctx, unsigned keep, uint64_t min_age_ms,
                           uint64_t *deleted)
{
    struct ckpt_head h;
    char etag[CKPT_ETAG_MAX] = "", err[CKPT_ERR_MAX] = "", prefix[1024], hkey[1024];
    bool exists;
    ckpt_status st;
    struct objlist objs[2] = { { 0 }, { 0 } }, mans = { 0 }; /* chunks, packs */
    struct ckpt_idset live;
    char **victims = NULL;
    size_t nv = 0, keepn;
    uint64_t ndel = 0;
    int64_t now = ckpt__now_ms();
    struct ckpt_idlist *ids = NULL;
    int *ok = NULL;

    if (!ctx || keep == 0)
        return CKPT_E_INVAL;
    ckpt__wait(ctx);
    ckpt__idset_init(&live);
    st = ckpt__read_head(ctx, &h, etag, &exists);
    if (st)
        goto out;
    for (int kind = 0; kind < 2; kind++) {
        snprintf(prefix, sizeof prefix, "%s/%s/", ctx->run,
                 kind == CKPT_OBJ_PACK ? "packs" : "chunks");
        st = ctx->store->ops->list(ctx->store, prefix, collect, &objs[kind], err);
        if (st) {
            ckpt__set_ctx_err(ctx, "listing %s: %s", prefix, err);
            goto out;
        }
    }
    snprintf(prefix, sizeof prefix, "%s/manifests/", ctx->run);
    st = ctx->store->ops->list(ctx->store, prefix, collect, &mans, err);
    if (st) {
        ckpt__set_ctx_err(ctx, "listing %s: %s", prefix, err);
        goto out;
    }
    {
        /* present objects, for the "restorable" check below */
        struct ckpt_idset present[2];
        ckpt__idset_init(&present[0]);
        ckpt__idset_init(&present[1]);
        for (int kind = 0; kind < 2; kind++)
            for (size_t i = 0; i < objs[kind].n; i++) {
                uint8_t id[CKPT_ID_LEN];
                if (!key_id(objs[kind].keys[i], id))
                    ckpt__idset_put(&present[kind], id, objs[kind].size[i]);
            }
        ids = calloc(h.n ? h.n : 1, sizeof *ids);
        ok = calloc(h.n ? h.n : 1, sizeof *ok);
        if (!ids || !ok) {
            ckpt__idset_free(&present[0]);
            ckpt__idset_free(&present[1]);
            st = CKPT_E_NOMEM;
            goto out;
        }
        /* A retained checkpoint counts as restorable when its manifest reads
         * and every object it names (chunks, packs) is present with the
         * recorded size (full byte verification is `ckptrun verify`). */
        for (size_t i = 0; i < h.n; i++) {
            struct ckpt_manifest m;
            if (ckpt__read_manifest(ctx, h.entries[i].manifest, &m) != CKPT_OK)
                continue;
            if (ckpt__manifest_objects(&m, &ids[i]) == 0) {
                ok[i] = 1;
                for (size_t k = 0; k < ids[i].n; k++) {
                    uint64_t sz;
                    if (!ckpt__idset_get(&present[ids[i].kind[k]], ids[i].ids[k], &sz) ||
                        sz != ids[i].size[k])
                        ok[i] = 0;
                }
            }
            ckpt__manifest_free(&m);
        }
        ckpt__idset_free(&present[0]);
        ckpt__idset_free(&present[1]);
    }
    /* choose what to keep: the newest `keep`, plus the newest restorable one
     * if none of those is */
    keepn = h.n < keep ? h.n : keep;
    {
        size_t newest_ok = h.n;
        for (size_t i = 0; i < h.n && newest_ok == h.n; i++)
            if (ok[i])
                newest_ok = i;
        if (newest_ok >= keepn && newest_ok < h.n) {
            ckpt__log(&ctx->log, CKPT_LOG_WARN, "gc",
                      "the newest %zu checkpoints are damaged: also keeping step %" PRIu64,
                      keepn, h.entries[newest_ok].step);
            /* move it into the kept range */
            struct ckpt_head_entry e = h.entries[newest_ok];
            struct ckpt_idlist l = ids[newest_ok];
            int o = ok[newest_ok];
            memmove(&h.entries[keepn + 1], &h.entries[keepn],
                    (newest_ok - keepn) * sizeof *h.entries);
            memmove(&ids[keepn + 1], &ids[keepn], (newest_ok - keepn) * sizeof *ids);
            memmove(&ok[keepn + 1], &ok[keepn], (newest_ok - keepn) * sizeof *ok);
            h.entries[keepn] = e;
            ids[keepn] = l;
            ok[keepn] = o;
            keepn++;
        }
    }
    if (exists && keepn < h.n) {
        /* 1. HEAD first: from now on the dropped ones are not committed */
        struct ckpt_head nh = h;
        char *buf = NULL;
        size_t len;
        struct ckpt_put_opts po = { CKPT_PUT_IF_MATCH, etag, 0 };
        nh.n = keepn;
        if (!ctx->store->ops->has_conditional(ctx->store))
            po.cond = CKPT_PUT_PLAIN;
        st = ckpt__head_encode(&nh, &buf, &len);
        if (st)
            goto out;
        ckpt__run_key(ctx, "HEAD", hkey, sizeof hkey);
        st = ctx->store->ops->put(ctx->store, hkey, buf, len, &po, NULL, err);
        free(buf);
        if (st) {
            ckpt__set_ctx_err(ctx, st == CKPT_E_PRECONDITION
                                       ? "HEAD changed during gc (a save committed): run gc again"
                                       : "writing HEAD: %s", err);
            goto out;
        }
    }
    for (size_t i = 0; i < keepn; i++)
        for (size_t k = 0; k < ids[i].n; k++) {
            uint64_t bits = 0;
            ckpt__idset_get(&live, ids[i].ids[k], &bits);
            ckpt__idset_put(&live, ids[i].ids[k], bits | 1u << ids[i].kind[k]);
        }
    victims = malloc((objs[0].n + objs[1].n + mans.n + 1) * sizeof *victims);
    if (!victims) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    /* 2. manifests: dropped ones at once; unknown ones (a crash between
     * manifest and HEAD, or a commit in progress) only when old */
    for (size_t i = 0; i < mans.n; i++) {
        const char *rel = mans.keys[i] + strlen(ctx->run) + 1;
        int kept = 0, dropped = 0;
        for (size_t k = 0; k < h.n; k++)
            if (!strcmp(h.entries[k].manifest, rel)) {
                if (k < keepn)
                    kept = 1;
                else
                    dropped = 1;
            }
        if (kept)
            continue;
        if (dropped || (uint64_t)(now - mans.mtime[i]) >= min_age_ms)
            victims[nv++] = mans.keys[i];
    }
    st = delete_keys(ctx, victims, nv, &ndel);
    if (st)
        goto out;
    /* 3. chunks and packs no retained checkpoint uses, old enough not to
     * be a save in flight */
    nv = 0;
    for (int kind = 0; kind < 2; kind++)
        for (size_t i = 0; i < objs[kind].n; i++) {
            uint8_t id[CKPT_ID_LEN];
            uint64_t bits = 0;
            if (key_id(objs[kind].keys[i], id))
                continue; /* not ours: leave it */
            if (ckpt__idset_get(&live, id, &bits) && (bits & (1u << kind)))
                continue;
            if ((uint64_t)(now - objs[kind].mtime[i]) < min_age_ms)
                continue;
            victims[nv++] = objs[kind].keys[i];
        }
    st = delete_keys(ctx, victims, nv, &ndel);
    if (st == CKPT_OK) {
        ckpt__log(&ctx->log, CKPT_LOG_INFO, "gc", "kept %zu checkpoints, deleted %" PRIu64
                  " objects", keepn, ndel);
        /* the in-process index is stale now */
        ckpt__load_run(ctx, true);
    }
out:
    if (deleted)
        *deleted = ndel;
    if (ids)
        for (size_t i = 0; i < h.n; i++)
            ckpt__idlist_free(&ids[i]);
    free(ids);
    free(ok);
    free(victims);
    objlist_free(&objs[0]);
    objlist_free(&objs[1]);
    objlist_free(&mans);
    ckpt__idset_free(&live);
    ckpt__head_free(&h);
    return st;
}

/* A save that commits while gc works (a live run) changes HEAD under it:
 * gc's conditional HEAD write is refused before anything is deleted, and
 * gc starts over from the new HEAD, a few times. */
ckpt_status ckpt_gc(struct ckpt_ctx *ctx, unsigned keep, uint64_t min_age_ms, uint64_t *deleted)
{
    ckpt_status st = CKPT_E_PRECONDITION;
    for (int attempt = 0; attempt < 5 && st == CKPT_E_PRECONDITION; attempt++) {
        if (attempt)
            usleep(100000u << attempt);
        st = gc_once(ctx, keep, min_age_ms, deleted);
    }
    return st;
}

ckpt_status ckpt_fence(struct ckpt_ctx *ctx, uint64_t epoch)
{
    struct ckpt_head h;
    char etag[CKPT_ETAG_MAX] = "", err[CKPT_ERR_MAX] = "", key[1024], *buf = NULL;
    size_t len;
    bool exists;
    ckpt_status st;
    struct ckpt_put_opts po = { CKPT_PUT_IF_MATCH, etag, 0 };

    if (!ctx)
        return CKPT_E_INVAL;
    ckpt__wait(ctx);
    st = ckpt__read_head(ctx, &h, etag, &exists);
    if (st)
        return st;
    h.epoch = epoch;
    h.time_ms = ckpt__now_ms();
    if (!exists)
        po.cond = CKPT_PUT_IF_NONE_MATCH;
    if (!ctx->store->ops->has_conditional(ctx->store))
        po.cond = CKPT_PUT_PLAIN;
    st = ckpt__head_encode(&h, &buf, &len);
    if (st)
        goto out;
    ckpt__run_key(ctx, "HEAD", key, sizeof key);
    st = ctx->store->ops->put(ctx->store, key, buf, len, &po, NULL, err);
    if (st)
        ckpt__set_ctx_err(ctx, "fencing %s: %s", key, err);
    else
        ckpt__log(&ctx->log, CKPT_LOG_INFO, "fence", "run %s fenced at epoch %llu", ctx->run,
                  (unsigned long long)epoch);
    if (st == CKPT_E_NOENT)
        st = CKPT_E_PRECONDITION;
out:
    free(buf);
    ckpt__head_free(&h);
    /* our own view must follow, or our next commit would fence itself */
    pthread_mutex_lock(&ctx->run_mu);
    ctx->epoch = epoch;
    pthread_mutex_unlock(&ctx->run_mu);
    ckpt__load_run(ctx, true);
    return st;
}
