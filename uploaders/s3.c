/*
 * s3.c -- the S3-compatible store (s3://bucket/prefix) and Google Cloud
 * Storage through its XML API with HMAC keys (gs://bucket/prefix).
 *
 * One handle serves many threads: the HTTP pool (http.h) bounds connections,
 * the mutex `mu` guards what changes after open (credentials from the
 * instance role, the region learnt from a redirect, the clock offset learnt
 * from RequestTimeTooSkewed). Everything else is fixed at open.
 *
 * Choices (documented in docs/stores.md):
 *  - every request is signed with SigV4; a request body goes as
 *    UNSIGNED-PAYLOAD with a signed checksum header instead (GCS: signed
 *    payload hash too): Content-MD5, or on AWS x-amz-checksum-crc32c for
 *    object PUTs (CKPT_S3_CHECKSUM), so the store rejects a body damaged in
 *    flight, for one digest of CPU instead of two;
 *  - GET bodies are checked against the ETag when it is a plain MD5 (single
 *    part upload, no SSE-KMS) and re-fetched on mismatch, except where the
 *    caller checks them itself (CKPT_GET_SELF_CHECKED: chunks);
 *  - objects above the multipart threshold (64 MiB, CKPT_S3_MULTIPART_MIN)
 *    go up in parts of 8 MiB (CKPT_S3_PART_SIZE, at least 5 MiB on AWS),
 *    sequentially in the caller's thread (callers bring the parallelism);
 *    a failed upload is aborted;
 *  - gs:// uses https://storage.googleapis.com, path-style, region "auto",
 *    keys GOOGLE_ACCESS_KEY_ID/GOOGLE_SECRET_ACCESS_KEY (else the AWS env and
 *    profile chain, never the EC2 role); GCS has no multi-object delete, so
 *    deletes go one by one; conditional puts use x-goog-if-generation-match
 *    and the "etag" of a gs object is its generation number.
 */
#include "store.h"
#include "http.h"
#include "retry.h"
#include "sigv4.h"
#include "xml.h"
#include "imds.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define MIB (1024u * 1024u)
#define ERRBODY_MAX (256 * 1024)
#define LIST_BODY_MAX (16 * MIB)
#define DELETE_BATCH 1000
#define CRED_REFRESH_S 300   /* refresh role credentials 5 min before expiry */

struct s3 {
    struct ckpt_store base;
    int gcs;
    char *bucket;
    char *prefix;            /* "" or "p/q/" */
    char *ep_scheme;         /* "https" */
    char *ep_host;           /* "s3.us-east-1.amazonaws.com" or "127.0.0.1:9000" */
    char *ep_path;           /* "" or "/base" (no trailing slash) */
    int default_ep;          /* AWS's own endpoint: host follows the region */
    int path_style;
    int conditional;
    int verify_md5;
    int crc32c;              /* object PUTs carry x-amz-checksum-crc32c, not MD5 */
    size_t part_size, mp_min;
    char *storage_class, *sse, *kms_key;
    ckpt_log_fn log_fn;
    void *log_user;
    ckpt_log_level log_level;
    struct ckpt_http *http;
    struct ckpt_retry_policy pol;
    struct ckpt_throttle thr;

    pthread_mutex_t mu;      /* guards the fields below */
    char *region;
    char *ak, *sk, *token;
    int64_t cred_expiry;     /* Unix s; 0 = static credentials */
    int64_t skew_s;          /* server clock - local clock */
};

struct creds {
    char ak[256], sk[256];
    char *token;             /* malloc'd or NULL */
    char region[64];
    int64_t skew_s;
};

static void slog(struct s3 *s, ckpt_log_level lvl, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    if (!s->log_fn || lvl < s->log_level)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    s->log_fn(s->log_user, lvl, "store", msg);
}

static void seterr(char *err, const char *fmt, ...)
{
    va_list ap;

    if (!err)
        return;
    va_start(ap, fmt);
    vsnprintf(err, CKPT_ERR_MAX, fmt, ap);
    va_end(ap);
}

static void wipe_free(char *p)
{
    if (p) {
        volatile char *v = p;
        while (*v)
            *v++ = 0;
        free(p);
    }
}

/* ---- configuration files ------------------------------------------------ */

struct profile {
    char *ak, *sk, *token, *region, *endpoint, *s3_endpoint;
    int path_style;
    char name[128];          /* profile name, for diagnostics */
    char ak_file[256];       /* the file the key pair came from */
};

static void profile_free(struct profile *p)
{
    wipe_free(p->ak);
    wipe_free(p->sk);
    wipe_free(p->token);
    free(p->region);
    free(p->endpoint);
    free(p->s3_endpoint);
    memset(p, 0, sizeof(*p));
}

static char *trim(char *s)
{
    char *e;

    while (isspace((unsigned char)*s))
        s++;
    e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

static void set_once(char **dst, const char *v)
{
    if (!*dst && v && *v)
        *dst = strdup(v);
}

/* Read one section of an AWS INI file (credentials or config). `want` is the
 * section name as written inside the brackets. Nested sections ("s3 =" with
 * indented lines below) are read for s3 only. First value wins. */
static void read_ini(const char *file, const char *want, struct profile *p)
{
    FILE *f = fopen(file, "r");
    char line[4096];
    int in_sec = 0, in_s3 = 0;

    if (!f)
        return;
    while (fgets(line, sizeof(line), f)) {
        int indented = line[0] == ' ' || line[0] == '\t';
        char *t = trim(line), *eq, *k, *v;

        if (!*t || *t == '#' || *t == ';')
            continue;
        if (*t == '[') {
            char *end = strchr(t, ']');
            if (end)
                *end = '\0';
            in_sec = strcmp(trim(t + 1), want) == 0;
            in_s3 = 0;
            continue;
        }
        if (!in_sec)
            continue;
        eq = strchr(t, '=');
        if (!eq)
            continue;
        *eq = '\0';
        k = trim(t);
        v = trim(eq + 1);
        if (!indented)
            in_s3 = 0;
        if (!indented && strcmp(k, "s3") == 0 && !*v) {
            in_s3 = 1;
            continue;
        }
        if (indented && in_s3) {
            if (strcmp(k, "addressing_style") == 0)
                p->path_style = strcmp(v, "path") == 0 ? 1 : p->path_style;
            else if (strcmp(k, "endpoint_url") == 0)
                set_once(&p->s3_endpoint, v);
            continue;
        }
        if (strcmp(k, "aws_access_key_id") == 0) {
            if (!p->ak && *v)
                snprintf(p->ak_file, sizeof(p->ak_file), "%s", file);
            set_once(&p->ak, v);
        }
        else if (strcmp(k, "aws_secret_access_key") == 0)
            set_once(&p->sk, v);
        else if (strcmp(k, "aws_session_token") == 0)
            set_once(&p->token, v);
        else if (strcmp(k, "region") == 0)
            set_once(&p->region, v);
        else if (strcmp(k, "endpoint_url") == 0)
            set_once(&p->endpoint, v);
    }
    /* Secrets were in `line`: do not leave them on the stack. */
    memset(line, 0, sizeof(line));
    fclose(f);
}

static void load_profile(struct profile *p)
{
    const char *name = getenv("AWS_PROFILE");
    const char *home = getenv("HOME");
    const char *cf = getenv("AWS_SHARED_CREDENTIALS_FILE");
    const char *cfg = getenv("AWS_CONFIG_FILE");
    char path[4096], sec[512];

    if (!name || !*name)
        name = "default";
    snprintf(p->name, sizeof(p->name), "%s", name);
    if (cf && *cf) {
        read_ini(cf, name, p);
    } else if (home) {
        snprintf(path, sizeof(path), "%s/.aws/credentials", home);
        read_ini(path, name, p);
    }
    /* In the config file, named profiles are "[profile NAME]". */
    if (strcmp(name, "default") == 0)
        snprintf(sec, sizeof(sec), "default");
    else
        snprintf(sec, sizeof(sec), "profile %s", name);
    if (cfg && *cfg) {
        read_ini(cfg, sec, p);
    } else if (home) {
        snprintf(path, sizeof(path), "%s/.aws/config", home);
        read_ini(path, sec, p);
    }
}

/* ---- instance-role credentials ----------------------------------------- */

static int64_t parse_iso8601(const char *s)
{
    struct tm tm;
    const char *end;

    memset(&tm, 0, sizeof(tm));
    if (!s)
        return 0;
    end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!end)
        return 0;
    return (int64_t)timegm(&tm);
}

