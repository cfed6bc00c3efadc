/* units.c -- sizes and durations, read and printed (ckpt_common.h). */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "ckpt_common.h"

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

int ckpt__parse_size(const char *s, uint64_t *bytes, int *si)
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

int ckpt__parse_duration_ms(const char *s, uint64_t *ms)
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

char *ckpt__fmt_bytes(uint64_t bytes, char *buf, size_t n)
{
    /* one convention everywhere: binary multiples, named so */
    static const char *const u[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
    double v = (double)bytes;
    size_t i = 0;
    while (v >= 1024.0 && i + 1 < sizeof u / sizeof u[0]) {
        v /= 1024.0;
        i++;
    }
    if (i == 0)
        snprintf(buf, n, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, n, v < 9.995 ? "%.2f %s" : v < 99.95 ? "%.1f %s" : "%.0f %s", v, u[i]);
    return buf;
}

char *ckpt__fmt_rate(double bytes_per_s, char *buf, size_t n)
{
    char b[32];
    ckpt__fmt_bytes(bytes_per_s > 0 ? (uint64_t)bytes_per_s : 0, b, sizeof b);
    snprintf(buf, n, "%s/s", b);
    return buf;
}

char *ckpt__fmt_duration(uint64_t ms, char *buf, size_t n)
{
    if (ms < 1000)
        snprintf(buf, n, "%llums", (unsigned long long)ms);
    else if (ms < 60000)
        snprintf(buf, n, "%.1fs", (double)ms / 1000.0);
    else if (ms < 3600000)
        snprintf(buf, n, "%llum%02llus", (unsigned long long)(ms / 60000),
                 (unsigned long long)(ms / 1000 % 60));
    else
        snprintf(buf, n, "%lluh%02llum", (unsigned long long)(ms / 3600000),
                 (unsigned long long)(ms / 60000 % 60));
    return buf;
}
