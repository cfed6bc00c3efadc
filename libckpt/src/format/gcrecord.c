/* gcrecord.c -- encoding and decoding gc records (gcrecord.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/envelope.h"
#include "format/gcrecord.h"
#include "format/manifest.h"
#include "base/util.h"

void ckpt__gc_victims_free(struct ckpt_gc_victims *v)
{
    if (!v)
        return;
    ckpt__idset_free(&v->objs);
    for (size_t i = 0; i < v->nmanifests; i++)
        free(v->manifests[i]);
    free(v->manifests);
    memset(v, 0, sizeof *v);
}

int ckpt__gc_victims_add_manifest(struct ckpt_gc_victims *v, const char *rel)
{
    if ((v->nmanifests & (v->nmanifests - 1)) == 0) { /* 0, 1, 2, 4...: grow */
        char **nm = realloc(v->manifests, (v->nmanifests ? v->nmanifests * 2 : 4) * sizeof *nm);
        if (!nm)
            return -1;
        v->manifests = nm;
    }
    if (!(v->manifests[v->nmanifests] = ckpt__strdup(rel)))
        return -1;
    v->nmanifests++;
    return 0;
}

static int add_id_array(cJSON *root, const char *name, const struct ckpt_idset *s, int kind)
{
    cJSON *a = cJSON_AddArrayToObject(root, name);
    if (!a)
        return 0;
    for (size_t i = 0; i < s->cap; i++) {
        char hex[CKPT_ID_HEX + 1];
        if (!s->used[i] || !(s->vals[i] & (1u << kind)))
            continue;
        ckpt__hex(s->keys[i], CKPT_ID_LEN, hex);
        if (!cJSON_AddItemToArray(a, cJSON_CreateString(hex)))
            return 0;
    }
    return 1;
}

ckpt_status ckpt__gc_record_encode(const struct ckpt_gc_victims *v, int64_t time_ms, char **out,
                                   size_t *len)
{
    ckpt_status st = CKPT_E_NOMEM;
    cJSON *root = cJSON_CreateObject(), *mans;
    char *text = NULL;
    int ok = root && ckpt__json_add_num(root, "format", 1) &&
             cJSON_AddStringToObject(root, "kind", "gc") &&
             ckpt__json_add_num(root, "time_ms", (double)time_ms) &&
             add_id_array(root, "chunks", &v->objs, CKPT_OBJ_CHUNK) &&
             add_id_array(root, "packs", &v->objs, CKPT_OBJ_PACK);
    mans = ok ? cJSON_AddArrayToObject(root, "manifests") : NULL;
    ok = ok && mans;
    for (size_t i = 0; ok && i < v->nmanifests; i++)
        ok = cJSON_AddItemToArray(mans, cJSON_CreateString(v->manifests[i]));
    if (ok && (text = cJSON_PrintUnformatted(root)) && (*out = ckpt__envelope_seal(text, len)))
        st = CKPT_OK;
    free(text);
    cJSON_Delete(root);
    return st;
}

ckpt_status ckpt__gc_record_decode(const void *buf, size_t len, struct ckpt_gc_victims *v,
                                   char *err)
{
    ckpt_status st;
    cJSON *root = NULL;
    const cJSON *a, *it;
    double fmt;
    const char *kind;
    static const char *const lists[2] = { "chunks", "packs" };

    st = ckpt__envelope_parse(buf, len, CKPT_MANIFEST_MAX, "gc record", &root, err);
    if (st)
        return st;
    st = CKPT_E_CORRUPT;
    kind = ckpt__json_get_str(root, "kind");
    if (!cJSON_IsObject(root) || ckpt__json_get_num(root, "format", 1, 1, &fmt) || !kind ||
        strcmp(kind, "gc")) {
        ckpt__seterr(err, "not a gc record of format 1");
        goto out;
    }
    for (int k = 0; k < 2; k++) {
        a = cJSON_GetObjectItemCaseSensitive(root, lists[k]);
        if (!cJSON_IsArray(a)) {
            ckpt__seterr(err, "gc record: no %s list", lists[k]);
            goto out;
        }
        cJSON_ArrayForEach(it, a)
        {
            uint8_t id[CKPT_ID_LEN];
            if (!cJSON_IsString(it) || strlen(it->valuestring) != CKPT_ID_HEX ||
                ckpt__unhex(it->valuestring, id, CKPT_ID_LEN)) {
                ckpt__seterr(err, "gc record: bad id in %s", lists[k]);
                goto out;
            }
            if (ckpt__objset_add(&v->objs, id, k)) {
                st = CKPT_E_NOMEM;
                goto out;
            }
        }
    }
    a = cJSON_GetObjectItemCaseSensitive(root, "manifests");
    if (!cJSON_IsArray(a)) {
        ckpt__seterr(err, "gc record: no manifests list");
        goto out;
    }
    cJSON_ArrayForEach(it, a)
    {
        if (!cJSON_IsString(it) || strlen(it->valuestring) > 512 ||
            strncmp(it->valuestring, "manifests/", 10) || !ckpt_key_valid(it->valuestring)) {
            ckpt__seterr(err, "gc record: bad manifest key");
            goto out;
        }
        if (ckpt__gc_victims_add_manifest(v, it->valuestring)) {
            st = CKPT_E_NOMEM;
            goto out;
        }
    }
    st = CKPT_OK;
out:
    cJSON_Delete(root);
    return st;
}
