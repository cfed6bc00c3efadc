/* parse.c -- see parse.h. No allocation, no I/O: everything here is pure. */
#include "parse.h"

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

int parse_duration_ms(const char *s, uint64_t *ms)
{
    uint64_t total = 0;
    const char *p = s;
    int rc = -1, parts = 0;

    if (!s || !*s)
        goto out;
    while (*p) {
        /* One component: digits, optional fraction, optional unit. Integer
         * arithmetic throughout so "0.1s" is exactly 100 ms. */
        uint64_t ip = 0, frac = 0, frac_div = 1, mult = 1000;
        int digits = 0;
        while (*p >= '0' && *p <= '9') {
            if (ip > UINT64_MAX / 10 - 10)
                goto out;
            ip = ip * 10 + (uint64_t)(*p++ - '0');
            digits++;
        }
        if (*p == '.') {
            p++;
            while (*p >= '0' && *p <= '9') {
                if (frac_div < 1000000000ULL) { /* ignore digits beyond ns */
                    frac = frac * 10 + (uint64_t)(*p - '0');
                    frac_div *= 10;
                }
                p++;
                digits++;
            }
        }
        if (!digits)
            goto out;
        if (*p) {
            if (unit_ms(&p, &mult) != 0)
                goto out;
        } else if (parts > 0) {
            goto out; /* "1h30" is ambiguous: require a unit after the first */
        }
        if (ip > UINT64_MAX / mult)
            goto out;
        uint64_t v = ip * mult + frac * mult / frac_div;
        if (total > UINT64_MAX - v)
            goto out;
        total += v;
        parts++;
    }
    *ms = total;
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

int parse_codec(const char *s, ckpt_codec *codec, int *level)
{
    uint64_t lv = 0;
    int rc = -1;

    if (!s)
        goto out;
    if (strcmp(s, "none") == 0) {
        *codec = CKPT_CODEC_NONE;
        *level = 0;
    } else if (strcmp(s, "lz4") == 0) {
        *codec = CKPT_CODEC_LZ4;
        *level = 0;
    } else if (strcmp(s, "zstd") == 0) {
        *codec = CKPT_CODEC_ZSTD;
        *level = 0;
    } else if (strncmp(s, "zstd:", 5) == 0) {
        if (parse_u64(s + 5, &lv) != 0 || lv < 1 || lv > 22)
            goto out;
        *codec = CKPT_CODEC_ZSTD;
        *level = (int)lv;
    } else {
        goto out;
    }
    rc = 0;
out:
    return rc;
}

const char *codec_name(ckpt_codec codec)
{
    switch (codec) {
    case CKPT_CODEC_NONE: return "none";
    case CKPT_CODEC_LZ4: return "lz4";
    case CKPT_CODEC_ZSTD: return "zstd";
    default: return NULL;
    }
}

static const struct { const char *name; int sig; } signames[] = {
    { "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT }, { "USR1", SIGUSR1 },
    { "USR2", SIGUSR2 }, { "TERM", SIGTERM }, { "XCPU", SIGXCPU },
    { "WINCH", SIGWINCH }, { "PWR", SIGPWR }, { "URG", SIGURG },
    { "ALRM", SIGALRM }, { "CONT", SIGCONT },
    /* Named in logs only: parse_signal refuses KILL and STOP. */
    { "KILL", SIGKILL }, { "SEGV", SIGSEGV }, { "ABRT", SIGABRT }, { "BUS", SIGBUS },
    { "FPE", SIGFPE }, { "ILL", SIGILL }, { "PIPE", SIGPIPE }, { "TRAP", SIGTRAP },
    { "STOP", SIGSTOP }, { "TSTP", SIGTSTP },
};

int parse_signal(const char *s, int *sig)
{
    uint64_t n = 0;
    int rc = -1;

    if (!s || !*s)
        goto out;
    if (strcasecmp(s, "none") == 0) {
        *sig = 0;
        rc = 0;
        goto out;
    }
    if (parse_u64(s, &n) == 0) {
        if (n < 1 || n > 64 || n == SIGKILL || n == SIGSTOP)
            goto out;
        *sig = (int)n;
        rc = 0;
        goto out;
    }
    if (strncasecmp(s, "SIG", 3) == 0)
        s += 3;
    for (size_t i = 0; i < sizeof signames / sizeof signames[0]; i++) {
        if (strcasecmp(s, signames[i].name) == 0 && signames[i].sig != SIGKILL &&
            signames[i].sig != SIGSTOP) {
            *sig = signames[i].sig;
            rc = 0;
            goto out;
        }
    }
out:
    return rc;
}

const char *signal_name(int sig)
{
    static char buf[16];
    if (sig == 0)
        return "none";
    for (size_t i = 0; i < sizeof signames / sizeof signames[0]; i++)
        if (signames[i].sig == sig) {
            snprintf(buf, sizeof buf, "SIG%s", signames[i].name);
            return buf;
        }
    snprintf(buf, sizeof buf, "%d", sig);
    return buf;
}

static int name_char_ok(char c)
{
    return isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-';
}

int run_name_valid(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > 128 || name[0] == '.')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!name_char_ok(name[i]))
            return 0;
    return 1;
}

int name_sanitize(const char *in, char *out, size_t n)
{
    size_t j = 0;
    int rc = -1;

    while (*in == '.')
        in++;
    for (; *in && j + 1 < n && j < 128; in++)
        out[j++] = name_char_ok(*in) ? *in : '_';
    if (*in || j == 0)
        goto out; /* too long, or nothing left */
    out[j] = '\0';
    rc = 0;
out:
    return rc;
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

char *fmt_bytes(uint64_t bytes, char *buf, size_t n)
{
    static const char *const u[] = { "B", "kB", "MB", "GB", "TB", "PB" };
    double v = (double)bytes;
    size_t i = 0;
    while (v >= 1000.0 && i + 1 < sizeof u / sizeof u[0]) {
        v /= 1000.0;
        i++;
    }
    if (i == 0)
        snprintf(buf, n, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, n, "%.1f %s", v, u[i]);
    return buf;
}

char *fmt_duration(uint64_t ms, char *buf, size_t n)
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
