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

#include "core/ctx.h"
#include "commit/retention.h"
#include "run/runload.h"
#include "run/runobj.h"

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

/* One pass of gc: what it read of the run and what it decided. */
struct gc {
    struct ckpt_ctx *ctx;
    unsigned keep;
    uint64_t min_age_ms;
    uint64_t t0_ns;
    struct ckpt_head h;
    char etag[CKPT_ETAG_MAX];
    bool exists;
    struct ckpt_idlist *ids;     /* objects of h.entries[i] */
    int *ok;                     /* h.entries[i] is restorable */
    struct ckpt_idlist *dids;    /* objects of h.damaged[i], where kept */
    int *dkeep;                  /* h.damaged[i] stays (marked under --min-age ago) */
    size_t keepn;                /* h.entries[0, keepn) stay */
    struct objlist objs[2];      /* the run's chunks and packs (by CKPT_OBJ_*) */
    struct objlist mans, gcs;    /* its manifests and gc records */
    struct ckpt_idset live;      /* objects the kept checkpoints use */
    int64_t now;                 /* the store's clock, when clock_known */
    int clock_known;
    char rec[64], reckey[1024];  /* this gc's record: relative and full key */
    struct victims vs;
    struct ckpt_gc_victims gv;   /* what the record says */
};

/* HEAD, and what every retained checkpoint uses: every retained manifest
 * must be read (store trouble stops gc: it never guesses what a kept
 * checkpoint uses); the damaged ones kept for inspection too. */
static ckpt_status read_kept(struct gc *g)
{
    struct ckpt_ctx *ctx = g->ctx;
    struct ckpt_head *h = &g->h;
    ckpt_status st = ckpt__read_head(ctx, h, g->etag, &g->exists);
    if (st == CKPT_E_CORRUPT) {
        /* gc never guesses what a kept checkpoint uses: not from the
         * manifests either (headscan.h: the gc records in force are lost) */
        char why[CKPT_ERR_MAX];
        snprintf(why, sizeof why, "%s", ckpt__errmsg(ctx));
        ckpt__set_ctx_err(ctx, "%s: gc deletes nothing until HEAD is rewritten (the next save, "
                          "or ckptrun run/recover taking the lease, rewrites it from the "
                          "run's manifests)", why);
    }
    if (st)
        return st;
    g->ids = calloc(h->n ? h->n : 1, sizeof *g->ids);
    g->ok = calloc(h->n ? h->n : 1, sizeof *g->ok);
    g->dkeep = calloc(h->ndamaged ? h->ndamaged : 1, sizeof *g->dkeep);
    g->dids = calloc(h->ndamaged ? h->ndamaged : 1, sizeof *g->dids);
    if (!g->ids || !g->ok || !g->dkeep || !g->dids)
        return CKPT_E_NOMEM;
    for (size_t i = 0; i < h->n; i++) {
        struct ckpt_manifest m;
        st = ckpt__read_manifest(ctx, h->entries[i].manifest, &m);
        if (st == CKPT_E_NOENT || st == CKPT_E_CORRUPT) {
            /* cannot be restored: what it used is unknowable and useless */
            ckpt__log(&ctx->log, CKPT_LOG_WARN, "gc", "step %" PRIu64 ": %s",
                      h->entries[i].step, ckpt__errmsg(ctx));
            continue;
        }
        if (st == CKPT_E_UNSUPPORTED) {
            ckpt__set_ctx_err(ctx, "gc: checkpoint step %" PRIu64 " was written by a newer "
                              "ckpt (%s): upgrade to collect this run", h->entries[i].step,
                              ckpt__errmsg(ctx));
            return st;
        }
        if (st)
            return st;
        if (ckpt__manifest_objects(&m, &g->ids[i]) != 0)
            st = CKPT_E_NOMEM;
        g->ok[i] = 1;
        ckpt__manifest_free(&m);
        if (st)
            return st;
    }
    /* damaged checkpoints (a restore fell back past them): their objects
     * stay for inspection until --min-age after the marking */
    for (size_t i = 0; i < h->ndamaged; i++) {
        struct ckpt_manifest m;
        g->dkeep[i] = ckpt__now_ms() - h->damaged[i].marked_ms < (int64_t)g->min_age_ms;
        if (!g->dkeep[i])
            continue;
        st = ckpt__read_manifest(ctx, h->damaged[i].manifest, &m);
        if (st == CKPT_E_NOENT || st == CKPT_E_CORRUPT || st == CKPT_E_UNSUPPORTED)
            continue; /* nothing readable to keep */
        if (st)
            return st;
        if (ckpt__manifest_objects(&m, &g->dids[i]) != 0)
            st = CKPT_E_NOMEM;
        ckpt__manifest_free(&m);
        if (st)
            return st;
    }
    return CKPT_OK;
}

