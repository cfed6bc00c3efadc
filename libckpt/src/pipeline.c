/* pipeline.c -- worker pool, staging blocks, save and commit.
 *
 * ckpt_save() (training thread) copies each protected region chunk by chunk
 * into staging blocks and queues one job per chunk. Workers hash each chunk
 * (XXH3-128), skip it when the run already holds it, else filter, compress
 * and put it (deferred durability): as its own object on a local disk, or
 * appended to the save's open pack on an object store; the worker whose
 * chunk fills that pack seals it and uploads it (at most
 * ctx->pack_inflight at once), the commit uploads the last one. The worker
 * that finishes the last chunk queues the commit job: barrier (all chunks durable), manifest (durable),
 * HEAD (conditional on the etag this writer last saw), then retention.
 *
 * Without a staging cap the chunk jobs are held back until the copy is done,
 * so workers do not compete with the caller's memcpy for cores and memory
 * bandwidth: the stall is one memcpy. With a cap, jobs run as they are
 * queued and the caller blocks only for free blocks. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

struct qjob {
    ckpt_job_fn fn;
    void *arg;
    struct qjob *next;
};

struct ckpt_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct qjob *head, *tail;
    int hold, stop;
    unsigned n;
    pthread_t *threads;
    struct ckpt_ctx *ctx;
};

static void *worker_main(void *arg)
{
    struct ckpt_pool *p = arg;
    struct ckpt_codec_ws *ws = ckpt__codec_ws_new(p->ctx->chunk_bytes);
    for (;;) {
        struct qjob *j;
        pthread_mutex_lock(&p->mu);
        while (!p->stop && (p->hold || !p->head))
            pthread_cond_wait(&p->cv, &p->mu);
        if (!p->head) { /* stop, and nothing left */
            pthread_mutex_unlock(&p->mu);
            break;
        }
        j = p->head;
        p->head = j->next;
        if (!p->head)
            p->tail = NULL;
        pthread_mutex_unlock(&p->mu);
        /* A worker without its buffers still runs jobs: they report NOMEM. */
        j->fn(p->ctx, j->arg, ws);
        free(j);
    }
    ckpt__codec_ws_free(ws);
    return NULL;
}

ckpt_status ckpt__pool_start(struct ckpt_ctx *ctx)
{
    struct ckpt_pool *p = calloc(1, sizeof *p);
    if (!p)
        return CKPT_E_NOMEM;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->ctx = ctx;
    p->threads = calloc(ctx->workers, sizeof *p->threads);
    if (!p->threads) {
        free(p);
        return CKPT_E_NOMEM;
    }
    ctx->pool = p;
    for (unsigned i = 0; i < ctx->workers; i++) {
        if (ckpt_thread_start(&p->threads[i], worker_main, p) != 0)
            break;
        p->n++;
    }
    if (p->n == 0) {
        ckpt__pool_stop(ctx);
        return CKPT_E_NOMEM;
    }
    return CKPT_OK;
}

void ckpt__pool_stop(struct ckpt_ctx *ctx)
{
    struct ckpt_pool *p = ctx->pool;
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    p->hold = 0;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->n; i++)
        pthread_join(p->threads[i], NULL);
    free(p->threads);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
    ctx->pool = NULL;
}

ckpt_status ckpt__pool_submit(struct ckpt_ctx *ctx, ckpt_job_fn fn, void *arg)
{
    struct ckpt_pool *p = ctx->pool;
    struct qjob *j = ckpt__failpoint("pool_submit") ? NULL : malloc(sizeof *j);
    if (!j)
        return CKPT_E_NOMEM;
    j->fn = fn;
    j->arg = arg;
    j->next = NULL;
    pthread_mutex_lock(&p->mu);
    if (p->tail)
        p->tail->next = j;
    else
        p->head = j;
    p->tail = j;
    if (!p->hold)
        pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return CKPT_OK;
}

