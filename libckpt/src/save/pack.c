/* pack.c -- packs: the save's open pack, uploads (pack.h). Chunks are added
 * to a pack while it holds less than pack_bytes (so a pack is pack_bytes
 * plus at most one chunk object: 4 chunks of 8 MiB in a 32 MiB pack), or,
 * at the end of a save, less than its share of what is left (seal_at); at
 * most pack_inflight + 1 buffers exist (the open one and those uploading). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "format/codec.h"
#include "core/ctx.h"
#include "save/pack.h"
#include "core/packbuf.h"
#include "core/save.h"

/* A new slot in the save's pack list (sv->mu held); UINT32_MAX nomem. */
static uint32_t pack_slot_new(struct ckpt_save *sv)
{
    struct ckpt_manifest *m = &sv->m;
    if ((m->npacks & (m->npacks - 1)) == 0) { /* 0, 1, 2, 4...: grow */
        struct ckpt_pack *p = realloc(m->packs, (m->npacks ? m->npacks * 2 : 16) * sizeof *p);
        if (!p)
            return UINT32_MAX;
        m->packs = p;
    }
    memset(&m->packs[m->npacks], 0, sizeof m->packs[0]);
    return (uint32_t)m->npacks++;
}

uint32_t ckpt__pack_slot_of(struct ckpt_save *sv, const struct ckpt_pack *p)
{
    uint64_t slot;
    uint32_t n;
    pthread_mutex_lock(&sv->mu);
    if (ckpt__idset_get(&sv->packslot, p->id, &slot)) {
        n = (uint32_t)slot;
    } else {
        n = pack_slot_new(sv);
        if (n != UINT32_MAX && ckpt__idset_put(&sv->packslot, p->id, n) == 0)
            sv->m.packs[n] = *p;
        else
            n = UINT32_MAX;
    }
    pthread_mutex_unlock(&sv->mu);
    return n;
}

/* Put `len` bytes as a new pack of the run: a pack's name need only be
 * unique (its chunks carry their own checksums), so it is 128 random bits,
 * not another pass over its bytes. *p: its id and size. */
static ckpt_status put_pack(struct ckpt_ctx *ctx, const void *data, size_t len,
                            struct ckpt_pack *p, char *key, size_t keylen, char *err)
{
    struct ckpt_put_opts po = { CKPT_PUT_PLAIN, NULL, 1 };
    if (getrandom(p->id, sizeof p->id, 0) != (ssize_t)sizeof p->id) {
        ckpt__seterr(err, "getrandom: %s", strerror(errno));
        return CKPT_E_IO;
    }
    p->size = len;
    ckpt__object_key(ctx->run, CKPT_OBJ_PACK, p->id, key, keylen);
    return ctx->store->ops->put(ctx->store, key, data, len, &po, NULL, err);
}

/* Upload a full pack; on success its slot gets the pack's id and size. */
static ckpt_status pack_upload(struct ckpt_ctx *ctx, struct ckpt_save *sv,
                               struct ckpt_packbuf *b, char *err)
{
    struct ckpt_pack p;
    char key[1024];
    ckpt_status st = put_pack(ctx, b->data, b->len, &p, key, sizeof key, err);
    if (st == CKPT_OK) {
        ckpt__progress_add(&ctx->progress.stored_bytes, b->len);
        pthread_mutex_lock(&sv->mu);
        sv->m.packs[b->slot] = p;
        pthread_mutex_unlock(&sv->mu);
        ckpt__log(&ctx->log, CKPT_LOG_DEBUG, "save", "pack %s: %zu bytes", key, b->len);
    }
    return st;
}

/* The size at which the open pack (`open` bytes) is sealed (sv->mu held):
 * pack_bytes, except at the end of a save. There the stored bytes still to
 * come -- the open pack, and the raw bytes of the chunks not yet through
 * the stage at the ratio seen so far -- are spread over the uploads that
 * run at once, so the last packs leave together on as many connections
 * rather than one after the other on one: a connection capped at 40 MB/s
 * takes 0.8 s over a 32 MiB pack that four of them send in 0.2 s, and on
 * a store across a link those last seconds are the commit's. A pack holds
 * one chunk at least. */
static size_t seal_at(const struct ckpt_ctx *ctx, const struct ckpt_save *sv, size_t open)
{
    double raw = (double)sv->raw_left;
    double ratio = sv->packed_raw ? (double)sv->packed_stored / (double)sv->packed_raw : 1.0;
    double share =
        ((double)open + raw * ratio) / (double)(ctx->pack_inflight ? ctx->pack_inflight : 1);
    return share < (double)ctx->pack_bytes ? (size_t)share : ctx->pack_bytes;
}

