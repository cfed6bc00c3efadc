/* head.c -- encoding and decoding a run's HEAD (head.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/envelope.h"
#include "format/head.h"
#include "format/manifest.h"
#include "base/util.h"

static int cmp_entry(const void *a, const void *b)
{
    const struct ckpt_head_entry *x = a, *y = b;
    if (x->step != y->step)
        return x->step > y->step ? -1 : 1;
    if (x->seq != y->seq)
        return x->seq > y->seq ? -1 : 1;
    return strcmp(x->manifest, y->manifest);
}

void ckpt__head_sort(struct ckpt_head_entry *e, size_t n)
{
    if (n > 1)
        qsort(e, n, sizeof *e, cmp_entry);
}

void ckpt__head_free(struct ckpt_head *h)
{
    if (!h)
        return;
    for (size_t i = 0; i < h->n; i++)
        free(h->entries[i].manifest);
    free(h->entries);
    for (size_t i = 0; i < h->ndamaged; i++)
        free(h->damaged[i].manifest);
    free(h->damaged);
    for (size_t i = 0; i < h->ngc; i++)
        free(h->gc[i].record);
    free(h->gc);
    memset(h, 0, sizeof *h);
}

static int gc_record_key_valid(const char *k)
{
    return k && strlen(k) == 3 + CKPT_ID_HEX && !strncmp(k, "gc/", 3) && ckpt_key_valid(k);
}

static int add_entries(cJSON *arr, const struct ckpt_head_entry *e, size_t n, int damaged)
{
    int ok = 1;
    for (size_t i = 0; ok && i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddItemToArray(arr, o) &&
             cJSON_AddStringToObject(o, "manifest", e[i].manifest) &&
             ckpt__json_add_u64s(o, "step", e[i].step) && ckpt__json_add_u64s(o, "seq", e[i].seq);
        if (ok && e[i].format)
            ok = ckpt__json_add_num(o, "format", e[i].format);
        if (ok && e[i].world_size > 1)
            ok = ckpt__json_add_num(o, "world_size", e[i].world_size);
        if (ok && damaged)
            ok = ckpt__json_add_num(o, "marked_ms", (double)e[i].marked_ms);
    }
    return ok;
}

/* Entries of HEAD's "retained" or "damaged" array into *out (count in *n). */
static ckpt_status get_entries(const cJSON *arr, int damaged, struct ckpt_head_entry **out,
                               size_t *n, char *err)
{
    const cJSON *o;
    size_t cnt = (size_t)cJSON_GetArraySize(arr), i = 0;
    *n = 0;
    *out = NULL;
    if (cnt > 100000) {
        ckpt__seterr(err, "HEAD: %zu entries", cnt);
        return CKPT_E_CORRUPT;
    }
    *out = cnt ? calloc(cnt, sizeof **out) : NULL;
    if (cnt && !*out)
        return CKPT_E_NOMEM;
    cJSON_ArrayForEach(o, arr)
    {
        const char *mk = ckpt__json_get_str(o, "manifest");
        struct ckpt_head_entry *e = &(*out)[i];
        double ef = 0, mt = 0, ws = 1;
        if (!mk || strlen(mk) > 512 || strncmp(mk, "manifests/", 10) || !ckpt_key_valid(mk) ||
            ckpt__json_get_u64s(o, "step", &e->step) || ckpt__json_get_u64s(o, "seq", &e->seq) ||
            (cJSON_GetObjectItemCaseSensitive(o, "format") &&
             ckpt__json_get_num(o, "format", 1, 1e9, &ef)) ||
            (damaged && ckpt__json_get_num(o, "marked_ms", 0, CKPT_JSON_MAX_SAFE, &mt)) ||
            (cJSON_GetObjectItemCaseSensitive(o, "world_size") &&
             ckpt__json_get_num(o, "world_size", 1, 1 << 24, &ws)) ||
            (ws > 1) != (ef >= CKPT_FORMAT_RANKS && ckpt__is_commit_key(mk))) {
            ckpt__seterr(err, "HEAD: malformed %s entry %zu", damaged ? "damaged" : "retained",
                         i);
            return CKPT_E_CORRUPT;
        }
        e->format = (unsigned)ef; /* 0: not recorded (written before format 3) */
        e->marked_ms = (int64_t)mt;
        e->world_size = (unsigned)ws;
        e->manifest = ckpt__strdup(mk);
        *n = ++i;
        if (!e->manifest)
            return CKPT_E_NOMEM;
    }
    return CKPT_OK;
}

