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
 * x-amz-security-token (session credentials) among them.
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
ckpt_status ckpt_sigv4_sign(const struct ckpt_sigv4_input *in,
                            char **authorization, char **canonical_out,
                            char **sts_out);

/* RFC 3986 encoding as SigV4 wants it (unreserved kept, uppercase hex), '/'
 * kept when keep_slash. @return malloc'd string or NULL. */
char *ckpt_sigv4_uri_encode(const char *s, size_t len, int keep_slash);

/* Hex SHA-256 of a buffer (out: 65 bytes). */
void ckpt_sha256_hex(const void *buf, size_t len, char out[65]);
/* Base64 MD5 of a buffer (out: 25 bytes), for Content-MD5. Also raw hex
 * (out: 33 bytes) for comparing with S3 single-part ETags. */
void ckpt_md5_base64(const void *buf, size_t len, char out[25]);
void ckpt_md5_hex(const void *buf, size_t len, char out[33]);
/* Base64 of the big-endian CRC32C (Castagnoli) of a buffer (out: 9 bytes),
 * for x-amz-checksum-crc32c. @return 1, or 0 when built without ISA-L
 * (out untouched). */
int ckpt_crc32c_base64(const void *buf, size_t len, char out[9]);
/* "YYYYMMDDTHHMMSSZ" for time t (UTC). out: 17 bytes. */
void ckpt_sigv4_amz_date(long long t, char out[17]);

#endif
