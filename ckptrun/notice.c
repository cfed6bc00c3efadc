/*
 * notice.c -- the poller: provider detection, threads, HTTP, delivery.
 *
 * Layout: one "watch" per endpoint that needs its own thread (GCP long-polls
 * two paths, so it has two watches; every other provider polls its paths in
 * turn from one watch). Watches share the poller's stop flag and condition
 * variable (so notice_stop() wakes every sleeper), and deliver through one
 * mutex that also holds the de-duplication state. State touched only by a
 * watch's own thread (ETag, last logged condition) lives in the watch.
 *
 * Never a false notice: only a 200 reply that a strict parser accepts becomes
 * an event (notice_parse.c). Never blocking the caller: notice_start() reads
 * DMI files and starts threads; all network work is on those threads, and
 * long requests are aborted through libcurl's progress callback on stop.
 */
#include "notice.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "imds.h"

#define BASE_MAX 256
#define SLOTS 4               /* log-once slots per watch (one per polled path) */
#define KEYS 16               /* remembered non-terminate notices */
#define BODY_MAX_SMALL 4096   /* plain-text and small JSON replies */
#define BODY_MAX_AZURE 65536  /* a document listing many events */
#define AWS_TIMEOUT_MS 1500   /* IMDS is local: a slow answer is a failure */
#define GCP_WAIT_S 60         /* long-poll timeout_sec */
#define AZURE_TIMEOUT_MS 120000 /* the first call can take up to 2 minutes */
#define PLAIN_TIMEOUT_MS 3000
#define ACK_TIMEOUT_MS 5000
#define ALIYUN_TTL_S 21600
#define ERROR_BACKOFF_MS 5000 /* after a 4xx that retrying quickly cannot fix */

struct notice_poller;

struct watch {
    struct notice_poller *p;
    pthread_t th;
    int started;
    void (*run)(struct watch *);
    const char *path;           /* GCP: the watched path */
    char last[SLOTS][256];      /* last condition logged per slot ("" = fine) */
};

struct notice_poller {
    const char *provider;       /* static string */
    char base[BASE_MAX];        /* scheme://host[:port] (not used by aws) */
    struct ckpt_imds *imds;     /* aws only */
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

    struct watch w[2];
    int nw;
};

/* ---- small utilities ------------------------------------------------------ */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void logf_(struct notice_poller *p, ckpt_log_level lv, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    if (!p->log_fn)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->log_fn(p->log_user, lv, "notice", msg);
}

/* Logs a failing condition once, until it changes or clears: a poller that
 * fails every second must not flood the log. */
static void cond_fail(struct watch *w, int slot, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (strcmp(msg, w->last[slot]) == 0)
        return;
    snprintf(w->last[slot], sizeof w->last[slot], "%s", msg);
    logf_(w->p, CKPT_LOG_WARN, "%s: %s (still polling)", w->p->provider, msg);
}

static void cond_ok(struct watch *w, int slot)
{
    if (!w->last[slot][0])
        return;
    logf_(w->p, CKPT_LOG_INFO, "%s: recovered from: %s", w->p->provider, w->last[slot]);
    w->last[slot][0] = '\0';
}

/* Sleeps up to ms. @return 1 when the poller is stopping. */
static int nap(struct notice_poller *p, long ms)
{
    struct timespec ts;
    int stopping;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&p->mu);
    while (!atomic_load(&p->stop)) {
        if (pthread_cond_timedwait(&p->cv, &p->mu, &ts) == ETIMEDOUT)
            break;
    }
    stopping = atomic_load(&p->stop);
    pthread_mutex_unlock(&p->mu);
    return stopping;
}

static long interval(struct notice_poller *p, long dflt)
{
    return p->interval_ms > 0 ? p->interval_ms : dflt;
}

/* ---- delivery ------------------------------------------------------------- */

