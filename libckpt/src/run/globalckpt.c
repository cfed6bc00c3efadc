/* globalckpt.c -- commit records and the composition of parts (globalckpt.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "core/ctx.h"
#include "format/envelope.h"
#include "run/globalckpt.h"
#include "format/itemset.h"
#include "run/runread.h"

#define MAX_WORLD (1u << 20)
#define MAX_REPLICATED 1000000u

uint64_t ckpt__replicated_digest(uint64_t size, const struct ckpt_chunk_ref *chunks, size_t n)
{
    XXH3_state_t *s = XXH3_createState();
    uint8_t le[8];
    uint64_t d;
    if (!s) { /* without memory: hash id by id into a running value */
        d = XXH3_64bits(&size, sizeof size);
        for (size_t c = 0; c < n; c++)
            d = XXH3_64bits_withSeed(chunks[c].id, CKPT_ID_LEN, d);
        return d;
    }
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)(size >> (8 * i));
    XXH3_64bits_reset(s);
    XXH3_64bits_update(s, le, sizeof le);
    for (size_t c = 0; c < n; c++)
        XXH3_64bits_update(s, chunks[c].id, CKPT_ID_LEN);
    d = XXH3_64bits_digest(s);
    XXH3_freeState(s);
    return d;
}

void ckpt__commit_rec_free(struct ckpt_commit_rec *r)
{
    if (!r)
        return;
    for (size_t i = 0; r->parts && i < r->world_size; i++)
        free(r->parts[i]);
    free(r->parts);
    for (size_t i = 0; r->rep_names && i < r->nrep; i++)
        free(r->rep_names[i]);
    free(r->rep_names);
    free(r->rep_digests);
    free(r->writer);
    free(r->parent);
    memset(r, 0, sizeof *r);
}

ckpt_status ckpt__commit_rec_encode(const struct ckpt_commit_rec *r, char **out, size_t *len)
{
    ckpt_status st = CKPT_E_NOMEM;
    cJSON *root = cJSON_CreateObject(), *parts, *rep;
    char *text = NULL;
    int ok = root != NULL;

    ok = ok && ckpt__json_add_num(root, "format", CKPT_FORMAT_RANKS) &&
         cJSON_AddStringToObject(root, "kind", "commit") &&
         ckpt__json_add_u64s(root, "step", r->step) && ckpt__json_add_u64s(root, "seq", r->seq) &&
         ckpt__json_add_u64s(root, "epoch", r->epoch) &&
         ckpt__json_add_num(root, "time_ms", (double)r->time_ms) &&
         ckpt__json_add_num(root, "world_size", r->world_size) &&
         ckpt__json_add_num(root, "new_bytes", (double)r->new_bytes) &&
         cJSON_AddStringToObject(root, "writer", r->writer ? r->writer : "");
    if (ok && r->parent)
        ok = cJSON_AddStringToObject(root, "parent", r->parent) != NULL;
    parts = ok ? cJSON_AddArrayToObject(root, "parts") : NULL;
    ok = ok && parts;
    for (size_t i = 0; ok && i < r->world_size; i++)
        ok = cJSON_AddItemToArray(parts, cJSON_CreateString(r->parts[i]));
    rep = ok ? cJSON_AddArrayToObject(root, "replicated") : NULL;
    ok = ok && rep;
    for (size_t i = 0; ok && i < r->nrep; i++) {
        char dh[17];
        cJSON *a = cJSON_CreateArray();
        snprintf(dh, sizeof dh, "%016" PRIx64, r->rep_digests[i]);
        ok = a && cJSON_AddItemToArray(rep, a) &&
             cJSON_AddItemToArray(a, cJSON_CreateString(r->rep_names[i])) &&
             cJSON_AddItemToArray(a, cJSON_CreateString(dh));
    }
    if (ok && (text = cJSON_PrintUnformatted(root)) && (*out = ckpt__envelope_seal(text, len)))
        st = CKPT_OK;
    free(text);
    cJSON_Delete(root);
    return st;
}

