/* backend.c -- what every backend and the transport lean on (backend.h):
 * key validation and prefixed keys. Nothing here calls up into a backend
 * or store.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

int ckpt_path_valid(const char *p, size_t max, const char *extra)
{
    size_t len, seg = 0;
    if (!p || !*p || p[0] == '/')
        return 0;
    len = strlen(p);
    if (len > max || p[len - 1] == '/')
        return 0;
    for (size_t i = 0; i <= len; i++) {
        char c = p[i];
        if (c == '/' || c == '\0') {
            /* empty, "." and ".." segments are refused */
            if (seg == 0 || (seg == 1 && p[i - 1] == '.') ||
                (seg == 2 && p[i - 1] == '.' && p[i - 2] == '.'))
                return 0;
            seg = 0;
            continue;
        }
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-' || (extra && strchr(extra, c))))
            return 0;
        seg++;
    }
    return 1;
}

int ckpt_key_valid(const char *key)
{
    return ckpt_path_valid(key, 1024, NULL);
}

ckpt_status ckpt__store_prefixed_key(const char *prefix, const char *key, char **out, char *err)
{
    size_t pl, kl;
    *out = NULL;
    if (!key || !ckpt_key_valid(key)) {
        ckpt__seterr(err, "invalid key");
        return CKPT_E_INVAL;
    }
    pl = prefix ? strlen(prefix) : 0;
    kl = strlen(key);
    *out = malloc(pl + kl + 1);
    if (!*out)
        return CKPT_E_NOMEM;
    memcpy(*out, prefix ? prefix : "", pl);
    memcpy(*out + pl, key, kl + 1);
    return CKPT_OK;
}

