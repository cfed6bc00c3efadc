/* manifest.c -- manifests: encoding, decoding, the objects a manifest needs
 * and the keys of a run's objects (manifest.h); the rules of an item set
 * are in itemset.c. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/codec.h"
#include "format/envelope.h"
#include "base/idset.h"
#include "format/itemset.h"
#include "format/manifest.h"

#define MAX_ITEMS 1000000u

static const char *kind_name(int k)
{
    return k == CKPT_ITEM_FILE     ? "file"
           : k == CKPT_ITEM_DEVICE ? "device"
           : k == CKPT_ITEM_LINK   ? "link"
                                   : "mem";
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
    if (!strcmp(s, "link"))
        return CKPT_ITEM_LINK;
    return -1;
}


void ckpt__mitem_free(struct ckpt_mitem *it)
{
    free(it->name);
    free(it->target);
    free(it->chunks);
    memset(it, 0, sizeof *it);
}

void ckpt__manifest_free(struct ckpt_manifest *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->nitems; i++)
        ckpt__mitem_free(&m->items[i]);
    free(m->items);
    for (size_t i = 0; i < m->nothers; i++)
        ckpt__mitem_free(&m->others[i]);
    free(m->others);
    for (size_t i = 0; i < m->nparts; i++)
        free(m->parts[i]);
    free(m->parts);
    free(m->packs);
    free(m->writer);
    free(m->parent);
    memset(m, 0, sizeof *m);
}

unsigned ckpt__manifest_format(const struct ckpt_manifest *m)
{
    if (m->world_size > 1)
        return CKPT_FORMAT_RANKS;
    for (size_t i = 0; i < m->nitems; i++)
        if (m->items[i].kind == CKPT_ITEM_LINK || !ckpt__name_legacy(m->items[i].name))
            return CKPT_FORMAT_NAMES;
    return m->npacks ? CKPT_FORMAT_PACKS : CKPT_FORMAT_UNPACKED;
}

ckpt_status ckpt__manifest_encode(const struct ckpt_manifest *m, char **out, size_t *len)
{
    ckpt_status st = CKPT_E_NOMEM;
    cJSON *root = cJSON_CreateObject(), *items;
    char *text = NULL;
    int ok = root != NULL;

    /* The lowest format that holds what this manifest uses: format-1
     * readers read a manifest without packs, links or new names. */
    ok = ok && ckpt__json_add_num(root, "format", ckpt__manifest_format(m));
    ok = ok && cJSON_AddStringToObject(root, "kind", "manifest");
    ok = ok && ckpt__json_add_u64s(root, "step", m->step) &&
         ckpt__json_add_u64s(root, "seq", m->seq) && ckpt__json_add_u64s(root, "epoch", m->epoch);
    ok = ok && ckpt__json_add_num(root, "time_ms", (double)m->time_ms) &&
         ckpt__json_add_num(root, "rank", m->rank) &&
         ckpt__json_add_num(root, "world_size", m->world_size) &&
         ckpt__json_add_num(root, "chunk_bytes", (double)m->chunk_bytes) &&
         ckpt__json_add_num(root, "new_bytes", (double)m->new_bytes);
    ok = ok && cJSON_AddStringToObject(root, "writer", m->writer ? m->writer : "");
    if (ok && m->parent)
        ok = cJSON_AddStringToObject(root, "parent", m->parent) != NULL;
    if (ok && m->world_size > 1)
        ok = ckpt__json_add_num(root, "nonce", m->nonce);
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
             ckpt__json_add_num(o, "size", (double)it->size) &&
             ckpt__json_add_num(o, "elem", it->elem_size) &&
             ckpt__json_add_num(o, "mode", it->mode);
        if (ok && it->kind == CKPT_ITEM_LINK)
            ok = cJSON_AddStringToObject(o, "target", it->target ? it->target : "") != NULL;
        if (ok && it->replicated && m->world_size > 1) {
            char dh[17];
            cJSON *r = cJSON_AddObjectToObject(o, "replicated");
            snprintf(dh, sizeof dh, "%016" PRIx64, it->digest);
            ok = r && cJSON_AddStringToObject(r, "digest", dh) &&
                 ckpt__json_add_num(r, "first", (double)it->first);
        }
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
    const char *name = ckpt__json_get_str(o, "name");
    double size, elem, mode;
    uint64_t sum = 0;
    size_t n, c = 0;

    if (!name || !ckpt__name_valid(name)) {
        ckpt__seterr(err, "item with missing or unsafe name");
        return CKPT_E_CORRUPT;
    }
    if (m->version < CKPT_FORMAT_NAMES && !ckpt__name_legacy(name)) {
        ckpt__seterr(err, "format %u manifest with item name %.200s, which only format %d "
                          "allows", m->version, name, CKPT_FORMAT_NAMES);
        return CKPT_E_CORRUPT;
    }
    it->name = ckpt__strdup(name);
    if (!it->name)
        return CKPT_E_NOMEM;
    it->kind = kind_parse(ckpt__json_get_str(o, "kind"));
    chunks = cJSON_GetObjectItemCaseSensitive(o, "chunks");
    if (it->kind < 0 || ckpt__json_get_num(o, "size", 0, CKPT_JSON_MAX_SAFE, &size) ||
        ckpt__json_get_num(o, "elem", 0, 8, &elem) ||
        ckpt__json_get_num(o, "mode", 0, 07777, &mode) ||
        !cJSON_IsArray(chunks) || (elem != 0 && elem != 1 && elem != 2 && elem != 4)) {
        ckpt__seterr(err, "item %s: bad kind/size/elem/mode/chunks field", name);
        return CKPT_E_CORRUPT;
    }
    it->size = (uint64_t)size;
    it->elem_size = (unsigned)elem;
    it->mode = (uint32_t)mode;
    n = (size_t)cJSON_GetArraySize(chunks);
    {
        /* format 4: a replicated item, this part's share of its chunks */
        const cJSON *rep = cJSON_GetObjectItemCaseSensitive(o, "replicated");
        if (rep) {
            const char *dh = ckpt__json_get_str(rep, "digest");
            double first;
            uint64_t total = (it->size + chunk_bytes - 1) / chunk_bytes;
            char *end = NULL;
            if (m->version < CKPT_FORMAT_RANKS || m->world_size < 2 ||
                it->kind != CKPT_ITEM_MEM || !cJSON_IsObject(rep) || !dh ||
                strlen(dh) != 16 || ckpt__json_get_num(rep, "first", 0, CKPT_JSON_MAX_SAFE,
                                                       &first) ||
                (uint64_t)first + n > total) {
                ckpt__seterr(err, "item %s: bad replicated field", name);
                return CKPT_E_CORRUPT;
            }
            it->digest = strtoull(dh, &end, 16);
            if (!end || *end) {
                ckpt__seterr(err, "item %s: bad replicated digest", name);
                return CKPT_E_CORRUPT;
            }
            it->replicated = 1;
            it->first = (size_t)first;
        }
    }
    if (it->kind == CKPT_ITEM_LINK) {
        /* a link holds no bytes: its target (checked with the whole
         * manifest, ckpt__manifest_check) is all there is */
        const char *t = ckpt__json_get_str(o, "target");
        if (m->version < CKPT_FORMAT_NAMES || it->size || n || !t || !ckpt__target_valid(t)) {
            ckpt__seterr(err, "link item %.200s: bad target, size or chunks (format %u)", name,
                         m->version);
            return CKPT_E_CORRUPT;
        }
        it->target = ckpt__strdup(t);
        return it->target ? CKPT_OK : CKPT_E_NOMEM;
    }
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
    if (it->replicated ? sum > it->size : sum != it->size) {
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
    cJSON *root = NULL, *items, *o;
    double fmt, t, rank, world, cb, nb;
    const char *writer, *parent;
    size_t i = 0, n;

    memset(m, 0, sizeof *m);
    st = ckpt__envelope_record(buf, len, CKPT_MANIFEST_MAX, "manifest", "manifest",
                               CKPT_FORMAT_VERSION, &root, &fmt, err);
    if (st)
        return st;
    st = CKPT_E_CORRUPT;
    writer = ckpt__json_get_str(root, "writer");
    parent = ckpt__json_get_str(root, "parent");
    items = cJSON_GetObjectItemCaseSensitive(root, "items");
    if (ckpt__json_get_u64s(root, "step", &m->step) ||
        ckpt__json_get_u64s(root, "seq", &m->seq) ||
        ckpt__json_get_u64s(root, "epoch", &m->epoch) ||
        ckpt__json_get_num(root, "time_ms", 0, CKPT_JSON_MAX_SAFE, &t) ||
        ckpt__json_get_num(root, "rank", 0, 1 << 24, &rank) ||
        ckpt__json_get_num(root, "world_size", 1, 1 << 24, &world) || rank >= world ||
        ckpt__json_get_num(root, "chunk_bytes", CKPT_MIN_CHUNK, CKPT_MAX_CHUNK, &cb) ||
        ckpt__json_get_num(root, "new_bytes", 0, CKPT_JSON_MAX_SAFE, &nb) || !writer ||
        strlen(writer) > 512 ||
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
    if (m->version >= CKPT_FORMAT_RANKS) {
        double nonce;
        if (m->world_size < 2 || ckpt__json_get_num(root, "nonce", 0, 4294967295.0, &nonce)) {
            ckpt__seterr(err, "format 4 manifest: not a part of a multi-rank checkpoint");
            goto out;
        }
        m->nonce = (uint32_t)nonce;
    } else if (m->world_size != 1) {
        /* Damage, not a newer format: this reader knows every format up to
         * 4, and only format 4 has ranks. (Readers before format 4 said
         * "unsupported" here; taken as "newer", that made every later
         * save refuse to commit over a checkpoint that was only damaged.) */
        ckpt__seterr(err, "format %u manifest of %u ranks: only format 4 has ranks", m->version,
                     m->world_size);
        goto out;
    }
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
        i++;
        if (st)
            goto out;
    }
    /* validated whole: what restore would trip over is refused here, so
     * verify and restore see the same manifest */
    st = ckpt__manifest_check(m, err);
out:
    cJSON_Delete(root);
    if (st)
        ckpt__manifest_free(m);
    return st;
}

