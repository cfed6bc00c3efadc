/* envelope.c -- the sealed text of a run's records (envelope.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "format/envelope.h"
#include "base/util.h"

#define ENV_TAG "\n#xxh64:"
#define ENV_TAG_LEN 8
#define ENV_TRAILER (ENV_TAG_LEN + 16 + 1)

char *ckpt__envelope_seal(const char *json, size_t *len)
{
    size_t jl = strlen(json);
    char *out = malloc(jl + ENV_TRAILER + 1);
    if (!out)
        return NULL;
    memcpy(out, json, jl);
    snprintf(out + jl, ENV_TRAILER + 1, ENV_TAG "%016llx\n",
             (unsigned long long)XXH64(json, jl, 0));
    *len = jl + ENV_TRAILER;
    return out;
}

ckpt_status ckpt__envelope_open(const void *buf, size_t len, size_t *json_len, char *err)
{
    const char *p = buf;
    char want[17];
    if (len < ENV_TRAILER + 2 || p[len - 1] != '\n' ||
        memcmp(p + len - ENV_TRAILER, ENV_TAG, ENV_TAG_LEN) != 0) {
        ckpt__seterr(err, "missing checksum trailer (truncated or not a ckpt object)");
        return CKPT_E_CORRUPT;
    }
    *json_len = len - ENV_TRAILER;
    snprintf(want, sizeof want, "%016llx", (unsigned long long)XXH64(p, *json_len, 0));
    if (memcmp(want, p + len - 17, 16) != 0) {
        ckpt__seterr(err, "checksum mismatch: stored %.16s, computed %s", p + len - 17, want);
        return CKPT_E_CORRUPT;
    }
    if (memchr(p, '\0', *json_len)) {
        ckpt__seterr(err, "NUL byte in text");
        return CKPT_E_CORRUPT;
    }
    return CKPT_OK;
}

ckpt_status ckpt__envelope_parse(const void *buf, size_t len, size_t max, const char *what,
                                 cJSON **root, char *err)
{
    size_t jl;
    ckpt_status st;
    *root = NULL;
    if (len > max) {
        ckpt__seterr(err, "%s too large (%zu bytes)", what, len);
        return CKPT_E_CORRUPT;
    }
    st = ckpt__envelope_open(buf, len, &jl, err);
    if (st)
        return st;
    *root = cJSON_ParseWithLength(buf, jl);
    return CKPT_OK;
}

ckpt_status ckpt__envelope_record(const void *buf, size_t len, size_t max, const char *what,
                                  const char *kind, int fmt_max, cJSON **root, double *fmt,
                                  char *err)
{
    ckpt_status st = ckpt__envelope_parse(buf, len, max, what, root, err);
    const char *k;
    if (st)
        return st;
    st = CKPT_E_CORRUPT;
    if (!cJSON_IsObject(*root) || ckpt__json_get_num(*root, "format", 1, 1e9, fmt)) {
        ckpt__seterr(err, "%s is not a JSON object with a format", what);
    } else if (*fmt > fmt_max) {
        ckpt__seterr(err, "%s format %g is newer than this ckpt (%d): upgrade", what, *fmt,
                     fmt_max);
        st = CKPT_E_UNSUPPORTED;
    } else if (!(k = ckpt__json_get_str(*root, "kind")) || strcmp(k, kind) != 0) {
        ckpt__seterr(err, "%s is not of kind \"%s\"", what, kind);
    } else {
        return CKPT_OK;
    }
    cJSON_Delete(*root);
    *root = NULL;
    return st;
}

/* ---- JSON fields --------------------------------------------------------------- */
int ckpt__json_add_u64s(cJSON *o, const char *k, uint64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    return cJSON_AddStringToObject(o, k, buf) != NULL;
}

int ckpt__json_add_num(cJSON *o, const char *k, double v)
{
    return cJSON_AddNumberToObject(o, k, v) != NULL;
}

int ckpt__json_get_u64s(const cJSON *o, const char *k, uint64_t *v)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, k);
    char *end;
    if (!cJSON_IsString(it) || !it->valuestring[0] || strlen(it->valuestring) > 20)
        return -1;
    for (const char *c = it->valuestring; *c; c++)
        if (*c < '0' || *c > '9')
            return -1;
    *v = strtoull(it->valuestring, &end, 10);
    return *end ? -1 : 0;
}

int ckpt__json_get_num(const cJSON *o, const char *k, double lo, double hi, double *v)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!cJSON_IsNumber(it) || it->valuedouble < lo || it->valuedouble > hi ||
        it->valuedouble != (double)(int64_t)it->valuedouble)
        return -1;
    *v = it->valuedouble;
    return 0;
}

const char *ckpt__json_get_str(const cJSON *o, const char *k)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(it) ? it->valuestring : NULL;
}

