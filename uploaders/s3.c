/*
 * s3.c -- the S3-compatible store (s3://bucket/prefix) and Google Cloud
 * Storage through its XML API with HMAC keys (gs://bucket/prefix): their
 * dialect of the object-store core (objstore.h). Opening them is s3_open.c.
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
 *    go up in parts of 8 MiB (CKPT_S3_PART_SIZE, at least 5 MiB on AWS); a
 *    failed upload is aborted;
 *  - the bucket's region is learnt from a redirect, the clock offset from
 *    RequestTimeTooSkewed, role credentials are refreshed before they
 *    expire: these change after open, under the core's `mu`;
 *  - GCS has no multi-object delete, so deletes go one by one; conditional
 *    puts use x-goog-if-generation-match and the "etag" of a gs object is
 *    its generation number.
 */
#include "s3.h"
#include "backend.h"
#include "digest.h"
#include "sigv4.h"
#include "xml.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MIB (1024u * 1024u)
#define LIST_BODY_MAX (16 * MIB)
#define DELETE_BATCH 1000
#define MAX_PARTS 10000
#define CRED_REFRESH_S 300   /* refresh role credentials 5 min before expiry */

/* What one attempt is signed with, copied under the lock. */
struct creds {
    char ak[256], sk[256];
    char *token;             /* malloc'd or NULL */
    char region[64];
    int64_t skew_s;
};

/* Snapshot the credentials, region and clock offset for one attempt,
 * refreshing role credentials shortly before they expire. */
static ckpt_status snapshot(struct s3 *s, struct creds *c, char *err)
{
    ckpt_status st = CKPT_OK;

    memset(c, 0, sizeof(*c));
    pthread_mutex_lock(&s->o.mu);
    if (s->keys.expiry && (int64_t)time(NULL) + CRED_REFRESH_S >= s->keys.expiry) {
        st = ckpt__aws_keys_role(&s->keys, s->o.base.cred_source, sizeof(s->o.base.cred_source),
                                 err);
        if (st != CKPT_OK && s->keys.ak && (int64_t)time(NULL) < s->keys.expiry)
            st = CKPT_OK;   /* old ones still valid: use them, retry later */
    }
    if (st == CKPT_OK) {
        snprintf(c->ak, sizeof(c->ak), "%s", s->keys.ak);
        snprintf(c->sk, sizeof(c->sk), "%s", s->keys.sk);
        c->token = s->keys.token ? strdup(s->keys.token) : NULL;
        snprintf(c->region, sizeof(c->region), "%s", s->region);
        c->skew_s = s->o.skew_s;
    }
    pthread_mutex_unlock(&s->o.mu);
    return st;
}

static void creds_wipe(struct creds *c)
{
    ckpt__wipe(c->sk, sizeof(c->sk));
    ckpt__wipe_free(c->token);
    c->token = NULL;
}

static void host_for(const struct s3 *s, const char *region, char *out, size_t n)
{
    const char *bucket = s->o.container;

    if (s->default_ep)
        snprintf(out, n, "%s%ss3.%s.amazonaws.com", s->path_style ? "" : bucket,
                 s->path_style ? "" : ".", region);
    else if (s->path_style)
        snprintf(out, n, "%s", s->o.ep_host);
    else
        snprintf(out, n, "%s.%s", bucket, s->o.ep_host);
}

/* An object PUT's checksum is CRC32C or MD5 (s->crc32c); parts and POSTs
 * (multi-delete needs it) carry MD5. */
static int use_crc(const struct s3 *s, const struct ckpt_obj_rq *rq)
{
    return s->crc32c && rq->body && rq->len > 0 && strcmp(rq->method, "PUT") == 0 &&
           !rq->query;
}

/* ---- requests ------------------------------------------------------------------ */