static ckpt_status list_run(struct gc *g)
{
    ckpt_status st;
    if ((st = list_into(g->ctx, "chunks", &g->objs[CKPT_OBJ_CHUNK])) ||
        (st = list_into(g->ctx, "packs", &g->objs[CKPT_OBJ_PACK])) ||
        (st = list_into(g->ctx, "manifests", &g->mans)) ||
        (st = list_into(g->ctx, "gc", &g->gcs)))
        return st;
    return CKPT_OK;
}

/* Keep the newest `keep`, plus the newest restorable one if none of those
 * is. A retained checkpoint counts as restorable when its manifest reads
 * and every object it names is present with the recorded size (full byte
 * verification is `ckptrun verify`). Then the live set. */
static ckpt_status choose_kept(struct gc *g)
{
    struct ckpt_head *h = &g->h;
    struct ckpt_idset present[2]; /* id -> size, by CKPT_OBJ_* */
    size_t newest_ok = h->n;
    ckpt_status st = CKPT_OK;

    ckpt__idset_init(&present[0]);
    ckpt__idset_init(&present[1]);
    for (int kind = 0; kind < 2 && !st; kind++)
        for (size_t i = 0; i < g->objs[kind].n && !st; i++) {
            uint8_t id[CKPT_ID_LEN];
            if (!ckpt__key_id(g->objs[kind].keys[i], id) &&
                ckpt__idset_put(&present[kind], id, g->objs[kind].size[i]))
                st = CKPT_E_NOMEM;
        }
    for (size_t i = 0; i < h->n && !st; i++)
        for (size_t k = 0; g->ok[i] && k < g->ids[i].n; k++) {
            uint64_t sz;
            if (!ckpt__idset_get(&present[g->ids[i].kind[k]], g->ids[i].ids[k], &sz) ||
                sz != g->ids[i].size[k])
                g->ok[i] = 0;
        }
    ckpt__idset_free(&present[0]);
    ckpt__idset_free(&present[1]);
    if (st)
        return st;
    g->keepn = h->n < g->keep ? h->n : g->keep;
    for (size_t i = 0; i < h->n && newest_ok == h->n; i++)
        if (g->ok[i])
            newest_ok = i;
    if (newest_ok >= g->keepn && newest_ok < h->n) {
        size_t kn = g->keepn, moved = newest_ok - kn;
        struct ckpt_head_entry e = h->entries[newest_ok];
        struct ckpt_idlist l = g->ids[newest_ok];
        int o = g->ok[newest_ok];
        ckpt__log(&g->ctx->log, CKPT_LOG_WARN, "gc",
                  "the newest %zu checkpoints are damaged: also keeping step %" PRIu64, kn,
                  h->entries[newest_ok].step);
        memmove(&h->entries[kn + 1], &h->entries[kn], moved * sizeof *h->entries);
        memmove(&g->ids[kn + 1], &g->ids[kn], moved * sizeof *g->ids);
        memmove(&g->ok[kn + 1], &g->ok[kn], moved * sizeof *g->ok);
        h->entries[kn] = e;
        g->ids[kn] = l;
        g->ok[kn] = o;
        g->keepn++;
    }
    if (ckpt__live_add(&g->live, g->ids, g->keepn) ||
        ckpt__live_add(&g->live, g->dids, h->ndamaged))
        return CKPT_E_NOMEM; /* an incomplete live set must delete nothing */
    return CKPT_OK;
}

/* The store's "now": the time it gives an object we write now, this gc's
 * record (written again, full, when it is published). */
