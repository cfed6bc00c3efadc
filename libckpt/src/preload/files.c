/* files.c -- the interposed file calls of the preload shim (parts.h,
 * docs/preload.md "File events"): fds opened for writing under CKPT_DIR are
 * remembered, and ckptrun hears of a file once it is complete -- on close,
 * or on a rename into CKPT_DIR -- through a `file` message on the shim's own
 * connection. A file being written is never announced, so ckptrun never
 * commits half a file.
 *
 * Cost for everything else: one prefix compare when a file is opened and
 * one table load when an fd is closed. No allocation on those paths (the
 * fd table and path slots are static); a lock only to announce a file or
 * to read the cached working directory. */

/* Interposed names must be the plain ones (open, not open64-redirected). */
#undef _FILE_OFFSET_BITS

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "control/ctlwire.h"
#include "parts.h"

/* An interposer is a static shim_<name> exported under libc's name as an
 * alias: the same symbol to the dynamic linker, and no second definition
 * of open(), close() ... in the tree for a reader (or a tool) to mistake
 * for the one the library's own calls reach. */
#define INTERPOSE(name)                                                       \
    __typeof__(shim_##name) name __attribute__((alias("shim_" #name), visibility("default")))

/* fds at or above this are not tracked (documented limit); 64 Ki covers the
 * default and common raised RLIMIT_NOFILE while costing 128 KiB of BSS that
 * is only paged in where used. */
#define FD_TABLE 65536
/* Files under CKPT_DIR open for writing at the same time; more are not
 * announced on close (a rename into CKPT_DIR still is). */
#define PATH_SLOTS 256
/* A stuck ckptrun must not hang the trainer forever on a close(). */
#define SEND_TIMEOUT_S 2

typedef int (*open_fn)(const char *, int, ...);
typedef int (*open2_fn)(const char *, int);
typedef int (*openat_fn)(int, const char *, int, ...);
typedef int (*openat2_fn)(int, const char *, int);
typedef int (*creat_fn)(const char *, mode_t);
typedef int (*close_fn)(int);
typedef FILE *(*fopen_fn)(const char *, const char *);
typedef int (*fclose_fn)(FILE *);
typedef int (*rename_fn)(const char *, const char *);
typedef int (*renameat_fn)(int, const char *, int, const char *);
typedef int (*renameat2_fn)(int, const char *, int, const char *, unsigned);
typedef int (*chdir_fn)(const char *);
typedef int (*fchdir_fn)(int);

CKPT_SHIM_REAL(open_fn, open)
CKPT_SHIM_REAL(open_fn, open64)
CKPT_SHIM_REAL(open2_fn, __open_2)
CKPT_SHIM_REAL(open2_fn, __open64_2)
CKPT_SHIM_REAL(openat_fn, openat)
CKPT_SHIM_REAL(openat_fn, openat64)
CKPT_SHIM_REAL(openat2_fn, __openat_2)
CKPT_SHIM_REAL(openat2_fn, __openat64_2)
CKPT_SHIM_REAL(creat_fn, creat)
CKPT_SHIM_REAL(creat_fn, creat64)
CKPT_SHIM_REAL(close_fn, close)
CKPT_SHIM_REAL(fopen_fn, fopen)
CKPT_SHIM_REAL(fopen_fn, fopen64)
CKPT_SHIM_REAL(fclose_fn, fclose)
CKPT_SHIM_REAL(rename_fn, rename)
CKPT_SHIM_REAL(renameat_fn, renameat)
CKPT_SHIM_REAL(renameat2_fn, renameat2)
CKPT_SHIM_REAL(chdir_fn, chdir)
CKPT_SHIM_REAL(fchdir_fn, fchdir)

/* Fixed by ckpt__shim_files_init(), before tracking starts. */
static int g_track;              /* 1: CKPT_DIR and CKPT_SOCKET are usable */
static char g_sock_path[108];    /* CKPT_SOCKET (fits a sockaddr_un) */
static char g_key[CKPT_CTL_KEY_MAX]; /* CKPT_SOCKET_KEY: ckptrun trusts only the
                                    job's processes, or messages that carry it */

/* ------------------------------------------------------------------------ */
/* The connection to ckptrun. Its own socket, opened lazily, identified by  */
/* (device, inode) so that a program that closed all fds and reused ours    */
/* never gets our bytes.                                                    */

static pthread_mutex_t g_sock_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_sock = -1;
static dev_t g_sock_dev;
static ino_t g_sock_ino;

static int sock_is_ours(void)
{
    struct stat st;
    if (g_sock < 0)
        return 0;
    if (fstat(g_sock, &st) != 0 || !S_ISSOCK(st.st_mode) ||
        st.st_dev != g_sock_dev || st.st_ino != g_sock_ino) {
        /* Closed (and maybe reused) behind our back: forget it, never
         * close it -- the number is not ours any more. */
        g_sock = -1;
        return 0;
    }
    return 1;
}

static void sock_drop(void)
{
    if (g_sock >= 0 && sock_is_ours())
        real_close()(g_sock);
    g_sock = -1;
}

static int sock_connect(void)
{
    struct stat st;
    int fd = ckpt__ctl_socket(SEND_TIMEOUT_S);
    if (fd < 0)
        return -1;
    if (ckpt__ctl_connect(fd, g_sock_path) != 0 || fstat(fd, &st) != 0) {
        real_close()(fd);
        return -1;
    }
    g_sock = fd;
    g_sock_dev = st.st_dev;
    g_sock_ino = st.st_ino;
    return 0;
}

/* Send {"type":"file","path":..,"event":..,"pid":..,"key":..}. Best effort:
 * a lost message costs ckptrun its fast path (it still sees the entry by
 * settling), while failing the program's close() would cost the user their
 * data. A message over the protocol's limit is not sent. */
static void announce(const char *path, const char *event)
{
    struct ckpt_ctl_msg m;
    int saved = errno;

    ckpt__ctl_begin(&m, "file");
    ckpt__ctl_str(&m, "path", path);
    ckpt__ctl_str(&m, "event", event);
    ckpt__ctl_int(&m, "pid", getpid());
    if (g_key[0])
        ckpt__ctl_str(&m, "key", g_key);
    if (ckpt__ctl_end(&m, true) != 0)
        goto out;

    pthread_mutex_lock(&g_sock_mu);
    for (int attempt = 0; attempt < 2; attempt++) {
        if (!sock_is_ours() && sock_connect() != 0)
            break;
        if (ckpt__ctl_send(g_sock, m.buf, m.len) == 0)
            break;
        sock_drop(); /* ckptrun restarted or went away: reconnect once */
    }
    pthread_mutex_unlock(&g_sock_mu);
out:
    errno = saved;
}

/* ------------------------------------------------------------------------ */
/* Tracking fds opened for writing under CKPT_DIR.                          */

static _Atomic uint16_t g_fd_slot[FD_TABLE]; /* 0 = untracked, else slot+1 */
static struct path_slot {
    atomic_int used;
    int fd;
    char path[PATH_MAX];
} g_slots[PATH_SLOTS];

static void slot_free(int s)
{
    atomic_store_explicit(&g_slots[s].used, 0, memory_order_release);
}

/* Called after every successful open: forgets a stale entry for this fd
 * (closed behind our back: close_range, dup2 onto it, a raw syscall) and,
 * if the file is ours to watch, records it. */
static void after_open(int fd, int dirfd, const char *path, int writing)
{
    char abs[PATH_MAX];
    size_t len;

    if (fd < 0 || fd >= FD_TABLE)
        return;
    if (atomic_load_explicit(&g_fd_slot[fd], memory_order_relaxed)) {
        uint16_t old = atomic_exchange(&g_fd_slot[fd], 0);
        if (old)
            slot_free(old - 1);
    }
    if (!writing || !g_track)
        return;
    len = ckpt__shim_resolve(dirfd, path, abs);
    if (!len)
        return;
    for (int s = 0; s < PATH_SLOTS; s++) {
        int expect = 0;
        if (atomic_load_explicit(&g_slots[s].used, memory_order_relaxed) ||
            !atomic_compare_exchange_strong(&g_slots[s].used, &expect, 1))
            continue;
        memcpy(g_slots[s].path, abs, len + 1);
        g_slots[s].fd = fd;
        atomic_store_explicit(&g_fd_slot[fd], (uint16_t)(s + 1),
                              memory_order_release);
        return;
    }
}

/* Before the real close: take the fd's entry out of the table, so that a
 * thread that gets the same number from open() right after the real close
 * cannot have its entry taken by us. @return the slot, or -1. */
static int before_close(int fd)
{
    if (fd < 0 || fd >= FD_TABLE ||
        !atomic_load_explicit(&g_fd_slot[fd], memory_order_relaxed))
        return -1;
    uint16_t s = atomic_exchange(&g_fd_slot[fd], 0);
    return s ? (int)s - 1 : -1;
}

static void after_close(int slot, int rc)
{
    if (slot < 0)
        return;
    /* Linux closes the fd even when close() reports EINTR. */
    if (rc == 0 || errno == EINTR)
        announce(g_slots[slot].path, "closed");
    slot_free(slot);
}

static int wants_write(int flags)
{
    int acc = flags & O_ACCMODE;
    /* O_TMPFILE files have no name until linkat(): not tracked. */
    if ((flags & O_TMPFILE) == O_TMPFILE)
        return 0;
    return acc == O_WRONLY || acc == O_RDWR;
}

static int mode_writes(const char *mode)
{
    return mode && (strchr(mode, 'w') || strchr(mode, 'a') || strchr(mode, '+'));
}

static int needs_mode(int flags)
{
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

/* ------------------------------------------------------------------------ */
/* Interposed file calls. Each calls the real one, then (rarely) looks at   */
/* the result; errno is preserved across our bookkeeping.                   */

#define KEEP_ERRNO(stmt)                                                      \
    do {                                                                      \
        int e_ = errno;                                                       \
        stmt;                                                                 \
        errno = e_;                                                           \
    } while (0)

static int shim_open(const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (needs_mode(flags)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, unsigned int);
        va_end(ap);
    }
    int fd = real_open()(path, flags, mode);
    KEEP_ERRNO(after_open(fd, AT_FDCWD, path, wants_write(flags)));
    return fd;
}
INTERPOSE(open);

static int shim_open64(const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (needs_mode(flags)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, unsigned int);
        va_end(ap);
    }
    int fd = real_open64()(path, flags, mode);
    KEEP_ERRNO(after_open(fd, AT_FDCWD, path, wants_write(flags)));
    return fd;
}
INTERPOSE(open64);

