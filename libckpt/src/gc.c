/* gc.c -- garbage collection of a run (ckpt_gc).
 *
 * Garbage collection never deletes an object a committed checkpoint or a
 * save in flight needs, whatever the timing or the clocks:
 *  1. it reads HEAD and every retained manifest (any failure other than a
 *     manifest that is missing or damaged stops it: it must know everything
 *     a kept checkpoint uses), lists the run's objects, and builds the set
 *     of objects kept checkpoints use (out of memory: nothing is deleted);
 *  2. it takes "now" from the store's clock (the modification time of an
 *     object it writes, gc/<nonce>), the clock every listed time comes from
 *     (on S3 and Azure the server's), so --min-age holds whatever the skew
 *     of this machine's clock;
 *  3. the victims (manifests dropped by --keep or never committed and old
 *     enough, objects no kept checkpoint uses and old enough) go into a
 *     record object, and HEAD is rewritten, conditionally, to name it (and
 *     to drop the checkpoints past --keep). From then on every commit is
 *     conditional on a HEAD naming the record and refuses to use anything
 *     in it (commit.c, gc_collides); a save that read HEAD earlier has its
 *     HEAD write refused, and before trying again it checks the record and
 *     that all it uses is still there (objects_present);
 *  4. it deletes the victims (for at most CKPT_GC_DELETE_MS), then removes
 *     its record from HEAD and deletes the record object.
 * A gc interrupted at any instant leaves every retained checkpoint
 * restorable; a record left by one is void after CKPT_GC_RECORD_TTL_MS and
 * the next gc removes it. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "ctx.h"
#include "retention.h"
#include "runload.h"

struct objlist {
    char **keys;
    int64_t *mtime;
    uint64_t *size;
    size_t n, cap;
    int nomem;
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
        if (!s) {
            l->nomem = 1;
            return 1;
        }
        l->size = s;
        l->cap = nc;
    }
    l->keys[l->n] = ckpt__strdup(o->key);
    if (!l->keys[l->n]) {
        l->nomem = 1;
        return 1;
    }
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
    memset(l, 0, sizeof *l);
}

static ckpt_status list_into(struct ckpt_ctx *ctx, const char *sub, struct objlist *l)
{
    char prefix[1024], err[CKPT_ERR_MAX] = "";
    ckpt_status st;
    snprintf(prefix, sizeof prefix, "%s/%s/", ctx->run, sub);
    st = ctx->store->ops->list(ctx->store, prefix, collect, l, err);
    if (st == CKPT_OK && l->nomem) {
        st = CKPT_E_NOMEM;
        snprintf(err, sizeof err, "out of memory");
    }
    if (st)
        ckpt__set_ctx_err(ctx, "gc: listing %s: %s", prefix, err);
    return st;
}

/* One object to delete, and why (for --dry-run and the debug log). */
struct victim {
    const char *key;
    uint64_t size;
    char why[160];
};

struct victims {
    struct victim *v;
    size_t n, cap;
};