static int part_key_ok(const char *k)
{
    uint64_t a, b;
    uint32_t c;
    unsigned d;
    return k && ckpt_key_valid(k) && ckpt__part_key_parse(k, &a, &b, &c, &d) == 0;
}

ckpt_status ckpt__commit_rec_decode(const void *buf, size_t len, struct ckpt_commit_rec *r,
                                    char *err)
{
    ckpt_status st;
    cJSON *root = NULL;
    const cJSON *parts, *rep, *a;
    const char *writer, *parent;
    double fmt, t, ws, nb;
    size_t i;

    memset(r, 0, sizeof *r);
    st = ckpt__envelope_record(buf, len, CKPT_MANIFEST_MAX, "commit record", "commit",
                               CKPT_FORMAT_VERSION, &root, &fmt, err);
    if (st)
        return st;
    st = CKPT_E_CORRUPT;
    writer = ckpt__json_get_str(root, "writer");
    parent = ckpt__json_get_str(root, "parent");
    parts = cJSON_GetObjectItemCaseSensitive(root, "parts");
    rep = cJSON_GetObjectItemCaseSensitive(root, "replicated");
    if (fmt < CKPT_FORMAT_RANKS ||
        ckpt__json_get_u64s(root, "step", &r->step) || ckpt__json_get_u64s(root, "seq", &r->seq) ||
        ckpt__json_get_u64s(root, "epoch", &r->epoch) ||
        ckpt__json_get_num(root, "time_ms", 0, CKPT_JSON_MAX_SAFE, &t) ||
        ckpt__json_get_num(root, "world_size", 2, MAX_WORLD, &ws) ||
        ckpt__json_get_num(root, "new_bytes", 0, CKPT_JSON_MAX_SAFE, &nb) || !writer ||
        strlen(writer) > 512 || (parent && (strlen(parent) > 512 || !ckpt_key_valid(parent))) ||
        !cJSON_IsArray(parts) || cJSON_GetArraySize(parts) != (int)ws || !cJSON_IsArray(rep) ||
        cJSON_GetArraySize(rep) > (int)MAX_REPLICATED) {
        ckpt__seterr(err, "commit record: missing or out-of-range field");
        goto out;
    }
    r->time_ms = (int64_t)t;
    r->new_bytes = (uint64_t)nb;
    r->writer = ckpt__strdup(writer);
    r->parent = parent ? ckpt__strdup(parent) : NULL;
    r->parts = calloc((size_t)ws, sizeof *r->parts);
    r->nrep = (size_t)cJSON_GetArraySize(rep);
    r->rep_names = calloc(r->nrep ? r->nrep : 1, sizeof *r->rep_names);
    r->rep_digests = calloc(r->nrep ? r->nrep : 1, sizeof *r->rep_digests);
    r->world_size = (uint32_t)ws;
    if (!r->writer || (parent && !r->parent) || !r->parts || !r->rep_names ||
        !r->rep_digests) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    i = 0;
    cJSON_ArrayForEach(a, parts)
    {
        if (!cJSON_IsString(a) || strlen(a->valuestring) > 512 || !part_key_ok(a->valuestring)) {
            ckpt__seterr(err, "commit record: part %zu is not a part manifest's key", i);
            goto out;
        }
        if (!(r->parts[i++] = ckpt__strdup(a->valuestring))) {
            st = CKPT_E_NOMEM;
            goto out;
        }
    }
    i = 0;
    cJSON_ArrayForEach(a, rep)
    {
        const cJSON *n = cJSON_GetArrayItem(a, 0), *d = cJSON_GetArrayItem(a, 1);
        char *end = NULL;
        if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != 2 || !cJSON_IsString(n) ||
            !ckpt__name_valid(n->valuestring) || !cJSON_IsString(d) ||
            strlen(d->valuestring) != 16) {
            ckpt__seterr(err, "commit record: malformed replicated item %zu", i);
            goto out;
        }
        r->rep_digests[i] = strtoull(d->valuestring, &end, 16);
        if (!end || *end) {
            ckpt__seterr(err, "commit record: bad digest of replicated item %zu", i);
            goto out;
        }
        if (!(r->rep_names[i++] = ckpt__strdup(n->valuestring))) {
            st = CKPT_E_NOMEM;
            goto out;
        }
    }
    st = CKPT_OK;
