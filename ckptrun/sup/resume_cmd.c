/* resume_cmd.c -- the command that resumes a run (resume_cmd.h). */
#include "sup/resume_cmd.h"
#include "opts.h"
#include "ckpt_common.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* A word holding control characters (a `python -c` program's newlines):
 * still one line, as "$(printf '%b' '...')" with escapes. */
static void printf_word(FILE *f, const char *arg)
{
    fputs("\"$(printf '%b' '", f);
    for (const unsigned char *p = (const unsigned char *)arg; *p; p++) {
        if (*p == '\\')
            fputs("\\\\", f);
        else if (*p == '\'')
            fputs("'\\''", f);
        else if (*p == '\n')
            fputs("\\n", f);
        else if (*p == '\t')
            fputs("\\t", f);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\0%03o", *p);
        else
            fputc(*p, f);
    }
    fputs("')\"", f);
}

void shell_word(FILE *f, const char *arg)
{
    /* POSIX shells read none of these specially anywhere in a word */
    static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                               "0123456789_@%+=:,./-";

    if (*arg && strspn(arg, safe) == strlen(arg)) {
        fputs(arg, f);
        return;
    }
    for (const unsigned char *p = (const unsigned char *)arg; *p; p++)
        if (*p < 0x20 || *p == 0x7f) {
            printf_word(f, arg);
            return;
        }
    fputc('\'', f);
    for (; *arg; arg++) {
        if (*arg == '\'')
            fputs("'\\''", f);
        else
            fputc(*arg, f);
    }
    fputc('\'', f);
}

char *resume_duration(uint64_t ms, char *buf, size_t n)
{
    if (ms && ms % 3600000 == 0)
        snprintf(buf, n, "%" PRIu64 "h", ms / 3600000);
    else if (ms && ms % 60000 == 0)
        snprintf(buf, n, "%" PRIu64 "m", ms / 60000);
    else if (ms % 1000 == 0)
        snprintf(buf, n, "%" PRIu64 "s", ms / 1000);
    else
        snprintf(buf, n, "%" PRIu64 "ms", ms);
    return buf;
}

static void opt(FILE *f, const char *name, const char *value)
{
    fprintf(f, " %s", name);
    if (value) {
        fputc(' ', f);
        shell_word(f, value);
    }
}

static void opt_ms(FILE *f, const char *name, uint64_t ms)
{
    char b[32];
    opt(f, name, resume_duration(ms, b, sizeof b));
}

/* Settings that --connections, --max-rate, ... put in the environment (as
 * the user's own variables do): cron has none of them. */
/* clang-format off */
static const struct {
    const char *var, *option;
    int flag;                 /* the option takes no value */
} env_opts[] = {
    { "CKPT_CONNECTIONS", "--connections", 0 },
    { "CKPT_MAX_RATE", "--max-rate", 0 },
    { "CKPT_S3_STORAGE_CLASS", "--storage-class", 0 },
    { "CKPT_S3_SSE", "--sse", 0 },
    { "CKPT_S3_SSE_KMS_KEY_ID", "--sse-kms-key-id", 0 },
    { "CKPT_RESTORE_SYNC", "--sync", 1 },
};
/* clang-format on */

char *resume_command(const struct opts *o, const char *self, const char *cwd, const char *dir,
                     int stopped)
{
    char *buf = NULL, num[32];
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    if (!f)
        return NULL;
    if (cwd) {
        fputs("cd ", f);
        shell_word(f, cwd);
        fputs(" && ", f);
    }
    shell_word(f, self);
    fputs(" recover", f);
    opt(f, "--store", o->store);
    opt(f, "--run", o->run);
    opt(f, "--dir", dir);
    if (o->nnodes > 1) {
        snprintf(num, sizeof num, "%u", o->nnodes);
        opt(f, "--nnodes", num);
        snprintf(num, sizeof num, "%d", o->node_rank);
        opt(f, "--node-rank", num);
    }
    if (o->interval_ms)
        opt_ms(f, "--interval", o->interval_ms);
    if (o->sig)
        opt(f, "--signal", ckpt__signal_name(o->sig));
    if (o->keep && o->keep != 3) {
        snprintf(num, sizeof num, "%u", o->keep);
        opt(f, "--keep", num);
    }
    if (o->codec_str)
        opt(f, "--codec", o->codec_str);
    if (o->marker)
        opt(f, "--complete-marker", o->marker);
    if (o->settle_ms != 10000)
        opt_ms(f, "--settle", o->settle_ms);
    if (o->grace_ms != 30000)
        opt_ms(f, "--grace", o->grace_ms);
    if (o->lead_ms != 60000)
        opt_ms(f, "--lead", o->lead_ms);
    if (o->lease_ms)
        opt_ms(f, "--lease", o->lease_ms);
    if (o->notice && *o->notice)
        opt(f, "--notice", o->notice);
    if (o->metadata_url)
        opt(f, "--metadata-url", o->metadata_url);
    for (size_t i = 0; i < sizeof env_opts / sizeof env_opts[0]; i++) {
        const char *v = getenv(env_opts[i].var);
        if (v && *v)
            opt(f, env_opts[i].option, env_opts[i].flag ? NULL : v);
    }
    if (o->preload)
        opt(f, "--preload", NULL);
    if (o->on_complete)
        opt(f, "--on-complete", o->on_complete);
    if (o->on_preempt)
        opt(f, "--on-preempt", o->on_preempt);
    if (o->on_failure)
        opt(f, "--on-failure", o->on_failure);
    if (stopped)
        opt(f, "--resume-stopped", NULL);
    fputs(" --", f);
    for (int i = 0; i < o->nargs; i++) {
        fputc(' ', f);
        shell_word(f, o->args[i]);
    }
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}
