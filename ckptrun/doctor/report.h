/*
 * doctor/report.h -- the doctor's state, shared by its checks (doctor.c
 * runs them: the overview is there), and the lines they record
 * (report.c). Bounds and constants the checks share are here too.
 */
#ifndef CKPTRUN_DOCTOR_REPORT_H
#define CKPTRUN_DOCTOR_REPORT_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "ckpt.h"

struct opts;
struct ckpt_store;

#define PROBE_MAX (32u << 20)       /* throughput probe bound, each way */
#define PROBE_OBJ (4u << 20)        /* one chunk, as real commits write: file:// */
#define PROBE_OBJ_REMOTE (8u << 20) /* stores with packs: a chunk (a save sends 32 MiB
                                       packs, 4 at once; 4 x 8 MiB keeps the
                                       probe within PROBE_MAX) */
#define SAMPLE_MAX (64u << 20)      /* codec sample */
#define SAMPLE_MIN (4u << 20)
#define DEFAULT_BUDGET_MS 30000
#define DEFAULT_STATE (1ull << 30)  /* when nothing says how big the state is */
#define CHANGED_SMALL 0.5           /* "mostly unchanged": under half changes */
#define FIT_MARGIN 0.75             /* "fits" = under 75% of the window */
#define MAX_CHECKS 24
#define MAX_THREADS 8
#define EXIT_FAIL_DOCTOR 1          /* something will not work */
/* --interval only requests checkpoints: advice naming it says what hears them */
#define DOCTOR_REACH "with a way to ask the trainer (--signal for one that saves on it, " \
                     "the Python helper, libckpt or --preload; an unmodified trainer " \
                     "ignores requests)"

enum verdict { V_OK = 0, V_WARN = 1, V_FAIL = 2, V_SKIP = 3 };

struct doctor_check {
    char name[24];
    enum verdict v;
    char msg[600];
    char advice[600];
    char prereq[24]; /* skipped: the earlier check that failed ("" otherwise) */
};

struct doctor {
    struct opts *o;
    int64_t t0, deadline;           /* monotonic ms */
    struct doctor_check c[MAX_CHECKS];
    int n;

    /* notice side */
    const char *provider;           /* "aws".. or "none" */
    int64_t window_ms;              /* 0 = no notice window applies */
    char window_src[80];
    int64_t poll_ms;                /* notice detection latency */

    /* state */
    uint64_t state_bytes;
    char state_src[300];
    char sample_dir[PATH_MAX];      /* newest entry of --dir to sample, or "" */

    /* codec (measured on the sample) */
    int codec_ok;
    char scratch[PATH_MAX];         /* scratch file:// store, removed at the end */
    uint8_t *sample;
    size_t sample_bytes, bf16_bytes;
    double ratio;                   /* stored / raw */
    double t_full_s, t_same_s;      /* sample: all new; nothing changed */

    /* what a final save sends: the share of the state that changes
     * between checkpoints (1 = all of it, as in full training) */
    double changed;
    int changed_known;              /* given (--changed) or measured */
    char changed_src[300];

    /* store */
    struct ckpt_store *st;
    char prefix[400];               /* RUN/.doctor/HOST-PID/ */
    int store_ok;
    double rtt_ms;
    double up_bps, down_bps;
    uint64_t sent, received;
};

/* ---- doctor/report.c ------------------------------------------------------ */

/* "ok", "warn", "fail", "skip". */
const char *doctor_verdict_name(enum verdict v);
/* Records a check; human mode prints it at once so a slow phase shows
 * what was already found. `advice` is kept only when v is not V_OK. */
void doctor_add(struct doctor *d, const char *name, enum verdict v, const char *advice,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Records `name` as skipped because the earlier check `needs` did not
 * pass: the line (and JSON "prerequisite") names the check at the root of
 * it -- `needs`, or the one `needs` itself was skipped for -- so a reader
 * goes straight to the fail line that explains it. */
void doctor_skip(struct doctor *d, const char *name, const char *needs);
/* The check called `name`, or NULL when it did not run (yet). */
const struct doctor_check *doctor_find(const struct doctor *d, const char *name);
/* What is left of the budget, in ms (>= 0). */
int64_t doctor_left_ms(const struct doctor *d);
/* One decimal, for JSON. */
double doctor_rnd1(double x);
/* "12.3 MiB" for a byte count given as a double. */
const char *doctor_mb(double bytes, char *buf, size_t n);

#endif
