/*
 * http.h -- the libcurl transport shared by the S3 and Azure backends.
 *
 * A `ckpt_http` owns one curl multi handle, driven by a thread of its own:
 * ckpt_http_do() (thread-safe) hands its request to that thread and sleeps
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
 */
#ifndef CKPT_HTTP_H
#define CKPT_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include "ckpt.h"

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
    int curl_code;            /* CURLcode of the transfer (0 = CURLE_OK) */
    int body_overflow;        /* 1: the body exceeded max_body (transfer cut) */
    char *body;               /* malloc'd (or req->dst), NUL-terminated (may be NULL) */
    int body_external;        /* body is req->dst: not freed here */
    size_t len;
    char *hdrs;               /* raw header block of the final reply */
    size_t hdrs_len;
    char errmsg[256];         /* curl's message when curl_code != 0 */
};

/* @return a new transport, or NULL on allocation failure. Call once per store
 * at open time (curl_global_init is done here, once per process). */
struct ckpt_http *ckpt_http_new(const struct ckpt_http_opts *opts);
/* NULL-safe; no transfer may be in flight. */
void ckpt_http_free(struct ckpt_http *h);
/* Abort every transfer in flight and refuse those that follow: each ends
 * at once with CKPT_E_TRANSIENT (resp->curl_code: aborted). Thread-safe;
 * for a transport whose owner is shutting down (its threads then return
 * from ckpt_http_do and can be joined before ckpt_http_free). */
void ckpt_http_cancel(struct ckpt_http *h);

/* Run one transfer. `resp` is zeroed first and must be released with
 * ckpt_http_resp_free() whatever the result.
 * @return CKPT_OK when an HTTP reply arrived (any status: check resp->status),
 *         CKPT_E_TRANSIENT / CKPT_E_UNREACHABLE / CKPT_E_CONFIG when it did
 *         not (resp->curl_code says why), CKPT_E_NOMEM. The caller classifies
 *         with ckpt_retry_classify() either way. */
ckpt_status ckpt_http_do(struct ckpt_http *h, const struct ckpt_http_req *req,
                         struct ckpt_http_resp *resp);
/* ckpt_http_do within `timeout_ms` for the whole transfer (connecting
 * included), in place of the stall detection: for requests that may send
 * nothing for a while (a metadata long poll). 0: as ckpt_http_do. */
ckpt_status ckpt_http_do_within(struct ckpt_http *h, const struct ckpt_http_req *req,
                                long timeout_ms, struct ckpt_http_resp *resp);
void ckpt_http_resp_free(struct ckpt_http_resp *resp);
/* Hand the body to the caller (malloc'd, NUL-terminated; an empty body is
 * "", never NULL) and clear it from resp. @return CKPT_OK or CKPT_E_NOMEM. */
ckpt_status ckpt_http_resp_take_body(struct ckpt_http_resp *resp, void **buf_out,
                                     size_t *len_out);

/* libcurl's fixed text for a transfer's curl_code ("Couldn't connect to
 * server"): unlike resp->errmsg, the same for the same failure, so a caller
 * that logs a condition once can tell a new one from a repeat. */
const char *ckpt_http_reason(int curl_code);

/* 1 when `endpoint` is a plain http:// URL whose host is not loopback
 * (127.0.0.0/8, ::1, localhost): requests, session tokens and signatures
 * would cross a network in clear. Loopback emulators (MinIO, Azurite, mocks)
 * stay quiet. */
int ckpt_http_cleartext_remote(const char *endpoint);
/* 1 the first time it is called in this process, then 0: the cleartext
 * warning is said once, however many stores a process opens. */
int ckpt_http_cleartext_first(void);

/* Copy the value of response header `name` (case-insensitive, first one,
 * trimmed) into out. @return 1 if found (and it fit), else 0. */
int ckpt_http_header(const struct ckpt_http_resp *resp, const char *name,
                     char *out, size_t outlen);

#endif
