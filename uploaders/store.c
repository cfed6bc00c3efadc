/* store.c -- store URL dispatch and helpers shared by every backend. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

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

ckpt_status ckpt_store_prefixed_key(const char *prefix, const char *key, char **out, char *err)
{
    size_t pl, kl;
    *out = NULL;
    if (!key || !ckpt_key_valid(key)) {
        if (err)
            snprintf(err, CKPT_ERR_MAX, "invalid key");
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

char *ckpt_store_default_url(char *buf, size_t len)
{
    const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    int n;
    if (xdg && xdg[0] == '/')
        n = snprintf(buf, len, "file://%s/ckpt", xdg);
    else if (home && home[0] == '/')
        n = snprintf(buf, len, "file://%s/.local/share/ckpt", home);
    else
        return NULL;
    return n > 0 && (size_t)n < len ? buf : NULL;
}

ckpt_status ckpt_store_open(const char *url, const struct ckpt_store_config *cfg,
                            struct ckpt_store **out, char *err)
{
    char def[4096];
    *out = NULL;
    if (!url || !*url) {
        url = ckpt_store_default_url(def, sizeof def);
        if (!url) {
            if (err)
                snprintf(err, CKPT_ERR_MAX, "no store given and neither XDG_DATA_HOME nor "
                                            "HOME is an absolute path");
            return CKPT_E_CONFIG;
        }
    }
    if (!strncmp(url, "file://", 7)) {
        if (url[7] != '/') {
            if (err)
                snprintf(err, CKPT_ERR_MAX, "file store URL must be file:///absolute/path: %s",
                         url);
            return CKPT_E_CONFIG;
        }
        return ckpt_store_file_open(url + 7, cfg, out, err);
    }
    if (!strncmp(url, "s3://", 5) || !strncmp(url, "gs://", 5)) {
#ifdef CKPT_WITH_S3
        return ckpt_store_s3_open(url, cfg, out, err);
#else
        if (err)
            snprintf(err, CKPT_ERR_MAX, "%.2s:// stores are not compiled into this build", url);
        return CKPT_E_UNSUPPORTED;
#endif
    }
    if (!strncmp(url, "az://", 5)) {
#ifdef CKPT_WITH_AZURE
        return ckpt_store_az_open(url, cfg, out, err);
#else
        if (err)
            snprintf(err, CKPT_ERR_MAX, "az:// stores are not compiled into this build");
        return CKPT_E_UNSUPPORTED;
#endif
    }
    if (err)
        snprintf(err, CKPT_ERR_MAX,
                 "unknown store URL '%s' (expected file:///path, s3://bucket/prefix, "
                 "gs://bucket/prefix or az://container/prefix)", url);
    return CKPT_E_CONFIG;
}

void ckpt_store_close(struct ckpt_store *st)
{
    if (st)
        st->ops->close(st);
}
