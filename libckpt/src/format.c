/* format.c -- manifests, HEAD, keys. Everything read back from a store is
 * hostile: sizes are bounded, every field is type- and range-checked, and a
 * checksum guards the whole text (docs/FORMAT.md). */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "internal.h"

#define ENV_TAG "\n#xxh64:"
#define ENV_TAG_LEN 8
#define ENV_TRAILER (ENV_TAG_LEN + 16 + 1)
#define MAX_ITEMS 1000000u
#define MAX_SAFE 9007199254740992.0 /* 2^53: exact in a JSON double */

void ckpt__chunk_key(const char *run, const uint8_t id[CKPT_ID_LEN], char *out, size_t n)
{
    char hex[CKPT_ID_HEX + 1];
    ckpt__hex(id, CKPT_ID_LEN, hex);
    /* Two hex digits of fan-out keep directories small on file stores and
     * spread keys over S3 partitions. */
    snprintf(out, n, "%s/chunks/%.2s/%s", run, hex, hex);
}

void ckpt__object_key(const char *run, int kind, const uint8_t id[CKPT_ID_LEN], char *out,
                      size_t n)
{
    char hex[CKPT_ID_HEX + 1];
    ckpt__hex(id, CKPT_ID_LEN, hex);
    snprintf(out, n, "%s/%s/%.2s/%s", run, kind == CKPT_OBJ_PACK ? "packs" : "chunks", hex, hex);
}

void ckpt__idlist_free(struct ckpt_idlist *l)
{
    if (!l)
        return;
    free(l->ids);
    free(l->kind);
    free(l->size);
    memset(l, 0, sizeof *l);
}

int ckpt__manifest_objects(const struct ckpt_manifest *m, struct ckpt_idlist *out)
{
    size_t total = m->npacks, n = 0;
    struct ckpt_idset seen;
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < m->nitems; i++)
        total += m->items[i].nchunks;
    if (!total)
        return 0;
    out->ids = malloc(total * CKPT_ID_LEN);
    out->kind = malloc(total);
    out->size = malloc(total * sizeof *out->size);
    if (!out->ids || !out->kind || !out->size) {
        ckpt__idlist_free(out);
        return -1;
    }
    /* packs: those some chunk lives in (a manifest names no others) */
    for (size_t p = 0; p < m->npacks; p++) {
        memcpy(out->ids[n], m->packs[p].id, CKPT_ID_LEN);
        out->kind[n] = CKPT_OBJ_PACK;
        out->size[n++] = m->packs[p].size;
    }
    ckpt__idset_init(&seen);
    for (size_t i = 0; i < m->nitems; i++)
        for (size_t c = 0; c < m->items[i].nchunks; c++) {
            const struct ckpt_chunk_ref *r = &m->items[i].chunks[c];
            if (r->pack || ckpt__idset_get(&seen, r->id, NULL))
                continue;
            if (ckpt__idset_put(&seen, r->id, 1)) {
                ckpt__idset_free(&seen);
                ckpt__idlist_free(out);
                return -1;
            }
            memcpy(out->ids[n], r->id, CKPT_ID_LEN);
            out->kind[n] = CKPT_OBJ_CHUNK;
            out->size[n++] = r->stored_len;
        }
    ckpt__idset_free(&seen);
    out->n = n;
    return 0;
}

void ckpt__manifest_key(const char *run, uint64_t seq, uint64_t step, uint64_t epoch,
                        char *out, size_t n)
{
    snprintf(out, n, "%s/manifests/%020" PRIu64 "_%020" PRIu64 "_%010" PRIu64 ".ckm", run,
             seq, step, epoch);
}

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

/* ---- JSON helpers --------------------------------------------------------- */
static int add_u64s(cJSON *o, const char *k, uint64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    return cJSON_AddStringToObject(o, k, buf) != NULL;
}

static int add_num(cJSON *o, const char *k, double v)
{
    return cJSON_AddNumberToObject(o, k, v) != NULL;
}

