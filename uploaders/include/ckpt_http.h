/*
 * ckpt_http.h -- the HTTP transport of the object stores, shared by the S3
 * and Azure backends and by anything else of ckpt that talks HTTP (the cloud
 * notice poller). Built on libcurl; no libcurl type appears here.
 *
 * Internal, not public API: this header is not installed and its symbols
 * are not exported from libckpt.so (ckpt__ names). Its one client outside
 * the stores is ckptrun, built in this tree against libckpt.a; a program
 * outside it that needs HTTP has libcurl itself, and a stable contract for
 * this transport's policy (TLS, proxies, stall time, rate cap) would tie
 * the stores' hands for no user. It sits alone in uploaders/include/, the
 * one folder of the stores that ckptrun may include (until 0.4.0 it was
 * installed, with ckpt_ names).
 *
 * A `ckpt_http` owns one curl multi handle, driven by a thread of its own:
 * ckpt__http_do() (thread-safe) hands its request to that thread and sleeps
 * until the reply is in. Every transfer shares the multi handle's connection
 * cache, so requests after the first few reuse open (TLS) connections. At
 * most `max_handles` transfers run at once (a caller beyond that waits for
 * one to end), and as many connections are open or kept. The thread's
 * callbacks only copy bytes: hashing, compression and decoding stay on the
 * callers' threads.
 *
 * Policy fixed here (not per request):
 *  - TLS peer and host verification always on; the CA bundle comes from
 *    AWS_CA_BUNDLE, else SSL_CERT_FILE, else curl's built-in default.
 *  - Proxies: curl's own handling of HTTPS_PROXY/HTTP_PROXY/NO_PROXY.
 *  - Connect timeout 10 s; a transfer that moves no byte for the stall time
 *    (30 s, CKPT_HTTP_STALL_MS) is aborted as a timeout, so a hung peer never
 *    blocks a worker for ever while a slow-but-moving big upload is fine.
 *  - Upload rate cap: `max_rate_bps` for the whole transport, paced by one
 *    token bucket that every upload draws from (a transfer ahead of its
 *    slot is paused, not its thread put to sleep).
 *  - Response bodies are bounded by the request's `max_body`; response
 *    headers by 64 KiB.
 *  - No redirects are followed (S3 region discovery reads the 301 itself).
 *
 * Thread safety: ckpt__http_new and ckpt__http_free are not concurrent with
 * other uses of the same transport; ckpt__http_do may be called from any
 * number of threads at once. The response functions touch only the response
 * given and are safe on distinct responses.
 *
 * Ownership: a request and everything it points to are the caller's and are
 * only read during ckpt__http_do (its `dst` buffer is written). A response is
 * filled by ckpt__http_do and owned by the caller, who releases it with
 * ckpt__http_resp_free.
 */
#ifndef CKPT_HTTP_H
#define CKPT_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include "ckpt.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ckpt_http;

struct ckpt_http_opts {
    unsigned max_handles;     /* transfers at once = max connections (0 = 16) */
    uint64_t max_rate_bps;    /* upload cap for the whole transport (0 = none) */
    long connect_timeout_ms;  /* 0 = 10 s */
    int no_proxy;             /* never through a proxy (instance metadata) */
};

struct ckpt_http_req {
    const char *method;       /* "GET", "PUT", "POST", "DELETE", "HEAD" */
    const char *url;          /* fully encoded URL */
    const char *const *headers; /* "Name: value" lines, `nheaders` of them */
    size_t nheaders;
    const void *body;         /* request body for PUT/POST (may be NULL) */
    size_t body_len;
    size_t max_body;          /* largest response body accepted (0 = 1 MiB) */
    void *dst;                /* optional: the body goes here (max_body + 1
                                 bytes), not into a malloc'd buffer: a caller
                                 reusing one buffer pays no page faults */
    /* optional, with dst: called on the caller's thread while a 2xx body
     * arrives, with the bytes of dst in place (0 first); returns the count
     * at which to call it next (0: no more). */
    size_t (*progress)(void *arg, size_t have);
    void *progress_arg;
};

struct ckpt_http_resp {
    long status;              /* HTTP status of the final reply; 0 = none */
    int curl_code;            /* libcurl's CURLcode of the transfer (0 = OK) */
    int body_overflow;        /* 1: the body exceeded max_body (transfer cut) */
    char *body;               /* malloc'd (or req->dst), NUL-terminated (may be NULL) */
    int body_external;        /* body is req->dst: not freed here */
    size_t len;
    char *hdrs;               /* raw header block of the final reply */
    size_t hdrs_len;
    char errmsg[256];         /* the transport's message when curl_code != 0 */
};

/* A new transport with its own connection cache and loop thread (signals
 * blocked). `opts` may be NULL (the defaults). Call once per user (a store,
 * a poller) at open time: libcurl's global initialisation is done here, once
 * per process. @return the transport (free it with ckpt__http_free), or NULL
 * when memory, libcurl or the thread could not be had. */
struct ckpt_http *ckpt__http_new(const struct ckpt_http_opts *opts);
/* Stop the loop thread and release the transport (NULL-safe). No transfer
 * may be in flight. */
void ckpt__http_free(struct ckpt_http *h);
/* Abort every transfer in flight and refuse those that follow: each ends
 * at once with CKPT_E_TRANSIENT (resp->curl_code: aborted). Thread-safe;
 * for a transport whose owner is shutting down (its threads then return
 * from ckpt__http_do and can be joined before ckpt__http_free). */
void ckpt__http_cancel(struct ckpt_http *h);