static ckpt_status s3_prepare(struct ckpt_obj *o, struct ckpt__obj_call *c)
{
    const struct s3 *s = S3(o);
    const struct ckpt_obj_rq *rq = c->rq;

    /* A body is sent UNSIGNED-PAYLOAD: its integrity rides on the checksum
     * header (signed), so one digest of it is computed, not two; SHA-256 of
     * a chunk cost as much CPU as the rest of the upload. GCS keeps the
     * signed payload hash. */
    if (rq->body && rq->len > 0 && !s->gcs)
        snprintf(c->sha256, sizeof(c->sha256), "UNSIGNED-PAYLOAD");
    else
        ckpt__sha256_hex(rq->body ? rq->body : "", rq->len, c->sha256);
    if (use_crc(s, rq))
        ckpt__crc32c_base64(rq->body, rq->len, c->crc32c);
    else
        ckpt__md5_base64(rq->body ? rq->body : "", rq->len, c->md5);
    /* The path as signed (S3 mode encodes it once) and as sent. */
    if (asprintf(&c->path, "%s%s%s/%s", o->ep_path, s->path_style ? "/" : "",
                 s->path_style ? o->container : "", rq->key ? rq->key : "") < 0) {
        c->path = NULL;
        return CKPT_E_NOMEM;
    }
    c->path_enc = ckpt__uri_encode(c->path, strlen(c->path), 1);
    return c->path_enc ? CKPT_OK : CKPT_E_NOMEM;
}

struct signed_hdrs {
    struct ckpt_sigv4_header v[CKPT_OBJ_LINES_MAX];
    size_t n;
};

/* A header both sent and signed. */
static void add(struct ckpt_obj_lines *h, struct signed_hdrs *sh, const char *name,
                const char *value)
{
    if (sh->n == CKPT_OBJ_LINES_MAX) {
        h->oom = 1;
        return;
    }
    sh->v[sh->n].name = name;
    sh->v[sh->n++].value = value;
    ckpt__obj_line(h, "%s: %s", name, value);
}

static ckpt_status s3_build(struct ckpt_obj *o, struct ckpt__obj_call *c, char **url,
                            struct ckpt_obj_lines *h, char *err)
{
    struct s3 *s = S3(o);
    const struct ckpt_obj_rq *rq = c->rq;
    struct signed_hdrs sh;
    struct ckpt_sigv4_input in;
    struct creds cr;
    char names[CKPT_OBJ_LINES_MAX][64], host[512], amz[17], *auth = NULL;
    ckpt_status st;
    size_t i;

    sh.n = 0;
    st = snapshot(s, &cr, err);
    if (st != CKPT_OK)
        goto out;
    snprintf(c->region, sizeof(c->region), "%s", cr.region);
    host_for(s, cr.region, host, sizeof(host));
    if (asprintf(url, "%s://%s%s%s%s", o->ep_scheme, host, c->path_enc, rq->query ? "?" : "",
                 rq->query ? rq->query : "") < 0) {
        *url = NULL;
        st = CKPT_E_NOMEM;
        goto out;
    }
    ckpt__sigv4_amz_date((long long)time(NULL) + cr.skew_s, amz);
    add(h, &sh, "Host", host);
    add(h, &sh, "x-amz-date", amz);
    add(h, &sh, "x-amz-content-sha256", c->sha256);
    if (use_crc(s, rq))
        add(h, &sh, "x-amz-checksum-crc32c", c->crc32c);
    else if (rq->body || strcmp(rq->method, "PUT") == 0 || strcmp(rq->method, "POST") == 0)
        add(h, &sh, "Content-MD5", c->md5);
    if (cr.token)
        add(h, &sh, "x-amz-security-token", cr.token);
    for (i = 0; i < rq->nhdrs; i++) {
        const char *v;
        if (!ckpt__obj_split(rq->hdrs[i], names[i], sizeof(names[i]), &v)) {
            st = CKPT_E_INTERNAL;
            goto out;
        }
        add(h, &sh, names[i], v);
    }
    if (h->oom) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    memset(&in, 0, sizeof(in));
    in.mode = CKPT_SIGV4_S3;
    in.method = rq->method;
    in.path = c->path;
    in.query = rq->query;
    in.headers = sh.v;
    in.nheaders = sh.n;
    in.payload_hash = c->sha256;
    in.access_key = cr.ak;
    in.secret_key = cr.sk;
    in.region = cr.region;
    in.service = "s3";
    in.amz_date = amz;
    st = ckpt__sigv4_sign(&in, &auth, NULL, NULL);
    if (st == CKPT_OK)
        ckpt__obj_line(h, "Authorization: %s", auth);
    if (st == CKPT_OK && h->oom)
        st = CKPT_E_NOMEM;
out:
    creds_wipe(&cr);
    ckpt__wipe_free(auth);
    return st;
}