static void deliver(struct notice_poller *p, struct notice_event *ev)
{
    char key[400];
    unsigned i;

    ev->provider = p->provider;
    pthread_mutex_lock(&p->deliver_mu);
    if (atomic_load(&p->stop))
        goto out;
    if (ev->kind == NOTICE_TERMINATE) {
        /* One termination per instance, whichever path reported it first
         * (AWS serves it on two paths; Azure may list several events). */
        if (p->terminated)
            goto out;
        p->terminated = 1;
    } else {
        snprintf(key, sizeof key, "%d|%s|%s", (int)ev->kind, ev->id, ev->detail);
        for (i = 0; i < p->nkeys && i < KEYS; i++)
            if (strcmp(p->keys[i], key) == 0)
                goto out;
        snprintf(p->keys[p->nkeys % KEYS], sizeof p->keys[0], "%s", key);
        p->nkeys++;
    }
    logf_(p, CKPT_LOG_INFO, "%s: %s notice, deadline in %lld ms: %s", p->provider,
          ev->kind == NOTICE_TERMINATE ? "terminate"
          : ev->kind == NOTICE_REBALANCE ? "rebalance" : "maintenance",
          ev->deadline_ms ? (long long)(ev->deadline_ms - now_ms()) : 0LL, ev->detail);
    p->cb(p->user, ev);
out:
    pthread_mutex_unlock(&p->deliver_mu);
}

/* Runs a parser on a 200 body and acts on the result. */
static void handle(struct watch *w, int slot,
                   int (*parse)(const char *, size_t, int64_t, struct notice_event *),
                   const char *body, size_t len)
{
    struct notice_event ev;
    int r = parse(body, len, now_ms(), &ev);
    if (r < 0) {
        cond_fail(w, slot, "%s", ev.detail);
        return;
    }
    cond_ok(w, slot);
    if (r > 0)
        deliver(w->p, &ev);
}

/* ---- HTTP (non-AWS providers) --------------------------------------------- */

struct reply {
    long status;
    char *body;
    size_t len, cap, max;
    int overflow;
    char etag[80];
    char err[160];
};

static size_t on_body(char *d, size_t sz, size_t nm, void *u)
{
    struct reply *r = u;
    size_t n = sz * nm;
    if (r->len + n > r->max) {
        r->overflow = 1;
        return 0; /* capped, never truncated: a partial document is no document */
    }
    if (r->len + n + 1 > r->cap) {
        size_t c = r->cap ? r->cap : 512;
        char *nb;
        while (c < r->len + n + 1)
            c *= 2;
        nb = realloc(r->body, c);
        if (!nb)
            return 0;
        r->body = nb;
        r->cap = c;
    }
    memcpy(r->body + r->len, d, n);
    r->len += n;
    r->body[r->len] = '\0';
    return n;
}

static size_t on_header(char *d, size_t sz, size_t nm, void *u)
{
    struct reply *r = u;
    size_t n = sz * nm, i, k = 0;
    if (n > 5 && strncasecmp(d, "ETag:", 5) == 0) {
        /* Kept only if it is a plain token: it goes back into a URL. */
        for (i = 5; i < n && (d[i] == ' ' || d[i] == '\t'); i++)
            ;
        for (; i < n && k + 1 < sizeof r->etag; i++) {
            char c = d[i];
            if (c == '\r' || c == '\n')
                break;
            if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                  (c >= 'A' && c <= 'Z') || c == '-' || c == '_')) {
                k = 0;
                break;
            }
            r->etag[k++] = c;
        }
        r->etag[k] = '\0';
    }
    return n;
}

static int on_progress(void *u, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    struct notice_poller *p = u;
    (void)a, (void)b, (void)c, (void)d;
    return atomic_load(&p->stop) ? 1 : 0; /* aborts a long-poll at once on stop */
}

/* One request. @return 0 with r->status set, or -1 with r->err set. */
static int http(struct notice_poller *p, const char *method, const char *url,
                const char *const *hdrs, const char *body, long timeout_ms, size_t max,
                struct reply *r)
{
    int ret = -1;
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL, *t;
    CURLcode rc;
    int i;

    memset(r, 0, sizeof *r);
    r->max = max;
    if (!c) {
        snprintf(r->err, sizeof r->err, "curl_easy_init failed");
        goto out;
    }
    for (i = 0; hdrs && hdrs[i]; i++) {
        t = curl_slist_append(h, hdrs[i]);
        if (!t) {
            snprintf(r->err, sizeof r->err, "out of memory");
            goto out;
        }
        h = t;
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*"); /* metadata never goes via a proxy */
    curl_easy_setopt(c, CURLOPT_PROXY, "");
#if LIBCURL_VERSION_NUM >= 0x075500 /* 7.85: the string form */
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(c, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 2000 ? timeout_ms : 2000L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, p);
    if (strcmp(method, "GET") != 0) {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)(body ? strlen(body) : 0));
    }
    if (h)
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    rc = curl_easy_perform(c);
    if (rc != CURLE_OK) {
        if (r->overflow)
            snprintf(r->err, sizeof r->err, "reply body over %zu bytes", max);
        else
            snprintf(r->err, sizeof r->err, "%s", curl_easy_strerror(rc));
        goto out;
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    if (!r->body) {
        r->body = calloc(1, 1);
        if (!r->body) {
            snprintf(r->err, sizeof r->err, "out of memory");
            goto out;
        }
    }
    ret = 0;
out:
    if (ret) {
        free(r->body);
        r->body = NULL;
        r->len = 0;
    }
    curl_slist_free_all(h);
    if (c)
        curl_easy_cleanup(c);
    return ret;
}