ckpt_status ckpt__head_encode(const struct ckpt_head *h, char **out, size_t *len)
{
    ckpt_status st = CKPT_E_NOMEM;
    cJSON *root = cJSON_CreateObject(), *arr;
    char *text = NULL;
    int ok = root != NULL;
    unsigned fmt = CKPT_HEAD_FORMAT;

    /* HEAD takes the format of a manifest it names when that is above 2:
     * readers before format 3 accepted HEAD formats up to 2 and refuse a
     * larger one with "upgrade", so they neither restore what they cannot
     * read nor commit over it (their retention would push it out). */
    for (size_t i = 0; i < h->n + h->ndamaged; i++) {
        const struct ckpt_head_entry *e = i < h->n ? &h->entries[i] : &h->damaged[i - h->n];
        if (e->format > CKPT_FORMAT_PACKS && e->format > fmt)
            fmt = e->format;
    }
    ok = ok && ckpt__json_add_num(root, "format", fmt) &&
         cJSON_AddStringToObject(root, "kind", "head") &&
         ckpt__json_add_u64s(root, "rev", h->rev) && ckpt__json_add_u64s(root, "seq", h->seq) &&
         ckpt__json_add_u64s(root, "step", h->step) &&
         ckpt__json_add_u64s(root, "epoch", h->epoch) &&
         ckpt__json_add_num(root, "time_ms", (double)h->time_ms);
    arr = ok ? cJSON_AddArrayToObject(root, "retained") : NULL;
    ok = ok && arr && add_entries(arr, h->entries, h->n, 0);
    if (ok && h->ndamaged) {
        cJSON *d = cJSON_AddArrayToObject(root, "damaged");
        ok = d && add_entries(d, h->damaged, h->ndamaged, 1);
    }
    if (ok && h->ngc) {
        cJSON *gc = cJSON_AddArrayToObject(root, "gc");
        ok = gc != NULL;
        for (size_t i = 0; ok && i < h->ngc; i++) {
            cJSON *o = cJSON_CreateObject();
            ok = o && cJSON_AddItemToArray(gc, o) &&
                 cJSON_AddStringToObject(o, "record", h->gc[i].record) &&
                 ckpt__json_add_num(o, "time_ms", (double)h->gc[i].time_ms);
        }
    }
    if (!ok)
        goto out;
    text = cJSON_PrintUnformatted(root);
    if (text && (*out = ckpt__envelope_seal(text, len)))
        st = CKPT_OK;
out:
    free(text);
    cJSON_Delete(root);
    return st;
}

ckpt_status ckpt__head_decode(const void *buf, size_t len, struct ckpt_head *h, char *err)
{
    ckpt_status st;
    cJSON *root = NULL, *arr;
    double fmt, t;

    memset(h, 0, sizeof *h);
    st = ckpt__envelope_record(buf, len, CKPT_HEAD_MAX, "HEAD", "head", CKPT_HEAD_FORMAT_MAX,
                               &root, &fmt, err);
    if (st)
        return st;
    st = CKPT_E_CORRUPT;
    arr = cJSON_GetObjectItemCaseSensitive(root, "retained");
    if (ckpt__json_get_u64s(root, "seq", &h->seq) ||
        ckpt__json_get_u64s(root, "step", &h->step) ||
        ckpt__json_get_u64s(root, "epoch", &h->epoch) ||
        ckpt__json_get_num(root, "time_ms", 0, CKPT_JSON_MAX_SAFE, &t) || !cJSON_IsArray(arr)) {
        ckpt__seterr(err, "HEAD: missing or out-of-range field");
        goto out;
    }
    h->version = (unsigned)fmt;
    h->time_ms = (int64_t)t;
    if (cJSON_GetObjectItemCaseSensitive(root, "rev") &&
        ckpt__json_get_u64s(root, "rev", &h->rev)) {
        ckpt__seterr(err, "HEAD: bad rev");
        goto out;
    }
    st = get_entries(arr, 0, &h->entries, &h->n, err);
    if (st)
        goto out;
    {
        const cJSON *dam = cJSON_GetObjectItemCaseSensitive(root, "damaged");
        if (dam && !cJSON_IsArray(dam)) {
            ckpt__seterr(err, "HEAD: bad damaged field");
            st = CKPT_E_CORRUPT;
            goto out;
        }
        if (dam && (st = get_entries(dam, 1, &h->damaged, &h->ndamaged, err)) != CKPT_OK)
            goto out;
    }
    st = CKPT_E_CORRUPT;
    /* the resume order is by step, whatever the order of commits (HEADs
     * written before format 3 listed the last commit first) */
    ckpt__head_sort(h->entries, h->n);
    {
        /* gc records in force (optional; older readers ignore them) */
        const cJSON *gc = cJSON_GetObjectItemCaseSensitive(root, "gc"), *g;
        size_t ng = gc ? (size_t)cJSON_GetArraySize(gc) : 0;
        if (gc && (!cJSON_IsArray(gc) || ng > CKPT_GC_MAX_REFS)) {
            ckpt__seterr(err, "HEAD: bad gc field");
            goto out;
        }
        h->gc = ng ? calloc(ng, sizeof *h->gc) : NULL;
        if (ng && !h->gc) {
            st = CKPT_E_NOMEM;
            goto out;
        }
        cJSON_ArrayForEach(g, gc)
        {
            const char *rk = ckpt__json_get_str(g, "record");
            double gt;
            if (!gc_record_key_valid(rk) ||
                ckpt__json_get_num(g, "time_ms", 0, CKPT_JSON_MAX_SAFE, &gt)) {
                ckpt__seterr(err, "HEAD: malformed gc record %zu", h->ngc);
                goto out;
            }
            h->gc[h->ngc].time_ms = (int64_t)gt;
            h->gc[h->ngc].record = ckpt__strdup(rk);
            if (!h->gc[h->ngc++].record) {
                st = CKPT_E_NOMEM;
                goto out;
            }
        }
    }
    st = CKPT_OK;
out:
    cJSON_Delete(root);
    if (st)
        ckpt__head_free(h);
    return st;
}