/* 64-bit counters are written as decimal strings: JSON numbers are doubles
 * for most readers and would lose precision above 2^53. */
static int get_u64s(const cJSON *o, const char *k, uint64_t *v)
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

static int get_num(const cJSON *o, const char *k, double lo, double hi, double *v)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!cJSON_IsNumber(it) || it->valuedouble < lo || it->valuedouble > hi ||
        it->valuedouble != (double)(int64_t)it->valuedouble)
        return -1;
    *v = it->valuedouble;
    return 0;
}

static const char *get_str(const cJSON *o, const char *k)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(it) ? it->valuestring : NULL;
}

static const char *kind_name(int k)
{
    return k == CKPT_ITEM_FILE ? "file" : k == CKPT_ITEM_DEVICE ? "device" : "mem";
}

static int kind_parse(const char *s)
{
    if (!s)
        return -1;
    if (!strcmp(s, "mem"))
        return CKPT_ITEM_MEM;
    if (!strcmp(s, "file"))
        return CKPT_ITEM_FILE;
    if (!strcmp(s, "device"))
        return CKPT_ITEM_DEVICE;
    return -1;
}

/* ---- manifest ----------------------------------------------------------------- */
void ckpt__manifest_free(struct ckpt_manifest *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->nitems; i++) {
        free(m->items[i].name);
        free(m->items[i].chunks);
    }
    free(m->items);
    free(m->packs);
    free(m->writer);
    free(m->parent);
    memset(m, 0, sizeof *m);
}

ckpt_status ckpt__manifest_encode(const struct ckpt_manifest *m, char **out, size_t *len)
{
    ckpt_status st = CKPT_E_NOMEM;
    cJSON *root = cJSON_CreateObject(), *items;
    char *text = NULL;
    int ok = root != NULL;

    /* Format 2 only when chunks live in packs: a manifest without packs
     * stays readable by format-1 readers. */
    ok = ok && add_num(root, "format", m->npacks ? 2 : CKPT_FORMAT_UNPACKED);
    ok = ok && cJSON_AddStringToObject(root, "kind", "manifest");
    ok = ok && add_u64s(root, "step", m->step) && add_u64s(root, "seq", m->seq) &&
         add_u64s(root, "epoch", m->epoch);
    ok = ok && add_num(root, "time_ms", (double)m->time_ms) &&
         add_num(root, "rank", m->rank) && add_num(root, "world_size", m->world_size) &&
         add_num(root, "chunk_bytes", (double)m->chunk_bytes) &&
         add_num(root, "new_bytes", (double)m->new_bytes);
    ok = ok && cJSON_AddStringToObject(root, "writer", m->writer ? m->writer : "");
    if (ok && m->parent)
        ok = cJSON_AddStringToObject(root, "parent", m->parent) != NULL;
    if (ok && m->npacks) {
        cJSON *packs = cJSON_AddArrayToObject(root, "packs");
        ok = packs != NULL;
        for (size_t p = 0; ok && p < m->npacks; p++) {
            char hex[CKPT_ID_HEX + 1];
            cJSON *a = cJSON_CreateArray();
            ckpt__hex(m->packs[p].id, CKPT_ID_LEN, hex);
            ok = a && cJSON_AddItemToArray(packs, a);
            ok = ok && cJSON_AddItemToArray(a, cJSON_CreateString(hex)) &&
                 cJSON_AddItemToArray(a, cJSON_CreateNumber((double)m->packs[p].size));
        }
    }
    items = ok ? cJSON_AddArrayToObject(root, "items") : NULL;
    ok = ok && items;
    for (size_t i = 0; ok && i < m->nitems; i++) {
        const struct ckpt_mitem *it = &m->items[i];
        cJSON *o = cJSON_CreateObject(), *chunks;
        ok = o && cJSON_AddItemToArray(items, o);
        ok = ok && cJSON_AddStringToObject(o, "name", it->name) &&
             cJSON_AddStringToObject(o, "kind", kind_name(it->kind)) &&
             add_num(o, "size", (double)it->size) && add_num(o, "elem", it->elem_size) &&
             add_num(o, "mode", it->mode);
        chunks = ok ? cJSON_AddArrayToObject(o, "chunks") : NULL;
        ok = ok && chunks;
        for (size_t c = 0; ok && c < it->nchunks; c++) {
            char hex[CKPT_ID_HEX + 1];
            cJSON *a = cJSON_CreateArray();
            ckpt__hex(it->chunks[c].id, CKPT_ID_LEN, hex);
            ok = a && cJSON_AddItemToArray(chunks, a);
            ok = ok && cJSON_AddItemToArray(a, cJSON_CreateString(hex)) &&
                 cJSON_AddItemToArray(a, cJSON_CreateNumber(it->chunks[c].raw_len)) &&
                 cJSON_AddItemToArray(a, cJSON_CreateNumber(it->chunks[c].stored_len));
            if (ok && it->chunks[c].pack)
                ok = cJSON_AddItemToArray(a, cJSON_CreateNumber(it->chunks[c].pack - 1)) &&
                     cJSON_AddItemToArray(a, cJSON_CreateNumber((double)it->chunks[c].off));
        }
    }
    if (!ok)
        goto out;
    text = cJSON_PrintUnformatted(root);
    if (!text)
        goto out;
    *out = ckpt__envelope_seal(text, len);
    if (*out)
        st = CKPT_OK;
out:
    free(text);
    cJSON_Delete(root);
    return st;
}