out:
    cJSON_Delete(root);
    if (st)
        ckpt__commit_rec_free(r);
    return st;
}

/* Move item src (of a part whose packs start at `base` in the composed
 * list) to dst. */
static void move_item(struct ckpt_mitem *dst, struct ckpt_mitem *src, uint32_t base)
{
    *dst = *src;
    memset(src, 0, sizeof *src);
    for (size_t c = 0; c < dst->nchunks; c++)
        if (dst->chunks[c].pack)
            dst->chunks[c].pack += base;
}

static struct ckpt_mitem *find_replicated(struct ckpt_manifest *p, const char *name)
{
    for (size_t i = 0; i < p->nitems; i++)
        if (p->items[i].replicated && !strcmp(p->items[i].name, name))
            return &p->items[i];
    return NULL;
}

/* Replicated item `x` (of part 0) assembled from every part into dst. */
static ckpt_status assemble(struct ckpt_manifest *p, size_t n, const uint32_t *base,
                            const struct ckpt_mitem *x, struct ckpt_mitem *dst, char *err)
{
    uint64_t cb = p[0].chunk_bytes, total = (x->size + cb - 1) / cb, sum = 0;
    uint8_t *filled = calloc(total ? total : 1, 1);
    ckpt_status st = CKPT_E_CORRUPT;

    dst->name = ckpt__strdup(x->name);
    dst->chunks = calloc(total ? total : 1, sizeof *dst->chunks);
    if (!filled || !dst->name || !dst->chunks) {
        free(filled);
        return CKPT_E_NOMEM;
    }
    dst->kind = CKPT_ITEM_MEM;
    dst->size = x->size;
    dst->elem_size = x->elem_size;
    dst->mode = x->mode;
    dst->replicated = 1;
    dst->digest = x->digest;
    dst->nchunks = (size_t)total;
    for (size_t r = 0; r < n; r++) {
        const struct ckpt_mitem *y = find_replicated(&p[r], x->name);
        if (!y || y->size != x->size || y->digest != x->digest || y->elem_size != x->elem_size) {
            ckpt__seterr(err, "replicated item %.300s: the part of rank %zu %s", x->name, r,
                         y ? "holds other bytes (its digest or size differs from rank 0's)"
                           : "does not have it");
            goto out;
        }
        for (size_t c = 0; c < y->nchunks; c++) {
            size_t pos = y->first + c;
            if (pos >= total || filled[pos]) {
                ckpt__seterr(err, "replicated item %.300s: chunk %zu is in two parts", x->name,
                             pos);
                goto out;
            }
            filled[pos] = 1;
            dst->chunks[pos] = y->chunks[c];
            if (dst->chunks[pos].pack)
                dst->chunks[pos].pack += base[r];
        }
    }
    for (uint64_t c = 0; c < total; c++) {
        if (!filled[c]) {
            ckpt__seterr(err, "replicated item %.300s: chunk %" PRIu64 " is in no part",
                         x->name, c);
            goto out;
        }
        sum += dst->chunks[c].raw_len;
        if (c + 1 < total && dst->chunks[c].raw_len != cb) {
            ckpt__seterr(err, "replicated item %.300s: chunk %" PRIu64 " is short", x->name, c);
            goto out;
        }
    }
    if (sum != x->size ||
        ckpt__replicated_digest(x->size, dst->chunks, dst->nchunks) != x->digest) {
        ckpt__seterr(err, "replicated item %.300s: its chunks do not match its digest "
                          "(the parts hold different bytes)", x->name);
        goto out;
    }
    st = CKPT_OK;
out:
    free(filled);
    return st;
}

