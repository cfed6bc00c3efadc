/*
 * preload.c -- libckpt_preload.so, the LD_PRELOAD shim (`ckptrun --preload`).
 *
 * What it does for an unmodified program (docs/preload.md is the manual):
 *   1. Makes the checkpoint request signal (CKPT_SIGNAL, default SIGUSR1)
 *      harmless: when the program has no handler, a recording handler is
 *      installed instead of the default action (which kills); when the
 *      program installs its own, it is chained, so it still runs.
 *   2. Tells ckptrun when a file under CKPT_DIR is complete: it interposes
 *      the libc calls that open, close and rename files, remembers the fds
 *      opened for writing under CKPT_DIR, and sends a `file` message
 *      (docs/CONTROL.md) on close or on a rename into CKPT_DIR. A file being
 *      written is never announced, so ckptrun never commits half a file.
 *   3. Carries libckpt inside and exposes its API in-process, with a lazily
 *      opened global context (ckpt_preload_ctx()).
 *
 * Cost for everything else: one prefix compare when a file is opened and
 * one table load when an fd is closed. No allocation on those paths (the
 * tracking table and path slots are static), and no lock unless a relative
 * path has to be resolved against the cached working directory.
 *
 * Rules this file follows because it runs inside someone else's process:
 *   - any wrapper may be called before the constructor (by other libraries'
 *     constructors) or after a fork: real functions are resolved lazily and
 *     an unset configuration means "pass through";
 *   - errno as seen by the program is exactly what the real call set;
 *   - it never writes to or closes an fd it does not own: its socket's
 *     identity (device, inode) is checked before each use, because programs
 *     that daemonize close every fd and reuse the numbers;
 *   - nothing is printed.
 */

/* Interposed names must be the plain ones (open, not open64-redirected). */
#undef _FILE_OFFSET_BITS
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

#include "ckpt.h"
#ifndef CKPT_PRELOAD_STANDALONE
/* Built into the same shared object as the library: the context's request
 * flag is consumed directly (ckpt_preload_take_request). */
#include "ctx.h"
#endif

#define EXPORT __attribute__((visibility("default")))

/* fds at or above this are not tracked (documented limit); 64 Ki covers the
 * default and common raised RLIMIT_NOFILE while costing 128 KiB of BSS that
 * is only paged in where used. */
#define FD_TABLE 65536
/* Files under CKPT_DIR open for writing at the same time; more are not
 * announced on close (a rename into CKPT_DIR still is). */
#define PATH_SLOTS 256
/* docs/CONTROL.md: one message is at most 4096 bytes. */
#define MSG_MAX 4096

/* ------------------------------------------------------------------------ */
/* Real functions, resolved on first use: a wrapper can run before the      */
/* constructor. Racing threads store the same value; atomics keep it       */
/* well-defined.                                                            */

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
typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);

