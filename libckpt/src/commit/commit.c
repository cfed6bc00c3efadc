/* commit.c -- committing a save (commit.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "commit/commit.h"
#include "core/ctx.h"
#include "control/events.h"
#include "run/globalckpt.h"
#include "run/headscan.h"
#include "commit/retention.h"
#include "run/runload.h"
#include "run/runobj.h"
#include "core/runstate.h"
#include "core/save.h"

/* A candidate entry of the HEAD a commit writes, and where it comes from. */
struct cand {
    struct ckpt_head_entry e;
    size_t src; /* index in ctx->rs.head.entries; SIZE_MAX: the new checkpoint */
};

static int cmp_cand(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    if (x->e.step != y->e.step)
        return x->e.step > y->e.step ? -1 : 1;
    if (x->e.seq != y->e.seq)
        return x->e.seq > y->e.seq ? -1 : 1;
    return 0;
}

/* The HEAD a commit of manifest `mkey` (relative key) writes over
 * ctx->rs.head (rs.mu held): its entries in the resume order (highest step
 * first), the new one marked by src[k] == SIZE_MAX, every other one src[k]
 * = its index in ctx->rs.head. A checkpoint of the same step as the new one is
 * superseded by it (dropped); then the `keep` highest steps stay, and the
 * new checkpoint always does, even below them (one more then): a trainer
 * that resumed below a higher checkpoint keeps its latest work reachable,
 * and a late commit of a lower step never pushes a higher one out. Damaged
 * entries and gc records stay as they are. nh's strings are borrowed; free
 * only nh->entries. */
static ckpt_status plan_head(struct ckpt_ctx *ctx, const struct ckpt_manifest *m,
                             const char *mkey, struct ckpt_head *nh, size_t **src)
{
    struct cand *c = calloc(ctx->rs.head.n + 1, sizeof *c);
    size_t n = 0, keepn, with_new;
    memset(nh, 0, sizeof *nh);
    *src = NULL;
    if (!c)
        return CKPT_E_NOMEM;
    c[n].e.manifest = (char *)mkey;
    c[n].e.step = m->step;
    c[n].e.seq = m->seq;
    c[n].e.format = ckpt__manifest_format(m);
    c[n].e.world_size = m->nparts ? m->world_size : 0;
    c[n++].src = SIZE_MAX;
    for (size_t i = 0; i < ctx->rs.head.n; i++) {
        if (ctx->rs.head.entries[i].step == m->step)
            continue; /* superseded by this commit */
        c[n].e = ctx->rs.head.entries[i];
        c[n++].src = i;
    }
    qsort(c, n, sizeof *c, cmp_cand);
    keepn = n < ctx->keep ? n : ctx->keep;
    with_new = keepn;
    for (size_t k = keepn; k < n; k++)
        if (c[k].src == SIZE_MAX) { /* below the kept ones: it stays too */
            c[keepn] = c[k];
            with_new = keepn + 1;
        }
    nh->entries = calloc(with_new, sizeof *nh->entries);
    *src = calloc(with_new, sizeof **src);
    if (!nh->entries || !*src) {
        free(nh->entries);
        free(*src);
        free(c);
        nh->entries = NULL;
        *src = NULL;
        return CKPT_E_NOMEM;
    }
    for (size_t k = 0; k < with_new; k++) {
        nh->entries[k] = c[k].e;
        (*src)[k] = c[k].src;
    }
    free(c);
    nh->n = with_new;
    nh->rev = ctx->rs.head.rev + 1;
    nh->seq = m->seq;
    nh->step = nh->entries[0].step;
    nh->epoch = m->epoch;
    nh->time_ms = m->time_ms;
    nh->ndamaged = ctx->rs.head.ndamaged;
    nh->damaged = ctx->rs.head.damaged;
    nh->ngc = ctx->rs.head.ngc;
    nh->gc = ctx->rs.head.gc;
    return CKPT_OK;
}

