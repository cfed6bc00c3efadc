/*
 * objstore.c -- the object-store core (see objstore.h): opening the common
 * part of a handle and one request through its attempts. The operations
 * built on it are in objops.c.
 */
#include "objstore.h"
#include "backend.h"
#include "digest.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024u * 1024u)
#define ERRBODY_MAX (256 * 1024)
#define SKEW_403_S 600   /* a 403 with the clock this far off is the clock */

void ckpt__obj_log(const struct ckpt_obj *o, ckpt_log_level lvl, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    if (!o->log_fn || lvl < o->log_level)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    o->log_fn(o->log_user, lvl, "store", msg);
}

/* ---- header lines ---------------------------------------------------------- */

void ckpt__obj_line(struct ckpt_obj_lines *l, const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    int n;

    if (l->oom)
        return;
    if (l->n == CKPT_OBJ_LINES_MAX) {
        l->oom = 1;
        return;
    }
    va_start(ap, fmt);
    n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0) {
        l->oom = 1;
        return;
    }
    l->v[l->n++] = s;
}

void ckpt__obj_lines_clear(struct ckpt_obj_lines *l)
{
    for (size_t i = 0; i < l->n; i++)
        ckpt__wipe_free(l->v[i]);
    l->n = 0;
    l->oom = 0;
}

int ckpt__obj_split(const char *line, char *name, size_t n, const char **value)
{
    const char *colon = strchr(line, ':');
    size_t klen = colon ? (size_t)(colon - line) : 0;

    if (klen >= n)
        return 0;
    memcpy(name, line, klen);
    name[klen] = '\0';
    *value = colon ? colon + 1 : "";
    while (**value == ' ')
        (*value)++;
    return 1;
}

/* ---- open and close ---------------------------------------------------------- */

/* The prefix is stored with its trailing '/'; as a key it has none. */
static int prefix_valid(const char *prefix)
{
    size_t n = strlen(prefix);
    char *k;
    int ok;

    if (!n)
        return 1;
    k = strndup(prefix, n - 1);
    ok = k && ckpt_key_valid(k);
    free(k);
    return ok;
}

ckpt_status ckpt__obj_open(struct ckpt_obj *o, const struct ckpt_store_ops *ops,
                           const struct ckpt_obj_dialect *d, const char *tag, const char *url,
                           const char *noun, const struct ckpt_store_config *cfg, char *err)
{
    const char *rest = strstr(url, "://"), *slash, *v;
    size_t n;

    pthread_mutex_init(&o->mu, NULL);
    ckpt__throttle_init(&o->thr);
    ckpt__retry_policy_init_budget(&o->pol, cfg ? cfg->retry_budget_ms : 0);
    o->d = d;
    o->tag = tag;
    o->base.ops = ops;
    o->base.caps.flags = CKPT_STORE_RANGES | CKPT_STORE_PACKS | CKPT_STORE_LATENCY_BOUND;
    o->base.caps.chunk_bytes = CKPT_OBJ_CHUNK_BYTES;
    if (cfg) {
        o->log_fn = cfg->log_fn;
        o->log_user = cfg->log_user;
        o->log_level = cfg->log_level;
    }
    o->base.url = strdup(url);
    rest = rest ? rest + 3 : url;
    slash = strchr(rest, '/');
    o->container = slash ? strndup(rest, (size_t)(slash - rest)) : strdup(rest);
    v = slash ? slash + 1 : "";
    n = strlen(v);
    while (n && v[n - 1] == '/')
        n--;
    if (n) {
        if (asprintf(&o->prefix, "%.*s/", (int)n, v) < 0)
            o->prefix = NULL;
    } else {
        o->prefix = strdup("");
    }
    if (!o->base.url || !o->container || !o->prefix)
        return CKPT_E_NOMEM;
    if (!*o->container || strpbrk(o->container, "?#@:") || !prefix_valid(o->prefix)) {
        ckpt__seterr(err, "bad %s or prefix in %s", noun, url);
        return CKPT_E_CONFIG;
    }
    return CKPT_OK;
}

