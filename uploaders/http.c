/*
 * http.c -- libcurl transport: one curl multi handle driven by its own
 * thread, which callers hand their requests to. See ckpt_http.h for the
 * policy.
 */
#include "ckpt_common.h"
#include "ckpt_http.h"
#include "ckpt_store.h"
#include "retry.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define HDRS_MAX (64 * 1024)
#define DEFAULT_BODY_MAX (1024 * 1024)
#define CONNECT_TIMEOUT_MS 10000L
#define DEFAULT_STALL_MS 30000L

struct job;

struct ckpt_http {
    pthread_mutex_t mu;       /* guards everything below up to `stopping` */
    pthread_cond_t cv;        /* an easy handle came back */
    CURL **free_list;         /* idle easy handles (request state only) */
    unsigned nfree;
    unsigned ncreated;
    unsigned max_handles;     /* transfers at once = easy handles */
    struct job *queue;        /* submitted, not yet in the multi handle */
    struct job **queue_tail;
    int stopping;
    int cancelled; /* ckpt__http_cancel: abort all, refuse new */
    /* owned by the loop thread */
    CURLM *multi;             /* one connection cache for every transfer */
    pthread_t thread;
    struct job **active;      /* max_handles slots */
    unsigned nactive;
    uint64_t rate_bps;        /* upload cap for the whole transport (0 = none) */
    int64_t next_ns;          /* virtual time the next upload byte may leave */
    long stall_ms;
    long connect_timeout_ms;
    int no_proxy;
    char *ca_file;            /* from AWS_CA_BUNDLE / SSL_CERT_FILE */
    /* request-body bytes handed to the network (ckpt__http_sent): added by
     * the loop thread's reads, taken back by rewinds and failed transfers */
    atomic_uint_fast64_t sent;
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_OK;

static void global_init(void)
{
    global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void *loop_main(void *arg);

struct ckpt_http *ckpt__http_new(const struct ckpt_http_opts *opts)
{
    struct ckpt_http *h = NULL;
    const char *ca, *stall;

    pthread_once(&global_once, global_init);
    if (global_rc != CURLE_OK)
        goto out;
    h = calloc(1, sizeof(*h));
    if (!h)
        goto out;
    h->max_handles = opts && opts->max_handles ? opts->max_handles : 16;
    h->free_list = calloc(h->max_handles, sizeof(CURL *));
    h->active = calloc(h->max_handles, sizeof(struct job *));
    h->multi = curl_multi_init();
    if (!h->free_list || !h->active || !h->multi)
        goto fail;
    /* Connections: at most one per transfer, and as many kept open between
     * transfers, so every request after the first few reuses one. */
    curl_multi_setopt(h->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)h->max_handles);
    curl_multi_setopt(h->multi, CURLMOPT_MAXCONNECTS, (long)h->max_handles);
    /* One pacer for the whole transport (not curl's per-handle cap), so a
     * single upload may use the whole budget and many uploads share it. */
    h->rate_bps = opts ? opts->max_rate_bps : 0;
    h->stall_ms = DEFAULT_STALL_MS;
    h->connect_timeout_ms = opts && opts->connect_timeout_ms > 0 ? opts->connect_timeout_ms
                                                                 : CONNECT_TIMEOUT_MS;
    h->no_proxy = opts ? opts->no_proxy : 0;
    stall = getenv("CKPT_HTTP_STALL_MS");
    if (stall && atol(stall) > 0)
        h->stall_ms = atol(stall);
    ca = getenv("AWS_CA_BUNDLE");
    if (!ca || !*ca)
        ca = getenv("SSL_CERT_FILE");
    if (ca && *ca)
        h->ca_file = strdup(ca);
    h->queue_tail = &h->queue;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    if (ckpt__thread_start(&h->thread, loop_main, h) != 0) {
        pthread_mutex_destroy(&h->mu);
        pthread_cond_destroy(&h->cv);
        goto fail;
    }
out:
    return h;
fail:
    if (h->multi)
        curl_multi_cleanup(h->multi);
    free(h->free_list);
    free(h->active);
    free(h->ca_file);
    free(h);
    return NULL;
}

void ckpt__http_cancel(struct ckpt_http *h)
{
    if (!h)
        return;
    pthread_mutex_lock(&h->mu);
    h->cancelled = 1;
    pthread_mutex_unlock(&h->mu);
    curl_multi_wakeup(h->multi);
}

void ckpt__http_free(struct ckpt_http *h)
{
    unsigned i;

    if (!h)
        return;
    pthread_mutex_lock(&h->mu);
    h->stopping = 1;
    pthread_mutex_unlock(&h->mu);
    curl_multi_wakeup(h->multi);
    pthread_join(h->thread, NULL);
    curl_multi_cleanup(h->multi); /* every easy handle was removed from it */
    for (i = 0; i < h->nfree; i++)
        curl_easy_cleanup(h->free_list[i]);
    free(h->free_list);
    free(h->active);
    free(h->ca_file);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
    free(h);
}

/* Take an idle easy handle, create one while under the limit, else wait:
 * this bounds the transfers in flight to max_handles. */
static CURL *acquire(struct ckpt_http *h)
{
    CURL *c = NULL;

    pthread_mutex_lock(&h->mu);
    for (;;) {
        if (h->nfree) {
            c = h->free_list[--h->nfree];
            break;
        }
        if (h->ncreated < h->max_handles) {
            c = curl_easy_init();
            if (c)
                h->ncreated++;
            break;
        }
        pthread_cond_wait(&h->cv, &h->mu);
    }
    pthread_mutex_unlock(&h->mu);
    return c;
}

static void release(struct ckpt_http *h, CURL *c)
{
    pthread_mutex_lock(&h->mu);
    h->free_list[h->nfree++] = c;
    pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

/* One request, on its caller's stack: the caller fills it, queues it and
 * sleeps; the loop thread runs it and wakes the caller. */
struct job {
    struct ckpt_http *h;
    struct ckpt_http_resp *resp;
    size_t max_body;
    size_t body_cap;
    const char *up;
    size_t up_len, up_off;
    size_t counted;           /* of the body, counted in h->sent (loop thread) */
    size_t booked;            /* upload bytes booked on the pacer ... */
    int64_t slot_ns;          /* ... to leave at this time */
    int paused;               /* waiting for slot_ns (rate cap) */
    int nomem;
    CURL *easy;
    CURLcode rc;
    /* progress: the loop thread publishes `avail` (under h->mu) once the
     * body reaches `want`, which the caller sets from the callback */
    int watch;                /* the request has a progress callback */
    int body_2xx;             /* -1 unknown, 0 no, 1 yes (at the first byte) */
    size_t want;
    size_t avail;
    int done;                 /* set under h->mu by the loop thread */
    pthread_cond_t cv;
    struct job *next;
};
static size_t on_body(char *p, size_t sz, size_t n, void *u)
{
    struct job *x = u;
    struct ckpt_http_resp *r = x->resp;
    size_t len = sz * n;

    if (r->len + len > x->max_body) {
        r->body_overflow = 1;
        return 0;                 /* aborts with CURLE_WRITE_ERROR */
    }
    if (r->len + len + 1 > x->body_cap) {
        size_t cap = x->body_cap ? x->body_cap : 4096;
        char *nb;
        while (cap < r->len + len + 1)
            cap *= 2;
        if (cap > x->max_body + 1)
            cap = x->max_body + 1;
        nb = realloc(r->body, cap);
        if (!nb) {
            x->nomem = 1;
            return 0;
        }
        r->body = nb;
        x->body_cap = cap;
    }
    memcpy(r->body + r->len, p, len);
    r->len += len;
    r->body[r->len] = '\0';
    if (x->watch) {
        if (x->body_2xx < 0) {
            long code = 0;
            curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
            x->body_2xx = code >= 200 && code < 300;
        }
        pthread_mutex_lock(&x->h->mu);
        if (x->body_2xx && x->want && r->len >= x->want) {
            x->avail = r->len;
            pthread_cond_signal(&x->cv);
        }
        pthread_mutex_unlock(&x->h->mu);
    }
    return len;
}

static size_t on_header(char *p, size_t sz, size_t n, void *u)
{
    struct job *x = u;
    struct ckpt_http_resp *r = x->resp;
    size_t len = sz * n;
    char *nb;

    /* A new status line (after 100 Continue or a proxy's CONNECT reply)
     * starts a new header block: keep only the final reply's headers. */
    if (len >= 5 && strncmp(p, "HTTP/", 5) == 0)
        r->hdrs_len = 0;
    if (r->hdrs_len + len + 1 > HDRS_MAX)
        return 0;
    nb = realloc(r->hdrs, r->hdrs_len + len + 1);
    if (!nb) {
        x->nomem = 1;
        return 0;
    }
    r->hdrs = nb;
    memcpy(r->hdrs + r->hdrs_len, p, len);
    r->hdrs_len += len;
    r->hdrs[r->hdrs_len] = '\0';
    /* Size the body buffer once from Content-Length (when it fits the
     * caller's limit) instead of growing it by doubling. */
    if (len > 15 && strncasecmp(p, "Content-Length:", 15) == 0 && r->len == 0) {
        char *end;
        unsigned long long cl = strtoull(p + 15, &end, 10);
        if (end != p + 15 && cl > 0 && cl <= x->max_body && cl + 1 > x->body_cap) {
            char *bb = realloc(r->body, (size_t)cl + 1);
            if (bb) {
                r->body = bb;
                x->body_cap = (size_t)cl + 1;
            }
        }
    }
    return len;
}

/* Token-bucket pacing shared by all transfers: each piece of an upload
 * books its slot on a virtual clock advancing at rate_bps, and its transfer
 * pauses until then. Up to 100 ms of unused budget may be spent at once (a
 * small burst). Loop thread only. */
static int64_t book(struct ckpt_http *h, size_t n)
{
    const int64_t burst_ns = 100000000;
    int64_t now = (int64_t)ckpt__mono_ns(), slot;

    if (h->next_ns < now - burst_ns)
        h->next_ns = now - burst_ns;
    slot = h->next_ns;
    h->next_ns += (int64_t)((double)n * 1e9 / (double)h->rate_bps);
    return slot;
}

static size_t on_read(char *p, size_t sz, size_t n, void *u)
{
    struct job *x = u;
    size_t want = sz * n, left = x->up_len - x->up_off;

    if (want > left)
        want = left;
    if (x->h->rate_bps && want) {
        /* Small pieces keep the pacing smooth at low rates. */
        if (want > 16384)
            want = 16384;
        if (!x->booked) {
            x->booked = want;
            x->slot_ns = book(x->h, want);
        }
        if (x->slot_ns > (int64_t)ckpt__mono_ns()) {
            x->paused = 1;    /* the loop resumes it at slot_ns */
            return CURL_READFUNC_PAUSE;
        }
        if (want > x->booked)
            want = x->booked;
        x->booked = 0;
    }
    if (want) {
        memcpy(p, x->up + x->up_off, want);
        /* curl writes it to the socket next: these bytes leave now */
        x->counted += want;
        atomic_fetch_add_explicit(&x->h->sent, want, memory_order_relaxed);
    }
    x->up_off += want;
    return want;
}

/* curl may rewind the upload when it retries on a reused connection that
 * the server had closed. */
static int on_seek(void *u, curl_off_t off, int origin)
{
    struct job *x = u;

    if (origin != SEEK_SET || off < 0 || (size_t)off > x->up_len)
        return CURL_SEEKFUNC_FAIL;
    if ((size_t)off < x->counted) { /* the bytes past it go again: not sent yet */
        atomic_fetch_sub_explicit(&x->h->sent, x->counted - (size_t)off,
                                  memory_order_relaxed);
        x->counted = (size_t)off;
    }
    x->up_off = (size_t)off;
    return CURL_SEEKFUNC_OK;
}

/* The loop thread: moves queued jobs into the multi handle, drives every
 * transfer on its connections, resumes paced uploads, and wakes each
 * caller when its transfer ends. Callbacks (body, headers, upload reads)
 * run here and only copy bytes, so one thread keeps many connections busy
 * while the callers' threads do the hashing and compression. */
static void *loop_main(void *arg)
{
    struct ckpt_http *h = arg;
    struct job *x;
    CURLMsg *msg;
    int running = 0, left;

    for (;;) {
        int64_t now, wait_ms = 1000;

        pthread_mutex_lock(&h->mu);
        if (h->cancelled) {
            /* every transfer ends now, as aborted */
            while (h->nactive) {
                x = h->active[--h->nactive];
                curl_multi_remove_handle(h->multi, x->easy);
                x->rc = CURLE_ABORTED_BY_CALLBACK;
                x->done = 1;
                pthread_cond_signal(&x->cv);
            }
        }
        while ((x = h->queue) != NULL) {
            h->queue = x->next;
            if (!h->queue)
                h->queue_tail = &h->queue;
            if (h->cancelled) {
                x->rc = CURLE_ABORTED_BY_CALLBACK;
                x->done = 1;
                pthread_cond_signal(&x->cv);
                continue;
            }
            if (curl_multi_add_handle(h->multi, x->easy) != CURLM_OK) {
                x->rc = CURLE_OUT_OF_MEMORY;
                x->done = 1;
                pthread_cond_signal(&x->cv);
                continue;
            }
            h->active[h->nactive++] = x;
        }
        if (h->stopping && !h->nactive) {
            pthread_mutex_unlock(&h->mu);
            break;
        }
        pthread_mutex_unlock(&h->mu);

        curl_multi_perform(h->multi, &running);
        while ((msg = curl_multi_info_read(h->multi, &left)) != NULL) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
            curl_multi_remove_handle(h->multi, msg->easy_handle);
            for (unsigned i = 0; i < h->nactive; i++)
                if (h->active[i] == x) {
                    h->active[i] = h->active[--h->nactive];
                    break;
                }
            pthread_mutex_lock(&h->mu);
            x->rc = msg->data.result;
            x->done = 1;      /* x belongs to its caller from here on */
            pthread_cond_signal(&x->cv);
            pthread_mutex_unlock(&h->mu);
        }
        /* paced uploads whose slot has come go on; the next slot bounds
         * the wait */
        now = (int64_t)ckpt__mono_ns();
        for (unsigned i = 0; i < h->nactive; i++) {
            x = h->active[i];
            if (!x->paused)
                continue;
            if (x->slot_ns <= now) {
                x->paused = 0;
                curl_easy_pause(x->easy, CURLPAUSE_CONT);
                wait_ms = 0;
            } else if ((x->slot_ns - now) / 1000000 + 1 < wait_ms) {
                wait_ms = (x->slot_ns - now) / 1000000 + 1;
            }
        }
        /* returns early for socket activity, curl's own timers, or
         * curl_multi_wakeup() from a new request or ckpt__http_free() */
        curl_multi_poll(h->multi, NULL, 0, (int)wait_ms, NULL);
    }
    return NULL;
}

static ckpt_status status_of_curl(CURLcode rc)
{
    switch (rc) {
    case CURLE_OK:
        return CKPT_OK;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
        return CKPT_E_UNREACHABLE;
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
        return CKPT_E_CONFIG;
    case CURLE_OUT_OF_MEMORY:
        return CKPT_E_NOMEM;
    default:
        return CKPT_E_TRANSIENT;
    }
}

ckpt_status ckpt__http_do(struct ckpt_http *h, const struct ckpt_http_req *req,
                          struct ckpt_http_resp *resp)
{
    return ckpt__http_do_within(h, req, 0, resp);
}

ckpt_status ckpt__http_do_within(struct ckpt_http *h, const struct ckpt_http_req *req,
                                 long timeout_ms, struct ckpt_http_resp *resp)
{
    ckpt_status st = CKPT_OK;
    struct curl_slist *hl = NULL, *tmp;
    struct job x;
    CURL *c = NULL;
    CURLcode rc;
    size_t i;
    int has_body;

    memset(resp, 0, sizeof(*resp));
    memset(&x, 0, sizeof(x));
    x.h = h;
    x.resp = resp;
    x.max_body = req->max_body ? req->max_body : DEFAULT_BODY_MAX;
    if (req->dst) {
        resp->body = req->dst;
        resp->body_external = 1;
        x.body_cap = x.max_body + 1;
    }
    x.up = req->body;
    x.up_len = req->body_len;

    for (i = 0; i < req->nheaders; i++) {
        tmp = curl_slist_append(hl, req->headers[i]);
        if (!tmp) {
            st = CKPT_E_NOMEM;
            goto out;
        }
        hl = tmp;
    }
    /* No "Expect: 100-continue": some S3-compatible servers mishandle it and
     * it costs a round trip on every PUT; no implicit Content-Type either. */
    tmp = curl_slist_append(hl, "Expect:");
    if (tmp)
        hl = tmp;

    c = acquire(h);
    if (!c) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_PRIVATE, (char *)&x);
    curl_easy_setopt(c, CURLOPT_URL, req->url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
    if (h->ca_file)
        curl_easy_setopt(c, CURLOPT_CAINFO, h->ca_file);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                     timeout_ms > 0 && timeout_ms < h->connect_timeout_ms
                         ? timeout_ms : h->connect_timeout_ms);
    if (timeout_ms > 0) {
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    } else {
        /* Stall detection: under 1 byte/s for the stall time = dead peer. */
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME,
                         (long)((h->stall_ms + 999) / 1000));
    }
    if (h->no_proxy) {
        curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
        curl_easy_setopt(c, CURLOPT_PROXY, "");
    }
    curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
    /* Larger socket reads and writes than libcurl's 16/64 KiB defaults:
     * fewer callbacks and syscalls per chunk-sized body. */
    curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 256L * 1024);
    curl_easy_setopt(c, CURLOPT_UPLOAD_BUFFERSIZE, 256L * 1024);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &x);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, resp->errmsg);

    has_body = strcmp(req->method, "PUT") == 0 || strcmp(req->method, "POST") == 0;
    if (has_body) {
        /* Upload mode for both PUT and POST so a body (or an empty one) is
         * always sent with an exact Content-Length, never chunked. */
        curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)req->body_len);
        curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(c, CURLOPT_READDATA, &x);
        curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, on_seek);
        curl_easy_setopt(c, CURLOPT_SEEKDATA, &x);
        if (strcmp(req->method, "POST") == 0)
            curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "POST");
    } else if (strcmp(req->method, "HEAD") == 0) {
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else if (strcmp(req->method, "GET") == 0) {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    } else {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req->method);
    }

    /* Hand it to the loop thread and sleep until it is done, calling the
     * progress callback (here, on this thread) as the body comes in: the
     * caller works on the first bytes while the rest arrive. */
    x.easy = c;
    x.body_2xx = -1;
    if (req->progress && req->dst) {
        x.watch = 1;
        x.want = req->progress(req->progress_arg, 0);
    }
    pthread_cond_init(&x.cv, NULL);
    pthread_mutex_lock(&h->mu);
    *h->queue_tail = &x;
    h->queue_tail = &x.next;
    pthread_mutex_unlock(&h->mu);
    curl_multi_wakeup(h->multi);
    pthread_mutex_lock(&h->mu);
    for (;;) {
        /* Ended: the bytes that came are all there will be. Those the
         * callback has not seen yet (the last ones often arrive with the
         * end, while it works on the ones before) are still its to take:
         * left to the caller's pass after the transfer, a chunk streamed
         * but for its last piece was hashed and written twice (on loopback
         * half of a restore's chunks). */
        if (x.done && x.watch && x.body_2xx > 0)
            x.avail = resp->len;
        if (x.done && !(x.want && x.avail >= x.want))
            break;
        if (x.want && x.avail >= x.want) {
            size_t have = x.avail;
            pthread_mutex_unlock(&h->mu);
            /* bytes [0, have) of dst stay as they are until the transfer
             * ends: the loop thread only appends */
            size_t next = req->progress(req->progress_arg, have);
            pthread_mutex_lock(&h->mu);
            x.want = next > have ? next : 0;
            continue;
        }
        pthread_cond_wait(&x.cv, &h->mu);
    }
    pthread_mutex_unlock(&h->mu);
    pthread_cond_destroy(&x.cv);

    rc = x.rc;
    resp->curl_code = (int)rc;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->status);
    if (x.nomem) {
        st = CKPT_E_NOMEM;
    } else if (rc == CURLE_WRITE_ERROR && resp->body_overflow) {
        /* The reply arrived, it is just larger than the caller accepts. */
        st = CKPT_OK;
    } else if (rc != CURLE_OK) {
        /* A cut-off reply is not a reply: the status alone proves nothing. */
        resp->status = 0;
        st = status_of_curl(rc);
        if (!resp->errmsg[0])
            snprintf(resp->errmsg, sizeof(resp->errmsg), "%s",
                     curl_easy_strerror(rc));
    }
    /* A body that got no 2xx reply was not taken: its retry sends it again
     * (or nothing will), so it leaves the count of bytes sent. */
    if (x.counted && (st != CKPT_OK || resp->status < 200 || resp->status >= 300))
        atomic_fetch_sub_explicit(&h->sent, x.counted, memory_order_relaxed);
    /* the detail a retry notice names ("Failed to connect to ...: Connection
     * refused"); cleared by a transfer that got its reply */
    ckpt__retry_note_transport(resp->status ? "" : resp->errmsg);
    release(h, c);