static void s3_reply(struct ckpt_obj *o, const struct ckpt__obj_call *c,
                     struct ckpt_http_resp *resp, char *code, size_t n)
{
    (void)o;
    if (resp->status >= 300 && resp->body && resp->len)
        ckpt__xml_find(resp->body, resp->len, "Error/Code", code, n);
    if (resp->status == 200 && c->rq->body_error_check && resp->body &&
        ckpt__xml_find(resp->body, resp->len, "Error/Code", code, n)) {
        /* CompleteMultipartUpload's "200 with an error inside". */
        resp->status = strcmp(code, "InternalError") == 0 ? 500
                       : strcmp(code, "SlowDown") == 0     ? 503
                                                           : 400;
    }
}

/* Region discovery: AWS names the bucket's region on a redirect or an
 * AuthorizationHeaderMalformed 400. */
static int s3_redirect(struct ckpt_obj *o, struct ckpt__obj_call *c,
                       const struct ckpt_http_resp *resp)
{
    struct s3 *s = S3(o);
    char region[256];

    if ((resp->status != 301 && resp->status != 307 && resp->status != 400) ||
        !ckpt__http_header(resp, "x-amz-bucket-region", region, sizeof(region)) ||
        strcmp(region, c->region) == 0 || c->redirects++ >= 2)
        return 0;
    pthread_mutex_lock(&o->mu);
    free(s->region);
    s->region = strdup(region);
    if (!s->region)
        s->region = strdup("us-east-1");
    pthread_mutex_unlock(&o->mu);
    ckpt__obj_log(o, CKPT_LOG_INFO, "s3: bucket %s is in region %s", o->container, region);
    return 1;
}

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

/* A single-part object's ETag is the MD5 of its bytes. */
static int s3_holds(const struct ckpt_http_resp *resp, const void *buf, size_t len)
{
    char et[CKPT_ETAG_MAX], want[33], got[33];

    if (!ckpt__http_header(resp, "ETag", et, sizeof(et)) || !is_md5_etag(et, want))
        return -1;
    ckpt__md5_hex(buf, len, got);
    return strcmp(want, got) == 0;
}

static int s3_cond(const struct ckpt_obj *o, const struct ckpt_put_opts *opts, char *line,
                   size_t n)
{
    int gcs = S3(o)->gcs;

    if (opts->cond == CKPT_PUT_IF_NONE_MATCH) {
        snprintf(line, n, gcs ? "x-goog-if-generation-match: 0" : "If-None-Match: *");
        return 1;
    }
    if (opts->cond == CKPT_PUT_IF_MATCH) {
        const char *e = opts->if_match ? opts->if_match : "";
        if (gcs)
            snprintf(line, n, "x-goog-if-generation-match: %s", e);
        else if (e[0] == '"')
            snprintf(line, n, "If-Match: %s", e);
        else
            snprintf(line, n, "If-Match: \"%s\"", e);
        return 1;
    }
    return 0;
}

/* Headers shared by PutObject and CreateMultipartUpload. */
static size_t s3_put_headers(const struct ckpt_obj *o, char (*lines)[CKPT_OBJ_LINE_MAX])
{
    const struct s3 *s = S3(o);
    size_t n = 0;

    if (s->storage_class && *s->storage_class)
        snprintf(lines[n++], CKPT_OBJ_LINE_MAX, "%s: %s",
                 s->gcs ? "x-goog-storage-class" : "x-amz-storage-class", s->storage_class);
    if (s->sse && *s->sse)
        snprintf(lines[n++], CKPT_OBJ_LINE_MAX, "x-amz-server-side-encryption: %s", s->sse);
    if (s->kms_key && *s->kms_key)
        snprintf(lines[n++], CKPT_OBJ_LINE_MAX,
                 "x-amz-server-side-encryption-aws-kms-key-id: %s", s->kms_key);
    return n;
}

