/* parse.c -- see parse.h. No allocation, no I/O: everything here is pure. */
#include "parse.h"
#include "rules.h"

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

int parse_duration_ms(const char *s, uint64_t *ms)
{
    return ckpt__rule_duration_ms(s, ms); /* the library reads CKPT_INTERVAL the same way */
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
    return ckpt__rule_codec(s, codec, level); /* what ckpt_open accepts, no more */
}

int parse_size(const char *s, uint64_t *bytes, int *si)
{
    return ckpt__rule_size(s, bytes, si);
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
    return ckpt__rule_run_name(name, 1);
}

int run_name_openable(const char *name)
{
    return ckpt__rule_run_name(name, 0);
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
    /* One convention everywhere (rules.h): binary multiples, named so. */
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

char *fmt_rate(double bytes_per_s, char *buf, size_t n)
{
    char b[32];
    fmt_bytes(bytes_per_s > 0 ? (uint64_t)bytes_per_s : 0, b, sizeof b);
    snprintf(buf, n, "%s/s", b);
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