out:
    curl_slist_free_all(hl);
    return st;
}

uint64_t ckpt__http_sent(const struct ckpt_http *h)
{
    return h ? (uint64_t)atomic_load_explicit(&h->sent, memory_order_relaxed) : 0;
}

void ckpt__http_resp_free(struct ckpt_http_resp *resp)
{
    if (!resp)
        return;
    if (!resp->body_external)
        free(resp->body);
    resp->body_external = 0;
    free(resp->hdrs);
    resp->body = resp->hdrs = NULL;
    resp->len = resp->hdrs_len = 0;
}

int ckpt__http_header(const struct ckpt_http_resp *resp, const char *name, char *out, size_t outlen)
{
    const char *p, *eol, *v, *e;
    size_t nlen = strlen(name), vlen;
    int found = 0;

    if (!resp->hdrs || !outlen)
        goto out;
    for (p = resp->hdrs; *p; p = eol + (*eol ? 1 : 0)) {
        eol = strchr(p, '\n');
        if (!eol)
            eol = p + strlen(p);
        if ((size_t)(eol - p) > nlen && strncasecmp(p, name, nlen) == 0 &&
            p[nlen] == ':') {
            v = p + nlen + 1;
            while (v < eol && (*v == ' ' || *v == '\t'))
                v++;
            e = eol;
            while (e > v && (e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
                e--;
            vlen = (size_t)(e - v);
            if (vlen + 1 > outlen)
                goto out;
            memcpy(out, v, vlen);
            out[vlen] = '\0';
            found = 1;
            goto out;
        }
        if (!*eol)
            break;
    }
out:
    return found;
}

ckpt_status ckpt__http_resp_take_body(struct ckpt_http_resp *resp, void **buf_out, size_t *len_out)
{
    if (resp->body_external) { /* the caller's own buffer: copy it out */
        void *c = malloc(resp->len + 1);
        if (!c)
            return CKPT_E_NOMEM;
        memcpy(c, resp->body, resp->len + 1);
        resp->body = c;
        resp->body_external = 0;
    }
    if (!resp->body) {
        resp->body = malloc(1);
        if (!resp->body)
            return CKPT_E_NOMEM;
        resp->body[0] = '\0';
        resp->len = 0;
    }
    *buf_out = resp->body;
    *len_out = resp->len;
    resp->body = NULL;
    return CKPT_OK;
}

const char *ckpt__http_reason(int curl_code)
{
    return curl_easy_strerror((CURLcode)curl_code);
}

int ckpt__http_cleartext_remote(const char *endpoint)
{
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL;
    int remote = 0;

    char url[512];

    if (!u || !endpoint || strncasecmp(endpoint, "http://", 7) != 0)
        goto out;
    /* a store's endpoint may carry a note after a space: "(region x)" */
    snprintf(url, sizeof url, "%.*s", (int)strcspn(endpoint, " "), endpoint);
    if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
        remote = 1; /* cannot tell: say so rather than stay quiet */
        goto out;
    }
    if (strcasecmp(scheme, "http") != 0)
        goto out;
    {
        /* curl gives IPv6 hosts in brackets */
        char h[256];
        struct in_addr a4;
        struct in6_addr a6;
        size_t n = strlen(host);
        if (n >= 2 && host[0] == '[' && host[n - 1] == ']')
            snprintf(h, sizeof h, "%.*s", (int)(n - 2), host + 1);
        else
            snprintf(h, sizeof h, "%s", host);
        n = strlen(h);
        if (strcasecmp(h, "localhost") == 0 ||
            (n > 10 && strcasecmp(h + n - 10, ".localhost") == 0))
            goto out; /* RFC 6761: always loopback */
        if (inet_pton(AF_INET, h, &a4) == 1) {
            remote = (ntohl(a4.s_addr) >> 24) != 127;
            goto out;
        }
        if (inet_pton(AF_INET6, h, &a6) == 1) {
            remote = !IN6_IS_ADDR_LOOPBACK(&a6);
            goto out;
        }
        remote = 1; /* a name: it may resolve anywhere */
    }
out:
    curl_free(scheme);
    curl_free(host);
    curl_url_cleanup(u);
    return remote;
}

int ckpt__http_cleartext_first(void)
{
    static atomic_int warned;
    return atomic_exchange(&warned, 1) == 0;
}

int64_t ckpt__http_date(const char *s)
{
    time_t t;

    if (!s || !*s)
        return -1;
    t = curl_getdate(s, NULL);
    return t == (time_t)-1 ? -1 : (int64_t)t;
}