/* ---- AWS ------------------------------------------------------------------ */

static const struct {
    const char *path;
    int (*parse)(const char *, size_t, int64_t, struct notice_event *);
} aws_paths[3] = {
    {"/latest/meta-data/spot/instance-action", notice_parse_aws_action},
    {"/latest/meta-data/spot/termination-time", notice_parse_aws_termtime},
    {"/latest/meta-data/events/recommendations/rebalance", notice_parse_aws_rebalance},
};

static void run_aws(struct watch *w)
{
    struct notice_poller *p = w->p;
    do {
        int i;
        for (i = 0; i < 3 && !atomic_load(&p->stop); i++) {
            char err[512] = "", *body = NULL;
            size_t len = 0;
            long code = 0;
            ckpt_status st = ckpt_imds_get(p->imds, aws_paths[i].path, AWS_TIMEOUT_MS,
                                           BODY_MAX_SMALL, &body, &len, &code, err);
            if (st != CKPT_OK) {
                cond_fail(w, i, "%s: %s", aws_paths[i].path, err[0] ? err : "request failed");
                free(body);
                if (st == CKPT_E_UNREACHABLE)
                    break; /* the other paths would time out the same way */
                continue;
            }
            if (code == 200)
                handle(w, i, aws_paths[i].parse, body, len);
            else if (code == 404)
                cond_ok(w, i); /* no notice */
            else
                cond_fail(w, i, "%s: HTTP %ld", aws_paths[i].path, code);
            free(body);
        }
    } while (!nap(p, interval(p, 2000)));
}

/* ---- GCP ------------------------------------------------------------------ */

static void run_gcp(struct watch *w)
{
    struct notice_poller *p = w->p;
    static const char *const hdrs[] = {"Metadata-Flavor: Google", NULL};
    int (*parse)(const char *, size_t, int64_t, struct notice_event *) =
        strstr(w->path, "preempted") ? notice_parse_gcp_preempted : notice_parse_gcp_maintenance;
    char etag[80] = "0";
    char url[BASE_MAX + 256];

    while (!atomic_load(&p->stop)) {
        struct reply r;
        long pause = 0;
        int64_t t0 = mono_ms();
        snprintf(url, sizeof url,
                 "%s/computeMetadata/v1/%s?wait_for_change=true&timeout_sec=%d&last_etag=%s",
                 p->base, w->path, GCP_WAIT_S, etag);
        if (http(p, "GET", url, hdrs, NULL, (GCP_WAIT_S + 5) * 1000L, BODY_MAX_SMALL, &r)) {
            if (atomic_load(&p->stop))
                break;
            cond_fail(w, 0, "%s: %s", w->path, r.err);
            pause = interval(p, 1000);
        } else if (r.status == 200) {
            /* An unchanged or missing ETag would make the next call return at
             * once: then pace the loop instead of spinning. */
            if (!r.etag[0] || strcmp(r.etag, etag) == 0)
                pause = interval(p, 1000);
            snprintf(etag, sizeof etag, "%s", r.etag[0] ? r.etag : "0");
            handle(w, 0, parse, r.body, r.len);
        } else if (r.status == 503) {
            pause = 1000; /* during maintenance (SPEC.md A, GCP) */
        } else {
            cond_fail(w, 0, "%s: HTTP %ld%s", w->path, r.status,
                      r.status >= 400 && r.status < 500 ? " (misconfiguration?)" : "");
            pause = r.status >= 400 && r.status < 500 ? ERROR_BACKOFF_MS : interval(p, 1000);
        }
        free(r.body);
        /* Never faster than 4 requests a second, whatever the server does. */
        if (!pause && mono_ms() - t0 < 250)
            pause = 250;
        if (pause && nap(p, pause))
            break;
    }
}

/* ---- Azure ---------------------------------------------------------------- */

static const char *const azure_hdrs[] = {"Metadata: true", NULL};