/* _FORTIFY_SOURCE builds call these when no mode argument is passed. */
static int shim___open_2(const char *path, int flags)
{
    int fd = real___open_2()(path, flags);
    KEEP_ERRNO(after_open(fd, AT_FDCWD, path, wants_write(flags)));
    return fd;
}
INTERPOSE(__open_2);

static int shim___open64_2(const char *path, int flags)
{
    int fd = real___open64_2()(path, flags);
    KEEP_ERRNO(after_open(fd, AT_FDCWD, path, wants_write(flags)));
    return fd;
}
INTERPOSE(__open64_2);

static int shim_openat(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (needs_mode(flags)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, unsigned int);
        va_end(ap);
    }
    int fd = real_openat()(dirfd, path, flags, mode);
    KEEP_ERRNO(after_open(fd, dirfd, path, wants_write(flags)));
    return fd;
}
INTERPOSE(openat);

static int shim_openat64(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (needs_mode(flags)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, unsigned int);
        va_end(ap);
    }
    int fd = real_openat64()(dirfd, path, flags, mode);
    KEEP_ERRNO(after_open(fd, dirfd, path, wants_write(flags)));
    return fd;
}
INTERPOSE(openat64);

static int shim___openat_2(int dirfd, const char *path, int flags)
{
    int fd = real___openat_2()(dirfd, path, flags);
    KEEP_ERRNO(after_open(fd, dirfd, path, wants_write(flags)));
    return fd;
}
INTERPOSE(__openat_2);

