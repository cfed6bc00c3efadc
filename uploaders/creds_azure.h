/*
 * creds_azure.h -- where the Azure store finds its credentials
 * (creds_azure.c), private to uploaders/. First match wins:
 *  AZURE_STORAGE_CONNECTION_STRING (AccountName, AccountKey or
 *  SharedAccessSignature, BlobEndpoint or
 *  DefaultEndpointsProtocol/EndpointSuffix), then AZURE_STORAGE_ACCOUNT
 *  with AZURE_STORAGE_KEY (SharedKey) or AZURE_STORAGE_SAS_TOKEN (SAS).
 *
 * Secrets are wiped when freed. Nothing here logs. The functions read the
 * environment and files and are otherwise thread-safe (no shared state).
 */
#ifndef CKPT_CREDS_AZURE_H
#define CKPT_CREDS_AZURE_H

#include <stddef.h>
#include <stdint.h>
#include "ckpt.h"

struct ckpt_az_creds {
    char *account;    /* "" for a SAS-only connection string */
    char *key_b64;    /* SharedKey (base64), or NULL */
    char *sas;        /* SAS query without '?', or NULL */
    char *endpoint;   /* Blob endpoint URL */
    char source[256]; /* where they came from; never key material */
};
/* From the environment. Both a key and a SAS: the key signs.
 * @return CKPT_OK, CKPT_E_AUTH (none found), CKPT_E_CONFIG (a key without an
 *         account), CKPT_E_NOMEM; detail in err. */
ckpt_status ckpt__az_creds_load(struct ckpt_az_creds *c, char *err);
void ckpt__az_creds_free(struct ckpt_az_creds *c);
/* The value of `name` (case-insensitive) in a "K=V;K=V" connection string
 * (V may hold '='), malloc'd, or NULL. */
char *ckpt__az_cs_get(const char *cs, const char *name);

#endif
