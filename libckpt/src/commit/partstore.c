/* partstore.c -- parts in the store: a rank's part manifest written by its
 * save (partstore.h), the parts not committed yet (ckpt_pending), and
 * the commit of a global step from its parts (ckpt_commit_parts). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "commit/commit.h"
#include "core/ctx.h"
#include "control/events.h"
#include "run/globalckpt.h"
#include "run/headscan.h"
#include "commit/partstore.h"
#include "run/runobj.h"
#include "core/save.h"

static int cmp_item_idx(const void *a, const void *b, void *arg)
{
    const struct ckpt_manifest *m = arg;
    return strcmp(m->items[*(const size_t *)a].name, m->items[*(const size_t *)b].name);
}

/* The replicated items of m: digest over all their chunks, then keep only
 * the chunks this rank stored (sv->lo..hi); their agreement values, in name
 * order, go to the context (ranks.h). */
static ckpt_status replicated_share(struct ckpt_ctx *ctx, struct ckpt_save *sv)
{
    struct ckpt_manifest *m = &sv->m;
    struct ckpt_ranks *r = &ctx->ranks;
    size_t n = 0, *order;
    uint64_t *digs;
    char **names;

    for (size_t i = 0; i < m->nitems; i++)
        n += m->items[i].replicated != 0;
    order = calloc(n + 1, sizeof *order);
    digs = calloc(n + 1, sizeof *digs);
    names = calloc(n + 1, sizeof *names);
    if (!order || !digs || !names) {
        free(order);
        free(digs);
        free(names);
        return CKPT_E_NOMEM;
    }
    n = 0;
    for (size_t i = 0; i < m->nitems; i++) {
        struct ckpt_mitem *it = &m->items[i];
        if (!it->replicated)
            continue;
        order[n++] = i;
        it->digest = ckpt__replicated_digest(it->size, it->chunks, it->nchunks);
        if (sv->hi[i] > sv->lo[i])
            memmove(it->chunks, it->chunks + sv->lo[i],
                    (sv->hi[i] - sv->lo[i]) * sizeof *it->chunks);
        it->nchunks = sv->hi[i] - sv->lo[i];
        it->first = sv->lo[i];
    }
    qsort_r(order, n, sizeof *order, cmp_item_idx, m);
    for (size_t k = 0; k < n; k++) {
        const struct ckpt_mitem *it = &m->items[order[k]];
        /* the name counts too: items of the same bytes under other names differ */
        digs[k] = XXH3_64bits_withSeed(it->name, strlen(it->name), it->digest);
        names[k] = ckpt__strdup(it->name);
    }
    free(order);
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->ndig; i++)
        free(r->dig_names[i]);
    free(r->dig_names);
    free(r->digs);
    r->ndig = n;
    r->digs = digs;
    r->dig_names = names;
    for (size_t k = 0; k < n; k++)
        if (!names[k] && !(names[k] = ckpt__strdup("?")))
            r->ndig = k; /* the names only label messages */
    pthread_mutex_unlock(&r->mu);
    return CKPT_OK;
}

void ckpt__part_commit(struct ckpt_ctx *ctx, struct ckpt_save *sv)
{
    struct ckpt_manifest *m = &sv->m;
    struct ckpt_put_opts po = { CKPT_PUT_IF_NONE_MATCH, NULL, 0 };
    char err[CKPT_ERR_MAX] = "", key[1024] = "", writer[300], host[256] = "?", *buf = NULL;
    size_t len;
    ckpt_status st = sv->st;

    if (st) {
        snprintf(err, sizeof err, "%s", sv->err);
        goto out;
    }
    st = ctx->store->ops->barrier(ctx->store, err); /* the part's objects are durable */
    if (!st && (st = replicated_share(ctx, sv)) != CKPT_OK)
        snprintf(err, sizeof err, "out of memory");
    if (st)
        goto out;
    gethostname(host, sizeof host - 1);
    snprintf(writer, sizeof writer, "%s:%d", host, (int)getpid());
    free(m->writer);
    m->writer = ckpt__strdup(writer);
    m->seq = 0; /* a part has no place among commits: its commit record has */
    /* ckpt_commit_parts takes a rank's newest part: a part saved again
     * within the same millisecond must still be the newer */
    m->time_ms = ckpt__now_ms();
    if (m->time_ms <= ctx->ranks.last_part_ms)
        m->time_ms = ctx->ranks.last_part_ms + 1;
    ctx->ranks.last_part_ms = m->time_ms;
    m->new_bytes = sv->new_bytes;
    st = m->writer ? ckpt__manifest_encode(m, &buf, &len) : CKPT_E_NOMEM;
    if (st) {
        snprintf(err, sizeof err, "out of memory");
        goto out;
    }
    ckpt__part_key(ctx->run, m->step, m->epoch, m->nonce, m->rank, key, sizeof key);
    st = ctx->store->ops->put(ctx->store, key, buf, len, &po, NULL, err);
    free(buf);
    if (st == CKPT_E_PRECONDITION)
        snprintf(err, sizeof err, "part manifest %.400s already exists: two processes "
                 "saved as rank %u", key, m->rank);
out:
    if (st) {
        ckpt__set_ctx_err(ctx, "save of step %" PRIu64 " (the part of rank %u) failed: %s",
                          sv->step, ctx->rank, err);
        ckpt__log(&ctx->log, CKPT_LOG_WARN, "save", "%s", ckpt__errmsg(ctx));
    } else {
        ckpt__log(&ctx->log, CKPT_LOG_DEBUG, "save", "step %" PRIu64 ": part of rank %u "
                  "durable (%s)", sv->step, ctx->rank, key);
    }
    ckpt__progress_sent_end(&ctx->progress, ctx->store);
    ckpt__flight_end(&ctx->flight, st);
    ckpt__save_free(sv);
}

