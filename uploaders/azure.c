/*
 * azure.c -- the Azure Blob store (az://container/prefix): its dialect of
 * the object-store core (objstore.h).
 *
 * Credentials come from creds_azure.h. Every request carries x-ms-date and
 * x-ms-version and is signed with SharedKey (azure_sign.h), or carries a SAS in
 * its query. Put Blob for objects up to the block threshold (64 MiB,
 * CKPT_AZ_BLOCK_MIN), else Put Block (8 MiB, CKPT_AZ_BLOCK_SIZE) + Put Block
 * List; every body carries Content-MD5 and the blob's own MD5 is recorded,
 * so GET replies are checked against it. Deletes go one by one (Blob Batch
 * is not worth its multipart/mixed format here). Azure enforces
 * If-None-Match / If-Match. Error codes come in x-ms-error-code (or the XML
 * body); a skewed clock comes back as 403 AuthenticationFailed.
 */
#include "azure_sign.h"
#include "backend.h"
#include "objops.h"
#include "creds_azure.h"
#include "digest.h"
#include "objstore.h"
#include "xml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MIB (1024u * 1024u)
#define AZ_VERSION "2021-08-06"
#define MAX_BLOCKS 50000
#define LIST_MAX 5000

struct az {
    struct ckpt_obj o;
    struct ckpt_az_creds cr;  /* fixed at open */
};

#define AZ(o) ((struct az *)(o))

/* ---- requests ------------------------------------------------------------------ */

static ckpt_status az_prepare(struct ckpt_obj *o, struct ckpt__obj_call *c)
{
    const struct ckpt_obj_rq *rq = c->rq;

    if (asprintf(&c->path, "%s/%s%s%s", o->ep_path, o->container, rq->key ? "/" : "",
                 rq->key ? rq->key : "") < 0) {
        c->path = NULL;
        return CKPT_E_NOMEM;
    }
    c->path_enc = ckpt__uri_encode(c->path, strlen(c->path), 1);
    if (!c->path_enc)
        return CKPT_E_NOMEM;
    ckpt__md5_base64(rq->body ? rq->body : "", rq->len, c->md5);
    return CKPT_OK;
}

static ckpt_status az_build(struct ckpt_obj *o, struct ckpt__obj_call *c, char **url,
                            struct ckpt_obj_lines *h, char *err)
{
    const struct az *a = AZ(o);
    const struct ckpt_obj_rq *rq = c->rq;
    struct ckpt_az_header hv[CKPT_OBJ_LINES_MAX];
    char names[CKPT_OBJ_LINES_MAX][64], date[64], clen[32], auth[512];
    const char *sas = a->cr.sas;
    size_t nh = 0, i;
    int64_t skew;
    time_t now;
    struct tm tm;

    if (asprintf(url, "%s://%s%s%s%s%s%s", o->ep_scheme, o->ep_host, c->path_enc,
                 rq->query || sas ? "?" : "", rq->query ? rq->query : "",
                 rq->query && sas ? "&" : "", sas ? sas : "") < 0) {
        *url = NULL;
        return CKPT_E_NOMEM;
    }
    pthread_mutex_lock(&o->mu);
    skew = o->skew_s;
    pthread_mutex_unlock(&o->mu);
    now = time(NULL) + (time_t)skew;
    gmtime_r(&now, &tm);
    strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
    /* hv: what is signed; h: what is sent (curl adds Content-Length
     * itself, but it is signed). */
    hv[nh].name = "x-ms-date";
    hv[nh++].value = date;
    ckpt__obj_line(h, "x-ms-date: %s", date);
    hv[nh].name = "x-ms-version";
    hv[nh++].value = AZ_VERSION;
    ckpt__obj_line(h, "x-ms-version: %s", AZ_VERSION);
    if (strcmp(rq->method, "PUT") == 0 || strcmp(rq->method, "POST") == 0) {
        hv[nh].name = "Content-MD5";
        hv[nh++].value = c->md5;
        ckpt__obj_line(h, "Content-MD5: %s", c->md5);
        snprintf(clen, sizeof(clen), "%zu", rq->len);
        hv[nh].name = "Content-Length";
        hv[nh++].value = clen;
    }
    for (i = 0; i < rq->nhdrs; i++) {
        if (nh == CKPT_OBJ_LINES_MAX ||
            !ckpt__obj_split(rq->hdrs[i], names[i], sizeof(names[i]), &hv[nh].value))
            return CKPT_E_INTERNAL;
        hv[nh++].name = names[i];
        ckpt__obj_line(h, "%s", rq->hdrs[i]);
    }
    if (a->cr.key_b64) {
        char *sts =
            ckpt__az_string_to_sign(a->cr.account, rq->method, c->path_enc, rq->query, hv, nh);
        ckpt_status st =
            sts ? ckpt__az_authorization(a->cr.account, a->cr.key_b64, sts, auth, sizeof(auth))
                : CKPT_E_NOMEM;
        free(sts);
        if (st != CKPT_OK) {
            ckpt__seterr(err, "azure: cannot sign (account key not valid base64?)");
            return st;
        }
        ckpt__obj_line(h, "Authorization: %s", auth);
        ckpt__wipe(auth, sizeof(auth));
    }
    return h->oom ? CKPT_E_NOMEM : CKPT_OK;
}