/* Fetch role credentials from IMDSv2 into s (caller holds s->mu). */
static ckpt_status imds_creds(struct s3 *s, char *err)
{
    ckpt_status st = CKPT_E_AUTH;
    struct ckpt_imds *m = ckpt_imds_shared(NULL);
    char *body = NULL, path[512], role[256];
    size_t len = 0;
    long http = 0;
    cJSON *j = NULL;
    const char *ak, *sk, *tok, *exp;

    if (!m) {
        seterr(err, "no credentials: env, profile empty and instance metadata disabled");
        goto out;
    }
    if (ckpt_imds_get(m, "/latest/meta-data/iam/security-credentials/", 2000,
                      4096, &body, &len, &http, NULL) != CKPT_OK || http != 200 ||
        !body || !*body) {
        seterr(err, "no credentials: env, profile empty and no instance role");
        goto out;
    }
    snprintf(role, sizeof(role), "%.*s", (int)strcspn(body, "\r\n"), body);
    snprintf(s->base.cred_source, sizeof(s->base.cred_source),
             "instance role '%.100s' (IMDSv2)", role);
    free(body);
    body = NULL;
    snprintf(path, sizeof(path), "/latest/meta-data/iam/security-credentials/%s", role);
    if (ckpt_imds_get(m, path, 2000, 64 * 1024, &body, &len, &http, NULL) != CKPT_OK ||
        http != 200 || !body) {
        seterr(err, "instance role credentials unavailable (HTTP %ld)", http);
        goto out;
    }
    j = cJSON_ParseWithLength(body, len);
    ak = cJSON_GetStringValue(cJSON_GetObjectItem(j, "AccessKeyId"));
    sk = cJSON_GetStringValue(cJSON_GetObjectItem(j, "SecretAccessKey"));
    tok = cJSON_GetStringValue(cJSON_GetObjectItem(j, "Token"));
    exp = cJSON_GetStringValue(cJSON_GetObjectItem(j, "Expiration"));
    if (!ak || !sk || !*ak || !*sk) {
        seterr(err, "instance role credentials malformed");
        goto out;
    }
    wipe_free(s->ak);
    wipe_free(s->sk);
    wipe_free(s->token);
    s->ak = strdup(ak);
    s->sk = strdup(sk);
    s->token = tok && *tok ? strdup(tok) : NULL;
    s->cred_expiry = parse_iso8601(exp);
    if (!s->cred_expiry)
        s->cred_expiry = (int64_t)time(NULL) + 900;
    st = s->ak && s->sk ? CKPT_OK : CKPT_E_NOMEM;
out:
    if (body) {
        memset(body, 0, len);
        free(body);
    }
    cJSON_Delete(j);
    return st;
}

/* Snapshot the credentials, region and clock offset for one request,
 * refreshing role credentials shortly before they expire. */