static void azure_vm_name(struct watch *w)
{
    struct notice_poller *p = w->p;
    char url[BASE_MAX + 128];
    struct reply r;
    size_t i;

    if (p->azure_vm[0] || mono_ms() < p->azure_vm_retry_ms)
        return;
    p->azure_vm_retry_ms = mono_ms() + 60000;
    snprintf(url, sizeof url, "%s/metadata/instance/compute/name?api-version=2021-02-01&format=text",
             p->base);
    if (http(p, "GET", url, azure_hdrs, NULL, PLAIN_TIMEOUT_MS, 256, &r))
        return;
    if (r.status == 200 && r.len > 0 && r.len < sizeof p->azure_vm) {
        for (i = 0; i < r.len; i++)
            if ((unsigned char)r.body[i] <= 0x20 || (unsigned char)r.body[i] >= 0x7f)
                break;
        if (i == r.len) {
            memcpy(p->azure_vm, r.body, r.len + 1);
            logf_(p, CKPT_LOG_DEBUG, "azure: VM name %s", p->azure_vm);
        }
    }
    free(r.body);
}

static int parse_azure_self(const char *b, size_t n, int64_t now, struct notice_event *ev,
                            const char *vm)
{
    return notice_parse_azure_for(b, n, now, vm[0] ? vm : NULL, ev);
}

static void run_azure(struct watch *w)
{
    struct notice_poller *p = w->p;
    char url[BASE_MAX + 128];
    snprintf(url, sizeof url, "%s/metadata/scheduledevents?api-version=2020-07-01", p->base);
    do {
        struct reply r;
        azure_vm_name(w);
        if (http(p, "GET", url, azure_hdrs, NULL, AZURE_TIMEOUT_MS, BODY_MAX_AZURE, &r)) {
            if (!atomic_load(&p->stop))
                cond_fail(w, 0, "scheduledevents: %s", r.err);
        } else if (r.status == 200) {
            struct notice_event ev;
            int rc = parse_azure_self(r.body, r.len, now_ms(), &ev, p->azure_vm);
            if (rc < 0) {
                cond_fail(w, 0, "%s", ev.detail);
            } else {
                cond_ok(w, 0);
                if (rc > 0)
                    deliver(p, &ev);
            }
        } else {
            cond_fail(w, 0, "scheduledevents: HTTP %ld", r.status);
        }
        free(r.body);
    } while (!nap(p, interval(p, 1000)));
}

/* ---- Alibaba, Tencent ----------------------------------------------------- */

/* Hardened mode wants a token; normal mode accepts one. Tries to hold one and
 * goes without when the PUT is refused (older or unusual metadata servers). */
static void aliyun_token(struct watch *w)
{
    struct notice_poller *p = w->p;
    char url[BASE_MAX + 64], ttl[80];
    const char *hdrs[2] = {ttl, NULL};
    struct reply r;
    size_t n;

    if (p->aliyun_token[0] && mono_ms() < p->aliyun_renew_ms)
        return;
    if (!p->aliyun_token[0] && mono_ms() < p->aliyun_renew_ms)
        return; /* recently refused: wait before asking again */
    p->aliyun_token[0] = '\0';
    p->aliyun_renew_ms = mono_ms() + 60000;
    snprintf(url, sizeof url, "%s/latest/api/token", p->base);
    snprintf(ttl, sizeof ttl, "X-aliyun-ecs-metadata-token-ttl-seconds: %d", ALIYUN_TTL_S);
    if (http(p, "PUT", url, hdrs, "", PLAIN_TIMEOUT_MS, 1024, &r))
        return;
    n = r.len;
    while (n && (r.body[n - 1] == '\n' || r.body[n - 1] == '\r' || r.body[n - 1] == ' '))
        n--;
    if (r.status == 200 && n > 0 && n < sizeof p->aliyun_token && !memchr(r.body, '\n', n) &&
        !memchr(r.body, '\r', n)) {
        memcpy(p->aliyun_token, r.body, n);
        p->aliyun_token[n] = '\0';
        p->aliyun_renew_ms = mono_ms() + (ALIYUN_TTL_S - 60) * 1000LL;
    }
    free(r.body);
}

