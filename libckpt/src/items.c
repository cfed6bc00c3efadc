/* items.c -- ckpt_list_items(): the items of one committed checkpoint, and
 * ckpt_head_parse(): what a HEAD object says, for listings of many runs
 * (ckpt.h, "Administration"). */
#include <inttypes.h>
#include <string.h>

#include "ctx.h"
#include "idset.h"
#include "runload.h"

/* The distinct chunks of one item and their stored bytes. */
static void item_sizes(const struct ckpt_mitem *it, uint64_t *stored, uint64_t *chunks)
{
    struct ckpt_idset seen;
    ckpt__idset_init(&seen);
    *stored = *chunks = 0;
    for (size_t c = 0; c < it->nchunks; c++) {
        const struct ckpt_chunk_ref *r = &it->chunks[c];
        if (ckpt__idset_get(&seen, r->id, NULL))
            continue;
        ckpt__idset_put(&seen, r->id, 1);
        *stored += r->stored_len;
        (*chunks)++;
    }
    ckpt__idset_free(&seen);
}

static const ckpt_item_kind kinds[] = {
    [CKPT_ITEM_MEM] = CKPT_KIND_REGION,
    [CKPT_ITEM_FILE] = CKPT_KIND_FILE,
    [CKPT_ITEM_DEVICE] = CKPT_KIND_DEVICE,
    [CKPT_ITEM_LINK] = CKPT_KIND_LINK,
};

ckpt_status ckpt_list_items(struct ckpt_ctx *ctx, uint64_t step, ckpt_item_fn fn, void *user)
{
    struct ckpt_head h;
    struct ckpt_manifest m;
    const struct ckpt_head_entry *e = NULL;
    bool exists;
    ckpt_status st;

    if (!ctx || !fn)
        return CKPT_E_INVAL;
    memset(&m, 0, sizeof m);
    st = ckpt__read_head(ctx, &h, NULL, &exists);
    if (st)
        return st;
    /* the resume order: for one step, the latest commit first */
    for (size_t i = 0; i < h.n && !e; i++)
        if (step == CKPT_STEP_LATEST || h.entries[i].step == step)
            e = &h.entries[i];
    if (!e) {
        if (step == CKPT_STEP_LATEST)
            ckpt__set_ctx_err(ctx, "run %s has no committed checkpoint", ctx->run);
        else
            ckpt__set_ctx_err(ctx, "run %s has no committed checkpoint at step %" PRIu64, ctx->run,
                              step);
        st = CKPT_E_NOENT;
        goto out;
    }
    /* rank 0's view: its own items and the replicated ones; the other
     * ranks' items are `others`, each with its part */
    st = ckpt__read_manifest_view(ctx, e->manifest, 0, &m);
    if (st) {
        /* a manifest HEAD names but the store no longer has is damage to
         * this reader, not "no such checkpoint" */
        if (st == CKPT_E_NOENT)
            st = CKPT_E_CORRUPT;
        goto out;
    }
    for (size_t j = 0; j < m.nitems + m.nothers; j++) {
        const struct ckpt_mitem *it = j < m.nitems ? &m.items[j] : &m.others[j - m.nitems];
        struct ckpt_item_info info;
        memset(&info, 0, sizeof info);
        info.name = it->name;
        info.kind = it->kind >= 0 && (size_t)it->kind < sizeof kinds / sizeof kinds[0]
                        ? kinds[it->kind]
                        : CKPT_KIND_REGION;
        info.size = it->size;
        item_sizes(it, &info.stored_bytes, &info.chunks);
        info.target = it->kind == CKPT_ITEM_LINK ? it->target : NULL;
        info.replicated = it->replicated != 0;
        info.part = it->replicated ? 0 : j < m.nitems ? m.rank : it->part;
        info.mode = it->kind == CKPT_ITEM_FILE ? it->mode : 0;
        if (fn(user, &info))
            break;
    }
out:
    ckpt__manifest_free(&m);
    ckpt__head_free(&h);
    return st;
}

ckpt_status ckpt_head_parse(const void *buf, size_t len, struct ckpt_head_info *out)
{
    struct ckpt_head h;
    char err[CKPT_ERR_MAX];
    ckpt_status st;

    if (!buf || !out)
        return CKPT_E_INVAL;
    memset(out, 0, sizeof *out);
    st = ckpt__head_decode(buf, len, &h, err);
    if (st)
        return st;
    out->step = h.n ? h.entries[0].step : 0;
    out->seq = h.seq;
    out->epoch = h.epoch;
    out->time_ms = h.time_ms;
    out->checkpoints = (unsigned)h.n;
    out->damaged = (unsigned)h.ndamaged;
    out->format = h.version;
    ckpt__head_free(&h);
    return CKPT_OK;
}