static void *real(_Atomic(void *) *slot, const char *name)
{
    void *f = atomic_load_explicit(slot, memory_order_acquire);
    if (!f) {
        f = dlsym(RTLD_NEXT, name);
        atomic_store_explicit(slot, f, memory_order_release);
    }
    return f;
}
#define REAL(type, name)                                                      \
    static _Atomic(void *) real_##name##_p;                                   \
    static type real_##name(void)                                             \
    {                                                                         \
        return (type)real(&real_##name##_p, #name);                           \
    }
REAL(open_fn, open)
REAL(open_fn, open64)
REAL(open2_fn, __open_2)
REAL(open2_fn, __open64_2)
REAL(openat_fn, openat)
REAL(openat_fn, openat64)
REAL(openat2_fn, __openat_2)
REAL(openat2_fn, __openat64_2)
REAL(creat_fn, creat)
REAL(creat_fn, creat64)
REAL(close_fn, close)
REAL(fopen_fn, fopen)
REAL(fopen_fn, fopen64)
REAL(fclose_fn, fclose)
REAL(rename_fn, rename)
REAL(renameat_fn, renameat)
REAL(renameat2_fn, renameat2)
REAL(chdir_fn, chdir)
REAL(fchdir_fn, fchdir)
REAL(sigaction_fn, sigaction)

/* ------------------------------------------------------------------------ */
/* Configuration, fixed by the constructor.                                 */

static int g_track;              /* 1: CKPT_DIR and CKPT_SOCKET are usable */
static char g_dir[PATH_MAX];     /* CKPT_DIR, absolute, normalized, + '/' */
static size_t g_dir_len;
static char g_real[PATH_MAX];    /* realpath(CKPT_DIR) + '/', if different */
static size_t g_real_len;
static char g_sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static int g_sig;                /* request signal, 0 = none */
static char g_key[65];           /* CKPT_SOCKET_KEY: ckptrun trusts only the job's
                                    processes, or messages that carry it */

/* ------------------------------------------------------------------------ */
/* Paths.                                                                   */

/* Normalize an absolute path in place, lexically: collapse "//", drop ".",
 * resolve ".." against the previous component. Symbolic links are not
 * followed (documented limit: CKPT_DIR is matched by its given and its real
 * path only). */
static void normalize(char *p)
{
    char *out = p, *in = p;
    while (*in) {
        while (*in == '/')
            in++;
        if (!*in)
            break;
        char *end = strchrnul(in, '/');
        size_t n = (size_t)(end - in);
        if (n == 1 && in[0] == '.') {
            /* nothing */
        } else if (n == 2 && in[0] == '.' && in[1] == '.') {
            while (out > p && *--out != '/')
                ;
        } else {
            *out++ = '/';
            memmove(out, in, n);
            out += n;
        }
        in = end;
    }
    if (out == p)
        *out++ = '/';
    *out = '\0';
}

/* The working directory is cached (refreshed after chdir/fchdir) so that
 * resolving a relative path costs no system call. */
static pthread_mutex_t g_cwd_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_cwd[PATH_MAX];
static int g_cwd_ok;

static int get_cwd(char *out, size_t size)
{
    int ok = 0;
    /* trylock: a wrapper may run in a signal handler that interrupted the
     * holder; then ask the kernel instead of deadlocking. */
    if (pthread_mutex_trylock(&g_cwd_mu) == 0) {
        if (!g_cwd_ok)
            g_cwd_ok = getcwd(g_cwd, sizeof g_cwd) != NULL;
        if (g_cwd_ok) {
            size_t n = strlen(g_cwd);
            if (n < size) {
                memcpy(out, g_cwd, n + 1);
                ok = 1;
            }
        }
        pthread_mutex_unlock(&g_cwd_mu);
        return ok;
    }
    return getcwd(out, size) != NULL;
}

static void cwd_changed(void)
{
    pthread_mutex_lock(&g_cwd_mu);
    g_cwd_ok = 0;
    pthread_mutex_unlock(&g_cwd_mu);
}

/* Does abs (normalized) lie strictly inside the directory prefix pre
 * (which ends with '/')? */
static int inside(const char *abs, size_t len, const char *pre, size_t plen)
{
    return plen && len > plen && memcmp(abs, pre, plen) == 0;
}

/* If `path` (relative to dirfd) names something strictly inside CKPT_DIR,
 * write its absolute form, spelled with CKPT_DIR as given to us (that is the
 * name ckptrun watches), into out and return its length; else return 0.
 * The common case, an absolute clean path outside CKPT_DIR, costs one or two
 * prefix compares and a scan for "/." and "//". */
static size_t resolve_in_dir(int dirfd, const char *path, char out[PATH_MAX])
{
    char buf[PATH_MAX];
    size_t len;

    if (!path || !*path)
        return 0;
    if (path[0] == '/' && !strstr(path, "/.") && !strstr(path, "//")) {
        len = strlen(path);
        if (len >= PATH_MAX)
            return 0;
        if (!inside(path, len, g_dir, g_dir_len) &&
            !inside(path, len, g_real, g_real_len))
            return 0;
        memcpy(buf, path, len + 1);
    } else {
        size_t base;
        if (path[0] == '/') {
            base = 0;
            buf[0] = '\0';
        } else if (dirfd == AT_FDCWD) {
            if (!get_cwd(buf, sizeof buf))
                return 0;
            base = strlen(buf);
        } else {
            /* Only for *at() calls with a real directory fd: rare. */
            char link[64];
            snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
            ssize_t n = readlink(link, buf, sizeof buf - 1);
            if (n <= 0 || buf[0] != '/')
                return 0;
            buf[n] = '\0';
            base = (size_t)n;
        }
        size_t plen = strlen(path);
        if (base + 1 + plen >= sizeof buf)
            return 0;
        buf[base] = '/';
        memcpy(buf + base + 1, path, plen + 1);
        normalize(buf);
        len = strlen(buf);
    }
    if (inside(buf, len, g_dir, g_dir_len)) {
        memcpy(out, buf, len + 1);
        return len;
    }
    if (inside(buf, len, g_real, g_real_len)) {
        /* Report under the name ckptrun knows: swap the real prefix for
         * the given one. */
        size_t rest = len - g_real_len;
        if (g_dir_len + rest >= PATH_MAX)
            return 0;
        memcpy(out, g_dir, g_dir_len);
        memcpy(out + g_dir_len, buf + g_real_len, rest + 1);
        return g_dir_len + rest;
    }
    return 0;
}

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
    struct sockaddr_un sa;
    struct stat st;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, g_sock_path, sizeof sa.sun_path);
    /* A stuck ckptrun must not hang the trainer forever on a close(). */
    struct timeval tv = { 2, 0 };
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        fstat(fd, &st) != 0) {
        real_close()(fd);
        return -1;
    }
    g_sock = fd;
    g_sock_dev = st.st_dev;
    g_sock_ino = st.st_ino;
    return 0;
}

