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
#include "notice/notice.h"
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

/* A transport for metadata requests: never through a proxy, quick to
 * connect. @return NULL when out of memory (or no libcurl). */
struct ckpt_http *notice_http_new(void);
/* Aborts the requests in flight (a long poll ends now). NULL-safe. */
void notice_http_cancel(struct ckpt_http *h);
void notice_http_free(struct ckpt_http *h);
/* One request: hdrs is NULL-terminated (may be NULL), body may be NULL.
 * A body larger than `max` is no body: an error. @return 0 with r->status
 * and r->body (free it), or -1 with r->err. */
int notice_http(struct ckpt_http *h, const char *method, const char *url, const char *const *hdrs,
                const char *body, long timeout_ms, size_t max, struct notice_reply *r);
/* The process's shared IMDSv2 client (ckpt_http.h) for `base` (NULL: its
 * own default and AWS_EC2_METADATA_SERVICE_ENDPOINT). @return NULL when
 * instance metadata is disabled (AWS_EC2_METADATA_DISABLED) or there is no
 * transport. */
struct ckpt_imds *notice_imds(const char *base);
/* One GET through it, as notice_http. */
int notice_imds_get(struct ckpt_imds *m, const char *path, long timeout_ms, size_t max,
                    struct notice_reply *r);

/* ---- notice.c -------------------------------------------------------------------- */

/* scheme://authority of a metadata URL ("--metadata-url replaces the
 * scheme, host and port; the provider's paths are kept"). @return 0 or -1. */
int notice_base_of(const char *url, char *out, size_t cap);

/* ---- notice/table.c ---------------------------------------------------------------- */

/* The provider name as a static string ("aws", ..., "none"), NULL when
 * unknown. */
const char *notice_provider_name(const char *name);
/* The provider DMI names ("none" when none): `dir` is /sys/class/dmi/id or
 * a test's; `how` (may be NULL) receives which DMI string decided. */
const char *notice_detect(const char *dir, ckpt_log_fn log_fn, void *log_user, char *how,
                          size_t how_cap);

/* ---- notice/report.c --------------------------------------------------------- */

void notice_log(struct notice_poller *p, ckpt_log_level lv, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A failing condition, logged once until it changes or clears. */
void notice_cond_fail(struct nwatch *w, int slot, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void notice_cond_ok(struct nwatch *w, int slot);
/* Sleep up to ms. @return 1 when the poller is stopping. */
int notice_nap(struct notice_poller *p, long ms);
/* The poll interval: the configured one, else the provider's `dflt`. */
long notice_poll_interval(const struct notice_poller *p, long dflt);
/* Hand a notice to the callback, at most once (notice.h, Guarantees). */
void notice_deliver(struct notice_poller *p, struct notice_event *ev);
/* Act on a parser's result `r` for the path in `slot`: log a bad reply
 * once, clear the condition and deliver a notice otherwise. */
void notice_result(struct nwatch *w, int slot, int r, struct notice_event *ev);
/* Run a parser on a 200 body and act on the result. */
void notice_handle(struct nwatch *w, int slot, notice_parser parse, const char *body, size_t len);

/* ---- notice/poll.c -------------------------------------------------------------- */

/* The shared loop: each round, prov->before_round, then every path in turn
 * (prov->fetch or HTTP with the provider's headers and token), until the
 * poller stops. */
void notice_poll_paths(struct nwatch *w);
/* The headers of a request of `w`'s provider: its own, then its session
 * token when it has one (asked for, renewed and dropped as needed).
 * `hv` holds at least NOTICE_HDRS_MAX entries, `tokh` the token line. */
#define NOTICE_HDRS_MAX 8
void notice_poll_headers(struct nwatch *w, const char **hv, char *tokh, size_t tokcap);

#endif