static void run_plain(struct watch *w)
{
    struct notice_poller *p = w->p;
    int aliyun = strcmp(p->provider, "aliyun") == 0;
    char url[BASE_MAX + 128], tokh[600];
    int (*parse)(const char *, size_t, int64_t, struct notice_event *) =
        aliyun ? notice_parse_aliyun : notice_parse_tencent_reply;

    snprintf(url, sizeof url, "%s%s", p->base,
             aliyun ? "/latest/meta-data/instance/spot/termination-time"
                    : "/latest/meta-data/spot/termination-time");
    do {
        struct reply r;
        const char *hdrs[2] = {NULL, NULL};
        if (aliyun) {
            aliyun_token(w);
            if (p->aliyun_token[0]) {
                snprintf(tokh, sizeof tokh, "X-aliyun-ecs-metadata-token: %s", p->aliyun_token);
                hdrs[0] = tokh;
            }
        }
        if (http(p, "GET", url, hdrs, NULL, PLAIN_TIMEOUT_MS, BODY_MAX_SMALL, &r)) {
            if (!atomic_load(&p->stop))
                cond_fail(w, 0, "termination-time: %s", r.err);
        } else if (r.status == 200) {
            handle(w, 0, parse, r.body, r.len);
        } else if (r.status == 404) {
            cond_ok(w, 0);
        } else {
            if (aliyun && (r.status == 401 || r.status == 403)) {
                /* Token expired, revoked or newly required: get one now. */
                p->aliyun_token[0] = '\0';
                p->aliyun_renew_ms = 0;
            }
            cond_fail(w, 0, "termination-time: HTTP %ld", r.status);
        }
        free(r.body);
    } while (!nap(p, interval(p, 5000)));
}

/* ---- detection and lifecycle ---------------------------------------------- */

static void read_dmi(const char *dir, const char *name, char *out, size_t cap)
{
    char path[512];
    int fd;
    ssize_t n;
    out[0] = '\0';
    snprintf(path, sizeof path, "%s/%s", dir, name);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    n = read(fd, out, cap - 1);
    close(fd);
    /* sysfs values end in a newline; keep one clean line for matching/logs */
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' ' || out[n - 1] == '\r'))
        n--;
    out[n > 0 ? n : 0] = '\0';
}

/* `how` (may be NULL) receives which DMI string decided, for diagnostics. */
static const char *detect(const char *dir, ckpt_log_fn log_fn, void *log_user, char *how,
                          size_t how_cap)
{
    char vendor[256], product[256], bios[256], biosver[256], asset[256], msg[512];
    const char *prov = "none";

    read_dmi(dir, "sys_vendor", vendor, sizeof vendor);
    read_dmi(dir, "product_name", product, sizeof product);
    read_dmi(dir, "bios_vendor", bios, sizeof bios);
    read_dmi(dir, "bios_version", biosver, sizeof biosver);
    read_dmi(dir, "chassis_asset_tag", asset, sizeof asset);
    if (strcasestr(vendor, "Amazon") || strcasestr(bios, "Amazon") ||
        strcasestr(biosver, "amazon")) /* older Xen instances say Xen, bios "x.amazon" */
        prov = "aws";
    else if (strcasestr(vendor, "Google") || strcasestr(product, "Google"))
        prov = "gcp";
    else if (strcasestr(vendor, "Microsoft Corporation") &&
             (strstr(asset, "7783-7084-3265-9085-8269-3286-77") ||
              strcasestr(product, "Virtual Machine")))
        prov = "azure"; /* Hyper-V guest; Azure's fixed asset tag when present */
    else if (strcasestr(vendor, "Alibaba") || strcasestr(product, "Alibaba Cloud"))
        prov = "aliyun";
    else if (strcasestr(vendor, "Tencent") || strcasestr(product, "Tencent"))
        prov = "tencent";
    if (how) {
        if (!vendor[0] && !product[0])
            snprintf(how, how_cap, "no DMI information in %.120s", dir);
        else if (strcmp(prov, "none") == 0)
            snprintf(how, how_cap, "DMI sys_vendor \"%.60s\" product \"%.60s\": no known provider",
                     vendor, product);
        else
            snprintf(how, how_cap, "DMI sys_vendor \"%.60s\" product \"%.60s\"", vendor, product);
    }
    if (log_fn) {
        snprintf(msg, sizeof msg, "auto: DMI vendor \"%.60s\" product \"%.60s\" -> %s",
                 vendor, product, prov);
        log_fn(log_user, CKPT_LOG_DEBUG, "notice", msg);
    }
    return prov;
}

/* Keeps scheme://authority of a metadata URL ("--metadata-url replaces the
 * scheme, host and port; the provider's paths are kept"). */
