/* doctor_report.c -- the doctor's lines (doctor.h). */
#include "doctor.h"
#include "runlog.h"
#include "opts.h"
#include "parse.h"

#include <stdarg.h>
#include <stdio.h>

static const char *const verdict_name[] = { "ok", "warn", "fail", "skip" };

const char *doctor_verdict_name(enum verdict v)
{
    return verdict_name[v];
}

int64_t doctor_left_ms(const struct doctor *d)
{
    int64_t l = d->deadline - ckpt_mono_ms();
    return l > 0 ? l : 0;
}

double doctor_rnd1(double x)
{
    return (double)(long long)(x * 10 + 0.5) / 10;
}

const char *doctor_mb(double bytes, char *buf, size_t n)
{
    return ckpt_fmt_bytes(bytes > 0 ? (uint64_t)bytes : 0, buf, n);
}

void doctor_add(struct doctor *d, const char *name, enum verdict v, const char *advice,
                const char *fmt, ...)
{
    struct doctor_check *c;
    va_list ap;

    if (d->n >= MAX_CHECKS)
        return;
    c = &d->c[d->n++];
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