static ckpt_status decode_item(const cJSON *o, const struct ckpt_manifest *m,
                               struct ckpt_mitem *it, char *err)
{
    uint64_t chunk_bytes = m->chunk_bytes;
    const cJSON *chunks, *a;
    const char *name = get_str(o, "name");
    double size, elem, mode;
    uint64_t sum = 0;
    size_t n, c = 0;

    if (!name || !ckpt__name_valid(name)) {
        ckpt__seterr(err, "item with missing or unsafe name");
        return CKPT_E_CORRUPT;
    }
    it->name = ckpt__strdup(name);
    if (!it->name)
        return CKPT_E_NOMEM;
    it->kind = kind_parse(get_str(o, "kind"));
    chunks = cJSON_GetObjectItemCaseSensitive(o, "chunks");
    if (it->kind < 0 || get_num(o, "size", 0, MAX_SAFE, &size) ||
        get_num(o, "elem", 0, 8, &elem) || get_num(o, "mode", 0, 07777, &mode) ||
        !cJSON_IsArray(chunks) || (elem != 0 && elem != 1 && elem != 2 && elem != 4)) {
        ckpt__seterr(err, "item %s: bad kind/size/elem/mode/chunks field", name);
        return CKPT_E_CORRUPT;
    }
    it->size = (uint64_t)size;
    it->elem_size = (unsigned)elem;
    it->mode = (uint32_t)mode;
    n = (size_t)cJSON_GetArraySize(chunks);
    if (n > it->size / 1 + 1 || (uint64_t)n > (it->size + chunk_bytes - 1) / chunk_bytes + 1) {
        ckpt__seterr(err, "item %s: %zu chunks for %" PRIu64 " bytes", name, n, it->size);
        return CKPT_E_CORRUPT;
    }
    it->chunks = n ? calloc(n, sizeof *it->chunks) : NULL;
    if (n && !it->chunks)
        return CKPT_E_NOMEM;
    it->nchunks = n;
    cJSON_ArrayForEach(a, chunks)
    {
        const cJSON *h = cJSON_GetArrayItem(a, 0), *r = cJSON_GetArrayItem(a, 1),
                    *s = cJSON_GetArrayItem(a, 2), *p = cJSON_GetArrayItem(a, 3),
                    *po = cJSON_GetArrayItem(a, 4);
        int na = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : 0;
        /* [id, raw, stored] (own object) or, format 2, [id, raw, stored,
         * pack index, offset in the pack] */
        if (na == 5) {
            if (m->version < 2 || !m->npacks || !cJSON_IsNumber(p) || !cJSON_IsNumber(po) ||
                p->valuedouble < 0 || p->valuedouble >= (double)m->npacks ||
                p->valuedouble != (double)(uint32_t)p->valuedouble || po->valuedouble < 0 ||
                po->valuedouble > (double)CKPT_MAX_PACK ||
                po->valuedouble != (double)(uint64_t)po->valuedouble) {
                ckpt__seterr(err, "item %s: chunk %zu names a bad pack or offset", name, c);
                return CKPT_E_CORRUPT;
            }
            it->chunks[c].pack = (uint32_t)p->valuedouble + 1;
            it->chunks[c].off = (uint64_t)po->valuedouble;
        }
        if ((na != 3 && na != 5) || !cJSON_IsString(h) ||
            strlen(h->valuestring) != CKPT_ID_HEX ||
            ckpt__unhex(h->valuestring, it->chunks[c].id, CKPT_ID_LEN) ||
            !cJSON_IsNumber(r) || !cJSON_IsNumber(s) || r->valuedouble < 1 ||
            r->valuedouble > (double)chunk_bytes || s->valuedouble < CKPT_CHUNK_HDR ||
            s->valuedouble > (double)chunk_bytes * 2 + 4096 ||
            r->valuedouble != (double)(uint32_t)r->valuedouble ||
            s->valuedouble != (double)(uint32_t)s->valuedouble) {
            ckpt__seterr(err, "item %s: malformed chunk %zu", name, c);
            return CKPT_E_CORRUPT;
        }
        it->chunks[c].raw_len = (uint32_t)r->valuedouble;
        it->chunks[c].stored_len = (uint32_t)s->valuedouble;
        if (it->chunks[c].pack &&
            it->chunks[c].off + it->chunks[c].stored_len > m->packs[it->chunks[c].pack - 1].size) {
            ckpt__seterr(err, "item %s: chunk %zu ends past its pack", name, c);
            return CKPT_E_CORRUPT;
        }
        sum += it->chunks[c].raw_len;
        c++;
    }
    if (sum != it->size) {
        ckpt__seterr(err, "item %s: chunks hold %" PRIu64 " bytes, size says %" PRIu64, name,
                     sum, it->size);
        return CKPT_E_CORRUPT;
    }
    return CKPT_OK;
}