ckpt_status ckpt__parts_compose(struct ckpt_manifest *p, size_t n, const char *const *keys,
                                const struct ckpt_commit_rec *rec, unsigned view,
                                struct ckpt_manifest *out, char *err)
{
    uint32_t *base = calloc(n ? n : 1, sizeof *base);
    size_t npacks = 0, nown = 0, noth = 0, nrep = 0, k;
    ckpt_status st = CKPT_E_CORRUPT;

    memset(out, 0, sizeof *out);
    if (!base)
        return CKPT_E_NOMEM;
    if (n < 2) {
        ckpt__seterr(err, "a global checkpoint of %zu parts", n);
        goto out;
    }
    if (view >= n)
        view = 0;
    for (size_t r = 0; r < n; r++) {
        if (p[r].rank != r || p[r].world_size != n || p[r].step != p[0].step ||
            p[r].chunk_bytes != p[0].chunk_bytes || (rec && p[r].step != rec->step)) {
            ckpt__seterr(err, "part %zu (%.200s) is rank %u of %u at step %" PRIu64
                              ": not rank %zu of %zu at step %" PRIu64, r, keys[r], p[r].rank,
                         p[r].world_size, p[r].step, r, n, rec ? rec->step : p[0].step);
            goto out;
        }
        if (npacks + p[r].npacks > CKPT_MAX_PACKS) {
            ckpt__seterr(err, "global checkpoint: too many packs");
            goto out;
        }
        base[r] = (uint32_t)npacks;
        npacks += p[r].npacks;
        for (size_t i = 0; i < p[r].nitems; i++) {
            if (p[r].items[i].replicated)
                nrep += r == 0;
            else if (r == view)
                nown++;
            else
                noth++;
        }
    }
    for (size_t r = 1; r < n; r++) {
        size_t c = 0;
        for (size_t i = 0; i < p[r].nitems; i++)
            c += p[r].items[i].replicated != 0;
        if (c != nrep) {
            ckpt__seterr(err, "the part of rank %zu has %zu replicated items, rank 0's %zu", r,
                         c, nrep);
            goto out;
        }
    }
    if (rec && rec->nrep != nrep) {
        ckpt__seterr(err, "commit record names %zu replicated items, the parts %zu", rec->nrep,
                     nrep);
        goto out;
    }
    st = CKPT_E_NOMEM;
    out->items = calloc(nown + nrep + 1, sizeof *out->items);
    out->others = calloc(noth + 1, sizeof *out->others);
    out->packs = calloc(npacks + 1, sizeof *out->packs);
    out->parts = calloc(n, sizeof *out->parts);
    if (!out->items || !out->others || !out->packs || !out->parts)
        goto out;
    for (size_t r = 0; r < n; r++) {
        if (p[r].npacks)
            memcpy(out->packs + base[r], p[r].packs, p[r].npacks * sizeof *out->packs);
        if (!(out->parts[out->nparts++] = ckpt__strdup(keys[r])))
            goto out;
    }
    out->npacks = npacks;
    /* the replicated items first, in part 0's order */
    for (size_t i = 0; i < p[0].nitems; i++) {
        const struct ckpt_mitem *x = &p[0].items[i];
        if (!x->replicated)
            continue;
        if (rec) {
            for (k = 0; k < rec->nrep && strcmp(rec->rep_names[k], x->name); k++)
                ;
            if (k == rec->nrep || rec->rep_digests[k] != x->digest) {
                ckpt__seterr(err, "replicated item %.300s: %s", x->name,
                             k == rec->nrep ? "not in the commit record"
                                            : "its digest differs from the commit record's");
                st = CKPT_E_CORRUPT;
                goto out;
            }
        }
        st = assemble(p, n, base, x, &out->items[out->nitems++], err);
        if (st)
            goto out;
    }
    for (size_t r = 0; r < n; r++)
        for (size_t i = 0; i < p[r].nitems; i++) {
            if (p[r].items[i].replicated)
                continue;
            if (r == view) {
                move_item(&out->items[out->nitems++], &p[r].items[i], base[r]);
            } else {
                move_item(&out->others[out->nothers], &p[r].items[i], base[r]);
                out->others[out->nothers++].part = (unsigned)r;
            }
        }
    out->version = CKPT_FORMAT_RANKS;
    out->step = p[0].step;
    out->world_size = (uint32_t)n;
    out->rank = view;
    out->chunk_bytes = p[0].chunk_bytes;
    out->nonce = p[0].nonce;
    for (size_t r = 0; r < n; r++)
        out->new_bytes += p[r].new_bytes;
    if (rec) {
        out->seq = rec->seq;
        out->epoch = rec->epoch;
        out->time_ms = rec->time_ms;
        out->new_bytes = rec->new_bytes;
        out->writer = ckpt__strdup(rec->writer);
        out->parent = rec->parent ? ckpt__strdup(rec->parent) : NULL;
        if (!out->writer || (rec->parent && !out->parent))
            goto out;
    } else {
        out->epoch = p[0].epoch;
        out->time_ms = p[0].time_ms;
    }
    st = ckpt__manifest_check(out, err);
out:
    free(base);
    if (st)
        ckpt__manifest_free(out);
    return st;
}