static ckpt_status store_clock(struct gc *g)
{
    struct ckpt_ctx *ctx = g->ctx;
    struct ckpt_put_opts po = { CKPT_PUT_PLAIN, NULL, 0 };
    struct objlist probe = { 0 };
    char err[CKPT_ERR_MAX] = "", *buf = NULL;
    uint8_t nonce[CKPT_ID_LEN];
    size_t len;
    ckpt_status st;

    if (getrandom(nonce, sizeof nonce, 0) != (ssize_t)sizeof nonce) {
        ckpt__set_ctx_err(ctx, "gc: getrandom: %s", strerror(errno));
        return CKPT_E_IO;
    }
    memcpy(g->rec, "gc/", 3);
    ckpt__hex(nonce, sizeof nonce, g->rec + 3);
    ckpt__run_key(ctx, g->rec, g->reckey, sizeof g->reckey);
    st = ckpt__gc_record_encode(&g->gv, ckpt__now_ms(), &buf, &len);
    if (!st)
        st = ctx->store->ops->put(ctx->store, g->reckey, buf, len, &po, NULL, err);
    free(buf);
    if (st) {
        ckpt__set_ctx_err(ctx, "gc: writing %s: %s", g->reckey, err);
        return st;
    }
    st = ctx->store->ops->list(ctx->store, g->reckey, collect, &probe, err);
    for (size_t i = 0; st == CKPT_OK && i < probe.n; i++)
        if (!strcmp(probe.keys[i], g->reckey) && probe.mtime[i] > 0) {
            g->now = probe.mtime[i];
            g->clock_known = 1;
        }
    objlist_free(&probe);
    if (st) {
        ckpt__set_ctx_err(ctx, "gc: listing %s: %s", g->reckey, err);
        return st;
    }
    if (!g->clock_known)
        ckpt__log(&ctx->log, CKPT_LOG_WARN, "gc", "the store gives no object times: only "
                  "checkpoints past --keep are collected");
    return CKPT_OK;
}

static int has_key(const struct ckpt_idlist *l, const char *rel)
{
    for (size_t i = 0; i < l->nkeys; i++)
        if (!strcmp(l->keys[i], rel))
            return 1;
    return 0;
}

/* Victims: manifests past --keep, at once; unknown ones (a crash between
 * manifest and HEAD, or a commit in progress) only when old. */
static ckpt_status manifest_victims(struct gc *g)
{
    const struct ckpt_head *h = &g->h;
    const struct objlist *mans = &g->mans;
    for (size_t i = 0; i < mans->n; i++) {
        const char *rel = mans->keys[i] + strlen(g->ctx->run) + 1;
        int kept = 0, dropped = -1, damaged = -1, nomem = 0;
        char age[32];
        for (size_t k = 0; k < h->n; k++)
            if (!strcmp(h->entries[k].manifest, rel) || has_key(&g->ids[k], rel)) {
                /* a global checkpoint's parts go with its commit record */
                if (k < g->keepn)
                    kept = 1;
                else
                    dropped = (int)k;
            }
        for (size_t k = 0; k < h->ndamaged; k++)
            if (!strcmp(h->damaged[k].manifest, rel) || (g->dkeep[k] && has_key(&g->dids[k], rel))) {
                if (g->dkeep[k])
                    kept = 1;
                else
                    damaged = (int)k;
            }
        if (kept)
            continue;
        age_text(g->now - mans->mtime[i], age, sizeof age);
        if (damaged >= 0) {
            char since[32];
            age_text(ckpt__now_ms() - h->damaged[damaged].marked_ms, since, sizeof since);
            nomem = victim_add(&g->vs, mans->keys[i], mans->size[i], "damaged checkpoint "
                               "step %" PRIu64 ", marked %s ago", h->damaged[damaged].step,
                               since);
        } else if (dropped >= 0) {
            nomem = victim_add(&g->vs, mans->keys[i], mans->size[i], "checkpoint step %"
                               PRIu64 ": past --keep %u", h->entries[dropped].step, g->keep);
        } else if (g->clock_known && mans->mtime[i] > 0 &&
                   mans->mtime[i] <= g->now - (int64_t)g->min_age_ms) {
            nomem = victim_add(&g->vs, mans->keys[i], mans->size[i], "manifest never "
                               "committed (no HEAD entry), %s old", age);
        }
        if (nomem)
            return CKPT_E_NOMEM;
    }
    return CKPT_OK;
}

/* Chunks and packs no kept checkpoint uses, old enough not to be a save in
 * flight (a slower one is refused at commit: see above); records of earlier
 * gcs, void ones and strays HEAD does not name. Manifests go into the
 * record too: a commit in progress whose manifest is among them must not
 * commit. */