static int send_all(const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(g_sock, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Append s to the message as a JSON string body. @return 0, -1 if full. */
static int json_str(char *m, size_t *at, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (*at + 6 >= MSG_MAX)
            return -1;
        if (c == '"' || c == '\\') {
            m[(*at)++] = '\\';
            m[(*at)++] = (char)c;
        } else if (c < 0x20) {
            memcpy(m + *at, "\\u00", 4);
            m[*at + 4] = hex[c >> 4];
            m[*at + 5] = hex[c & 15];
            *at += 6;
        } else {
            /* Bytes >= 0x80 pass as they are: UTF-8 names stay readable;
             * other encodings are the documented limit. */
            m[(*at)++] = (char)c;
        }
    }
    return 0;
}

/* Send {"type":"file","path":..,"event":..,"pid":..}. Best effort: a lost
 * message costs ckptrun its fast path (it still sees the entry by settling),
 * while failing the program's close() would cost the user their data. */
static void announce(const char *path, const char *event)
{
    char m[MSG_MAX];
    size_t at = 0;
    int saved = errno;

    at = (size_t)snprintf(m, sizeof m, "{\"type\":\"file\",\"path\":\"");
    if (json_str(m, &at, path) != 0)
        goto out;
    int n = snprintf(m + at, sizeof m - at, "\",\"event\":\"%s\",\"pid\":%ld%s%s%s}\n",
                     event, (long)getpid(), g_key[0] ? ",\"key\":\"" : "", g_key,
                     g_key[0] ? "\"" : "");
    if (n < 0 || (size_t)n >= sizeof m - at)
        goto out;
    at += (size_t)n;

    pthread_mutex_lock(&g_sock_mu);
    for (int attempt = 0; attempt < 2; attempt++) {
        if (!sock_is_ours() && sock_connect() != 0)
            break;
        if (send_all(m, at) == 0)
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
    len = resolve_in_dir(dirfd, path, abs);
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

EXPORT int open(const char *path, int flags, ...)
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

EXPORT int open64(const char *path, int flags, ...)
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

/* _FORTIFY_SOURCE builds call these when no mode argument is passed. */
EXPORT int __open_2(const char *path, int flags)
{
    int fd = real___open_2()(path, flags);
    KEEP_ERRNO(after_open(fd, AT_FDCWD, path, wants_write(flags)));
    return fd;
}

EXPORT int __open64_2(const char *path, int flags)
{
    int fd = real___open64_2()(path, flags);
    KEEP_ERRNO(after_open(fd, AT_FDCWD, path, wants_write(flags)));
    return fd;
}

EXPORT int openat(int dirfd, const char *path, int flags, ...)
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

EXPORT int openat64(int dirfd, const char *path, int flags, ...)
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

EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
    int fd = real___openat_2()(dirfd, path, flags);
    KEEP_ERRNO(after_open(fd, dirfd, path, wants_write(flags)));
    return fd;
}

EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
    int fd = real___openat64_2()(dirfd, path, flags);
    KEEP_ERRNO(after_open(fd, dirfd, path, wants_write(flags)));
    return fd;
}

EXPORT int creat(const char *path, mode_t mode)
{
    int fd = real_creat()(path, mode);
    KEEP_ERRNO(after_open(fd, AT_FDCWD, path, 1));
    return fd;
}

EXPORT int creat64(const char *path, mode_t mode)
{
    int fd = real_creat64()(path, mode);
    KEEP_ERRNO(after_open(fd, AT_FDCWD, path, 1));
    return fd;
}

/* glibc's fopen does not go through the open symbol, so it is interposed
 * too; otherwise fclose would never find the file in the table. */
EXPORT FILE *fopen(const char *path, const char *mode)
{
    FILE *f = real_fopen()(path, mode);
    if (f)
        KEEP_ERRNO(after_open(fileno(f), AT_FDCWD, path, mode_writes(mode)));
    return f;
}

EXPORT FILE *fopen64(const char *path, const char *mode)
{
    FILE *f = real_fopen64()(path, mode);
    if (f)
        KEEP_ERRNO(after_open(fileno(f), AT_FDCWD, path, mode_writes(mode)));
    return f;
}

EXPORT int close(int fd)
{
    int slot = before_close(fd);
    int rc = real_close()(fd);
    if (slot >= 0)
        KEEP_ERRNO(after_close(slot, rc));
    return rc;
}

/* fclose flushes the buffer and closes the fd inside libc, bypassing our
 * close: the fd is looked up before, announced after (data flushed). */
EXPORT int fclose(FILE *f)
{
    int slot = f ? before_close(fileno(f)) : -1;
    int rc = real_fclose()(f);
    if (slot >= 0)
        KEEP_ERRNO(after_close(slot, rc));
    return rc;
}

static void after_rename(int rc, int dirfd, const char *to)
{
    char abs[PATH_MAX];
    if (rc != 0 || !g_track)
        return;
    if (resolve_in_dir(dirfd, to, abs))
        announce(abs, "renamed");
}

EXPORT int rename(const char *from, const char *to)
{
    int rc = real_rename()(from, to);
    KEEP_ERRNO(after_rename(rc, AT_FDCWD, to));
    return rc;
}

EXPORT int renameat(int fromfd, const char *from, int tofd, const char *to)
{
    int rc = real_renameat()(fromfd, from, tofd, to);
    KEEP_ERRNO(after_rename(rc, tofd, to));
    return rc;
}

EXPORT int renameat2(int fromfd, const char *from, int tofd, const char *to,
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

EXPORT int chdir(const char *path)
{
    int rc = real_chdir()(path);
    if (rc == 0)
        KEEP_ERRNO(cwd_changed());
    return rc;
}

EXPORT int fchdir(int fd)
{
    int rc = real_fchdir()(fd);
    if (rc == 0)
        KEEP_ERRNO(cwd_changed());
    return rc;
}

/* ------------------------------------------------------------------------ */
/* The request signal.                                                      */
/*                                                                          */
/* While the shim owns the signal, the kernel always runs on_signal(); the  */
/* disposition the program asked for (its "view") is kept in one of a few  */
/* static slots, published through an atomic pointer so that the handler   */
/* reads it without a lock. sigaction() and signal() on this signal report  */
/* and change that view, so the program sees exactly what it set.          */

static atomic_int g_sig_owned;     /* 1 once on_signal() is installed */
static atomic_int g_pending;       /* a request not yet taken */
static pthread_mutex_t g_sig_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction g_view_slots[4];
static unsigned g_view_next;
static const struct sigaction g_view_dfl; /* zero: SIG_DFL */
static _Atomic(const struct sigaction *) g_view = &g_view_dfl;

#ifndef CKPT_PRELOAD_STANDALONE
static _Atomic(struct ckpt_ctx *) g_ctx;
#endif

static void on_signal(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    const struct sigaction *v = atomic_load(&g_view);
    struct sigaction app = *v; /* copy: the slot may be reused later */

    atomic_store(&g_pending, 1);
#ifndef CKPT_PRELOAD_STANDALONE
    struct ckpt_ctx *ctx = atomic_load(&g_ctx);
    if (ctx)
        ckpt_request(ctx, CKPT_CODEC_DEFAULT); /* async-signal-safe */
#endif
    if (app.sa_flags & SA_RESETHAND)
        atomic_compare_exchange_strong(&g_view, &v, &g_view_dfl);
    errno = saved;
    if (app.sa_flags & SA_SIGINFO) {
        if (app.sa_sigaction)
            app.sa_sigaction(sig, si, uc);
    } else if (app.sa_handler != SIG_DFL && app.sa_handler != SIG_IGN) {
        app.sa_handler(sig);
    }
    /* SIG_DFL / SIG_IGN: the request is recorded, the process lives on --
     * that is the point of the shim. */
}

static int install_handler(const struct sigaction *view)
{
    struct sigaction k;
    memset(&k, 0, sizeof k);
    k.sa_sigaction = on_signal;
    k.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&k.sa_mask);
    if (view && !(view->sa_flags & SA_SIGINFO) &&
        (view->sa_handler == SIG_DFL || view->sa_handler == SIG_IGN))
        view = NULL;
    if (view) {
        /* Run the program's handler under the mask and flags it asked
         * for; SA_RESETHAND is emulated in on_signal(). */
        k.sa_mask = view->sa_mask;
        k.sa_flags = SA_SIGINFO |
                     (view->sa_flags & (SA_RESTART | SA_NODEFER | SA_ONSTACK));
    }
    return real_sigaction()(g_sig, &k, NULL);
}

static int wrap_sigaction(int sig, const struct sigaction *act,
                          struct sigaction *old)
{
    sigaction_fn f = real_sigaction();
    if (sig != g_sig || sig <= 0 || !atomic_load(&g_sig_owned))
        return f(sig, act, old);
    pthread_mutex_lock(&g_sig_mu);
    const struct sigaction *cur = atomic_load(&g_view);
    struct sigaction prev = *cur;
    int rc = 0;
    if (act) {
        struct sigaction *slot = &g_view_slots[g_view_next++ % 4];
        rc = install_handler(act);
        if (rc == 0) {
            *slot = *act;
            atomic_store(&g_view, slot);
        }
    }
    pthread_mutex_unlock(&g_sig_mu);
    if (rc == 0 && old)
        *old = prev;
    return rc;
}

EXPORT int sigaction(int sig, const struct sigaction *act,
                     struct sigaction *old)
{
    return wrap_sigaction(sig, act, old);
}

/* glibc's signal() calls its internal sigaction, not ours: wrap it too, with
 * its BSD semantics (SA_RESTART, the signal blocked in its handler). */
EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
    struct sigaction sa, old;
    if (sig != g_sig || sig <= 0 || !atomic_load(&g_sig_owned)) {
        typedef sighandler_t (*signal_fn)(int, sighandler_t);
        static _Atomic(void *) p;
        return ((signal_fn)real(&p, "signal"))(sig, handler);
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, sig);
    sa.sa_flags = SA_RESTART;
    if (wrap_sigaction(sig, &sa, &old) != 0)
        return SIG_ERR;
    return old.sa_handler;
}

