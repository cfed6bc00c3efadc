/* restore.c -- reading a run back: HEAD, manifests, chunks; restoring into
 * protected regions and into a directory. A checkpoint is used only if
 * every one of its chunks decodes and matches its content hash; otherwise
 * the damage is reported and the previous committed checkpoint is tried. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <xxhash.h>

#include "internal.h"

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

void ckpt__index_init(struct ckpt_index *x)
{
    memset(x, 0, sizeof *x);
    ckpt__idset_init(&x->known);
    ckpt__idset_init(&x->packidx);
}

void ckpt__index_free(struct ckpt_index *x)
{
    ckpt__idset_free(&x->known);
    ckpt__idset_free(&x->packidx);
    free(x->locs);
    free(x->packtab);
    ckpt__index_init(x);
}

/* Room for one more element in a vector (doubling). -1 nomem. */
static int vec_room(void **v, size_t n, size_t *cap, size_t elem, size_t first)
{
    void *p;
    size_t nc;
    if (n < *cap)
        return 0;
    nc = *cap ? *cap * 2 : first;
    p = realloc(*v, nc * elem);
    if (!p)
        return -1;
    *v = p;
    *cap = nc;
    return 0;
}

int ckpt__index_put(struct ckpt_index *x, const struct ckpt_manifest *m,
                    const struct ckpt_chunk_ref *r)
{
    uint32_t pack = 0;
    if (r->pack) {
        const struct ckpt_pack *p = &m->packs[r->pack - 1];
        uint64_t pi;
        if (!ckpt__idset_get(&x->packidx, p->id, &pi)) {
            if (vec_room((void **)&x->packtab, x->npacktab, &x->cappacktab,
                         sizeof *x->packtab, 64))
                return -1;
            pi = x->npacktab;
            if (ckpt__idset_put(&x->packidx, p->id, pi))
                return -1;
            x->packtab[x->npacktab++] = *p;
        }
        pack = (uint32_t)pi + 1;
    }
    if (vec_room((void **)&x->locs, x->nlocs, &x->caplocs, sizeof *x->locs, 256))
        return -1;
    x->locs[x->nlocs].stored_len = r->stored_len;
    x->locs[x->nlocs].pack = pack;
    x->locs[x->nlocs].off = r->off;
    if (ckpt__idset_put(&x->known, r->id, x->nlocs))
        return -1;
    x->nlocs++;
    return 0;
}

