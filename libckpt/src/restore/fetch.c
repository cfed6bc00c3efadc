/* fetch.c -- fetching a checkpoint's chunks for restore and verify (fetch.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xxh.h"

#include "core/ctx.h"
#include "restore/deliver.h"
#include "restore/fetch.h"
#include "core/pool.h"
#include "run/runobj.h"

/* Chunks carry their own checksums (payload XXH64, content XXH3-128), so the
 * store is told not to digest the body again (CKPT_GET_SELF_CHECKED: on S3
 * that MD5 was most of a download's CPU). A fetch whose chunks fail them is
 * made again: a transfer damaged in flight must not pass for a damaged
 * checkpoint (which would send the restore back to an older step). */
#define FETCH_ATTEMPTS 3

/* Chunks in packs are read as ranges: the chunks a restore needs from one
 * pack, sorted by offset, merged while the hole between two is under
 * SEG_GAP (reading it costs less than another request) and the range under
 * SEG_MAX: one default chunk object (a range holds one chunk at least).
 * Memory is one range per worker, in a buffer of its own that a fresh
 * process touches for the first time: at a whole pack per range, 8
 * workers faulted in 320 MiB to restore 512 MiB, half the CPU of a
 * restore on a virtual machine. Four requests a pack instead of one cost
 * one round trip each, on connections that are busy ~0.2 s a chunk. */
#define SEG_GAP (1u << 20)
#define SEG_MAX (CKPT_DEFAULT_CHUNK_REMOTE + CKPT_CHUNK_HDR)

/* One fetch: a chunk's own object, or a range of a pack with its chunks. */
struct rjob {
    struct ckpt_ctx *ctx;
    struct ckpt_batch *b;
    char key[1024];
    int ranged;
    uint64_t off;
    size_t len;
    size_t n;
    struct ckpt_fetch *e;
    size_t *bad;            /* verify: count damaged chunks and go on */
    uint64_t step;
};

/* progress (ckpt_progress): one chunk delivered or verified */
static void counted(struct ckpt_ctx *ctx, const struct ckpt_fetch *e)
{
    ckpt__progress_add(&ctx->progress.bytes_done, e->c->raw_len);
    ckpt__progress_add(&ctx->progress.stored_bytes, e->c->stored_len);
    ckpt__progress_add(&ctx->progress.chunks_done, 1);
}

static void rjob_report(struct ckpt_ctx *ctx, struct rjob *j, const struct ckpt_fetch *e,
                        ckpt_status st, const char *err, char *msg, size_t n)
{
    if (st == CKPT_E_CORRUPT && j->b->bad) {
        pthread_mutex_lock(&j->b->mu);
        ckpt__idset_put(j->b->bad, e->c->id, 1); /* best effort: only costs dedup safety */
        pthread_mutex_unlock(&j->b->mu);
    }
    if (j->bad) {
        snprintf(msg, n, "step %" PRIu64 ", item %s, chunk %zu: %s", j->step, e->item, e->idx,
                 err);
        ckpt__log(&ctx->log, CKPT_LOG_ERROR, "verify", "%s", msg);
        pthread_mutex_lock(&j->b->mu);
        (*j->bad)++;
        pthread_mutex_unlock(&j->b->mu);
    } else {
        snprintf(msg, n, "item %s, chunk %zu: %s", e->item, e->idx, err);
        if (st == CKPT_E_CORRUPT)
            ckpt__log(&ctx->log, CKPT_LOG_WARN, "verify", "%s", msg);
    }
}

/* Delivery while a range is still arriving: each chunk whose bytes are in
 * goes to its place while the connection brings the next ones, so writing
 * the file overlaps the download instead of following it. A chunk stored
 * as it is (incompressible bytes, or --codec none) going to a file, or only
 * being verified, is even taken piece by piece (STREAM_STEP), hashed and
 * written while its bytes are still in the CPU's cache; its content hash
 * is compared at its end, and the file is renamed into place only once
 * every chunk has matched. Any other chunk is decoded whole, as after the
 * transfer. A chunk that fails is left, with the rest, to the pass after
 * the transfer, which reports it or fetches it again (and writes it over). */
#define STREAM_STEP (1u << 20)

struct early {
    struct ckpt_ctx *ctx;
    struct ckpt_codec_ws *ws;
    const struct rjob *j;
    const uint8_t *buf;
    size_t *next;             /* rjob_fn's: entries before it are delivered */
    int stop;                 /* an entry failed: the rest waits for the end */
    int mode;                 /* entry *next: 0 unknown, 1 piece by piece, 2 whole */
    size_t sdone;             /* mode 1: payload bytes hashed (and written) */
    XXH3_state_t *xs;         /* mode 1: content hash so far */
};

