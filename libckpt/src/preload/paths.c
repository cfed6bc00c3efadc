/* paths.c -- which paths lie inside CKPT_DIR (parts.h).
 *
 * Matching is lexical: paths are made absolute (relative ones against a
 * cached working directory, *at() ones against /proc/self/fd/<dirfd>) and
 * normalized ("//", ".", ".."); symbolic links are not followed. CKPT_DIR
 * is matched under the name it was given and under its realpath(), and
 * always reported under the given one (docs/preload.md, "Limits"). */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "parts.h"

/* Set once by ckpt__shim_paths_init(), before tracking starts. */
static char g_dir[PATH_MAX];     /* CKPT_DIR, absolute, normalized, + '/' */
static size_t g_dir_len;
static char g_real[PATH_MAX];    /* realpath(CKPT_DIR) + '/', if different */
static size_t g_real_len;

/* The working directory is cached (dropped by chdir/fchdir) so that
 * resolving a relative path costs no system call. */
static pthread_mutex_t g_cwd_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_cwd[PATH_MAX];
static int g_cwd_ok;

/* Normalize an absolute path in place, lexically: collapse "//", drop ".",
 * resolve ".." against the previous component. */
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

void ckpt__shim_cwd_changed(void)
{
    pthread_mutex_lock(&g_cwd_mu);
    g_cwd_ok = 0;
    pthread_mutex_unlock(&g_cwd_mu);
}

void ckpt__shim_paths_atfork_child(void)
{
    /* the parent's threads did not survive the fork: a lock one of them
     * held would stay locked */
    pthread_mutex_init(&g_cwd_mu, NULL);
}

/* Does abs (normalized) lie strictly inside the directory prefix pre
 * (which ends with '/')? */
static int inside(const char *abs, size_t len, const char *pre, size_t plen)
{
    return plen && len > plen && memcmp(abs, pre, plen) == 0;
}

/* The common case, an absolute clean path outside CKPT_DIR, costs one or
 * two prefix compares and a scan for "/." and "//". */
size_t ckpt__shim_resolve(int dirfd, const char *path, char out[PATH_MAX])
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

/* dir made absolute and normalized into out (PATH_MAX). @return 0 or -1. */
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

int ckpt__shim_paths_init(const char *dir)
{
    char real_dir[PATH_MAX];

    if (abs_dir(dir, g_dir) != 0 || strcmp(g_dir, "/") == 0)
        return -1;
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
    return 0;
}