int ckpt__index_get(const struct ckpt_index *x, const uint8_t *id, struct ckpt_loc *loc,
                    struct ckpt_pack *pack)
{
    uint64_t li;
    if (!ckpt__idset_get(&x->known, id, &li) || li == UINT64_MAX || li >= x->nlocs)
        return 0;
    *loc = x->locs[li];
    if (loc->pack) {
        const struct ckpt_pack *p = &x->packtab[loc->pack - 1];
        if (p->size == 0) /* its pack is being deleted */
            return 0;
        if (pack)
            *pack = *p;
    }
    return 1;
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

void ckpt__run_state_free(struct ckpt_ctx *ctx)
{
    ckpt__gc_victims_free(&ctx->gcv);
    if (ctx->damaged_ids) {
        for (size_t i = 0; i < ctx->head.ndamaged; i++)
            ckpt__idlist_free(&ctx->damaged_ids[i]);
        free(ctx->damaged_ids);
        ctx->damaged_ids = NULL;
    }
    if (ctx->retained_ids) {
        for (size_t i = 0; i < ctx->head.n; i++)
            ckpt__idlist_free(&ctx->retained_ids[i]);
        free(ctx->retained_ids);
        ctx->retained_ids = NULL;
    }
    ckpt__head_free(&ctx->head);
    ckpt__index_free(&ctx->idx);
}

ckpt_status ckpt__load_run(struct ckpt_ctx *ctx, bool ids)
{
    struct ckpt_head h;
    char etag[CKPT_ETAG_MAX] = "";
    bool exists;
    struct ckpt_idlist *lists = NULL;
    struct ckpt_index known;
    struct ckpt_gc_victims gcv = { 0 };
    struct ckpt_idlist *dlists = NULL;
    bool newer = false;
    ckpt_status st;

    ckpt__index_init(&known);
    st = ckpt__read_head(ctx, &h, etag, &exists);
    if (st)
        goto out;
    if (ids && h.ngc && (st = ckpt__read_gc_records(ctx, &h, &gcv)) != CKPT_OK)
        goto out;
    lists = calloc(h.n ? h.n : 1, sizeof *lists);
    if (!lists) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    dlists = calloc(h.ndamaged ? h.ndamaged : 1, sizeof *dlists);
    if (!dlists) {
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
         * newer format forbids committing (see ctx->run_newer). */
        if (mst == CKPT_E_UNSUPPORTED)
            newer = true;
        if (mst != CKPT_OK) {
            ckpt__log(&ctx->log, CKPT_LOG_WARN, "load", "%s", ctx->errmsg);
            continue;
        }
        if (ckpt__manifest_objects(&m, &lists[i]) != 0)
            st = CKPT_E_NOMEM;
        for (size_t k = 0; k < m.nitems && !st; k++)
            for (size_t c = 0; c < m.items[k].nchunks && !st; c++)
                if (ckpt__index_put(&known, &m, &m.items[k].chunks[c]))
                    st = CKPT_E_NOMEM;
        ckpt__manifest_free(&m);
        if (st)
            goto out;
    }
out:
    pthread_mutex_lock(&ctx->run_mu);
    if (st == CKPT_OK) {
        /* chunks a restore found damaged stay out of the index */
        for (size_t k = 0; k < ctx->bad_chunks.cap; k++) {
            uint64_t li;
            if (ctx->bad_chunks.used[k] &&
                ckpt__idset_get(&known.known, ctx->bad_chunks.keys[k], &li))
                ckpt__idset_put(&known.known, ctx->bad_chunks.keys[k], UINT64_MAX);
        }
        ckpt__run_state_free(ctx);
        ctx->head = h;
        ctx->retained_ids = lists;
        ctx->damaged_ids = dlists;
        dlists = NULL;
        ctx->idx = known;
        ctx->gcv = gcv;
        memset(&gcv, 0, sizeof gcv);
        ctx->run_newer = newer;
        ctx->have_head = exists;
        ctx->load_ok = true;
        snprintf(ctx->head_etag, sizeof ctx->head_etag, "%s", etag);
        lists = NULL;
    } else {
        ckpt__log(&ctx->log, CKPT_LOG_WARN, "load", "cannot read the run's state: %s",
                  st == CKPT_E_NOMEM ? "out of memory" : ctx->errmsg);
        ckpt__index_free(&known);
        if (lists)
            for (size_t i = 0; i < h.n; i++)
                ckpt__idlist_free(&lists[i]);
        if (dlists)
            for (size_t i = 0; i < h.ndamaged; i++)
                ckpt__idlist_free(&dlists[i]);
        free(dlists);
        dlists = NULL;
        ckpt__head_free(&h); /* zeroed when it was not read */
        ckpt__gc_victims_free(&gcv);
    }
    /* Loaded or not, savers may proceed: without the index they only write
     * more; the commit re-reads HEAD before it relies on it. */
    ctx->run_loaded = true;
    pthread_cond_broadcast(&ctx->run_cv);
    pthread_mutex_unlock(&ctx->run_mu);
    free(lists);
    return st;
}

/* Chunks carry their own checksums (payload XXH64, content XXH3-128), so the
 * store is told not to digest the body again (CKPT_GET_SELF_CHECKED: on S3
 * that MD5 was most of a download's CPU). A fetch whose chunks fail them is
 * made again: a transfer damaged in flight must not pass for a damaged
 * checkpoint (which would send the restore back to an older step). */
#define FETCH_ATTEMPTS 3

/* Chunks in packs are read as ranges: the chunks a restore needs from one
 * pack, sorted by offset, merged while the hole between two is under
 * SEG_GAP (reading it costs less than another request) and the range under
 * SEG_MAX (a default pack: memory is one range per worker). */
#define SEG_GAP (1u << 20)
#define SEG_MAX (CKPT_DEFAULT_PACK + CKPT_DEFAULT_CHUNK_REMOTE + CKPT_CHUNK_HDR)

/* The file descriptors a restore holds open at once, whatever the number
 * of files: a file is opened when a chunk of it is written, closed once its
 * last chunk is in, and an idle one is closed (least recently opened first)
 * when the budget is used up. The budget is a share of RLIMIT_NOFILE left
 * free (at most FDS_MAX), lowered when open() meets EMFILE anyway. */
#define FDS_MAX 256
struct rdest;
struct fdpool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned limit;
    unsigned n;                 /* open now */
    struct rdest *open[FDS_MAX]; /* oldest first */
};

/* Destination of one item for a restore. */
struct rdest {
    int kind;
    uint8_t *ptr;
    void *dev;
    int fd;                 /* files: -1 while closed (fdpool.mu) */
    unsigned users;         /* writes using fd now (fdpool.mu) */
    size_t left;            /* chunks not yet written (fdpool.mu) */
    struct fdpool *pool;
    char *tmp, *final;
    uint32_t mode;
    uint64_t unsynced;
    /* Writes to one file are serialized here: the kernel serializes them
     * anyway (ext4, XFS and tmpfs take the inode lock for a buffered
     * write), and its waiters spin on the lock owner: on a 2-core machine
     * restoring 1 GiB with 8 workers that was a seventh of the CPU, taken
     * from the downloads. A mutex's waiters sleep. */
    pthread_mutex_t wmu;
};

/* One chunk to deliver from a fetch. */
struct rent {
    const struct ckpt_chunk_ref *c;
    struct rdest *d;        /* NULL: only verified (ckptrun verify) */
    uint64_t off;           /* in the item */
    const char *item;
    size_t idx;
};

/* One fetch: a chunk's own object, or a range of a pack with its chunks. */
struct rjob {
    struct ckpt_batch *b;
    char key[1024];
    int ranged;
    uint64_t off;
    size_t len;
    size_t n;
    struct rent *e;
    size_t *bad;            /* verify: count damaged chunks and go on */
    uint64_t step;
};

/* Flush behind (CKPT_RESTORE_SYNC=1 only): every FLUSH_EVERY bytes written
 * to a file, the job that crosses the mark starts their writeback
 * (sync_file_range WRITE: it does not wait), so the disk works while the
 * workers keep downloading and the fsync before the rename, which makes
 * the file durable, has little left to write. Without it that fsync waited for the whole file (on a 1 GiB
 * restore, about as long as a tenth of the download); with fdatasync here
 * instead, each crossing worker stopped downloading until its writeback
 * was done, and the restore took 1.5-2.5x the CPU. */