void ckpt__obj_parts_config(struct ckpt_obj *o, const char *size_env, size_t size_floor,
                            const char *min_env)
{
    const char *v = getenv(size_env);

    o->part_size = 8 * MIB;
    if (v && strtoull(v, NULL, 10) >= size_floor)
        o->part_size = (size_t)strtoull(v, NULL, 10);
    o->part_min = 64 * MIB;
    v = getenv(min_env);
    if (v && strtoull(v, NULL, 10) > 0)
        o->part_min = (size_t)strtoull(v, NULL, 10);
    if (o->part_min < o->part_size)
        o->part_min = o->part_size;
}

ckpt_status ckpt__obj_endpoint(struct ckpt_obj *o, const char *url, char *err)
{
    const char *p = strstr(url, "://"), *slash;
    size_t n;

    if (!p) {
        ckpt__seterr(err, "endpoint URL without scheme: %s", url);
        return CKPT_E_CONFIG;
    }
    o->ep_scheme = strndup(url, (size_t)(p - url));
    p += 3;
    slash = strchr(p, '/');
    o->ep_host = slash ? strndup(p, (size_t)(slash - p)) : strdup(p);
    o->ep_path = strdup(slash ? slash : "");
    if (!o->ep_scheme || !o->ep_host || !o->ep_path)
        return CKPT_E_NOMEM;
    n = strlen(o->ep_path);
    while (n && o->ep_path[n - 1] == '/')
        o->ep_path[--n] = '\0';
    return CKPT_OK;
}

ckpt_status ckpt__obj_start(struct ckpt_obj *o, const struct ckpt_store_config *cfg)
{
    struct ckpt_http_opts ho;

    memset(&ho, 0, sizeof(ho));
    ho.max_handles = cfg && cfg->connections ? cfg->connections : 16;
    ho.max_rate_bps = cfg ? cfg->max_rate_bps : 0;
    o->http = ckpt__http_new(&ho);
    return o->http ? CKPT_OK : CKPT_E_NOMEM;
}

void ckpt__obj_close(struct ckpt_store *st)
{
    struct ckpt_obj *o = (struct ckpt_obj *)st;

    if (!o)
        return;
    if (o->d && o->d->close)
        o->d->close(o);
    ckpt__http_free(o->http);
    ckpt__throttle_destroy(&o->thr);
    pthread_mutex_destroy(&o->mu);
    free(o->base.url);
    free(o->container);
    free(o->prefix);
    free(o->ep_scheme);
    free(o->ep_host);
    free(o->ep_path);
    free(o);
}

void ckpt__obj_etag(const struct ckpt_obj *o, const struct ckpt_http_resp *resp, char *out)
{
    if (!out)
        return;
    out[0] = '\0';
    if (o->d->etag_header && ckpt__http_header(resp, o->d->etag_header, out, CKPT_ETAG_MAX))
        return;
    ckpt__http_header(resp, "ETag", out, CKPT_ETAG_MAX);
}

/* ---- one request ---------------------------------------------------------- */

/* A skewed clock: S3 says RequestTimeTooSkewed (classified CKPT_RETRY_SKEW),
 * Azure a 403 AuthenticationFailed; the reply's Date tells by how much.
 * The offset is kept for every later request of the store. */
static void correct_clock(struct ckpt_obj *o, const struct ckpt_http_resp *resp,
                          ckpt_retry_kind *kind)
{
    char date[256];
    int64_t off;

    if (*kind != CKPT_RETRY_SKEW && !(o->d->skew_on_403 && resp->status == 403))
        return;
    if (!ckpt__http_header(resp, "Date", date, sizeof(date)) ||
        !ckpt__retry_skew_from_date(date, &off))
        return;
    if (*kind != CKPT_RETRY_SKEW && off <= SKEW_403_S && off >= -SKEW_403_S)
        return;
    pthread_mutex_lock(&o->mu);
    o->skew_s = off;
    pthread_mutex_unlock(&o->mu);
    *kind = CKPT_RETRY_SKEW;
    ckpt__obj_log(o, CKPT_LOG_WARN, "%s: clock skew %lld s corrected", o->tag, (long long)off);
}

