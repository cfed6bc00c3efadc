/* util.c -- small helpers: hex, names, directories, failpoints (util.h). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/util.h"

void ckpt__hex(const uint8_t *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1; /* upper case is not produced by writers: refuse it */
}

int ckpt__unhex(const char *in, uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int hi = hexval(in[2 * i]), lo;
        if (hi < 0)
            return -1;
        lo = hexval(in[2 * i + 1]);
        if (lo < 0)
            return -1;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return in[2 * n] == '\0' ? 0 : -1;
}

/* Text that becomes part of a file system path (item names, link targets):
 * well-formed UTF-8 (no overlong forms, no surrogates, nothing past
 * U+10FFFF) without control characters (C0, DEL, C1): a name must print
 * as what it is, and a terminal must never take it for a command. */
int ckpt__text_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    while (p < end) {
        unsigned c = *p, need, cp;
        if (c < 0x80) {
            if (c < 0x20 || c == 0x7f)
                return 0;
            p++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf) {
            need = 1;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            need = 2;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            need = 3;
            cp = c & 0x07;
        } else {
            return 0; /* continuation byte, overlong lead (c0, c1) or past f4 */
        }
        if ((size_t)(end - p) <= need)
            return 0;
        for (unsigned i = 1; i <= need; i++) {
            if ((p[i] & 0xc0) != 0x80)
                return 0;
            cp = cp << 6 | (p[i] & 0x3f);
        }
        if ((need == 2 && cp < 0x800) || (need == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp <= 0x9f))
            return 0;
        p += need + 1;
    }
    return 1;
}

/* Item names become file names on restore and parts of nothing else (never
 * store keys): any real file name works -- relative, '/'-separated, no
 * empty, "." or ".." segment, each segment at most NAME_MAX (255) bytes,
 * well-formed UTF-8 without control characters. */
int ckpt__name_valid(const char *name)
{
    size_t len, seg = 0;
    if (!name || !*name || name[0] == '/')
        return 0;
    len = strlen(name);
    if (len > CKPT_NAME_MAX || name[len - 1] == '/' || !ckpt__text_valid(name, len))
        return 0;
    for (size_t i = 0; i <= len; i++) {
        if (name[i] != '/' && name[i] != '\0') {
            if (++seg > 255)
                return 0;
            continue;
        }
        if (seg == 0 || (seg == 1 && name[i - 1] == '.') ||
            (seg == 2 && name[i - 1] == '.' && name[i - 2] == '.'))
            return 0;
        seg = 0;
    }
    return 1;
}

/* The alphabet readers of manifest formats 1 and 2 accept: a name outside
 * it makes its manifest format 3 (docs/FORMAT.md). */
int ckpt__name_legacy(const char *name)
{
    return ckpt_path_valid(name, 255, "+=@,");
}

char *ckpt__strdup(const char *s)
{
    size_t n;
    char *d;
    if (!s)
        return NULL;
    n = strlen(s) + 1;
    d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

ckpt_status ckpt__errno_status(int e)
{
    switch (e) {
    case ENOENT: return CKPT_E_NOENT;
    case ENOMEM: return CKPT_E_NOMEM;
    case ENOSPC: case EDQUOT: return CKPT_E_NOSPACE;
    case EEXIST: return CKPT_E_EXISTS;
    case EACCES: case EPERM: case EROFS: return CKPT_E_PERM;
    default: return CKPT_E_IO;
    }
}

ckpt_status ckpt__mkdirs(const char *path, mode_t mode, char *err)
{
    char buf[4096];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof buf) {
        ckpt__seterr(err, "path too long: %s", path);
        return CKPT_E_INVAL;
    }
    memcpy(buf, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        char saved = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, mode) != 0 && errno != EEXIST) {
            int e = errno;
            ckpt__seterr(err, "mkdir %s: %s", buf, strerror(e));
            return ckpt__errno_status(e);
        }
        buf[i] = saved;
    }
    return CKPT_OK;
}

/* ---- failpoints (tests) ------------------------------------------------------ */
static atomic_int fp_armed; /* fast path: nothing armed */
static pthread_mutex_t fp_mu = PTHREAD_MUTEX_INITIALIZER;
static char fp_name[64];
static unsigned fp_left;

void ckpt__failpoint_arm(const char *name, unsigned nth)
{
    pthread_mutex_lock(&fp_mu);
    snprintf(fp_name, sizeof fp_name, "%s", name ? name : "");
    fp_left = nth;
    atomic_store(&fp_armed, name && nth);
    pthread_mutex_unlock(&fp_mu);
}

int ckpt__failpoint(const char *name)
{
    int hit = 0;
    if (!atomic_load_explicit(&fp_armed, memory_order_relaxed))
        return 0;
    pthread_mutex_lock(&fp_mu);
    if (fp_left && !strcmp(fp_name, name) && --fp_left == 0) {
        hit = 1;
        atomic_store(&fp_armed, 0);
    }
    pthread_mutex_unlock(&fp_mu);
    return hit;
}