void ckpt__manifest_sizes(const struct ckpt_manifest *m, uint64_t *raw, uint64_t *stored,
                          uint64_t *chunks, uint64_t *links)
{
    struct ckpt_idset seen;
    ckpt__idset_init(&seen);
    *raw = *stored = *chunks = *links = 0;
    for (size_t j = 0; j < m->nitems + m->nothers; j++) {
        const struct ckpt_mitem *it = j < m->nitems ? &m->items[j] : &m->others[j - m->nitems];
        *raw += it->size;
        *links += it->kind == CKPT_ITEM_LINK;
        for (size_t c = 0; c < it->nchunks; c++) {
            const struct ckpt_chunk_ref *r = &it->chunks[c];
            if (ckpt__idset_get(&seen, r->id, NULL))
                continue;
            ckpt__idset_put(&seen, r->id, 1);
            *stored += r->stored_len;
            (*chunks)++;
        }
    }
    ckpt__idset_free(&seen);
}

/* ---- the objects of a run ----------------------------------------------------- */
void ckpt__object_key(const char *run, int kind, const uint8_t id[CKPT_ID_LEN], char *out,
                      size_t n)
{
    char hex[CKPT_ID_HEX + 1];
    ckpt__hex(id, CKPT_ID_LEN, hex);
    /* Two hex digits of fan-out keep directories small on file stores and
     * spread keys over S3 partitions. */
    snprintf(out, n, "%s/%s/%.2s/%s", run, kind == CKPT_OBJ_PACK ? "packs" : "chunks", hex, hex);
}

