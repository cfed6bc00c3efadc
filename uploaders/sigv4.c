/*
 * sigv4.c -- AWS Signature Version 4. Steps and names follow SPEC.md part B;
 * the digests and HMAC come from digest.h.
 */
#include "sigv4.h"

#include "digest.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
};

static void sb_putn(struct sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        char *np;
        while (nc < b->len + n + 1)
            nc *= 2;
        np = realloc(b->p, nc);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_puts(struct sbuf *b, const char *s)
{
    sb_putn(b, s, strlen(s));
}

void ckpt__sigv4_amz_date(long long t, char out[17])
{
    time_t tt = (time_t)t;
    struct tm tm;

    gmtime_r(&tt, &tm);
    strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

/* Remove "." and ".." segments and merge repeated slashes (generic mode). */
static char *normalize_path(const char *path)
{
    size_t n = strlen(path);
    char *out = malloc(n + 2);
    const char *p = path;
    size_t o = 0;

    if (!out)
        return NULL;
    out[o++] = '/';
    while (*p) {
        const char *seg;
        size_t sl;
        while (*p == '/')
            p++;
        seg = p;
        while (*p && *p != '/')
            p++;
        sl = (size_t)(p - seg);
        if (sl == 0 || (sl == 1 && seg[0] == '.'))
            continue;
        if (sl == 2 && seg[0] == '.' && seg[1] == '.') {
            /* Drop the last segment written (never above the root). */
            if (o > 1) {
                o--;                   /* the trailing '/' */
                while (o > 1 && out[o - 1] != '/')
                    o--;
            }
            continue;
        }
        memcpy(out + o, seg, sl);
        o += sl;
        out[o++] = '/';
    }
    /* Keep a trailing slash only when the input had one. */
    if (o > 1 && !(n && path[n - 1] == '/'))
        o--;
    out[o] = '\0';
    return out;
}

static int qcmp(const void *a, const void *b)
{
    const struct ckpt_query_param *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->value, y->value);
}

/* Names and values decoded, then encoded strictly, sorted by name and
 * value, joined as "a=1&b=2". */
static char *canonical_query(const char *q, int *oom)
{
    struct sbuf b = { 0 };
    struct ckpt_query_param *ps = NULL;
    long np = ckpt__query_split(q, &ps), i;

    sb_puts(&b, "");
    if (np < 0) {
        np = 0;
        b.oom = 1;
        goto done;
    }
    for (i = 0; i < np; i++) {
        char *name = ckpt__uri_encode(ps[i].name, ps[i].name_len, 0);
        char *value = ckpt__uri_encode(ps[i].value, ps[i].value_len, 0);
        free(ps[i].name);
        free(ps[i].value);
        ps[i].name = name;
        ps[i].value = value;
        if (!name || !value) {
            b.oom = 1;
            goto done;
        }
    }
    if (np)
        qsort(ps, (size_t)np, sizeof(*ps), qcmp);
    for (i = 0; i < np; i++) {
        if (i)
            sb_puts(&b, "&");
        sb_puts(&b, ps[i].name);
        sb_puts(&b, "=");
        sb_puts(&b, ps[i].value);
    }
done:
    ckpt__query_free(ps, np);
    *oom = b.oom;
    return b.p;
}

struct chdr {
    char *name;       /* lowercase */
    char *value;      /* trimmed, blanks collapsed */
    size_t order;     /* position given, for a stable sort */
};

static int hcmp(const void *a, const void *b)
{
    const struct chdr *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (c)
        return c;
    return x->order < y->order ? -1 : x->order > y->order;
}

static char *lower_dup(const char *s)
{
    char *d = strdup(s), *p;

    if (d)
        for (p = d; *p; p++)
            *p = (char)tolower((unsigned char)*p);
    return d;
}

static char *trim_collapse(const char *s)
{
    size_t n = strlen(s), o = 0, i;
    char *d = malloc(n + 1);
    int blank = 0;

    if (!d)
        return NULL;
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
        s++;
    n = strlen(s);
    for (i = 0; i < n; i++) {
        char c = s[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            blank = 1;
            continue;
        }
        if (blank && o)
            d[o++] = ' ';
        blank = 0;
        d[o++] = c;
    }
    d[o] = '\0';
    return d;
}

static void hmac256(const void *key, size_t klen, const char *msg,
                    unsigned char out[32])
{
    ckpt__hmac_sha256(key, klen, msg, strlen(msg), out);
}

ckpt_status ckpt__sigv4_sign(const struct ckpt_sigv4_input *in, char **authorization,
                             char **canonical_out, char **sts_out)
{
    static const char hex[] = "0123456789abcdef";
    ckpt_status st = CKPT_OK;
    struct sbuf cr = { 0 }, sts = { 0 }, sh = { 0 }, auth = { 0 }, kbuf = { 0 };
    struct chdr *hs = NULL;
    size_t i, nh = 0;
    char *path = NULL, *query = NULL, *enc = NULL;
    char date[9], scope[256], crhash[65], sig[65];
    unsigned char k1[32], k2[32], k3[32], k4[32], s[32];
    int oom = 0;

    *authorization = NULL;
    if (!in->method || !in->access_key || !in->secret_key || !in->region ||
        !in->service || !in->amz_date || strlen(in->amz_date) != 16 ||
        !in->payload_hash) {
        st = CKPT_E_INVAL;
        goto out;
    }
    memcpy(date, in->amz_date, 8);
    date[8] = '\0';

    /* 1. Canonical request. */
    sb_puts(&cr, in->method);
    sb_puts(&cr, "\n");
    if (in->mode == CKPT_SIGV4_GENERIC) {
        path = normalize_path(in->path && *in->path ? in->path : "/");
    } else {
        path = strdup(in->path && *in->path ? in->path : "/");
    }
    if (!path) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    enc = ckpt__uri_encode(path, strlen(path), 1);
    if (!enc) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    sb_puts(&cr, enc);
    sb_puts(&cr, "\n");
    query = canonical_query(in->query, &oom);
    if (!query || oom) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    sb_puts(&cr, query);
    sb_puts(&cr, "\n");

    hs = calloc(in->nheaders ? in->nheaders : 1, sizeof(*hs));
    if (!hs) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    for (i = 0; i < in->nheaders; i++) {
        hs[i].name = lower_dup(in->headers[i].name);
        hs[i].value = trim_collapse(in->headers[i].value ? in->headers[i].value : "");
        hs[i].order = i;
        nh++;
        if (!hs[i].name || !hs[i].value) {
            st = CKPT_E_NOMEM;
            goto out;
        }
    }
    qsort(hs, nh, sizeof(*hs), hcmp);
    sb_puts(&sh, "");
    for (i = 0; i < nh; i++) {
        if (i && strcmp(hs[i].name, hs[i - 1].name) == 0) {
            /* Repeated header: values joined with ',' in the order given. */
            sb_puts(&cr, ",");
            sb_puts(&cr, hs[i].value);
            continue;
        }
        if (i) {
            sb_puts(&cr, "\n");
            sb_puts(&sh, ";");
        }
        sb_puts(&cr, hs[i].name);
        sb_puts(&cr, ":");
        sb_puts(&cr, hs[i].value);
        sb_puts(&sh, hs[i].name);
    }
    sb_puts(&cr, "\n\n");
    sb_puts(&cr, sh.p);
    sb_puts(&cr, "\n");
    sb_puts(&cr, in->payload_hash);
    if (cr.oom || sh.oom) {
        st = CKPT_E_NOMEM;
        goto out;
    }

    /* 2. String to sign. */
    ckpt__sha256_hex(cr.p, cr.len, crhash);
    snprintf(scope, sizeof(scope), "%s/%s/%s/aws4_request", date, in->region,
             in->service);
    sb_puts(&sts, "AWS4-HMAC-SHA256\n");
    sb_puts(&sts, in->amz_date);
    sb_puts(&sts, "\n");
    sb_puts(&sts, scope);
    sb_puts(&sts, "\n");
    sb_puts(&sts, crhash);

    /* 3. Signing key and signature. */
    sb_puts(&kbuf, "AWS4");
    sb_puts(&kbuf, in->secret_key);
    if (sts.oom || kbuf.oom) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    hmac256(kbuf.p, kbuf.len, date, k1);
    hmac256(k1, 32, in->region, k2);
    hmac256(k2, 32, in->service, k3);
    hmac256(k3, 32, "aws4_request", k4);
    hmac256(k4, 32, sts.p, s);
    for (i = 0; i < 32; i++) {
        sig[2 * i] = hex[s[i] >> 4];
        sig[2 * i + 1] = hex[s[i] & 15];
    }
    sig[64] = '\0';

    /* 4. Authorization header value. */
    sb_puts(&auth, "AWS4-HMAC-SHA256 Credential=");
    sb_puts(&auth, in->access_key);
    sb_puts(&auth, "/");
    sb_puts(&auth, scope);
    sb_puts(&auth, ", SignedHeaders=");
    sb_puts(&auth, sh.p);
    sb_puts(&auth, ", Signature=");
    sb_puts(&auth, sig);
    if (auth.oom) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    *authorization = auth.p;
    auth.p = NULL;
    if (canonical_out) {
        *canonical_out = cr.p;
        cr.p = NULL;
    }
    if (sts_out) {
        *sts_out = sts.p;
        sts.p = NULL;
    }
out:
    /* The signing key material is secret: wipe it. */
    if (kbuf.p)
        ckpt__wipe(kbuf.p, kbuf.len);
    ckpt__wipe(k1, sizeof(k1));
    ckpt__wipe(k2, sizeof(k2));
    ckpt__wipe(k3, sizeof(k3));
    ckpt__wipe(k4, sizeof(k4));
    free(kbuf.p);
    for (i = 0; i < nh; i++) {
        free(hs[i].name);
        free(hs[i].value);
    }
    free(hs);
    free(path);
    free(enc);
    free(query);
    free(cr.p);
    free(sts.p);
    free(sh.p);
    free(auth.p);
    return st;
}