/* Whether a gc in force (ctx->rs.gcv, from the HEAD this commit is
 * conditional on; rs.mu held) deletes an object of the new checkpoint or its manifest:
 * then it must not commit, whatever the timing. */
static ckpt_status gc_collides(const struct ckpt_ctx *ctx, const struct ckpt_idlist *ids,
                               const char *mkey, char *err)
{
    for (size_t k = 0; k < ids->n; k++) {
        if (ckpt__objset_has(&ctx->rs.gcv.objs, ids->ids[k], ids->kind[k])) {
            char hex[CKPT_ID_HEX + 1];
            ckpt__hex(ids->ids[k], CKPT_ID_LEN, hex);
            ckpt__seterr(err, "a gc of run %s is deleting %s %s, which this checkpoint uses: "
                         "not committed (the next save writes it again)", ctx->run,
                         ids->kind[k] == CKPT_OBJ_PACK ? "pack" : "chunk", hex);
            return CKPT_E_PRECONDITION;
        }
    }
    for (size_t k = 0; k < ctx->rs.gcv.nmanifests; k++)
        for (size_t p = 0; p < ids->nkeys; p++)
            if (!strcmp(ctx->rs.gcv.manifests[k], ids->keys[p])) {
                ckpt__seterr(err, "a gc of run %s deleted the part manifest %s of this "
                             "checkpoint before it was committed: not committed", ctx->run,
                             ids->keys[p]);
                return CKPT_E_PRECONDITION;
            }
    for (size_t k = 0; k < ctx->rs.gcv.nmanifests; k++)
        if (!strcmp(ctx->rs.gcv.manifests[k], mkey)) {
            ckpt__seterr(err, "a gc of run %s deleted this checkpoint's manifest %s before "
                         "it was committed: not committed", ctx->run, mkey);
            return CKPT_E_PRECONDITION;
        }
    return CKPT_OK;
}

struct present {
    struct ckpt_idset ids; /* id -> size */
    int nomem;
};

static int collect_present(void *user, const struct ckpt_obj_info *o)
{
    struct present *p = user;
    uint8_t id[CKPT_ID_LEN];
    if (ckpt__key_id(o->key, id))
        return 0;
    if (ckpt__idset_put(&p->ids, id, o->size) != 0)
        p->nomem = 1;
    return p->nomem; /* stop: out of memory */
}

/* Every object of the new checkpoint is in the store with its size, and so
 * is its manifest: checked before committing over a HEAD that changed
 * while the save ran without a commit (a gc, which may have deleted what
 * this save found in the run earlier and whose record is gone by now). */