ckpt_status ckpt__read_parts(struct ckpt_ctx *ctx, char *const *keys, size_t n,
                             struct ckpt_manifest *m, char *err)
{
    struct ckpt_manifest *p = calloc(n ? n : 1, sizeof *p);
    ckpt_status st = CKPT_OK;
    size_t r;
    memset(m, 0, sizeof *m);
    if (!p)
        return CKPT_E_NOMEM;
    for (r = 0; r < n && !st; r++) {
        st = ckpt__read_one_manifest(ctx, keys[r], &p[r]);
        if (st)
            ckpt__seterr(err, "%s", ckpt__errmsg(ctx));
    }
    if (!st)
        st = ckpt__parts_compose(p, n, (const char *const *)keys, NULL, 0, m, err);
    for (size_t i = 0; i < n; i++)
        ckpt__manifest_free(&p[i]);
    free(p);
    return st;
}

ckpt_status ckpt__read_global(struct ckpt_ctx *ctx, const char *rel, unsigned view,
                              struct ckpt_manifest *m)
{
    struct ckpt_commit_rec rec;
    struct ckpt_manifest *p = NULL;
    char key[1024], err[CKPT_ERR_MAX] = "";
    void *buf = NULL;
    size_t len, r = 0;
    ckpt_status st;

    memset(m, 0, sizeof *m);
    ckpt__run_key(ctx, rel, key, sizeof key);
    st = ctx->store->ops->get(ctx->store, key, CKPT_MANIFEST_MAX, 0, &buf, &len, NULL, err);
    if (st) {
        ckpt__set_ctx_err(ctx, "reading commit record %s: %s", key, err);
        return st;
    }
    st = ckpt__commit_rec_decode(buf, len, &rec, err);
    free(buf);
    if (st) {
        ckpt__set_ctx_err(ctx, "commit record %s is damaged: %s", key, err);
        return st;
    }
    p = calloc(rec.world_size, sizeof *p);
    if (!p) {
        ckpt__commit_rec_free(&rec);
        return CKPT_E_NOMEM;
    }
    for (r = 0; r < rec.world_size && !st; r++) {
        st = ckpt__read_one_manifest(ctx, rec.parts[r], &p[r]);
        if (st == CKPT_E_NOENT)
            ckpt__set_ctx_err(ctx, "the part of rank %zu of %s (%s) is missing", r, key,
                              rec.parts[r]);
    }
    if (!st) {
        st = ckpt__parts_compose(p, rec.world_size, (const char *const *)rec.parts, &rec, view,
                                 m, err);
        if (st)
            ckpt__set_ctx_err(ctx, "global checkpoint %s is damaged: %s", key, err);
    }
    for (size_t i = 0; i < rec.world_size; i++)
        ckpt__manifest_free(&p[i]);
    free(p);
    ckpt__commit_rec_free(&rec);
    return st;
}
