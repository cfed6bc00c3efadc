/*
 * azure_sign.h -- Azure Storage SharedKey signing (azure_sign.c), used by the
 * Azure Blob dialect (azure.c) and checked by tests/unit/test_azure_sign.c.
 * Pure functions, thread-safe.
 */
#ifndef CKPT_AZURE_SIGN_H
#define CKPT_AZURE_SIGN_H
#include <stddef.h>
#include "ckpt.h"

struct ckpt_az_header {
    const char *name;
    const char *value;
};

/* The SharedKey string to sign (SPEC.md part B, "Azure Blob") for a request
 * with the given headers (any case; standard ones picked by name, x-ms-*
 * canonicalized), the URL path as sent (percent-encoded, starting with '/')
 * and the wire query (without '?', may be NULL). malloc'd, or NULL. */
char *ckpt__az_string_to_sign(const char *account, const char *method, const char *path,
                              const char *query, const struct ckpt_az_header *h, size_t nh);

/* "SharedKey ACCOUNT:SIGNATURE" into out. `key_b64` is the account key as
 * given (base64). @return CKPT_OK, CKPT_E_CONFIG (key not base64),
 * CKPT_E_NOMEM. */
ckpt_status ckpt__az_authorization(const char *account, const char *key_b64,
                                   const char *string_to_sign, char *out, size_t outlen);
#endif