static void az_reply(struct ckpt_obj *o, const struct ckpt__obj_call *c,
                     struct ckpt_http_resp *resp, char *code, size_t n)
{
    (void)o;
    (void)c;
    if (resp->status >= 300 && !ckpt__http_header(resp, "x-ms-error-code", code, n) && resp->body &&
        resp->len)
        ckpt__xml_find(resp->body, resp->len, "Error/Code", code, n);
}

/* The blob's Content-MD5 (Put Blob and Put Block List record it). */
static int az_holds(const struct ckpt_http_resp *resp, const void *buf, size_t len)
{
    char have[256], want[25];

    if (!ckpt__http_header(resp, "Content-MD5", have, sizeof(have)))
        return -1;
    ckpt__md5_base64(buf, len, want);
    return strcmp(want, have) == 0;
}

static int az_cond(const struct ckpt_obj *o, const struct ckpt_put_opts *opts, char *line,
                   size_t n)
{
    (void)o;
    if (opts->cond == CKPT_PUT_IF_NONE_MATCH) {
        snprintf(line, n, "If-None-Match: *");
        return 1;
    }
    if (opts->cond == CKPT_PUT_IF_MATCH) {
        snprintf(line, n, "If-Match: %s", opts->if_match ? opts->if_match : "");
        return 1;
    }
    return 0;
}

static size_t az_put_headers(const struct ckpt_obj *o, char (*lines)[CKPT_OBJ_LINE_MAX])
{
    (void)o;
    snprintf(lines[0], CKPT_OBJ_LINE_MAX, "x-ms-blob-type: BlockBlob");
    return 1;
}

/* ---- blocks ------------------------------------------------------------------ */

static char *az_block_query(struct ckpt_obj_parts *mp, size_t i)
{
    char raw[32], *id_enc, *query = NULL;

    /* Block ids: base64 of a fixed-width counter, so all have the same
     * length as Azure requires ("blk00000001" -> 16 characters). */
    snprintf(raw, sizeof(raw), "blk%08u", (unsigned)i);
    ckpt__base64_encode(raw, 11, mp->tags[i]);
    id_enc = ckpt__uri_encode(mp->tags[i], strlen(mp->tags[i]), 0);
    if (id_enc && asprintf(&query, "comp=block&blockid=%s", id_enc) < 0)
        query = NULL;
    free(id_enc);
    return query;
}

static const struct ckpt_obj_multipart az_blocks = {
    MAX_BLOCKS, 0, 0, "PUT", "comp=blocklist",
    "<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>", "<Latest>", NULL, "</Latest>",
    "</BlockList>", "x-ms-blob-content-md5", NULL
};

/* ---- listing ---------------------------------------------------------------- */