static int shim___openat64_2(int dirfd, const char *path, int flags)
{
    int fd = real___openat64_2()(dirfd, path, flags);
    KEEP_ERRNO(after_open(fd, dirfd, path, wants_write(flags)));
    return fd;
}
INTERPOSE(__openat64_2);

static int shim_creat(const char *path, mode_t mode)
{
    int fd = real_creat()(path, mode);
    KEEP_ERRNO(after_open(fd, AT_FDCWD, path, 1));
    return fd;
}
INTERPOSE(creat);

static int shim_creat64(const char *path, mode_t mode)
{
    int fd = real_creat64()(path, mode);
    KEEP_ERRNO(after_open(fd, AT_FDCWD, path, 1));
    return fd;
}
INTERPOSE(creat64);

/* glibc's fopen does not go through the open symbol, so it is interposed
 * too; otherwise fclose would never find the file in the table. */
static FILE *shim_fopen(const char *path, const char *mode)
{
    FILE *f = real_fopen()(path, mode);
    if (f)
        KEEP_ERRNO(after_open(fileno(f), AT_FDCWD, path, mode_writes(mode)));
    return f;
}
INTERPOSE(fopen);

static FILE *shim_fopen64(const char *path, const char *mode)
{
    FILE *f = real_fopen64()(path, mode);
    if (f)
        KEEP_ERRNO(after_open(fileno(f), AT_FDCWD, path, mode_writes(mode)));
    return f;
}
INTERPOSE(fopen64);

