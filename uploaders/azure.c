/*
 * azure.c -- the Azure Blob store (az://container/prefix).
 *
 * Credentials, first match wins: AZURE_STORAGE_CONNECTION_STRING
 * (AccountName, AccountKey or SharedAccessSignature, BlobEndpoint or
 * DefaultEndpointsProtocol/EndpointSuffix), then AZURE_STORAGE_ACCOUNT with
 * AZURE_STORAGE_KEY (SharedKey) or AZURE_STORAGE_SAS_TOKEN (SAS).
 * Put Blob for objects up to the block threshold (64 MiB, CKPT_AZ_BLOCK_MIN),
 * else Put Block (8 MiB, CKPT_AZ_BLOCK_SIZE) + Put Block List; every body
 * carries Content-MD5 and the blob's own MD5 is recorded, so GET replies are
 * checked against it. Deletes go one by one (Blob Batch is not worth its
 * multipart/mixed format here). Azure enforces If-None-Match / If-Match.
 */
#include "store.h"
#include "azure.h"
#include "http.h"
#include "retry.h"
#include "sigv4.h"
#include "xml.h"

#include <ctype.h>
#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define MIB (1024u * 1024u)
#define ERRBODY_MAX (256 * 1024)
#define LIST_BODY_MAX (32 * MIB)
#define AZ_VERSION "2021-08-06"

struct az {
    struct ckpt_store base;
    char *account;
    char *key_b64;           /* SharedKey, or NULL */
    char *sas;               /* SAS query (no '?'), or NULL */
    char *ep_scheme, *ep_host, *ep_path;  /* ep_path: "" or "/devstoreaccount1" */
    char *container;
    char *prefix;            /* "" or "p/" */
    size_t block_size, block_min;
    unsigned list_max;
    ckpt_log_fn log_fn;
    void *log_user;
    ckpt_log_level log_level;
    struct ckpt_http *http;
    struct ckpt_retry_policy pol;
    struct ckpt_throttle thr;
    pthread_mutex_t mu;      /* guards skew_s */
    int64_t skew_s;
};

static void seterr(char *err, const char *fmt, ...)
{
    va_list ap;

    if (!err)
        return;
    va_start(ap, fmt);
    vsnprintf(err, CKPT_ERR_MAX, fmt, ap);
    va_end(ap);
}

static void alog(struct az *a, ckpt_log_level lvl, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    if (!a->log_fn || lvl < a->log_level)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    a->log_fn(a->log_user, lvl, "store", msg);
}

/* ---- SharedKey ------------------------------------------------------------ */

struct sb {
    char *p;
    size_t len, cap;
    int oom;
};

static void sb_put(struct sb *b, const char *s)
{
    if (!b->oom && ckpt_xml_raw_append(&b->p, &b->len, &b->cap, s))
        b->oom = 1;
}

static const char *hget(const struct ckpt_az_header *h, size_t nh, const char *name)
{
    size_t i;

    for (i = 0; i < nh; i++)
        if (strcasecmp(h[i].name, name) == 0)
            return h[i].value;
    return NULL;
}

struct kv {
    char *k, *v;
};

static int kvcmp(const void *x, const void *y)
{
    return strcmp(((const struct kv *)x)->k, ((const struct kv *)y)->k);
}