/* ---- multipart ------------------------------------------------------------------ */

static ckpt_status mpu_begin(struct ckpt_obj *o, struct ckpt_obj_parts *mp, char *err)
{
    ckpt_status st;
    struct ckpt_http_resp resp;
    char extra[4][CKPT_OBJ_LINE_MAX], id[1024] = "";
    const char *hdrs[4];
    size_t nh = s3_put_headers(o, extra), i;

    for (i = 0; i < nh; i++)
        hdrs[i] = extra[i];
    {
        struct ckpt_obj_rq rq = { .method = "POST", .key = mp->key, .query = "uploads=",
                                  .hdrs = hdrs, .nhdrs = nh };
        st = ckpt__obj_call(o, &rq, &resp, err);
    }
    if (st == CKPT_OK && resp.body)
        ckpt__xml_find(resp.body, resp.len, "InitiateMultipartUploadResult/UploadId", id,
                       sizeof(id));
    ckpt__http_resp_free(&resp);
    if (st != CKPT_OK)
        return st;
    if (!id[0]) {
        ckpt__seterr(err, "s3 multipart: no UploadId in reply");
        return CKPT_E_CORRUPT;
    }
    mp->id = ckpt__uri_encode(id, strlen(id), 0);
    return mp->id ? CKPT_OK : CKPT_E_NOMEM;
}

static char *mpu_part_query(struct ckpt_obj_parts *mp, size_t i)
{
    char *query = NULL;

    if (asprintf(&query, "partNumber=%zu&uploadId=%s", i + 1, mp->id) < 0)
        query = NULL;
    return query;
}

/* CompleteMultipartUpload: the object's ETag is in the reply's XML (GCS:
 * its generation in x-goog-generation). */
static const struct ckpt_obj_multipart s3_multipart = {
    MAX_PARTS, 1, 1, "POST", "uploadId=", "<CompleteMultipartUpload>", "<Part><PartNumber>",
    "</PartNumber><ETag>", "</ETag></Part>", "</CompleteMultipartUpload>", NULL,
    "CompleteMultipartUploadResult/ETag"
};

/* Abort so the parts do not linger (and cost) forever; a lifecycle rule
 * catches the uploads a crash leaves behind (docs/stores.md). */
static void mpu_abort(struct ckpt_obj *o, struct ckpt_obj_parts *mp)
{
    struct ckpt_http_resp resp;
    char abort_err[CKPT_ERR_MAX], *q = NULL;

    if (!mp->id || asprintf(&q, "uploadId=%s", mp->id) < 0)
        return;
    {
        struct ckpt_obj_rq rq = { .method = "DELETE", .key = mp->key, .query = q };
        if (ckpt__obj_call(o, &rq, &resp, abort_err) != CKPT_OK)
            ckpt__obj_log(o, CKPT_LOG_WARN, "s3: abort of multipart upload failed: %s", abort_err);
    }
    ckpt__http_resp_free(&resp);
    free(q);
}

/* ---- delete --------------------------------------------------------------------- */

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
    if (strcmp(path, "DeleteResult/Error/Key") == 0) {
        snprintf(d->cur_key, sizeof(d->cur_key), "%s", text);
    } else if (strcmp(path, "DeleteResult/Error/Code") == 0) {
        snprintf(d->cur_code, sizeof(d->cur_code), "%s", text);
    } else if (strcmp(path, "DeleteResult/Error") == 0) {
        /* A key that is already gone is what we wanted. */
        if (strcmp(d->cur_code, "NoSuchKey") != 0 && !d->errors++) {
            snprintf(d->first_key, sizeof(d->first_key), "%s", d->cur_key);
            snprintf(d->first_code, sizeof(d->first_code), "%s", d->cur_code);
        }
        d->cur_key[0] = d->cur_code[0] = '\0';
    }
    return 0;
}