static ckpt_status find_victims(struct gc *g)
{
    const char *run = g->ctx->run;
    ckpt_status st = manifest_victims(g);
    if (st)
        return st;
    for (int kind = 0; kind < 2; kind++)
        for (size_t i = 0; i < g->objs[kind].n; i++) {
            const struct objlist *l = &g->objs[kind];
            uint8_t id[CKPT_ID_LEN];
            char age[32];
            if (ckpt__key_id(l->keys[i], id))
                continue; /* not ours: leave it */
            if (ckpt__objset_has(&g->live, id, kind))
                continue;
            if (!g->clock_known || l->mtime[i] <= 0 ||
                l->mtime[i] > g->now - (int64_t)g->min_age_ms)
                continue;
            age_text(g->now - l->mtime[i], age, sizeof age);
            if (victim_add(&g->vs, l->keys[i], l->size[i], "%s no kept checkpoint uses, %s "
                           "old", kind == CKPT_OBJ_PACK ? "pack" : "chunk", age) ||
                ckpt__objset_add(&g->gv.objs, id, kind))
                return CKPT_E_NOMEM;
        }
    for (size_t i = 0; i < g->gcs.n; i++) {
        const char *rel = g->gcs.keys[i] + strlen(run) + 1;
        int named = 0;
        if (!strcmp(g->gcs.keys[i], g->reckey))
            continue;
        for (size_t k = 0; k < g->h.ngc; k++)
            named |= !strcmp(g->h.gc[k].record, rel) &&
                     ckpt__now_ms() - g->h.gc[k].time_ms <= CKPT_GC_RECORD_TTL_MS;
        if (!named && g->clock_known && g->gcs.mtime[i] > 0 &&
            g->gcs.mtime[i] <= g->now - CKPT_GC_DELETE_MS &&
            victim_add(&g->vs, g->gcs.keys[i], g->gcs.size[i], "record of an earlier gc"))
            return CKPT_E_NOMEM;
    }
    for (size_t i = 0; i < g->vs.n; i++) {
        const char *rel = g->vs.v[i].key + strlen(run) + 1;
        if (!strncmp(rel, "manifests/", 10) && ckpt__gc_victims_add_manifest(&g->gv, rel))
            return CKPT_E_NOMEM;
    }
    return CKPT_OK;
}

/* Nothing to delete, nothing to drop: HEAD stays as it is. */
static int nothing_to_do(const struct gc *g)
{
    int void_refs = 0, expired = 0;
    for (size_t k = 0; k < g->h.ngc; k++)
        void_refs |= ckpt__now_ms() - g->h.gc[k].time_ms > CKPT_GC_RECORD_TTL_MS;
    for (size_t k = 0; k < g->h.ndamaged; k++)
        expired |= !g->dkeep[k];
    return g->vs.n == 0 && g->keepn == g->h.n && !void_refs && !expired;
}

/* Publish: the record, then HEAD naming it (and dropping past --keep).
 * A store without conditional writes (s3rver; CKPT_S3_CONDITIONAL=0)
 * cannot make commits and gc exclude each other: a HEAD written back
 * there could undo a commit, so gc names no record, writes HEAD only to
 * drop checkpoints, and spares saves in flight by --min-age alone.
 * *published: HEAD names the record now. */
static ckpt_status publish(struct gc *g, bool *published)
{
    struct ckpt_ctx *ctx = g->ctx;
    const struct ckpt_head *h = &g->h;
    int cond = ckpt_store_can(ctx->store, CKPT_STORE_CONDITIONAL);
    struct ckpt_put_opts po = { CKPT_PUT_PLAIN, NULL, 0 };
    struct ckpt_head nh = *h;
    struct ckpt_gc_ref *refs;
    struct ckpt_head_entry *dam;
    char err[CKPT_ERR_MAX] = "", *buf = NULL;
    size_t len, nr = 0;
    ckpt_status st = CKPT_OK;

    if (!cond) {
        ckpt__log(&ctx->log, CKPT_LOG_WARN, "gc", "store %s has no conditional writes: gc "
                  "cannot fence saves in flight and relies on --min-age; run it while no "
                  "save runs", ctx->store_url);
        if (g->keepn == h->n && h->ngc == 0)
            return CKPT_OK; /* HEAD stays: straight to the deletions */
    }
    refs = calloc(h->ngc + 1, sizeof *refs);
    dam = calloc(h->ndamaged ? h->ndamaged : 1, sizeof *dam);
    if (!refs || !dam) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    if (cond) {
        st = ckpt__gc_record_encode(&g->gv, g->now, &buf, &len);
        if (!st)
            st = ctx->store->ops->put(ctx->store, g->reckey, buf, len, &po, NULL, err);
        free(buf);
        if (st) {
            ckpt__set_ctx_err(ctx, "gc: writing %s: %s", g->reckey, err);
            goto out;
        }
    }
    for (size_t k = 0; k < h->ngc; k++)
        if (ckpt__now_ms() - h->gc[k].time_ms <= CKPT_GC_RECORD_TTL_MS && nr < CKPT_GC_MAX_REFS - 1)
            refs[nr++] = h->gc[k];
    if (cond) {
        refs[nr].record = g->rec;
        refs[nr++].time_ms = ckpt__now_ms();
    }
    nh.n = g->keepn;
    nh.gc = refs;
    nh.ngc = nr;
    nh.rev = h->rev + 1;
    nh.damaged = dam;
    nh.ndamaged = 0;
    for (size_t k = 0; k < h->ndamaged; k++)
        if (g->dkeep[k])
            dam[nh.ndamaged++] = h->damaged[k];
    st = ckpt__put_head(ctx, &nh, g->exists ? g->etag : NULL, NULL, err);
    if (st == CKPT_E_PRECONDITION)
        ckpt__set_ctx_err(ctx, "gc: HEAD changed (a save committed): starting over");
    else if (st)
        ckpt__set_ctx_err(ctx, "gc: writing HEAD: %s", err);
    else
        *published = cond;
out:
    free(refs);
    free(dam);
    return st;
}