/* ---- parts in the store -------------------------------------------------- */

struct part_ref {
    char *rel;
    uint64_t step, epoch;
    uint32_t nonce;
    unsigned rank;
};

struct part_list {
    struct ckpt_ctx *ctx;
    struct part_ref *v;
    size_t n, cap;
    int nomem;
    uint64_t above;        /* only steps above this (with has_above) */
    bool has_above;
    bool one_step;         /* only `step` at `epoch` */
    uint64_t step, epoch;
};

static int collect_part(void *user, const struct ckpt_obj_info *o)
{
    struct part_list *l = user;
    const char *rel = o->key + strlen(l->ctx->run) + 1;
    struct part_ref p;
    if (ckpt__part_key_parse(rel, &p.step, &p.epoch, &p.nonce, &p.rank) != 0)
        return 0;
    if ((l->has_above && p.step <= l->above) ||
        (l->one_step && (p.step != l->step || p.epoch != l->epoch)))
        return 0;
    if (l->n == l->cap) {
        size_t nc = l->cap ? 2 * l->cap : 64;
        struct part_ref *nv = realloc(l->v, nc * sizeof *nv);
        if (!nv) {
            l->nomem = 1;
            return 1;
        }
        l->v = nv;
        l->cap = nc;
    }
    p.rel = ckpt__strdup(rel);
    if (!p.rel) {
        l->nomem = 1;
        return 1;
    }
    l->v[l->n++] = p;
    return 0;
}

static int cmp_part(const void *a, const void *b)
{
    const struct part_ref *x = a, *y = b;
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return strcmp(x->rel, y->rel);
}

static void part_list_free(struct part_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].rel);
    free(l->v);
}

static ckpt_status list_parts(struct ckpt_ctx *ctx, struct part_list *l)
{
    char prefix[1024], err[CKPT_ERR_MAX] = "";
    ckpt_status st;
    snprintf(prefix, sizeof prefix, "%s/manifests/", ctx->run);
    l->ctx = ctx;
    st = ctx->store->ops->list(ctx->store, prefix, collect_part, l, err);
    if (!st && l->nomem) {
        st = CKPT_E_NOMEM;
        snprintf(err, sizeof err, "out of memory");
    }
    if (st)
        ckpt__set_ctx_err(ctx, "listing %s: %s", prefix, err);
    else if (l->n > 1)
        qsort(l->v, l->n, sizeof *l->v, cmp_part);
    return st;
}

ckpt_status ckpt_pending(struct ckpt_ctx *ctx, ckpt_part_fn fn, void *user)
{
    struct part_list l = { 0 };
    struct ckpt_head h;
    bool exists;
    ckpt_status st;

    if (!ctx || !fn)
        return CKPT_E_INVAL;
    /* the newest committed step; a damaged HEAD: the newest its manifests
     * show (headscan.h) */
    {
        unsigned scanned;
        st = ckpt__read_head_or_scan(ctx, &h, NULL, &exists, &scanned, NULL);
    }
    if (st)
        return st;
    l.has_above = exists && h.n;
    l.above = l.has_above ? h.entries[0].step : 0;
    ckpt__head_free(&h);
    st = list_parts(ctx, &l);
    for (size_t i = 0; !st && i < l.n; i++) {
        struct ckpt_manifest m;
        struct ckpt_part_info pi = { 0 };
        char key[1024];
        uint64_t chunks, links;
        if (ckpt__read_manifest(ctx, l.v[i].rel, &m) != CKPT_OK) {
            ckpt__log(&ctx->log, CKPT_LOG_WARN, "pending", "%s (skipped)", ckpt__errmsg(ctx));
            continue;
        }
        ckpt__run_key(ctx, l.v[i].rel, key, sizeof key);
        pi.step = m.step;
        pi.epoch = m.epoch;
        pi.time_ms = m.time_ms;
        pi.rank = m.rank;
        pi.world_size = m.world_size;
        pi.items = m.nitems;
        pi.manifest = key;
        ckpt__manifest_sizes(&m, &pi.raw_bytes, &pi.stored_bytes, &chunks, &links);
        ckpt__manifest_free(&m);
        if (fn(user, &pi))
            break;
    }
    part_list_free(&l);
    return st;
}

