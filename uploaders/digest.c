/*
 * digest.c -- digests and encodings for the object stores (see digest.h).
 */
#include "digest.h"

#ifdef CKPT_HAVE_ISAL
#include <isa-l/crc.h>
#endif
#include <ctype.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdlib.h>
#include <string.h>

static void to_hex(const unsigned char *md, size_t n, char *out)
{
    static const char hex[] = "0123456789abcdef";

    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[2 * n] = '\0';
}

void ckpt__sha256_hex(const void *buf, size_t len, char out[65])
{
    unsigned char md[32];
    unsigned int n = 0;

    EVP_Digest(buf, len, md, &n, EVP_sha256(), NULL);
    to_hex(md, 32, out);
}

void ckpt__hmac_sha256(const void *key, size_t klen, const void *msg, size_t mlen,
                       unsigned char out[32])
{
    unsigned int n = 32;

    HMAC(EVP_sha256(), key, (int)klen, msg, mlen, out, &n);
}

void ckpt__md5_base64(const void *buf, size_t len, char out[25])
{
    unsigned char md[16];
    unsigned int n = 0;

    EVP_Digest(buf, len, md, &n, EVP_md5(), NULL);
    ckpt__base64_encode(md, 16, out);
}

void ckpt__md5_hex(const void *buf, size_t len, char out[33])
{
    unsigned char md[16];
    unsigned int n = 0;

    EVP_Digest(buf, len, md, &n, EVP_md5(), NULL);
    to_hex(md, 16, out);
}

int ckpt__crc32c_base64(const void *buf, size_t len, char out[9])
{
#ifdef CKPT_HAVE_ISAL
    const unsigned char *p = buf;
    unsigned int crc = 0xffffffffu;
    unsigned char be[4];
    /* crc32_iscsi takes an int length: feed at most 1 GiB at a time */
    while (len > 0) {
        size_t n = len > (1u << 30) ? (1u << 30) : len;
        crc = crc32_iscsi((unsigned char *)p, (int)n, crc);
        p += n;
        len -= n;
    }
    crc ^= 0xffffffffu;
    be[0] = (unsigned char)(crc >> 24);
    be[1] = (unsigned char)(crc >> 16);
    be[2] = (unsigned char)(crc >> 8);
    be[3] = (unsigned char)crc;
    ckpt__base64_encode(be, 4, out);
    return 1;
#else
    (void)buf;
    (void)len;
    (void)out;
    return 0;
#endif
}

void ckpt__base64_encode(const void *in, size_t n, char *out)
{
    EVP_EncodeBlock((unsigned char *)out, in, (int)n);
}

long ckpt__base64_decode(const char *in, unsigned char *out)
{
    size_t len = strlen(in);
    long n;

    if (len % 4)
        return -1;
    n = EVP_DecodeBlock(out, (const unsigned char *)in, (int)len);
    if (n < 0)
        return -1;
    /* EVP_DecodeBlock counts the '=' padding as zero bytes. */
    if (len && in[len - 1] == '=')
        n--;
    if (len > 1 && in[len - 2] == '=')
        n--;
    return n;
}

static int unreserved(unsigned char c)
{
    return isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~';
}

char *ckpt__uri_encode(const char *s, size_t len, int keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";
    char *out = malloc(3 * len + 1), *o = out;

    if (!out)
        return NULL;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (unreserved(c) || (keep_slash && c == '/')) {
            *o++ = (char)c;
        } else {
            *o++ = '%';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
        }
    }
    *o = '\0';
    return out;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

size_t ckpt__uri_decode(const char *s, size_t n, char *out)
{
    size_t i, o = 0;

    for (i = 0; i < n; i++) {
        if (s[i] == '%' && i + 2 < n && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
            out[o++] = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
            i += 2;
        } else {
            out[o++] = s[i];
        }
    }
    out[o] = '\0';
    return o;
}

void ckpt__query_free(struct ckpt_query_param *p, long n)
{
    for (long i = 0; i < n; i++) {
        free(p[i].name);
        free(p[i].value);
    }
    free(p);
}

long ckpt__query_split(const char *q, struct ckpt_query_param **out)
{
    struct ckpt_query_param *ps = NULL, *nps, *x;
    const char *p = q;
    long n = 0;

    *out = NULL;
    while (p && *p) {
        const char *amp = strchr(p, '&'), *eq;
        size_t plen = amp ? (size_t)(amp - p) : strlen(p), nl;
        if (plen) {
            eq = memchr(p, '=', plen);
            nl = eq ? (size_t)(eq - p) : plen;
            nps = realloc(ps, (size_t)(n + 1) * sizeof(*ps));
            if (!nps)
                goto fail;
            ps = nps;
            x = &ps[n++];
            x->name = malloc(nl + 1);
            x->value = malloc(eq ? plen - nl : 1);
            if (!x->name || !x->value)
                goto fail;
            x->name_len = ckpt__uri_decode(p, nl, x->name);
            x->value_len = eq ? ckpt__uri_decode(eq + 1, plen - nl - 1, x->value) : 0;
            if (!eq)
                x->value[0] = '\0';
        }
        p += plen;
        if (*p == '&')
            p++;
    }
    *out = ps;
    return n;
fail:
    ckpt__query_free(ps, n);
    return -1;
}

void ckpt__wipe(void *p, size_t n)
{
    if (p && n)
        OPENSSL_cleanse(p, n);
}

void ckpt__wipe_free(char *s)
{
    if (s) {
        ckpt__wipe(s, strlen(s));
        free(s);
    }
}