#define FLUSH_EVERY (64u << 20)

/* Errors of the local disk say so: they are never a damaged checkpoint nor
 * the store's. */
static ckpt_status local_err(char *err, const char *what, const char *path, int e)
{
    ckpt__seterr(err, "local disk: %s %s: %s%s", what, path, strerror(e),
                 e == EMFILE || e == ENFILE ? " (raise ulimit -n)" : "");
    return ckpt__errno_status(e);
}

static void pool_close_locked(struct fdpool *p, struct rdest *d)
{
    for (unsigned i = 0; i < p->n; i++)
        if (p->open[i] == d) {
            memmove(&p->open[i], &p->open[i + 1], (p->n - i - 1) * sizeof p->open[0]);
            p->n--;
            break;
        }
    close(d->fd);
    d->fd = -1;
    pthread_cond_broadcast(&p->cv);
}

/* The file's descriptor, opened (within the pool's budget) if need be; the
 * caller writes with it and calls fd_release(). -1 on error (err set). */
static int fd_acquire(struct rdest *d, char *err)
{
    struct fdpool *p = d->pool;
    int fd = -1;
    pthread_mutex_lock(&p->mu);
    while (d->fd < 0) {
        if (p->n < p->limit) {
            int f = open(d->tmp, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
            if (f >= 0) {
                d->fd = f;
                p->open[p->n++] = d;
                break;
            }
            if ((errno != EMFILE && errno != ENFILE) || p->n == 0) {
                local_err(err, "open", d->tmp, errno);
                goto out;
            }
            p->limit = p->n; /* fewer than we thought: live with what is open */
        }
        {
            /* budget used up: close the oldest idle one, else wait for one */
            int closed = 0;
            for (unsigned i = 0; i < p->n && !closed; i++)
                if (p->open[i]->users == 0) {
                    pool_close_locked(p, p->open[i]);
                    closed = 1;
                }
            if (!closed)
                pthread_cond_wait(&p->cv, &p->mu);
        }
    }
    d->users++;
    fd = d->fd;
out:
    pthread_mutex_unlock(&p->mu);
    return fd;
}

/* Done writing with the descriptor (a file whose last chunk is in closes). */
static void fd_release(struct rdest *d)
{
    struct fdpool *p = d->pool;
    pthread_mutex_lock(&p->mu);
    d->users--;
    if (d->left == 0 && d->users == 0 && d->fd >= 0)
        pool_close_locked(p, d);
    else if (d->users == 0)
        pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* One more chunk of the file is in, nothing to write (it closes the file
 * after its last chunk). */
static void chunk_in(struct rdest *d)
{
    struct fdpool *p = d->pool;
    pthread_mutex_lock(&p->mu);
    if (d->left)
        d->left--;
    if (d->left == 0 && d->users == 0 && d->fd >= 0)
        pool_close_locked(p, d);
    pthread_mutex_unlock(&p->mu);
}

static ckpt_status flush_behind(struct rdest *d, uint64_t n, char *err)
{
    uint64_t cur = __atomic_add_fetch(&d->unsynced, n, __ATOMIC_RELAXED);
    while (cur >= FLUSH_EVERY) {
        if (__atomic_compare_exchange_n(&d->unsynced, &cur, 0, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
            ckpt_status st = CKPT_OK;
            int fd = fd_acquire(d, err);
            if (fd < 0)
                return CKPT_E_IO;
            if (sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE) != 0)
                st = local_err(err, "sync_file_range", d->tmp, errno);
            fd_release(d);
            return st;
        }
    }
    return CKPT_OK;
}

/* Write n bytes at off of a restored file. Writes into one file are
 * serialized: the kernel serializes them anyway, and its waiters spin. */
static ckpt_status write_at(struct rdest *d, uint64_t off, const uint8_t *p, size_t n, char *err)
{
    ckpt_status st = CKPT_OK;
    int fd = fd_acquire(d, err);
    if (fd < 0)
        return CKPT_E_IO;
    pthread_mutex_lock(&d->wmu);
    for (size_t done = 0; done < n;) {
        ssize_t w = pwrite(fd, p + done, n - done, (off_t)(off + done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            st = local_err(err, "write", d->tmp, errno);
            break;
        }
        done += (size_t)w;
    }
    pthread_mutex_unlock(&d->wmu);
    fd_release(d);
    return st;
}

/* Decode one chunk object and put its bytes where they go. */
static ckpt_status deliver(struct ckpt_ctx *ctx, struct ckpt_codec_ws *ws, const struct rent *e,
                           const uint8_t *obj, char *err)
{
    const struct ckpt_chunk_ref *c = e->c;
    const uint8_t *raw;
    ckpt_status st;
    if (e->d && e->d->kind == CKPT_ITEM_MEM)
        return ckpt__chunk_decode(ws, obj, c->stored_len, c->id, e->d->ptr + e->off,
                                  c->raw_len, err);
    st = ckpt__chunk_view(ws, obj, c->stored_len, c->id, c->raw_len, &raw, err);
    if (st || !e->d)
        return st;
    if (e->d->kind == CKPT_ITEM_DEVICE)
        return ckpt__cuda_h2d(ctx, (uint8_t *)e->d->dev + e->off, raw, c->raw_len, err);
    st = write_at(e->d, e->off, raw, c->raw_len, err);
    if (!st && ctx->restore_sync)
        st = flush_behind(e->d, c->raw_len, err);
    if (!st)
        chunk_in(e->d);
    return st;
}

/* progress (ckpt_progress): one chunk delivered or verified */
static void counted(struct ckpt_ctx *ctx, const struct rent *e)
{
    ckpt__progress_add(&ctx->progress.bytes_done, e->c->raw_len);
    ckpt__progress_add(&ctx->progress.stored_bytes, e->c->stored_len);
    ckpt__progress_add(&ctx->progress.chunks_done, 1);
}

static void rjob_report(struct ckpt_ctx *ctx, struct rjob *j, const struct rent *e,
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

static int stream_piece(struct early *a, const struct rent *e, const uint8_t *payload,
                        size_t upto)
{
    char derr[CKPT_ERR_MAX];
    size_t n = upto - a->sdone;

    XXH3_128bits_update(a->xs, payload + a->sdone, n);
    if (e->d && write_at(e->d, e->off + a->sdone, payload + a->sdone, n, derr) != CKPT_OK)
        return -1;
    a->sdone = upto;
    return 0;
}

static int stream_matches(struct early *a, const struct rent *e)
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
        const struct rent *e = &a->j->e[*a->next];
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
            if (deliver(a->ctx, a->ws, e, a->buf + at, derr) != CKPT_OK) {
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
                 flush_behind(e->d, e->c->raw_len, derr) != CKPT_OK)) {
                a->stop = 1;
                break;
            }
            if (e->d)
                chunk_in(e->d);
        }
        counted(a->ctx, e);
        (*a->next)++;
        a->mode = 0;
    }
    return 0;
}