static int parse_signal(const char *s)
{
    static const struct { const char *name; int sig; } names[] = {
        { "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "TERM", SIGTERM },
        { "INT", SIGINT },   { "HUP", SIGHUP },   { "XCPU", SIGXCPU },
        { "PWR", SIGPWR },   { "URG", SIGURG },   { "WINCH", SIGWINCH },
        { "ALRM", SIGALRM },
    };
    if (!s || !*s)
        return SIGUSR1; /* the conventional request signal */
    if (strcasecmp(s, "none") == 0)
        return 0;
    if (s[0] >= '0' && s[0] <= '9') {
        char *end;
        long v = strtol(s, &end, 10);
        return (*end == '\0' && v > 0 && v < NSIG && v != SIGKILL &&
                v != SIGSTOP) ? (int)v : 0;
    }
    if (strncasecmp(s, "SIG", 3) == 0)
        s += 3;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(s, names[i].name) == 0)
            return names[i].sig;
    return 0; /* unknown name: leave signals alone */
}

static void take_signal(void)
{
    struct sigaction cur;
    if (g_sig <= 0 || real_sigaction()(g_sig, NULL, &cur) != 0)
        return;
    /* Only a signal whose action would kill the program is taken over; a
     * program that installed a handler (or chose to ignore) before we ran
     * keeps exactly what it has. */
    if ((cur.sa_flags & SA_SIGINFO) || cur.sa_handler != SIG_DFL)
        return;
    if (install_handler(NULL) == 0)
        atomic_store(&g_sig_owned, 1);
}