static ckpt_status objects_present(struct ckpt_ctx *ctx, const struct ckpt_idlist *ids,
                                   const char *mkey_full, char *err)
{
    struct present present[2];
    char prefix[1024], derr[CKPT_ERR_MAX] = "";
    ckpt_status st = CKPT_OK;
    uint64_t sz;
    memset(present, 0, sizeof present);
    for (int kind = 0; kind < 2 && !st; kind++) {
        snprintf(prefix, sizeof prefix, "%s/%s/", ctx->run,
                 kind == CKPT_OBJ_PACK ? "packs" : "chunks");
        st = ctx->store->ops->list(ctx->store, prefix, collect_present, &present[kind], derr);
        if (st) {
            ckpt__seterr(err, "listing %s: %s", prefix, derr);
        } else if (present[kind].nomem) {
            ckpt__seterr(err, "out of memory listing %s", prefix);
            st = CKPT_E_NOMEM;
        }
    }
    for (size_t k = 0; !st && k < ids->n; k++)
        if (!ckpt__idset_get(&present[ids->kind[k]].ids, ids->ids[k], &sz) ||
            sz != ids->size[k]) {
            char hex[CKPT_ID_HEX + 1];
            ckpt__hex(ids->ids[k], CKPT_ID_LEN, hex);
            ckpt__seterr(err, "%s %s of this checkpoint is no longer in the store (a gc "
                         "removed it): not committed",
                         ids->kind[k] == CKPT_OBJ_PACK ? "pack" : "chunk", hex);
            st = CKPT_E_PRECONDITION;
        }
    if (!st && (st = ctx->store->ops->head(ctx->store, mkey_full, NULL, NULL, derr)) != CKPT_OK) {
        if (st == CKPT_E_NOENT) {
            ckpt__seterr(err, "manifest %s was removed (by a gc) before it was committed: not "
                         "committed", mkey_full);
            st = CKPT_E_PRECONDITION;
        } else {
            ckpt__seterr(err, "%s: %s", mkey_full, derr);
        }
    }
    for (size_t p = 0; !st && p < ids->nkeys; p++) {
        /* a global checkpoint's parts, which a gc may take as never committed */
        char pkey[1024];
        ckpt__run_key(ctx, ids->keys[p], pkey, sizeof pkey);
        st = ctx->store->ops->head(ctx->store, pkey, NULL, NULL, derr);
        if (st == CKPT_E_NOENT) {
            ckpt__seterr(err, "part manifest %s was removed (by a gc) before it was "
                         "committed: not committed", pkey);
            st = CKPT_E_PRECONDITION;
        } else if (st) {
            ckpt__seterr(err, "%s: %s", pkey, derr);
        }
    }
    ckpt__idset_free(&present[0].ids);
    ckpt__idset_free(&present[1].ids);
    return st;
}


/* Load the run again (rs.mu held, and let go meanwhile). */
static ckpt_status reload(struct ckpt_ctx *ctx)
{
    ckpt_status st;
    pthread_mutex_unlock(&ctx->rs.mu);
    st = ckpt__load_run(ctx, true);
    pthread_mutex_lock(&ctx->rs.mu);
    return st;
}

/* The run is still ours to commit to (rs.mu held). */
static ckpt_status fence(struct ckpt_ctx *ctx, uint64_t epoch, char *err)
{
    struct ckpt_run *rs = &ctx->rs;
    if (!rs->load_ok) {
        /* The background load failed (store down then): retry now, HEAD's
         * etag is what makes the commit safe. (A damaged HEAD loads as its
         * manifests show the run, with the damaged one's etag: this commit
         * writes HEAD over it.) */
        ckpt_status st = reload(ctx);
        if (st) {
            snprintf(err, CKPT_ERR_MAX, "%s", ckpt__errmsg(ctx));
            return st;
        }
    }
    /* A writer with a lease epoch refuses to commit over a HEAD fenced at a
     * newer one: another runner holds the lease now. (HEAD's etag alone
     * refuses only the first save after the fence, since a refused save
     * reloads the run.) Writers without an epoch (libckpt alone) hold no
     * lease and are not checked. */
    if (epoch && rs->have_head && rs->head.epoch > epoch) {
        snprintf(err, CKPT_ERR_MAX, "run %s was fenced at epoch %" PRIu64 " (this writer has "
                 "epoch %" PRIu64 "): another runner holds its lease; this save is refused",
                 ctx->run, rs->head.epoch, epoch);
        return CKPT_E_FENCED;
    }
    /* An older writer must not commit to a run that holds checkpoints it
     * cannot read: its retention would push them out. (A HEAD of a newer
     * format already refused the load above.) */
    if (rs->newer) {
        snprintf(err, CKPT_ERR_MAX, "run %s holds checkpoints of a newer format than this "
                 "ckpt (%d) reads: upgrade; nothing committed", ctx->run, CKPT_FORMAT_VERSION);
        return CKPT_E_UNSUPPORTED;
    }
    return CKPT_OK;
}

/* A global checkpoint's commit record (globalckpt.h) for m, composed from its
 * parts. */
