/* deliver.c -- where a restore's chunks go (deliver.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/ctx.h"
#include "restore/deliver.h"
#include "cuda/cuda.h"

/* Flush behind (CKPT_RESTORE_SYNC=1 only): every FLUSH_EVERY bytes written
 * to a file, the job that crosses the mark starts their writeback
 * (sync_file_range WRITE: it does not wait), so the disk works while the
 * workers keep downloading and the fsync before the rename, which makes
 * the file durable, has little left to write. Without it that fsync waited
 * for the whole file (on a 1 GiB restore, about as long as a tenth of the
 * download); with fdatasync here instead, each crossing worker stopped
 * downloading until its writeback was done, and the restore took 1.5-2.5x
 * the CPU. */
#define FLUSH_EVERY (64u << 20)

ckpt_status ckpt__local_err(char *err, const char *what, const char *path, int e)
{
    ckpt__seterr(err, "local disk: %s %s: %s%s", what, path, strerror(e),
                 e == EMFILE || e == ENFILE ? " (raise ulimit -n)" : "");
    return ckpt__errno_status(e);
}

/* The budget of descriptors a restore may hold open: a quarter of what
 * RLIMIT_NOFILE leaves free now, 4..CKPT_FDS_MAX. */
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
        return CKPT_FDS_MAX;
    free_fds = rl.rlim_cur > used ? (unsigned)(rl.rlim_cur - used) : 0;
    free_fds /= 4;
    return free_fds < 4 ? 4 : free_fds > CKPT_FDS_MAX ? CKPT_FDS_MAX : free_fds;
}

int ckpt__dests_init(struct ckpt_dests *ds, const struct ckpt_manifest *m)
{
    memset(ds, 0, sizeof *ds);
    ds->d = calloc(m->nitems ? m->nitems : 1, sizeof *ds->d);
    if (!ds->d)
        return -1;
    ds->n = m->nitems;
    pthread_mutex_init(&ds->pool.mu, NULL);
    pthread_cond_init(&ds->pool.cv, NULL);
    ds->pool.limit = fd_budget();
    for (size_t i = 0; i < m->nitems; i++) {
        ds->d[i].fd = -1;
        ds->d[i].pool = &ds->pool;
        ds->d[i].left = m->items[i].nchunks;
        ds->d[i].mode = m->items[i].mode ? m->items[i].mode : 0600;
        pthread_mutex_init(&ds->d[i].wmu, NULL);
    }
    return 0;
}

void ckpt__dests_finish(struct ckpt_dests *ds, int sync, ckpt_status *st, char *err)
{
    struct ckpt_dest *d = ds->d;
    size_t n = ds->n;
    for (size_t i = 0; i < n; i++) {
        if (d[i].fd >= 0) {
            close(d[i].fd);
            d[i].fd = -1;
        }
        if (d[i].tmp && d[i].kind == CKPT_ITEM_FILE) {
            if (*st == CKPT_OK && sync) {
                int fd = open(d[i].tmp, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0 || fsync(fd) != 0)
                    *st = ckpt__local_err(err, fd < 0 ? "open" : "fsync", d[i].tmp, errno);
                if (fd >= 0)
                    close(fd);
            }
            if (*st == CKPT_OK && rename(d[i].tmp, d[i].final) != 0)
                *st = ckpt__local_err(err, "rename to", d[i].final, errno);
            if (*st)
                unlink(d[i].tmp);
        }
        free(d[i].tmp);
        free(d[i].final);
        pthread_mutex_destroy(&d[i].wmu);
    }
    free(d);
    pthread_mutex_destroy(&ds->pool.mu);
    pthread_cond_destroy(&ds->pool.cv);
    memset(ds, 0, sizeof *ds);
}

/* The temporary file is made with the final mode (owner-only whatever the
 * original allowed others: DESIGN §6), and closed: it is opened again
 * while its chunks are written (the fd pool). */