static int64_t az_time(const char *text)
{
    int64_t t = ckpt__http_date(text);
    return t > 0 ? t : 0;
}

static const struct ckpt_obj_listing az_listing = {
    "restype=container&comp=list", "maxresults", "marker", "EnumerationResults",
    "Blobs/Blob", "Name", "Properties/Content-Length", "Properties/Last-Modified",
    "NextMarker", NULL, az_time, 32 * MIB
};

/* ---- open -------------------------------------------------------------------- */

static void az_free(struct ckpt_obj *o)
{
    ckpt__az_creds_free(&AZ(o)->cr);
}

static const struct ckpt_obj_dialect az_dialect = {
    /* x-ms-range: signed among the x-ms- headers (a plain Range header has
     * its own slot in SharedKey's string to sign) */
    .range_header = "x-ms-range",
    .multipart = &az_blocks,
    .skew_on_403 = 1,
    .listing = &az_listing,
    .prepare = az_prepare,
    .build = az_build,
    .reply = az_reply,
    .holds = az_holds,
    .cond_header = az_cond,
    .put_headers = az_put_headers,
    .part_query = az_block_query,
    .close = az_free,
};

static const struct ckpt_store_ops az_ops = CKPT_OBJ_OPS("az");

static ckpt_status create_container(struct ckpt_obj *o, char *err)
{
    struct ckpt_http_resp resp;
    struct ckpt_obj_rq rq = { .method = "PUT", .query = "restype=container" };
    ckpt_status st = ckpt__obj_call(o, &rq, &resp, err);

    if (st == CKPT_E_PRECONDITION)   /* 409 ContainerAlreadyExists */
        st = CKPT_OK;
    ckpt__http_resp_free(&resp);
    return st;
}

ckpt_status ckpt__store_az_open(const char *url, const struct ckpt_store_config *cfg,
                                struct ckpt_store **out, char *err)
{
    ckpt_status st;
    struct az *a = NULL;
    const char *v;

    *out = NULL;
    if (!url || strncmp(url, "az://", 5) != 0) {
        ckpt__seterr(err, "not an az:// URL");
        st = CKPT_E_CONFIG;
        goto out;
    }
    a = calloc(1, sizeof(*a));
    if (!a) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    st = ckpt__obj_open(&a->o, &az_ops, &az_dialect, "az", url, "container", cfg, err);
    if (st == CKPT_OK)
        st = ckpt__az_creds_load(&a->cr, err);
    if (st == CKPT_OK)
        st = ckpt__obj_endpoint(&a->o, a->cr.endpoint, err);
    if (st != CKPT_OK)
        goto out;
    snprintf(a->o.base.cred_source, sizeof(a->o.base.cred_source), "%s", a->cr.source);
    snprintf(a->o.base.endpoint, sizeof(a->o.base.endpoint), "%.10s://%.150s%.80s",
             a->o.ep_scheme, a->o.ep_host, a->o.ep_path);
    /* Azure enforces conditions and records every blob's MD5. */
    a->o.base.caps.flags |= CKPT_STORE_CONDITIONAL;
    a->o.verify = 1;
    ckpt__obj_parts_config(&a->o, "CKPT_AZ_BLOCK_SIZE", 64 * 1024, "CKPT_AZ_BLOCK_MIN");
    a->o.page_size = LIST_MAX;
    v = getenv("CKPT_AZ_LIST_MAX");
    if (v && atoi(v) > 0 && atoi(v) <= LIST_MAX)
        a->o.page_size = (unsigned)atoi(v);
    st = ckpt__obj_start(&a->o, cfg);
    if (st != CKPT_OK)
        goto out;
    /* Test set-ups start from an empty Azurite: let them create the
     * container (production containers are made by their owners). */
    v = getenv("CKPT_AZ_CREATE_CONTAINER");
    if (v && *v == '1') {
        st = create_container(&a->o, err);
        if (st != CKPT_OK)
            goto out;
    }
    *out = &a->o.base;
    a = NULL;
out:
    ckpt__obj_close(a ? &a->o.base : NULL);
    return st;
}
