/*
 * sigv4.h -- AWS Signature Version 4 (header form), with OpenSSL libcrypto.
 *
 * Two flavours of canonical URI (SPEC.md part B):
 *  - CKPT_SIGV4_S3: the raw path is RFC 3986-encoded once, '/' kept, with no
 *    normalisation ("a//b" and "./" stay as they are), as S3 requires;
 *  - CKPT_SIGV4_GENERIC: the path is normalised (dot segments removed,
 *    repeated slashes merged) and then encoded; since the input is the path
 *    as written on the request line, an already-encoded "%20" becomes "%2520"
 *    (the double encoding every non-S3 service and the AWS test suite use).
 * The query is given in wire form ("b=2&a=1&flag"); each name and value is
 * percent-decoded and re-encoded strictly, then sorted by name and value.
 * Every header given is signed: lowercase names, values trimmed with inner
 * runs of blanks collapsed, repeated names joined with ','. The caller
 * includes host, x-amz-date, x-amz-content-sha256 (S3) and
 * x-amz-security-token (session credentials) among them. The digests it
 * needs (SHA-256, HMAC) and the percent-encoding come from digest.h.
 */
#ifndef CKPT_SIGV4_H
#define CKPT_SIGV4_H

#include <stddef.h>
#include "ckpt.h"

enum ckpt_sigv4_mode { CKPT_SIGV4_S3 = 0, CKPT_SIGV4_GENERIC = 1 };

struct ckpt_sigv4_header {
    const char *name;
    const char *value;
};

struct ckpt_sigv4_input {
    enum ckpt_sigv4_mode mode;
    const char *method;
    const char *path;          /* see above; "" means "/" */
    const char *query;         /* wire form without '?', or NULL */
    const struct ckpt_sigv4_header *headers;
    size_t nheaders;
    const char *payload_hash;  /* lowercase hex SHA-256, or "UNSIGNED-PAYLOAD" */
    const char *access_key;
    const char *secret_key;
    const char *region;
    const char *service;       /* "s3" */
    const char *amz_date;      /* "YYYYMMDDTHHMMSSZ" */
};

/* Sign. On CKPT_OK, *authorization is the malloc'd Authorization header value
 * ("AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...");
 * canonical_out and sts_out (may be NULL) receive the malloc'd canonical
 * request and string to sign, for tests and debugging (they hold no secret).
 * @return CKPT_OK, CKPT_E_INVAL (bad date or missing field), CKPT_E_NOMEM. */
ckpt_status ckpt__sigv4_sign(const struct ckpt_sigv4_input *in, char **authorization,
                             char **canonical_out, char **sts_out);

/* "YYYYMMDDTHHMMSSZ" for time t (UTC). out: 17 bytes. */
void ckpt__sigv4_amz_date(long long t, char out[17]);

#endif
