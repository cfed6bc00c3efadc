/*
 * retry.h -- the one place where object-store failures are classified and
 * retried (docs/stores.md, "Retries").
 *
 * Classification (ckpt__retry_classify) turns an HTTP reply (status, the
 * service's error code from the XML body or x-ms-error-code) or a transport
 * failure (CURLcode) into a ckpt_status and a retry kind:
 *   retry:    500, 502, 503 ServiceUnavailable, 504, 400 RequestTimeout,
 *             409 ConditionalRequestConflict / OperationAborted, connection
 *             resets, timeouts, truncated replies
 *   connect:  connection refused, host or proxy not resolved (retry, but see
 *             "Failing fast" below)
 *   throttle: 503 SlowDown, 429, Azure ServerBusy (retry, and slow the whole
 *             client: see struct ckpt_throttle)
 *   skew:     403 RequestTimeTooSkewed (caller corrects its clock from the
 *             reply's Date header, then retries)
 *   never:    every other 4xx, TLS verification failures, malformed URLs
 * Mapping: 401/403 -> CKPT_E_AUTH, 404 -> CKPT_E_NOENT (NoSuchBucket /
 * ContainerNotFound -> CKPT_E_CONFIG), 412 and Azure 409 BlobAlreadyExists ->
 * CKPT_E_PRECONDITION, connect failures -> CKPT_E_UNREACHABLE, other 400 ->
 * CKPT_E_CONFIG, 5xx/resets -> CKPT_E_TRANSIENT, throttling ->
 * CKPT_E_THROTTLED.
 *
 * Backoff: exponential with full jitter, sleep = random(0, min(cap, base*2^n)),
 * at least `min_attempts` attempts and then as long as the time budget lasts
 * (so a bad minute is ridden out), never more than `max_attempts`.
 * Defaults: base 200 ms, cap 20 s, 6..12 attempts, budget 120 s. Tests shorten
 * them with CKPT_RETRY_BASE_MS, CKPT_RETRY_CAP_MS, CKPT_RETRY_BUDGET_MS and
 * CKPT_RETRY_ATTEMPTS (read once per store open).
 *
 * Failing fast. Until some store has answered this process once (any HTTP
 * reply, even an error status), a `connect` failure is most likely a wrong
 * endpoint or a store that is not running: it gets at most
 * CKPT_RETRY_FAST_ATTEMPTS (3) attempts within CKPT_RETRY_FAST_MS (3 s), so
 * `ckptrun ls` on a closed port says "unreachable" in about a second, not
 * after two minutes. Once a store has answered, connect failures, resets and
 * DNS errors get the whole budget above: a store restarting during the
 * final save of a preemption must not turn it into a lost checkpoint.
 * Deadline. ckpt_retry_set_deadline() bounds every retry of the process
 * (a stop's deadline): no backoff sleeps past it and no attempt starts after
 * it, so a failing store cannot hold a stop beyond its end. It and the retry
 * observer are public (ckpt_store.h); the rest of this header is private to
 * the store backends.
 */
#ifndef CKPT_RETRY_H
#define CKPT_RETRY_H

#include <pthread.h>
#include <stdint.h>
#include "ckpt_common.h"
#include "ckpt_store.h"

typedef enum {
    CKPT_RETRY_NEVER = 0,
    CKPT_RETRY_AGAIN,
    CKPT_RETRY_THROTTLE,
    CKPT_RETRY_SKEW,
    CKPT_RETRY_CONNECT        /* no connection: refused, unresolvable */
} ckpt_retry_kind;

struct ckpt_retry_policy {
    unsigned min_attempts;
    unsigned max_attempts;
    long base_ms;
    long cap_ms;
    long budget_ms;
};

/* Defaults overridden by the CKPT_RETRY_* environment variables. */
void ckpt__retry_policy_init(struct ckpt_retry_policy *p);
/* The same, with a time budget of `budget_ms` when it is not 0 (a store's
 * configured retry_budget_ms, ahead of CKPT_RETRY_BUDGET_MS). */
void ckpt__retry_policy_init_budget(struct ckpt_retry_policy *p, uint64_t budget_ms);

/* Classify one attempt. `http_status` 0 means no reply arrived and
 * `curl_code` says why; `code` is the service error code or NULL. */
ckpt_status ckpt__retry_classify(long http_status, int curl_code, const char *code,
                                 ckpt_retry_kind *kind);

/* Client-wide throttle shared by every request of one store: each SlowDown
 * doubles a delay that every request waits before it is sent (up to 5 s);
 * each success shrinks it again. Thread-safe. */
struct ckpt_throttle {
    pthread_mutex_t mu;
    long delay_ms;
};
void ckpt__throttle_init(struct ckpt_throttle *t);
void ckpt__throttle_destroy(struct ckpt_throttle *t);
void ckpt__throttle_wait(struct ckpt_throttle *t);
void ckpt__throttle_note(struct ckpt_throttle *t, int throttled);

/* One request's retry state. */
struct ckpt_retry {
    const struct ckpt_retry_policy *p;
    struct ckpt_throttle *t;
    unsigned attempt;        /* attempts made so far */
    int64_t start_ms;
    unsigned seed;
};
void ckpt__retry_begin(struct ckpt_retry *r, const struct ckpt_retry_policy *p,
                       struct ckpt_throttle *t);
/* After a failed attempt of `kind`: sleeps the backoff and @return 1 when the
 * caller should try again, 0 when it must give up (never-retry kind,
 * attempts or budget exhausted). */
int ckpt__retry_again(struct ckpt_retry *r, ckpt_retry_kind kind);

/* The transport's detail of the failure being classified on this thread
 * (curl's error text), for the retry notice; http.c calls it. */
void ckpt__retry_note_transport(const char *errmsg);

/* Clock skew: seconds to add to the local clock so that it matches the
 * server's, from an HTTP Date header. @return 1 if parsed. */
int ckpt__retry_skew_from_date(const char *date_hdr, int64_t *offset_s);

#endif
