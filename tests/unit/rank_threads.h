/* rank_threads.h -- several ranks of a job in one test process, one thread
 * each, agreeing through a fake collective (a shared barrier and reduction
 * buffer): for test_ranks.c. A rank's checks are recorded (CHECK) and
 * reported by run_job on the main thread: cmocka's asserts belong there. */
#ifndef RANK_THREADS_H
#define RANK_THREADS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "ckpt_store.h"

#define MAXR 8
#define OWN_BYTES (200u * 1024u + 77u)
#define REP_BYTES (256u * 1024u + 100u)
#define CHUNK (64u << 10)

/* ---- the fake collective: N threads, one barrier, one buffer ------------ */
struct fcoll {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned n, arrived;
    uint64_t gen;
    uint64_t acc[4096], result[4096];
    size_t len;
    int op, mismatch;
    unsigned calls;            /* completed all-reduces */
};

struct frank {
    struct ckpt_collective coll;
    struct fcoll *f;
};


/* ---- a job: N ranks, each a thread with its own context ------------------ */
struct job;
typedef void (*rank_fn)(struct job *j, unsigned r, struct ckpt_ctx *ctx);

struct job {
    const char *url;           /* the store */
    unsigned n;
    const char *run;
    unsigned keep;
    rank_fn fn;
    struct fcoll f;
    struct frank fr[MAXR];
    bool same_rank;            /* every collective says rank 0 */
    ckpt_status open_st[MAXR];
    char open_err[MAXR][CKPT_ERR_MAX];
    int fail_line[MAXR];
    char fail_msg[MAXR][600];
    /* shared test data */
    uint8_t own[MAXR][OWN_BYTES];
    uint8_t rep[MAXR][REP_BYTES];
    uint64_t got_step[MAXR];
    ckpt_status st[MAXR][8];
    int flag[MAXR][8];
    char msg[MAXR][CKPT_ERR_MAX];
    /* "step N not committed" events each rank logged (what ckptrun hears) */
    atomic_int failed_events[MAXR];
    void *arg;
};

struct thr {
    struct job *j;
    unsigned r;
};

#define CHECK(j, r, c)                                                                   \
    do {                                                                                 \
        if (!(c) && !(j)->fail_line[r]) {                                                \
            (j)->fail_line[r] = __LINE__;                                                \
            snprintf((j)->fail_msg[r], sizeof (j)->fail_msg[r], "%s", #c);               \
        }                                                                                \
    } while (0)
#define CHECK_ST(j, r, ctx, expr, want)                                                  \
    do {                                                                                 \
        ckpt_status st_ = (expr);                                                        \
        if (st_ != (want) && !(j)->fail_line[r]) {                                       \
            (j)->fail_line[r] = __LINE__;                                                \
            snprintf((j)->fail_msg[r], sizeof (j)->fail_msg[r], "%s: %s, expected %s (%s)", \
                     #expr, ckpt_status_name(st_), ckpt_status_name(want),               \
                     ckpt_errmsg(ctx));                                                  \
        }                                                                                \
    } while (0)


/* A config for run `run` on j->url (64 KiB chunks, no codec, 2 workers). */
struct ckpt_config rank_cfg(const char *url, const char *run, unsigned keep);
/* Run fn on n ranks, each with a context on run `run`; fails the test on any
 * rank's CHECK (and, with expect_open, on a failed ckpt_open). */
void run_job(struct job *j, unsigned n, const char *run, rank_fn fn, bool expect_open);
struct job *job_new(const char *url);
int f_allreduce(void *user, uint64_t *v, size_t n, ckpt_reduce_op op);
int f_barrier(void *user);

#endif