/* Run one transfer, sleeping until it ends (calling req->progress on this
 * thread meanwhile). No retries: one request, one attempt. `resp` is zeroed
 * first and must be released with ckpt__http_resp_free() whatever the result.
 * Thread-safe.
 * @return CKPT_OK when an HTTP reply arrived (any status: check resp->status),
 *         CKPT_E_TRANSIENT / CKPT_E_UNREACHABLE / CKPT_E_CONFIG when it did
 *         not (resp->curl_code and resp->errmsg say why), CKPT_E_NOMEM.
 *         Whether to try again is the caller's decision (the object stores
 *         make it in one place, their retry policy). */
ckpt_status ckpt__http_do(struct ckpt_http *h, const struct ckpt_http_req *req,
                          struct ckpt_http_resp *resp);
/* ckpt__http_do within `timeout_ms` for the whole transfer (connecting
 * included), in place of the stall detection: for requests that may send
 * nothing for a while (a metadata long poll). 0: as ckpt__http_do. Same
 * results, thread safety and ownership as ckpt__http_do. */
ckpt_status ckpt__http_do_within(struct ckpt_http *h, const struct ckpt_http_req *req,
                                 long timeout_ms, struct ckpt_http_resp *resp);
/* Request-body bytes this transport has sent, for a progress display:
 * counted as libcurl takes each piece of a body to write it to its socket
 * (bytes then in the kernel's buffer, not yet at the peer, count: on a
 * slow link the count leads what arrived by that buffer, up to a few MiB),
 * across every transfer of the transport. A rewind takes back the bytes it
 * sends again, and a transfer that ends without a 2xx reply takes back all
 * of its body (a retry sends it again), so the count can go down.
 * Thread-safe (an atomic load); 0 for NULL. Since 0.4.0. */
uint64_t ckpt__http_sent(const struct ckpt_http *h);
/* Release what ckpt__http_do put into resp (NULL-safe; a body in req->dst
 * is left alone); resp may then be reused. */
void ckpt__http_resp_free(struct ckpt_http_resp *resp);
/* Hand the body to the caller (malloc'd, NUL-terminated; an empty body is
 * "", never NULL) and clear it from resp. @return CKPT_OK or CKPT_E_NOMEM. */
ckpt_status ckpt__http_resp_take_body(struct ckpt_http_resp *resp, void **buf_out, size_t *len_out);

/* libcurl's fixed text for a transfer's curl_code ("Couldn't connect to
 * server"): unlike resp->errmsg, the same for the same failure, so a caller
 * that logs a condition once can tell a new one from a repeat. */
const char *ckpt__http_reason(int curl_code);

/* 1 when `endpoint` is a plain http:// URL whose host is not loopback
 * (127.0.0.0/8, ::1, localhost): requests, session tokens and signatures
 * would cross a network in clear. Loopback emulators (MinIO, Azurite, mocks)
 * stay quiet. */
int ckpt__http_cleartext_remote(const char *endpoint);
/* 1 the first time it is called in this process, then 0: the cleartext
 * warning is said once, however many stores a process opens. Thread-safe
 * (atomic). */
int ckpt__http_cleartext_first(void);

/* Copy the value of response header `name` (case-insensitive, first one,
 * trimmed) into out (`outlen` bytes). @return 1 if found (and it fit),
 * else 0. */
int ckpt__http_header(const struct ckpt_http_resp *resp, const char *name, char *out,
                      size_t outlen);

/* An HTTP date ("Sun, 06 Nov 1994 08:49:37 GMT", RFC 1123, and the older
 * forms HTTP allows) as Unix seconds. Thread-safe.
 * @return the time, or -1 when `s` is NULL or not a date. */
int64_t ckpt__http_date(const char *s);

/* ---- AWS instance metadata (IMDSv2) ------------------------------------
 * One client per process and base URL, on a transport of its own that
 * never goes through a proxy: the S3 credential chain (instance-role
 * credentials) and the spot-notice poller share it. The session token is
 * fetched once (PUT /latest/api/token, TTL 21600 s) and renewed before it
 * expires or on a 401; it falls back to IMDSv1 only when the token PUT
 * answers 403, 404 or 405. Thread-safe. */
struct ckpt_imds;

/* The process-wide client for `base_url` ("http://169.254.169.254" when NULL,
 * or AWS_EC2_METADATA_SERVICE_ENDPOINT when set). Never freed before exit.
 * NULL when AWS_EC2_METADATA_DISABLED=true. */
struct ckpt_imds *ckpt__imds_shared(const char *base_url);

/* GET `path` (e.g. "/latest/meta-data/spot/instance-action") with the token.
 * On a reply, *http_status is set and the body (NUL-terminated, at most
 * max_len bytes, else CKPT_E_CORRUPT) is returned malloc'd in *body.
 * `err` (CKPT_ERR_MAX bytes, or NULL) gets the detail of a failure.
 * A 401 drops the token and retries once with a fresh one.
 * @return CKPT_OK for any HTTP reply to the GET (check *http_status),
 *         CKPT_E_UNREACHABLE on connect failure / timeout,
 *         CKPT_E_TRANSIENT / CKPT_E_AUTH when the token PUT answers 5xx / a
 *         4xx other than 403-405 (the GET is then not sent),
 *         CKPT_E_CORRUPT body over max_len, CKPT_E_INVAL, CKPT_E_NOMEM. */
ckpt_status ckpt__imds_get(struct ckpt_imds *m, const char *path, long timeout_ms, size_t max_len,
                           char **body, size_t *len, long *http_status, char *err);

#ifdef __cplusplus
}
#endif

#endif
