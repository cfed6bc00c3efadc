/* idset.c -- the id set (idset.h). */
#include <stdlib.h>
#include <string.h>

#include "base/idset.h"

void ckpt__idset_init(struct ckpt_idset *s) { memset(s, 0, sizeof *s); }

void ckpt__idset_free(struct ckpt_idset *s)
{
    free(s->keys);
    free(s->vals);
    free(s->used);
    memset(s, 0, sizeof *s);
}

static size_t slot_of(const uint8_t *id, size_t cap)
{
    uint64_t h;
    memcpy(&h, id, sizeof h);
    return (size_t)(h & (cap - 1));
}

/* The slot holding id, else the free slot where it would go (cap > 0). */
static size_t probe(const struct ckpt_idset *s, const uint8_t *id)
{
    size_t i = slot_of(id, s->cap);
    while (s->used[i] && memcmp(s->keys[i], id, CKPT_ID_LEN) != 0)
        i = (i + 1) & (s->cap - 1);
    return i;
}

int ckpt__idset_get(const struct ckpt_idset *s, const uint8_t *id, uint64_t *val)
{
    size_t i;
    if (!s->cap || !s->used[i = probe(s, id)])
        return 0;
    if (val)
        *val = s->vals[i];
    return 1;
}

int ckpt__idset_update(struct ckpt_idset *s, const uint8_t *id, uint64_t val)
{
    size_t i;
    if (!s->cap || !s->used[i = probe(s, id)])
        return 0;
    s->vals[i] = val;
    return 1;
}

/* Add or set; the caller made room (at most half full after this). */
static void insert(struct ckpt_idset *s, const uint8_t *id, uint64_t val)
{
    size_t i = probe(s, id);
    if (!s->used[i]) {
        s->used[i] = 1;
        memcpy(s->keys[i], id, CKPT_ID_LEN);
        s->n++;
    }
    s->vals[i] = val;
}

static int grow(struct ckpt_idset *s)
{
    struct ckpt_idset n;
    n.cap = s->cap ? s->cap * 2 : 1024;
    n.n = 0;
    n.keys = malloc(n.cap * CKPT_ID_LEN);
    n.vals = malloc(n.cap * sizeof *n.vals);
    n.used = calloc(n.cap, 1);
    if (!n.keys || !n.vals || !n.used) {
        free(n.keys);
        free(n.vals);
        free(n.used);
        return -1;
    }
    for (size_t i = 0; i < s->cap; i++)
        if (s->used[i])
            insert(&n, s->keys[i], s->vals[i]);
    ckpt__idset_free(s);
    *s = n;
    return 0;
}

int ckpt__idset_put(struct ckpt_idset *s, const uint8_t *id, uint64_t val)
{
    if (ckpt__failpoint("idset_put"))
        return -1;
    if ((s->n + 1) * 2 > s->cap && grow(s) != 0)
        return -1;
    insert(s, id, val);
    return 0;
}

int ckpt__objset_add(struct ckpt_idset *s, const uint8_t *id, int kind)
{
    uint64_t bits = 0;
    ckpt__idset_get(s, id, &bits);
    return ckpt__idset_put(s, id, bits | 1u << kind);
}

int ckpt__objset_has(const struct ckpt_idset *s, const uint8_t *id, int kind)
{
    uint64_t bits;
    return ckpt__idset_get(s, id, &bits) && (bits & (1u << kind));
}
