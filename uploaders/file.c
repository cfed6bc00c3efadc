/* file.c -- the file:// store: one file per object under a root directory.
 *
 * Durability: write a temporary file, fsync it, rename it into place, fsync
 * the directory (the redis rdb.c idiom). Deferred puts skip both fsyncs and
 * rely on barrier(), which syncfs()es the filesystem once: a checkpoint of
 * hundreds of chunks then costs one flush instead of hundreds.
 * Conditional puts: If-None-Match is link(2), which fails atomically when the
 * name exists; If-Match compares and renames under an flock(2) on the
 * store's lock file, so it is atomic among all writers on this filesystem
 * (NFS: only where its locking works -- see docs/stores.md).
 * ETags are the XXH64 of the content: stable across copies and restarts. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "backend.h"

#define FILE_CHUNK_BYTES (4u << 20) /* preferred chunk size */

struct file_store {
    struct ckpt_store base;
    char *root;
    int root_fd;
    atomic_uint_fast64_t sent; /* bytes written by puts (fsent), less failed ones */
};

static atomic_uint tmp_counter;

static ckpt_status errno_st(int e)
{
    switch (e) {
    case ENOENT: return CKPT_E_NOENT;
    case ENOSPC: case EDQUOT: return CKPT_E_NOSPACE;
    /* a directory we may not write is not a credentials problem: say what
     * it is (the detail names the path and "Read-only file system" or
     * "Permission denied") */
    case EACCES: case EPERM: case EROFS: return CKPT_E_PERM;
    case ENOMEM: return CKPT_E_NOMEM;
    default: return CKPT_E_IO;
    }
}

static ckpt_status fail(char *err, int e, const char *what, const char *path)
{
    if (err)
        snprintf(err, CKPT_ERR_MAX, "%s %.400s: %s", what, path, strerror(e));
    return errno_st(e);
}

static void etag_of(const void *buf, size_t len, char *out)
{
    if (out)
        snprintf(out, CKPT_ETAG_MAX, "%016llx", (unsigned long long)XXH64(buf, len, 0));
}

static int path_of(struct file_store *fs, const char *key, char *out, size_t n)
{
    int r = snprintf(out, n, "%s/%s", fs->root, key);
    return r > 0 && (size_t)r < n ? 0 : -1;
}

static ckpt_status mkparents(char *path, char *err)
{
    char *slash = strrchr(path, '/');
    ckpt_status st = CKPT_OK;
    if (!slash || slash == path)
        return CKPT_OK;
    *slash = '\0';
    if (mkdir(path, 0700) != 0 && errno != EEXIST) {
        if (errno == ENOENT) {
            st = mkparents(path, err);
            if (st == CKPT_OK && mkdir(path, 0700) != 0 && errno != EEXIST)
                st = fail(err, errno, "mkdir", path);
        } else {
            st = fail(err, errno, "mkdir", path);
        }
    }
    *slash = '/';
    return st;
}

static ckpt_status fsync_parent(const char *path, char *err)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 0;
    int fd;
    ckpt_status st = CKPT_OK;
    if (n == 0 || n >= sizeof dir)
        return CKPT_OK;
    memcpy(dir, path, n);
    dir[n] = '\0';
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return fail(err, errno, "open", dir);
    if (fsync(fd) != 0)
        st = fail(err, errno, "fsync", dir);
    close(fd);
    return st;
}

static ckpt_status read_all(const char *path, size_t max_len, void **buf, size_t *len,
                            char *err)
{
    ckpt_status st = CKPT_OK;
    struct stat sb;
    uint8_t *p = NULL;
    size_t got = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail(err, errno, "open", path);
    if (fstat(fd, &sb) != 0) {
        st = fail(err, errno, "stat", path);
        goto out;
    }
    if (!S_ISREG(sb.st_mode)) {
        if (err)
            snprintf(err, CKPT_ERR_MAX, "%s is not a regular file", path);
        st = CKPT_E_CORRUPT;
        goto out;
    }
    if ((uint64_t)sb.st_size > max_len) {
        if (err)
            snprintf(err, CKPT_ERR_MAX, "%s: %lld bytes, more than the %zu allowed", path,
                     (long long)sb.st_size, max_len);
        st = CKPT_E_CORRUPT;
        goto out;
    }
    p = malloc((size_t)sb.st_size + 1);
    if (!p) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    while (got < (size_t)sb.st_size) {
        ssize_t r = read(fd, p + got, (size_t)sb.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            st = fail(err, errno, "read", path);
            goto out;
        }
        if (r == 0)
            break; /* shrank under us: what we got is what it is */
        got += (size_t)r;
    }
    p[got] = 0;
    *buf = p;
    *len = got;
    p = NULL;
out:
    free(p);
    close(fd);
    return st;
}

