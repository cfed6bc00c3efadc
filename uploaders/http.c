/*
 * http.c -- libcurl transport with a bounded pool of reusable easy handles.
 * See http.h for the policy.
 */
#include "http.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define HDRS_MAX (64 * 1024)
#define DEFAULT_BODY_MAX (1024 * 1024)
#define CONNECT_TIMEOUT_MS 10000L
#define DEFAULT_STALL_MS 30000L

struct ckpt_http {
    pthread_mutex_t mu;       /* guards free_list/nfree/ncreated */
    pthread_cond_t cv;
    CURL **free_list;         /* idle handles, each with its connection cache */
    unsigned nfree;
    unsigned ncreated;
    unsigned max_handles;
    uint64_t rate_bps;        /* upload cap for the whole pool (0 = none) */
    pthread_mutex_t rate_mu;  /* guards next_ns */
    int64_t next_ns;          /* virtual time the next upload byte may leave */
    long stall_ms;
    char *ca_file;            /* from AWS_CA_BUNDLE / SSL_CERT_FILE */
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_OK;

static void global_init(void)
{
    global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

struct ckpt_http *ckpt_http_new(const struct ckpt_http_opts *opts)
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
    if (!h->free_list) {
        free(h);
        h = NULL;
        goto out;
    }
    /* One pacer for the whole pool (not curl's per-handle cap), so a single
     * upload may use the whole budget and many uploads share it. */
    h->rate_bps = opts ? opts->max_rate_bps : 0;
    pthread_mutex_init(&h->rate_mu, NULL);
    h->stall_ms = DEFAULT_STALL_MS;
    stall = getenv("CKPT_HTTP_STALL_MS");
    if (stall && atol(stall) > 0)
        h->stall_ms = atol(stall);
    ca = getenv("AWS_CA_BUNDLE");
    if (!ca || !*ca)
        ca = getenv("SSL_CERT_FILE");
    if (ca && *ca)
        h->ca_file = strdup(ca);
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
out:
    return h;
}

void ckpt_http_free(struct ckpt_http *h)
{
    unsigned i;

    if (!h)
        return;
    for (i = 0; i < h->nfree; i++)
        curl_easy_cleanup(h->free_list[i]);
    free(h->free_list);
    free(h->ca_file);
    pthread_mutex_destroy(&h->mu);
    pthread_mutex_destroy(&h->rate_mu);
    pthread_cond_destroy(&h->cv);
    free(h);
}

/* Take an idle handle, create one while under the limit, else wait. */
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

static void release(struct ckpt_http *h, CURL *c, int broken)
{
    pthread_mutex_lock(&h->mu);
    if (broken) {
        /* A handle whose transfer failed may hold a half-dead connection:
         * drop it so the next request starts clean. */
        curl_easy_cleanup(c);
        h->ncreated--;
    } else {
        h->free_list[h->nfree++] = c;
    }
    pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

struct xfer {
    struct ckpt_http *h;
    struct ckpt_http_resp *resp;
    size_t max_body;
    size_t body_cap;
    const char *up;
    size_t up_len, up_off;
    int nomem;
};

static size_t on_body(char *p, size_t sz, size_t n, void *u)
{
    struct xfer *x = u;
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
    return len;
}

static size_t on_header(char *p, size_t sz, size_t n, void *u)
{
    struct xfer *x = u;
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

static int64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Token-bucket pacing shared by all handles: each chunk books its slot on a
 * virtual clock advancing at rate_bps and waits for it. Up to 100 ms of
 * unused budget may be spent at once (a small burst). */
static void pace(struct ckpt_http *h, size_t n)
{
    const int64_t burst_ns = 100000000;
    int64_t now, slot;

    pthread_mutex_lock(&h->rate_mu);
    now = mono_ns();
    if (h->next_ns < now - burst_ns)
        h->next_ns = now - burst_ns;
    slot = h->next_ns;
    h->next_ns += (int64_t)((double)n * 1e9 / (double)h->rate_bps);
    pthread_mutex_unlock(&h->rate_mu);
    if (slot > now) {
        struct timespec ts = { (time_t)((slot - now) / 1000000000),
                               (long)((slot - now) % 1000000000) };
        while (nanosleep(&ts, &ts) != 0)
            ;
    }
}

static size_t on_read(char *p, size_t sz, size_t n, void *u)
{
    struct xfer *x = u;
    size_t want = sz * n, left = x->up_len - x->up_off;

    if (want > left)
        want = left;
    if (x->h->rate_bps) {
        /* Small chunks keep the pacing smooth at low rates. */
        if (want > 16384)
            want = 16384;
        if (want)
            pace(x->h, want);
    }
    if (want)
        memcpy(p, x->up + x->up_off, want);
    x->up_off += want;
    return want;
}

/* curl may rewind the upload when it retries on a reused connection that
 * the server had closed. */
static int on_seek(void *u, curl_off_t off, int origin)
{
    struct xfer *x = u;

    if (origin != SEEK_SET || off < 0 || (size_t)off > x->up_len)
        return CURL_SEEKFUNC_FAIL;
    x->up_off = (size_t)off;
    return CURL_SEEKFUNC_OK;
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

ckpt_status ckpt_http_do(struct ckpt_http *h, const struct ckpt_http_req *req,
                         struct ckpt_http_resp *resp)
{
    ckpt_status st = CKPT_OK;
    struct curl_slist *hl = NULL, *tmp;
    struct xfer x;
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
    curl_easy_setopt(c, CURLOPT_URL, req->url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
    if (h->ca_file)
        curl_easy_setopt(c, CURLOPT_CAINFO, h->ca_file);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
    /* Stall detection: under 1 byte/s for the stall time = dead peer. */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME,
                     (long)((h->stall_ms + 999) / 1000));
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

    rc = curl_easy_perform(c);
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
    release(h, c, rc != CURLE_OK);
out:
    curl_slist_free_all(hl);
    return st;
}

void ckpt_http_resp_free(struct ckpt_http_resp *resp)
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

int ckpt_http_header(const struct ckpt_http_resp *resp, const char *name,
                     char *out, size_t outlen)
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

ckpt_status ckpt_http_resp_take_body(struct ckpt_http_resp *resp, void **buf_out,
                                     size_t *len_out)
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
