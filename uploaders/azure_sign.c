/*
 * azure_sign.c -- Azure Storage SharedKey: the canonical string to sign and
 * the Authorization header (SPEC.md part B, "Azure Blob"; azure_sign.h).
 */
#include "azure_sign.h"
#include "digest.h"
#include "xml.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct sb {
    char *p;
    size_t len, cap;
    int oom;
};

static void sb_put(struct sb *b, const char *s)
{
    if (!b->oom && ckpt__xml_raw_append(&b->p, &b->len, &b->cap, s))
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

static int qcmp(const void *x, const void *y)
{
    return strcmp(((const struct ckpt_query_param *)x)->name,
                  ((const struct ckpt_query_param *)y)->name);
}

char *ckpt__az_string_to_sign(const char *account, const char *method, const char *path,
                              const char *query, const struct ckpt_az_header *h, size_t nh)
{
    static const char *const std_hdrs[] = {
        "Content-Encoding", "Content-Language", "Content-Length", "Content-MD5",
        "Content-Type", "Date", "If-Modified-Since", "If-Match", "If-None-Match",
        "If-Unmodified-Since", "Range"
    };
    struct sb b = { 0 };
    struct kv *xs = NULL;
    struct ckpt_query_param *qs = NULL;
    size_t nx = 0, i;
    long nq = 0, j;

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
    nq = ckpt__query_split(query, &qs);
    if (nq < 0) {
        nq = 0;
        goto fail;
    }
    for (j = 0; j < nq; j++)
        for (char *q = qs[j].name; *q; q++)
            *q = (char)tolower((unsigned char)*q);
    if (nq)
        qsort(qs, (size_t)nq, sizeof(*qs), qcmp);
    for (j = 0; j < nq; j++) {
        sb_put(&b, "\n");
        sb_put(&b, qs[j].name);
        sb_put(&b, ":");
        sb_put(&b, qs[j].value);
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
    free(xs);
    ckpt__query_free(qs, nq);
    return b.p;
}

ckpt_status ckpt__az_authorization(const char *account, const char *key_b64,
                                   const char *string_to_sign, char *out, size_t outlen)
{
    ckpt_status st = CKPT_OK;
    size_t klen = strlen(key_b64);
    unsigned char *key = malloc(klen + 3), mac[32];
    char b64[64];
    long n;

    if (!key) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    n = ckpt__base64_decode(key_b64, key);
    if (n < 0) {
        st = CKPT_E_CONFIG;
        goto out;
    }
    ckpt__hmac_sha256(key, (size_t)n, string_to_sign, strlen(string_to_sign), mac);
    ckpt__base64_encode(mac, 32, b64);
    if ((size_t)snprintf(out, outlen, "SharedKey %s:%s", account, b64) >= outlen)
        st = CKPT_E_INTERNAL;
out:
    if (key) {
        ckpt__wipe(key, klen + 3);
        free(key);
    }
    return st;
}