static ckpt_status encode_record(const struct ckpt_manifest *m, char **buf, size_t *len)
{
    struct ckpt_commit_rec r = { 0 };
    ckpt_status st = CKPT_E_NOMEM;
    r.step = m->step;
    r.seq = m->seq;
    r.epoch = m->epoch;
    r.time_ms = m->time_ms;
    r.world_size = m->world_size;
    r.new_bytes = m->new_bytes;
    r.writer = m->writer;
    r.parent = m->parent;
    r.parts = m->parts; /* borrowed: world_size of them */
    r.rep_names = calloc(m->nitems + 1, sizeof *r.rep_names);
    r.rep_digests = calloc(m->nitems + 1, sizeof *r.rep_digests);
    if (r.rep_names && r.rep_digests && m->nparts == m->world_size) {
        for (size_t i = 0; i < m->nitems; i++)
            if (m->items[i].replicated) {
                r.rep_names[r.nrep] = m->items[i].name;
                r.rep_digests[r.nrep++] = m->items[i].digest;
            }
        st = ckpt__commit_rec_encode(&r, buf, len);
    }
    free(r.rep_names);
    free(r.rep_digests);
    return st;
}

/* The save's manifest (or a global checkpoint's commit record), written
 * once under a fresh key `mkey` (rs.mu held); *ids: the objects it uses. */
static ckpt_status write_manifest(struct ckpt_ctx *ctx, struct ckpt_manifest *m,
                                  uint64_t new_bytes, uint64_t epoch, struct ckpt_idlist *ids,
                                  char *mkey, size_t keylen, char *err)
{
    struct ckpt_run *rs = &ctx->rs;
    struct ckpt_put_opts po = { CKPT_PUT_IF_NONE_MATCH, NULL, 0 };
    const struct ckpt_head_entry *prev = NULL;
    char writer[300], host[256] = "?", *buf = NULL;
    uint32_t nonce = 0;
    size_t len;
    ckpt_status st;

    gethostname(host, sizeof host - 1);
    snprintf(writer, sizeof writer, "%s:%d", host, (int)getpid());
    free(m->writer);
    m->writer = ckpt__strdup(writer);
    m->seq = rs->head.seq + 1;
    m->epoch = epoch;
    m->time_ms = ckpt__now_ms();
    m->new_bytes = new_bytes;
    free(m->parent);
    m->parent = NULL;
    /* the previous commit: the retained entry committed last */
    for (size_t i = 0; i < rs->head.n; i++)
        if (!prev || rs->head.entries[i].seq > prev->seq)
            prev = &rs->head.entries[i];
    if ((prev && !(m->parent = ckpt__strdup(prev->manifest))) || !m->writer ||
        ckpt__manifest_objects(m, ids))
        return CKPT_E_NOMEM;
    if (getrandom(&nonce, sizeof nonce, 0) != (ssize_t)sizeof nonce)
        nonce = (uint32_t)ckpt__mono_ns();
    if (m->nparts)
        ckpt__commit_key(ctx->run, m->seq, m->step, m->epoch, nonce, mkey, keylen);
    else
        ckpt__manifest_key(ctx->run, m->seq, m->step, m->epoch, nonce, mkey, keylen);
    /* a gc in force deletes what this save found in the run: do not commit */
    st = gc_collides(ctx, ids, mkey + strlen(ctx->run) + 1, err);
    if (st)
        return st;
    st = m->nparts ? encode_record(m, &buf, &len) : ckpt__manifest_encode(m, &buf, &len);
    if (st)
        return st;
    st = ctx->store->ops->put(ctx->store, mkey, buf, len, &po, NULL, err);
    free(buf);
    if (st == CKPT_E_PRECONDITION) {
        snprintf(err, CKPT_ERR_MAX, "manifest %.400s already exists: another writer committed "
                 "to this run", mkey);
        st = CKPT_E_FENCED;
    }
    return st;
}