/* DeleteObjects: up to 1000 keys a request. */
static ckpt_status s3_del_batch(struct ckpt_obj *o, const char *const *keys, size_t n,
                                char *err)
{
    ckpt_status st = CKPT_OK;
    struct ckpt_http_resp resp;
    char *xml = NULL;
    size_t xlen = 0, xcap = 0, i;
    int attempt, bad;

    memset(&resp, 0, sizeof(resp));
    bad = ckpt__xml_raw_append(&xml, &xlen, &xcap,
                               "<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                               "<Quiet>true</Quiet>");
    for (i = 0; i < n && !bad; i++)
        bad = ckpt__xml_raw_append(&xml, &xlen, &xcap, "<Object><Key>") ||
              ckpt__xml_escape_append(&xml, &xlen, &xcap, o->prefix) ||
              ckpt__xml_escape_append(&xml, &xlen, &xcap, keys[i]) ||
              ckpt__xml_raw_append(&xml, &xlen, &xcap, "</Key></Object>");
    if (bad || ckpt__xml_raw_append(&xml, &xlen, &xcap, "</Delete>")) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    /* Per-key errors come back in a 200: retry the batch a few times (it is
     * idempotent), then report the first key that failed. */
    for (attempt = 0; attempt < 3; attempt++) {
        struct del_state d;
        struct ckpt_obj_rq rq = { .method = "POST", .query = "delete=", .body = xml,
                                  .len = xlen, .max_body = 4 * MIB };
        memset(&d, 0, sizeof(d));
        st = ckpt__obj_call(o, &rq, &resp, err);
        if (st != CKPT_OK)
            goto out;
        if (ckpt__xml_parse(resp.body, resp.len, del_cb, &d) != CKPT_OK) {
            st = CKPT_E_CORRUPT;
            ckpt__seterr(err, "s3 delete: malformed reply");
            goto out;
        }
        ckpt__http_resp_free(&resp);
        if (!d.errors)
            goto out;
        st = strcmp(d.first_code, "AccessDenied") == 0 ? CKPT_E_AUTH : CKPT_E_TRANSIENT;
        ckpt__seterr(err, "s3 delete: %zu keys failed, first %s: %s", d.errors, d.first_key,
                     d.first_code);
        if (st == CKPT_E_AUTH)
            goto out;
    }
out:
    ckpt__http_resp_free(&resp);
    free(xml);
    return st;
}

/* ---- listing: ListObjectsV2 ------------------------------------------------- */

static const struct ckpt_obj_listing s3_listing = {
    "list-type=2",  "max-keys",   "continuation-token", "ListBucketResult",      "Contents",
    "Key",          "Size",       "LastModified",       "NextContinuationToken", "IsTruncated",
    ckpt__aws_time, LIST_BODY_MAX
};

/* ---- the dialects ------------------------------------------------------------ */

static void s3_free(struct ckpt_obj *o)
{
    struct s3 *s = S3(o);

    free(s->storage_class);
    free(s->sse);
    free(s->kms_key);
    free(s->region);
    ckpt__aws_keys_free(&s->keys);
}

#define S3_DIALECT(etag_hdr, batch)                                           \
    {                                                                         \
        .range_header = "Range", .etag_header = etag_hdr,                     \
        .multipart = &s3_multipart, .listing = &s3_listing,                   \
        .prepare = s3_prepare,                                                \
        .build = s3_build, .reply = s3_reply, .redirect = s3_redirect,        \
        .holds = s3_holds, .cond_header = s3_cond,                            \
        .put_headers = s3_put_headers, .parts_begin = mpu_begin,              \
        .part_query = mpu_part_query,                                         \
        .parts_abort = mpu_abort, .del_batch = batch,                         \
        .del_batch_max = DELETE_BATCH, .close = s3_free,                      \
    }

const struct ckpt_obj_dialect ckpt_s3_dialect = S3_DIALECT(NULL, s3_del_batch);
/* GCS: the generation is the etag; no multi-object delete in the XML API. */
const struct ckpt_obj_dialect ckpt_gs_dialect = S3_DIALECT("x-goog-generation", NULL);