static int hexv(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static char *url_decode(const char *s, size_t n)
{
    char *o = malloc(n + 1);
    size_t i, j = 0;

    if (!o)
        return NULL;
    for (i = 0; i < n; i++) {
        if (s[i] == '%' && i + 2 < n && hexv(s[i + 1]) >= 0 && hexv(s[i + 2]) >= 0) {
            o[j++] = (char)(hexv(s[i + 1]) * 16 + hexv(s[i + 2]));
            i += 2;
        } else {
            o[j++] = s[i];
        }
    }
    o[j] = '\0';
    return o;
}

char *ckpt_az_string_to_sign(const char *account, const char *method,
                             const char *path, const char *query,
                             const struct ckpt_az_header *h, size_t nh)
{
    static const char *const std_hdrs[] = {
        "Content-Encoding", "Content-Language", "Content-Length", "Content-MD5",
        "Content-Type", "Date", "If-Modified-Since", "If-Match", "If-None-Match",
        "If-Unmodified-Since", "Range"
    };
    struct sb b = { 0 };
    struct kv *xs = NULL, *qs = NULL;
    size_t nx = 0, nq = 0, i;
    const char *p;

    sb_put(&b, method);
    sb_put(&b, "\n");
    for (i = 0; i < sizeof(std_hdrs) / sizeof(std_hdrs[0]); i++) {
        const char *v = hget(h, nh, std_hdrs[i]);
        /* Content-Length 0 is written as an empty line (version >= 2015). */
        if (v && !(i == 2 && strcmp(v, "0") == 0))
            sb_put(&b, v);
        sb_put(&b, "\n");
    }
    xs = calloc(nh ? nh : 1, sizeof(*xs));
    if (!xs)
        goto fail;
    for (i = 0; i < nh; i++) {
        char *k, *q;
        if (strncasecmp(h[i].name, "x-ms-", 5) != 0)
            continue;
        k = strdup(h[i].name);
        if (!k)
            goto fail;
        for (q = k; *q; q++)
            *q = (char)tolower((unsigned char)*q);
        xs[nx].k = k;
        xs[nx++].v = (char *)h[i].value;
    }
    if (nx)
        qsort(xs, nx, sizeof(*xs), kvcmp);
    for (i = 0; i < nx; i++) {
        sb_put(&b, xs[i].k);
        sb_put(&b, ":");
        sb_put(&b, xs[i].v);
        sb_put(&b, "\n");
    }
    sb_put(&b, "/");
    sb_put(&b, account);
    sb_put(&b, path && *path ? path : "/");
    /* Query parameters: lowercase names, decoded values, sorted by name;
     * repeated names would be comma-joined (we never send any). */
    p = query;
    while (p && *p) {
        const char *amp = strchr(p, '&'), *eq;
        size_t plen = amp ? (size_t)(amp - p) : strlen(p);
        struct kv *nqs;
        char *q;
        if (plen) {
            eq = memchr(p, '=', plen);
            nqs = realloc(qs, (nq + 1) * sizeof(*qs));
            if (!nqs)
                goto fail;
            qs = nqs;
            qs[nq].k = url_decode(p, eq ? (size_t)(eq - p) : plen);
            qs[nq].v = eq ? url_decode(eq + 1, plen - (size_t)(eq - p) - 1) : strdup("");
            nq++;
            if (!qs[nq - 1].k || !qs[nq - 1].v)
                goto fail;
            for (q = qs[nq - 1].k; *q; q++)
                *q = (char)tolower((unsigned char)*q);
        }
        p += plen;
        if (*p == '&')
            p++;
    }
    if (nq)
        qsort(qs, nq, sizeof(*qs), kvcmp);
    for (i = 0; i < nq; i++) {
        sb_put(&b, "\n");
        sb_put(&b, qs[i].k);
        sb_put(&b, ":");
        sb_put(&b, qs[i].v);
    }
    if (b.oom)
        goto fail;
    goto done;
fail:
    free(b.p);
    b.p = NULL;
done:
    for (i = 0; i < nx; i++)
        free(xs[i].k);
    for (i = 0; i < nq; i++) {
        free(qs[i].k);
        free(qs[i].v);
    }
    free(xs);
    free(qs);
    return b.p;
}

ckpt_status ckpt_az_authorization(const char *account, const char *key_b64,
                                  const char *string_to_sign, char *out,
                                  size_t outlen)
{
    ckpt_status st = CKPT_OK;
    size_t klen = strlen(key_b64), pad = 0;
    unsigned char *key = malloc(klen + 3), mac[32], b64[64];
    unsigned int mlen = 32;
    int n;

    if (!key) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    if (klen % 4) {
        st = CKPT_E_CONFIG;
        goto out;
    }
    n = EVP_DecodeBlock(key, (const unsigned char *)key_b64, (int)klen);
    if (n < 0) {
        st = CKPT_E_CONFIG;
        goto out;
    }
    /* EVP_DecodeBlock counts the '=' padding as zero bytes. */
    if (klen && key_b64[klen - 1] == '=')
        pad++;
    if (klen > 1 && key_b64[klen - 2] == '=')
        pad++;
    HMAC(EVP_sha256(), key, n - (int)pad, (const unsigned char *)string_to_sign,
         strlen(string_to_sign), mac, &mlen);
    EVP_EncodeBlock(b64, mac, 32);
    if ((size_t)snprintf(out, outlen, "SharedKey %s:%s", account, b64) >= outlen)
        st = CKPT_E_INTERNAL;
out:
    if (key) {
        OPENSSL_cleanse(key, klen + 3);
        free(key);
    }
    return st;
}

/* ---- requests --------------------------------------------------------------- */

struct az_rq {
    const char *method;
    const char *blob;         /* blob name in the container, NULL = container */
    const char *query;        /* wire query, NULL = none */
    const char *const *hdrs;  /* extra "Name: value" */
    size_t nhdrs;
    const void *body;
    size_t len;
    size_t max_body;
    int md5_check;
    int *ambiguous;           /* see s3.c: an attempt may have been applied */
    void *dst;                /* see s3.c */
    const struct ckpt_range_watch *watch; /* see s3.c */
};

static ckpt_status az_call(struct az *a, const struct az_rq *rq,
                           struct ckpt_http_resp *resp, char *err)
{
    ckpt_status st = CKPT_E_INTERNAL;
    struct ckpt_retry r;
    char *raw = NULL, *path = NULL, *url = NULL, *sts = NULL, *q = NULL;
    const char **lines = NULL;
    struct ckpt_az_header *hv = NULL;
    size_t cap = rq->nhdrs + 8, nl, i;
    char md5[25], date[64], clen[32], code[128], tmp[256], auth[512];
    ckpt_retry_kind kind;

    memset(resp, 0, sizeof(*resp));
    lines = calloc(cap, sizeof(*lines));
    hv = calloc(cap, sizeof(*hv));
    if (asprintf(&raw, "%s/%s%s%s", a->ep_path, a->container, rq->blob ? "/" : "",
                 rq->blob ? rq->blob : "") < 0)
        raw = NULL;
    if (!lines || !hv || !raw || !(path = ckpt_sigv4_uri_encode(raw, strlen(raw), 1))) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    if (a->sas || rq->query) {
        if (asprintf(&q, "%s%s%s", rq->query ? rq->query : "",
                     rq->query && a->sas ? "&" : "", a->sas ? a->sas : "") < 0) {
            q = NULL;
            st = CKPT_E_NOMEM;
            goto out;
        }
    }
    if (asprintf(&url, "%s://%s%s%s%s", a->ep_scheme, a->ep_host, path, q ? "?" : "",
                 q ? q : "") < 0) {
        url = NULL;
        st = CKPT_E_NOMEM;
        goto out;
    }
    ckpt_md5_base64(rq->body ? rq->body : "", rq->len, md5);
    snprintf(clen, sizeof(clen), "%zu", rq->len);
    ckpt_retry_begin(&r, &a->pol, &a->thr);
    for (;;) {
        char ld[96], lv[64], lm[64];
        size_t nsend, nfixed;
        int64_t skew;
        time_t now;
        struct tm tm;
        int has_body = strcmp(rq->method, "PUT") == 0 || strcmp(rq->method, "POST") == 0;

        ckpt_throttle_wait(&a->thr);
        pthread_mutex_lock(&a->mu);
        skew = a->skew_s;
        pthread_mutex_unlock(&a->mu);
        now = time(NULL) + (time_t)skew;
        gmtime_r(&now, &tm);
        strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
        /* hv: what is signed; lines: what is sent (curl adds
         * Content-Length itself, but it is signed). */
        nl = 0;
        nsend = 0;
        hv[nl].name = "x-ms-date";
        hv[nl++].value = date;
        snprintf(ld, sizeof(ld), "x-ms-date: %s", date);
        lines[nsend++] = ld;
        hv[nl].name = "x-ms-version";
        hv[nl++].value = AZ_VERSION;
        snprintf(lv, sizeof(lv), "x-ms-version: %s", AZ_VERSION);
        lines[nsend++] = lv;
        if (has_body) {
            hv[nl].name = "Content-MD5";
            hv[nl++].value = md5;
            snprintf(lm, sizeof(lm), "Content-MD5: %s", md5);
            lines[nsend++] = lm;
            hv[nl].name = "Content-Length";
            hv[nl++].value = clen;
        }
        nfixed = nl;
        for (i = 0; i < rq->nhdrs; i++) {
            const char *colon = strchr(rq->hdrs[i], ':');
            char *name = strndup(rq->hdrs[i], colon ? (size_t)(colon - rq->hdrs[i]) : 0);
            const char *v = colon ? colon + 1 : "";
            if (!name) {
                st = CKPT_E_NOMEM;
                goto out;
            }
            while (*v == ' ')
                v++;
            hv[nl].name = name;
            hv[nl++].value = v;
            lines[nsend++] = rq->hdrs[i];
        }
        st = CKPT_OK;
        if (a->key_b64) {
            free(sts);
            sts = ckpt_az_string_to_sign(a->account, rq->method, path, rq->query, hv, nl);
            st = sts ? ckpt_az_authorization(a->account, a->key_b64, sts, tmp, sizeof(tmp))
                     : CKPT_E_NOMEM;
            if (st == CKPT_OK) {
                snprintf(auth, sizeof(auth), "Authorization: %s", tmp);
                lines[nsend++] = auth;
            }
        }
        for (i = nfixed; i < nl; i++)
            free((char *)hv[i].name);
        if (st != CKPT_OK) {
            seterr(err, "azure: cannot sign (account key not valid base64?)");
            goto out;
        }
        {
            struct ckpt_http_req hr = { rq->method, url, lines, nsend, rq->body,
                                        rq->len, rq->max_body ? rq->max_body : ERRBODY_MAX,
                                        rq->dst, rq->watch ? rq->watch->fn : NULL,
                                        rq->watch ? rq->watch->arg : NULL };
            ckpt_http_resp_free(resp);
            st = ckpt_http_do(a->http, &hr, resp);
        }
        memset(auth, 0, sizeof(auth));
        if (st == CKPT_E_NOMEM)
            goto out;
        code[0] = '\0';
        if (resp->status >= 300 &&
            !ckpt_http_header(resp, "x-ms-error-code", code, sizeof(code)) &&
            resp->body && resp->len)
            ckpt_xml_find(resp->body, resp->len, "Error/Code", code, sizeof(code));
        st = ckpt_retry_classify(resp->status, resp->curl_code, code[0] ? code : NULL,
                                 &kind);
        if (st == CKPT_OK && rq->md5_check && resp->status == 200 &&
            !resp->body_overflow && ckpt_http_header(resp, "Content-MD5", tmp, sizeof(tmp))) {
            char got[25];
            ckpt_md5_base64(resp->body ? resp->body : "", resp->len, got);
            if (strcmp(got, tmp) != 0) {
                st = CKPT_E_CORRUPT;
                kind = CKPT_RETRY_AGAIN;
                snprintf(code, sizeof(code), "BodyMD5Mismatch");
            }
        }
        if (st == CKPT_OK) {
            ckpt_throttle_note(&a->thr, 0);
            break;
        }
        /* Azure reports a skewed clock as 403 AuthenticationFailed; the
         * reply's Date tells by how much. */
        if (resp->status == 403 && ckpt_http_header(resp, "Date", tmp, sizeof(tmp))) {
            int64_t off;
            if (ckpt_retry_skew_from_date(tmp, &off) && (off > 600 || off < -600)) {
                pthread_mutex_lock(&a->mu);
                a->skew_s = off;
                pthread_mutex_unlock(&a->mu);
                kind = CKPT_RETRY_SKEW;
                alog(a, CKPT_LOG_WARN, "azure: clock skew %lld s corrected", (long long)off);
            }
        }
        if (resp->status)
            seterr(err, "az %s %s/%s: HTTP %ld %s", rq->method, a->container,
                   rq->blob ? rq->blob : "", resp->status, code);
        else
            seterr(err, "az %s %s/%s: %s", rq->method, a->container,
                   rq->blob ? rq->blob : "", resp->errmsg);
        if (rq->ambiguous && kind != CKPT_RETRY_NEVER &&
            (resp->status == 0 || resp->status >= 500))
            *rq->ambiguous = 1;
        if (!ckpt_retry_again(&r, kind))
            break;
        alog(a, CKPT_LOG_DEBUG, "%s (attempt %u, retrying)", err ? err : "az retry",
             r.attempt);
    }
out:
    free(lines);
    free(hv);
    free(raw);
    free(path);
    free(url);
    free(sts);
    free(q);
    return st;
}

static ckpt_status key_check(const char *key, char *err)
{
    if (!key || !ckpt_key_valid(key)) {
        seterr(err, "invalid key");
        return CKPT_E_INVAL;
    }
    return CKPT_OK;
}

static char *full_key(struct az *a, const char *key)
{
    char *k = NULL;

    if (asprintf(&k, "%s%s", a->prefix, key) < 0)
        k = NULL;
    return k;
}

static int cond_line(const struct ckpt_put_opts *o, char *line, size_t n)
{
    if (o->cond == CKPT_PUT_IF_NONE_MATCH) {
        snprintf(line, n, "If-None-Match: *");
        return 1;
    }
    if (o->cond == CKPT_PUT_IF_MATCH) {
        snprintf(line, n, "If-Match: %s", o->if_match ? o->if_match : "");
        return 1;
    }
    return 0;
}

static ckpt_status put_blocks(struct az *a, const char *fk, const uint8_t *buf,
                              size_t len, const struct ckpt_put_opts *o,
                              char *etag_out, char *err)
{
    ckpt_status st = CKPT_OK;
    struct ckpt_http_resp resp;
    size_t bs = a->block_size, nb, i, xlen = 0, xcap = 0;
    char *xml = NULL, *query = NULL, cond[300], md5[25], mline[80];
    const char *hdrs[2];
    size_t nh = 0;

    memset(&resp, 0, sizeof(resp));
    /* At most 50,000 blocks per blob. */
    if ((len + bs - 1) / bs > 50000)
        bs = (len + 49999) / 50000;
    nb = (len + bs - 1) / bs;
    if (ckpt_xml_raw_append(&xml, &xlen, &xcap,
                            "<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>")) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    for (i = 0; i < nb; i++) {
        /* Block ids: base64 of a fixed-width counter, so all have the same
         * length as Azure requires ("blk00000001" -> 16 characters). */
        char raw[32], id[48], line[80];
        char *id_enc;
        size_t off = i * bs, n = len - off < bs ? len - off : bs;
        struct az_rq rq = { "PUT", fk, NULL, NULL, 0, buf + off, n, 0, 0, NULL, NULL, NULL };

        snprintf(raw, sizeof(raw), "blk%08u", (unsigned)i);
        EVP_EncodeBlock((unsigned char *)id, (const unsigned char *)raw, 11);
        id_enc = ckpt_sigv4_uri_encode(id, strlen(id), 0);
        free(query);
        query = NULL;
        if (!id_enc || asprintf(&query, "comp=block&blockid=%s", id_enc) < 0) {
            free(id_enc);
            query = NULL;
            st = CKPT_E_NOMEM;
            goto out;
        }
        free(id_enc);
        rq.query = query;
        st = az_call(a, &rq, &resp, err);
        ckpt_http_resp_free(&resp);
        if (st != CKPT_OK)
            goto out;
        snprintf(line, sizeof(line), "<Latest>%s</Latest>", id);
        if (ckpt_xml_raw_append(&xml, &xlen, &xcap, line)) {
            st = CKPT_E_NOMEM;
            goto out;
        }
    }
    if (ckpt_xml_raw_append(&xml, &xlen, &xcap, "</BlockList>")) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    /* Record the whole blob's MD5 so later GETs can be checked. */
    ckpt_md5_base64(buf, len, md5);
    snprintf(mline, sizeof(mline), "x-ms-blob-content-md5: %s", md5);
    hdrs[nh++] = mline;
    if (cond_line(o, cond, sizeof(cond)))
        hdrs[nh++] = cond;
    {
        struct az_rq rq = { "PUT", fk, "comp=blocklist", hdrs, nh, xml, xlen, 0, 0, NULL, NULL, NULL };
        st = az_call(a, &rq, &resp, err);
    }
    if (st == CKPT_OK && etag_out &&
        !ckpt_http_header(&resp, "ETag", etag_out, CKPT_ETAG_MAX))
        etag_out[0] = '\0';
out:
    ckpt_http_resp_free(&resp);
    free(xml);
    free(query);
    return st;
}

/* As in s3.c: a conditional put refused after an attempt that may have
 * been applied succeeded if the blob now holds exactly our bytes (Put Blob
 * stored their MD5). */
static ckpt_status settle_ambiguous(struct az *a, const char *fk, const void *buf,
                                    size_t len, char *etag_out)
{
    ckpt_status st = CKPT_E_PRECONDITION;
    struct ckpt_http_resp resp;
    char have[64], want[25], herr[CKPT_ERR_MAX];
    struct az_rq rq = { "HEAD", fk, NULL, NULL, 0, NULL, 0, 0, 0, NULL, NULL, NULL };

    if (az_call(a, &rq, &resp, herr) == CKPT_OK &&
        ckpt_http_header(&resp, "Content-MD5", have, sizeof(have))) {
        ckpt_md5_base64(buf ? buf : "", len, want);
        if (strcmp(want, have) == 0) {
            st = CKPT_OK;
            if (etag_out && !ckpt_http_header(&resp, "ETag", etag_out, CKPT_ETAG_MAX))
                etag_out[0] = '\0';
            alog(a, CKPT_LOG_INFO, "azure: conditional put of %s had landed before a "
                 "failed attempt", fk);
        }
    }
    ckpt_http_resp_free(&resp);
    return st;
}

static ckpt_status az_put(struct ckpt_store *st_, const char *key, const void *buf,
                          size_t len, const struct ckpt_put_opts *opts,
                          char *etag_out, char *err)
{
    struct az *a = (struct az *)st_;
    static const struct ckpt_put_opts plain = { CKPT_PUT_PLAIN, NULL, 0 };
    ckpt_status st;
    struct ckpt_http_resp resp;
    char cond[300], *fk = NULL;
    const char *hdrs[2] = { "x-ms-blob-type: BlockBlob", NULL };
    size_t nh = 1;
    int ambiguous = 0;

    memset(&resp, 0, sizeof(resp));
    if (!opts)
        opts = &plain;
    st = ckpt_store_prefixed_key(a->prefix, key, &fk, err);
    if (st != CKPT_OK)
        goto out;
    if (opts->cond == CKPT_PUT_IF_MATCH && (!opts->if_match || !*opts->if_match)) {
        st = CKPT_E_INVAL;
        seterr(err, "If-Match put without an etag");
        goto out;
    }
    if (len > a->block_min) {
        st = put_blocks(a, fk, buf, len, opts, etag_out, err);
        goto out;
    }
    if (cond_line(opts, cond, sizeof(cond)))
        hdrs[nh++] = cond;
    {
        struct az_rq rq = { "PUT", fk, NULL, hdrs, nh, buf ? buf : "", len, 0, 0,
                            &ambiguous, NULL, NULL };
        st = az_call(a, &rq, &resp, err);
    }
    if (st == CKPT_OK && etag_out &&
        !ckpt_http_header(&resp, "ETag", etag_out, CKPT_ETAG_MAX))
        etag_out[0] = '\0';
    if (st == CKPT_E_PRECONDITION && ambiguous)
        st = settle_ambiguous(a, fk, buf, len, etag_out);
out:
    ckpt_http_resp_free(&resp);
    free(fk);
    return st;
}

static ckpt_status az_get(struct ckpt_store *st_, const char *key, size_t max_len,
                          unsigned flags, void **buf_out, size_t *len_out, char *etag_out,
                          char *err)
{
    struct az *a = (struct az *)st_;
    ckpt_status st;
    struct ckpt_http_resp resp;
    char *fk = NULL;

    memset(&resp, 0, sizeof(resp));
    *buf_out = NULL;
    *len_out = 0;
    st = ckpt_store_prefixed_key(a->prefix, key, &fk, err);
    if (st != CKPT_OK)
        goto out;
    {
        struct az_rq rq = { "GET", fk, NULL, NULL, 0, NULL, 0, max_len ? max_len : 1,
                            !(flags & CKPT_GET_SELF_CHECKED), NULL, NULL, NULL };
        st = az_call(a, &rq, &resp, err);
    }
    if (st != CKPT_OK)
        goto out;
    if (resp.body_overflow) {
        st = CKPT_E_CORRUPT;
        seterr(err, "az %s: object larger than %zu bytes", fk, max_len);
        goto out;
    }
    if (etag_out && !ckpt_http_header(&resp, "ETag", etag_out, CKPT_ETAG_MAX))
        etag_out[0] = '\0';
    st = ckpt_http_resp_take_body(&resp, buf_out, len_out);
out:
    ckpt_http_resp_free(&resp);
    free(fk);
    return st;
}

static ckpt_status az_get_range(struct ckpt_store *st_, const char *key, uint64_t off,
                                size_t len, unsigned flags, void *dst,
                                const struct ckpt_range_watch *watch, char *err)
{
    struct az *a = (struct az *)st_;
    ckpt_status st;
    struct ckpt_http_resp resp;
    char *fk = NULL, range[80];
    const char *hdrs[1] = { range };

    (void)flags; /* ranges carry no Content-MD5 of their own: the caller verifies */
    memset(&resp, 0, sizeof(resp));
    if (len == 0)
        return CKPT_E_INVAL;
    st = ckpt_store_prefixed_key(a->prefix, key, &fk, err);
    if (st != CKPT_OK)
        goto out;
    /* x-ms-range: signed among the x-ms- headers (a plain Range header has
     * its own slot in SharedKey's string to sign) */
    snprintf(range, sizeof(range), "x-ms-range: bytes=%llu-%llu", (unsigned long long)off,
             (unsigned long long)(off + len - 1));
    {
        struct az_rq rq = { "GET", fk, NULL, hdrs, 1, NULL, 0, len, 0, NULL, dst, watch };
        st = az_call(a, &rq, &resp, err);
    }
    if (st != CKPT_OK)
        goto out;
    if (resp.status != 206 || resp.body_overflow) {
        st = CKPT_E_CORRUPT;
        seterr(err, "az %s: range %llu+%zu answered with HTTP %ld%s", fk,
               (unsigned long long)off, len, resp.status,
               resp.body_overflow ? " and more bytes" : "");
        goto out;
    }
    if (resp.len != len) {
        st = CKPT_E_CORRUPT;
        seterr(err, "az %s: range %llu+%zu: %zu bytes came back", fk,
               (unsigned long long)off, len, resp.len);
    }
out:
    ckpt_http_resp_free(&resp);
    free(fk);
    return st;
}

static ckpt_status az_head(struct ckpt_store *st_, const char *key, uint64_t *size,
                           char *etag_out, char *err)
{
    struct az *a = (struct az *)st_;
    ckpt_status st;
    struct ckpt_http_resp resp;
    char *fk = NULL, cl[64];

    memset(&resp, 0, sizeof(resp));
    st = ckpt_store_prefixed_key(a->prefix, key, &fk, err);
    if (st != CKPT_OK)
        goto out;
    {
        struct az_rq rq = { "HEAD", fk, NULL, NULL, 0, NULL, 0, 0, 0, NULL, NULL, NULL };
        st = az_call(a, &rq, &resp, err);
    }
    if (st != CKPT_OK)
        goto out;
    if (size)
        *size = ckpt_http_header(&resp, "Content-Length", cl, sizeof(cl))
                    ? strtoull(cl, NULL, 10) : 0;
    if (etag_out && !ckpt_http_header(&resp, "ETag", etag_out, CKPT_ETAG_MAX))
        etag_out[0] = '\0';
out:
    ckpt_http_resp_free(&resp);
    free(fk);
    return st;
}

struct list_state {
    struct az *a;
    ckpt_list_cb cb;
    void *user;
    int stopped;
    char marker[2048];
    char name[2048];
    uint64_t size;
    int64_t mtime_ms;
};

static int list_cb(void *u, const char *path, const char *text, size_t len)
{
    struct list_state *ls = u;
    size_t plen = strlen(ls->a->prefix);

    if (strcmp(path, "EnumerationResults/Blobs/Blob/Name") == 0) {
        snprintf(ls->name, sizeof(ls->name), "%s", len < sizeof(ls->name) ? text : "");
    } else if (strcmp(path, "EnumerationResults/Blobs/Blob/Properties/Content-Length") == 0) {
        ls->size = strtoull(text, NULL, 10);
    } else if (strcmp(path, "EnumerationResults/Blobs/Blob/Properties/Last-Modified") == 0) {
        time_t t = curl_getdate(text, NULL);
        ls->mtime_ms = t > 0 ? (int64_t)t * 1000 : 0;
    } else if (strcmp(path, "EnumerationResults/Blobs/Blob") == 0) {
        if (ls->name[0] && strncmp(ls->name, ls->a->prefix, plen) == 0 &&
            ls->name[plen]) {
            struct ckpt_obj_info oi = { ls->name + plen, ls->size, ls->mtime_ms };
            if (ls->cb(ls->user, &oi)) {
                ls->stopped = 1;
                return 1;
            }
        }
        ls->name[0] = '\0';
        ls->size = 0;
        ls->mtime_ms = 0;
    } else if (strcmp(path, "EnumerationResults/NextMarker") == 0) {
        if (len >= sizeof(ls->marker))
            return 1;
        memcpy(ls->marker, text, len + 1);
    }
    return 0;
}

static ckpt_status az_list(struct ckpt_store *st_, const char *prefix,
                           ckpt_list_cb cb, void *user, char *err)
{
    struct az *a = (struct az *)st_;
    ckpt_status st = CKPT_OK;
    struct ckpt_http_resp resp;
    struct list_state ls;
    char *fp = NULL, *fp_enc = NULL, *mk_enc = NULL, *query = NULL;

    memset(&resp, 0, sizeof(resp));
    memset(&ls, 0, sizeof(ls));
    ls.a = a;
    ls.cb = cb;
    ls.user = user;
    if (asprintf(&fp, "%s%s", a->prefix, prefix ? prefix : "") < 0) {
        fp = NULL;
        st = CKPT_E_NOMEM;
        goto out;
    }
    fp_enc = ckpt_sigv4_uri_encode(fp, strlen(fp), 0);
    if (!fp_enc) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    for (;;) {
        struct az_rq rq = { "GET", NULL, NULL, NULL, 0, NULL, 0, LIST_BODY_MAX, 0, NULL, NULL, NULL };
        free(query);
        query = NULL;
        free(mk_enc);
        mk_enc = NULL;
        if (ls.marker[0] &&
            !(mk_enc = ckpt_sigv4_uri_encode(ls.marker, strlen(ls.marker), 0))) {
            st = CKPT_E_NOMEM;
            goto out;
        }
        if (asprintf(&query, "restype=container&comp=list&prefix=%s&maxresults=%u%s%s",
                     fp_enc, a->list_max, mk_enc ? "&marker=" : "",
                     mk_enc ? mk_enc : "") < 0) {
            query = NULL;
            st = CKPT_E_NOMEM;
            goto out;
        }
        rq.query = query;
        st = az_call(a, &rq, &resp, err);
        if (st != CKPT_OK)
            goto out;
        ls.marker[0] = '\0';
        st = ckpt_xml_parse(resp.body, resp.len, list_cb, &ls);
        ckpt_http_resp_free(&resp);
        if (ls.stopped) {
            st = CKPT_OK;
            goto out;
        }
        if (st != CKPT_OK) {
            seterr(err, "az list %s: malformed reply", fp);
            goto out;
        }
        if (!ls.marker[0])
            break;
    }
out:
    ckpt_http_resp_free(&resp);
    free(fp);
    free(fp_enc);
    free(mk_enc);
    free(query);
    return st;
}

static ckpt_status az_del(struct ckpt_store *st_, const char *const *keys, size_t n,
                          char *err)
{
    struct az *a = (struct az *)st_;
    ckpt_status st = CKPT_OK;
    size_t i;

    for (i = 0; i < n; i++) {
        st = key_check(keys[i], err);
        if (st != CKPT_OK)
            goto out;
    }
    for (i = 0; i < n && st == CKPT_OK; i++) {
        struct ckpt_http_resp resp;
        char *fk = full_key(a, keys[i]);
        struct az_rq rq = { "DELETE", fk, NULL, NULL, 0, NULL, 0, 0, 0, NULL, NULL, NULL };
        if (!fk) {
            st = CKPT_E_NOMEM;
            goto out;
        }
        st = az_call(a, &rq, &resp, err);
        if (st == CKPT_E_NOENT)
            st = CKPT_OK;
        ckpt_http_resp_free(&resp);
        free(fk);
    }
out:
    return st;
}

static ckpt_status az_barrier(struct ckpt_store *st_, char *err)
{
    (void)st_;
    (void)err;
    return CKPT_OK;
}

static int az_has_conditional(struct ckpt_store *st_)
{
    (void)st_;
    return 1;
}

static void wipe_free(char *p)
{
    if (p) {
        OPENSSL_cleanse(p, strlen(p));
        free(p);
    }
}

static void az_close(struct ckpt_store *st_)
{
    struct az *a = (struct az *)st_;

    if (!a)
        return;
    ckpt_http_free(a->http);
    ckpt_throttle_destroy(&a->thr);
    pthread_mutex_destroy(&a->mu);
    free(a->base.url);
    free(a->account);
    wipe_free(a->key_b64);
    wipe_free(a->sas);
    free(a->ep_scheme);
    free(a->ep_host);
    free(a->ep_path);
    free(a->container);
    free(a->prefix);
    free(a);
}

static const struct ckpt_store_ops az_ops = {
    "az", az_put, az_get, az_get_range, az_head, az_list, az_del, az_barrier,
    az_has_conditional, az_close
};

/* ---- open ------------------------------------------------------------------- */

/* Value of `name` in a "K=V;K=V" connection string (V may hold '='). */
static char *cs_get(const char *cs, const char *name)
{
    size_t nl = strlen(name);
    const char *p = cs;

    while (p && *p) {
        const char *semi = strchr(p, ';');
        size_t len = semi ? (size_t)(semi - p) : strlen(p);
        while (*p == ' ' && len) {
            p++;
            len--;
        }
        if (len > nl && strncasecmp(p, name, nl) == 0 && p[nl] == '=')
            return strndup(p + nl + 1, len - nl - 1);
        p = semi ? semi + 1 : NULL;
    }
    return NULL;
}

static ckpt_status set_endpoint(struct az *a, const char *ep, char *err)
{
    const char *p = strstr(ep, "://"), *slash;
    size_t n;

    if (!p) {
        seterr(err, "azure: bad BlobEndpoint");
        return CKPT_E_CONFIG;
    }
    a->ep_scheme = strndup(ep, (size_t)(p - ep));
    p += 3;
    slash = strchr(p, '/');
    a->ep_host = slash ? strndup(p, (size_t)(slash - p)) : strdup(p);
    a->ep_path = strdup(slash ? slash : "");
    if (!a->ep_scheme || !a->ep_host || !a->ep_path)
        return CKPT_E_NOMEM;
    n = strlen(a->ep_path);
    while (n && a->ep_path[n - 1] == '/')
        a->ep_path[--n] = '\0';
    return CKPT_OK;
}

static ckpt_status create_container(struct az *a, char *err)
{
    struct ckpt_http_resp resp;
    struct az_rq rq = { "PUT", NULL, "restype=container", NULL, 0, NULL, 0, 0, 0, NULL, NULL, NULL };
    ckpt_status st = az_call(a, &rq, &resp, err);

    if (st == CKPT_E_PRECONDITION)   /* 409 ContainerAlreadyExists */
        st = CKPT_OK;
    ckpt_http_resp_free(&resp);
    return st;
}

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

ckpt_status ckpt_store_az_open(const char *url, const struct ckpt_store_config *cfg,
                               struct ckpt_store **out, char *err)
{
    ckpt_status st = CKPT_OK;
    struct az *a = NULL;
    const char *cs = getenv("AZURE_STORAGE_CONNECTION_STRING"), *rest, *slash, *v;
    char *ep = NULL, *proto = NULL, *suffix = NULL;
    struct ckpt_http_opts ho;
    size_t n;

    *out = NULL;
    if (!url || strncmp(url, "az://", 5) != 0) {
        seterr(err, "not an az:// URL");
        st = CKPT_E_CONFIG;
        goto out;
    }
    a = calloc(1, sizeof(*a));
    if (!a) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    pthread_mutex_init(&a->mu, NULL);
    ckpt_throttle_init(&a->thr);
    ckpt_retry_policy_init_budget(&a->pol, cfg ? cfg->retry_budget_ms : 0);
    a->base.ops = &az_ops;
    a->base.url = strdup(url);
    rest = url + 5;
    slash = strchr(rest, '/');
    a->container = slash ? strndup(rest, (size_t)(slash - rest)) : strdup(rest);
    v = slash ? slash + 1 : "";
    n = strlen(v);
    while (n && v[n - 1] == '/')
        n--;
    if (n) {
        if (asprintf(&a->prefix, "%.*s/", (int)n, v) < 0)
            a->prefix = NULL;
    } else {
        a->prefix = strdup("");
    }
    if (!a->base.url || !a->container || !a->prefix) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    if (!*a->container || strpbrk(a->container, "?#@:") ||
        !prefix_valid(a->prefix)) {
        seterr(err, "bad container or prefix in %s", url);
        st = CKPT_E_CONFIG;
        goto out;
    }
    if (cs && *cs) {
        a->account = cs_get(cs, "AccountName");
        a->key_b64 = cs_get(cs, "AccountKey");
        a->sas = cs_get(cs, "SharedAccessSignature");
        ep = cs_get(cs, "BlobEndpoint");
        proto = cs_get(cs, "DefaultEndpointsProtocol");
        suffix = cs_get(cs, "EndpointSuffix");
    } else {
        v = getenv("AZURE_STORAGE_ACCOUNT");
        a->account = v && *v ? strdup(v) : NULL;
        v = getenv("AZURE_STORAGE_KEY");
        a->key_b64 = v && *v ? strdup(v) : NULL;
        v = getenv("AZURE_STORAGE_SAS_TOKEN");
        a->sas = v && *v ? strdup(v) : NULL;
    }
    if (a->sas && a->sas[0] == '?')
        memmove(a->sas, a->sas + 1, strlen(a->sas));
    if (a->key_b64 && a->sas) {
        /* Both given: the key signs, the SAS is not needed. */
        wipe_free(a->sas);
        a->sas = NULL;
    }
    if (!a->account && ep) {
        /* SAS-only connection strings may omit AccountName. */
        a->account = strdup("");
    }
    if (!a->account || (!a->key_b64 && !a->sas)) {
        seterr(err, "no Azure credentials (AZURE_STORAGE_CONNECTION_STRING, or "
                    "AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN)");
        st = CKPT_E_AUTH;
        goto out;
    }
    if (a->key_b64 && !*a->account) {
        seterr(err, "Azure account key given without an account name");
        st = CKPT_E_CONFIG;
        goto out;
    }
    if (ep) {
        st = set_endpoint(a, ep, err);
    } else {
        char *def = NULL;
        if (asprintf(&def, "%s://%s.blob.%s", proto ? proto : "https", a->account,
                     suffix ? suffix : "core.windows.net") < 0) {
            st = CKPT_E_NOMEM;
            goto out;
        }
        st = set_endpoint(a, def, err);
        free(def);
    }
    if (st != CKPT_OK)
        goto out;
    /* For diagnostics: the source and the kind of secret, never its value. */
    snprintf(a->base.cred_source, sizeof(a->base.cred_source), "%s, account '%.64s', %s",
             cs && *cs ? "connection string (AZURE_STORAGE_CONNECTION_STRING)"
                       : a->key_b64 ? "environment (AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_KEY)"
                                    : "environment (AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_SAS_TOKEN)",
             a->account, a->key_b64 ? "shared key" : "SAS token");
    snprintf(a->base.endpoint, sizeof(a->base.endpoint), "%.10s://%.150s%.80s", a->ep_scheme,
             a->ep_host, a->ep_path);

    a->block_size = 8 * MIB;
    v = getenv("CKPT_AZ_BLOCK_SIZE");
    if (v && strtoull(v, NULL, 10) >= 64 * 1024)
        a->block_size = (size_t)strtoull(v, NULL, 10);
    a->block_min = 64 * MIB;
    v = getenv("CKPT_AZ_BLOCK_MIN");
    if (v && strtoull(v, NULL, 10) > 0)
        a->block_min = (size_t)strtoull(v, NULL, 10);
    if (a->block_min < a->block_size)
        a->block_min = a->block_size;
    a->list_max = 5000;
    v = getenv("CKPT_AZ_LIST_MAX");
    if (v && atoi(v) > 0 && atoi(v) <= 5000)
        a->list_max = (unsigned)atoi(v);
    if (cfg) {
        a->log_fn = cfg->log_fn;
        a->log_user = cfg->log_user;
        a->log_level = cfg->log_level;
    }
    memset(&ho, 0, sizeof(ho));
    ho.max_handles = cfg && cfg->connections ? cfg->connections : 16;
    ho.max_rate_bps = cfg ? cfg->max_rate_bps : 0;
    a->http = ckpt_http_new(&ho);
    if (!a->http) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    /* Test set-ups start from an empty Azurite: let them create the
     * container (production containers are made by their owners). */
    v = getenv("CKPT_AZ_CREATE_CONTAINER");
    if (v && *v == '1') {
        st = create_container(a, err);
        if (st != CKPT_OK)
            goto out;
    }
    *out = &a->base;
    a = NULL;
out:
    free(ep);
    free(proto);
    free(suffix);
    az_close(a ? &a->base : NULL);
    return st;
}