static ckpt_status delete_victims(struct gc *g, uint64_t *ndel)
{
    char err[CKPT_ERR_MAX] = "";
    const char **keys = malloc((g->vs.n ? g->vs.n : 1) * sizeof *keys);
    ckpt_status st;
    if (!keys)
        return CKPT_E_NOMEM;
    for (size_t i = 0; i < g->vs.n; i++)
        keys[i] = g->vs.v[i].key;
    /* past its record's promise the rest waits for the next gc */
    st = ckpt__delete_keys(g->ctx, "gc", keys, g->vs.n,
                           g->t0_ns + (uint64_t)CKPT_GC_DELETE_MS * 1000000ull, ndel, err);
    free(keys);
    if (st)
        ckpt__set_ctx_err(g->ctx, "gc: delete: %s", err);
    else
        ckpt__log(&g->ctx->log, CKPT_LOG_INFO, "gc", "kept %zu checkpoints, deleted %" PRIu64
                  " objects", g->keepn, *ndel);
    return st;
}

static void gc_free(struct gc *g)
{
    ckpt__idlists_free(g->ids, g->h.n);
    ckpt__idlists_free(g->dids, g->h.ndamaged);
    free(g->ok);
    free(g->dkeep);
    free(g->vs.v);
    objlist_free(&g->objs[0]);
    objlist_free(&g->objs[1]);
    objlist_free(&g->mans);
    objlist_free(&g->gcs);
    ckpt__idset_free(&g->live);
    ckpt__gc_victims_free(&g->gv);
    ckpt__head_free(&g->h);
}

static ckpt_status gc_once(struct ckpt_ctx *ctx, unsigned keep, uint64_t min_age_ms,
                           unsigned flags, ckpt_gc_fn fn, void *user, uint64_t *ndel)
{
    struct gc g;
    bool published = false;
    ckpt_status st;

    memset(&g, 0, sizeof g);
    g.ctx = ctx;
    g.keep = keep;
    g.min_age_ms = min_age_ms;
    g.t0_ns = ckpt__mono_ns();
    ckpt__idset_init(&g.live);
    if ((st = read_kept(&g)) || (st = list_run(&g)) || (st = choose_kept(&g)) ||
        (st = store_clock(&g)) || (st = find_victims(&g)))
        goto out;
    if (fn)
        for (size_t i = 0; i < g.vs.n; i++)
            fn(user, g.vs.v[i].key, g.vs.v[i].size, g.vs.v[i].why);
    if (flags & CKPT_GC_DRY_RUN) {
        *ndel = g.vs.n;
        goto out;
    }
    if (nothing_to_do(&g))
        goto out;
    st = publish(&g, &published);
    if (!st)
        st = delete_victims(&g, ndel);
out:
    if (published) {
        /* the record stays in HEAD if this fails: void after its TTL */
        if (gc_unpublish(ctx, g.rec, ckpt__now_ms()) == CKPT_OK) {
            const char *dk[1] = { g.reckey };
            ctx->store->ops->del(ctx->store, dk, 1, NULL);
        }
    } else if (g.reckey[0]) {
        const char *dk[1] = { g.reckey };
        ctx->store->ops->del(ctx->store, dk, 1, NULL);
    }
    gc_free(&g);
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