/* HEAD, conditional on what we last saw (rs.mu held). Refused: another
 * writer committed (or fenced) -- this save is refused -- or, with the
 * same commit sequence and epoch, a gc (or a damaged marking) rewrote it:
 * then reload, check that the gc deletes nothing this save uses and that
 * it is all still there, and try again on the new HEAD. On success *nh,
 * *src (plan_head's) and etag: the HEAD written. */
static ckpt_status write_head(struct ckpt_ctx *ctx, struct ckpt_manifest *m, const char *mkey,
                              const struct ckpt_idlist *ids, struct ckpt_head *nh,
                              size_t **src, char *etag, char *err)
{
    struct ckpt_run *rs = &ctx->rs;
    const char *mrel = mkey + strlen(ctx->run) + 1;
    int cond = ckpt_store_can(ctx->store, CKPT_STORE_CONDITIONAL);
    ckpt_status st;

    for (int attempt = 1;; attempt++) {
        uint64_t seq0 = rs->head.seq, epoch0 = rs->head.epoch;
        st = plan_head(ctx, m, mrel, nh, src);
        if (st)
            return st;
        st = ckpt__put_head(ctx, nh, rs->have_head ? rs->head_etag : NULL, etag, err);
        if (st != CKPT_E_PRECONDITION && !(st == CKPT_E_NOENT && cond && rs->have_head))
            return st;
        free(nh->entries);
        free(*src);
        nh->entries = NULL;
        *src = NULL;
        rs->loaded = false;
        st = reload(ctx);
        if (st) {
            snprintf(err, CKPT_ERR_MAX, "HEAD of run %s changed; reading it again: %.400s",
                     ctx->run, ckpt__errmsg(ctx));
            return st;
        }
        ckpt__run_unscan(rs, mrel); /* a damaged HEAD: ours is not committed yet */
        /* what the new HEAD says may forbid this commit: a newer lease, a
         * checkpoint of a newer format (a HEAD damaged meanwhile is read
         * from the manifests, which may hold one) */
        st = fence(ctx, atomic_load(&ctx->epoch), err);
        if (st)
            return st;
        /* no commit in between: a gc, a damaged marking, or the fence of
         * the lease this writer commits under (its runner took the lease
         * after this writer first read HEAD) rewrote it; or HEAD was
         * damaged, and the manifests show no commit since and no newer
         * lease than ours (a fence's epoch is in no manifest) */
        if (attempt < 4 && rs->have_head && rs->head.seq == seq0 &&
            (rs->head.epoch == epoch0 || rs->head.epoch == atomic_load(&ctx->epoch) ||
             (rs->head_scanned && rs->head.epoch <= atomic_load(&ctx->epoch)))) {
            ckpt__log(&ctx->log, CKPT_LOG_DEBUG, "commit", "HEAD of run %s was rewritten "
                      "without a commit (gc, fence): checking step %" PRIu64 " against it",
                      ctx->run, m->step);
            st = gc_collides(ctx, ids, mrel, err);
            if (st)
                return st;
            pthread_mutex_unlock(&rs->mu);
            st = objects_present(ctx, ids, mkey, err);
            pthread_mutex_lock(&rs->mu);
            if (st)
                return st;
            continue;
        }
        snprintf(err, CKPT_ERR_MAX, "HEAD of run %s changed since this writer read it: "
                 "another runner committed; this save is refused", ctx->run);
        return CKPT_E_FENCED;
    }
}

/* Committed (rs.mu held): the run state takes the new HEAD, retention
 * deletes what the checkpoints it no longer retains alone used. Out of
 * memory: 1, and the run must be loaded again. */
static int adopt(struct ckpt_ctx *ctx, struct ckpt_manifest *m, struct ckpt_head *nh,
                 const size_t *src, const char *etag, struct ckpt_idlist *ids)
{
    struct ckpt_run *rs = &ctx->rs;
    struct ckpt_dropped dropped;
    if (ckpt__run_adopt(rs, nh, src, etag, m, ids, &dropped) != 0) {
        ckpt__log(&ctx->log, CKPT_LOG_WARN, "commit", "out of memory after committing step %"
                  PRIu64 ": retention skipped (ckptrun gc removes what it left)", m->step);
        rs->loaded = false;
        return 1;
    }
    ckpt__retention_after_commit(ctx, rs->retained_ids, rs->head.n, rs->damaged_ids,
                                 rs->head.ndamaged, &dropped);
    ckpt__dropped_free(&dropped);
    return 0;
}