/* ------------------------------------------------------------------------ */
/* In-process API.                                                          */

/* The global context, opened on first call with the CKPT_* environment
 * (ckpt_open(NULL)). Requests caught by the shim's signal handler are
 * forwarded to it, requests from ckptrun arrive over its own connection,
 * so ckpt_should_save() on it is true for both. @return the context, or
 * NULL when it cannot be opened (e.g. bad CKPT_STORE) or in a build without
 * libckpt. Thread-safe; the context lives until exit. */
EXPORT struct ckpt_ctx *ckpt_preload_ctx(void);
#ifndef CKPT_PRELOAD_STANDALONE
static pthread_mutex_t g_ctx_mu = PTHREAD_MUTEX_INITIALIZER;
struct ckpt_ctx *ckpt_preload_ctx(void)
{
    struct ckpt_ctx *ctx = atomic_load(&g_ctx);
    if (ctx)
        return ctx;
    pthread_mutex_lock(&g_ctx_mu);
    ctx = atomic_load(&g_ctx);
    if (!ctx && ckpt_open(NULL, &ctx) == CKPT_OK) {
        atomic_store(&g_ctx, ctx);
        /* A request that came before the context existed is not lost. */
        if (atomic_load(&g_pending))
            ckpt_request(ctx, CKPT_CODEC_DEFAULT);
    }
    pthread_mutex_unlock(&g_ctx_mu);
    return ctx;
}
#else
struct ckpt_ctx *ckpt_preload_ctx(void)
{
    return NULL;
}
#endif

