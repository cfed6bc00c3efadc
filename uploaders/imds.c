/*
 * imds.c -- the process-wide AWS EC2 instance-metadata client (ckpt_http.h).
 *
 * Why one client per base URL: the S3 credential chain and the spot-notice
 * poller both talk to IMDS, and IMDSv2 wants one session token reused for its
 * whole TTL rather than a PUT before every GET. Clients live in a small list
 * guarded by `reg_mu` and are never freed (callers may hold them until exit).
 *
 * Locking: `m->mu` guards the token and the v1-fallback state only. A token
 * PUT happens with `m->mu` held so concurrent callers wait for one PUT rather
 * than each making their own; the GETs themselves run without the lock.
 *
 * Facts (SPEC.md A, AWS): PUT /latest/api/token with
 * X-aws-ec2-metadata-token-ttl-seconds (1..21600); the token goes into
 * X-aws-ec2-metadata-token; 401 means missing/expired token; fall back to
 * IMDSv1 only when the PUT answers 403, 404 or 405.
 */
#include "ckpt_http.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ckpt_common.h"
#include "ckpt_http.h"

#define IMDS_DEFAULT_BASE "http://169.254.169.254"
#define IMDS_BASE_MAX 256
#define IMDS_TOKEN_MAX 1024      /* real tokens are ~56 bytes; bound hostile ones */
#define IMDS_TTL_DEFAULT_S 21600 /* the maximum IMDS accepts */
#define IMDS_RENEW_MARGIN_MS 60000
#define IMDS_V1_RECHECK_MS 300000 /* re-try v2 now and then after a fallback */
#define IMDS_ERR_MAX 512          /* CKPT_ERR_MAX in ckpt_store.h */

struct ckpt_imds {
    struct ckpt_imds *next;      /* registry link, immutable after insert */
    char base[IMDS_BASE_MAX];    /* immutable */
    long ttl_s;                  /* immutable */
    struct ckpt_http *http;      /* its transport: never through a proxy */
    pthread_mutex_t mu;          /* guards the fields below */
    char token[IMDS_TOKEN_MAX];  /* "" when none */
    int64_t token_renew_ms;      /* monotonic time after which we renew */
    int v1;                      /* 1: PUT answered 403/404/405, use IMDSv1 */
    int64_t v1_until_ms;         /* monotonic time to probe v2 again */
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ckpt_imds *reg_head;

static int env_true(const char *name)
{
    const char *v = getenv(name);
    return v && strcasecmp(v, "true") == 0;
}

struct ckpt_imds *ckpt__imds_shared(const char *base_url)
{
    /* Metadata addresses never go through a proxy (DESIGN.md 3); a few
     * requests at a time are all a poller and a credential refresh make. */
    static const struct ckpt_http_opts hopts = { .max_handles = 4, .no_proxy = 1 };
    struct ckpt_imds *m = NULL;
    const char *base = base_url;
    char norm[IMDS_BASE_MAX];
    size_t n;

    if (env_true("AWS_EC2_METADATA_DISABLED"))
        return NULL;
    if (!base || !*base)
        base = getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT");
    if (!base || !*base)
        base = IMDS_DEFAULT_BASE;
    n = strlen(base);
    while (n > 0 && base[n - 1] == '/')
        n--; /* paths are appended with their own leading '/' */
    if (n == 0 || n >= sizeof norm)
        return NULL;
    memcpy(norm, base, n);
    norm[n] = '\0';

