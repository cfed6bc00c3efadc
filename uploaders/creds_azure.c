/*
 * creds_azure.c -- Azure Blob credentials from the environment (creds_azure.h).
 */
#include "creds_azure.h"
#include "backend.h"
#include "digest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

char *ckpt__az_cs_get(const char *cs, const char *name)
{
    size_t nl = strlen(name);
    const char *p = cs;

    while (p && *p) {
        const char *semi = strchr(p, ';');
        size_t len = semi ? (size_t)(semi - p) : strlen(p);
        while (*p == ' ' && len) {
            p++;
            len--;
        }
        if (len > nl && strncasecmp(p, name, nl) == 0 && p[nl] == '=')
            return strndup(p + nl + 1, len - nl - 1);
        p = semi ? semi + 1 : NULL;
    }
    return NULL;
}

static char *env_dup(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? strdup(v) : NULL;
}

void ckpt__az_creds_free(struct ckpt_az_creds *c)
{
    free(c->account);
    ckpt__wipe_free(c->key_b64);
    ckpt__wipe_free(c->sas);
    free(c->endpoint);
    memset(c, 0, sizeof(*c));
}

ckpt_status ckpt__az_creds_load(struct ckpt_az_creds *c, char *err)
{
    const char *cs = getenv("AZURE_STORAGE_CONNECTION_STRING");
    char *proto = NULL, *suffix = NULL;
    ckpt_status st = CKPT_OK;
    int from_cs = cs && *cs;

    if (from_cs) {
        c->account = ckpt__az_cs_get(cs, "AccountName");
        c->key_b64 = ckpt__az_cs_get(cs, "AccountKey");
        c->sas = ckpt__az_cs_get(cs, "SharedAccessSignature");
        c->endpoint = ckpt__az_cs_get(cs, "BlobEndpoint");
        proto = ckpt__az_cs_get(cs, "DefaultEndpointsProtocol");
        suffix = ckpt__az_cs_get(cs, "EndpointSuffix");
    } else {
        c->account = env_dup("AZURE_STORAGE_ACCOUNT");
        c->key_b64 = env_dup("AZURE_STORAGE_KEY");
        c->sas = env_dup("AZURE_STORAGE_SAS_TOKEN");
    }
    if (c->sas && c->sas[0] == '?')
        memmove(c->sas, c->sas + 1, strlen(c->sas));
    if (c->key_b64 && c->sas) {
        /* Both given: the key signs, the SAS is not needed. */
        ckpt__wipe_free(c->sas);
        c->sas = NULL;
    }
    if (!c->account && c->endpoint) {
        /* SAS-only connection strings may omit AccountName. */
        c->account = strdup("");
    }
    if (!c->account || (!c->key_b64 && !c->sas)) {
        ckpt__seterr(err, "no Azure credentials (AZURE_STORAGE_CONNECTION_STRING, or "
                          "AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY or "
                          "AZURE_STORAGE_SAS_TOKEN)");
        st = CKPT_E_AUTH;
        goto out;
    }
    if (c->key_b64 && !*c->account) {
        ckpt__seterr(err, "Azure account key given without an account name");
        st = CKPT_E_CONFIG;
        goto out;
    }
    if (!c->endpoint &&
        asprintf(&c->endpoint, "%s://%s.blob.%s", proto ? proto : "https", c->account,
                 suffix ? suffix : "core.windows.net") < 0) {
        c->endpoint = NULL;
        st = CKPT_E_NOMEM;
        goto out;
    }
    /* For diagnostics: the source and the kind of secret, never its value. */
    snprintf(c->source, sizeof(c->source), "%s, account '%.64s', %s",
             from_cs ? "connection string (AZURE_STORAGE_CONNECTION_STRING)"
             : c->key_b64 ? "environment (AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_KEY)"
                          : "environment (AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_SAS_TOKEN)",
             c->account, c->key_b64 ? "shared key" : "SAS token");
out:
    free(proto);
    free(suffix);
    return st;
}