ckpt_status ckpt_commit_parts(struct ckpt_ctx *ctx, uint64_t step, unsigned world_size)
{
    struct part_list l = { 0 };
    struct ckpt_manifest gm, *best = NULL;
    char **keys = NULL, err[CKPT_ERR_MAX] = "", mkey[1024] = "", missing[512] = "";
    size_t nmissing = 0;
    ckpt_status st;

    if (!ctx || world_size < 2)
        return CKPT_E_INVAL;
    memset(&gm, 0, sizeof gm);
    ckpt__flight_settle(&ctx->flight); /* this context's own part first */
    l.one_step = true;
    l.step = step;
    l.epoch = atomic_load(&ctx->epoch);
    st = list_parts(ctx, &l);
    best = calloc(world_size, sizeof *best);
    keys = calloc(world_size, sizeof *keys);
    if (!st && (!best || !keys))
        st = CKPT_E_NOMEM;
    /* each rank's newest durable part of the step */
    for (size_t i = 0; !st && i < l.n; i++) {
        struct ckpt_manifest m;
        unsigned r = l.v[i].rank;
        if (ckpt__read_manifest(ctx, l.v[i].rel, &m) != CKPT_OK) {
            ckpt__log(&ctx->log, CKPT_LOG_WARN, "commit", "%s (skipped)", ckpt__errmsg(ctx));
            continue;
        }
        if (m.world_size != world_size) {
            ckpt__set_ctx_err(ctx, "step %" PRIu64 ": part %s was written by a job of %u "
                              "ranks, not %u", step, l.v[i].rel, m.world_size, world_size);
            ckpt__manifest_free(&m);
            st = CKPT_E_WORLD;
            break;
        }
        if (r >= world_size || (keys[r] && best[r].time_ms > m.time_ms)) {
            ckpt__manifest_free(&m);
            continue;
        }
        ckpt__manifest_free(&best[r]);
        best[r] = m;
        keys[r] = l.v[i].rel;
    }
    for (unsigned r = 0; !st && r < world_size; r++)
        if (!keys[r]) {
            size_t used = strlen(missing);
            if (used + 16 < sizeof missing)
                snprintf(missing + used, sizeof missing - used, "%s%u", nmissing ? ", " : "",
                         r);
            nmissing++;
        }
    if (!st && nmissing) {
        ckpt__set_ctx_err(ctx, "step %" PRIu64 " not committed: %zu of %u parts missing "
                          "(epoch %" PRIu64 "; ranks %s)", step, nmissing, world_size, l.epoch,
                          missing);
        st = CKPT_E_NOENT;
    }
    if (!st) {
        st = ckpt__parts_compose(best, world_size, (const char *const *)keys, NULL, 0, &gm,
                                 err);
        if (st == CKPT_E_CORRUPT) {
            ckpt__set_ctx_err(ctx, "step %" PRIu64 " not committed: %s", step, err);
            st = CKPT_E_WORLD;
        } else if (st) {
            ckpt__set_ctx_err(ctx, "step %" PRIu64 " not committed: %s", step, err);
        }
    }
    if (!st) {
        st = ckpt__commit_global(ctx, &gm, mkey, sizeof mkey, err);
        if (st)
            ckpt__set_ctx_err(ctx, "commit of global step %" PRIu64 " failed: %s", step, err);
        else
            ckpt__event(ctx, &(struct ckpt_event){ .type = CKPT_EVENT_COMMITTED, .step = step,
                                                   .seq = gm.seq, .new_bytes = gm.new_bytes,
                                                   .manifest = mkey });
    }
    ckpt__manifest_free(&gm);
    for (unsigned r = 0; best && r < world_size; r++)
        ckpt__manifest_free(&best[r]);
    free(best);
    free(keys);
    part_list_free(&l);
    return st;
}