    pthread_mutex_lock(&reg_mu);
    for (m = reg_head; m; m = m->next)
        if (strcmp(m->base, norm) == 0)
            goto out;
    m = calloc(1, sizeof *m);
    if (!m)
        goto out;
    m->http = ckpt__http_new(&hopts);
    if (!m->http) {
        free(m);
        m = NULL;
        goto out;
    }
    memcpy(m->base, norm, n + 1);
    m->ttl_s = IMDS_TTL_DEFAULT_S;
    {
        /* Test hook: a short TTL exercises renewal against a mock. */
        const char *t = getenv("CKPT_IMDS_TOKEN_TTL_S");
        long v = t ? strtol(t, NULL, 10) : 0;
        if (v >= 1 && v <= IMDS_TTL_DEFAULT_S)
            m->ttl_s = v;
    }
    pthread_mutex_init(&m->mu, NULL);
    m->next = reg_head;
    reg_head = m;
out:
    pthread_mutex_unlock(&reg_mu);
    return m;
}

/* ---- one HTTP exchange ---------------------------------------------------- */

/* One request on the client's transport, within timeout_ms for the whole
 * exchange. `put` selects the token PUT (empty body). On a reply, *body
 * (malloc'd, NUL-terminated, at most max_len bytes) and *http_status. */
static ckpt_status exchange(struct ckpt_imds *m, const char *url, int put,
                            const char *header, long timeout_ms, size_t max_len, char **body,
                            size_t *len, long *http_status, char *err)
{
    const char *hdrs[1] = { header };
    struct ckpt_http_req req = { .method = put ? "PUT" : "GET", .url = url,
                                 .headers = hdrs, .nheaders = header ? 1 : 0,
                                 .max_body = max_len };
    struct ckpt_http_resp resp;
    ckpt_status st;

    *body = NULL;
    *len = 0;
    st = ckpt__http_do_within(m->http, &req, timeout_ms > 0 ? timeout_ms : 1000L, &resp);
    if (st == CKPT_OK && resp.body_overflow) {
        st = CKPT_E_CORRUPT;
        ckpt__errf(err, IMDS_ERR_MAX, "imds: reply body over %zu bytes", max_len);
    } else if (st == CKPT_E_NOMEM) {
        ckpt__errf(err, IMDS_ERR_MAX, "imds: out of memory");
    } else if (st != CKPT_OK) {
        st = CKPT_E_UNREACHABLE;
        ckpt__errf(err, IMDS_ERR_MAX, "imds: %s",
                   resp.errmsg[0] ? resp.errmsg : ckpt__http_reason(resp.curl_code));
    } else {
        *http_status = resp.status;
        st = ckpt__http_resp_take_body(&resp, (void **)body, len);
        if (st)
            ckpt__errf(err, IMDS_ERR_MAX, "imds: out of memory");
    }
    ckpt__http_resp_free(&resp);
    return st;
}

/* Makes sure m has a usable token or is in v1 mode. Called with m->mu held.
 * @return CKPT_OK, or the failure of the PUT (the GET is not attempted). */
static ckpt_status ensure_token(struct ckpt_imds *m, long timeout_ms, char *err)
{
    ckpt_status st = CKPT_OK;
    char url[IMDS_BASE_MAX + 32], ttl[64], *body = NULL;
    long code = 0;
    int64_t now = ckpt__mono_ms();
    size_t n = 0;

    if (m->v1 && now < m->v1_until_ms)
        goto out;
    if (m->token[0] && now < m->token_renew_ms)
        goto out;

    snprintf(url, sizeof url, "%s/latest/api/token", m->base);
    snprintf(ttl, sizeof ttl, "X-aws-ec2-metadata-token-ttl-seconds: %ld", m->ttl_s);
    /* The transport sends no Expect: 100-continue: IMDS wants a bare PUT. */
    st = exchange(m, url, 1, ttl, timeout_ms, IMDS_TOKEN_MAX - 1, &body, &n, &code, err);
    if (st != CKPT_OK)
        goto out;
    if (code == 403 || code == 404 || code == 405) {
        /* IMDSv2 not offered here (or forbidden): the documented fallback. */
        m->v1 = 1;
        m->v1_until_ms = now + IMDS_V1_RECHECK_MS;
        m->token[0] = '\0';
        goto out;
    }
    if (code != 200) {
        st = code >= 500 ? CKPT_E_TRANSIENT : CKPT_E_AUTH;
        ckpt__errf(err, IMDS_ERR_MAX, "imds: token PUT answered HTTP %ld", code);
        goto out;
    }
    while (n > 0 && (body[n - 1] == '\n' || body[n - 1] == '\r' || body[n - 1] == ' '))
        n--;
    if (n == 0 || memchr(body, '\n', n) || memchr(body, '\r', n)) {
        /* A token is sent back as a header: refuse anything that would
         * break or inject header lines. */
        st = CKPT_E_CORRUPT;
        ckpt__errf(err, IMDS_ERR_MAX, "imds: token PUT returned an unusable token");
        goto out;
    }
    memcpy(m->token, body, n);
    m->token[n] = '\0';
    m->v1 = 0;
    {
        int64_t ttl_ms = (int64_t)m->ttl_s * 1000;
        int64_t margin = ttl_ms > 2 * IMDS_RENEW_MARGIN_MS ? IMDS_RENEW_MARGIN_MS : ttl_ms / 2;
        m->token_renew_ms = now + ttl_ms - margin;
    }
out:
    free(body);
    return st;
}

ckpt_status ckpt__imds_get(struct ckpt_imds *m, const char *path, long timeout_ms, size_t max_len,
                           char **body, size_t *len, long *http_status, char *err)
{
    ckpt_status st = CKPT_OK;
    char url[IMDS_BASE_MAX + 1024];
    char hdr[IMDS_TOKEN_MAX + 64];
    char *got = NULL;
    size_t got_len = 0;
    long code = 0;

    if (!m || !path || path[0] != '/' || !body || !http_status ||
        strlen(path) >= 1024) {
        ckpt__errf(err, IMDS_ERR_MAX, "imds: bad argument");
        return CKPT_E_INVAL;
    }
    *body = NULL;
    if (len)
        *len = 0;
    snprintf(url, sizeof url, "%s%s", m->base, path);

    /* Two attempts: the second only after a 401 made us drop the token. */
    for (int attempt = 0; attempt < 2; attempt++) {
        char used[IMDS_TOKEN_MAX];
        pthread_mutex_lock(&m->mu);
        st = ensure_token(m, timeout_ms, err);
        snprintf(used, sizeof used, "%s", m->token);
        pthread_mutex_unlock(&m->mu);
        if (st != CKPT_OK)
            goto out;
        if (used[0])
            snprintf(hdr, sizeof hdr, "X-aws-ec2-metadata-token: %s", used);
        free(got);
        got = NULL;
        code = 0;
        st = exchange(m, url, 0, used[0] ? hdr : NULL, timeout_ms, max_len, &got, &got_len,
                      &code, err);
        if (st != CKPT_OK)
            goto out;
        if (code != 401)
            break;
        /* Expired or revoked token (or tokens now required after a v1
         * fallback): drop it unless another thread already replaced it. */
        pthread_mutex_lock(&m->mu);
        if (strcmp(m->token, used) == 0) {
            m->token[0] = '\0';
            m->v1 = 0;
        }
        pthread_mutex_unlock(&m->mu);
    }
    *http_status = code;
    *body = got; /* the transport hands an empty body as "", never NULL */
    if (len)
        *len = got_len;
    got = NULL;
out:
    free(got);
    return st;
}