static int victim_add(struct victims *vs, const char *key, uint64_t size, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int victim_add(struct victims *vs, const char *key, uint64_t size, const char *fmt, ...)
{
    va_list ap;
    if (vs->n == vs->cap) {
        size_t nc = vs->cap ? vs->cap * 2 : 256;
        struct victim *nv = realloc(vs->v, nc * sizeof *nv);
        if (!nv)
            return -1;
        vs->v = nv;
        vs->cap = nc;
    }
    vs->v[vs->n].key = key;
    vs->v[vs->n].size = size;
    va_start(ap, fmt);
    vsnprintf(vs->v[vs->n].why, sizeof vs->v[vs->n].why, fmt, ap);
    va_end(ap);
    vs->n++;
    return 0;
}

static void age_text(int64_t ms, char *out, size_t n)
{
    if (ms < 120000)
        snprintf(out, n, "%llds", (long long)(ms / 1000));
    else if (ms < 7200000)
        snprintf(out, n, "%lldm", (long long)(ms / 60000));
    else
        snprintf(out, n, "%.1fh", (double)ms / 3600000.0);
}

/* Take our record (and void ones) out of HEAD, conditionally, a few times. */
static ckpt_status gc_unpublish(struct ckpt_ctx *ctx, const char *rec, int64_t now_ms)
{
    ckpt_status st = CKPT_E_PRECONDITION;
    for (int attempt = 0; attempt < 8 && st == CKPT_E_PRECONDITION; attempt++) {
        struct ckpt_head h;
        char etag[CKPT_ETAG_MAX] = "", err[CKPT_ERR_MAX] = "";
        size_t w = 0;
        bool exists;
        st = ckpt__read_head(ctx, &h, etag, &exists);
        if (st || !exists)
            return st;
        for (size_t i = 0; i < h.ngc; i++) {
            if (!strcmp(h.gc[i].record, rec) ||
                now_ms - h.gc[i].time_ms > CKPT_GC_RECORD_TTL_MS) {
                free(h.gc[i].record);
                continue;
            }
            h.gc[w++] = h.gc[i];
        }
        if (w == h.ngc) {
            ckpt__head_free(&h);
            return CKPT_OK;
        }
        h.ngc = w;
        h.rev++;
        st = ckpt__put_head(ctx, &h, etag, NULL, err);
        ckpt__head_free(&h);
        if (st && st != CKPT_E_PRECONDITION)
            ckpt__set_ctx_err(ctx, "gc: writing HEAD: %s", err);
    }
    return st;
}

static ckpt_status gc_once(struct ckpt_ctx *ctx, unsigned keep, uint64_t min_age_ms,
                           unsigned flags, ckpt_gc_fn fn, void *user, uint64_t *ndel)
{
    struct ckpt_head h;
    char etag[CKPT_ETAG_MAX] = "", err[CKPT_ERR_MAX] = "", rec[64], reckey[1024];
    bool exists, published = false, dry = flags & CKPT_GC_DRY_RUN;
    ckpt_status st;
    struct objlist objs[2] = { { 0 }, { 0 } }, mans = { 0 }, gcs = { 0 }; /* chunks, packs */
    struct ckpt_idset live, present[2];
    struct ckpt_gc_victims gv = { 0 };
    struct victims vs = { 0 };
    const char **keys = NULL;
    size_t keepn = 0;
    int64_t now = 0;
    uint64_t t0_ns = ckpt__mono_ns();
    struct ckpt_idlist *ids = NULL, *dids = NULL;
    int *ok = NULL, *dkeep = NULL, clock_known = 0, cond_less = 0;
    uint8_t nonce[CKPT_ID_LEN];

    ckpt__idset_init(&live);
    ckpt__idset_init(&present[0]);
    ckpt__idset_init(&present[1]);
    memset(&h, 0, sizeof h);
    rec[0] = reckey[0] = '\0';
    st = ckpt__read_head(ctx, &h, etag, &exists);
    if (st)
        goto out;
    /* what the kept checkpoints use: every retained manifest must be read */
    ids = calloc(h.n ? h.n : 1, sizeof *ids);
    ok = calloc(h.n ? h.n : 1, sizeof *ok);
    if (!ids || !ok) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < h.n; i++) {
        struct ckpt_manifest m;
        st = ckpt__read_manifest(ctx, h.entries[i].manifest, &m);
        if (st == CKPT_E_NOENT || st == CKPT_E_CORRUPT) {
            /* cannot be restored: what it used is unknowable and useless */
            ckpt__log(&ctx->log, CKPT_LOG_WARN, "gc", "step %" PRIu64 ": %s", h.entries[i].step,
                      ctx->errmsg);
            st = CKPT_OK;
            continue;
        }
        if (st == CKPT_E_UNSUPPORTED) {
            ckpt__set_ctx_err(ctx, "gc: checkpoint step %" PRIu64 " was written by a newer "
                              "ckpt (%s): upgrade to collect this run", h.entries[i].step,
                              ctx->errmsg);
            goto out;
        }
        if (st)
            goto out; /* store trouble: never guess what a kept checkpoint uses */
        if (ckpt__manifest_objects(&m, &ids[i]) != 0)
            st = CKPT_E_NOMEM;
        ok[i] = 1;
        ckpt__manifest_free(&m);
        if (st)
            goto out;
    }
    /* damaged checkpoints (a restore fell back past them): their objects
     * stay for inspection until --min-age after the marking */
    dkeep = calloc(h.ndamaged ? h.ndamaged : 1, sizeof *dkeep);
    dids = calloc(h.ndamaged ? h.ndamaged : 1, sizeof *dids);
    if (!dkeep || !dids) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < h.ndamaged; i++) {
        struct ckpt_manifest m;
        dkeep[i] = ckpt__now_ms() - h.damaged[i].marked_ms < (int64_t)min_age_ms;
        if (!dkeep[i])
            continue;
        st = ckpt__read_manifest(ctx, h.damaged[i].manifest, &m);
        if (st == CKPT_E_NOENT || st == CKPT_E_CORRUPT || st == CKPT_E_UNSUPPORTED) {
            st = CKPT_OK; /* nothing readable to keep */
            continue;
        }
        if (st)
            goto out;
        if (ckpt__manifest_objects(&m, &dids[i]) != 0)
            st = CKPT_E_NOMEM;
        ckpt__manifest_free(&m);
        if (st)
            goto out;
    }
    if ((st = list_into(ctx, "chunks", &objs[0])) || (st = list_into(ctx, "packs", &objs[1])) ||
        (st = list_into(ctx, "manifests", &mans)) || (st = list_into(ctx, "gc", &gcs)))
        goto out;
    /* A retained checkpoint counts as restorable when its manifest reads
     * and every object it names is present with the recorded size (full
     * byte verification is `ckptrun verify`). */
    for (int kind = 0; kind < 2; kind++)
        for (size_t i = 0; i < objs[kind].n; i++) {
            uint8_t id[CKPT_ID_LEN];
            if (!ckpt__key_id(objs[kind].keys[i], id) &&
                ckpt__idset_put(&present[kind], id, objs[kind].size[i])) {
                st = CKPT_E_NOMEM;
                goto out;
            }
        }
    for (size_t i = 0; i < h.n; i++)
        for (size_t k = 0; ok[i] && k < ids[i].n; k++) {
            uint64_t sz;
            if (!ckpt__idset_get(&present[ids[i].kind[k]], ids[i].ids[k], &sz) ||
                sz != ids[i].size[k])
                ok[i] = 0;
        }
    /* keep the newest `keep`, plus the newest restorable one if none of
     * those is */
    keepn = h.n < keep ? h.n : keep;
    {
        size_t newest_ok = h.n;
        for (size_t i = 0; i < h.n && newest_ok == h.n; i++)
            if (ok[i])
                newest_ok = i;
        if (newest_ok >= keepn && newest_ok < h.n) {
            struct ckpt_head_entry e = h.entries[newest_ok];
            struct ckpt_idlist l = ids[newest_ok];
            int o = ok[newest_ok];
            ckpt__log(&ctx->log, CKPT_LOG_WARN, "gc",
                      "the newest %zu checkpoints are damaged: also keeping step %" PRIu64,
                      keepn, h.entries[newest_ok].step);
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
    if (ckpt__live_add(&live, ids, keepn) || ckpt__live_add(&live, dids, h.ndamaged)) {
        st = CKPT_E_NOMEM; /* an incomplete live set must delete nothing */
        goto out;
    }
    /* the store's "now": the time it gives an object we write now */
    if (getrandom(nonce, sizeof nonce, 0) != (ssize_t)sizeof nonce) {
        ckpt__set_ctx_err(ctx, "gc: getrandom: %s", strerror(errno));
        st = CKPT_E_IO;
        goto out;
    }
    memcpy(rec, "gc/", 3);
    ckpt__hex(nonce, sizeof nonce, rec + 3);
    ckpt__run_key(ctx, rec, reckey, sizeof reckey);
    {
        char *buf = NULL;
        size_t len;
        struct objlist probe = { 0 };
        struct ckpt_put_opts po = { CKPT_PUT_PLAIN, NULL, 0 };
        st = ckpt__gc_record_encode(&gv, ckpt__now_ms(), &buf, &len);
        if (!st)
            st = ctx->store->ops->put(ctx->store, reckey, buf, len, &po, NULL, err);
        free(buf);
        if (st) {
            ckpt__set_ctx_err(ctx, "gc: writing %s: %s", reckey, err);
            goto out;
        }
        st = ctx->store->ops->list(ctx->store, reckey, collect, &probe, err);
        for (size_t i = 0; st == CKPT_OK && i < probe.n; i++)
            if (!strcmp(probe.keys[i], reckey) && probe.mtime[i] > 0) {
                now = probe.mtime[i];
                clock_known = 1;
            }
        objlist_free(&probe);
        if (st) {
            ckpt__set_ctx_err(ctx, "gc: listing %s: %s", reckey, err);
            goto out;
        }
        if (!clock_known)
            ckpt__log(&ctx->log, CKPT_LOG_WARN, "gc", "the store gives no object times: only "
                      "checkpoints past --keep are collected");
    }
    /* victims: manifests past --keep, at once; unknown ones (a crash
     * between manifest and HEAD, or a commit in progress) only when old */
    for (size_t i = 0; i < mans.n; i++) {
        const char *rel = mans.keys[i] + strlen(ctx->run) + 1;
        int kept = 0, dropped = -1;
        char age[32];
        int damaged = -1;
        for (size_t k = 0; k < h.n; k++)
            if (!strcmp(h.entries[k].manifest, rel)) {
                if (k < keepn)
                    kept = 1;
                else
                    dropped = (int)k;
            }
        for (size_t k = 0; k < h.ndamaged; k++)
            if (!strcmp(h.damaged[k].manifest, rel)) {
                if (dkeep[k])
                    kept = 1;
                else
                    damaged = (int)k;
            }
        if (kept)
            continue;
        age_text(now - mans.mtime[i], age, sizeof age);
        if (damaged >= 0) {
            char since[32];
            age_text(ckpt__now_ms() - h.damaged[damaged].marked_ms, since, sizeof since);
            if (victim_add(&vs, mans.keys[i], mans.size[i], "damaged checkpoint step %" PRIu64
                           ", marked %s ago", h.damaged[damaged].step, since))
                st = CKPT_E_NOMEM;
        } else if (dropped >= 0) {
            if (victim_add(&vs, mans.keys[i], mans.size[i], "checkpoint step %" PRIu64 ": "
                           "past --keep %u", h.entries[dropped].step, keep))
                st = CKPT_E_NOMEM;
        } else if (clock_known && mans.mtime[i] > 0 &&
                   mans.mtime[i] <= now - (int64_t)min_age_ms) {
            if (victim_add(&vs, mans.keys[i], mans.size[i], "manifest never committed (no HEAD "
                           "entry), %s old", age))
                st = CKPT_E_NOMEM;
        }
        if (st)
            goto out;
    }
    /* chunks and packs no kept checkpoint uses, old enough not to be a
     * save in flight (a slower one is refused at commit: see above) */
    for (int kind = 0; kind < 2; kind++)
        for (size_t i = 0; i < objs[kind].n; i++) {
            uint8_t id[CKPT_ID_LEN];
            char age[32];
            if (ckpt__key_id(objs[kind].keys[i], id))
                continue; /* not ours: leave it */
            if (ckpt__objset_has(&live, id, kind))
                continue;
            if (!clock_known || objs[kind].mtime[i] <= 0 ||
                objs[kind].mtime[i] > now - (int64_t)min_age_ms)
                continue;
            age_text(now - objs[kind].mtime[i], age, sizeof age);
            if (victim_add(&vs, objs[kind].keys[i], objs[kind].size[i], "%s no kept "
                           "checkpoint uses, %s old", kind == CKPT_OBJ_PACK ? "pack" : "chunk",
                           age)) {
                st = CKPT_E_NOMEM;
                goto out;
            }
            if (ckpt__objset_add(&gv.objs, id, kind)) {
                st = CKPT_E_NOMEM;
                goto out;
            }
        }
    /* records of earlier gcs: void ones (and strays HEAD does not name) */
    for (size_t i = 0; i < gcs.n; i++) {
        const char *rel = gcs.keys[i] + strlen(ctx->run) + 1;
        int named = 0;
        if (!strcmp(gcs.keys[i], reckey))
            continue;
        for (size_t k = 0; k < h.ngc; k++)
            named |= !strcmp(h.gc[k].record, rel) &&
                     ckpt__now_ms() - h.gc[k].time_ms <= CKPT_GC_RECORD_TTL_MS;
        if (!named && clock_known && gcs.mtime[i] > 0 &&
            gcs.mtime[i] <= now - CKPT_GC_DELETE_MS &&
            victim_add(&vs, gcs.keys[i], gcs.size[i], "record of an earlier gc")) {
            st = CKPT_E_NOMEM;
            goto out;
        }
    }
    /* manifests go into the record too: a commit in progress whose manifest
     * is among them must not commit */
    for (size_t i = 0; i < vs.n; i++) {
        const char *rel = vs.v[i].key + strlen(ctx->run) + 1;
        if (strncmp(rel, "manifests/", 10))
            continue;
        if (ckpt__gc_victims_add_manifest(&gv, rel)) {
            st = CKPT_E_NOMEM;
            goto out;
        }
    }
    if (fn)
        for (size_t i = 0; i < vs.n; i++)
            fn(user, vs.v[i].key, vs.v[i].size, vs.v[i].why);
    if (dry) {
        *ndel = vs.n;
        goto out;
    }
    {
        int void_refs = 0, expired = 0;
        for (size_t k = 0; k < h.ngc; k++)
            void_refs |= ckpt__now_ms() - h.gc[k].time_ms > CKPT_GC_RECORD_TTL_MS;
        for (size_t k = 0; k < h.ndamaged; k++)
            expired |= !dkeep[k];
        if (vs.n == 0 && keepn == h.n && !void_refs && !expired)
            goto out; /* nothing to do: HEAD stays as it is */
    }
    /* publish: the record, then HEAD naming it (and dropping past --keep).
     * A store without conditional writes (s3rver; CKPT_S3_CONDITIONAL=0)
     * cannot make commits and gc exclude each other: a HEAD written back
     * there could undo a commit, so gc names no record, writes HEAD only to
     * drop checkpoints, and spares saves in flight by --min-age alone. */
    if (!ctx->store->ops->has_conditional(ctx->store)) {
        ckpt__log(&ctx->log, CKPT_LOG_WARN, "gc", "store %s has no conditional writes: gc "
                  "cannot fence saves in flight and relies on --min-age; run it while no "
                  "save runs", ctx->store_url);
        if (keepn == h.n && h.ngc == 0) {
            cond_less = 1; /* HEAD stays: straight to the deletions */
            goto delete;
        }
    }
    {
        char *buf = NULL;
        size_t len;
        struct ckpt_put_opts po = { CKPT_PUT_PLAIN, NULL, 0 };
        struct ckpt_head nh = h;
        struct ckpt_gc_ref *refs = calloc(h.ngc + 1, sizeof *refs);
        struct ckpt_head_entry *dam = calloc(h.ndamaged ? h.ndamaged : 1, sizeof *dam);
        size_t nr = 0;
        if (!refs || !dam) {
            free(refs);
            free(dam);
            st = CKPT_E_NOMEM;
            goto out;
        }
        cond_less = !ctx->store->ops->has_conditional(ctx->store);
        st = cond_less ? CKPT_OK : ckpt__gc_record_encode(&gv, now, &buf, &len);
        if (!st && !cond_less)
            st = ctx->store->ops->put(ctx->store, reckey, buf, len, &po, NULL, err);
        free(buf);
        buf = NULL;
        if (st) {
            free(refs);
            free(dam);
            ckpt__set_ctx_err(ctx, "gc: writing %s: %s", reckey, err);
            goto out;
        }
        for (size_t k = 0; k < h.ngc; k++)
            if (ckpt__now_ms() - h.gc[k].time_ms <= CKPT_GC_RECORD_TTL_MS &&
                nr < CKPT_GC_MAX_REFS - 1)
                refs[nr++] = h.gc[k];
        if (!cond_less) {
            refs[nr].record = rec;
            refs[nr++].time_ms = ckpt__now_ms();
        }
        nh.n = keepn;
        nh.gc = refs;
        nh.ngc = nr;
        nh.rev = h.rev + 1;
        nh.damaged = dam;
        nh.ndamaged = 0;
        for (size_t k = 0; dam && k < h.ndamaged; k++)
            if (dkeep[k])
                dam[nh.ndamaged++] = h.damaged[k];
        st = ckpt__put_head(ctx, &nh, exists ? etag : NULL, NULL, err);
        free(refs);
        free(dam);
        if (st) {
            if (st != CKPT_E_PRECONDITION)
                ckpt__set_ctx_err(ctx, "gc: writing HEAD: %s", err);
            else
                ckpt__set_ctx_err(ctx, "gc: HEAD changed (a save committed): starting over");
            goto out;
        }
        published = !cond_less;
    }
delete:
    keys = malloc((vs.n ? vs.n : 1) * sizeof *keys);
    if (!keys) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < vs.n; i++)
        keys[i] = vs.v[i].key;
    /* past its record's promise the rest waits for the next gc */
    st = ckpt__delete_keys(ctx, "gc", keys, vs.n,
                           t0_ns + (uint64_t)CKPT_GC_DELETE_MS * 1000000ull, ndel, err);
    if (st)
        ckpt__set_ctx_err(ctx, "gc: delete: %s", err);
    if (st == CKPT_OK)
        ckpt__log(&ctx->log, CKPT_LOG_INFO, "gc", "kept %zu checkpoints, deleted %" PRIu64
                  " objects", keepn, *ndel);
out:
    if (published) {
        /* the record stays in HEAD if this fails: void after its TTL */
        if (gc_unpublish(ctx, rec, ckpt__now_ms()) == CKPT_OK) {
            const char *dk[1] = { reckey };
            ctx->store->ops->del(ctx->store, dk, 1, NULL);
        }
    } else if (reckey[0]) {
        const char *dk[1] = { reckey };
        ctx->store->ops->del(ctx->store, dk, 1, NULL);
    }
    ckpt__idlists_free(ids, h.n);
    ckpt__idlists_free(dids, h.ndamaged);
    free(ok);
    free(dkeep);
    free(vs.v);
    free(keys);
    objlist_free(&objs[0]);
    objlist_free(&objs[1]);
    objlist_free(&mans);
    objlist_free(&gcs);
    ckpt__idset_free(&live);
    ckpt__idset_free(&present[0]);
    ckpt__idset_free(&present[1]);
    ckpt__gc_victims_free(&gv);
    ckpt__head_free(&h);
    return st;
}