/* Write the temp file of a put, adding each piece written to *sent as it
 * goes and to *counted (what a failure of the put takes back: fput). */
static ckpt_status write_tmp(const char *tmp, const void *buf, size_t len, int sync,
                             atomic_uint_fast64_t *sent, uint64_t *counted, char *err)
{
    ckpt_status st = CKPT_OK;
    const uint8_t *p = buf;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return fail(err, errno, "create", tmp);
    while (len) {
        ssize_t w = write(fd, p, len < CKPT_WRITE_PIECE ? len : CKPT_WRITE_PIECE);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            st = fail(err, errno, "write", tmp);
            goto out;
        }
        p += w;
        len -= (size_t)w;
        atomic_fetch_add_explicit(sent, (uint64_t)w, memory_order_relaxed);
        *counted += (uint64_t)w;
    }
    if (sync && fsync(fd) != 0)
        st = fail(err, errno, "fsync", tmp);
#ifdef SYNC_FILE_RANGE_WRITE
    /* A deferred put is made durable by the barrier's syncfs; start its
     * writeback now (not waiting for it), so the disk writes while the
     * workers compress the next chunks and the barrier finds little left
     * to wait for, instead of every byte of the checkpoint at once. A
     * hint: its failure changes nothing (syncfs reports errors). */
    if (!sync && !st)
        (void)sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
#endif
out:
    if (close(fd) != 0 && st == CKPT_OK)
        st = fail(err, errno, "close", tmp);
    if (st)
        unlink(tmp);
    return st;
}

/* The object is replaced under its lock (If-Match) when its etag is still
 * o->if_match. */
static ckpt_status replace_matching(struct file_store *fs, const char *key, const char *path,
                                    const char *tmp, const struct ckpt_put_opts *o, char *err)
{
    char lockpath[4200], cur_etag[CKPT_ETAG_MAX];
    void *cur = NULL;
    size_t cl;
    ckpt_status st;
    int lockfd;

    snprintf(lockpath, sizeof lockpath, "%s/.ckpt-lock", fs->root);
    lockfd = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lockfd < 0 || flock(lockfd, LOCK_EX) != 0) {
        st = fail(err, errno, "lock", lockpath);
        goto out;
    }
    st = read_all(path, (size_t)1 << 30, &cur, &cl, err);
    if (st == CKPT_E_NOENT) {
        if (err)
            snprintf(err, CKPT_ERR_MAX, "%s does not exist (If-Match)", key);
        goto out;
    }
    if (st)
        goto out;
    etag_of(cur, cl, cur_etag);
    free(cur);
    if (!o->if_match || strcmp(cur_etag, o->if_match) != 0) {
        if (err)
            snprintf(err, CKPT_ERR_MAX, "%s changed (etag %s, expected %s)", key, cur_etag,
                     o->if_match ? o->if_match : "(none)");
        st = CKPT_E_PRECONDITION;
        goto out;
    }
    if (rename(tmp, path) != 0)
        st = fail(err, errno, "rename", path);
out:
    if (lockfd >= 0)
        close(lockfd); /* releases the flock */
    return st;
}

static ckpt_status fput(struct ckpt_store *s, const char *key, const void *buf, size_t len,
                        const struct ckpt_put_opts *o, char *etag_out, char *err)
{
    struct file_store *fs = (struct file_store *)s;
    char path[4096], tmp[4200];
    ckpt_status st;
    uint64_t counted = 0;
    int sync = !o->deferred;

    if (!ckpt_key_valid(key) || path_of(fs, key, path, sizeof path)) {
        if (err)
            snprintf(err, CKPT_ERR_MAX, "invalid key '%s'", key);
        return CKPT_E_INVAL;
    }
    st = mkparents(path, err);
    if (st)
        return st;
    snprintf(tmp, sizeof tmp, "%s.tmp.%d.%u", path, (int)getpid(),
             atomic_fetch_add(&tmp_counter, 1));
    st = write_tmp(tmp, buf, len, sync, &fs->sent, &counted, err);
    if (st)
        goto out;
    if (o->cond == CKPT_PUT_IF_NONE_MATCH) {
        if (link(tmp, path) != 0) {
            int e = errno;
            if (e == EEXIST) {
                if (err)
                    snprintf(err, CKPT_ERR_MAX, "%s already exists", key);
                st = CKPT_E_PRECONDITION;
            } else {
                st = fail(err, e, "link", path);
            }
        }
        unlink(tmp);
    } else {
        if (o->cond == CKPT_PUT_IF_MATCH)
            st = replace_matching(fs, key, path, tmp, o, err);
        else if (rename(tmp, path) != 0)
            st = fail(err, errno, "rename", path);
        if (st)
            unlink(tmp);
    }
    if (!st && sync)
        st = fsync_parent(path, err);
    if (!st)
        etag_of(buf, len, etag_out);
out:
    if (st) /* not stored: its bytes are not sent */
        atomic_fetch_sub_explicit(&fs->sent, counted, memory_order_relaxed);
    return st;
}

