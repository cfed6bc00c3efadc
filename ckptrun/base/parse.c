/* parse.c -- see parse.h. No allocation, no I/O: everything here is pure. */
#include "base/parse.h"
#include "ckpt_common.h"

#include <ctype.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int parse_u64(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    int rc = -1;

    if (!s || !*s)
        goto out;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            goto out;
        if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
            goto out; /* overflow */
        v = v * 10 + (uint64_t)(*p - '0');
    }
    *out = v;
    rc = 0;
out:
    return rc;
}

/* Parse the digits at p (at most 19, so the value fits); @return 1 if any. */
static int digits_at(const char *p, uint64_t *v)
{
    uint64_t x = 0;
    int n = 0;
    while (p[n] >= '0' && p[n] <= '9') {
        if (n >= 19)
            return 0; /* too long to be a step: ignore rather than wrap */
        x = x * 10 + (uint64_t)(p[n] - '0');
        n++;
    }
    if (n)
        *v = x;
    return n > 0;
}

int parse_step_from_name(const char *name, uint64_t *step)
{
    static const char *const keys[] = { "step=", "step-", "step_", "checkpoint-" };
    uint64_t v = 0;
    const char *best = NULL;
    int found = 0;

    /* The last keyword occurrence followed by a digit wins: in
     * "epoch=1-step=300.ckpt" the step, not the epoch. */
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        size_t kl = strlen(keys[i]);
        for (const char *p = name; (p = strcasestr(p, keys[i])) != NULL; p++) {
            if (p[kl] >= '0' && p[kl] <= '9' && (!best || p + kl > best))
                best = p + kl;
        }
    }
    if (best) {
        found = digits_at(best, &v);
        goto out;
    }
    /* Else the last integer in the name ("model_epoch3.pt" -> 3). */
    for (const char *p = name + strlen(name); p > name; p--) {
        if (p[-1] >= '0' && p[-1] <= '9') {
            const char *e = p;
            while (p > name && p[-1] >= '0' && p[-1] <= '9')
                p--;
            if (e - p <= 19)
                found = digits_at(p, &v);
            goto out;
        }
    }
out:
    if (found)
        *step = v;
    return found;
}


int parse_fraction(const char *s, double *v)
{
    char *end;
    double x;

    if (!s)
        return -1;
    x = strtod(s, &end);
    if (end != s && *end == '%') {
        x /= 100.0;
        end++;
    }
    if (end == s || *end || !(x > 0 && x <= 1))
        return -1;
    *v = x;
    return 0;
}


static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcasecmp(s + a - b, suf) == 0;
}

int name_is_temporary(const char *name)
{
    return name[0] == '.' || strncasecmp(name, "tmp-", 4) == 0 ||
           strncasecmp(name, "tmp_", 4) == 0 || ends_with(name, ".tmp") ||
           ends_with(name, ".part") || ends_with(name, ".partial") ||
           ends_with(name, "~");
}

size_t edit_distance(const char *a, const char *b)
{
    /* three rows of the dynamic programme: the one before the previous is
     * what a transposition looks back to */
    size_t la = strlen(a), lb = strlen(b), rows[3][65];
    size_t *pp = rows[0], *prev = rows[1], *cur = rows[2], *t;

    if (la > 64 || lb > 64)
        return SIZE_MAX;
    for (size_t j = 0; j <= lb; j++)
        prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t d = prev[j - 1] + (a[i - 1] != b[j - 1]);
            if (prev[j] + 1 < d)
                d = prev[j] + 1;
            if (cur[j - 1] + 1 < d)
                d = cur[j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && pp[j - 2] + 1 < d)
                d = pp[j - 2] + 1;
            cur[j] = d;
        }
        t = pp;
        pp = prev;
        prev = cur;
        cur = t;
    }
    return prev[lb];
}

size_t suggest_closest(const char *word, const char *const *cands, size_t n, size_t *out,
                       size_t max)
{
    size_t wl = strlen(word), limit = wl <= 3 ? 1 : wl <= 8 ? 2 : 3, got = 0;
    size_t dist[16];

    if (max > sizeof dist / sizeof dist[0])
        max = sizeof dist / sizeof dist[0];
    for (size_t i = 0; i < n; i++) {
        size_t d, k;
        if (!cands[i] || strcmp(cands[i], word) == 0)
            continue;
        d = edit_distance(word, cands[i]);
        /* a prefix of a candidate ("stat", "llama") is as good as a typo */
        if (wl >= 2 && strncmp(cands[i], word, wl) == 0 && d > 1)
            d = 1;
        if (d > limit)
            continue;
        /* insert by distance, after the equals already there */
        for (k = got; k > 0 && dist[k - 1] > d; k--)
            ;
        if (k >= max)
            continue;
        if (got < max)
            got++;
        for (size_t m = got - 1; m > k; m--) {
            dist[m] = dist[m - 1];
            out[m] = out[m - 1];
        }
        dist[k] = d;
        out[k] = i;
    }
    /* only the closest: "stpe" is --step, not also --store and --sse */
    while (got > 1 && dist[got - 1] > dist[0])
        got--;
    return got;
}
