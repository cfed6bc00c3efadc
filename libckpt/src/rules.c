/* rules.c -- see rules.h. Pure functions: no allocation, no I/O. */
#include "rules.h"

#include <string.h>
#include <strings.h>

static int name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '-';
}

int ckpt__rule_run_name(const char *name, int creating)
{
    size_t n = name ? strlen(name) : 0;
    int ok = 0;

    if (n == 0 || n > (creating ? CKPT_RUN_NAME_MAX_NEW : CKPT_RUN_NAME_MAX_OPEN))
        goto out;
    if (!strcmp(name, ".") || !strcmp(name, ".."))
        goto out;
    if (creating && name[0] == '.')
        goto out;
    for (size_t i = 0; i < n; i++)
        if (!name_char(name[i]))
            goto out;
    ok = 1;
out:
    return ok;
}

/* Whole-string decimal in [lo, hi]. */
static int small_int(const char *s, long lo, long hi, long *out)
{
    long v = 0;
    if (!*s)
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > hi)
            return -1;
        v = v * 10 + (*s - '0');
    }
    if (v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int ckpt__rule_codec(const char *s, ckpt_codec *codec, int *level)
{
    long l = 0;
    int rc = -1;

    if (!s)
        goto out;
    if (!strcmp(s, "none")) {
        *codec = CKPT_CODEC_NONE;
    } else if (!strcmp(s, "lz4")) {
        *codec = CKPT_CODEC_LZ4;
    } else if (!strcmp(s, "zstd")) {
        *codec = CKPT_CODEC_ZSTD;
    } else if (!strncmp(s, "zstd:", 5)) {
        if (small_int(s + 5, CKPT_ZSTD_LEVEL_MIN, CKPT_ZSTD_LEVEL_MAX, &l) != 0)
            goto out;
        *codec = CKPT_CODEC_ZSTD;
    } else {
        goto out;
    }
    *level = (int)l;
    rc = 0;
out:
    return rc;
}

/* Digits with an optional fraction at *p: integer part and fraction as
 * numerator / denominator (digits beyond 10^-9 ignored). @return the count
 * of digits read, 0 if none. */
static int number(const char **p, uint64_t *ip, uint64_t *frac, uint64_t *div)
{
    int digits = 0;
    *ip = 0;
    *frac = 0;
    *div = 1;
    while (**p >= '0' && **p <= '9') {
        if (*ip > (UINT64_MAX - 9) / 10)
            return -1;
        *ip = *ip * 10 + (uint64_t)(**p - '0');
        (*p)++;
        digits++;
    }
    if (**p == '.') {
        (*p)++;
        while (**p >= '0' && **p <= '9') {
            if (*div < 1000000000ULL) {
                *frac = *frac * 10 + (uint64_t)(**p - '0');
                *div *= 10;
            }
            (*p)++;
            digits++;
        }
    }
    return digits;
}

/* ip.frac x mult without overflow. @return 0 or -1. */
static int scale(uint64_t ip, uint64_t frac, uint64_t div, uint64_t mult, uint64_t *out)
{
    uint64_t a, b;
    if (mult && ip > UINT64_MAX / mult)
        return -1;
    a = ip * mult;
    /* frac < div <= 10^9 and mult <= 2^60: split to stay inside 64 bits */
    b = (mult / div) * frac + (mult % div) * frac / div;
    if (a > UINT64_MAX - b)
        return -1;
    *out = a + b;
    return 0;
}

int ckpt__rule_size(const char *s, uint64_t *bytes, int *si)
{
    static const char units[] = "KMGT";
    uint64_t ip, frac, div, mult = 1, v;
    const char *p = s, *u;
    int rc = -1, dec = 0;

    if (!s || number(&p, &ip, &frac, &div) <= 0)
        goto out;
    if (*p && (u = strchr(units, *p >= 'a' && *p <= 'z' ? *p - 32 : *p)) != NULL) {
        int exp = (int)(u - units) + 1;
        p++;
        if (!strcmp(p, "") || !strcmp(p, "i") || !strcasecmp(p, "iB")) {
            dec = 0;
        } else if (!strcasecmp(p, "B")) {
            dec = 1;
        } else {
            goto out;
        }
        p += strlen(p);
        for (int i = 0; i < exp; i++)
            mult *= dec ? 1000 : 1024;
    } else if (*p == 'B' || *p == 'b') {
        p++;
    }
    if (*p)
        goto out;
    if (scale(ip, frac, div, mult, &v) != 0 || v == 0 || v > (1ULL << 62))
        goto out;
    *bytes = v;
    if (si)
        *si = dec;
    rc = 0;
out:
    return rc;
}

/* Milliseconds per unit; longest suffix first so "ms" wins over "m". */
static int unit_ms(const char **p, uint64_t *mult)
{
    static const struct { const char *u; uint64_t ms; } units[] = {
        { "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 },
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        size_t n = strlen(units[i].u);
        if (strncmp(*p, units[i].u, n) == 0) {
            *p += n;
            *mult = units[i].ms;
            return 0;
        }
    }
    return -1;
}

int ckpt__rule_duration_ms(const char *s, uint64_t *ms)
{
    uint64_t total = 0;
    const char *p = s;
    int rc = -1, parts = 0;

    if (!s || !*s)
        goto out;
    while (*p) {
        uint64_t ip, frac, div, mult = 1000, v;
        int digits = number(&p, &ip, &frac, &div);
        if (digits <= 0)
            goto out;
        if (*p) {
            if (unit_ms(&p, &mult) != 0)
                goto out;
        } else if (parts > 0) {
            goto out; /* "1h30" is ambiguous: a unit after every part but a lone one */
        }
        if (scale(ip, frac, div, mult, &v) != 0 || total > UINT64_MAX - v)
            goto out;
        total += v;
        parts++;
    }
    *ms = total;
    rc = 0;
out:
    return rc;
}
