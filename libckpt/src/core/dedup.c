/* dedup.c -- the writer's dedup index (dedup.h). */
#include <stdlib.h>
#include <string.h>

#include "core/dedup.h"

void ckpt__dedup_init(struct ckpt_dedup *x)
{
    memset(x, 0, sizeof *x);
    ckpt__idset_init(&x->known);
    ckpt__idset_init(&x->packidx);
}

void ckpt__dedup_free(struct ckpt_dedup *x)
{
    ckpt__idset_free(&x->known);
    ckpt__idset_free(&x->packidx);
    free(x->locs);
    free(x->packtab);
    ckpt__dedup_init(x);
}

/* Room for one more element in a vector (doubling). -1 nomem. */
static int vec_room(void **v, size_t n, size_t *cap, size_t elem, size_t first)
{
    void *p;
    size_t nc;
    if (n < *cap)
        return 0;
    nc = *cap ? *cap * 2 : first;
    p = realloc(*v, nc * elem);
    if (!p)
        return -1;
    *v = p;
    *cap = nc;
    return 0;
}

int ckpt__dedup_put(struct ckpt_dedup *x, const struct ckpt_manifest *m,
                    const struct ckpt_chunk_ref *r)
{
    uint32_t pack = 0;
    if (r->pack) {
        const struct ckpt_pack *p = &m->packs[r->pack - 1];
        uint64_t pi;
        if (!ckpt__idset_get(&x->packidx, p->id, &pi)) {
            if (vec_room((void **)&x->packtab, x->npacktab, &x->cappacktab,
                         sizeof *x->packtab, 64))
                return -1;
            pi = x->npacktab;
            if (ckpt__idset_put(&x->packidx, p->id, pi))
                return -1;
            x->packtab[x->npacktab++] = *p;
        }
        pack = (uint32_t)pi + 1;
    }
    if (vec_room((void **)&x->locs, x->nlocs, &x->caplocs, sizeof *x->locs, 256))
        return -1;
    x->locs[x->nlocs].stored_len = r->stored_len;
    x->locs[x->nlocs].pack = pack;
    x->locs[x->nlocs].off = r->off;
    if (ckpt__idset_put(&x->known, r->id, x->nlocs))
        return -1;
    x->nlocs++;
    return 0;
}

int ckpt__dedup_get(const struct ckpt_dedup *x, const uint8_t *id, struct ckpt_loc *loc,
                    struct ckpt_pack *pack)
{
    uint64_t li;
    if (!ckpt__idset_get(&x->known, id, &li) || li == UINT64_MAX || li >= x->nlocs)
        return 0;
    *loc = x->locs[li];
    if (loc->pack) {
        const struct ckpt_pack *p = &x->packtab[loc->pack - 1];
        if (p->size == 0) /* its pack is being deleted */
            return 0;
        if (pack)
            *pack = *p;
    }
    return 1;
}

int ckpt__dedup_put_manifest(struct ckpt_dedup *x, const struct ckpt_manifest *m)
{
    /* a global checkpoint's: every rank's chunks (others) too */
    for (size_t i = 0; i < m->nitems + m->nothers; i++) {
        const struct ckpt_mitem *it = i < m->nitems ? &m->items[i] : &m->others[i - m->nitems];
        for (size_t c = 0; c < it->nchunks; c++)
            if (ckpt__dedup_put(x, m, &it->chunks[c]))
                return -1;
    }
    return 0;
}

void ckpt__dedup_forget(struct ckpt_dedup *x, const uint8_t *id, int kind)
{
    uint64_t i;
    if (kind == CKPT_OBJ_PACK) {
        if (ckpt__idset_get(&x->packidx, id, &i))
            x->packtab[i].size = 0;
    } else {
        ckpt__idset_update(&x->known, id, UINT64_MAX);
    }
}