ckpt_status ckpt__manifest_decode(const void *buf, size_t len, struct ckpt_manifest *m,
                                  char *err)
{
    ckpt_status st;
    size_t jl;
    cJSON *root = NULL, *items, *o;
    double fmt, t, rank, world, cb, nb;
    const char *writer, *parent, *kind;
    size_t i = 0, n;

    memset(m, 0, sizeof *m);
    if (len > CKPT_MANIFEST_MAX) {
        ckpt__seterr(err, "manifest too large (%zu bytes)", len);
        return CKPT_E_CORRUPT;
    }
    st = ckpt__envelope_open(buf, len, &jl, err);
    if (st)
        return st;
    st = CKPT_E_CORRUPT;
    root = cJSON_ParseWithLength(buf, jl);
    if (!cJSON_IsObject(root)) {
        ckpt__seterr(err, "manifest is not a JSON object");
        goto out;
    }
    if (get_num(root, "format", 1, 1e9, &fmt)) {
        ckpt__seterr(err, "manifest has no format version");
        goto out;
    }
    if (fmt > CKPT_FORMAT_VERSION) {
        ckpt__seterr(err, "manifest format %g is newer than this ckpt (%d): upgrade", fmt,
                     CKPT_FORMAT_VERSION);
        st = CKPT_E_UNSUPPORTED;
        goto out;
    }
    kind = get_str(root, "kind");
    writer = get_str(root, "writer");
    parent = get_str(root, "parent");
    items = cJSON_GetObjectItemCaseSensitive(root, "items");
    if (!kind || strcmp(kind, "manifest") || get_u64s(root, "step", &m->step) ||
        get_u64s(root, "seq", &m->seq) || get_u64s(root, "epoch", &m->epoch) ||
        get_num(root, "time_ms", 0, MAX_SAFE, &t) ||
        get_num(root, "rank", 0, 1 << 24, &rank) ||
        get_num(root, "world_size", 1, 1 << 24, &world) || rank >= world ||
        get_num(root, "chunk_bytes", CKPT_MIN_CHUNK, CKPT_MAX_CHUNK, &cb) ||
        get_num(root, "new_bytes", 0, MAX_SAFE, &nb) || !writer || strlen(writer) > 512 ||
        (parent && (strlen(parent) > 512 || !ckpt_key_valid(parent))) || !cJSON_IsArray(items)) {
        ckpt__seterr(err, "manifest: missing or out-of-range field");
        goto out;
    }
    m->version = (unsigned)fmt;
    m->time_ms = (int64_t)t;
    m->rank = (uint32_t)rank;
    m->world_size = (uint32_t)world;
    m->chunk_bytes = (uint64_t)cb;
    m->new_bytes = (uint64_t)nb;
    m->writer = ckpt__strdup(writer);
    m->parent = parent ? ckpt__strdup(parent) : NULL;
    {
        /* packs (format 2): [[id, size], ...] */
        const cJSON *packs = cJSON_GetObjectItemCaseSensitive(root, "packs"), *a;
        size_t np = 0;
        if (packs && (m->version < 2 || !cJSON_IsArray(packs) ||
                      (size_t)cJSON_GetArraySize(packs) > CKPT_MAX_PACKS)) {
            ckpt__seterr(err, "manifest: bad packs field");
            goto out;
        }
        np = packs ? (size_t)cJSON_GetArraySize(packs) : 0;
        m->packs = np ? calloc(np, sizeof *m->packs) : NULL;
        if (np && !m->packs) {
            st = CKPT_E_NOMEM;
            goto out;
        }
        m->npacks = np;
        np = 0;
        cJSON_ArrayForEach(a, packs)
        {
            const cJSON *h = cJSON_GetArrayItem(a, 0), *z = cJSON_GetArrayItem(a, 1);
            if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != 2 || !cJSON_IsString(h) ||
                strlen(h->valuestring) != CKPT_ID_HEX ||
                ckpt__unhex(h->valuestring, m->packs[np].id, CKPT_ID_LEN) ||
                !cJSON_IsNumber(z) || z->valuedouble < CKPT_CHUNK_HDR ||
                z->valuedouble > (double)CKPT_MAX_PACK + CKPT_MAX_CHUNK * 2.0 + 4096 ||
                z->valuedouble != (double)(uint64_t)z->valuedouble) {
                ckpt__seterr(err, "manifest: malformed pack %zu", np);
                goto out;
            }
            m->packs[np++].size = (uint64_t)z->valuedouble;
        }
    }
    n = (size_t)cJSON_GetArraySize(items);
    if (n > MAX_ITEMS) {
        ckpt__seterr(err, "manifest: %zu items", n);
        goto out;
    }
    m->items = n ? calloc(n, sizeof *m->items) : NULL;
    if (!m->writer || (parent && !m->parent) || (n && !m->items)) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    m->nitems = n;
    cJSON_ArrayForEach(o, items)
    {
        if (!cJSON_IsObject(o)) {
            ckpt__seterr(err, "manifest: item %zu is not an object", i);
            goto out;
        }
        st = decode_item(o, m, &m->items[i], err);
        if (st)
            goto out;
        for (size_t j = 0; j < i; j++)
            if (!strcmp(m->items[j].name, m->items[i].name)) {
                ckpt__seterr(err, "manifest: duplicate item %s", m->items[i].name);
                st = CKPT_E_CORRUPT;
                goto out;
            }
        i++;
    }
    st = CKPT_OK;
