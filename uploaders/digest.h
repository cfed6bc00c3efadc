/*
 * digest.h -- the digests and byte encodings the object stores put on the
 * wire: MD5 (Content-MD5, S3 single-part ETags), SHA-256 and HMAC-SHA256
 * (SigV4, SharedKey), CRC32C (x-amz-checksum-crc32c), base64 and RFC 3986
 * percent-encoding. OpenSSL's libcrypto does the hashing, ISA-L the CRC32C
 * when the build has it. Every function is pure and thread-safe.
 */
#ifndef CKPT_DIGEST_H
#define CKPT_DIGEST_H

#include <stddef.h>

/* Hex SHA-256 of a buffer (out: 65 bytes, lowercase). */
void ckpt__sha256_hex(const void *buf, size_t len, char out[65]);
/* HMAC-SHA256 of msg under key (out: 32 raw bytes). */
void ckpt__hmac_sha256(const void *key, size_t klen, const void *msg, size_t mlen,
                       unsigned char out[32]);
/* Base64 MD5 of a buffer (out: 25 bytes), for Content-MD5; raw hex (out: 33
 * bytes, lowercase) for comparing with S3 single-part ETags. */
void ckpt__md5_base64(const void *buf, size_t len, char out[25]);
void ckpt__md5_hex(const void *buf, size_t len, char out[33]);
/* Base64 of the big-endian CRC32C (Castagnoli) of a buffer (out: 9 bytes),
 * for x-amz-checksum-crc32c. @return 1, or 0 when built without ISA-L
 * (out untouched). */
int ckpt__crc32c_base64(const void *buf, size_t len, char out[9]);

/* Base64 of n bytes into out (4 * ceil(n / 3) + 1 bytes), NUL-terminated. */
void ckpt__base64_encode(const void *in, size_t n, char *out);
/* Decode base64 text (its length a multiple of 4, '=' padding) into out
 * (at least 3 * strlen(in) / 4 bytes). @return the number of bytes, or -1
 * when `in` is not base64. */
long ckpt__base64_decode(const char *in, unsigned char *out);

/* RFC 3986 percent-encoding as SigV4 and Azure want it: unreserved
 * A-Za-z0-9-_.~ kept, every other byte as %XX (uppercase hex), '/' kept when
 * keep_slash. @return a malloc'd string (caller frees) or NULL. */
char *ckpt__uri_encode(const char *s, size_t len, int keep_slash);

/* Percent-decode n bytes of s into out (at least n + 1 bytes, then
 * NUL-terminated); a '%' not followed by two hex digits and '+' stay as
 * they are. @return the decoded length. */
size_t ckpt__uri_decode(const char *s, size_t n, char *out);

/* One parameter of a query, percent-decoded (malloc'd, NUL-terminated; the
 * lengths count a decoded NUL too). */
struct ckpt_query_param {
    char *name, *value;
    size_t name_len, value_len;
};
/* Split a wire query ("b=2&a=1&flag", without '?') into its parameters in
 * order ("flag" has the value ""; empty parts are skipped). On success *out
 * is a malloc'd array (NULL when there is none) to release with
 * ckpt__query_free. @return the number of parameters, or -1 when memory ran
 * out. */
long ckpt__query_split(const char *q, struct ckpt_query_param **out);
void ckpt__query_free(struct ckpt_query_param *p, long n);

/* Zero memory that held a secret in a way the compiler keeps. */
void ckpt__wipe(void *p, size_t n);
/* Wipe a NUL-terminated secret and free it (NULL-safe). */
void ckpt__wipe_free(char *s);

#endif