/* A save that commits while gc works (a live run) changes HEAD under it:
 * gc's conditional HEAD write is refused before anything is deleted, and
 * gc starts over from the new HEAD, a few times. */
ckpt_status ckpt_gc_ex(struct ckpt_ctx *ctx, unsigned keep, uint64_t min_age_ms, unsigned flags,
                       ckpt_gc_fn fn, void *user, uint64_t *deleted)
{
    ckpt_status st = CKPT_E_PRECONDITION;
    uint64_t n = 0;
    if (!ctx || keep == 0)
        return CKPT_E_INVAL;
    ckpt__flight_wait(&ctx->flight);
    for (int attempt = 0; attempt < 5 && st == CKPT_E_PRECONDITION; attempt++) {
        if (attempt)
            usleep(100000u << attempt);
        n = 0;
        st = gc_once(ctx, keep, min_age_ms, flags, fn, user, &n);
    }
    if (deleted)
        *deleted = n;
    if (st == CKPT_OK && !(flags & CKPT_GC_DRY_RUN))
        ckpt__load_run(ctx, true); /* the in-process index is stale now */
    return st;
}

ckpt_status ckpt_gc(struct ckpt_ctx *ctx, unsigned keep, uint64_t min_age_ms, uint64_t *deleted)
{
    return ckpt_gc_ex(ctx, keep, min_age_ms, 0, NULL, NULL, deleted);
}