static int base_of(const char *url, char *out, size_t cap)
{
    const char *a;
    size_t n;
    if (strncmp(url, "http://", 7) == 0)
        a = url + 7;
    else if (strncmp(url, "https://", 8) == 0)
        a = url + 8;
    else
        return -1;
    n = strcspn(a, "/?#");
    if (n == 0 || (size_t)(a - url) + n >= cap || memchr(a, '@', n) || a[n - 1] == ':')
        return -1; /* no host, no credentials in a metadata URL, no empty port */
    {
        /* Only host[:port] characters: the result is pasted into URLs. */
        size_t i;
        for (i = 0; i < n; i++)
            if (!((a[i] >= '0' && a[i] <= '9') || (a[i] >= 'a' && a[i] <= 'z') ||
                  (a[i] >= 'A' && a[i] <= 'Z') || strchr(".-:[]", a[i])))
                return -1;
    }
    memcpy(out, url, (size_t)(a - url) + n);
    out[(a - url) + n] = '\0';
    return 0;
}

static void *thread_main(void *arg)
{
    struct watch *w = arg;
    w->run(w);
    return NULL;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_ok;
static void curl_init_once(void)
{
    curl_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

int notice_start(const struct notice_config *cfg, struct notice_poller **out)
{
    int ret = -1, i;
    struct notice_poller *p = NULL;
    const char *prov;
    pthread_condattr_t ca;

    if (!cfg || !out)
        return -1;
    *out = NULL;
    prov = cfg->provider && *cfg->provider ? cfg->provider : "auto";
    if (strcmp(prov, "auto") == 0)
        prov = detect(cfg->dmi_dir ? cfg->dmi_dir : "/sys/class/dmi/id", cfg->log_fn,
                      cfg->log_user, NULL, 0);
    /* Normalize to a static string we own. */
    if (strcmp(prov, "aws") == 0) prov = "aws";
    else if (strcmp(prov, "gcp") == 0) prov = "gcp";
    else if (strcmp(prov, "azure") == 0) prov = "azure";
    else if (strcmp(prov, "aliyun") == 0) prov = "aliyun";
    else if (strcmp(prov, "tencent") == 0) prov = "tencent";
    else if (strcmp(prov, "none") == 0) prov = "none";
    else
        return -1;

    p = calloc(1, sizeof *p);
    if (!p)
        return -1;
    p->provider = prov;
    p->cb = cfg->cb;
    p->user = cfg->user;
    p->log_fn = cfg->log_fn;
    p->log_user = cfg->log_user;
    p->interval_ms = cfg->poll_interval_ms;
    atomic_init(&p->stop, 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_mutex_init(&p->deliver_mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* naps immune to clock steps */
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);

    if (strcmp(prov, "none") == 0) {
        ret = 0;
        goto out;
    }
    if (!cfg->cb)
        goto out;
    if (cfg->metadata_url && base_of(cfg->metadata_url, p->base, sizeof p->base))
        goto out;
    pthread_once(&curl_once, curl_init_once);
    if (!curl_ok)
        goto out;

    if (strcmp(prov, "aws") == 0) {
        p->imds = ckpt_imds_shared(cfg->metadata_url ? p->base : NULL);
        if (!p->imds) {
            logf_(p, CKPT_LOG_INFO, "aws: instance metadata disabled: not polling");
            p->provider = "none";
            ret = 0;
            goto out;
        }
        p->w[p->nw++].run = run_aws;
    } else if (strcmp(prov, "gcp") == 0) {
        if (!p->base[0])
            snprintf(p->base, sizeof p->base, "http://metadata.google.internal");
        p->w[p->nw].run = run_gcp;
        p->w[p->nw++].path = "instance/preempted";
        p->w[p->nw].run = run_gcp;
        p->w[p->nw++].path = "instance/maintenance-event";
    } else if (strcmp(prov, "azure") == 0) {
        if (!p->base[0])
            snprintf(p->base, sizeof p->base, "http://169.254.169.254");
        p->w[p->nw++].run = run_azure;
    } else {
        if (!p->base[0])
            snprintf(p->base, sizeof p->base, "%s",
                     strcmp(prov, "aliyun") == 0 ? "http://100.100.100.200"
                                                 : "http://metadata.tencentyun.com");
        p->w[p->nw++].run = run_plain;
    }
    logf_(p, CKPT_LOG_INFO, "%s: polling %s for preemption notices", prov,
          p->base[0] ? p->base : "instance metadata");
    for (i = 0; i < p->nw; i++) {
        p->w[i].p = p;
        if (pthread_create(&p->w[i].th, NULL, thread_main, &p->w[i]) != 0)
            goto out;
        p->w[i].started = 1;
    }
    ret = 0;
out:
    if (ret) {
        notice_stop(p);
        p = NULL;
    }
    *out = p;
    return ret;
}

const char *notice_provider(const struct notice_poller *p)
{
    return p ? p->provider : "none";
}

int notice_ack(struct notice_poller *p, const char *event_id)
{
    int ret = -1;
    cJSON *root = NULL, *arr, *obj;
    char *body = NULL, url[BASE_MAX + 128];
    static const char *const hdrs[] = {"Metadata: true", "Content-Type: application/json", NULL};
    struct reply r = {0};

    if (!p || strcmp(p->provider, "azure") != 0)
        return p ? 0 : -1;
    if (!event_id || !*event_id)
        return -1;
    /* Built with cJSON so any character in the id is escaped properly. */
    root = cJSON_CreateObject();
    arr = root ? cJSON_AddArrayToObject(root, "StartRequests") : NULL;
    obj = arr ? cJSON_CreateObject() : NULL;
    if (!obj)
        goto out;
    cJSON_AddItemToArray(arr, obj);
    if (!cJSON_AddStringToObject(obj, "EventId", event_id))
        goto out;
    body = cJSON_PrintUnformatted(root);
    if (!body)
        goto out;
    snprintf(url, sizeof url, "%s/metadata/scheduledevents?api-version=2020-07-01", p->base);
    if (http(p, "POST", url, hdrs, body, ACK_TIMEOUT_MS, BODY_MAX_SMALL, &r)) {
        logf_(p, CKPT_LOG_WARN, "azure: acknowledging %s failed: %s", event_id, r.err);
        goto out;
    }
    if (r.status < 200 || r.status > 299) {
        logf_(p, CKPT_LOG_WARN, "azure: acknowledging %s: HTTP %ld", event_id, r.status);
        goto out;
    }
    logf_(p, CKPT_LOG_INFO, "azure: acknowledged event %s", event_id);
    ret = 0;
out:
    free(r.body);
    cJSON_free(body);
    cJSON_Delete(root);
    return ret;
}

void notice_stop(struct notice_poller *p)
{
    int i;
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (i = 0; i < p->nw; i++)
        if (p->w[i].started)
            pthread_join(p->w[i].th, NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->deliver_mu);
    free(p);
}

/* ---- one-shot probe (ckptrun doctor) ---------------------------------------- */

int notice_probe(const struct notice_config *cfg, long timeout_ms,
                 struct notice_probe_result *r)
{
    struct notice_poller p;   /* only what http() reads: the stop flag */
    struct reply rep;
    char url[BASE_MAX + 160], tokh[600];
    const char *prov, *hdrs[3] = {NULL, NULL, NULL}, *path = NULL;
    const char *tok_hdr = NULL, *tok_ttl = NULL;
    int64_t t0;
    int ret = -1;

    if (!cfg || !r)
        return -1;
    memset(r, 0, sizeof *r);
    memset(&p, 0, sizeof p);
    atomic_init(&p.stop, 0);
    r->token = -2;
    prov = cfg->provider && *cfg->provider ? cfg->provider : "auto";
    if (strcmp(prov, "auto") == 0) {
        prov = detect(cfg->dmi_dir ? cfg->dmi_dir : "/sys/class/dmi/id", NULL, NULL, r->how,
                      sizeof r->how);
    } else {
        snprintf(r->how, sizeof r->how, "forced by --notice %s", prov);
    }
    if (strcmp(prov, "aws") == 0) prov = "aws";
    else if (strcmp(prov, "gcp") == 0) prov = "gcp";
    else if (strcmp(prov, "azure") == 0) prov = "azure";
    else if (strcmp(prov, "aliyun") == 0) prov = "aliyun";
    else if (strcmp(prov, "tencent") == 0) prov = "tencent";
    else if (strcmp(prov, "none") == 0) prov = "none";
    else
        goto out;
    r->provider = prov;
    ret = 0;
    if (strcmp(prov, "none") == 0)
        goto out; /* never touch the network without a provider */
    if (strcmp(prov, "aws") == 0 && getenv("AWS_EC2_METADATA_DISABLED") &&
        strcasecmp(getenv("AWS_EC2_METADATA_DISABLED"), "true") == 0) {
        /* notice_start() polls nothing then, whatever the URL: say so. */
        snprintf(r->detail, sizeof r->detail, "AWS_EC2_METADATA_DISABLED=true: not polled");
        goto out;
    }
    if (cfg->metadata_url) {
        if (base_of(cfg->metadata_url, r->base, sizeof r->base)) {
            snprintf(r->detail, sizeof r->detail, "--metadata-url is not http(s)://host[:port]");
            goto out;
        }
    } else if (strcmp(prov, "aws") == 0) {
        const char *e = getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT");
        if (!e || !*e || base_of(e, r->base, sizeof r->base))
            snprintf(r->base, sizeof r->base, "http://169.254.169.254");
    } else {
        snprintf(r->base, sizeof r->base, "%s",
                 strcmp(prov, "gcp") == 0      ? "http://metadata.google.internal"
                 : strcmp(prov, "azure") == 0  ? "http://169.254.169.254"
                 : strcmp(prov, "aliyun") == 0 ? "http://100.100.100.200"
                                               : "http://metadata.tencentyun.com");
    }
    pthread_once(&curl_once, curl_init_once);
    if (!curl_ok) {
        snprintf(r->detail, sizeof r->detail, "libcurl could not be initialised");
        goto out;
    }
    if (strcmp(prov, "aws") == 0) {
        tok_hdr = "X-aws-ec2-metadata-token";
        tok_ttl = "X-aws-ec2-metadata-token-ttl-seconds: 60";
        path = "/latest/meta-data/spot/instance-action";
    } else if (strcmp(prov, "aliyun") == 0) {
        tok_hdr = "X-aliyun-ecs-metadata-token";
        tok_ttl = "X-aliyun-ecs-metadata-token-ttl-seconds: 60";
        path = "/latest/meta-data/instance/spot/termination-time";
    } else if (strcmp(prov, "gcp") == 0) {
        hdrs[0] = "Metadata-Flavor: Google";
        path = "/computeMetadata/v1/instance/preempted";
    } else if (strcmp(prov, "azure") == 0) {
        hdrs[0] = "Metadata: true";
        path = "/metadata/scheduledevents?api-version=2020-07-01";
    } else {
        path = "/latest/meta-data/spot/termination-time";
    }
    if (tok_hdr) {
        const char *th[2] = {tok_ttl, NULL};
        /* A short-lived token: the probe needs it for one GET. */
        snprintf(url, sizeof url, "%s/latest/api/token", r->base);
        if (http(&p, "PUT", url, th, NULL, timeout_ms, 1024, &rep)) {
            r->token = -1;
            snprintf(r->detail, sizeof r->detail, "token PUT: %s", rep.err);
        } else {
            size_t n = rep.len;
            r->token_status = rep.status;
            while (n > 0 && (rep.body[n - 1] == '\n' || rep.body[n - 1] == '\r'))
                n--;
            if (rep.status == 200 && n > 0 && n < 512 && !memchr(rep.body, '\n', n) &&
                !memchr(rep.body, '\r', n)) {
                r->token = 1;
                snprintf(tokh, sizeof tokh, "%s: %.*s", tok_hdr, (int)n, rep.body);
                hdrs[0] = tokh;
            } else if (rep.status == 403 || rep.status == 404 || rep.status == 405) {
                r->token = 0;
            } else {
                r->token = -1;
            }
            free(rep.body);
        }
    }
    snprintf(url, sizeof url, "%s%s", r->base, path);
    t0 = mono_ms();
    if (http(&p, "GET", url, hdrs, NULL, timeout_ms, BODY_MAX_AZURE, &rep)) {
        r->latency_ms = (long)(mono_ms() - t0);
        snprintf(r->detail, sizeof r->detail, "%s: %s", path, rep.err);
        goto out;
    }
    r->latency_ms = (long)(mono_ms() - t0);
    r->reachable = 1;
    r->status = rep.status;
    if (rep.status == 200) {
        struct notice_event ev;
        int64_t now = now_ms();
        int k = strcmp(prov, "aws") == 0      ? notice_parse_aws_action(rep.body, rep.len, now, &ev)
                : strcmp(prov, "gcp") == 0    ? notice_parse_gcp_preempted(rep.body, rep.len, now, &ev)
                : strcmp(prov, "azure") == 0  ? notice_parse_azure(rep.body, rep.len, now, &ev)
                : strcmp(prov, "aliyun") == 0 ? notice_parse_aliyun(rep.body, rep.len, now, &ev)
                                              : notice_parse_tencent_reply(rep.body, rep.len, now, &ev);
        r->pending = k > 0;
        if (k != 0)
            snprintf(r->detail, sizeof r->detail, "%s", ev.detail);
    }
    free(rep.body);
out:
    return ret;
}
