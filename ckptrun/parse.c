/* parse.c -- see parse.h. No allocation, no I/O: everything here is pure. */
#include "parse.h"
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