void ckpt__pool_hold(struct ckpt_ctx *ctx, int hold)
{
    struct ckpt_pool *p = ctx->pool;
    pthread_mutex_lock(&p->mu);
    p->hold = hold;
    if (!hold)
        pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* ---- batches (restore, verify) ------------------------------------------ */
void ckpt__batch_init(struct ckpt_batch *b)
{
    memset(b, 0, sizeof *b);
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
}

void ckpt__batch_destroy(struct ckpt_batch *b)
{
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
}

void ckpt__batch_done(struct ckpt_batch *b, ckpt_status st, const char *err)
{
    pthread_mutex_lock(&b->mu);
    if (st && !b->st) {
        b->st = st;
        snprintf(b->err, sizeof b->err, "%s", err ? err : "");
    }
    if (--b->pending == 0)
        pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

ckpt_status ckpt__batch_wait(struct ckpt_batch *b)
{
    ckpt_status st;
    pthread_mutex_lock(&b->mu);
    while (b->pending)
        pthread_cond_wait(&b->cv, &b->mu);
    st = b->st;
    pthread_mutex_unlock(&b->mu);
    return st;
}

/* ---- staging blocks ---------------------------------------------------------
 * Blocks are slices of anonymous mappings asked for transparent huge pages
 * and touched once when reserved (at ckpt_protect time): on virtual machines
 * first-touch faults can cost more than the copy itself, and they must not
 * land inside ckpt_save()'s stall. */
struct ckpt_arena *ckpt__arena_new(size_t chunk, size_t n)
{
    struct ckpt_arena *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->len = chunk * n;
    a->base = mmap(NULL, a->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    a->blocks = calloc(n, sizeof *a->blocks);
    if (a->base == MAP_FAILED || !a->blocks) {
        if (a->base != MAP_FAILED)
            munmap(a->base, a->len);
        free(a->blocks);
        free(a);
        return NULL;
    }
#ifdef MADV_HUGEPAGE
    madvise(a->base, a->len, MADV_HUGEPAGE);
#endif
    memset(a->base, 0, a->len);
    for (size_t i = 0; i < n; i++) {
        a->blocks[i].data = (uint8_t *)a->base + i * chunk;
        a->blocks[i].next = i + 1 < n ? &a->blocks[i + 1] : NULL;
    }
    return a;
}

ckpt_status ckpt__blocks_reserve(struct ckpt_ctx *ctx, size_t n)
{
    struct ckpt_arena *a;
    size_t max = ctx->staging_max ? ctx->staging_max / ctx->chunk_bytes : SIZE_MAX;
    if (max == 0)
        max = 1;
    pthread_mutex_lock(&ctx->blk_mu);
    if (n > max)
        n = max;
    n = n > ctx->blk_total ? n - ctx->blk_total : 0;
    pthread_mutex_unlock(&ctx->blk_mu);
    if (!n)
        return CKPT_OK;
    a = ckpt__arena_new(ctx->chunk_bytes, n);
    if (!a)
        return CKPT_E_NOMEM;
    pthread_mutex_lock(&ctx->blk_mu);
    a->next = ctx->arenas;
    ctx->arenas = a;
    a->blocks[n - 1].next = ctx->blk_free;
    ctx->blk_free = &a->blocks[0];
    ctx->blk_total += n;
    pthread_cond_broadcast(&ctx->blk_cv);
    pthread_mutex_unlock(&ctx->blk_mu);
    return CKPT_OK;
}

static struct ckpt_block *block_get(struct ckpt_ctx *ctx)
{
    struct ckpt_block *b = NULL;
    pthread_mutex_lock(&ctx->blk_mu);
    for (;;) {
        if (ctx->blk_free) {
            b = ctx->blk_free;
            ctx->blk_free = b->next;
            break;
        }
        if (!ctx->staging_max || (ctx->blk_total + 1) * ctx->chunk_bytes <= ctx->staging_max ||
            ctx->blk_total == 0) {
            /* not reserved (a region grew?): take one more, faults and all */
            struct ckpt_arena *a = ckpt__arena_new(ctx->chunk_bytes, 1);
            if (a) {
                a->next = ctx->arenas;
                ctx->arenas = a;
                b = &a->blocks[0];
                ctx->blk_total++;
            }
            break;
        }
        pthread_cond_wait(&ctx->blk_cv, &ctx->blk_mu);
    }
    pthread_mutex_unlock(&ctx->blk_mu);
    return b;
}

static void block_put(struct ckpt_ctx *ctx, struct ckpt_block *b)
{
    if (!b)
        return;
    pthread_mutex_lock(&ctx->blk_mu);
    b->next = ctx->blk_free;
    ctx->blk_free = b;
    pthread_cond_signal(&ctx->blk_cv);
    pthread_mutex_unlock(&ctx->blk_mu);
}

void ckpt__arena_free(struct ckpt_arena *a)
{
    if (!a)
        return;
    munmap(a->base, a->len);
    free(a->blocks);
    free(a);
}

void ckpt__blocks_free(struct ckpt_ctx *ctx)
{
    struct ckpt_arena *a, *n;
    for (a = ctx->arenas; a; a = n) {
        n = a->next;
        ckpt__arena_free(a);
    }
    ctx->arenas = NULL;
    ctx->blk_free = NULL;
    ctx->blk_total = 0;
}

/* ---- pack buffers ------------------------------------------------------------
 * A pack is assembled in memory and uploaded in one PUT: chunks are added
 * while it holds less than pack_bytes (so a pack is pack_bytes plus at most
 * one chunk object: 4 chunks of 8 MiB in a 32 MiB pack). Buffers are kept
 * for the next save (no page faults at every save); at most
 * pack_inflight + 1 exist (the open one and those uploading). */
struct ckpt_packbuf {
    struct ckpt_packbuf *next;
    uint8_t *data;
    size_t len, cap;
    uint32_t slot;              /* index in the save's manifest packs */
};

/* Pack memory is mapped (huge pages where the kernel has them) and kept:
 * page faults on fresh memory cost virtual machines more than the copy. */
static int packbuf_grow(struct ckpt_packbuf *b, size_t cap)
{
    uint8_t *d;
    cap = (cap + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
    d = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (d == MAP_FAILED)
        return -1;
#ifdef MADV_HUGEPAGE
    madvise(d, cap, MADV_HUGEPAGE);
#endif
    if (b->data) {
        memcpy(d, b->data, b->len);
        munmap(b->data, b->cap);
    }
    b->data = d;
    b->cap = cap;
    return 0;
}

static struct ckpt_packbuf *packbuf_get(struct ckpt_ctx *ctx)
{
    struct ckpt_packbuf *b = NULL;
    pthread_mutex_lock(&ctx->pk_mu);
    while (!ctx->pk_free && ctx->pk_total > ctx->pack_inflight)
        pthread_cond_wait(&ctx->pk_cv, &ctx->pk_mu);
    if (ctx->pk_free) {
        b = ctx->pk_free;
        ctx->pk_free = b->next;
    } else if ((b = calloc(1, sizeof *b)) != NULL) {
        /* a pack is sealed once it reaches pack_bytes: room for one more
         * chunk object past that (never larger than header + raw chunk) */
        if (packbuf_grow(b, ctx->pack_bytes + ctx->chunk_bytes + CKPT_CHUNK_HDR)) {
            free(b);
            b = NULL;
        } else {
            ctx->pk_total++;
        }
    }
    pthread_mutex_unlock(&ctx->pk_mu);
    if (b)
        b->len = 0;
    return b;
}

static void packbuf_put(struct ckpt_ctx *ctx, struct ckpt_packbuf *b)
{
    if (!b)
        return;
    pthread_mutex_lock(&ctx->pk_mu);
    b->next = ctx->pk_free;
    ctx->pk_free = b;
    pthread_cond_signal(&ctx->pk_cv);
    pthread_mutex_unlock(&ctx->pk_mu);
}

void ckpt__packbufs_free(struct ckpt_ctx *ctx)
{
    struct ckpt_packbuf *b, *n;
    for (b = ctx->pk_free; b; b = n) {
        n = b->next;
        munmap(b->data, b->cap);
        free(b);
    }
    ctx->pk_free = NULL;
    ctx->pk_total = 0;
}

/* ---- one save ---------------------------------------------------------------- */
struct ckpt_save {
    uint64_t step;
    uint64_t t0_ns;
    ckpt_codec codec;
    int level;
    struct ckpt_manifest m;     /* items + chunk refs filled by workers */
    char **paths;               /* per item: file path or NULL */
    struct fsnap *files;        /* per item: a protected file as ckpt_save saw it */
    pthread_mutex_t mu;
    /* packs (guarded by mu): this save's manifest's pack list, new packs
     * (id filled when uploaded) and older ones chunks were found in */
    struct ckpt_packbuf *open;  /* the pack being filled */
    struct ckpt_idset packslot; /* id of an older pack -> its slot */
    size_t pending;             /* chunk jobs + the submitter's token */
    ckpt_status st;
    char err[CKPT_ERR_MAX];
    uint64_t raw_bytes, new_bytes, stored_bytes;
};

/* A protected file as the snapshot saw it: what must still hold once every
 * chunk is read, for the bytes read to be one version of the file. */
struct fsnap {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
    mode_t mode;
    size_t left;                /* chunk jobs of the file not finished (sv->mu) */
    int changed;                /* a chunk job found another file or a shorter one */
    int as_is;                  /* CKPT_FILE_AS_IS: a change fails the save, no read again */
};

struct chunk_job {
    struct ckpt_save *sv;
    size_t item, chunk;
    uint64_t off;
    size_t len;
    struct ckpt_block *blk;   /* staging block (capped staging, devices) */
    const uint8_t *raw;       /* or the chunk inside the region's own stage */
};

static void commit_job(struct ckpt_ctx *ctx, void *arg, struct ckpt_codec_ws *ws);

static void save_fail(struct ckpt_save *sv, ckpt_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void save_fail(struct ckpt_save *sv, ckpt_status st, const char *fmt, ...)
{
    va_list ap;
    pthread_mutex_lock(&sv->mu);
    if (!sv->st) {
        sv->st = st;
        va_start(ap, fmt);
        vsnprintf(sv->err, sizeof sv->err, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&sv->mu);
}

/* Drop one reference; the last one queues the commit. */
static void save_unref(struct ckpt_ctx *ctx, struct ckpt_save *sv)
{
    int last;
    pthread_mutex_lock(&sv->mu);
    last = --sv->pending == 0;
    pthread_mutex_unlock(&sv->mu);
    if (last && ckpt__pool_submit(ctx, commit_job, sv) != CKPT_OK)
        commit_job(ctx, sv, NULL); /* cannot queue: commit (fail) here */
}

/* A new slot in the save's pack list (sv->mu held); UINT32_MAX nomem. */
static uint32_t pack_slot_new(struct ckpt_save *sv)
{
    struct ckpt_manifest *m = &sv->m;
    if ((m->npacks & (m->npacks - 1)) == 0) { /* 0, 1, 2, 4...: grow */
        struct ckpt_pack *p = realloc(m->packs, (m->npacks ? m->npacks * 2 : 16) * sizeof *p);
        if (!p)
            return UINT32_MAX;
        m->packs = p;
    }
    memset(&m->packs[m->npacks], 0, sizeof m->packs[0]);
    return (uint32_t)m->npacks++;
}

/* The slot of an older pack a known chunk lives in (sv->mu held). */
static uint32_t pack_slot_of(struct ckpt_save *sv, const struct ckpt_pack *p)
{
    uint64_t slot;
    uint32_t n;
    if (ckpt__idset_get(&sv->packslot, p->id, &slot))
        return (uint32_t)slot;
    n = pack_slot_new(sv);
    if (n == UINT32_MAX || ckpt__idset_put(&sv->packslot, p->id, n))
        return UINT32_MAX;
    sv->m.packs[n] = *p;
    return n;
}

/* Upload a full pack; on success its slot gets the pack's id and size. */
static ckpt_status pack_upload(struct ckpt_ctx *ctx, struct ckpt_save *sv,
                               struct ckpt_packbuf *b, char *err)
{
    struct ckpt_pack p;
    struct ckpt_put_opts po = { CKPT_PUT_PLAIN, NULL, 1 };
    char key[1024];
    ckpt_status st;
    /* A pack's name need only be unique (its chunks carry their own
     * checksums): 128 random bits, not another pass over its bytes. */
    if (getrandom(p.id, sizeof p.id, 0) != (ssize_t)sizeof p.id) {
        ckpt__seterr(err, "getrandom: %s", strerror(errno));
        return CKPT_E_IO;
    }
    p.size = b->len;
    ckpt__object_key(ctx->run, CKPT_OBJ_PACK, p.id, key, sizeof key);
    st = ctx->store->ops->put(ctx->store, key, b->data, b->len, &po, NULL, err);
    if (st == CKPT_OK) {
        ckpt__progress_add(&ctx->progress.stored_bytes, b->len);
        pthread_mutex_lock(&sv->mu);
        sv->m.packs[b->slot] = p;
        pthread_mutex_unlock(&sv->mu);
        ckpt__log(&ctx->log, CKPT_LOG_DEBUG, "save", "pack %s: %zu bytes", key, b->len);
    }
    return st;
}

/* Append one encoded chunk object to the save's open pack; the worker
 * whose chunk fills it (pack_bytes or more) seals it and uploads it at
 * once, so a pack leaves as soon as it is complete. */
static ckpt_status pack_append(struct ckpt_ctx *ctx, struct ckpt_save *sv, const void *hdr,
                               const void *payload, size_t plen, struct ckpt_chunk_ref *ref,
                               char *err)
{
    size_t len = CKPT_CHUNK_HDR + plen;
    struct ckpt_packbuf *spare = NULL, *full = NULL, *b;
    ckpt_status st = CKPT_OK;
    for (;;) {
        pthread_mutex_lock(&sv->mu);
        b = sv->open;
        if (!b && spare) {
            spare->slot = pack_slot_new(sv);
            if (spare->slot == UINT32_MAX) {
                pthread_mutex_unlock(&sv->mu);
                st = CKPT_E_NOMEM;
                break;
            }
            spare->len = 0;
            sv->open = b = spare;
            spare = NULL;
        }
        if (b && b->cap < b->len + len && packbuf_grow(b, b->len + len)) {
            /* a chunk larger than a pack, and no memory for it */
            pthread_mutex_unlock(&sv->mu);
            st = CKPT_E_NOMEM;
            break;
        }
        if (b) {
            memcpy(b->data + b->len, hdr, CKPT_CHUNK_HDR);
            memcpy(b->data + b->len + CKPT_CHUNK_HDR, payload, plen);
            ref->pack = b->slot + 1;
            ref->off = b->len;
            b->len += len;
            if (b->len >= ctx->pack_bytes) {
                full = b; /* sealed: ours to upload */
                sv->open = NULL;
            }
            pthread_mutex_unlock(&sv->mu);
            break;
        }
        pthread_mutex_unlock(&sv->mu);
        if (sv->st) { /* failed elsewhere: stop */
            st = sv->st;
            ckpt__seterr(err, "save already failed");
            break;
        }
        spare = packbuf_get(ctx);
        if (!spare) {
            st = CKPT_E_NOMEM;
            ckpt__seterr(err, "no memory for a %zu-byte pack", ctx->pack_bytes);
            break;
        }
    }
    packbuf_put(ctx, spare);
    if (full) {
        st = pack_upload(ctx, sv, full, err);
        packbuf_put(ctx, full);
    }
    return st;
}

/* How many times a protected file is read before a save gives up on it
 * (it kept changing while it was read). */
#define FILE_READS 3

static int ts_before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static int snap_same(const struct fsnap *f, const struct stat *sb)
{
    return f->dev == sb->st_dev && f->ino == sb->st_ino && f->size == sb->st_size &&
           f->mtime.tv_sec == sb->st_mtim.tv_sec && f->mtime.tv_nsec == sb->st_mtim.tv_nsec &&
           f->ctime.tv_sec == sb->st_ctim.tv_sec && f->ctime.tv_nsec == sb->st_ctim.tv_nsec;
}

/* stat() a protected file for a snapshot. File times come from the kernel's
 * coarse clock: a write in the same tick as the one before our stat would
 * leave mtime and ctime as they were, and a rewrite during the read would
 * go unseen. So while the file's last change is not yet in the past of that
 * clock, wait a tick and look again: any later write then shows as a later
 * time. (File systems with coarser times than the kernel's, FAT or some NFS
 * servers, can still hide a same-size rewrite within their resolution.)
 * @return 0, or -1 with errno. */
static int snap_file(const char *path, struct fsnap *f)
{
    struct stat sb;
    for (int tries = 0;; tries++) {
        struct timespec now;
        if (stat(path, &sb) != 0)
            return -1;
        clock_gettime(CLOCK_REALTIME_COARSE, &now);
        if (tries >= 50 || (ts_before(&sb.st_mtim, &now) && ts_before(&sb.st_ctim, &now)))
            break;
        {
            struct timespec tick = { 0, 1000000 };
            nanosleep(&tick, NULL);
        }
    }
    if (!S_ISREG(sb.st_mode)) {
        errno = EINVAL;
        return -1;
    }
    f->dev = sb.st_dev;
    f->ino = sb.st_ino;
    f->size = sb.st_size;
    f->mtime = sb.st_mtim;
    f->ctime = sb.st_ctim;
    f->mode = sb.st_mode & 0777;
    return 0;
}

/* A CKPT_FILE_AS_IS file is still the version ckpt_protect_file_ex() saw. */
static int as_is_same(const struct ckpt_item *it, const struct fsnap *f)
{
    return it->version.dev == f->dev && it->version.ino == f->ino &&
           it->version.size == f->size && it->version.mtime.tv_sec == f->mtime.tv_sec &&
           it->version.mtime.tv_nsec == f->mtime.tv_nsec &&
           it->version.ctime.tv_sec == f->ctime.tv_sec &&
           it->version.ctime.tv_nsec == f->ctime.tv_nsec;
}

/* Read [off, off+len) of a protected file. Another file at the path (it was
 * replaced) or a shorter one sets *changed: the bytes are then not used.
 * A file gone from its path is CKPT_E_NOENT. */
static ckpt_status read_file_chunk(const char *path, const struct fsnap *f, uint64_t off,
                                   size_t len, uint8_t *dst, int *changed, char *err)
{
    ckpt_status st = CKPT_OK;
    size_t got = 0;
    struct stat sb;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        ckpt__seterr(err, errno == ENOENT ? "%s was deleted while it was read" : "open %s: %s",
                     path, strerror(errno));
        return ckpt__errno_status(errno);
    }
    if (fstat(fd, &sb) != 0 || sb.st_dev != f->dev || sb.st_ino != f->ino) {
        *changed = 1;
        goto out;
    }
    while (got < len) {
        ssize_t r = pread(fd, dst + got, len - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            ckpt__seterr(err, "read %s: %s", path, strerror(errno));
            st = CKPT_E_IO;
            break;
        }
        if (r == 0) { /* shrank since the snapshot: a new version */
            *changed = 1;
            break;
        }
        got += (size_t)r;
    }
out:
    close(fd);
    return st;
}

/* Write one chunk object as a pack of its own (random name). */
static ckpt_status own_pack(struct ckpt_ctx *ctx, struct ckpt_save *sv, const void *obj,
                            size_t obj_len, struct ckpt_chunk_ref *ref, char *err)
{
    struct ckpt_pack p;
    struct ckpt_put_opts po = { CKPT_PUT_PLAIN, NULL, 1 };
    char key[1024];
    uint32_t slot;
    ckpt_status st;
    if (getrandom(p.id, sizeof p.id, 0) != (ssize_t)sizeof p.id) {
        ckpt__seterr(err, "getrandom: %s", strerror(errno));
        return CKPT_E_IO;
    }
    p.size = obj_len;
    ckpt__object_key(ctx->run, CKPT_OBJ_PACK, p.id, key, sizeof key);
    st = ctx->store->ops->put(ctx->store, key, obj, obj_len, &po, NULL, err);
    if (st)
        return st;
    pthread_mutex_lock(&sv->mu);
    slot = pack_slot_new(sv);
    if (slot != UINT32_MAX)
        sv->m.packs[slot] = p;
    pthread_mutex_unlock(&sv->mu);
    if (slot == UINT32_MAX) {
        ckpt__seterr(err, "no memory for the pack list");
        return CKPT_E_NOMEM;
    }
    ref->pack = slot + 1;
    ref->off = 0;
    return CKPT_OK;
}

/* Hash one chunk's bytes, point at the copy the run holds, else encode and
 * write it (its own object, or into the save's open pack). */
static ckpt_status store_chunk(struct ckpt_ctx *ctx, struct ckpt_save *sv, unsigned elem_size,
                               struct ckpt_chunk_ref *ref, const uint8_t *raw, size_t len,
                               struct ckpt_codec_ws *ws, char *err)
{
    struct ckpt_loc loc;
    struct ckpt_pack pk;
    int known;
    char key[1024];
    ckpt_status st = CKPT_OK;

    ckpt__chunk_id(raw, len, ref->id);
    ref->raw_len = (uint32_t)len;
    pthread_mutex_lock(&ctx->run_mu);
    while (!ctx->run_loaded)
        pthread_cond_wait(&ctx->run_cv, &ctx->run_mu);
    /* never a chunk (or pack) retention is deleting */
    known = ckpt__index_get(&ctx->idx, ref->id, &loc, &pk);
    pthread_mutex_unlock(&ctx->run_mu);
    if (known) {
        ref->stored_len = loc.stored_len;
        if (loc.pack) {
            uint32_t slot;
            pthread_mutex_lock(&sv->mu);
            slot = pack_slot_of(sv, &pk);
            pthread_mutex_unlock(&sv->mu);
            if (slot == UINT32_MAX) {
                ckpt__seterr(err, "no memory for the pack list");
                return CKPT_E_NOMEM;
            }
            ref->pack = slot + 1;
            ref->off = loc.off;
        }
        return CKPT_OK;
    }
    {
        const void *obj, *hdr, *payload;
        size_t obj_len, plen;
        struct ckpt_put_opts po = { CKPT_PUT_PLAIN, NULL, 1 };
        uint64_t bits = 0;
        int doomed;
        pthread_mutex_lock(&ctx->run_mu);
        doomed = ckpt__idset_get(&ctx->gcv.objs, ref->id, &bits) &&
                 (bits & (1u << CKPT_OBJ_CHUNK));
        pthread_mutex_unlock(&ctx->run_mu);
        if (doomed && !ctx->pack_bytes) {
            /* a gc in force deletes chunks/<id>: writing it there again
             * could lose it to that gc; a pack of its own has a fresh name */
            st = ckpt__chunk_encode(ws, raw, len, ref->id, sv->codec, sv->level, elem_size,
                                    &obj, &obj_len);
            if (!st)
                st = own_pack(ctx, sv, obj, obj_len, ref, err);
            else
                ckpt__seterr(err, "encode failed");
            if (st)
                return st;
            ref->stored_len = (uint32_t)obj_len;
            pthread_mutex_lock(&sv->mu);
            sv->new_bytes += obj_len;
            pthread_mutex_unlock(&sv->mu);
            return CKPT_OK;
        }
        if (ctx->pack_bytes) {
            st = ckpt__chunk_encode_parts(ws, raw, len, ref->id, sv->codec, sv->level,
                                          elem_size, &hdr, &payload, &plen);
            obj_len = CKPT_CHUNK_HDR + plen;
        } else {
            st = ckpt__chunk_encode(ws, raw, len, ref->id, sv->codec, sv->level, elem_size,
                                    &obj, &obj_len);
        }
        if (st) {
            ckpt__seterr(err, "encode failed");
            return st;
        }
        if (ctx->pack_bytes) {
            st = pack_append(ctx, sv, hdr, payload, plen, ref, err);
        } else {
            ckpt__chunk_key(ctx->run, ref->id, key, sizeof key);
            st = ctx->store->ops->put(ctx->store, key, obj, obj_len, &po, NULL, err);
            if (st == CKPT_OK)
                ckpt__progress_add(&ctx->progress.stored_bytes, obj_len);
        }
        if (st)
            return st;
        ref->stored_len = (uint32_t)obj_len;
        pthread_mutex_lock(&sv->mu);
        sv->new_bytes += obj_len;
        pthread_mutex_unlock(&sv->mu);
    }
    return CKPT_OK;
}

static void fail_file(struct ckpt_save *sv, const struct ckpt_mitem *it, const char *path,
                      int e, const char *when)
{
    if (e == ENOENT)
        save_fail(sv, CKPT_E_NOENT, "protected file %s (%s) was deleted %s: not committed",
                  it->name, path, when);
    else
        save_fail(sv, ckpt__errno_status(e), "protected file %s (%s): %s", it->name, path,
                  e == EINVAL ? "not a regular file" : strerror(e));
}

/* The file changed while its chunks were read: read it again whole, on this
 * worker, from a new snapshot, until one read sees a single version of it
 * (FILE_READS in all), then put the chunks of that read in the manifest. */
static void file_reread(struct ckpt_ctx *ctx, struct ckpt_save *sv, size_t i,
                        struct ckpt_codec_ws *ws)
{
    struct ckpt_mitem *it = &sv->m.items[i];
    const char *path = sv->paths[i];
    char err[CKPT_ERR_MAX] = "";
    for (int attempt = 2; attempt <= FILE_READS && !sv->st; attempt++) {
        struct fsnap nf;
        struct stat sb;
        struct ckpt_chunk_ref *refs = NULL;
        size_t n;
        int changed = 0, fd;
        ckpt_status st = CKPT_OK;

        ckpt__log(&ctx->log, CKPT_LOG_INFO, "save", "protected file %s (%s) changed while it "
                  "was read: reading it again (read %d of %d)", it->name, path, attempt,
                  FILE_READS);
        if (snap_file(path, &nf) != 0) {
            fail_file(sv, it, path, errno, "while it was read");
            return;
        }
        n = (size_t)(((uint64_t)nf.size + ctx->chunk_bytes - 1) / ctx->chunk_bytes);
        refs = n ? calloc(n, sizeof *refs) : NULL;
        if (n && !refs) {
            save_fail(sv, CKPT_E_NOMEM, "item %s: no memory for its chunk list", it->name);
            return;
        }
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            free(refs);
            fail_file(sv, it, path, errno, "while it was read");
            return;
        }
        if (fstat(fd, &sb) != 0 || sb.st_dev != nf.dev || sb.st_ino != nf.ino)
            changed = 1;
        for (size_t c = 0; c < n && !changed && !st; c++) {
            uint64_t off = (uint64_t)c * ctx->chunk_bytes;
            size_t len = (size_t)((uint64_t)nf.size - off < ctx->chunk_bytes
                                      ? (uint64_t)nf.size - off : ctx->chunk_bytes);
            uint8_t *raw = ws ? ckpt__codec_ws_scratch(ws, len) : NULL;
            size_t got = 0;
            if (!raw) {
                st = CKPT_E_NOMEM;
                snprintf(err, sizeof err, "no memory");
                break;
            }
            while (got < len) {
                ssize_t r = pread(fd, raw + got, len - got, (off_t)(off + got));
                if (r < 0 && errno == EINTR)
                    continue;
                if (r < 0) {
                    st = CKPT_E_IO;
                    snprintf(err, sizeof err, "read %.400s: %s", path, strerror(errno));
                    break;
                }
                if (r == 0) {
                    changed = 1;
                    break;
                }
                got += (size_t)r;
            }
            if (!st && !changed)
                st = store_chunk(ctx, sv, it->elem_size, &refs[c], raw, len, ws, err);
        }
        close(fd);
        if (st) {
            free(refs);
            save_fail(sv, st, "item %s: %s", it->name, err);
            return;
        }
        if (!changed && stat(path, &sb) != 0) {
            free(refs);
            fail_file(sv, it, path, errno, "while it was read");
            return;
        }
        if (!changed && snap_same(&nf, &sb)) {
            pthread_mutex_lock(&sv->mu);
            free(it->chunks);
            it->chunks = refs;
            it->nchunks = n;
            sv->raw_bytes += (uint64_t)nf.size - it->size;
            it->size = (uint64_t)nf.size;
            it->mode = nf.mode;
            pthread_mutex_unlock(&sv->mu);
            return;
        }
        free(refs);
    }
    save_fail(sv, CKPT_E_IO, "protected file %s (%s) kept changing while it was read (%d "
              "reads): not committed", it->name, path, FILE_READS);
}

/* The last chunk job of a protected file: the bytes read are one version of
 * the file only if it is still what the snapshot saw (same device, inode,
 * size, mtime and ctime to the nanosecond); else it is read again. */
static void file_done(struct ckpt_ctx *ctx, struct ckpt_save *sv, size_t i,
                      struct ckpt_codec_ws *ws)
{
    struct stat sb;
    if (sv->st)
        return;
    if (stat(sv->paths[i], &sb) != 0) {
        fail_file(sv, &sv->m.items[i], sv->paths[i], errno, "while it was read");
        return;
    }
    if (!sv->files[i].changed && snap_same(&sv->files[i], &sb))
        return;
    if (sv->files[i].as_is) {
        /* the caller judged that version: another one is not for us to take */
        save_fail(sv, CKPT_E_CHANGED, "protected file %s (%s) changed while it was read: "
                  "not committed", sv->m.items[i].name, sv->paths[i]);
        return;
    }
    file_reread(ctx, sv, i, ws);
}

static void chunk_job_fn(struct ckpt_ctx *ctx, void *arg, struct ckpt_codec_ws *ws)
{
    struct chunk_job *j = arg;
    struct ckpt_save *sv = j->sv;
    struct ckpt_mitem *it = &sv->m.items[j->item];
    struct ckpt_chunk_ref *ref = &it->chunks[j->chunk];
    const uint8_t *raw;
    char err[CKPT_ERR_MAX] = "";
    ckpt_status st = CKPT_OK;
    int is_file = !j->blk && !j->raw;

    if (sv->st) /* already failed: do no more work */
        goto out;
    if (!ws) {
        save_fail(sv, CKPT_E_NOMEM, "worker has no buffers");
        goto out;
    }
    if (j->blk) {
        raw = j->blk->data;
    } else if (j->raw) {
        raw = j->raw;
    } else {
        uint8_t *scratch = ckpt__codec_ws_scratch(ws, j->len);
        int changed = 0;
        st = scratch ? read_file_chunk(sv->paths[j->item], &sv->files[j->item], j->off, j->len,
                                       scratch, &changed, err)
                     : CKPT_E_NOMEM;
        if (st) {
            save_fail(sv, st, "item %s: %s", it->name,
                      scratch ? err : "no memory");
            goto out;
        }
        if (changed) { /* another version: file_done reads it again */
            pthread_mutex_lock(&sv->mu);
            sv->files[j->item].changed = 1;
            pthread_mutex_unlock(&sv->mu);
            goto out;
        }
        raw = scratch;
    }
    st = store_chunk(ctx, sv, it->elem_size, ref, raw, j->len, ws, err);
    if (st)
        save_fail(sv, st, "writing chunk %zu of %s: %s", j->chunk, it->name, err);
out:
    if (!sv->st) { /* progress: this chunk is stored (or known) */
        ckpt__progress_add(&ctx->progress.bytes_done, j->len);
        ckpt__progress_add(&ctx->progress.chunks_done, 1);
    }
    if (is_file) {
        size_t left;
        pthread_mutex_lock(&sv->mu);
        left = --sv->files[j->item].left;
        pthread_mutex_unlock(&sv->mu);
        if (left == 0)
            file_done(ctx, sv, j->item, ws);
    }
    block_put(ctx, j->blk);
    save_unref(ctx, sv);
    free(j);
}

static void save_free(struct ckpt_save *sv)
{
    if (!sv)
        return;
    if (sv->paths)
        for (size_t i = 0; i < sv->m.nitems; i++)
            free(sv->paths[i]);
    free(sv->paths);
    free(sv->files);
    ckpt__idset_free(&sv->packslot);
    ckpt__manifest_free(&sv->m);
    pthread_mutex_destroy(&sv->mu);
    free(sv);
}

static void report(struct ckpt_ctx *ctx, const char *json)
{
    if (ctx->control)
        ckpt__control_send(ctx->control, json);
}

static void save_finish(struct ckpt_ctx *ctx, struct ckpt_save *sv, ckpt_status st,
                        const char *err)
{
    char line[1024];
    if (st) {
        ckpt__set_ctx_err(ctx, "save of step %" PRIu64 " failed: %s", sv->step, err);
        ckpt__log(&ctx->log, CKPT_LOG_ERROR, "save", "step %" PRIu64 " not committed: %s (%s)",
                  sv->step, err, ckpt_strerror(st));
        snprintf(line, sizeof line,
                 "{\"type\":\"failed\",\"step\":%" PRIu64 ",\"error\":\"%s\"}", sv->step,
                 ckpt_strerror(st));
        report(ctx, line);
    }
    pthread_mutex_lock(&ctx->run_mu);
    ctx->inflight = NULL;
    ctx->last_status = st;
    pthread_cond_broadcast(&ctx->run_cv);
    pthread_mutex_unlock(&ctx->run_mu);
    save_free(sv);
}

/* After a commit: drop manifests past `keep` and the objects (chunks,
 * packs) only they used. Called with run_mu held; the new HEAD is already
 * durable, so a crash here leaves only unreferenced objects, which
 * `ckptrun gc` removes. A pack goes when no retained checkpoint uses any of
 * its chunks. */
static void apply_retention(struct ckpt_ctx *ctx, struct ckpt_head_entry *dropped,
                            struct ckpt_idlist *dropped_ids, size_t ndropped)
{
    struct ckpt_idset live; /* id -> bit (1 << kind) */
    char err[CKPT_ERR_MAX], key[1024];
    size_t ndel = 0;
    ckpt__idset_init(&live);
    /* live: what the retained checkpoints use, and the damaged ones (kept
     * for inspection until gc's age rule) */
    for (size_t i = 0; i < ctx->head.n + ctx->head.ndamaged; i++) {
        const struct ckpt_idlist *l = i < ctx->head.n ? &ctx->retained_ids[i]
                                      : ctx->damaged_ids ? &ctx->damaged_ids[i - ctx->head.n]
                                                         : NULL;
        for (size_t k = 0; l && k < l->n; k++) {
            uint64_t bits = 0;
            ckpt__idset_get(&live, l->ids[k], &bits);
            if (ckpt__idset_put(&live, l->ids[k], bits | 1u << l->kind[k]))
                goto out; /* out of memory: delete nothing */
        }
    }
    for (size_t d = 0; d < ndropped; d++) {
        const char *mk[1];
        char mkey[1024];
        for (size_t k = 0; k < dropped_ids[d].n; k++) {
            const uint8_t *id = dropped_ids[d].ids[k];
            int kind = dropped_ids[d].kind[k];
            const char *keys[1] = { key };
            uint64_t bits = 0;
            if (ckpt__idset_get(&live, id, &bits) && (bits & (1u << kind)))
                continue;
            /* forget it first: never dedup against an object being deleted */
            if (kind == CKPT_OBJ_PACK) {
                uint64_t pi;
                if (ckpt__idset_get(&ctx->idx.packidx, id, &pi))
                    ctx->idx.packtab[pi].size = 0;
            } else if (ckpt__idset_get(&ctx->idx.known, id, NULL)) {
                ckpt__idset_put(&ctx->idx.known, id, UINT64_MAX);
            }
            ckpt__object_key(ctx->run, kind, id, key, sizeof key);
            if (ctx->store->ops->del(ctx->store, keys, 1, err) == CKPT_OK)
                ndel++;
            ckpt__idset_put(&live, id, bits | 1u << kind); /* once */
        }
        snprintf(mkey, sizeof mkey, "%s/%s", ctx->run, dropped[d].manifest);
        mk[0] = mkey;
        if (ctx->store->ops->del(ctx->store, mk, 1, err) != CKPT_OK)
            ckpt__log(&ctx->log, CKPT_LOG_WARN, "retention", "cannot delete %s: %s", mkey, err);
    }
    ckpt__log(&ctx->log, CKPT_LOG_DEBUG, "retention", "dropped %zu checkpoints, %zu objects",
              ndropped, ndel);
out:
    ckpt__idset_free(&live);
}

/* A candidate entry of the HEAD a commit writes, and where it comes from. */
struct cand {
    struct ckpt_head_entry e;
    size_t src; /* index in ctx->head.entries; SIZE_MAX: the new checkpoint */
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
 * ctx->head (run_mu held): its entries in the resume order (highest step
 * first), the new one marked by src[k] == SIZE_MAX, every other one src[k]
 * = its index in ctx->head. A checkpoint of the same step as the new one is
 * superseded by it (dropped); then the `keep` highest steps stay, and the
 * new checkpoint always does, even below them (one more then): a trainer
 * that resumed below a higher checkpoint keeps its latest work reachable,
 * and a late commit of a lower step never pushes a higher one out. Damaged
 * entries and gc records stay as they are. nh's strings are borrowed; free
 * only nh->entries. */
static ckpt_status plan_head(struct ckpt_ctx *ctx, const struct ckpt_manifest *m,
                             const char *mkey, struct ckpt_head *nh, size_t **src)
{
    struct cand *c = calloc(ctx->head.n + 1, sizeof *c);
    size_t n = 0, keepn, with_new;
    memset(nh, 0, sizeof *nh);
    *src = NULL;
    if (!c)
        return CKPT_E_NOMEM;
    c[n].e.manifest = (char *)mkey;
    c[n].e.step = m->step;
    c[n].e.seq = m->seq;
    c[n].e.format = ckpt__manifest_format(m);
    c[n++].src = SIZE_MAX;
    for (size_t i = 0; i < ctx->head.n; i++) {
        if (ctx->head.entries[i].step == m->step)
            continue; /* superseded by this commit */
        c[n].e = ctx->head.entries[i];
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
    nh->rev = ctx->head.rev + 1;
    nh->seq = m->seq;
    nh->step = nh->entries[0].step;
    nh->epoch = m->epoch;
    nh->time_ms = m->time_ms;
    nh->ndamaged = ctx->head.ndamaged;
    nh->damaged = ctx->head.damaged;
    nh->ngc = ctx->head.ngc;
    nh->gc = ctx->head.gc;
    return CKPT_OK;
}

/* Whether a gc in force (ctx->gcv, from the HEAD this commit is
 * conditional on) deletes an object of the new checkpoint or its manifest:
 * then it must not commit, whatever the timing. */
static ckpt_status gc_collides(const struct ckpt_ctx *ctx, const struct ckpt_idlist *ids,
                               const char *mkey, char *err)
{
    for (size_t k = 0; k < ids->n; k++) {
        uint64_t bits;
        if (ckpt__idset_get(&ctx->gcv.objs, ids->ids[k], &bits) && (bits & (1u << ids->kind[k]))) {
            char hex[CKPT_ID_HEX + 1];
            ckpt__hex(ids->ids[k], CKPT_ID_LEN, hex);
            ckpt__seterr(err, "a gc of run %s is deleting %s %s, which this checkpoint uses: "
                         "not committed (the next save writes it again)", ctx->run,
                         ids->kind[k] == CKPT_OBJ_PACK ? "pack" : "chunk", hex);
            return CKPT_E_PRECONDITION;
        }
    }
    for (size_t k = 0; k < ctx->gcv.nmanifests; k++)
        if (!strcmp(ctx->gcv.manifests[k], mkey)) {
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
    const char *slash = strrchr(o->key, '/');
    uint8_t id[CKPT_ID_LEN];
    if (!slash || strlen(slash + 1) != CKPT_ID_HEX || ckpt__unhex(slash + 1, id, CKPT_ID_LEN))
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
    ckpt__idset_free(&present[0].ids);
    ckpt__idset_free(&present[1].ids);
    return st;
}

/* Where plan_head put the new checkpoint. */
static size_t new_at(const size_t *src, size_t n)
{
    size_t k = 0;
    while (k + 1 < n && src[k] != SIZE_MAX)
        k++;
    return k;
}

static void commit_job(struct ckpt_ctx *ctx, void *arg, struct ckpt_codec_ws *ws)
{
    struct ckpt_save *sv = arg;
    struct ckpt_manifest *m = &sv->m;
    ckpt_status st = sv->st;
    char err[CKPT_ERR_MAX] = "", mkey[1024], line[2048], host[256] = "?", hkey[1024];
    char *mbuf = NULL, *hbuf = NULL, new_etag[CKPT_ETAG_MAX];
    const char *mrel;
    size_t mlen, hlen, *src = NULL;
    struct ckpt_head nh = { 0 };
    struct ckpt_idlist new_ids = { 0 };
    struct ckpt_put_opts po = { CKPT_PUT_IF_NONE_MATCH, NULL, 0 };
    struct ckpt_head_entry *dropped = NULL;
    struct ckpt_idlist *dropped_ids = NULL, *new_retained = NULL;
    size_t ndropped = 0;
    char *kept = NULL;
    int have_lock = 0;
    double secs;
    (void)ws;

    /* 0. the last, partly filled pack */
    if (sv->open) {
        if (!st && sv->open->len) {
            st = pack_upload(ctx, sv, sv->open, err);
            if (st)
                snprintf(sv->err, sizeof sv->err, "writing a pack: %.480s", err);
        }
        packbuf_put(ctx, sv->open);
        sv->open = NULL;
    }
    if (st) {
        snprintf(err, sizeof err, "%s", sv->err);
        goto out;
    }
    /* 1. every chunk durable */
    st = ctx->store->ops->barrier(ctx->store, err);
    if (st)
        goto out;
    pthread_mutex_lock(&ctx->run_mu);
    have_lock = 1;
    if (!ctx->load_ok) {
        /* The background load failed (store down then): retry now, HEAD's
         * etag is what makes the commit safe. */
        bool exists;
        char etag[CKPT_ETAG_MAX] = "";
        struct ckpt_head h;
        st = ckpt__read_head(ctx, &h, etag, &exists);
        if (st) {
            snprintf(err, sizeof err, "%s", ctx->errmsg);
            goto out;
        }
        if (exists) {
            ckpt__head_free(&h);
            pthread_mutex_unlock(&ctx->run_mu);
            have_lock = 0;
            st = ckpt__load_run(ctx, true);
            if (st) {
                snprintf(err, sizeof err, "%s", ctx->errmsg);
                goto out;
            }
            pthread_mutex_lock(&ctx->run_mu);
            have_lock = 1;
        }
    }
    /* A writer with a lease epoch refuses to commit over a HEAD fenced at a
     * newer one: another runner holds the lease now. (HEAD's etag alone
     * refuses only the first save after the fence, since a refused save
     * reloads the run.) Writers without an epoch (libckpt alone) hold no
     * lease and are not checked. */
    if (ctx->epoch && ctx->have_head && ctx->head.epoch > ctx->epoch) {
        snprintf(err, sizeof err, "run %s was fenced at epoch %" PRIu64 " (this writer has "
                 "epoch %" PRIu64 "): another runner holds its lease; this save is refused",
                 ctx->run, ctx->head.epoch, ctx->epoch);
        st = CKPT_E_FENCED;
        goto out;
    }
    /* An older writer must not commit to a run that holds checkpoints it
     * cannot read: its retention would push them out. (A HEAD of a newer
     * format already refused the load above.) */
    if (ctx->run_newer) {
        snprintf(err, sizeof err, "run %s holds checkpoints of a newer format than this ckpt "
                 "(%d) reads: upgrade; nothing committed", ctx->run, CKPT_FORMAT_VERSION);
        st = CKPT_E_UNSUPPORTED;
        goto out;
    }
    /* 2. manifest */
    gethostname(host, sizeof host - 1);
    snprintf(line, sizeof line, "%s:%d", host, (int)getpid());
    free(m->writer);
    m->writer = ckpt__strdup(line);
    m->seq = ctx->head.seq + 1;
    m->epoch = ctx->epoch;
    m->time_ms = ckpt__now_ms();
    m->new_bytes = sv->new_bytes;
    free(m->parent);
    m->parent = NULL;
    {
        /* the previous commit: the retained entry committed last */
        const struct ckpt_head_entry *prev = NULL;
        for (size_t i = 0; i < ctx->head.n; i++)
            if (!prev || ctx->head.entries[i].seq > prev->seq)
                prev = &ctx->head.entries[i];
        if (prev && !(m->parent = ckpt__strdup(prev->manifest))) {
            st = CKPT_E_NOMEM;
            goto out;
        }
    }
    if (!m->writer || ckpt__manifest_objects(m, &new_ids)) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    {
        uint32_t nonce = 0;
        if (getrandom(&nonce, sizeof nonce, 0) != (ssize_t)sizeof nonce)
            nonce = (uint32_t)ckpt__mono_ns();
        ckpt__manifest_key(ctx->run, m->seq, m->step, m->epoch, nonce, mkey, sizeof mkey);
    }
    mrel = mkey + strlen(ctx->run) + 1;
    /* a gc in force deletes what this save found in the run: do not commit */
    st = gc_collides(ctx, &new_ids, mrel, err);
    if (st)
        goto out;
    st = ckpt__manifest_encode(m, &mbuf, &mlen);
    if (st)
        goto out;
    st = ctx->store->ops->put(ctx->store, mkey, mbuf, mlen, &po, NULL, err);
    if (st == CKPT_E_PRECONDITION) {
        snprintf(err, sizeof err, "manifest %.400s already exists: another writer committed "
                                  "to this run", mkey);
        st = CKPT_E_FENCED;
    }
    if (st)
        goto out;
    /* 3. HEAD, conditional on what we last saw. Refused: another writer
     * committed (or fenced) -- this save is refused -- or, with the same
     * commit sequence and epoch, a gc (or a damaged marking) rewrote it:
     * then reload, check that the gc deletes nothing this save uses and
     * that it is all still there, and try again on the new HEAD. */
    snprintf(hkey, sizeof hkey, "%s/HEAD", ctx->run);
    for (int attempt = 1;; attempt++) {
        uint64_t seq0 = ctx->head.seq, epoch0 = ctx->head.epoch;
        st = plan_head(ctx, m, mrel, &nh, &src);
        if (!st)
            st = ckpt__head_encode(&nh, &hbuf, &hlen);
        if (st)
            goto out;
        if (ckpt_store_can(ctx->store, CKPT_STORE_CONDITIONAL)) {
            po.cond = ctx->have_head ? CKPT_PUT_IF_MATCH : CKPT_PUT_IF_NONE_MATCH;
            po.if_match = ctx->head_etag;
        } else {
            po.cond = CKPT_PUT_PLAIN;
        }
        st = ctx->store->ops->put(ctx->store, hkey, hbuf, hlen, &po, new_etag, err);
        free(hbuf);
        hbuf = NULL;
        if (st != CKPT_E_PRECONDITION && !(st == CKPT_E_NOENT && po.cond == CKPT_PUT_IF_MATCH))
            break;
        free(nh.entries);
        free(src);
        nh.entries = NULL;
        src = NULL;
        ctx->run_loaded = false;
        pthread_mutex_unlock(&ctx->run_mu);
        have_lock = 0;
        st = ckpt__load_run(ctx, true);
        pthread_mutex_lock(&ctx->run_mu);
        have_lock = 1;
        if (st) {
            snprintf(err, sizeof err, "HEAD of run %s changed; reading it again: %.400s",
                     ctx->run, ctx->errmsg);
            break;
        }
        if (attempt < 4 && ctx->have_head && ctx->head.seq == seq0 &&
            ctx->head.epoch == epoch0) {
            ckpt__log(&ctx->log, CKPT_LOG_DEBUG, "commit", "HEAD of run %s was rewritten "
                      "without a commit (gc): checking step %" PRIu64 " against it", ctx->run,
                      m->step);
            st = gc_collides(ctx, &new_ids, mrel, err);
            if (st)
                break;
            pthread_mutex_unlock(&ctx->run_mu);
            have_lock = 0;
            st = objects_present(ctx, &new_ids, mkey, err);
            pthread_mutex_lock(&ctx->run_mu);
            have_lock = 1;
            if (st)
                break;
            continue;
        }
        snprintf(err, sizeof err, "HEAD of run %s changed since this writer read it: another "
                                  "runner committed; this save is refused", ctx->run);
        st = CKPT_E_FENCED;
        break;
    }
    if (st) {
        const char *dk[1] = { mkey };
        ctx->store->ops->del(ctx->store, dk, 1, NULL);
        goto out;
    }
    /* 4. committed: update what we know */
    new_retained = calloc(nh.n, sizeof *new_retained);
    dropped = calloc(ctx->head.n ? ctx->head.n : 1, sizeof *dropped);
    dropped_ids = calloc(ctx->head.n ? ctx->head.n : 1, sizeof *dropped_ids);
    kept = calloc(ctx->head.n ? ctx->head.n : 1, 1);
    for (size_t k = 0; k < nh.n; k++)
        if (src[k] == SIZE_MAX)
            nh.entries[k].manifest = ckpt__strdup(mrel);
    if (!new_retained || !dropped || !dropped_ids || !kept ||
        !nh.entries[new_at(src, nh.n)].manifest) {
        /* committed, but our view cannot follow: reload it from the store */
        free(nh.entries[new_at(src, nh.n)].manifest);
        ckpt__log(&ctx->log, CKPT_LOG_WARN, "commit", "out of memory after committing step %"
                  PRIu64 ": retention skipped (ckptrun gc removes what it left)", m->step);
        ctx->run_loaded = false;
        pthread_mutex_unlock(&ctx->run_mu);
        have_lock = 0;
        ckpt__load_run(ctx, true);
    } else {
        struct ckpt_head old = ctx->head;
        struct ckpt_idlist *old_ids = ctx->retained_ids;
        for (size_t k = 0; k < nh.n; k++) {
            if (src[k] == SIZE_MAX) {
                new_retained[k] = new_ids;
                memset(&new_ids, 0, sizeof new_ids);
            } else {
                new_retained[k] = old_ids[src[k]];
                kept[src[k]] = 1;
            }
        }
        for (size_t i = 0; i < old.n; i++)
            if (!kept[i]) {
                dropped[ndropped] = old.entries[i];
                dropped_ids[ndropped++] = old_ids[i];
            }
        ctx->head = nh;
        ctx->retained_ids = new_retained;
        ctx->have_head = true;
        snprintf(ctx->head_etag, sizeof ctx->head_etag, "%s", new_etag);
        nh.entries = NULL;
        nh.gc = NULL;
        nh.damaged = NULL;
        new_retained = NULL;
        for (size_t i = 0; i < m->nitems; i++)
            for (size_t c = 0; c < m->items[i].nchunks; c++)
                ckpt__index_put(&ctx->idx, m, &m->items[i].chunks[c]);
        apply_retention(ctx, dropped, dropped_ids, ndropped);
        for (size_t d = 0; d < ndropped; d++) {
            free(dropped[d].manifest);
            ckpt__idlist_free(&dropped_ids[d]);
        }
        free(old.entries);
        free(old_ids);
    }
    secs = (double)(ckpt__mono_ns() - sv->t0_ns) / 1e9;
    ckpt__log(&ctx->log, CKPT_LOG_INFO, "commit",
              "step %" PRIu64 " committed: %" PRIu64 " bytes, %" PRIu64 " new stored (%.2fx), "
              "%.2f s, %.1f MB/s",
              m->step, sv->raw_bytes, sv->new_bytes,
              sv->new_bytes ? (double)sv->raw_bytes / (double)sv->new_bytes : 0.0, secs,
              secs > 0 ? (double)sv->raw_bytes / 1e6 / secs : 0.0);
    snprintf(line, sizeof line,
             "{\"type\":\"committed\",\"step\":%" PRIu64 ",\"seq\":%" PRIu64
             ",\"bytes\":%" PRIu64 ",\"stored\":%" PRIu64 ",\"seconds\":%.3f,"
             "\"manifest\":\"%.400s\"}",
             m->step, m->seq, sv->raw_bytes, sv->new_bytes, secs, mkey);
    report(ctx, line);
out:
    if (have_lock)
        pthread_mutex_unlock(&ctx->run_mu);
    free(mbuf);
    free(hbuf);
    free(nh.entries);
    free(src);
    free(new_retained);
    free(dropped);
    free(dropped_ids);
    free(kept);
    ckpt__idlist_free(&new_ids);
    save_finish(ctx, sv, st, err);
}

ckpt_status ckpt__wait(struct ckpt_ctx *ctx)
{
    ckpt_status st;
    pthread_mutex_lock(&ctx->run_mu);
    while (ctx->inflight)
        pthread_cond_wait(&ctx->run_cv, &ctx->run_mu);
    st = ctx->last_status;
    ctx->last_status = CKPT_OK;
    pthread_mutex_unlock(&ctx->run_mu);
    return st;
}

ckpt_status ckpt__save(struct ckpt_ctx *ctx, uint64_t step)
{
    struct ckpt_save *sv;
    struct ckpt_item *it;
    ckpt_status st = CKPT_OK, prev;
    size_t i, total_chunks = 0;
    int hold = !ctx->staging_max;
    ckpt_codec codec;

    if (!ctx->items)
        return CKPT_E_INVAL;
    pthread_mutex_lock(&ctx->run_mu);
    if (ctx->inflight && ctx->on_busy == CKPT_BUSY_SKIP) {
        pthread_mutex_unlock(&ctx->run_mu);
        return CKPT_E_BUSY;
    }
    while (ctx->inflight)
        pthread_cond_wait(&ctx->run_cv, &ctx->run_mu);
    prev = ctx->last_status;
    ctx->last_status = CKPT_OK;
    pthread_mutex_unlock(&ctx->run_mu);
    if (prev)
        ckpt__log(&ctx->log, CKPT_LOG_WARN, "save",
                  "the previous save failed (%s); the run keeps its last commit",
                  ckpt_strerror(prev));

    sv = calloc(1, sizeof *sv);
    if (!sv)
        return CKPT_E_NOMEM;
    pthread_mutex_init(&sv->mu, NULL);
    sv->t0_ns = ckpt__mono_ns();
    sv->step = step;
    sv->m.step = step;
    sv->m.rank = 0;
    sv->m.world_size = 1;
    sv->m.chunk_bytes = ctx->chunk_bytes;
    codec = (ckpt_codec)atomic_exchange(&ctx->req_codec, 0);
    sv->codec = codec != CKPT_CODEC_DEFAULT ? codec : ctx->codec;
    sv->level = ctx->level;
    sv->m.items = calloc(ctx->nitems, sizeof *sv->m.items);
    sv->paths = calloc(ctx->nitems, sizeof *sv->paths);
    sv->files = calloc(ctx->nitems, sizeof *sv->files);
    if (!sv->m.items || !sv->paths || !sv->files) {
        save_free(sv);
        return CKPT_E_NOMEM;
    }
    sv->m.nitems = ctx->nitems;
    /* sizes first (files are stat'ed now: the snapshot's shape is fixed here) */
    for (it = ctx->items, i = 0; it; it = it->next, i++) {
        struct ckpt_mitem *mi = &sv->m.items[i];
        mi->name = ckpt__strdup(it->name);
        mi->kind = it->kind;
        mi->elem_size = it->elem_size;
        mi->size = it->size;
        mi->mode = 0600;
        if (!mi->name) {
            save_free(sv);
            return CKPT_E_NOMEM;
        }
        if (it->kind == CKPT_ITEM_LINK) {
            mi->mode = 0777;
            mi->target = ckpt__strdup(it->path);
            if (!mi->target) {
                save_free(sv);
                return CKPT_E_NOMEM;
            }
        }
        if (it->kind == CKPT_ITEM_FILE) {
            struct fsnap *f = &sv->files[i];
            if (snap_file(it->path, f) != 0) {
                int e = errno;
                ckpt__set_ctx_err(ctx, "protected file %s (%s): %s", it->name, it->path,
                                  e == ENOENT ? "does not exist (deleted before the save)"
                                  : e == EINVAL ? "not a regular file" : strerror(e));
                save_free(sv);
                return e == ENOENT ? CKPT_E_NOENT : e == EINVAL ? CKPT_E_IO
                                                                : ckpt__errno_status(e);
            }
            if (it->as_is && !as_is_same(it, f)) {
                ckpt__set_ctx_err(ctx, "protected file %s (%s) is no longer the version it "
                                  "was when protected: not saved", it->name, it->path);
                save_free(sv);
                return CKPT_E_CHANGED;
            }
            f->as_is = it->as_is;
            mi->size = (uint64_t)f->size;
            mi->mode = f->mode;
            sv->paths[i] = ckpt__strdup(it->path);
            if (!sv->paths[i]) {
                save_free(sv);
                return CKPT_E_NOMEM;
            }
        }
        mi->nchunks = (size_t)((mi->size + ctx->chunk_bytes - 1) / ctx->chunk_bytes);
        mi->chunks = mi->nchunks ? calloc(mi->nchunks, sizeof *mi->chunks) : NULL;
        if (mi->nchunks && !mi->chunks) {
            save_free(sv);
            return CKPT_E_NOMEM;
        }
        if (it->kind == CKPT_ITEM_FILE)
            sv->files[i].left = mi->nchunks;
        sv->raw_bytes += mi->size;
        total_chunks += mi->nchunks;
    }
    {
        /* the item set as a whole: names, directories, where links land */
        char err[CKPT_ERR_MAX] = "";
        st = ckpt__manifest_check(&sv->m, err);
        if (st) {
            ckpt__set_ctx_err(ctx, "step %" PRIu64 " not saved: %s", step, err);
            save_free(sv);
            return st == CKPT_E_NOMEM ? st : CKPT_E_INVAL;
        }
    }
    sv->pending = 1; /* the submitter's token */
    ckpt__progress_begin(&ctx->progress, CKPT_PROGRESS_SAVE, step);
    ckpt__progress_add(&ctx->progress.bytes_total, sv->raw_bytes);
    ckpt__progress_add(&ctx->progress.chunks_total, total_chunks);
    pthread_mutex_lock(&ctx->run_mu);
    ctx->inflight = sv;
    pthread_mutex_unlock(&ctx->run_mu);

    if (hold)
        ckpt__pool_hold(ctx, 1);
    for (it = ctx->items, i = 0; it && !st; it = it->next, i++) {
        /* the shape as snapshotted: once its last job is queued, a file
         * read again (file_reread) may change its item */
        const uint64_t size = sv->m.items[i].size;
        const size_t nchunks = sv->m.items[i].nchunks;
        /* One copy of the whole region: large enough for memcpy's streaming
         * stores, where chunk-sized copies would read every destination
         * line first and take up to twice as long. */
        if (it->stage)
            memcpy(it->stage->base, it->ptr, it->size);
        for (size_t c = 0; c < nchunks; c++) {
            uint64_t off = (uint64_t)c * ctx->chunk_bytes;
            size_t len = (size_t)(size - off < ctx->chunk_bytes ? size - off
                                                                : ctx->chunk_bytes);
            struct chunk_job *j = calloc(1, sizeof *j);
            if (!j) {
                st = CKPT_E_NOMEM;
                break;
            }
            j->sv = sv;
            j->item = i;
            j->chunk = c;
            j->off = off;
            j->len = len;
            if (it->stage) {
                j->raw = (const uint8_t *)it->stage->base + off;
            } else if (it->kind != CKPT_ITEM_FILE) {
                /* With a cap and jobs held, waiting for a block would wait
                 * forever: release the held jobs first. */
                if (hold && ctx->staging_max)
                    ckpt__pool_hold(ctx, 0);
                j->blk = block_get(ctx);
                if (!j->blk) {
                    free(j);
                    st = CKPT_E_NOMEM;
                    break;
                }
                if (it->kind == CKPT_ITEM_DEVICE) {
                    char err[CKPT_ERR_MAX];
                    st = ckpt__cuda_snapshot_chunk(ctx, it, off, len, j->blk->data, err);
                    if (st) {
                        ckpt__set_ctx_err(ctx, "device region %s: %s", it->name, err);
                        /* first failure wins: keeps the detail for ckpt_errmsg */
                        save_fail(sv, st, "device region %s: %s", it->name, err);
                        block_put(ctx, j->blk);
                        free(j);
                        break;
                    }
                } else {
                    memcpy(j->blk->data, (const uint8_t *)it->ptr + off, len);
                }
            }
            pthread_mutex_lock(&sv->mu);
            sv->pending++;
            pthread_mutex_unlock(&sv->mu);
            if (ckpt__pool_submit(ctx, chunk_job_fn, j) != CKPT_OK) {
                pthread_mutex_lock(&sv->mu);
                sv->pending--;
                pthread_mutex_unlock(&sv->mu);
                block_put(ctx, j->blk);
                free(j);
                st = CKPT_E_NOMEM;
                break;
            }
        }
    }
    ckpt__cuda_snapshot_end(ctx); /* device state captured (or the save failed) */
    if (st)
        save_fail(sv, st, "snapshot failed: %s", ckpt_strerror(st));
    if (hold)
        ckpt__pool_hold(ctx, 0);
    atomic_store(&ctx->requested, 0);
    ctx->last_save_mono_ns = ckpt__mono_ns();
    {
        char line[128];
        snprintf(line, sizeof line, "{\"type\":\"saving\",\"step\":%" PRIu64 "}", step);
        report(ctx, line);
    }
    save_unref(ctx, sv);
    if (st) {
        ckpt__wait(ctx);
        return st;
    }
    return CKPT_OK;
}