ckpt_status ckpt__dest_file(struct ckpt_dest *d, const char *final, uint64_t size, char *err)
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
        st = ckpt__local_err(err, "create", d->tmp, errno);
        free(d->tmp);
        d->tmp = NULL; /* nothing of ours to remove */
        return st;
    }
    if (ftruncate(fd, (off_t)size) != 0)
        st = ckpt__local_err(err, "size", d->tmp, errno);
    else if (fchmod(fd, (d->mode & 0700) | 0600) != 0)
        st = ckpt__local_err(err, "chmod", d->tmp, errno);
    close(fd);
    return st;
}

static void pool_close_locked(struct ckpt_fdpool *p, struct ckpt_dest *d)
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
static int fd_acquire(struct ckpt_dest *d, char *err)
{
    struct ckpt_fdpool *p = d->pool;
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
                ckpt__local_err(err, "open", d->tmp, errno);
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
static void fd_release(struct ckpt_dest *d)
{
    struct ckpt_fdpool *p = d->pool;
    pthread_mutex_lock(&p->mu);
    d->users--;
    if (d->left == 0 && d->users == 0 && d->fd >= 0)
        pool_close_locked(p, d);
    else if (d->users == 0)
        pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* One more chunk of the file is in (it closes the file after its last
 * chunk). */
void ckpt__dest_chunk_in(struct ckpt_dest *d)
{
    struct ckpt_fdpool *p = d->pool;
    pthread_mutex_lock(&p->mu);
    if (d->left)
        d->left--;
    if (d->left == 0 && d->users == 0 && d->fd >= 0)
        pool_close_locked(p, d);
    pthread_mutex_unlock(&p->mu);
}

ckpt_status ckpt__dest_written(struct ckpt_dest *d, uint64_t n, char *err)
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
                st = ckpt__local_err(err, "sync_file_range", d->tmp, errno);
            fd_release(d);
            return st;
        }
    }
    return CKPT_OK;
}

/* Write n bytes at off of a restored file. Writes into one file are
 * serialized: the kernel serializes them anyway, and its waiters spin. */
ckpt_status ckpt__dest_write(struct ckpt_dest *d, uint64_t off, const uint8_t *p, size_t n,
                             char *err)
{
    ckpt_status st = CKPT_OK;
    int fd = fd_acquire(d, err);
    if (fd < 0)
        return CKPT_E_IO;
    pthread_mutex_lock(&d->wmu);
    for (size_t done = 0; done < n;) {
        size_t len = n - done < CKPT_WRITE_PIECE ? n - done : CKPT_WRITE_PIECE;
        ssize_t w = pwrite(fd, p + done, len, (off_t)(off + done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            st = ckpt__local_err(err, "write", d->tmp, errno);
            break;
        }
        done += (size_t)w;
    }
    pthread_mutex_unlock(&d->wmu);
    fd_release(d);
    return st;
}

ckpt_status ckpt__deliver(struct ckpt_ctx *ctx, struct ckpt_codec_ws *ws, struct ckpt_dest *d,
                          uint64_t off, const struct ckpt_chunk_ref *c, const uint8_t *obj,
                          char *err)
{
    const uint8_t *raw;
    ckpt_status st;
    if (d && d->kind == CKPT_ITEM_MEM)
        return ckpt__chunk_decode(ws, obj, c->stored_len, c->id, d->ptr + off, c->raw_len, err);
    st = ckpt__chunk_view(ws, obj, c->stored_len, c->id, c->raw_len, &raw, err);
    if (st || !d)
        return st;
    if (d->kind == CKPT_ITEM_DEVICE)
        return ckpt__cuda_h2d(ctx, (uint8_t *)d->dev + off, raw, c->raw_len, err);
    st = ckpt__dest_write(d, off, raw, c->raw_len, err);
    if (!st && ctx->restore_sync)
        st = ckpt__dest_written(d, c->raw_len, err);
    if (!st)
        ckpt__dest_chunk_in(d);
    return st;
}

