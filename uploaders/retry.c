/*
 * retry.c -- failure classification and backoff for the object stores.
 * The table of what is retried lives here and only here (see retry.h).
 */
#include "retry.h"
#include "retryctl.h"

#include <curl/curl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define THROTTLE_MAX_MS 5000L
#define THROTTLE_START_MS 100L
#define FAST_ATTEMPTS 3         /* before any store answered: CKPT_RETRY_FAST_ATTEMPTS */
#define FAST_MS 3000L           /* ... within this long: CKPT_RETRY_FAST_MS */
#define FAST_CAP_MS 1000L       /* ... with backoff sleeps of at most this */

/* The last classification on this thread, for the retry notice. */
static _Thread_local struct {
    long http;
    int curl;
    char code[64];
    char transport[256];
} t_last;

void ckpt__retry_note_transport(const char *errmsg)
{
    snprintf(t_last.transport, sizeof t_last.transport, "%s", errmsg ? errmsg : "");
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

void ckpt__retry_policy_init(struct ckpt_retry_policy *p)
{
    p->base_ms = env_long("CKPT_RETRY_BASE_MS", 200, 0);
    p->cap_ms = env_long("CKPT_RETRY_CAP_MS", 20000, 0);
    p->budget_ms = env_long("CKPT_RETRY_BUDGET_MS", 120000, 0);
    p->max_attempts = (unsigned)env_long("CKPT_RETRY_ATTEMPTS", 12, 1);
    /* SPEC: at least 6 attempts per request, unless a test asks for fewer. */
    p->min_attempts = p->max_attempts < 6 ? p->max_attempts : 6;
}

void ckpt__retry_policy_init_budget(struct ckpt_retry_policy *p, uint64_t budget_ms)
{
    ckpt__retry_policy_init(p);
    if (budget_ms)
        p->budget_ms = budget_ms > LONG_MAX ? LONG_MAX : (long)budget_ms;
}

static int code_is(const char *code, const char *want)
{
    return code && strcmp(code, want) == 0;
}

ckpt_status ckpt__retry_classify(long http_status, int curl_code, const char *code,
                                 ckpt_retry_kind *kind)
{
    ckpt_status st;

    *kind = CKPT_RETRY_NEVER;
    t_last.http = http_status;
    t_last.curl = curl_code;
    snprintf(t_last.code, sizeof t_last.code, "%s", code ? code : "");
    if (http_status != 0)
        ckpt__retry_mark_answered(); /* the endpoint is right: it replied */
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
             * reported as unreachable when the budget runs out; briefly
             * while no store has answered yet (retry.h, failing fast). */
            st = CKPT_E_UNREACHABLE;
            *kind = CKPT_RETRY_CONNECT;
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

void ckpt__throttle_init(struct ckpt_throttle *t)
{
    pthread_mutex_init(&t->mu, NULL);
    t->delay_ms = 0;
}

void ckpt__throttle_destroy(struct ckpt_throttle *t)
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

void ckpt__throttle_wait(struct ckpt_throttle *t)
{
    long d;

    pthread_mutex_lock(&t->mu);
    d = t->delay_ms;
    pthread_mutex_unlock(&t->mu);
    sleep_ms(d);
}

void ckpt__throttle_note(struct ckpt_throttle *t, int throttled)
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

void ckpt__retry_begin(struct ckpt_retry *r, const struct ckpt_retry_policy *p,
                       struct ckpt_throttle *t)
{
    struct timespec ts;

    r->p = p;
    r->t = t;
    r->attempt = 0;
    r->start_ms = ckpt__mono_ms();
    clock_gettime(CLOCK_REALTIME, &ts);
    /* Per-request seed so that threads do not back off in lock step. */
    r->seed = (unsigned)ts.tv_nsec ^ (unsigned)(uintptr_t)r ^ (unsigned)getpid();
}

/* Why the last attempt on this thread failed, for the retry notice. */
static void reason(char *out, size_t n)
{
    if (t_last.http)
        snprintf(out, n, "HTTP %ld%s%s", t_last.http, t_last.code[0] ? " " : "", t_last.code);
    else if (t_last.transport[0])
        snprintf(out, n, "%s", t_last.transport);
    else
        snprintf(out, n, "%s", curl_easy_strerror((CURLcode)t_last.curl));
}

int ckpt__retry_again(struct ckpt_retry *r, ckpt_retry_kind kind)
{
    long ceiling, sleep, cap = r->p->cap_ms, budget = r->p->budget_ms;
    unsigned max = r->p->max_attempts, min = r->p->min_attempts;
    int64_t elapsed, deadline = ckpt__retry_deadline();
    ckpt_retry_observer obs;
    unsigned shift;
    int again = 0, fast = 0;

    r->attempt++;
    if (kind == CKPT_RETRY_NEVER)
        goto out;
    if (r->t)
        ckpt__throttle_note(r->t, kind == CKPT_RETRY_THROTTLE);
    if (kind == CKPT_RETRY_CONNECT && !ckpt__retry_answered()) {
        /* Nothing has ever answered: most likely a wrong endpoint or a store
         * that is not running. Say so in seconds (retry.h). */
        const char *v = getenv("CKPT_RETRY_FAST_MS"), *a = getenv("CKPT_RETRY_FAST_ATTEMPTS");
        long fast_ms = v && *v && atol(v) >= 0 ? atol(v) : FAST_MS;
        long fast_n = a && *a && atol(a) >= 1 ? atol(a) : FAST_ATTEMPTS;
        fast = 1;
        max = min = (unsigned)fast_n < max ? (unsigned)fast_n : max;
        budget = fast_ms;
        cap = cap < FAST_CAP_MS ? cap : FAST_CAP_MS;
    }
    if (r->attempt >= max)
        goto out;
    elapsed = ckpt__mono_ms() - r->start_ms;
    if (deadline && ckpt__mono_ms() >= deadline)
        goto out; /* a stop's deadline: no new attempt after it */
    if (kind == CKPT_RETRY_SKEW) {
        /* The caller corrected its clock from the reply: retry at once
         * (still bounded by max_attempts above). */
        again = 1;
        goto out;
    }
    if ((r->attempt >= min || fast) && elapsed >= budget)
        goto out;
    shift = r->attempt - 1 > 20 ? 20 : r->attempt - 1;
    ceiling = r->p->base_ms << shift;
    if (kind == CKPT_RETRY_THROTTLE)
        ceiling *= 4;              /* throttling: back off harder */
    if (ceiling > cap || ceiling < 0)
        ceiling = cap;
    sleep = ceiling > 0 ? (long)(rand_r(&r->seed) % (ceiling + 1)) : 0;
    if (deadline && ckpt__mono_ms() + sleep >= deadline)
        goto out; /* the next attempt would start after the deadline */
    if ((obs = ckpt__retry_observer()) != NULL) {
        char why[300];
        struct ckpt_retry_notice n = { r->attempt + 1, max, sleep, why };
        reason(why, sizeof why);
        obs(&n);
    }
    sleep_ms(sleep);
    again = 1;
out:
    return again;
}

int ckpt__retry_skew_from_date(const char *date_hdr, int64_t *offset_s)
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