static int stream_piece(struct early *a, const struct ckpt_fetch *e, const uint8_t *payload,
                        size_t upto)
{
    char derr[CKPT_ERR_MAX];
    size_t n = upto - a->sdone;

    XXH3_128bits_update(a->xs, payload + a->sdone, n);
    if (e->d && ckpt__dest_write(e->d, e->off + a->sdone, payload + a->sdone, n, derr) != CKPT_OK)
        return -1;
    a->sdone = upto;
    return 0;
}

static int stream_matches(struct early *a, const struct ckpt_fetch *e)
{
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits_digest(a->xs));
    return memcmp(c.digest, e->c->id, CKPT_ID_LEN) == 0;
}

static size_t early_fn(void *arg, size_t have)
{
    struct early *a = arg;
    char derr[CKPT_ERR_MAX];

    if (have == 0) { /* a transfer starts (again): its bytes are new */
        a->stop = 0;
        a->mode = 0;
        a->sdone = 0;
    }
    while (!a->stop && *a->next < a->j->n) {
        const struct ckpt_fetch *e = &a->j->e[*a->next];
        size_t at = (size_t)(e->c->off - a->j->off), end = at + e->c->stored_len;
        if (a->mode == 0) {
            if (have < at + CKPT_CHUNK_HDR)
                return at + CKPT_CHUNK_HDR;
            a->mode = a->xs && (!e->d || e->d->kind == CKPT_ITEM_FILE) &&
                              ckpt__chunk_is_plain(a->buf + at, e->c->stored_len, e->c->id,
                                                   e->c->raw_len)
                          ? 1 : 2;
            a->sdone = 0;
            if (a->mode == 1)
                XXH3_128bits_reset(a->xs);
        }
        if (a->mode == 2) {
            if (end > have)
                return end;
            if (ckpt__deliver(a->ctx, a->ws, e->d, e->off, e->c, a->buf + at, derr) != CKPT_OK) {
                a->stop = 1;
                break;
            }
        } else {
            const uint8_t *payload = a->buf + at + CKPT_CHUNK_HDR;
            size_t upto = (have < end ? have : end) - (at + CKPT_CHUNK_HDR);
            if (upto > a->sdone &&
                (upto - a->sdone >= STREAM_STEP || upto == e->c->raw_len) &&
                stream_piece(a, e, payload, upto) != 0) {
                a->stop = 1;
                break;
            }
            if (a->sdone < e->c->raw_len) {
                size_t want = at + CKPT_CHUNK_HDR + a->sdone + STREAM_STEP;
                return want < end ? want : end;
            }
            if (!stream_matches(a, e) ||
                (e->d && a->ctx->restore_sync &&
                 ckpt__dest_written(e->d, e->c->raw_len, derr) != CKPT_OK)) {
                a->stop = 1;
                break;
            }
            if (e->d)
                ckpt__dest_chunk_in(e->d);
        }
        counted(a->ctx, e);
        (*a->next)++;
        a->mode = 0;
    }
    return 0;
}