/* The worker whose chunk fills the open pack (pack_bytes or more) seals it
 * and uploads it at once, so a pack leaves as soon as it is complete. */
ckpt_status ckpt__pack_append(struct ckpt_ctx *ctx, struct ckpt_save *sv, const void *hdr,
                              const void *payload, size_t plen, struct ckpt_chunk_ref *ref,
                              char *err)
{
    size_t len = CKPT_CHUNK_HDR + plen;
    struct ckpt_packbuf *spare = NULL, *full = NULL, *b;
    ckpt_status st = CKPT_OK;
    for (;;) {
        pthread_mutex_lock(&sv->mu);
        b = sv->open;
        if (!b && spare) {
            spare->slot = pack_slot_new(sv);
            if (spare->slot == UINT32_MAX) {
                pthread_mutex_unlock(&sv->mu);
                st = CKPT_E_NOMEM;
                break;
            }
            spare->len = 0;
            sv->open = b = spare;
            spare = NULL;
        }
        if (b && b->cap < b->len + len && ckpt__packbuf_grow(b, b->len + len)) {
            /* a chunk larger than a pack, and no memory for it */
            pthread_mutex_unlock(&sv->mu);
            st = CKPT_E_NOMEM;
            break;
        }
        if (b) {
            memcpy(b->data + b->len, hdr, CKPT_CHUNK_HDR);
            memcpy(b->data + b->len + CKPT_CHUNK_HDR, payload, plen);
            ref->pack = b->slot + 1;
            ref->off = b->len;
            b->len += len;
            sv->packed_raw += ref->raw_len;
            sv->packed_stored += len;
            sv->raw_left -= ref->raw_len < sv->raw_left ? ref->raw_len : sv->raw_left;
            if (b->len >= seal_at(ctx, sv, b->len)) {
                full = b; /* sealed: ours to upload */
                sv->open = NULL;
            }
            pthread_mutex_unlock(&sv->mu);
            break;
        }
        pthread_mutex_unlock(&sv->mu);
        if (sv->st) { /* failed elsewhere: stop */
            st = sv->st;
            ckpt__seterr(err, "save already failed");
            break;
        }
        /* a pack is sealed once it reaches pack_bytes: room for one more
         * chunk object past that (never larger than header + raw chunk) */
        spare = ckpt__packbuf_get(&ctx->packs, ctx->pack_bytes + ctx->chunk_bytes +
                                                   CKPT_CHUNK_HDR, ctx->pack_inflight);
        if (!spare) {
            st = CKPT_E_NOMEM;
            ckpt__seterr(err, "no memory for a %zu-byte pack", ctx->pack_bytes);
            break;
        }
    }
    ckpt__packbuf_put(&ctx->packs, spare);
    if (full) {
        st = pack_upload(ctx, sv, full, err);
        ckpt__packbuf_put(&ctx->packs, full);
    }
    return st;
}

ckpt_status ckpt__pack_alone(struct ckpt_ctx *ctx, struct ckpt_save *sv, const void *obj,
                             size_t obj_len, struct ckpt_chunk_ref *ref, char *err)
{
    struct ckpt_pack p;
    char key[1024];
    uint32_t slot;
    ckpt_status st = put_pack(ctx, obj, obj_len, &p, key, sizeof key, err);
    if (st)
        return st;
    pthread_mutex_lock(&sv->mu);
    slot = pack_slot_new(sv);
    if (slot != UINT32_MAX)
        sv->m.packs[slot] = p;
    pthread_mutex_unlock(&sv->mu);
    if (slot == UINT32_MAX) {
        ckpt__seterr(err, "no memory for the pack list");
        return CKPT_E_NOMEM;
    }
    ref->pack = slot + 1;
    ref->off = 0;
    return CKPT_OK;
}

ckpt_status ckpt__pack_flush(struct ckpt_ctx *ctx, struct ckpt_save *sv, char *err)
{
    ckpt_status st = CKPT_OK;
    if (!sv->open)
        return CKPT_OK;
    if (!sv->st && sv->open->len)
        st = pack_upload(ctx, sv, sv->open, err);
    ckpt__packbuf_put(&ctx->packs, sv->open);
    sv->open = NULL;
    return st;
}