ckpt_status ckpt__obj_call(struct ckpt_obj *o, const struct ckpt_obj_rq *rq,
                           struct ckpt_http_resp *resp, char *err)
{
    const struct ckpt_obj_dialect *d = o->d;
    ckpt_status st;
    struct ckpt__obj_call c;
    struct ckpt_obj_lines h;
    struct ckpt_retry r;
    ckpt_retry_kind kind;
    char code[128], *url = NULL;

    memset(resp, 0, sizeof(*resp));
    memset(&c, 0, sizeof(c));
    memset(&h, 0, sizeof(h));
    c.rq = rq;
    st = d->prepare(o, &c);
    if (st != CKPT_OK)
        goto out;
    ckpt__retry_begin(&r, &o->pol, &o->thr);
    for (;;) {
        ckpt__throttle_wait(&o->thr);
        free(url);
        url = NULL;
        ckpt__obj_lines_clear(&h);
        st = d->build(o, &c, &url, &h, err);
        if (st != CKPT_OK)
            goto out;
        {
            struct ckpt_http_req hr = {
                rq->method, url, (const char *const *)h.v, h.n, rq->body, rq->len,
                rq->max_body ? rq->max_body : ERRBODY_MAX, rq->dst,
                rq->watch ? rq->watch->fn : NULL, rq->watch ? rq->watch->arg : NULL
            };
            ckpt__http_resp_free(resp);
            st = ckpt__http_do(o->http, &hr, resp);
        }
        ckpt__obj_lines_clear(&h); /* the signature does not outlive its request */
        if (st == CKPT_E_NOMEM)
            goto out;
        code[0] = '\0';
        d->reply(o, &c, resp, code, sizeof(code));
        if (d->redirect && d->redirect(o, &c, resp))
            continue;
        st = ckpt__retry_classify(resp->status, resp->curl_code, code[0] ? code : NULL, &kind);
        /* A body cut at max_body is the caller's business (too large), not
         * a damaged transfer: never retried, never checked. */
        if (st == CKPT_OK && rq->digest_check && resp->status == 200 &&
            !resp->body_overflow &&
            d->holds(resp, resp->body ? resp->body : "", resp->len) == 0) {
            st = CKPT_E_CORRUPT;
            kind = CKPT_RETRY_AGAIN;
            snprintf(code, sizeof(code), "BodyMD5Mismatch");
        }
        if (st == CKPT_OK) {
            ckpt__throttle_note(&o->thr, 0);
            break;
        }
        correct_clock(o, resp, &kind);
        if (resp->status)
            ckpt__seterr(err, "%s %s %s/%s: HTTP %ld %s", o->tag, rq->method, o->container,
                         rq->key ? rq->key : "", resp->status, code);
        else
            ckpt__seterr(err, "%s %s %s/%s: %s", o->tag, rq->method, o->container,
                         rq->key ? rq->key : "", resp->errmsg);
        if (rq->ambiguous && kind != CKPT_RETRY_NEVER &&
            (resp->status == 0 || resp->status >= 500))
            *rq->ambiguous = 1;
        if (!ckpt__retry_again(&r, kind))
            break;
        ckpt__obj_log(o, CKPT_LOG_DEBUG, "%s (attempt %u, retrying)", err ? err : o->tag,
                      r.attempt);
    }
out:
    ckpt__obj_lines_clear(&h);
    free(url);
    free(c.path);
    free(c.path_enc);
    return st;
}
