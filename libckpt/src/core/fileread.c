/* fileread.c -- versions of protected files, and reading them (fileread.h). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "core/fileread.h"
#include "base/util.h"

void ckpt__fversion_of(struct ckpt_fversion *v, const struct stat *sb)
{
    v->dev = sb->st_dev;
    v->ino = sb->st_ino;
    v->size = sb->st_size;
    v->mtime = sb->st_mtim;
    v->ctime = sb->st_ctim;
}

int ckpt__fversion_same(const struct ckpt_fversion *a, const struct ckpt_fversion *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
           a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec;
}

int ckpt__fversion_stat(const char *path, struct ckpt_fversion *v)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return -1;
    ckpt__fversion_of(v, &sb);
    return 0;
}

static int ts_before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* File times come from the kernel's coarse clock: a write in the same tick
 * as the one before our stat would leave mtime and ctime as they were, and
 * a rewrite during the read would go unseen. So while the file's last
 * change is not yet in the past of that clock, wait a tick and look again.
 * (File systems with coarser times than the kernel's, FAT or some NFS
 * servers, can still hide a same-size rewrite within their resolution.) */
int ckpt__fversion_snap(const char *path, struct ckpt_fversion *v, mode_t *mode)
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
    ckpt__fversion_of(v, &sb);
    *mode = sb.st_mode & 0777;
    return 0;
}

int ckpt__file_open(const char *path, const struct ckpt_fversion *v, int *changed)
{
    struct stat sb;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && (fstat(fd, &sb) != 0 || sb.st_dev != v->dev || sb.st_ino != v->ino))
        *changed = 1; /* replaced: another file at the path */
    return fd;
}

ckpt_status ckpt__file_pread(int fd, const char *path, uint64_t off, size_t len, uint8_t *dst,
                             int *changed, char *err)
{
    size_t got = 0;
    while (got < len) {
        ssize_t r = pread(fd, dst + got, len - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            ckpt__seterr(err, "read %s: %s", path, strerror(errno));
            return CKPT_E_IO;
        }
        if (r == 0) { /* shrank since the snapshot: a new version */
            *changed = 1;
            break;
        }
        got += (size_t)r;
    }
    return CKPT_OK;
}
