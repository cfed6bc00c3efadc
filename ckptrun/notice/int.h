/*
 * notice/int.h -- the poller's insides, shared by its files:
 *   notice/notice.c     start, stop, acknowledgement (the public API)
 *   notice/table.c      the provider table, names, DMI detection, hints
 *   notice/poll.c       the shared polling loop, session tokens
 *   notice/report.c     what a polling thread reports: its log (once per
 *                       condition), naps that end on stop, delivery
 *   notice/net.c        the transport: HTTP on the shared client (http.h)
 *                       and the IMDSv2 client, when the build has libcurl;
 *   notice/none.c       else the transport that has nothing to poll with
 *   notice/probe.c      the one-shot probe of `ckptrun doctor`
 *   notice/parse.c      the time parsers and helpers of the reply parsers
 *   notice/<name>.c     one per provider (notice/provider.h)
 *
 * Layout: one "watch" per thread. A provider polls its paths in turn from
 * one watch, or (watch_per_path: GCP's long polls) gets one watch per path.
 * Watches share the poller's stop flag and condition variable (so
 * notice_stop() wakes every sleeper), and deliver through one mutex that
 * also holds the de-duplication state. State touched only by a watch's own
 * thread (the last logged condition, a session token) lives in the watch;
 * a provider's own state (Azure's VM name, AWS's IMDS client) in p->state,
 * whose layout only its file knows.
 */
#ifndef CKPTRUN_NOTICE_INT_H
#define CKPTRUN_NOTICE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "notice/types.h"
#include "notice/provider.h"
#include "ckpt_common.h"

struct ckpt_http;
struct ckpt_imds;

#define BASE_MAX 256
#define KEYS 16             /* remembered non-terminate notices */
#define BODY_MAX_SMALL 4096 /* plain-text and small JSON replies */
#define CONNECT_MS 2000     /* metadata services are local: connect fast or not at all */
#define TOKEN_MAX 512

struct notice_poller;

struct nwatch {
    struct notice_poller *p;
    pthread_t th;
    int started;
    unsigned path;                    /* watch_per_path: the index of its path */
    char last[NOTICE_PATHS_MAX][256]; /* last condition logged per path ("" = fine) */
    char token[TOKEN_MAX];            /* the provider's session token, "" when none */
    int64_t token_renew_ms;           /* monotonic: when to ask again */
};

struct notice_poller {
    const char *provider;               /* static string: prov->name, or "none" */
    const struct notice_provider *prov; /* NULL for "none" */
    char base[BASE_MAX];                /* scheme://host[:port] */
    struct ckpt_http *http;
    void *state; /* prov->state_size bytes, the provider's own */
    notice_cb cb;
    void *user;
    ckpt_log_fn log_fn;
    void *log_user;
    long interval_ms;

    atomic_int stop;
    pthread_mutex_t mu; /* with cv: sleeping and waking on stop */
    pthread_cond_t cv;

    pthread_mutex_t deliver_mu; /* serializes callbacks; guards the fields below */
    int terminated;             /* a NOTICE_TERMINATE was delivered */
    char keys[KEYS][400];
    unsigned nkeys;

    struct nwatch w[NOTICE_PATHS_MAX];
    int nw;
};

/* ---- notice/net.c / notice/none.c: the transport -------------------------------- */

/* One HTTP reply: the body (malloc'd, NUL-terminated) or why there is none. */
struct notice_reply {
    long status;
    char *body;
    size_t len;
    char etag[80]; /* a plain token, else "" */
    char err[300];
    int unreachable; /* nothing answered: the other paths would fail alike */
};

/* ---- notice.c -------------------------------------------------------------------- */

/* scheme://authority of a metadata URL ("--metadata-url replaces the
 * scheme, host and port; the provider's paths are kept"). @return 0 or -1. */
int notice_base_of(const char *url, char *out, size_t cap);

#endif
