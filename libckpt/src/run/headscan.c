/* headscan.c -- a run whose HEAD is damaged, read from its manifests
 * (headscan.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "run/headscan.h"
#include "run/runobj.h"
#include "core/runstate.h"

#define SCAN_MAX 100000 /* manifests read at most (HEAD's own bound) */

struct keys {
    struct ckpt_strv l;
    size_t runlen;
    int nomem;
};

/* Manifests (.ckm) and commit records (.ckc) of the run, as relative keys;
 * part manifests (.ckp) are not checkpoints of their own. */
static int collect(void *user, const struct ckpt_obj_info *o)
{
    struct keys *k = user;
    const char *rel = o->key + k->runlen, *dot;
    if (strlen(o->key) <= k->runlen || strncmp(rel, "manifests/", 10) ||
        !(dot = strrchr(rel, '.')) || (strcmp(dot, ".ckm") && strcmp(dot, ".ckc")) ||
        strlen(rel) > 512 || !ckpt_key_valid(rel))
        return 0;
    if (k->l.n == SCAN_MAX)
        return 1;
    if (ckpt__strv_push(&k->l, rel) != 0) {
        k->nomem = 1;
        return 1;
    }
    return 0;
}

/* Build h from the manifests under manifests/ (headscan.h). *skipped:
 * manifests left out (damaged, unreadable, a fenced runner's). */
static ckpt_status scan(struct ckpt_ctx *ctx, struct ckpt_head *h, unsigned *flags, size_t *skipped,
                        bool quiet)
{
    struct keys k = { 0 };
    char prefix[1024], err[CKPT_ERR_MAX] = "";
    struct ckpt_head_entry *e = NULL;
    uint64_t top = 0, first_top = UINT64_MAX, *epoch = NULL;
    size_t n = 0, w = 0;
    ckpt_status st;

    memset(h, 0, sizeof *h);
    *skipped = 0;
    k.runlen = strlen(ctx->run) + 1;
    ckpt__run_key(ctx, "manifests/", prefix, sizeof prefix);
    st = ctx->store->ops->list(ctx->store, prefix, collect, &k, err);
    if (st) {
        ckpt__set_ctx_err(ctx, "listing %s: %s", prefix, err);
        goto out;
    }
    st = CKPT_E_NOMEM;
    e = calloc(k.l.n ? k.l.n : 1, sizeof *e);
    epoch = calloc(k.l.n ? k.l.n : 1, sizeof *epoch);
    if (k.nomem || !e || !epoch)
        goto out;
    for (size_t i = 0; i < k.l.n; i++) {
        struct ckpt_manifest m;
        int commit = ckpt__is_commit_key(k.l.v[i]);
        ckpt_status mst = ckpt__read_manifest(ctx, k.l.v[i], &m);
        if (mst == CKPT_OK && !commit && m.world_size > 1) {
            ckpt__manifest_free(&m); /* a part named as a checkpoint: not one */
            mst = CKPT_E_CORRUPT;
        }
        if (mst == CKPT_E_UNSUPPORTED)
            *flags |= CKPT_HEAD_NEWER;
        if (mst == CKPT_E_NOENT || mst == CKPT_E_CORRUPT || mst == CKPT_E_UNSUPPORTED) {
            if (!quiet)
                ckpt__log(&ctx->log, CKPT_LOG_WARN, "head", "%s (left out)", ckpt__errmsg(ctx));
            (*skipped)++;
            continue;
        }
        if (mst) {
            st = mst; /* the store or memory: a scan must not guess */
            goto out;
        }
        e[n].manifest = k.l.v[i];
        k.l.v[i] = NULL;
        e[n].step = m.step;
        e[n].seq = m.seq;
        e[n].format = commit ? CKPT_FORMAT_RANKS : m.version;
        e[n].world_size = commit ? m.world_size : 0;
        epoch[n] = m.epoch;
        top = m.epoch > top ? m.epoch : top;
        n++;
        ckpt__manifest_free(&m);
    }
    for (size_t i = 0; i < n; i++)
        if (epoch[i] == top && e[i].seq < first_top)
            first_top = e[i].seq;
    /* Left by a runner fenced out: an older lease epoch, committed (it
     * would seem) after the newest epoch's first commit. Every commit of an
     * older epoch that counted came before the takeover, with a lower seq.
     * Epoch 0 is no lease (libckpt alone, ckptrun save): never fenced. */
    for (size_t i = 0; i < n; i++) {
        if (epoch[i] && epoch[i] < top && e[i].seq >= first_top) {
            if (!quiet)
                ckpt__log(&ctx->log, CKPT_LOG_WARN, "head",
                          "%s: lease epoch %" PRIu64 ", below the run's %" PRIu64
                          ": a fenced runner's, left out",
                          e[i].manifest, epoch[i], top);
            free(e[i].manifest);
            (*skipped)++;
            continue;
        }
        e[w++] = e[i];
    }
    n = w;
    /* one step, one checkpoint: the latest commit (as a commit supersedes) */
    ckpt__head_sort(e, n);
    w = 0;
    for (size_t i = 0; i < n; i++) {
        if (w && e[w - 1].step == e[i].step) {
            free(e[i].manifest);
            continue;
        }
        e[w++] = e[i];
    }
    h->version = 1;
    h->entries = e;
    h->n = w;
    e = NULL;
    for (size_t i = 0; i < h->n; i++)
        h->seq = h->entries[i].seq > h->seq ? h->entries[i].seq : h->seq;
    h->step = h->n ? h->entries[0].step : 0;
    h->epoch = top;
    h->time_ms = ckpt__now_ms();
    /* rev only has to differ from every HEAD written before, which a
     * count from the damaged one cannot promise: the clock does */
    h->rev = (uint64_t)h->time_ms;
    *flags |= CKPT_HEAD_SCANNED;
    st = CKPT_OK;
out:
    if (e)
        for (size_t i = 0; i < n; i++)
            free(e[i].manifest);
    free(e);
    free(epoch);
    ckpt__strv_free(&k.l);
    return st;
}