static void rjob_fn(struct ckpt_ctx *ctx, void *arg, struct ckpt_codec_ws *ws)
{
    struct rjob *j = arg;
    XXH3_state_t *xs = j->ranged ? XXH3_createState() : NULL;
    char err[CKPT_ERR_MAX] = "", derr[CKPT_ERR_MAX] = "", msg[CKPT_ERR_MAX + 400] = "";
    ckpt_status st = CKPT_OK, first = CKPT_OK;
    size_t next = 0; /* entries before it are delivered */

    if (j->b->st && !j->bad) /* a restore that already failed: skip */
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
            const struct rent *e = &j->e[next];
            const uint8_t *obj = (const uint8_t *)buf + (j->ranged ? e->c->off - j->off : 0);
            st = deliver(ctx, ws, e, obj, derr);
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
    const struct rent *x = a, *y = b;
    if (x->c->pack != y->c->pack)
        return x->c->pack < y->c->pack ? -1 : 1;
    return x->c->off < y->c->off ? -1 : x->c->off > y->c->off;
}

static ckpt_status submit_job(struct ckpt_ctx *ctx, struct ckpt_batch *b, struct rjob *tmpl,
                              const struct rent *e, size_t n)
{
    struct rjob *j = malloc(sizeof *j);
    if (!j || !(j->e = malloc(n * sizeof *e))) {
        free(j);
        ckpt__batch_done(b, CKPT_E_NOMEM, "queue");
        return CKPT_E_NOMEM;
    }
    {
        struct rent *keep = j->e;
        *j = *tmpl;
        j->e = keep;
    }
    memcpy(j->e, e, n * sizeof *e);
    j->n = n;
    if (ckpt__pool_submit(ctx, rjob_fn, j)) {
        free(j->e);
        free(j);
        ckpt__batch_done(b, CKPT_E_NOMEM, "queue");
        return CKPT_E_NOMEM;
    }
    return CKPT_OK;
}

/* Queue the fetches for `n` chunks of manifest m (sorts ents): one job per
 * chunk object, one per range of a pack. The caller holds a token of b. */