out:
    cJSON_Delete(root);
    if (st)
        ckpt__manifest_free(m);
    return st;
}

/* ---- HEAD ------------------------------------------------------------------------ */
void ckpt__head_free(struct ckpt_head *h)
{
    if (!h)
        return;
    for (size_t i = 0; i < h->n; i++)
        free(h->entries[i].manifest);
    free(h->entries);
    memset(h, 0, sizeof *h);
}

ckpt_status ckpt__head_encode(const struct ckpt_head *h, char **out, size_t *len)
{
    ckpt_status st = CKPT_E_NOMEM;
    cJSON *root = cJSON_CreateObject(), *arr;
    char *text = NULL;
    int ok = root != NULL;

    ok = ok && add_num(root, "format", CKPT_HEAD_FORMAT) &&
         cJSON_AddStringToObject(root, "kind", "head") && add_u64s(root, "seq", h->seq) &&
         add_u64s(root, "step", h->step) && add_u64s(root, "epoch", h->epoch) &&
         add_num(root, "time_ms", (double)h->time_ms);
    arr = ok ? cJSON_AddArrayToObject(root, "retained") : NULL;
    ok = ok && arr;
    for (size_t i = 0; ok && i < h->n; i++) {
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddItemToArray(arr, o) &&
             cJSON_AddStringToObject(o, "manifest", h->entries[i].manifest) &&
             add_u64s(o, "step", h->entries[i].step) && add_u64s(o, "seq", h->entries[i].seq);
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
    size_t jl, n, i = 0;
    cJSON *root = NULL, *arr, *o;
    double fmt, t;
    const char *kind;

    memset(h, 0, sizeof *h);
    if (len > CKPT_HEAD_MAX) {
        ckpt__seterr(err, "HEAD too large");
        return CKPT_E_CORRUPT;
    }
    st = ckpt__envelope_open(buf, len, &jl, err);
    if (st)
        return st;
    st = CKPT_E_CORRUPT;
    root = cJSON_ParseWithLength(buf, jl);
    if (!cJSON_IsObject(root) || get_num(root, "format", 1, 1e9, &fmt)) {
        ckpt__seterr(err, "HEAD is not a ckpt head object");
        goto out;
    }
    if (fmt > CKPT_FORMAT_VERSION) {
        ckpt__seterr(err, "HEAD format %g is newer than this ckpt: upgrade", fmt);
        st = CKPT_E_UNSUPPORTED;
        goto out;
    }
    kind = get_str(root, "kind");
    arr = cJSON_GetObjectItemCaseSensitive(root, "retained");
    if (!kind || strcmp(kind, "head") || get_u64s(root, "seq", &h->seq) ||
        get_u64s(root, "step", &h->step) || get_u64s(root, "epoch", &h->epoch) ||
        get_num(root, "time_ms", 0, MAX_SAFE, &t) || !cJSON_IsArray(arr)) {
        ckpt__seterr(err, "HEAD: missing or out-of-range field");
        goto out;
    }
    h->version = (unsigned)fmt;
    h->time_ms = (int64_t)t;
    n = (size_t)cJSON_GetArraySize(arr);
    if (n > 100000) {
        ckpt__seterr(err, "HEAD: %zu retained entries", n);
        goto out;
    }
    h->entries = n ? calloc(n, sizeof *h->entries) : NULL;
    if (n && !h->entries) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    cJSON_ArrayForEach(o, arr)
    {
        const char *mk = get_str(o, "manifest");
        struct ckpt_head_entry *e = &h->entries[i];
        if (!mk || strlen(mk) > 512 || strncmp(mk, "manifests/", 10) || !ckpt_key_valid(mk) ||
            get_u64s(o, "step", &e->step) || get_u64s(o, "seq", &e->seq)) {
            ckpt__seterr(err, "HEAD: malformed entry %zu", i);
            h->n = i;
            goto out;
        }
        e->manifest = ckpt__strdup(mk);
        h->n = ++i;
        if (!e->manifest) {
            st = CKPT_E_NOMEM;
            goto out;
        }
    }
    st = CKPT_OK;
out:
    cJSON_Delete(root);
    if (st)
        ckpt__head_free(h);
    return st;
}