static ckpt_status read_or_scan(struct ckpt_ctx *ctx, struct ckpt_head *h, char *etag, bool *exists,
                                unsigned *flags, char *why, bool quiet)
{
    char damage[CKPT_ERR_MAX];
    size_t skipped = 0;
    ckpt_status st;
    bool tell;

    *flags = 0;
    if (why)
        why[0] = '\0';
    st = ckpt__read_head(ctx, h, etag, exists);
    if (st == CKPT_OK)
        atomic_store(&ctx->head_damage_told, 0);
    if (st != CKPT_E_CORRUPT)
        return st;
    /* The store gave HEAD's bytes (etag is theirs), which do not decode.
     * Told once a context: its background load, a listing and a restore
     * all scan, and one warning says it. */
    tell = !quiet && !atomic_load(&ctx->head_damage_told);
    snprintf(damage, sizeof damage, "%s", ckpt__errmsg(ctx));
    st = scan(ctx, h, flags, &skipped, !tell);
    if (st) {
        ckpt__set_ctx_err(ctx, "%s; its manifests could not be read instead: %s", damage,
                          ckpt__errmsg(ctx));
        return st;
    }
    *exists = true;
    if (why)
        snprintf(why, CKPT_ERR_MAX, "%s", damage);
    if (tell && atomic_exchange(&ctx->head_damage_told, 1) == 0)
        ckpt__log(&ctx->log, CKPT_LOG_WARN, "head",
                  "%s: the run is read from its manifests instead (%zu checkpoint%s, %zu left "
                  "out); the next commit rewrites HEAD (a save, or ckptrun run/recover when it "
                  "takes the lease)",
                  damage, h->n, h->n == 1 ? "" : "s", skipped);
    return CKPT_OK;
}

ckpt_status ckpt__read_head_or_scan(struct ckpt_ctx *ctx, struct ckpt_head *h, char *etag,
                                    bool *exists, unsigned *flags, char *why)
{
    return read_or_scan(ctx, h, etag, exists, flags, why, false);
}

int ckpt__head_retains(struct ckpt_ctx *ctx, const char *rel)
{
    char saved[CKPT_ERR_MAX];
    struct ckpt_head h;
    bool exists;
    unsigned flags;
    int found = 1;

    snprintf(saved, sizeof saved, "%s", ckpt__errmsg(ctx));
    if (read_or_scan(ctx, &h, NULL, &exists, &flags, NULL, true) == CKPT_OK) {
        /* marked damaged meanwhile (a restore found it so): still damage */
        found = 0;
        for (size_t i = 0; i < h.n + h.ndamaged && !found; i++)
            found = !strcmp(i < h.n ? h.entries[i].manifest : h.damaged[i - h.n].manifest, rel);
        ckpt__head_free(&h);
    }
    ckpt__set_ctx_err(ctx, "%s", saved);
    return found;
}

void ckpt__run_unscan(struct ckpt_run *rs, const char *rel)
{
    struct ckpt_head *h = &rs->head;
    size_t w = 0;
    if (!rs->head_scanned)
        return;
    h->seq = 0;
    for (size_t i = 0; i < h->n; i++) {
        if (!strcmp(h->entries[i].manifest, rel)) {
            free(h->entries[i].manifest);
            if (rs->retained_ids)
                ckpt__idlist_free(&rs->retained_ids[i]);
            continue;
        }
        if (rs->retained_ids)
            rs->retained_ids[w] = rs->retained_ids[i];
        h->entries[w++] = h->entries[i];
        h->seq = h->entries[i].seq > h->seq ? h->entries[i].seq : h->seq;
    }
    h->n = w;
    h->step = w ? h->entries[0].step : 0;
}
