/* doctor/report.c -- the doctor's lines (doctor/report.h). */
#include "doctor/report.h"
#include "base/runlog.h"
#include "opts.h"
#include "base/parse.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const verdict_name[] = { "ok", "warn", "fail", "skip" };

const char *doctor_verdict_name(enum verdict v)
{
    return verdict_name[v];
}

int64_t doctor_left_ms(const struct doctor *d)
{
    int64_t l = d->deadline - ckpt__mono_ms();
    return l > 0 ? l : 0;
}

double doctor_rnd1(double x)
{
    return (double)(long long)(x * 10 + 0.5) / 10;
}

const char *doctor_mb(double bytes, char *buf, size_t n)
{
    return ckpt__fmt_bytes(bytes > 0 ? (uint64_t)bytes : 0, buf, n);
}

const struct doctor_check *doctor_find(const struct doctor *d, const char *name)
{
    for (int i = 0; i < d->n; i++)
        if (strcmp(d->c[i].name, name) == 0)
            return &d->c[i];
    return NULL;
}

void doctor_skip(struct doctor *d, const char *name, const char *needs)
{
    const struct doctor_check *root = doctor_find(d, needs);
    const char *rname = needs;

    /* the check at the root: a skipped prerequisite names its own */
    if (root && root->v == V_SKIP && root->prereq[0]) {
        rname = root->prereq;
        root = doctor_find(d, rname);
    }
    doctor_add(d, name, V_SKIP, NULL, "not run: %s %s", rname,
               !root || root->v == V_FAIL ? "failed" : "gave nothing to build on");
    if (d->n > 0 && strcmp(d->c[d->n - 1].name, name) == 0)
        snprintf(d->c[d->n - 1].prereq, sizeof d->c[d->n - 1].prereq, "%s", rname);
}

void doctor_add(struct doctor *d, const char *name, enum verdict v, const char *advice,
                const char *fmt, ...)
{
    struct doctor_check *c;
    va_list ap;

    if (d->n >= MAX_CHECKS)
        return;
    c = &d->c[d->n++];
    c->prereq[0] = '\0';
    snprintf(c->name, sizeof c->name, "%s", name);
    c->v = v;
    va_start(ap, fmt);
    vsnprintf(c->msg, sizeof c->msg, fmt, ap);
    va_end(ap);
    snprintf(c->advice, sizeof c->advice, "%s", advice && v != V_OK ? advice : "");
    if (!d->o->json) {
        printf("%-4s  %-20s %s\n", verdict_name[v], c->name, c->msg);
        if (c->advice[0])
            printf("      %-20s -> %s\n", "", c->advice);
        fflush(stdout);
    }
}