static void rjob_fn(void *arg, struct ckpt_codec_ws *ws)
{
    struct rjob *j = arg;
    struct ckpt_ctx *ctx = j->ctx;
    XXH3_state_t *xs = j->ranged ? XXH3_createState() : NULL;
    char err[CKPT_ERR_MAX] = "", derr[CKPT_ERR_MAX] = "", msg[CKPT_ERR_MAX + 400] = "";
    ckpt_status st = CKPT_OK, first = CKPT_OK;
    size_t next = 0; /* entries before it are delivered */

    if (ckpt__batch_failed(j->b) && !j->bad) /* a restore that already failed: skip */
        goto out;
    if (!ws) {
        st = first = CKPT_E_NOMEM;
        snprintf(msg, sizeof msg, "worker has no buffers");
        goto out;
    }
    for (int attempt = 1; attempt <= FETCH_ATTEMPTS && next < j->n; attempt++) {
        void *buf = NULL;
        size_t len = 0;
        if (j->ranged) {
            uint8_t *fb = ckpt__codec_ws_fetch(ws, j->len + 1);
            struct early ea = { ctx, ws, j, fb, &next, 0, 0, 0, xs };
            struct ckpt_range_watch w = { early_fn, &ea };
            st = fb ? ctx->store->ops->get_range(ctx->store, j->key, j->off, j->len,
                                                 CKPT_GET_SELF_CHECKED, fb,
                                                 &w, derr)
                    : CKPT_E_NOMEM;
            if (!fb)
                ckpt__seterr(derr, "no memory for a %zu-byte range", j->len);
            len = j->len;
            if (st == CKPT_OK)
                buf = fb;
        } else {
            st = ctx->store->ops->get(ctx->store, j->key, j->e[0].c->stored_len,
                                      CKPT_GET_SELF_CHECKED, &buf, &len, NULL, derr);
            if (st == CKPT_OK && len != j->e[0].c->stored_len) {
                ckpt__seterr(derr, "%zu bytes, manifest says %u", len, j->e[0].c->stored_len);
                st = CKPT_E_CORRUPT;
            }
        }
        if (st == CKPT_E_NOENT) {
            ckpt__seterr(err, "%s is missing", j->key);
            st = CKPT_E_CORRUPT;
            attempt = FETCH_ATTEMPTS; /* fetching again will not make it appear */
        } else if (st) {
            ckpt__seterr(err, "reading %s: %s", j->key, derr);
            if (st != CKPT_E_CORRUPT) /* store down, no memory...: final */
                attempt = FETCH_ATTEMPTS;
        }
        if (st) {
            if (!j->ranged)
                free(buf);
            if (attempt < FETCH_ATTEMPTS) {
                ckpt__log(&ctx->log, CKPT_LOG_WARN, "verify", "%s (attempt %d of %d, fetching "
                          "it again)", err, attempt, FETCH_ATTEMPTS);
                continue;
            }
            /* every entry left fails with it */
            for (; next < j->n; next++) {
                if (!first) {
                    first = st;
                    rjob_report(ctx, j, &j->e[next], st, err, msg, sizeof msg);
                } else if (j->bad) {
                    char m2[CKPT_ERR_MAX + 400];
                    rjob_report(ctx, j, &j->e[next], st, err, m2, sizeof m2);
                }
            }
            break;
        }
        for (; next < j->n; next++) {
            const struct ckpt_fetch *e = &j->e[next];
            const uint8_t *obj = (const uint8_t *)buf + (j->ranged ? e->c->off - j->off : 0);
            st = ckpt__deliver(ctx, ws, e->d, e->off, e->c, obj, derr);
            if (st == CKPT_OK) {
                counted(ctx, e);
                continue;
            }
            ckpt__seterr(err, "%s: %s", j->key, derr);
            if (st == CKPT_E_CORRUPT && attempt < FETCH_ATTEMPTS) {
                ckpt__log(&ctx->log, CKPT_LOG_WARN, "verify", "%s (attempt %d of %d, fetching "
                          "it again)", err, attempt, FETCH_ATTEMPTS);
                break; /* fetch again, go on from this entry */
            }
            if (!first) {
                first = st;
                rjob_report(ctx, j, e, st, err, msg, sizeof msg);
            } else if (j->bad) {
                char m2[CKPT_ERR_MAX + 400];
                rjob_report(ctx, j, e, st, err, m2, sizeof m2);
            }
            if (!j->bad) { /* a restore stops at the first damage */
                next = j->n;
                break;
            }
        }
        if (!j->ranged)
            free(buf);
    }
out:
    XXH3_freeState(xs);
    ckpt__batch_done(j->b, first, msg);
    free(j->e);
    free(j);
}

static int rent_cmp(const void *a, const void *b)
{
    const struct ckpt_fetch *x = a, *y = b;
    if (x->c->pack != y->c->pack)
        return x->c->pack < y->c->pack ? -1 : 1;
    return x->c->off < y->c->off ? -1 : x->c->off > y->c->off;
}

static ckpt_status submit_job(struct ckpt_ctx *ctx, struct ckpt_batch *b, struct rjob *tmpl,
                              const struct ckpt_fetch *e, size_t n)
{
    struct rjob *j = malloc(sizeof *j);
    if (!j || !(j->e = malloc(n * sizeof *e))) {
        free(j);
        ckpt__batch_done(b, CKPT_E_NOMEM, "queue");
        return CKPT_E_NOMEM;
    }
    {
        struct ckpt_fetch *keep = j->e;
        *j = *tmpl;
        j->e = keep;
    }
    memcpy(j->e, e, n * sizeof *e);
    j->n = n;
    if (ckpt__pool_submit(ctx->pool, rjob_fn, j)) {
        free(j->e);
        free(j);
        ckpt__batch_done(b, CKPT_E_NOMEM, "queue");
        return CKPT_E_NOMEM;
    }
    return CKPT_OK;
}