static ckpt_status fget(struct ckpt_store *s, const char *key, size_t max_len, unsigned flags,
                        void **buf, size_t *len, char *etag_out, char *err)
{
    (void)flags; /* a local read has no transfer to check */
    struct file_store *fs = (struct file_store *)s;
    char path[4096];
    ckpt_status st;
    if (!ckpt_key_valid(key) || path_of(fs, key, path, sizeof path))
        return CKPT_E_INVAL;
    st = read_all(path, max_len, buf, len, err);
    if (st == CKPT_OK)
        etag_of(*buf, *len, etag_out);
    return st;
}

static ckpt_status fget_range(struct ckpt_store *s, const char *key, uint64_t off, size_t len,
                              unsigned flags, void *dst, const struct ckpt_range_watch *watch,
                              char *err)
{
    struct file_store *fs = (struct file_store *)s;
    char path[4096];
    ckpt_status st = CKPT_OK;
    uint8_t *p = dst;
    size_t got = 0;
    int fd;
    (void)flags;
    (void)watch; /* a local read is one pread: the caller takes it whole */
    if (!ckpt_key_valid(key) || path_of(fs, key, path, sizeof path) || len == 0 ||
        off > (uint64_t)INT64_MAX - len)
        return CKPT_E_INVAL;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail(err, errno, "open", path);
    while (got < len) {
        ssize_t r = pread(fd, p + got, len - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            st = fail(err, errno, "read", path);
            break;
        }
        if (r == 0) {
            if (err)
                snprintf(err, CKPT_ERR_MAX, "%.400s ends before byte %llu", path,
                         (unsigned long long)(off + len));
            st = CKPT_E_CORRUPT;
            break;
        }
        got += (size_t)r;
    }
    close(fd);
    return st;
}

static ckpt_status fhead(struct ckpt_store *s, const char *key, uint64_t *size, char *etag_out,
                         char *err)
{
    struct file_store *fs = (struct file_store *)s;
    char path[4096];
    struct stat sb;
    if (!ckpt_key_valid(key) || path_of(fs, key, path, sizeof path))
        return CKPT_E_INVAL;
    if (stat(path, &sb) != 0)
        return fail(err, errno, "stat", path);
    if (size)
        *size = (uint64_t)sb.st_size;
    if (etag_out) {
        void *b;
        size_t l;
        ckpt_status st = read_all(path, SIZE_MAX / 2, &b, &l, err);
        if (st)
            return st;
        etag_of(b, l, etag_out);
        free(b);
    }
    return CKPT_OK;
}

static int is_internal(const char *name)
{
    return name[0] == '.' || strstr(name, ".tmp.") != NULL;
}

/* Walk `dir` (relative key prefix `rel`) depth-first. */
static ckpt_status walk(struct file_store *fs, const char *rel, const char *prefix,
                        ckpt_list_cb cb, void *user, int *stop, char *err)
{
    char path[4096], key[4096];
    DIR *d;
    struct dirent *de;
    ckpt_status st = CKPT_OK;
    snprintf(path, sizeof path, "%s%s%s", fs->root, *rel ? "/" : "", rel);
    d = opendir(path);
    if (!d)
        return errno == ENOENT || errno == ENOTDIR ? CKPT_OK : fail(err, errno, "opendir", path);
    while (!*stop && (de = readdir(d))) {
        struct stat sb;
        int n;
        if (is_internal(de->d_name))
            continue;
        n = snprintf(key, sizeof key, "%s%s%s", rel, *rel ? "/" : "", de->d_name);
        if (n < 0 || (size_t)n >= sizeof key)
            continue;
        /* prune subtrees that cannot match the prefix */
        if (strncmp(key, prefix, strlen(key) < strlen(prefix) ? strlen(key) : strlen(prefix)))
            continue;
        if (path_of(fs, key, path, sizeof path))
            continue;
        if (lstat(path, &sb) != 0)
            continue; /* deleted while listing */
        if (S_ISDIR(sb.st_mode)) {
            st = walk(fs, key, prefix, cb, user, stop, err);
            if (st)
                break;
        } else if (S_ISREG(sb.st_mode) && !strncmp(key, prefix, strlen(prefix))) {
            struct ckpt_obj_info info = { key, (uint64_t)sb.st_size,
                                          (int64_t)sb.st_mtim.tv_sec * 1000 +
                                              sb.st_mtim.tv_nsec / 1000000 };
            if (cb(user, &info))
                *stop = 1;
        }
    }
    closedir(d);
    return st;
}