/* For programs that write their own checkpoint files (the Python helper),
 * which never call ckpt_save() and so never clear ckpt_should_save():
 * @return 1 once per checkpoint request -- caught by the shim's signal
 * handler (whatever handler the program has), or, once ckpt_preload_ctx()
 * has opened the global context, received from ckptrun over the socket or
 * due by the context's interval -- then 0 until the next one. Taking a
 * request clears it as ckpt_save() would. Does not open a context. Any
 * thread; async-signal-safe without a context. */
EXPORT int ckpt_preload_take_request(void)
{
    int r = atomic_exchange(&g_pending, 0) != 0;
#ifndef CKPT_PRELOAD_STANDALONE
    struct ckpt_ctx *ctx = atomic_load(&g_ctx);
    if (ctx && ckpt_should_save(ctx)) {
        /* What ckpt_save() does when it starts: the request is served and
         * the interval starts again. */
        atomic_store(&ctx->requested, 0);
        ctx->last_save_mono_ns = ckpt__mono_ns();
        r = 1;
    }
#endif
    return r;
}

/* ------------------------------------------------------------------------ */
/* Load, fork, exec.                                                        */

static void forget_ld_preload(void)
{
    /* CKPT_PRELOAD_ONCE=1: child processes started with exec() do not get
     * the shim. Remove every LD_PRELOAD entry naming this library. */
    const char *lp = getenv("LD_PRELOAD");
    char out[4096];
    size_t at = 0;
    if (!lp)
        return;
    for (const char *p = lp; *p;) {
        size_t n = strcspn(p, ": ");
        const char *base = memrchr(p, '/', n);
        base = base ? base + 1 : p;
        size_t bn = n - (size_t)(base - p);
        int ours = bn >= 15 && memcmp(base, "libckpt_preload", 15) == 0;
        if (n && !ours && at + n + 2 < sizeof out) {
            if (at)
                out[at++] = ':';
            memcpy(out + at, p, n);
            at += n;
        }
        p += n;
        if (*p)
            p++;
    }
    out[at] = '\0';
    if (at)
        setenv("LD_PRELOAD", out, 1);
    else
        unsetenv("LD_PRELOAD");
}

