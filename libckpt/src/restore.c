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
#include <sys/stat.h>
#include <unistd.h>

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

void ckpt__run_state_free(struct ckpt_ctx *ctx)
{
    if (ctx->retained_ids) {
        for (size_t i = 0; i < ctx->head.n; i++)
            free(ctx->retained_ids[i].ids);
        free(ctx->retained_ids);
        ctx->retained_ids = NULL;
    }
    ckpt__head_free(&ctx->head);
    ckpt__idset_free(&ctx->known);
}

ckpt_status ckpt__load_run(struct ckpt_ctx *ctx, bool ids)
{
    struct ckpt_head h;
    char etag[CKPT_ETAG_MAX] = "";
    bool exists;
    struct ckpt_idlist *lists = NULL;
    struct ckpt_idset known;
    ckpt_status st;

    ckpt__idset_init(&known);
    st = ckpt__read_head(ctx, &h, etag, &exists);
    if (st)
        goto out;
    lists = calloc(h.n ? h.n : 1, sizeof *lists);
    if (!lists) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    for (size_t i = 0; ids && i < h.n; i++) {
        struct ckpt_manifest m;
        /* A damaged retained manifest only costs dedup: skip it. */
        if (ckpt__read_manifest(ctx, h.entries[i].manifest, &m) != CKPT_OK) {
            ckpt__log(&ctx->log, CKPT_LOG_WARN, "load", "%s", ctx->errmsg);
            continue;
        }
        size_t total = 0, n = 0;
        for (size_t k = 0; k < m.nitems; k++)
            total += m.items[k].nchunks;
        lists[i].ids = total ? malloc(total * CKPT_ID_LEN) : NULL;
        for (size_t k = 0; k < m.nitems && (lists[i].ids || !total); k++)
            for (size_t c = 0; c < m.items[k].nchunks; c++) {
                const struct ckpt_chunk_ref *r = &m.items[k].chunks[c];
                memcpy(lists[i].ids[n++], r->id, CKPT_ID_LEN);
                ckpt__idset_put(&known, r->id, r->stored_len);
            }
        lists[i].n = n;
        ckpt__manifest_free(&m);
    }
out:
    pthread_mutex_lock(&ctx->run_mu);
    if (st == CKPT_OK) {
        ckpt__run_state_free(ctx);
        ctx->head = h;
        ctx->retained_ids = lists;
        ctx->known = known;
        ctx->have_head = exists;
        ctx->load_ok = true;
        snprintf(ctx->head_etag, sizeof ctx->head_etag, "%s", etag);
        lists = NULL;
    } else {
        ckpt__log(&ctx->log, CKPT_LOG_WARN, "load", "cannot read the run's state: %s",
                  ctx->errmsg);
        ckpt__idset_free(&known);
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
 * that MD5 was most of a download's CPU). A chunk that fails them is fetched
 * again: a transfer damaged in flight must not pass for a damaged checkpoint
 * (which would send the restore back to an older step). */
#define FETCH_ATTEMPTS 3

ckpt_status ckpt__fetch_chunk(struct ckpt_ctx *ctx, struct ckpt_codec_ws *ws,
                              const struct ckpt_chunk_ref *c, void *dst, char *err)
{
    char key[1024], derr[CKPT_ERR_MAX] = "";
    ckpt_status st = CKPT_OK;
    ckpt__chunk_key(ctx->run, c->id, key, sizeof key);
    for (int attempt = 1; attempt <= FETCH_ATTEMPTS; attempt++) {
        void *buf = NULL;
        size_t len = 0;
        st = ctx->store->ops->get(ctx->store, key, c->stored_len, CKPT_GET_SELF_CHECKED, &buf,
                                  &len, NULL, derr);
        if (st == CKPT_E_NOENT) {
            ckpt__seterr(err, "chunk %s is missing", key);
            return CKPT_E_CORRUPT;
        }
        if (st == CKPT_E_CORRUPT) { /* larger than the manifest says */
            ckpt__seterr(err, "chunk %s: %s", key, derr);
        } else if (st) {
            ckpt__seterr(err, "reading %s: %s", key, derr);
            return st;
        } else if (len != c->stored_len) {
            ckpt__seterr(err, "chunk %s: %zu bytes, manifest says %u", key, len,
                         c->stored_len);
            st = CKPT_E_CORRUPT;
        } else {
            st = ckpt__chunk_decode(ws, buf, len, c->id, dst, c->raw_len, derr);
            if (st)
                ckpt__seterr(err, "chunk %s: %s", key, derr);
        }
        free(buf);
        if (st != CKPT_E_CORRUPT)
            return st;
        if (attempt < FETCH_ATTEMPTS)
            ckpt__log(&ctx->log, CKPT_LOG_WARN, "verify", "%s (attempt %d of %d, fetching "
                      "it again)", err, attempt, FETCH_ATTEMPTS);
    }
    return st;
}

/* ---- restore jobs ---------------------------------------------------------------- */
struct rjob {
    struct ckpt_batch *b;
    const struct ckpt_chunk_ref *c;
    const char *item;
    size_t idx;
    int kind;
    uint8_t *dst;   /* host memory */
    void *dev;      /* device memory */
    int fd;         /* file */
    uint64_t off;
    uint64_t *unsynced; /* file: bytes written since its last fdatasync */
};

/* Flush behind: every FLUSH_EVERY bytes written to a file, the job that
 * crosses the mark makes them durable (fdatasync) while the other workers
 * keep downloading. The fsync before the rename then has little left to
 * write; without this it waited for the whole file at the end (on a 1 GiB
 * restore, about as long as a tenth of the download). */
#define FLUSH_EVERY (64u << 20)

static ckpt_status flush_behind(struct rjob *j, char *err)
{
    uint64_t cur = __atomic_add_fetch(j->unsynced, j->c->raw_len, __ATOMIC_RELAXED);
    while (cur >= FLUSH_EVERY) {
        if (__atomic_compare_exchange_n(j->unsynced, &cur, 0, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
            if (fdatasync(j->fd) != 0) {
                ckpt__seterr(err, "fdatasync: %s", strerror(errno));
                return ckpt__errno_status(errno);
            }
            break;
        }
    }
    return CKPT_OK;
}

static void rjob_fn(struct ckpt_ctx *ctx, void *arg, struct ckpt_codec_ws *ws)
{
    struct rjob *j = arg;
    char err[CKPT_ERR_MAX] = "", msg[CKPT_ERR_MAX + 300];
    ckpt_status st = CKPT_OK;
    uint8_t *scratch = NULL;
    if (j->b->st) /* already failed: skip */
        goto out;
    if (ws && j->kind != CKPT_ITEM_MEM)
        scratch = ckpt__codec_ws_scratch(ws, j->c->raw_len);
    if (!ws || (j->kind != CKPT_ITEM_MEM && !scratch)) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    if (j->kind == CKPT_ITEM_MEM) {
        st = ckpt__fetch_chunk(ctx, ws, j->c, j->dst, err);
    } else {
        st = ckpt__fetch_chunk(ctx, ws, j->c, scratch, err);
        if (st == CKPT_OK && j->kind == CKPT_ITEM_DEVICE) {
            st = ckpt__cuda_h2d(ctx, (uint8_t *)j->dev + j->off, scratch, j->c->raw_len, err);
        } else if (st == CKPT_OK) {
            size_t done = 0;
            while (done < j->c->raw_len) {
                ssize_t w = pwrite(j->fd, scratch + done, j->c->raw_len - done,
                                   (off_t)(j->off + done));
                if (w < 0 && errno == EINTR)
                    continue;
                if (w < 0) {
                    ckpt__seterr(err, "write: %s", strerror(errno));
                    st = ckpt__errno_status(errno);
                    break;
                }
                done += (size_t)w;
            }
            if (st == CKPT_OK)
                st = flush_behind(j, err);
        }
    }
out:
    if (st) {
        snprintf(msg, sizeof msg, "item %s, chunk %zu: %s", j->item, j->idx, err);
        if (st == CKPT_E_CORRUPT)
            ckpt__log(&ctx->log, CKPT_LOG_WARN, "verify", "%s", msg);
    }
    ckpt__batch_done(j->b, st, msg);
    free(j);
}

/* Destination of one item for a restore. */
struct rdest {
    int kind;
    uint8_t *ptr;
    void *dev;
    int fd;
    char *tmp, *final;
    uint32_t mode;
    uint64_t unsynced;
};

static ckpt_status run_item_jobs(struct ckpt_ctx *ctx, struct ckpt_batch *b,
                                 const struct ckpt_mitem *mi, struct rdest *d)
{
    uint64_t off = 0;
    for (size_t c = 0; c < mi->nchunks; c++) {
        struct rjob *j = calloc(1, sizeof *j);
        if (!j)
            return CKPT_E_NOMEM;
        j->b = b;
        j->c = &mi->chunks[c];
        j->item = mi->name;
        j->idx = c;
        j->kind = d->kind;
        j->dst = d->ptr ? d->ptr + off : NULL;
        j->dev = d->dev;
        j->fd = d->fd;
        j->off = off;
        j->unsynced = &d->unsynced;
        pthread_mutex_lock(&b->mu);
        b->pending++;
        pthread_mutex_unlock(&b->mu);
        if (ckpt__pool_submit(ctx, rjob_fn, j)) {
            ckpt__batch_done(b, CKPT_E_NOMEM, "queue");
            free(j);
            return CKPT_E_NOMEM;
        }
        off += mi->chunks[c].raw_len;
    }
    return CKPT_OK;
}

static void dest_cleanup(struct rdest *d, size_t n, int commit, ckpt_status *st, char *err)
{
    for (size_t i = 0; i < n; i++) {
        if (d[i].fd >= 0) {
            if (commit && *st == CKPT_OK) {
                /* owner-only, whatever the original allowed others (DESIGN §6) */
                if (fchmod(d[i].fd, (d[i].mode & 0700) | 0600) != 0 || fsync(d[i].fd) != 0 ||
                    rename(d[i].tmp, d[i].final) != 0) {
                    ckpt__seterr(err, "%s: %s", d[i].final, strerror(errno));
                    *st = CKPT_E_IO;
                }
            }
            close(d[i].fd);
            if (!commit || *st)
                unlink(d[i].tmp);
        }
        free(d[i].tmp);
        free(d[i].final);
    }
    free(d);
}

static ckpt_status open_tmp(const char *final, uint64_t size, struct rdest *d, char *err)
{
    size_t n = strlen(final) + 64;
    d->final = ckpt__strdup(final);
    d->tmp = malloc(n);
    if (!d->final || !d->tmp)
        return CKPT_E_NOMEM;
    snprintf(d->tmp, n, "%s.ckpt-tmp.%d", final, (int)getpid());
    unlink(d->tmp);
    d->fd = open(d->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (d->fd < 0) {
        ckpt__seterr(err, "create %s: %s", d->tmp, strerror(errno));
        return ckpt__errno_status(errno);
    }
    if (ftruncate(d->fd, (off_t)size) != 0) {
        ckpt__seterr(err, "size %s: %s", d->tmp, strerror(errno));
        return ckpt__errno_status(errno);
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

static ckpt_status restore_one(struct ckpt_ctx *ctx, const struct ckpt_manifest *m,
                               const char *dir, char *err)
{
    struct rdest *d = calloc(m->nitems ? m->nitems : 1, sizeof *d);
    struct ckpt_batch b;
    ckpt_status st = CKPT_OK;
    size_t i;
    if (!d)
        return CKPT_E_NOMEM;
    for (i = 0; i < m->nitems; i++)
        d[i].fd = -1;
    ckpt__batch_init(&b);
    pthread_mutex_lock(&b.mu);
    b.pending = 1; /* our token: jobs may finish while we submit */
    pthread_mutex_unlock(&b.mu);
    for (i = 0; i < m->nitems && !st; i++) {
        const struct ckpt_mitem *mi = &m->items[i];
        d[i].mode = mi->mode ? mi->mode : 0600;
        if (dir) {
            char final[4096];
            if (!ckpt__name_valid(mi->name)) {
                ckpt__seterr(err, "item name '%s' would escape %s", mi->name, dir);
                st = CKPT_E_UNSAFE;
                break;
            }
            snprintf(final, sizeof final, "%s/%s", dir, mi->name);
            st = safe_parents(dir, mi->name, err);
            if (!st)
                st = open_tmp(final, mi->size, &d[i], err);
            d[i].kind = CKPT_ITEM_FILE;
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
        if (!st && (d[i].kind != CKPT_ITEM_FILE || d[i].fd >= 0))
            st = run_item_jobs(ctx, &b, mi, &d[i]);
    }
    ckpt__batch_done(&b, CKPT_OK, NULL);
    {
        ckpt_status bst = ckpt__batch_wait(&b);
        if (!st && bst) {
            st = bst;
            ckpt__seterr(err, "%s", b.err);
        }
    }
    ckpt__batch_destroy(&b);
    dest_cleanup(d, m->nitems, 1, &st, err);
    return st;
}

/* Check sizes and names before anything is written. */
static ckpt_status check_shape(struct ckpt_ctx *ctx, const struct ckpt_manifest *m)
{
    for (struct ckpt_item *it = ctx->items; it; it = it->next) {
        const struct ckpt_mitem *mi = NULL;
        for (size_t i = 0; i < m->nitems; i++)
            if (!strcmp(m->items[i].name, it->name))
                mi = &m->items[i];
        if (!mi) {
            ckpt__set_ctx_err(ctx, "item '%s' is not in checkpoint step %" PRIu64
                                   ": nothing restored", it->name, m->step);
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

static ckpt_status restore_common(struct ckpt_ctx *ctx, uint64_t want, const char *dir,
                                  uint64_t *restored)
{
    struct ckpt_head h;
    bool exists;
    ckpt_status st, last = CKPT_E_NOENT;
    size_t start = 0;
    char err[CKPT_ERR_MAX] = "";

    ckpt__wait(ctx);
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
    for (size_t i = start; i < h.n; i++) {
        struct ckpt_manifest m;
        st = ckpt__read_manifest(ctx, h.entries[i].manifest, &m);
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
                break; /* the program's shape is wrong, not the data */
            }
        }
        if (st == CKPT_OK) {
            st = restore_one(ctx, &m, dir, err);
            if (st)
                ckpt__set_ctx_err(ctx, "checkpoint step %" PRIu64 " is damaged: %s", m.step, err);
            ckpt__manifest_free(&m);
        }
        if (st == CKPT_OK) {
            if (restored)
                *restored = h.entries[i].step;
            if (i != start)
                ckpt__log(&ctx->log, CKPT_LOG_WARN, "restore",
                          "restored step %" PRIu64 " instead of the newer step %" PRIu64
                          ", which is damaged", h.entries[i].step, h.entries[start].step);
            break;
        }
        last = st;
        ckpt__log(&ctx->log, CKPT_LOG_ERROR, "restore", "%s", ctx->errmsg);
        if (st != CKPT_E_CORRUPT && st != CKPT_E_UNSUPPORTED)
            break; /* store down, disk full...: trying older data will not help */
        if (want != CKPT_STEP_LATEST)
            break;
        st = last;
    }
    if (st == CKPT_E_NOENT)
        st = last;
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