static ckpt_status snapshot(struct s3 *s, struct creds *c, char *err)
{
    ckpt_status st = CKPT_OK;

    memset(c, 0, sizeof(*c));
    pthread_mutex_lock(&s->mu);
    if (s->cred_expiry && (int64_t)time(NULL) + CRED_REFRESH_S >= s->cred_expiry) {
        st = imds_creds(s, err);
        if (st != CKPT_OK && s->ak && (int64_t)time(NULL) < s->cred_expiry)
            st = CKPT_OK;   /* old ones still valid: use them, retry later */
    }
    if (st == CKPT_OK) {
        snprintf(c->ak, sizeof(c->ak), "%s", s->ak);
        snprintf(c->sk, sizeof(c->sk), "%s", s->sk);
        c->token = s->token ? strdup(s->token) : NULL;
        snprintf(c->region, sizeof(c->region), "%s", s->region);
        c->skew_s = s->skew_s;
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

static void creds_wipe(struct creds *c)
{
    memset(c->sk, 0, sizeof(c->sk));
    wipe_free(c->token);
    c->token = NULL;
}

/* ---- requests ----------------------------------------------------------- */

struct s3_rq {
    const char *method;
    const char *key;          /* object key in the bucket, NULL = bucket */
    const char *query;        /* wire-encoded, NULL = none */
    const char *const *hdrs;  /* extra "Name: value" headers (signed) */
    size_t nhdrs;
    const void *body;
    size_t len;
    size_t max_body;          /* for the reply (0 = ERRBODY_MAX) */
    int body_error_check;     /* 200 replies may carry <Error> (Complete MPU) */
    int md5_check;            /* GET: compare body with an MD5 ETag */
    int *ambiguous;           /* set to 1 if an attempt failed without a
                                 definite answer (it may have been applied) */
    void *dst;                /* reply body into this buffer (max_body + 1) */
    const struct ckpt_range_watch *watch; /* with dst: streamed to the caller */
};

static int is_md5_etag(const char *etag, char hex[33])
{
    size_t n = strlen(etag), i;
    const char *p = etag;

    if (n == 34 && p[0] == '"' && p[33] == '"') {
        p++;
        n = 32;
    }
    if (n != 32)
        return 0;
    for (i = 0; i < 32; i++) {
        if (!isxdigit((unsigned char)p[i]))
            return 0;
        hex[i] = (char)tolower((unsigned char)p[i]);
    }
    hex[32] = '\0';
    return 1;
}

static void host_for(struct s3 *s, const char *region, char *out, size_t n)
{
    if (s->default_ep)
        snprintf(out, n, "%s%ss3.%s.amazonaws.com", s->path_style ? "" : s->bucket,
                 s->path_style ? "" : ".", region);
    else if (s->path_style)
        snprintf(out, n, "%s", s->ep_host);
    else
        snprintf(out, n, "%s.%s", s->bucket, s->ep_host);
}

/* Perform one logical request with signing, retries, region and clock
 * correction. On CKPT_OK, resp holds the 2xx reply; on failure it may hold
 * the last reply. The caller frees resp in every case. */
static ckpt_status s3_call(struct s3 *s, const struct s3_rq *rq,
                           struct ckpt_http_resp *resp, char *err)
{
    ckpt_status st = CKPT_E_INTERNAL;
    struct ckpt_retry r;
    struct creds c;
    char phash[65], md5[25], crc[9], host[512], amz[17], code[128], tmp[256];
    char *raw_path = NULL, *enc_path = NULL, *url = NULL, *auth = NULL;
    const char **lines = NULL;
    struct ckpt_sigv4_header *sh = NULL;
    size_t nl, i, cap = rq->nhdrs + 8;
    ckpt_retry_kind kind;
    int redirects = 0;

    memset(&c, 0, sizeof(c));
    memset(resp, 0, sizeof(*resp));
    /* A body is sent UNSIGNED-PAYLOAD: its integrity rides on the checksum
     * header (signed), so one digest of it is computed, not two; SHA-256 of
     * a chunk cost as much CPU as the rest of the upload. GCS keeps the
     * signed payload hash. An object PUT's checksum is CRC32C or MD5
     * (s->crc32c); parts and POSTs (multi-delete needs it) carry MD5. */
    int body = rq->body && rq->len > 0;
    int use_crc = s->crc32c && body && strcmp(rq->method, "PUT") == 0 && !rq->query;
    if (body && !s->gcs)
        snprintf(phash, sizeof(phash), "UNSIGNED-PAYLOAD");
    else
        ckpt_sha256_hex(rq->body ? rq->body : "", rq->len, phash);
    if (use_crc)
        ckpt_crc32c_base64(rq->body, rq->len, crc);
    else
        ckpt_md5_base64(rq->body ? rq->body : "", rq->len, md5);
    lines = calloc(cap, sizeof(*lines));
    sh = calloc(cap, sizeof(*sh));
    /* Raw path as signed (S3 mode encodes it once) and as sent. */
    if (asprintf(&raw_path, "%s%s%s%s%s", s->ep_path, s->path_style ? "/" : "",
                 s->path_style ? s->bucket : "", "/", rq->key ? rq->key : "") < 0)
        raw_path = NULL;
    if (!lines || !sh || !raw_path ||
        !(enc_path = ckpt_sigv4_uri_encode(raw_path, strlen(raw_path), 1))) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    ckpt_retry_begin(&r, &s->pol, &s->thr);
    for (;;) {
        char hh[600], hd[64], hc[100], hm[64], ht[4200], ha[1024];
        ckpt_status hst;
        struct ckpt_sigv4_input in;

        ckpt_throttle_wait(&s->thr);
        st = snapshot(s, &c, err);
        if (st != CKPT_OK)
            goto out;
        host_for(s, c.region, host, sizeof(host));
        free(url);
        url = NULL;
        if (asprintf(&url, "%s://%s%s%s%s", s->ep_scheme, host, enc_path,
                     rq->query ? "?" : "", rq->query ? rq->query : "") < 0) {
            url = NULL;
            st = CKPT_E_NOMEM;
            goto out;
        }
        ckpt_sigv4_amz_date((long long)time(NULL) + c.skew_s, amz);
        nl = 0;
        sh[nl].name = "host";
        sh[nl].value = host;
        snprintf(hh, sizeof(hh), "Host: %s", host);
        lines[nl++] = hh;
        sh[nl].name = "x-amz-date";
        sh[nl].value = amz;
        snprintf(hd, sizeof(hd), "x-amz-date: %s", amz);
        lines[nl++] = hd;
        sh[nl].name = "x-amz-content-sha256";
        sh[nl].value = phash;
        snprintf(hc, sizeof(hc), "x-amz-content-sha256: %s", phash);
        lines[nl++] = hc;
        if (use_crc) {
            sh[nl].name = "x-amz-checksum-crc32c";
            sh[nl].value = crc;
            snprintf(hm, sizeof(hm), "x-amz-checksum-crc32c: %s", crc);
            lines[nl++] = hm;
        } else if (rq->body || strcmp(rq->method, "PUT") == 0 ||
                   strcmp(rq->method, "POST") == 0) {
            sh[nl].name = "content-md5";
            sh[nl].value = md5;
            snprintf(hm, sizeof(hm), "Content-MD5: %s", md5);
            lines[nl++] = hm;
        }
        if (c.token) {
            sh[nl].name = "x-amz-security-token";
            sh[nl].value = c.token;
            snprintf(ht, sizeof(ht), "x-amz-security-token: %s", c.token);
            lines[nl++] = ht;
        }
        for (i = 0; i < rq->nhdrs; i++) {
            const char *colon = strchr(rq->hdrs[i], ':');
            size_t klen = colon ? (size_t)(colon - rq->hdrs[i]) : 0;
            char *name = strndup(rq->hdrs[i], klen);
            if (!name) {
                st = CKPT_E_NOMEM;
                goto out;
            }
            sh[nl].name = name;
            sh[nl].value = colon ? colon + 1 : "";
            lines[nl++] = rq->hdrs[i];
        }
        memset(&in, 0, sizeof(in));
        in.mode = CKPT_SIGV4_S3;
        in.method = rq->method;
        in.path = raw_path;
        in.query = rq->query;
        in.headers = sh;
        in.nheaders = nl;
        in.payload_hash = phash;
        in.access_key = c.ak;
        in.secret_key = c.sk;
        in.region = c.region;
        in.service = "s3";
        in.amz_date = amz;
        free(auth);
        auth = NULL;
        st = ckpt_sigv4_sign(&in, &auth, NULL, NULL);
        /* Free the names duplicated for the extra headers. */
        for (i = nl - rq->nhdrs; i < nl; i++)
            free((char *)sh[i].name);
        creds_wipe(&c);
        if (st != CKPT_OK)
            goto out;
        snprintf(ha, sizeof(ha), "Authorization: %s", auth);
        lines[nl++] = ha;

        {
            struct ckpt_http_req hr = { rq->method, url, lines, nl, rq->body,
                                        rq->len, rq->max_body ? rq->max_body : ERRBODY_MAX,
                                        rq->dst, rq->watch ? rq->watch->fn : NULL,
                                        rq->watch ? rq->watch->arg : NULL };
            ckpt_http_resp_free(resp);
            hst = ckpt_http_do(s->http, &hr, resp);
        }
        memset(ha, 0, sizeof(ha));
        if (hst == CKPT_E_NOMEM) {
            st = hst;
            goto out;
        }
        code[0] = '\0';
        if (resp->status >= 300 && resp->body && resp->len)
            ckpt_xml_find(resp->body, resp->len, "Error/Code", code, sizeof(code));
        if (resp->status == 200 && rq->body_error_check && resp->body &&
            ckpt_xml_find(resp->body, resp->len, "Error/Code", code, sizeof(code))) {
            /* CompleteMultipartUpload's "200 with an error inside". */
            resp->status = strcmp(code, "InternalError") == 0 ||
                           strcmp(code, "SlowDown") == 0 ? 503 : 400;
            if (strcmp(code, "InternalError") == 0)
                resp->status = 500;
        }
        /* Region discovery: AWS names the bucket's region on a redirect or
         * an AuthorizationHeaderMalformed 400. */
        if ((resp->status == 301 || resp->status == 307 || resp->status == 400) &&
            ckpt_http_header(resp, "x-amz-bucket-region", tmp, sizeof(tmp)) &&
            strcmp(tmp, c.region) != 0 && redirects++ < 2) {
            pthread_mutex_lock(&s->mu);
            free(s->region);
            s->region = strdup(tmp);
            if (!s->region)
                s->region = strdup("us-east-1");
            pthread_mutex_unlock(&s->mu);
            slog(s, CKPT_LOG_INFO, "s3: bucket %s is in region %s", s->bucket, tmp);
            continue;
        }
        st = ckpt_retry_classify(resp->status, resp->curl_code, code[0] ? code : NULL,
                                 &kind);
        /* A body cut at max_body is the caller's business (too large), not
         * a damaged transfer: never retried, never MD5-checked. */
        if (st == CKPT_OK && rq->md5_check && resp->status == 200 &&
            !resp->body_overflow) {
            char et[CKPT_ETAG_MAX], want[33], got[33];
            if (ckpt_http_header(resp, "ETag", et, sizeof(et)) &&
                is_md5_etag(et, want)) {
                ckpt_md5_hex(resp->body ? resp->body : "", resp->len, got);
                if (strcmp(want, got) != 0) {
                    st = CKPT_E_CORRUPT;
                    kind = CKPT_RETRY_AGAIN;
                    snprintf(code, sizeof(code), "BodyMD5Mismatch");
                }
            }
        }
        if (st == CKPT_OK) {
            ckpt_throttle_note(&s->thr, 0);
            break;
        }
        if (kind == CKPT_RETRY_SKEW &&
            ckpt_http_header(resp, "Date", tmp, sizeof(tmp))) {
            int64_t off;
            if (ckpt_retry_skew_from_date(tmp, &off)) {
                pthread_mutex_lock(&s->mu);
                s->skew_s = off;
                pthread_mutex_unlock(&s->mu);
                slog(s, CKPT_LOG_WARN, "s3: clock skew %lld s corrected",
                     (long long)off);
            }
        }
        if (resp->status)
            seterr(err, "%s %s %s/%s: HTTP %ld %s", s->gcs ? "gs" : "s3", rq->method,
                   s->bucket, rq->key ? rq->key : "", resp->status,
                   code[0] ? code : "");
        else
            seterr(err, "%s %s %s/%s: %s", s->gcs ? "gs" : "s3", rq->method,
                   s->bucket, rq->key ? rq->key : "", resp->errmsg);
        if (rq->ambiguous && kind != CKPT_RETRY_NEVER &&
            (resp->status == 0 || resp->status >= 500))
            *rq->ambiguous = 1;
        if (!ckpt_retry_again(&r, kind))
            break;
        slog(s, CKPT_LOG_DEBUG, "%s (attempt %u, retrying)", err ? err : "s3 retry",
             r.attempt);
    }
out:
    creds_wipe(&c);
    free(lines);
    free(sh);
    free(raw_path);
    free(enc_path);
    free(url);
    if (auth) {
        memset(auth, 0, strlen(auth));
        free(auth);
    }
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

static char *full_key(struct s3 *s, const char *key)
{
    char *k = NULL;

    if (asprintf(&k, "%s%s", s->prefix, key) < 0)
        k = NULL;
    return k;
}

static void etag_from(struct s3 *s, const struct ckpt_http_resp *resp, char *out)
{
    if (!out)
        return;
    out[0] = '\0';
    if (s->gcs && ckpt_http_header(resp, "x-goog-generation", out, CKPT_ETAG_MAX))
        return;
    ckpt_http_header(resp, "ETag", out, CKPT_ETAG_MAX);
}

/* Headers shared by PutObject and CreateMultipartUpload. */
static size_t object_headers(struct s3 *s, char lines[4][300])
{
    size_t n = 0;

    if (s->storage_class && *s->storage_class)
        snprintf(lines[n++], 300, "%s: %s",
                 s->gcs ? "x-goog-storage-class" : "x-amz-storage-class", s->storage_class);
    if (s->sse && *s->sse)
        snprintf(lines[n++], 300, "x-amz-server-side-encryption: %s", s->sse);
    if (s->kms_key && *s->kms_key)
        snprintf(lines[n++], 300, "x-amz-server-side-encryption-aws-kms-key-id: %s",
                 s->kms_key);
    return n;
}

/* Conditional header for a put; writes into line, @return 1 if any. */
static int cond_header(struct s3 *s, const struct ckpt_put_opts *o, char *line,
                       size_t n)
{
    if (o->cond == CKPT_PUT_IF_NONE_MATCH) {
        snprintf(line, n, s->gcs ? "x-goog-if-generation-match: 0" : "If-None-Match: *");
        return 1;
    }
    if (o->cond == CKPT_PUT_IF_MATCH) {
        const char *e = o->if_match ? o->if_match : "";
        if (s->gcs)
            snprintf(line, n, "x-goog-if-generation-match: %s", e);
        else if (e[0] == '"')
            snprintf(line, n, "If-Match: %s", e);
        else
            snprintf(line, n, "If-Match: \"%s\"", e);
        return 1;
    }
    return 0;
}

/* ---- multipart ------------------------------------------------------------ */

struct mpu_parse {
    char upload_id[1024];
    char etag[CKPT_ETAG_MAX];
};

static int mpu_cb(void *u, const char *path, const char *text, size_t len)
{
    struct mpu_parse *m = u;

    if (strcmp(path, "InitiateMultipartUploadResult/UploadId") == 0 &&
        len < sizeof(m->upload_id))
        memcpy(m->upload_id, text, len + 1);
    else if (strcmp(path, "CompleteMultipartUploadResult/ETag") == 0 &&
             len < sizeof(m->etag))
        memcpy(m->etag, text, len + 1);
    return 0;
}

static ckpt_status put_multipart(struct s3 *s, const char *fk, const uint8_t *buf,
                                 size_t len, const struct ckpt_put_opts *o,
                                 char *etag_out, char *err)
{
    ckpt_status st;
    struct ckpt_http_resp resp;
    struct mpu_parse mp;
    char oh[4][300], cond[300], *uid_enc = NULL, *query = NULL, *xml = NULL;
    const char *hdrs[5];
    size_t nh = object_headers(s, oh), i, nparts, part, xlen = 0, xcap = 0;
    char (*etags)[CKPT_ETAG_MAX] = NULL;
    int started = 0;

    memset(&mp, 0, sizeof(mp));
    for (i = 0; i < nh; i++)
        hdrs[i] = oh[i];
    part = s->part_size;
    /* At most 10,000 parts: grow the part size for very large objects. */
    if ((len + part - 1) / part > 10000)
        part = (len + 9999) / 10000;
    nparts = (len + part - 1) / part;
    etags = calloc(nparts, sizeof(*etags));
    if (!etags) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    {
        struct s3_rq rq = { "POST", fk, "uploads=", hdrs, nh, NULL, 0, 0, 0, 0, NULL, NULL, NULL };
        st = s3_call(s, &rq, &resp, err);
        if (st == CKPT_OK)
            ckpt_xml_parse(resp.body, resp.len, mpu_cb, &mp);
        ckpt_http_resp_free(&resp);
    }
    if (st != CKPT_OK)
        goto out;
    if (!mp.upload_id[0]) {
        st = CKPT_E_CORRUPT;
        seterr(err, "s3 multipart: no UploadId in reply");
        goto out;
    }
    started = 1;
    uid_enc = ckpt_sigv4_uri_encode(mp.upload_id, strlen(mp.upload_id), 0);
    if (!uid_enc) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    for (i = 0; i < nparts; i++) {
        size_t off = i * part, n = len - off < part ? len - off : part;
        struct s3_rq rq = { "PUT", fk, NULL, NULL, 0, buf + off, n, 0, 0, 0, NULL, NULL, NULL };
        free(query);
        if (asprintf(&query, "partNumber=%zu&uploadId=%s", i + 1, uid_enc) < 0) {
            query = NULL;
            st = CKPT_E_NOMEM;
            goto out;
        }
        rq.query = query;
        st = s3_call(s, &rq, &resp, err);
        if (st == CKPT_OK && !ckpt_http_header(&resp, "ETag", etags[i], CKPT_ETAG_MAX)) {
            st = CKPT_E_CORRUPT;
            seterr(err, "s3 multipart: part %zu without ETag", i + 1);
        }
        ckpt_http_resp_free(&resp);
        if (st != CKPT_OK)
            goto out;
    }
    {
        int bad = ckpt_xml_raw_append(&xml, &xlen, &xcap, "<CompleteMultipartUpload>");
        for (i = 0; i < nparts && !bad; i++) {
            char num[96];
            snprintf(num, sizeof(num), "<Part><PartNumber>%zu</PartNumber><ETag>", i + 1);
            bad = ckpt_xml_raw_append(&xml, &xlen, &xcap, num) ||
                  ckpt_xml_escape_append(&xml, &xlen, &xcap, etags[i]) ||
                  ckpt_xml_raw_append(&xml, &xlen, &xcap, "</ETag></Part>");
        }
        if (bad || ckpt_xml_raw_append(&xml, &xlen, &xcap, "</CompleteMultipartUpload>")) {
            st = CKPT_E_NOMEM;
            goto out;
        }
    }
    {
        struct s3_rq rq = { "POST", fk, NULL, hdrs, 0, xml, xlen, 0, 1, 0, NULL, NULL, NULL };
        free(query);
        if (asprintf(&query, "uploadId=%s", uid_enc) < 0) {
            query = NULL;
            st = CKPT_E_NOMEM;
            goto out;
        }
        rq.query = query;
        if (cond_header(s, o, cond, sizeof(cond))) {
            hdrs[0] = cond;
            rq.nhdrs = 1;
        }
        st = s3_call(s, &rq, &resp, err);
        if (st == CKPT_OK) {
            ckpt_xml_parse(resp.body, resp.len, mpu_cb, &mp);
            if (etag_out) {
                snprintf(etag_out, CKPT_ETAG_MAX, "%s", mp.etag);
                if (s->gcs)
                    ckpt_http_header(&resp, "x-goog-generation", etag_out, CKPT_ETAG_MAX);
            }
        }
        ckpt_http_resp_free(&resp);
    }
    if (st == CKPT_OK)
        started = 0;
out:
    if (started) {
        /* Abort so the parts do not linger (and cost) forever; a lifecycle
         * rule catches the uploads a crash leaves behind (docs/stores.md). */
        char abort_err[CKPT_ERR_MAX];
        char *q = NULL;
        if (uid_enc && asprintf(&q, "uploadId=%s", uid_enc) >= 0) {
            struct s3_rq rq = { "DELETE", fk, q, NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL };
            if (s3_call(s, &rq, &resp, abort_err) != CKPT_OK)
                slog(s, CKPT_LOG_WARN, "s3: abort of multipart upload failed: %s",
                     abort_err);
            ckpt_http_resp_free(&resp);
            free(q);
        }
    }
    free(etags);
    free(uid_enc);
    free(query);
    free(xml);
    return st;
}

/* ---- operations ------------------------------------------------------------ */

/* A conditional put was refused after an earlier attempt of it failed
 * without a definite answer (reset, timeout, 5xx): that attempt may have
 * been applied, and the refusal is then our own write seen again. If the
 * object now holds exactly our bytes (its single-part ETag is their MD5),
 * the put succeeded. */
static ckpt_status settle_ambiguous(struct s3 *s, const char *fk, const void *buf,
                                    size_t len, char *etag_out, char *err)
{
    ckpt_status st = CKPT_E_PRECONDITION;
    struct ckpt_http_resp resp;
    char et[CKPT_ETAG_MAX], want[33], have[33], herr[CKPT_ERR_MAX];
    struct s3_rq rq = { "HEAD", fk, NULL, NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL };

    if (s3_call(s, &rq, &resp, herr) == CKPT_OK &&
        ckpt_http_header(&resp, "ETag", et, sizeof(et)) && is_md5_etag(et, have)) {
        ckpt_md5_hex(buf ? buf : "", len, want);
        if (strcmp(want, have) == 0) {
            st = CKPT_OK;
            etag_from(s, &resp, etag_out);
            slog(s, CKPT_LOG_INFO, "s3: conditional put of %s had landed before a "
                 "failed attempt", fk);
        }
    }
    (void)err;   /* on refusal, the original error detail stands */
    ckpt_http_resp_free(&resp);
    return st;
}

static ckpt_status s3_put(struct ckpt_store *st_, const char *key, const void *buf,
                          size_t len, const struct ckpt_put_opts *opts,
                          char *etag_out, char *err)
{
    struct s3 *s = (struct s3 *)st_;
    static const struct ckpt_put_opts plain = { CKPT_PUT_PLAIN, NULL, 0 };
    ckpt_status st;
    struct ckpt_http_resp resp;
    char oh[4][300], cond[300], *fk = NULL;
    const char *hdrs[5];
    size_t nh, i;
    int ambiguous = 0;

    memset(&resp, 0, sizeof(resp));
    if (!opts)
        opts = &plain;
    st = ckpt_store_prefixed_key(s->prefix, key, &fk, err);
    if (st != CKPT_OK)
        goto out;
    if (opts->cond == CKPT_PUT_IF_MATCH && (!opts->if_match || !*opts->if_match)) {
        st = CKPT_E_INVAL;
        seterr(err, "If-Match put without an etag");
        goto out;
    }
    if (len > s->mp_min) {
        st = put_multipart(s, fk, buf, len, opts, etag_out, err);
        goto out;
    }
    nh = object_headers(s, oh);
    for (i = 0; i < nh; i++)
        hdrs[i] = oh[i];
    if (cond_header(s, opts, cond, sizeof(cond)))
        hdrs[nh++] = cond;
    {
        struct s3_rq rq = { "PUT", fk, NULL, hdrs, nh, buf ? buf : "", len, 0, 0, 0,
                            &ambiguous, NULL, NULL };
        st = s3_call(s, &rq, &resp, err);
    }
    if (st == CKPT_OK)
        etag_from(s, &resp, etag_out);
    else if (st == CKPT_E_PRECONDITION && ambiguous && s->verify_md5)
        st = settle_ambiguous(s, fk, buf, len, etag_out, err);
out:
    ckpt_http_resp_free(&resp);
    free(fk);
    return st;
}

static ckpt_status s3_get(struct ckpt_store *st_, const char *key, size_t max_len,
                          unsigned flags, void **buf_out, size_t *len_out, char *etag_out,
                          char *err)
{
    struct s3 *s = (struct s3 *)st_;
    ckpt_status st;
    struct ckpt_http_resp resp;
    char *fk = NULL;

    memset(&resp, 0, sizeof(resp));
    *buf_out = NULL;
    *len_out = 0;
    st = ckpt_store_prefixed_key(s->prefix, key, &fk, err);
    if (st != CKPT_OK)
        goto out;
    {
        /* Error replies are small; a body bigger than max_len is refused
         * rather than buffered. */
        struct s3_rq rq = { "GET", fk, NULL, NULL, 0, NULL, 0,
                            max_len ? max_len : 1, 0,
                            s->verify_md5 && !(flags & CKPT_GET_SELF_CHECKED), NULL, NULL, NULL };
        st = s3_call(s, &rq, &resp, err);
    }
    if (st != CKPT_OK)
        goto out;
    if (resp.body_overflow) {
        st = CKPT_E_CORRUPT;
        seterr(err, "%s/%s: object larger than %zu bytes", s->bucket, fk, max_len);
        goto out;
    }
    etag_from(s, &resp, etag_out);
    st = ckpt_http_resp_take_body(&resp, buf_out, len_out);
out:
    ckpt_http_resp_free(&resp);
    free(fk);
    return st;
}

static ckpt_status s3_get_range(struct ckpt_store *st_, const char *key, uint64_t off,
                                size_t len, unsigned flags, void *dst,
                                const struct ckpt_range_watch *watch, char *err)
{
    struct s3 *s = (struct s3 *)st_;
    ckpt_status st;
    struct ckpt_http_resp resp;
    char *fk = NULL, range[80];
    const char *hdrs[1] = { range };

    (void)flags; /* a range has no digest to check: the caller verifies */
    memset(&resp, 0, sizeof(resp));
    if (len == 0)
        return CKPT_E_INVAL;
    st = ckpt_store_prefixed_key(s->prefix, key, &fk, err);
    if (st != CKPT_OK)
        goto out;
    snprintf(range, sizeof(range), "Range: bytes=%llu-%llu", (unsigned long long)off,
             (unsigned long long)(off + len - 1));
    {
        struct s3_rq rq = { "GET", fk, NULL, hdrs, 1, NULL, 0, len, 0, 0, NULL, dst, watch };
        st = s3_call(s, &rq, &resp, err);
    }
    if (st != CKPT_OK)
        goto out;
    /* 206 with exactly the bytes asked for; a server that ignored the range
     * (200, the whole object) or cut it short is refused, not trusted. */
    if (resp.status != 206 || resp.body_overflow) {
        st = CKPT_E_CORRUPT;
        seterr(err, "%s/%s: range %llu+%zu answered with HTTP %ld%s", s->bucket, fk,
               (unsigned long long)off, len, resp.status,
               resp.body_overflow ? " and more bytes" : "");
        goto out;
    }
    if (resp.len != len) {
        st = CKPT_E_CORRUPT;
        seterr(err, "%s/%s: range %llu+%zu: %zu bytes came back", s->bucket, fk,
               (unsigned long long)off, len, resp.len);
    }
out:
    ckpt_http_resp_free(&resp);
    free(fk);
    return st;
}

static ckpt_status s3_head(struct ckpt_store *st_, const char *key, uint64_t *size,
                           char *etag_out, char *err)
{
    struct s3 *s = (struct s3 *)st_;
    ckpt_status st;
    struct ckpt_http_resp resp;
    char *fk = NULL, cl[64];

    memset(&resp, 0, sizeof(resp));
    st = ckpt_store_prefixed_key(s->prefix, key, &fk, err);
    if (st != CKPT_OK)
        goto out;
    {
        struct s3_rq rq = { "HEAD", fk, NULL, NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL };
        st = s3_call(s, &rq, &resp, err);
    }
    if (st != CKPT_OK)
        goto out;
    if (size)
        *size = ckpt_http_header(&resp, "Content-Length", cl, sizeof(cl))
                    ? strtoull(cl, NULL, 10) : 0;
    etag_from(s, &resp, etag_out);
out:
    ckpt_http_resp_free(&resp);
    free(fk);
    return st;
}

struct list_state {
    struct s3 *s;
    ckpt_list_cb cb;
    void *user;
    int stopped;
    int truncated;
    char token[2048];
    char key[2048];
    uint64_t size;
    int64_t mtime_ms;
    size_t count;
};

static int list_cb(void *u, const char *path, const char *text, size_t len)
{
    struct list_state *ls = u;
    size_t plen = strlen(ls->s->prefix);

    if (strcmp(path, "ListBucketResult/Contents/Key") == 0) {
        snprintf(ls->key, sizeof(ls->key), "%s", len < sizeof(ls->key) ? text : "");
    } else if (strcmp(path, "ListBucketResult/Contents/Size") == 0) {
        ls->size = strtoull(text, NULL, 10);
    } else if (strcmp(path, "ListBucketResult/Contents/LastModified") == 0) {
        ls->mtime_ms = parse_iso8601(text) * 1000;
    } else if (strcmp(path, "ListBucketResult/Contents") == 0) {
        if (ls->key[0] && strncmp(ls->key, ls->s->prefix, plen) == 0 &&
            ls->key[plen]) {
            struct ckpt_obj_info oi = { ls->key + plen, ls->size, ls->mtime_ms };
            ls->count++;
            if (ls->cb(ls->user, &oi)) {
                ls->stopped = 1;
                return 1;
            }
        }
        ls->key[0] = '\0';
        ls->size = 0;
        ls->mtime_ms = 0;
    } else if (strcmp(path, "ListBucketResult/IsTruncated") == 0) {
        ls->truncated = strcmp(text, "true") == 0;
    } else if (strcmp(path, "ListBucketResult/NextContinuationToken") == 0) {
        if (len >= sizeof(ls->token))
            return 1;
        memcpy(ls->token, text, len + 1);
    }
    return 0;
}

static ckpt_status s3_list(struct ckpt_store *st_, const char *prefix,
                           ckpt_list_cb cb, void *user, char *err)
{
    struct s3 *s = (struct s3 *)st_;
    ckpt_status st = CKPT_OK;
    struct ckpt_http_resp resp;
    struct list_state ls;
    char *fp = NULL, *fp_enc = NULL, *tok_enc = NULL, *query = NULL;

    memset(&resp, 0, sizeof(resp));
    memset(&ls, 0, sizeof(ls));
    ls.s = s;
    ls.cb = cb;
    ls.user = user;
    if (asprintf(&fp, "%s%s", s->prefix, prefix ? prefix : "") < 0) {
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
        struct s3_rq rq = { "GET", NULL, NULL, NULL, 0, NULL, 0, LIST_BODY_MAX, 0, 0, NULL, NULL, NULL };
        free(query);
        query = NULL;
        free(tok_enc);
        tok_enc = NULL;
        if (ls.token[0] &&
            !(tok_enc = ckpt_sigv4_uri_encode(ls.token, strlen(ls.token), 0))) {
            st = CKPT_E_NOMEM;
            goto out;
        }
        if (asprintf(&query, "list-type=2&max-keys=1000&prefix=%s%s%s", fp_enc,
                     tok_enc ? "&continuation-token=" : "", tok_enc ? tok_enc : "") < 0) {
            query = NULL;
            st = CKPT_E_NOMEM;
            goto out;
        }
        rq.query = query;
        st = s3_call(s, &rq, &resp, err);
        if (st != CKPT_OK)
            goto out;
        ls.truncated = 0;
        ls.token[0] = '\0';
        st = ckpt_xml_parse(resp.body, resp.len, list_cb, &ls);
        ckpt_http_resp_free(&resp);
        if (ls.stopped) {
            st = CKPT_OK;
            goto out;
        }
        if (st != CKPT_OK) {
            seterr(err, "s3 list %s: malformed reply", fp);
            goto out;
        }
        if (!ls.truncated)
            break;
        if (!ls.token[0]) {
            st = CKPT_E_CORRUPT;
            seterr(err, "s3 list %s: truncated page without a continuation token", fp);
            goto out;
        }
    }
out:
    ckpt_http_resp_free(&resp);
    free(fp);
    free(fp_enc);
    free(tok_enc);
    free(query);
    return st;
}

struct del_state {
    char first_key[512];
    char first_code[128];
    char cur_key[512];
    char cur_code[128];
    size_t errors;
};

static int del_cb(void *u, const char *path, const char *text, size_t len)
{
    struct del_state *d = u;

    (void)len;
    if (strcmp(path, "DeleteResult/Error/Key") == 0)
        snprintf(d->cur_key, sizeof(d->cur_key), "%s", text);
    else if (strcmp(path, "DeleteResult/Error/Code") == 0)
        snprintf(d->cur_code, sizeof(d->cur_code), "%s", text);
    else if (strcmp(path, "DeleteResult/Error") == 0) {
        /* A key that is already gone is what we wanted. */
        if (strcmp(d->cur_code, "NoSuchKey") != 0) {
            if (!d->errors++) {
                snprintf(d->first_key, sizeof(d->first_key), "%s", d->cur_key);
                snprintf(d->first_code, sizeof(d->first_code), "%s", d->cur_code);
            }
        }
        d->cur_key[0] = d->cur_code[0] = '\0';
    }
    return 0;
}

static ckpt_status del_one(struct s3 *s, const char *key, char *err)
{
    ckpt_status st;
    struct ckpt_http_resp resp;
    char *fk = full_key(s, key);

    if (!fk)
        return CKPT_E_NOMEM;
    {
        struct s3_rq rq = { "DELETE", fk, NULL, NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL };
        st = s3_call(s, &rq, &resp, err);
    }
    if (st == CKPT_E_NOENT)
        st = CKPT_OK;
    ckpt_http_resp_free(&resp);
    free(fk);
    return st;
}

static ckpt_status del_batch(struct s3 *s, const char *const *keys, size_t n,
                             char *err)
{
    ckpt_status st = CKPT_OK;
    struct ckpt_http_resp resp;
    char *xml = NULL;
    size_t xlen = 0, xcap = 0, i;
    int attempt;

    memset(&resp, 0, sizeof(resp));
    {
        int bad = ckpt_xml_raw_append(&xml, &xlen, &xcap,
                                      "<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                                      "<Quiet>true</Quiet>");
        for (i = 0; i < n && !bad; i++) {
            char *fk = full_key(s, keys[i]);
            bad = !fk || ckpt_xml_raw_append(&xml, &xlen, &xcap, "<Object><Key>") ||
                  ckpt_xml_escape_append(&xml, &xlen, &xcap, fk) ||
                  ckpt_xml_raw_append(&xml, &xlen, &xcap, "</Key></Object>");
            free(fk);
        }
        if (bad || ckpt_xml_raw_append(&xml, &xlen, &xcap, "</Delete>")) {
            st = CKPT_E_NOMEM;
            goto out;
        }
    }
    /* Per-key errors come back in a 200: retry the batch a few times (it is
     * idempotent), then report the first key that failed. */
    for (attempt = 0; attempt < 3; attempt++) {
        struct del_state d;
        struct s3_rq rq = { "POST", NULL, "delete=", NULL, 0, xml, xlen,
                            4 * MIB, 0, 0, NULL, NULL, NULL };
        memset(&d, 0, sizeof(d));
        st = s3_call(s, &rq, &resp, err);
        if (st != CKPT_OK)
            goto out;
        if (ckpt_xml_parse(resp.body, resp.len, del_cb, &d) != CKPT_OK) {
            st = CKPT_E_CORRUPT;
            seterr(err, "s3 delete: malformed reply");
            goto out;
        }
        ckpt_http_resp_free(&resp);
        if (!d.errors)
            goto out;
        st = strcmp(d.first_code, "AccessDenied") == 0 ? CKPT_E_AUTH : CKPT_E_TRANSIENT;
        seterr(err, "s3 delete: %zu keys failed, first %s: %s", d.errors,
               d.first_key, d.first_code);
        if (st == CKPT_E_AUTH)
            goto out;
    }
out:
    ckpt_http_resp_free(&resp);
    free(xml);
    return st;
}

static ckpt_status s3_del(struct ckpt_store *st_, const char *const *keys,
                          size_t n, char *err)
{
    struct s3 *s = (struct s3 *)st_;
    ckpt_status st = CKPT_OK;
    size_t i;

    for (i = 0; i < n; i++) {
        st = key_check(keys[i], err);
        if (st != CKPT_OK)
            goto out;
    }
    if (s->gcs) {
        /* The GCS XML API has no multi-object delete. */
        for (i = 0; i < n && st == CKPT_OK; i++)
            st = del_one(s, keys[i], err);
        goto out;
    }
    for (i = 0; i < n && st == CKPT_OK; i += DELETE_BATCH)
        st = del_batch(s, keys + i, n - i < DELETE_BATCH ? n - i : DELETE_BATCH, err);
out:
    return st;
}

static ckpt_status s3_barrier(struct ckpt_store *st_, char *err)
{
    (void)st_;
    (void)err;
    /* Every put is durable when it returns: nothing is deferred. */
    return CKPT_OK;
}

static int s3_has_conditional(struct ckpt_store *st_)
{
    return ((struct s3 *)st_)->conditional;
}

static void s3_close(struct ckpt_store *st_)
{
    struct s3 *s = (struct s3 *)st_;

    if (!s)
        return;
    ckpt_http_free(s->http);
    ckpt_throttle_destroy(&s->thr);
    pthread_mutex_destroy(&s->mu);
    free(s->base.url);
    free(s->bucket);
    free(s->prefix);
    free(s->ep_scheme);
    free(s->ep_host);
    free(s->ep_path);
    free(s->storage_class);
    free(s->sse);
    free(s->kms_key);
    free(s->region);
    wipe_free(s->ak);
    wipe_free(s->sk);
    wipe_free(s->token);
    free(s);
}

static const struct ckpt_store_ops s3_ops = {
    "s3", s3_put, s3_get, s3_get_range, s3_head, s3_list, s3_del, s3_barrier,
    s3_has_conditional, s3_close
};
static const struct ckpt_store_ops gs_ops = {
    "gs", s3_put, s3_get, s3_get_range, s3_head, s3_list, s3_del, s3_barrier,
    s3_has_conditional, s3_close
};

/* ---- open ---------------------------------------------------------------- */

static int host_is_ip_or_local(const char *host, int *loopback)
{
    char h[256];
    size_t n;
    int ip = 1;
    const char *p;

    /* Strip the port (and brackets of an IPv6 literal). */
    if (host[0] == '[') {
        n = strcspn(host + 1, "]");
        snprintf(h, sizeof(h), "%.*s", (int)n, host + 1);
        *loopback = strcmp(h, "::1") == 0;
        return 1;
    }
    n = strcspn(host, ":");
    snprintf(h, sizeof(h), "%.*s", (int)n, host);
    for (p = h; *p; p++)
        if (!isdigit((unsigned char)*p) && *p != '.')
            ip = 0;
    *loopback = strncmp(h, "127.", 4) == 0 || strcmp(h, "localhost") == 0;
    return ip || strcmp(h, "localhost") == 0;
}

static ckpt_status parse_endpoint(struct s3 *s, const char *ep, char *err)
{
    const char *p = strstr(ep, "://"), *slash;
    ckpt_status st = CKPT_OK;
    size_t n;

    if (!p) {
        seterr(err, "endpoint URL without scheme: %s", ep);
        st = CKPT_E_CONFIG;
        goto out;
    }
    s->ep_scheme = strndup(ep, (size_t)(p - ep));
    p += 3;
    slash = strchr(p, '/');
    n = slash ? (size_t)(slash - p) : strlen(p);
    s->ep_host = strndup(p, n);
    s->ep_path = strdup(slash ? slash : "");
    if (!s->ep_scheme || !s->ep_host || !s->ep_path) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    n = strlen(s->ep_path);
    while (n && s->ep_path[n - 1] == '/')
        s->ep_path[--n] = '\0';
    if ((strcmp(s->ep_scheme, "https") != 0 && strcmp(s->ep_scheme, "http") != 0) ||
        !*s->ep_host) {
        seterr(err, "bad endpoint URL: %s", ep);
        st = CKPT_E_CONFIG;
    }
out:
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

ckpt_status ckpt_store_s3_open(const char *url, const struct ckpt_store_config *cfg,
                               struct ckpt_store **out, char *err)
{
    ckpt_status st = CKPT_OK;
    struct s3 *s = NULL;
    struct profile prof;
    const char *rest, *slash, *v, *ep = NULL;
    struct ckpt_http_opts ho;
    int loopback = 0, gcs;
    size_t n;
    char crcbuf[9];

    memset(&prof, 0, sizeof(prof));
    *out = NULL;
    if (!url || (strncmp(url, "s3://", 5) != 0 && strncmp(url, "gs://", 5) != 0)) {
        seterr(err, "not an s3:// or gs:// URL");
        st = CKPT_E_CONFIG;
        goto out;
    }
    gcs = url[0] == 'g';
    s = calloc(1, sizeof(*s));
    if (!s) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    pthread_mutex_init(&s->mu, NULL);
    ckpt_throttle_init(&s->thr);
    ckpt_retry_policy_init_budget(&s->pol, cfg ? cfg->retry_budget_ms : 0);
    s->base.ops = gcs ? &gs_ops : &s3_ops;
    s->gcs = gcs;
    s->base.url = strdup(url);
    rest = url + 5;
    slash = strchr(rest, '/');
    s->bucket = slash ? strndup(rest, (size_t)(slash - rest)) : strdup(rest);
    v = slash ? slash + 1 : "";
    n = strlen(v);
    while (n && v[n - 1] == '/')
        n--;
    if (n) {
        if (asprintf(&s->prefix, "%.*s/", (int)n, v) < 0)
            s->prefix = NULL;
    } else {
        s->prefix = strdup("");
    }
    if (!s->base.url || !s->bucket || !s->prefix) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    if (!*s->bucket || strpbrk(s->bucket, "?#@:") ||
        !prefix_valid(s->prefix)) {
        seterr(err, "bad bucket or prefix in %s", url);
        st = CKPT_E_CONFIG;
        goto out;
    }

    load_profile(&prof);
    /* Credentials: GOOGLE_* for gs://, then the AWS environment, then the
     * profile, then (s3:// only) the instance role. */
    if (gcs && getenv("GOOGLE_ACCESS_KEY_ID") && getenv("GOOGLE_SECRET_ACCESS_KEY")) {
        s->ak = strdup(getenv("GOOGLE_ACCESS_KEY_ID"));
        s->sk = strdup(getenv("GOOGLE_SECRET_ACCESS_KEY"));
        snprintf(s->base.cred_source, sizeof(s->base.cred_source),
                 "environment (GOOGLE_ACCESS_KEY_ID)");
    } else if (getenv("AWS_ACCESS_KEY_ID") && *getenv("AWS_ACCESS_KEY_ID") &&
               getenv("AWS_SECRET_ACCESS_KEY")) {
        s->ak = strdup(getenv("AWS_ACCESS_KEY_ID"));
        s->sk = strdup(getenv("AWS_SECRET_ACCESS_KEY"));
        v = getenv("AWS_SESSION_TOKEN");
        if (v && *v)
            s->token = strdup(v);
        snprintf(s->base.cred_source, sizeof(s->base.cred_source),
                 "environment (AWS_ACCESS_KEY_ID%s)", s->token ? ", AWS_SESSION_TOKEN" : "");
    } else if (prof.ak && prof.sk) {
        snprintf(s->base.cred_source, sizeof(s->base.cred_source), "profile '%.100s' in %.120s",
                 prof.name, prof.ak_file);
        s->ak = prof.ak;
        s->sk = prof.sk;
        s->token = prof.token;
        prof.ak = prof.sk = prof.token = NULL;
    }

    if (gcs) {
        s->region = strdup("auto");
    } else {
        v = getenv("AWS_REGION");
        if (!v || !*v)
            v = getenv("AWS_DEFAULT_REGION");
        if (!v || !*v)
            v = prof.region;
        s->region = strdup(v && *v ? v : "us-east-1");
    }
    if (!s->region) {
        st = CKPT_E_NOMEM;
        goto out;
    }

    if (gcs) {
        ep = getenv("CKPT_GS_ENDPOINT");   /* tests only */
        if (!ep || !*ep)
            ep = "https://storage.googleapis.com";
        s->path_style = 1;
    } else {
        ep = getenv("AWS_ENDPOINT_URL_S3");
        if (!ep || !*ep)
            ep = getenv("AWS_ENDPOINT_URL");
        if (!ep || !*ep)
            ep = prof.s3_endpoint;
        if (!ep || !*ep)
            ep = prof.endpoint;
        s->path_style = prof.path_style;
    }
    if (ep && *ep) {
        st = parse_endpoint(s, ep, err);
        if (st != CKPT_OK)
            goto out;
        if (host_is_ip_or_local(s->ep_host, &loopback))
            s->path_style = 1;   /* no virtual host on an IP address */
    } else {
        s->default_ep = 1;
        s->ep_scheme = strdup("https");
        s->ep_host = strdup("");
        s->ep_path = strdup("");
        if (!s->ep_scheme || !s->ep_host || !s->ep_path) {
            st = CKPT_E_NOMEM;
            goto out;
        }
    }
    /* A dotted bucket name does not match the wildcard certificate. */
    if (strchr(s->bucket, '.') && strcmp(s->ep_scheme, "https") == 0)
        s->path_style = 1;

    if (!s->ak && !gcs) {
        pthread_mutex_lock(&s->mu);
        st = imds_creds(s, err);
        pthread_mutex_unlock(&s->mu);
        if (st != CKPT_OK)
            goto out;
    }
    if (!s->ak || !s->sk) {
        seterr(err, "no credentials found for %s (environment, profile%s)", url,
               gcs ? "" : ", instance role");
        st = CKPT_E_AUTH;
        goto out;
    }

    /* Conditional writes: AWS S3, GCS and most services enforce them; the
     * local test peer s3rver ignores them, so loopback endpoints default to
     * "not enforced" (override with CKPT_S3_CONDITIONAL=0|1). */
    s->conditional = !loopback;
    v = getenv("CKPT_S3_CONDITIONAL");
    if (v && (*v == '0' || *v == '1'))
        s->conditional = *v == '1';

    /* The checksum an object PUT carries. Content-MD5 is what every
     * S3-compatible service checks; AWS also checks x-amz-checksum-crc32c,
     * which costs ~1/30 of the CPU (ISA-L): the default on AWS's own
     * endpoints, md5 elsewhere, CKPT_S3_CHECKSUM=md5|crc32c|auto to choose. */
    v = getenv("CKPT_S3_CHECKSUM");
    if (!v || !*v || strcmp(v, "auto") == 0) {
        size_t hl = strlen(s->ep_host);
        s->crc32c = !gcs && ckpt_crc32c_base64("", 0, crcbuf) &&
                    (s->default_ep ||
                     (hl > 14 && strcmp(s->ep_host + hl - 14, ".amazonaws.com") == 0));
    } else if (strcmp(v, "md5") == 0) {
        s->crc32c = 0;
    } else if (strcmp(v, "crc32c") == 0 && !gcs && ckpt_crc32c_base64("", 0, crcbuf)) {
        s->crc32c = 1;
    } else {
        seterr(err, "CKPT_S3_CHECKSUM='%.40s': expected md5, crc32c or auto%s", v,
               strcmp(v, "crc32c") ? "" : gcs ? " (gs:// takes md5 only)"
                                                : " (this build has no ISA-L: md5 only)");
        st = CKPT_E_CONFIG;
        goto out;
    }

    s->part_size = 8 * MIB;
    v = getenv("CKPT_S3_PART_SIZE");
    if (v && strtoull(v, NULL, 10) >= 1024 * 1024)
        s->part_size = (size_t)strtoull(v, NULL, 10);
    s->mp_min = 64 * MIB;
    v = getenv("CKPT_S3_MULTIPART_MIN");
    if (v && strtoull(v, NULL, 10) > 0)
        s->mp_min = (size_t)strtoull(v, NULL, 10);
    if (s->mp_min < s->part_size)
        s->mp_min = s->part_size;

    if (cfg) {
        if (cfg->storage_class)
            s->storage_class = strdup(cfg->storage_class);
        if (cfg->sse)
            s->sse = strdup(cfg->sse);
        if (cfg->sse_kms_key_id)
            s->kms_key = strdup(cfg->sse_kms_key_id);
        s->log_fn = cfg->log_fn;
        s->log_user = cfg->log_user;
        s->log_level = cfg->log_level;
    }
    if (gcs && s->sse) {
        seterr(err, "server-side encryption settings (--sse, CKPT_S3_SSE) are for s3://; "
                    "GCS encrypts every object with Google-managed or bucket default keys");
        st = CKPT_E_CONFIG;
        goto out;
    }
    /* With SSE-KMS the ETag is not the MD5 of the content. */
    s->verify_md5 = !(s->sse && strcmp(s->sse, "aws:kms") == 0) && !gcs;

    memset(&ho, 0, sizeof(ho));
    ho.max_handles = cfg && cfg->connections ? cfg->connections : 16;
    ho.max_rate_bps = cfg ? cfg->max_rate_bps : 0;
    s->http = ckpt_http_new(&ho);
    if (!s->http) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    if (s->default_ep)
        snprintf(s->base.endpoint, sizeof(s->base.endpoint), "https://s3.%.64s.amazonaws.com "
                 "(region %.64s)", s->region, s->region);
    else
        snprintf(s->base.endpoint, sizeof(s->base.endpoint), "%s://%.150s%.60s (region %.30s)",
                 s->ep_scheme, s->ep_host, s->ep_path, s->region);
    slog(s, CKPT_LOG_DEBUG, "%s: bucket %s prefix '%s' region %s %s-style%s",
         gcs ? "gs" : "s3", s->bucket, s->prefix, s->region,
         s->path_style ? "path" : "virtual-host",
         s->conditional ? "" : ", conditional puts not enforced");
    *out = &s->base;
    s = NULL;
out:
    profile_free(&prof);
    s3_close(s ? &s->base : NULL);
    return st;
}