void ckpt__chunk_key(const char *run, const uint8_t id[CKPT_ID_LEN], char *out, size_t n)
{
    ckpt__object_key(run, CKPT_OBJ_CHUNK, id, out, n);
}

int ckpt__key_id(const char *key, uint8_t id[CKPT_ID_LEN])
{
    const char *slash = strrchr(key, '/');
    if (!slash || strlen(slash + 1) != CKPT_ID_HEX)
        return -1;
    return ckpt__unhex(slash + 1, id, CKPT_ID_LEN);
}

void ckpt__idlist_free(struct ckpt_idlist *l)
{
    if (!l)
        return;
    free(l->ids);
    free(l->kind);
    free(l->size);
    for (size_t i = 0; i < l->nkeys; i++)
        free(l->keys[i]);
    free(l->keys);
    memset(l, 0, sizeof *l);
}

void ckpt__idlists_free(struct ckpt_idlist *l, size_t n)
{
    if (!l)
        return;
    for (size_t i = 0; i < n; i++)
        ckpt__idlist_free(&l[i]);
    free(l);
}

int ckpt__manifest_objects(const struct ckpt_manifest *m, struct ckpt_idlist *out)
{
    size_t total = m->npacks, n = 0;
    struct ckpt_idset seen;
    memset(out, 0, sizeof *out);
    if (m->nparts) {
        out->keys = calloc(m->nparts, sizeof *out->keys);
        if (!out->keys)
            return -1;
        for (size_t p = 0; p < m->nparts; p++)
            if (!(out->keys[out->nkeys++] = ckpt__strdup(m->parts[p]))) {
                ckpt__idlist_free(out);
                return -1;
            }
    }
    for (size_t i = 0; i < m->nitems + m->nothers; i++)
        total += i < m->nitems ? m->items[i].nchunks : m->others[i - m->nitems].nchunks;
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
    for (size_t i = 0; i < m->nitems + m->nothers; i++) {
        const struct ckpt_mitem *it = i < m->nitems ? &m->items[i] : &m->others[i - m->nitems];
        for (size_t c = 0; c < it->nchunks; c++) {
            const struct ckpt_chunk_ref *r = &it->chunks[c];
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
    }
    ckpt__idset_free(&seen);
    out->n = n;
    return 0;
}

void ckpt__manifest_key(const char *run, uint64_t seq, uint64_t step, uint64_t epoch,
                        uint32_t nonce, char *out, size_t n)
{
    snprintf(out, n, "%s/manifests/%020" PRIu64 "_%020" PRIu64 "_%010" PRIu64 "_%08" PRIx32
             ".ckm", run, seq, step, epoch, nonce);
}

void ckpt__part_key(const char *run, uint64_t step, uint64_t epoch, uint32_t nonce,
                    unsigned rank, char *out, size_t n)
{
    snprintf(out, n, "%s/manifests/%020" PRIu64 "_%010" PRIu64 "_%08" PRIx32 "_r%07u.ckp", run,
             step, epoch, nonce, rank);
}

int ckpt__part_key_parse(const char *rel, uint64_t *step, uint64_t *epoch, uint32_t *nonce,
                         unsigned *rank)
{
    char tail[8];
    int used = 0;
    if (strncmp(rel, "manifests/", 10) || strlen(rel) != 10 + 20 + 1 + 10 + 1 + 8 + 2 + 7 + 4)
        return -1;
    if (sscanf(rel + 10, "%20" SCNu64 "_%10" SCNu64 "_%8" SCNx32 "_r%7u%4s%n", step, epoch,
               nonce, rank, tail, &used) != 5 || strcmp(tail, ".ckp") != 0 ||
        rel[10 + used] != '\0')
        return -1;
    return 0;
}

void ckpt__commit_key(const char *run, uint64_t seq, uint64_t step, uint64_t epoch,
                      uint32_t nonce, char *out, size_t n)
{
    snprintf(out, n, "%s/manifests/%020" PRIu64 "_%020" PRIu64 "_%010" PRIu64 "_%08" PRIx32
             ".ckc", run, seq, step, epoch, nonce);
}

int ckpt__is_commit_key(const char *rel)
{
    size_t l = strlen(rel);
    return l > 4 && !strcmp(rel + l - 4, ".ckc");
}