static ckpt_status flist(struct ckpt_store *s, const char *prefix, ckpt_list_cb cb, void *user,
                         char *err)
{
    struct file_store *fs = (struct file_store *)s;
    char start[4096];
    const char *slash = strrchr(prefix, '/');
    int stop = 0;
    size_t n = slash ? (size_t)(slash - prefix) : 0;
    if (n >= sizeof start)
        return CKPT_E_INVAL;
    /* start at the deepest directory named by the prefix */
    memcpy(start, prefix, n);
    start[n] = '\0';
    return walk(fs, start, prefix, cb, user, &stop, err);
}

static ckpt_status fdel(struct ckpt_store *s, const char *const *keys, size_t n, char *err)
{
    struct file_store *fs = (struct file_store *)s;
    char path[4096];
    for (size_t i = 0; i < n; i++) {
        if (!ckpt_key_valid(keys[i]) || path_of(fs, keys[i], path, sizeof path))
            return CKPT_E_INVAL;
        if (unlink(path) != 0 && errno != ENOENT)
            return fail(err, errno, "unlink", path);
    }
    return CKPT_OK;
}

static ckpt_status fbarrier(struct ckpt_store *s, char *err)
{
    struct file_store *fs = (struct file_store *)s;
    if (syncfs(fs->root_fd) != 0)
        return fail(err, errno, "syncfs", fs->root);
    return CKPT_OK;
}

static void fclose_store(struct ckpt_store *s)
{
    struct file_store *fs = (struct file_store *)s;
    if (!fs)
        return;
    if (fs->root_fd >= 0)
        close(fs->root_fd);
    free(fs->root);
    free(fs->base.url);
    free(fs);
}

static uint64_t fsent(struct ckpt_store *s)
{
    return atomic_load_explicit(&((struct file_store *)s)->sent, memory_order_relaxed);
}

static const struct ckpt_store_ops file_ops = {
    "file", fput, fget, fget_range, fhead, flist, fdel, fbarrier, fclose_store, fsent,
};

ckpt_status ckpt__store_file_open(const char *path, const struct ckpt_store_config *cfg,
                                  struct ckpt_store **out, char *err)
{
    struct file_store *fs;
    size_t len = strlen(path);
    ckpt_status st = CKPT_E_NOMEM;
    char tmp[4096];
    (void)cfg;
    if (path[0] != '/' || len + 2 > sizeof tmp) {
        if (err)
            snprintf(err, CKPT_ERR_MAX, "file store path must be absolute: %s", path);
        return CKPT_E_CONFIG;
    }
    fs = calloc(1, sizeof *fs);
    if (!fs)
        return CKPT_E_NOMEM;
    fs->root_fd = -1;
    fs->base.ops = &file_ops;
    /* Conditions hold through link(2) and flock(2); a local disk is
     * CPU-bound and gains nothing from packs; 4 MiB chunks. */
    fs->base.caps.flags = CKPT_STORE_CONDITIONAL | CKPT_STORE_RANGES;
    fs->base.caps.chunk_bytes = FILE_CHUNK_BYTES;
    fs->root = strdup(path);
    fs->base.url = malloc(len + 8);
    if (!fs->root || !fs->base.url)
        goto fail;
    while (len > 1 && fs->root[len - 1] == '/')
        fs->root[--len] = '\0';
    snprintf(fs->base.url, len + 8, "file://%s", fs->root);
    /* Create the root owner-only if missing (an existing one keeps its mode). */
    snprintf(tmp, sizeof tmp, "%s/", fs->root);
    st = mkparents(tmp, err);
    if (st)
        goto fail;
    fs->root_fd = open(fs->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fs->root_fd < 0) {
        st = fail(err, errno, "open store directory", fs->root);
        goto fail;
    }
    *out = &fs->base;
    return CKPT_OK;
fail:
    fclose_store(&fs->base);
    return st;
}
