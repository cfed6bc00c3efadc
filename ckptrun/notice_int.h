/*
 * notice_int.h -- the poller's insides, shared by its files:
 *   notice.c            start, stop, acknowledgement (the public API)
 *   notice_providers.c  one polling loop per provider
 *   notice_report.c     what a polling thread reports: its log (once per
 *                       condition), naps that end on stop, delivery
 *   notice_net.c        HTTP on the shared transport (http.h), provider
 *                       detection from DMI, metadata base URLs
 *   notice_probe.c      the one-shot probe of `ckptrun doctor`
 *   notice_parse.c      the reply parsers (notice.h)
 *
 * Layout: one "watch" per endpoint that needs its own thread (GCP long-polls
 * two paths, so it has two watches; every other provider polls its paths in
 * turn from one watch). Watches share the poller's stop flag and condition
 * variable (so notice_stop() wakes every sleeper), and deliver through one
 * mutex that also holds the de-duplication state. State touched only by a
 * watch's own thread (ETag, last logged condition) lives in the watch.
 */
#ifndef CKPTRUN_NOTICE_INT_H
#define CKPTRUN_NOTICE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "notice.h"

struct ckpt_http;
struct ckpt_imds;

#define BASE_MAX 256
#define SLOTS 4               /* log-once slots per watch (one per polled path) */
#define KEYS 16               /* remembered non-terminate notices */
#define BODY_MAX_SMALL 4096   /* plain-text and small JSON replies */
#define BODY_MAX_AZURE 65536  /* a document listing many events */
#define CONNECT_MS 2000       /* metadata services are local: connect fast or not at all */

struct notice_poller;

struct nwatch {
    struct notice_poller *p;
    pthread_t th;
    int started;
    void (*run)(struct nwatch *);
    const char *path;           /* GCP: the watched path */
    char last[SLOTS][256];      /* last condition logged per slot ("" = fine) */
};

struct notice_poller {
    const char *provider;       /* static string */
    char base[BASE_MAX];        /* scheme://host[:port] (not used by aws) */
    struct ckpt_imds *imds;     /* aws only */
    struct ckpt_http *http;     /* the other providers */
    notice_cb cb;
    void *user;
    ckpt_log_fn log_fn;
    void *log_user;
    long interval_ms;

    atomic_int stop;
    pthread_mutex_t mu;         /* with cv: sleeping and waking on stop */
    pthread_cond_t cv;

    pthread_mutex_t deliver_mu; /* serializes callbacks; guards the fields below */
    int terminated;             /* a NOTICE_TERMINATE was delivered */
    char keys[KEYS][400];
    unsigned nkeys;

    /* worker-only state (one watch thread uses each) */
    char aliyun_token[512];
    int64_t aliyun_renew_ms;
    char azure_vm[128];
    int64_t azure_vm_retry_ms;

    struct nwatch w[2];
    int nw;
};

typedef int (*notice_parser)(const char *, size_t, int64_t, struct notice_event *);

/* ---- notice_net.c ---------------------------------------------------------- */

/* One HTTP reply: the body (malloc'd, NUL-terminated) or why there is none. */
struct notice_reply {
    long status;
    char *body;
    size_t len;
    char etag[80];              /* a plain token, else "" */
    char err[300];
};

/* A transport for metadata requests: never through a proxy, quick to
 * connect. @return NULL when out of memory (or libcurl failed). */
struct ckpt_http *notice_http_new(void);
/* One request: hdrs is NULL-terminated (may be NULL), body may be NULL.
 * A body larger than `max` is no body: an error. @return 0 with r->status
 * and r->body (free it), or -1 with r->err. */
int notice_http(struct ckpt_http *h, const char *method, const char *url,
                const char *const *hdrs, const char *body, long timeout_ms, size_t max,
                struct notice_reply *r);
/* The provider DMI names ("none" when none): `dir` is /sys/class/dmi/id or
 * a test's; `how` (may be NULL) receives which DMI string decided. */
const char *notice_detect(const char *dir, ckpt_log_fn log_fn, void *log_user, char *how,
                          size_t how_cap);
/* scheme://authority of a metadata URL ("--metadata-url replaces the
 * scheme, host and port; the provider's paths are kept"). @return 0 or -1. */
int notice_base_of(const char *url, char *out, size_t cap);
/* The provider's own metadata address. */
const char *notice_default_base(const char *provider);

/* ---- notice_parse.c ----------------------------------------------------------- */

/* The provider name as a static string ("aws", ..., "none"), NULL when
 * unknown. */
const char *notice_provider_name(const char *name);

/* ---- notice_report.c --------------------------------------------------------- */

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
/* Run a parser on a 200 body and act on the result. */
void notice_handle(struct nwatch *w, int slot, notice_parser parse, const char *body, size_t len);

/* ---- notice_providers.c -------------------------------------------------------- */

void notice_run_aws(struct nwatch *w);
void notice_run_gcp(struct nwatch *w);
void notice_run_azure(struct nwatch *w);
void notice_run_plain(struct nwatch *w);   /* aliyun, tencent */

#endif
