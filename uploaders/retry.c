/*
 * retry.c -- failure classification and backoff for the object stores.
 * The table of what is retried lives here and only here (see retry.h).
 */
#include "retry.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define THROTTLE_MAX_MS 5000L
#define THROTTLE_START_MS 100L

int64_t ckpt_mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static long env_long(const char *name, long def, long lo)
{
    const char *v = getenv(name);
    char *end;
    long x;

    if (!v || !*v)
        return def;
    x = strtol(v, &end, 10);
    if (*end || x < lo)
        return def;
    return x;
}

void ckpt_retry_policy_init(struct ckpt_retry_policy *p)
{
    p->base_ms = env_long("CKPT_RETRY_BASE_MS", 200, 0);
    p->cap_ms = env_long("CKPT_RETRY_CAP_MS", 20000, 0);
    p->budget_ms = env_long("CKPT_RETRY_BUDGET_MS", 120000, 0);
    p->max_attempts = (unsigned)env_long("CKPT_RETRY_ATTEMPTS", 12, 1);
    /* SPEC: at least 6 attempts per request, unless a test asks for fewer. */
    p->min_attempts = p->max_attempts < 6 ? p->max_attempts : 6;
}

static int code_is(const char *code, const char *want)
{
    return code && strcmp(code, want) == 0;
}

ckpt_status ckpt_retry_classify(long http_status, int curl_code,
                                const char *code, ckpt_retry_kind *kind)
{
    ckpt_status st;

    *kind = CKPT_RETRY_NEVER;
    if (http_status == 0) {
        switch ((CURLcode)curl_code) {
        case CURLE_OK:
            st = CKPT_E_TRANSIENT;     /* no status at all: treat as a reset */
            *kind = CKPT_RETRY_AGAIN;
            break;
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_RESOLVE_PROXY:
        case CURLE_COULDNT_CONNECT:
            /* Retried (a restarting endpoint or a flapping network), but
             * reported as unreachable when the budget runs out. */
            st = CKPT_E_UNREACHABLE;
            *kind = CKPT_RETRY_AGAIN;
            break;
        case CURLE_URL_MALFORMAT:
        case CURLE_UNSUPPORTED_PROTOCOL:
        case CURLE_SSL_CACERT_BADFILE:
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CERTPROBLEM:
            st = CKPT_E_CONFIG;
            break;
        case CURLE_OUT_OF_MEMORY:
            st = CKPT_E_NOMEM;
            break;
        default:
            /* Resets, timeouts, stalls, truncated replies, TLS hiccups. */
            st = CKPT_E_TRANSIENT;
            *kind = CKPT_RETRY_AGAIN;
            break;
        }
        goto out;
    }
    if (http_status < 300) {
        st = CKPT_OK;
        goto out;
    }
    switch (http_status) {
    case 400:
        if (code_is(code, "RequestTimeout")) {
            st = CKPT_E_TRANSIENT;
            *kind = CKPT_RETRY_AGAIN;
        } else {
            st = CKPT_E_CONFIG;
        }
        break;
    case 401:
        st = CKPT_E_AUTH;
        break;
    case 403:
        if (code_is(code, "RequestTimeTooSkewed")) {
            st = CKPT_E_AUTH;
            *kind = CKPT_RETRY_SKEW;
        } else {
            st = CKPT_E_AUTH;
        }
        break;
    case 404:
        st = code_is(code, "NoSuchBucket") || code_is(code, "ContainerNotFound")
                 ? CKPT_E_CONFIG : CKPT_E_NOENT;
        break;
    case 409:
        if (code_is(code, "ConditionalRequestConflict") ||
            code_is(code, "OperationAborted")) {
            st = CKPT_E_TRANSIENT;
            *kind = CKPT_RETRY_AGAIN;
        } else {
            /* Azure answers an If-None-Match:* create of an existing blob
             * with 409 BlobAlreadyExists; other conflicts (leases, a blob
             * type mismatch) are refusals too. */
            st = CKPT_E_PRECONDITION;
        }
        break;
    case 412:
        st = CKPT_E_PRECONDITION;
        break;
    case 429:
        st = CKPT_E_THROTTLED;
        *kind = CKPT_RETRY_THROTTLE;
        break;
    case 503:
        if (code_is(code, "SlowDown") || code_is(code, "ServerBusy")) {
            st = CKPT_E_THROTTLED;
            *kind = CKPT_RETRY_THROTTLE;
        } else {
            st = CKPT_E_TRANSIENT;
            *kind = CKPT_RETRY_AGAIN;
        }
        break;
    case 507:
        st = CKPT_E_NOSPACE;
        break;
    default:
        if (http_status >= 500) {
            st = CKPT_E_TRANSIENT;
            *kind = CKPT_RETRY_AGAIN;
        } else if (http_status >= 300 && http_status < 400) {
            /* Redirects the backend did not resolve (wrong region). */
            st = CKPT_E_CONFIG;
        } else {
            st = CKPT_E_CONFIG;
        }
        break;
    }
out:
    return st;
}