ckpt_status ckpt__fetch_plan(struct ckpt_ctx *ctx, struct ckpt_batch *b,
                             const struct ckpt_manifest *m, struct ckpt_fetch *ents, size_t n,
                             size_t *bad)
{
    struct rjob t;
    size_t i = 0;
    memset(&t, 0, sizeof t);
    t.ctx = ctx;
    t.b = b;
    t.bad = bad;
    t.step = m->step;
    qsort(ents, n, sizeof *ents, rent_cmp); /* own objects (pack 0) first */
    for (size_t k = 0; k < n; k++) /* progress totals */
        ckpt__progress_add(&ctx->progress.bytes_total, ents[k].c->raw_len);
    ckpt__progress_add(&ctx->progress.chunks_total, n);
    while (i < n) {
        size_t k = i + 1;
        const struct ckpt_chunk_ref *c = ents[i].c;
        if (!c->pack) {
            ckpt__object_key(ctx->run, CKPT_OBJ_CHUNK, c->id, t.key, sizeof t.key);
            t.ranged = 0;
        } else {
            uint64_t start = c->off, end = c->off + c->stored_len;
            while (k < n && ents[k].c->pack == c->pack &&
                   ents[k].c->off <= end + SEG_GAP &&
                   ents[k].c->off + ents[k].c->stored_len - start <= SEG_MAX) {
                if (ents[k].c->off + ents[k].c->stored_len > end)
                    end = ents[k].c->off + ents[k].c->stored_len;
                k++;
            }
            ckpt__object_key(ctx->run, CKPT_OBJ_PACK, m->packs[c->pack - 1].id, t.key,
                             sizeof t.key);
            t.ranged = 1;
            t.off = start;
            t.len = (size_t)(end - start);
        }
        pthread_mutex_lock(&b->mu);
        b->pending++;
        pthread_mutex_unlock(&b->mu);
        if (submit_job(ctx, b, &t, &ents[i], k - i))
            return CKPT_E_NOMEM;
        i = k;
    }
    return CKPT_OK;
}

ckpt_status ckpt__fetch_manifest(struct ckpt_ctx *ctx, const char *rel,
                                 struct ckpt_manifest *m)
{
    ckpt_status st = ckpt__read_manifest(ctx, rel, m);
    if (st == CKPT_OK && m->world_size != 1 && !m->nparts) {
        /* a part named as a checkpoint of its own: only a commit record
         * (globalckpt.h) makes a global checkpoint */
        ckpt__set_ctx_err(ctx, "step %" PRIu64 " is one part of a %u-rank checkpoint, named "
                               "without its commit record: this version cannot restore it",
                          m->step, m->world_size);
        ckpt__manifest_free(m);
        st = CKPT_E_UNSUPPORTED;
    }
    return st;
}

ckpt_status ckpt__verify_manifest(struct ckpt_ctx *ctx, const struct ckpt_manifest *m,
                                  struct ckpt_idset *seen, size_t *bad, char *err)
{
    struct ckpt_batch b;
    struct ckpt_fetch *ents;
    size_t n = 0, total = 0;
    ckpt_status st;
    /* a global checkpoint: every rank's items (others) too */
    for (size_t k = 0; k < m->nitems + m->nothers; k++)
        total += k < m->nitems ? m->items[k].nchunks : m->others[k - m->nitems].nchunks;
    ents = calloc(total ? total : 1, sizeof *ents);
    if (!ents)
        return CKPT_E_NOMEM;
    for (size_t k = 0; k < m->nitems + m->nothers; k++) {
        const struct ckpt_mitem *it = k < m->nitems ? &m->items[k] : &m->others[k - m->nitems];
        for (size_t c = 0; c < it->nchunks; c++) {
            const struct ckpt_chunk_ref *r = &it->chunks[c];
            if (ckpt__idset_get(seen, r->id, NULL))
                continue; /* checked already (shared with a newer checkpoint) */
            ckpt__idset_put(seen, r->id, 1);
            ents[n].c = r;
            ents[n].item = it->name;
            ents[n].idx = c;
            n++;
        }
    }
    ckpt__batch_init(&b);
    b.pending = 1;
    ckpt__fetch_plan(ctx, &b, m, ents, n, bad);
    ckpt__progress_add(&ctx->progress.checkpoints_done, 1);
    ckpt__batch_done(&b, CKPT_OK, NULL);
    st = ckpt__batch_wait(&b);
    if (st)
        ckpt__seterr(err, "%s", b.err);
    ckpt__batch_destroy(&b);
    free(ents);
    return st;
}