/* The save is over: its event, and its slot is free. */
static void finish(struct ckpt_ctx *ctx, struct ckpt_save *sv, ckpt_status st, const char *err,
                   const char *mkey)
{
    struct ckpt_event ev = { .step = sv->step };
    ckpt__progress_sent_end(&ctx->progress, ctx->store); /* before anyone is told */
    if (st) {
        ckpt__set_ctx_err(ctx, "save of step %" PRIu64 " failed: %s", sv->step, err);
        ev.type = CKPT_EVENT_FAILED;
        ev.status = st;
        ev.detail = err;
    } else {
        ev.type = CKPT_EVENT_COMMITTED;
        ev.seq = sv->m.seq;
        ev.raw_bytes = sv->raw_bytes;
        ev.new_bytes = sv->new_bytes;
        ev.seconds = (double)(ckpt__mono_ns() - sv->t0_ns) / 1e9;
        ev.manifest = mkey;
    }
    ckpt__event(ctx, &ev);
    ckpt__flight_end(&ctx->flight, st);
    ckpt__save_free(sv);
}

/* Fence, manifest (or commit record), HEAD, adopt: m is committed. */
static ckpt_status commit_manifest(struct ckpt_ctx *ctx, struct ckpt_manifest *m,
                                   uint64_t new_bytes, char *mkey, size_t keylen, char *err)
{
    struct ckpt_run *rs = &ctx->rs;
    char etag[CKPT_ETAG_MAX] = "";
    struct ckpt_idlist ids = { 0 };
    struct ckpt_head nh = { 0 };
    size_t *src = NULL;
    ckpt_status st;
    uint64_t epoch;
    int stale = 0;

    pthread_mutex_lock(&rs->mu);
    epoch = atomic_load(&ctx->epoch); /* the lease this writer commits under */
    st = fence(ctx, epoch, err);
    if (!st)
        st = write_manifest(ctx, m, new_bytes, epoch, &ids, mkey, keylen, err);
    if (!st) {
        st = write_head(ctx, m, mkey, &ids, &nh, &src, etag, err);
        if (st) {
            const char *dk[1] = { mkey };
            ctx->store->ops->del(ctx->store, dk, 1, NULL);
        }
    }
    if (!st)
        stale = adopt(ctx, m, &nh, src, etag, &ids);
    pthread_mutex_unlock(&rs->mu);
    if (stale)
        ckpt__load_run(ctx, true); /* committed, but our view could not follow */
    free(nh.entries);
    free(src);
    ckpt__idlist_free(&ids);
    return st;
}

ckpt_status ckpt__commit_global(struct ckpt_ctx *ctx, struct ckpt_manifest *gm, char *mkey,
                                size_t keylen, char *err)
{
    ckpt_status st = ctx->store->ops->barrier(ctx->store, err);
    if (!st)
        st = commit_manifest(ctx, gm, gm->new_bytes, mkey, keylen, err);
    return st;
}

void ckpt__commit(struct ckpt_ctx *ctx, struct ckpt_save *sv)
{
    char err[CKPT_ERR_MAX] = "", mkey[1024] = "";
    ckpt_status st = sv->st;

    if (st) {
        snprintf(err, sizeof err, "%s", sv->err);
        goto out;
    }
    st = ctx->store->ops->barrier(ctx->store, err);
    if (!st)
        st = commit_manifest(ctx, &sv->m, sv->new_bytes, mkey, sizeof mkey, err);
out:
    finish(ctx, sv, st, err, mkey);
}