void ckpt_throttle_init(struct ckpt_throttle *t)
{
    pthread_mutex_init(&t->mu, NULL);
    t->delay_ms = 0;
}

void ckpt_throttle_destroy(struct ckpt_throttle *t)
{
    pthread_mutex_destroy(&t->mu);
}

static void sleep_ms(long ms)
{
    struct timespec ts;

    if (ms <= 0)
        return;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) != 0)
        ;
}

void ckpt_throttle_wait(struct ckpt_throttle *t)
{
    long d;

    pthread_mutex_lock(&t->mu);
    d = t->delay_ms;
    pthread_mutex_unlock(&t->mu);
    sleep_ms(d);
}

void ckpt_throttle_note(struct ckpt_throttle *t, int throttled)
{
    pthread_mutex_lock(&t->mu);
    if (throttled)
        t->delay_ms = t->delay_ms ? t->delay_ms * 2 : THROTTLE_START_MS;
    else
        t->delay_ms /= 2;     /* recover gradually once requests succeed */
    if (t->delay_ms > THROTTLE_MAX_MS)
        t->delay_ms = THROTTLE_MAX_MS;
    if (t->delay_ms < 10 && !throttled)
        t->delay_ms = 0;
    pthread_mutex_unlock(&t->mu);
}

void ckpt_retry_begin(struct ckpt_retry *r, const struct ckpt_retry_policy *p,
                      struct ckpt_throttle *t)
{
    struct timespec ts;

    r->p = p;
    r->t = t;
    r->attempt = 0;
    r->start_ms = ckpt_mono_ms();
    clock_gettime(CLOCK_REALTIME, &ts);
    /* Per-request seed so that threads do not back off in lock step. */
    r->seed = (unsigned)ts.tv_nsec ^ (unsigned)(uintptr_t)r ^ (unsigned)getpid();
}

int ckpt_retry_again(struct ckpt_retry *r, ckpt_retry_kind kind)
{
    long ceiling, sleep;
    int64_t elapsed;
    unsigned shift;
    int again = 0;

    r->attempt++;
    if (kind == CKPT_RETRY_NEVER)
        goto out;
    if (r->t)
        ckpt_throttle_note(r->t, kind == CKPT_RETRY_THROTTLE);
    if (r->attempt >= r->p->max_attempts)
        goto out;
    if (kind == CKPT_RETRY_SKEW) {
        /* The caller corrected its clock from the reply: retry at once
         * (still bounded by max_attempts above). */
        again = 1;
        goto out;
    }
    elapsed = ckpt_mono_ms() - r->start_ms;
    if (r->attempt >= r->p->min_attempts && elapsed >= r->p->budget_ms)
        goto out;
    shift = r->attempt - 1 > 20 ? 20 : r->attempt - 1;
    ceiling = r->p->base_ms << shift;
    if (kind == CKPT_RETRY_THROTTLE)
        ceiling *= 4;              /* throttling: back off harder */
    if (ceiling > r->p->cap_ms || ceiling < 0)
        ceiling = r->p->cap_ms;
    sleep = ceiling > 0 ? (long)(rand_r(&r->seed) % (ceiling + 1)) : 0;
    sleep_ms(sleep);
    again = 1;
out:
    return again;
}

int ckpt_retry_skew_from_date(const char *date_hdr, int64_t *offset_s)
{
    time_t server;
    int ok = 0;

    if (!date_hdr || !*date_hdr)
        goto out;
    server = curl_getdate(date_hdr, NULL);
    if (server == (time_t)-1)
        goto out;
    *offset_s = (int64_t)server - (int64_t)time(NULL);
    ok = 1;
out:
    return ok;
}