static int shim_close(int fd)
{
    int slot = before_close(fd);
    int rc = real_close()(fd);
    if (slot >= 0)
        KEEP_ERRNO(after_close(slot, rc));
    return rc;
}
INTERPOSE(close);

/* fclose flushes the buffer and closes the fd inside libc, bypassing our
 * close: the fd is looked up before, announced after (data flushed). */
static int shim_fclose(FILE *f)
{
    int slot = f ? before_close(fileno(f)) : -1;
    int rc = real_fclose()(f);
    if (slot >= 0)
        KEEP_ERRNO(after_close(slot, rc));
    return rc;
}
INTERPOSE(fclose);

static void after_rename(int rc, int dirfd, const char *to)
{
    char abs[PATH_MAX];
    if (rc != 0 || !g_track)
        return;
    if (ckpt__shim_resolve(dirfd, to, abs))
        announce(abs, "renamed");
}

static int shim_rename(const char *from, const char *to)
{
    int rc = real_rename()(from, to);
    KEEP_ERRNO(after_rename(rc, AT_FDCWD, to));
    return rc;
}
INTERPOSE(rename);

static int shim_renameat(int fromfd, const char *from, int tofd, const char *to)
{
    int rc = real_renameat()(fromfd, from, tofd, to);
    KEEP_ERRNO(after_rename(rc, tofd, to));
    return rc;
}
INTERPOSE(renameat);

static int shim_renameat2(int fromfd, const char *from, int tofd, const char *to,
                          unsigned flags)
{
    renameat2_fn f = real_renameat2();
    if (!f) { /* libc older than 2.28 */
        errno = ENOSYS;
        return -1;
    }
    int rc = f(fromfd, from, tofd, to, flags);
    KEEP_ERRNO(after_rename(rc, tofd, to));
#ifdef RENAME_EXCHANGE
    /* An exchange also puts new content at `from`. */
    if (flags & RENAME_EXCHANGE)
        KEEP_ERRNO(after_rename(rc, fromfd, from));
#endif
    return rc;
}
INTERPOSE(renameat2);

static int shim_chdir(const char *path)
{
    int rc = real_chdir()(path);
    if (rc == 0)
        KEEP_ERRNO(ckpt__shim_cwd_changed());
    return rc;
}
INTERPOSE(chdir);

static int shim_fchdir(int fd)
{
    int rc = real_fchdir()(fd);
    if (rc == 0)
        KEEP_ERRNO(ckpt__shim_cwd_changed());
    return rc;
}
INTERPOSE(fchdir);

void ckpt__shim_files_init(const char *socket_path)
{
    size_t n = strlen(socket_path);
    if (n >= sizeof g_sock_path)
        return; /* cannot be connected to: nothing is tracked */
    memcpy(g_sock_path, socket_path, n + 1);
    ckpt__ctl_key(g_key);
    g_track = 1;
}

void ckpt__shim_files_atfork_child(void)
{
    /* The parent's threads did not survive the fork: a lock one of them
     * held would stay locked. */
    pthread_mutex_init(&g_sock_mu, NULL);
    /* The parent's connection is the parent's: a child with its own would
     * interleave messages in the same stream. */
    if (g_sock >= 0)
        real_close()(g_sock);
    g_sock = -1;
    /* Files the parent has open are the parent's to complete: a child
     * closing its copy does not finish them. */
    for (int s = 0; s < PATH_SLOTS; s++) {
        if (!atomic_load(&g_slots[s].used))
            continue;
        int fd = g_slots[s].fd;
        if (fd >= 0 && fd < FD_TABLE)
            atomic_store(&g_fd_slot[fd], 0);
        slot_free(s);
    }
}