static void atfork_child(void)
{
    /* Threads did not survive the fork: locks they held stay locked. */
    pthread_mutex_init(&g_sock_mu, NULL);
    pthread_mutex_init(&g_cwd_mu, NULL);
    pthread_mutex_init(&g_sig_mu, NULL);
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
#ifndef CKPT_PRELOAD_STANDALONE
    /* libckpt's worker threads are gone in the child; its context is not
     * usable there. Leaked on purpose: freeing it could deadlock. */
    pthread_mutex_init(&g_ctx_mu, NULL);
    atomic_store(&g_ctx, NULL);
#endif
}

static int abs_dir(const char *dir, char *out)
{
    size_t n;
    if (dir[0] == '/') {
        n = strlen(dir);
        if (n + 2 >= PATH_MAX)
            return -1;
        memcpy(out, dir, n + 1);
    } else {
        if (!getcwd(out, PATH_MAX))
            return -1;
        n = strlen(out);
        if (n + 1 + strlen(dir) + 2 >= PATH_MAX)
            return -1;
        out[n] = '/';
        strcpy(out + n + 1, dir);
    }
    normalize(out);
    return 0;
}

__attribute__((constructor)) static void preload_init(void)
{
    const char *dir = getenv("CKPT_DIR");
    const char *sock = getenv("CKPT_SOCKET");
    const char *once = getenv("CKPT_PRELOAD_ONCE");
    char real_dir[PATH_MAX];

    pthread_atfork(NULL, NULL, atfork_child);
    if (once && strcmp(once, "1") == 0)
        forget_ld_preload();

    g_sig = parse_signal(getenv("CKPT_SIGNAL"));
    take_signal();
    {
        /* hex digits only: it goes into a JSON string as it is */
        const char *key = getenv("CKPT_SOCKET_KEY");
        size_t i = 0;
        for (; key && i + 1 < sizeof g_key && ((key[i] >= '0' && key[i] <= '9') ||
                                              (key[i] >= 'a' && key[i] <= 'f'));
             i++)
            g_key[i] = key[i];
        g_key[i] = '\0';
    }

    /* Tracking needs both: where to watch and whom to tell. */
    if (!dir || !*dir || !sock || !*sock ||
        strlen(sock) >= sizeof g_sock_path)
        return;
    if (abs_dir(dir, g_dir) != 0 || strcmp(g_dir, "/") == 0)
        return;
    strcpy(g_sock_path, sock);
    if (realpath(g_dir, real_dir) && strcmp(real_dir, g_dir) != 0 &&
        strcmp(real_dir, "/") != 0 && strlen(real_dir) + 2 < PATH_MAX) {
        g_real_len = strlen(real_dir);
        memcpy(g_real, real_dir, g_real_len);
        g_real[g_real_len++] = '/';
        g_real[g_real_len] = '\0';
    }
    g_dir_len = strlen(g_dir);
    g_dir[g_dir_len++] = '/';
    g_dir[g_dir_len] = '\0';
    g_track = 1;
}