static ckpt_status plan(struct ckpt_ctx *ctx, struct ckpt_batch *b, const struct ckpt_manifest *m,
                        struct rent *ents, size_t n, size_t *bad)
{
    struct rjob t;
    size_t i = 0;
    memset(&t, 0, sizeof t);
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

ckpt_status ckpt__verify_manifest(struct ckpt_ctx *ctx, const struct ckpt_manifest *m,
                                  struct ckpt_idset *seen, size_t *bad, char *err)
{
    struct ckpt_batch b;
    struct rent *ents;
    size_t n = 0, total = 0;
    ckpt_status st;
    for (size_t k = 0; k < m->nitems; k++)
        total += m->items[k].nchunks;
    ents = calloc(total ? total : 1, sizeof *ents);
    if (!ents)
        return CKPT_E_NOMEM;
    for (size_t k = 0; k < m->nitems; k++)
        for (size_t c = 0; c < m->items[k].nchunks; c++) {
            const struct ckpt_chunk_ref *r = &m->items[k].chunks[c];
            if (ckpt__idset_get(seen, r->id, NULL))
                continue; /* checked already (shared with a newer checkpoint) */
            ckpt__idset_put(seen, r->id, 1);
            ents[n].c = r;
            ents[n].item = m->items[k].name;
            ents[n].idx = c;
            n++;
        }
    ckpt__batch_init(&b);
    b.pending = 1;
    plan(ctx, &b, m, ents, n, bad);
    ckpt__progress_add(&ctx->progress.checkpoints_done, 1);
    ckpt__batch_done(&b, CKPT_OK, NULL);
    st = ckpt__batch_wait(&b);
    if (st)
        ckpt__seterr(err, "%s", b.err);
    ckpt__batch_destroy(&b);
    free(ents);
    return st;
}

/* Rename every restored file into place when all went well (fsynced first
 * when `sync`), else remove the temporary files. */
static void dest_cleanup(struct rdest *d, size_t n, int sync, ckpt_status *st, char *err)
{
    for (size_t i = 0; i < n; i++) {
        if (d[i].fd >= 0) {
            close(d[i].fd);
            d[i].fd = -1;
        }
        if (d[i].tmp && d[i].kind == CKPT_ITEM_FILE) {
            if (*st == CKPT_OK && sync) {
                int fd = open(d[i].tmp, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0 || fsync(fd) != 0)
                    *st = local_err(err, fd < 0 ? "open" : "fsync", d[i].tmp, errno);
                if (fd >= 0)
                    close(fd);
            }
            if (*st == CKPT_OK && rename(d[i].tmp, d[i].final) != 0)
                *st = local_err(err, "rename to", d[i].final, errno);
            if (*st)
                unlink(d[i].tmp);
        }
        free(d[i].tmp);
        free(d[i].final);
        pthread_mutex_destroy(&d[i].wmu);
    }
    free(d);
}

/* Create the temporary file of a restored one, sized, with its final mode
 * (owner-only whatever the original allowed others: DESIGN §6), and close
 * it: it is opened again while its chunks are written (fdpool). */
static ckpt_status open_tmp(const char *final, uint64_t size, struct rdest *d, char *err)
{
    size_t n = strlen(final) + 64;
    ckpt_status st = CKPT_OK;
    int fd;
    d->final = ckpt__strdup(final);
    d->tmp = malloc(n);
    if (!d->final || !d->tmp)
        return CKPT_E_NOMEM;
    snprintf(d->tmp, n, "%s.ckpt-tmp.%d", final, (int)getpid());
    unlink(d->tmp);
    fd = open(d->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        st = local_err(err, "create", d->tmp, errno);
        free(d->tmp);
        d->tmp = NULL; /* nothing of ours to remove */
        return st;
    }
    if (ftruncate(fd, (off_t)size) != 0)
        st = local_err(err, "size", d->tmp, errno);
    else if (fchmod(fd, (d->mode & 0700) | 0600) != 0)
        st = local_err(err, "chmod", d->tmp, errno);
    close(fd);
    return st;
}

/* The budget of descriptors a restore may hold open: a quarter of what
 * RLIMIT_NOFILE leaves free now, 4..FDS_MAX. */
static unsigned fd_budget(void)
{
    struct rlimit rl;
    unsigned used = 0, free_fds;
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        while (readdir(d))
            used++;
        closedir(d);
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return FDS_MAX;
    free_fds = rl.rlim_cur > used ? (unsigned)(rl.rlim_cur - used) : 0;
    free_fds /= 4;
    return free_fds < 4 ? 4 : free_fds > FDS_MAX ? FDS_MAX : free_fds;
}

/* Room on the local file systems the restore writes to, before anything is
 * written: the sum of the files' sizes (a chunk a manifest names many times
 * counts every time: that many bytes get written) against what each file
 * system has free for us. */
static ckpt_status check_space(const struct ckpt_manifest *m, const struct rdest *d,
                               const char *dir, char *err)
{
    struct fsneed {
        unsigned long fsid;
        uint64_t need, avail;
        char path[512];
    } fs[8];
    size_t nfs = 0;
    for (size_t i = 0; i < m->nitems; i++) {
        struct statvfs sv;
        char where[4096];
        const char *slash;
        size_t k;
        if (!d[i].final || m->items[i].kind == CKPT_ITEM_LINK)
            continue;
        if (dir) {
            snprintf(where, sizeof where, "%s", dir);
        } else {
            slash = strrchr(d[i].final, '/');
            snprintf(where, sizeof where, "%.*s", slash ? (int)(slash - d[i].final) : 1,
                     slash ? d[i].final : ".");
            if (!where[0])
                snprintf(where, sizeof where, "/");
        }
        if (statvfs(where, &sv) != 0)
            continue; /* the writes will say what is wrong */
        for (k = 0; k < nfs && fs[k].fsid != sv.f_fsid; k++)
            ;
        if (k == nfs) {
            if (nfs == sizeof fs / sizeof fs[0])
                continue;
            fs[nfs].fsid = sv.f_fsid;
            fs[nfs].need = 0;
            fs[nfs].avail = (uint64_t)sv.f_bavail * sv.f_frsize;
            snprintf(fs[nfs].path, sizeof fs[nfs].path, "%.500s", where);
            nfs++;
        }
        fs[k].need += m->items[i].size;
        if (fs[k].need > fs[k].avail) {
            ckpt__seterr(err, "local disk: not enough space in %s for checkpoint step %" PRIu64
                         ": its files need %.1f MiB, %.1f MiB free; nothing written",
                         fs[k].path, m->step, (double)fs[k].need / 1048576.0,
                         (double)fs[k].avail / 1048576.0);
            return CKPT_E_NOSPACE;
        }
    }
    return CKPT_OK;
}

/* Create the directories of `rel` under `dir`, refusing any component that
 * exists and is not a real directory (a symbolic link could point anywhere). */
static ckpt_status safe_parents(const char *dir, const char *rel, char *err)
{
    char path[4096];
    size_t dl = strlen(dir);
    const char *p = rel;
    if (dl + strlen(rel) + 2 > sizeof path)
        return CKPT_E_INVAL;
    memcpy(path, dir, dl);
    path[dl] = '\0';
    while ((p = strchr(p, '/'))) {
        struct stat sb;
        snprintf(path + dl, sizeof path - dl, "/%.*s", (int)(p - rel), rel);
        if (lstat(path, &sb) == 0) {
            if (!S_ISDIR(sb.st_mode)) {
                ckpt__seterr(err, "%s exists and is not a directory: refusing to write "
                                  "through it", path);
                return CKPT_E_UNSAFE;
            }
        } else if (mkdir(path, 0700) != 0 && errno != EEXIST) {
            ckpt__seterr(err, "mkdir %s: %s", path, strerror(errno));
            return ckpt__errno_status(errno);
        }
        p++;
    }
    return CKPT_OK;
}

/* The checkpoint's links, once every file is in place: each made under a
 * temporary name and renamed over whatever has its name (a link or file
 * from an earlier restore; a directory stays and fails the restore), so
 * nothing is ever written through a link, and a reader sees the old entry
 * or the new link. Targets were checked with the manifest
 * (ckpt__manifest_check): relative, landing on an item of this checkpoint. */
static ckpt_status make_links(const struct ckpt_manifest *m, const char *dir, char *err)
{
    char final[8192], tmp[8300];
    ckpt_status st = CKPT_OK;
    for (size_t i = 0; i < m->nitems && !st; i++) {
        const struct ckpt_mitem *mi = &m->items[i];
        if (mi->kind != CKPT_ITEM_LINK)
            continue;
        if ((size_t)snprintf(final, sizeof final, "%s/%s", dir, mi->name) >= sizeof final) {
            ckpt__seterr(err, "%s/%s: path too long", dir, mi->name);
            st = CKPT_E_INVAL;
            break;
        }
        snprintf(tmp, sizeof tmp, "%s.ckpt-tmp.%d", final, (int)getpid());
        st = safe_parents(dir, mi->name, err);
        if (st)
            break;
        unlink(tmp);
        if (symlink(mi->target, tmp) != 0) {
            ckpt__seterr(err, "symlink %s: %s", tmp, strerror(errno));
            st = ckpt__errno_status(errno);
        } else if (rename(tmp, final) != 0) {
            ckpt__seterr(err, "link %s: %s", final, strerror(errno));
            st = ckpt__errno_status(errno);
            unlink(tmp);
        }
    }
    return st;
}

static ckpt_status restore_one(struct ckpt_ctx *ctx, const struct ckpt_manifest *m,
                               const char *dir, struct ckpt_idset *bad, char *err)
{
    struct rdest *d = calloc(m->nitems ? m->nitems : 1, sizeof *d);
    struct fdpool pool;
    struct ckpt_batch b;
    ckpt_status st = CKPT_OK;
    struct rent *ents = NULL;
    size_t i, total = 0, n = 0;
    for (i = 0; i < m->nitems; i++)
        total += m->items[i].nchunks;
    ents = calloc(total ? total : 1, sizeof *ents);
    if (!d || !ents) {
        free(d);
        free(ents);
        return CKPT_E_NOMEM;
    }
    memset(&pool, 0, sizeof pool);
    pthread_mutex_init(&pool.mu, NULL);
    pthread_cond_init(&pool.cv, NULL);
    pool.limit = fd_budget();
    for (i = 0; i < m->nitems; i++) {
        d[i].fd = -1;
        d[i].pool = &pool;
        d[i].left = m->items[i].nchunks;
        pthread_mutex_init(&d[i].wmu, NULL);
    }
    /* room first: a full disk is reported before anything is written */
    for (i = 0; i < m->nitems && dir; i++) {
        char final[4096];
        snprintf(final, sizeof final, "%s/%s", dir, m->items[i].name);
        d[i].final = m->items[i].kind == CKPT_ITEM_LINK ? NULL : ckpt__strdup(final);
    }
    for (struct ckpt_item *it = dir ? NULL : ctx->items; it; it = it->next)
        for (i = 0; i < m->nitems; i++)
            if (it->kind == CKPT_ITEM_FILE && !strcmp(it->name, m->items[i].name))
                d[i].final = ckpt__strdup(it->path);
    st = check_space(m, d, dir, err);
    for (i = 0; i < m->nitems; i++) {
        free(d[i].final);
        d[i].final = NULL;
    }
    ckpt__batch_init(&b);
    b.bad = bad;
    pthread_mutex_lock(&b.mu);
    b.pending = 1; /* our token: jobs may finish while we submit */
    pthread_mutex_unlock(&b.mu);
    for (i = 0; i < m->nitems && !st; i++) {
        const struct ckpt_mitem *mi = &m->items[i];
        d[i].mode = mi->mode ? mi->mode : 0600;
        if (mi->kind == CKPT_ITEM_LINK)
            continue; /* made last (make_links), and never into a region */
        if (dir) {
            char final[4096];
            if (!ckpt__name_valid(mi->name)) {
                ckpt__seterr(err, "item name '%s' would escape %s", mi->name, dir);
                st = CKPT_E_UNSAFE;
                break;
            }
            if ((size_t)snprintf(final, sizeof final, "%s/%s", dir, mi->name) >= sizeof final) {
                ckpt__seterr(err, "%s/%s: path too long", dir, mi->name);
                st = CKPT_E_INVAL;
                break;
            }
            d[i].kind = CKPT_ITEM_FILE;
            st = safe_parents(dir, mi->name, err);
            if (!st)
                st = open_tmp(final, mi->size, &d[i], err);
        } else {
            struct ckpt_item *it;
            for (it = ctx->items; it && strcmp(it->name, mi->name); it = it->next)
                ;
            if (!it)
                continue; /* stored but not protected: ignored */
            d[i].kind = it->kind;
            if (it->kind == CKPT_ITEM_MEM)
                d[i].ptr = it->ptr;
            else if (it->kind == CKPT_ITEM_DEVICE)
                d[i].dev = it->ptr;
            else
                st = open_tmp(it->path, mi->size, &d[i], err);
        }
        if (!st) {
            uint64_t off = 0;
            for (size_t c = 0; c < mi->nchunks; c++) {
                ents[n].c = &mi->chunks[c];
                ents[n].d = &d[i];
                ents[n].off = off;
                ents[n].item = mi->name;
                ents[n].idx = c;
                off += mi->chunks[c].raw_len;
                n++;
            }
        }
    }
    if (!st)
        st = plan(ctx, &b, m, ents, n, NULL);
    ckpt__batch_done(&b, CKPT_OK, NULL);
    {
        ckpt_status bst = ckpt__batch_wait(&b);
        if (!st && bst) {
            st = bst;
            ckpt__seterr(err, "%s", b.err);
        }
    }
    ckpt__batch_destroy(&b);
    dest_cleanup(d, m->nitems, ctx->restore_sync, &st, err);
    pthread_mutex_destroy(&pool.mu);
    pthread_cond_destroy(&pool.cv);
    if (st == CKPT_OK && dir)
        st = make_links(m, dir, err);
    free(ents);
    return st;
}

/* Check sizes and names before anything is written. */
static ckpt_status check_shape(struct ckpt_ctx *ctx, const struct ckpt_manifest *m)
{
    for (struct ckpt_item *it = ctx->items; it; it = it->next) {
        const struct ckpt_mitem *mi = NULL;
        if (it->kind == CKPT_ITEM_LINK)
            continue; /* nothing to restore into */
        for (size_t i = 0; i < m->nitems; i++)
            if (!strcmp(m->items[i].name, it->name))
                mi = &m->items[i];
        if (!mi || mi->kind == CKPT_ITEM_LINK) {
            ckpt__set_ctx_err(ctx, "item '%s' is %s checkpoint step %" PRIu64
                                   ": nothing restored", it->name,
                              mi ? "a link in" : "not in", m->step);
            return CKPT_E_MISMATCH;
        }
        if (it->kind != CKPT_ITEM_FILE && (uint64_t)it->size != mi->size) {
            ckpt__set_ctx_err(ctx, "item '%s' is %zu bytes, checkpoint step %" PRIu64
                                   " holds %" PRIu64 ": nothing restored",
                              it->name, it->size, m->step, mi->size);
            return CKPT_E_SIZE;
        }
    }
    return CKPT_OK;
}

/* Restore checkpoint `want` (or, CKPT_STEP_LATEST, the first of the resume
 * order that restores whole). Any missing or damaged part (manifest,
 * chunk, pack) sends a latest-restore to the next older checkpoint, as
 * does one this version cannot read (newer format, several ranks); a local
 * error (the target disk full, read-only, out of file descriptors) or a
 * store error stops it: an older checkpoint would not fare better, and
 * nothing is reported damaged that is not. A context holding a lease epoch
 * (ckptrun run/recover, a trainer under it) then marks the checkpoints it
 * found damaged in HEAD (ckpt__mark_damaged). */
static ckpt_status restore_common(struct ckpt_ctx *ctx, uint64_t want, const char *dir,
                                  uint64_t *restored)
{
    struct ckpt_head h;
    bool exists;
    ckpt_status st, last = CKPT_E_NOENT;
    size_t start = 0, nbad = 0;
    char err[CKPT_ERR_MAX] = "", **bad_keys = NULL;
    struct ckpt_idset bad_ids;
    int tried_all = 1;

    ckpt__wait(ctx);
    ckpt__idset_init(&bad_ids);
    ckpt__progress_begin(&ctx->progress, CKPT_PROGRESS_RESTORE, want);
    st = ckpt__read_head(ctx, &h, NULL, &exists);
    if (st)
        return st;
    if (!exists || h.n == 0) {
        ckpt__set_ctx_err(ctx, "run %s has no committed checkpoint in %s", ctx->run,
                          ctx->store_url);
        ckpt__head_free(&h);
        return CKPT_E_NOENT;
    }
    if (want != CKPT_STEP_LATEST) {
        for (start = 0; start < h.n && h.entries[start].step != want; start++)
            ;
        if (start == h.n) {
            ckpt__set_ctx_err(ctx, "run %s has no committed checkpoint at step %" PRIu64,
                              ctx->run, want);
            ckpt__head_free(&h);
            return CKPT_E_NOENT;
        }
    }
    bad_keys = calloc(h.n, sizeof *bad_keys);
    if (!bad_keys) {
        ckpt__head_free(&h);
        return CKPT_E_NOMEM;
    }
    for (size_t i = start; i < h.n; i++) {
        struct ckpt_manifest m;
        st = ckpt__read_manifest(ctx, h.entries[i].manifest, &m);
        if (st == CKPT_E_NOENT) {
            ckpt__set_ctx_err(ctx, "checkpoint step %" PRIu64 " is damaged: its manifest %s "
                              "is missing", h.entries[i].step, h.entries[i].manifest);
            st = CKPT_E_CORRUPT;
        }
        if (st == CKPT_OK && m.world_size != 1) {
            ckpt__set_ctx_err(ctx, "step %" PRIu64 " is one part of a %u-rank checkpoint: "
                                   "this version restores single-process checkpoints only",
                              m.step, m.world_size);
            ckpt__manifest_free(&m);
            st = CKPT_E_UNSUPPORTED;
        }
        if (st == CKPT_OK && !dir) {
            st = check_shape(ctx, &m);
            if (st) {
                ckpt__manifest_free(&m);
                tried_all = 0;
                break; /* the program's shape is wrong, not the data */
            }
        }
        if (st == CKPT_OK) {
            st = restore_one(ctx, &m, dir, &bad_ids, err);
            if (st == CKPT_E_CORRUPT)
                ckpt__set_ctx_err(ctx, "checkpoint step %" PRIu64 " is damaged: %s", m.step,
                                  err);
            else if (st)
                ckpt__set_ctx_err(ctx, "restoring checkpoint step %" PRIu64 " %s%s: %s (%s)",
                                  m.step, dir ? "into " : "into the protected items",
                                  dir ? dir : "", err, ckpt_strerror(st));
            ckpt__manifest_free(&m);
        }
        if (st == CKPT_OK) {
            if (restored)
                *restored = h.entries[i].step;
            if (i != start)
                ckpt__log(&ctx->log, CKPT_LOG_WARN, "restore",
                          "restored step %" PRIu64 " instead of the newer step %" PRIu64
                          ", which %s", h.entries[i].step, h.entries[start].step,
                          nbad ? "is damaged" : "this version cannot read");
            break;
        }
        last = st;
        ckpt__log(&ctx->log, st == CKPT_E_CORRUPT || st == CKPT_E_UNSUPPORTED ? CKPT_LOG_WARN
                                                                             : CKPT_LOG_ERROR,
                  "restore", "%s", ctx->errmsg);
        if (st == CKPT_E_CORRUPT)
            bad_keys[nbad++] = h.entries[i].manifest;
        if ((st != CKPT_E_CORRUPT && st != CKPT_E_UNSUPPORTED) || want != CKPT_STEP_LATEST) {
            tried_all = 0;
            break; /* store down, disk full...: trying older data will not help */
        }
        if (i + 1 < h.n)
            ckpt__log(&ctx->log, CKPT_LOG_WARN, "restore", "falling back to step %" PRIu64,
                      h.entries[i + 1].step);
    }
    if (st != CKPT_OK && last != CKPT_E_NOENT)
        st = last;
    /* what was found damaged is never used again: not for dedup, and (by
     * the lease holder) not for resuming */
    if (bad_ids.n) {
        pthread_mutex_lock(&ctx->run_mu);
        for (size_t k = 0; k < bad_ids.cap; k++)
            if (bad_ids.used[k]) {
                uint64_t li;
                ckpt__idset_put(&ctx->bad_chunks, bad_ids.keys[k], 1);
                if (ckpt__idset_get(&ctx->idx.known, bad_ids.keys[k], &li))
                    ckpt__idset_put(&ctx->idx.known, bad_ids.keys[k], UINT64_MAX);
            }
        pthread_mutex_unlock(&ctx->run_mu);
    }
    if (nbad && ctx->epoch && (st == CKPT_OK || tried_all)) {
        char saved[CKPT_ERR_MAX];
        ckpt_status mst;
        snprintf(saved, sizeof saved, "%s", ctx->errmsg);
        mst = ckpt__mark_damaged(ctx, bad_keys, nbad);
        if (mst)
            ckpt__log(&ctx->log, CKPT_LOG_WARN, "restore", "cannot mark the damaged "
                      "checkpoints in HEAD: %s (%s)", ckpt_strerror(mst), ctx->errmsg);
        ckpt__set_ctx_err(ctx, "%s", saved);
    }
    free(bad_keys);
    ckpt__idset_free(&bad_ids);
    ckpt__head_free(&h);
    return st;
}

ckpt_status ckpt_restore(struct ckpt_ctx *ctx, uint64_t *step)
{
    if (!ctx)
        return CKPT_E_INVAL;
    if (!ctx->items) {
        ckpt__set_ctx_err(ctx, "nothing is protected: call ckpt_protect() before restoring");
        return CKPT_E_INVAL;
    }
    return restore_common(ctx, CKPT_STEP_LATEST, NULL, step);
}

ckpt_status ckpt_restore_dir(struct ckpt_ctx *ctx, uint64_t step, const char *dir,
                             uint64_t *restored)
{
    struct stat sb;
    if (!ctx || !dir || dir[0] == '\0')
        return CKPT_E_INVAL;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        ckpt__set_ctx_err(ctx, "cannot create %s: %s", dir, strerror(errno));
        return ckpt__errno_status(errno);
    }
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        ckpt__set_ctx_err(ctx, "%s is not a directory", dir);
        return CKPT_E_IO;
    }
    return restore_common(ctx, step, dir, restored);
}
