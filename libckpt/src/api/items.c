/* items.c -- ckpt_items(): what a committed checkpoint holds, item by item,
 * as one of its parts sees it (a binding allocates the regions it then
 * protects and restores from this: names, sizes, element hints, kinds) or
 * as a whole (`ckptrun ls --step`: every part, with stored sizes); and
 * ckpt_head_parse(): what a HEAD object says, for listings of many runs.
 * Only HEAD and the manifests are read, never a chunk; a manifest is decoded
 * and checked as a restore would (runload.h), so what a damaged manifest
 * says never reaches the caller. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/ctx.h"
#include "base/idset.h"
#include "run/runobj.h"

_Static_assert((int)CKPT_KIND_REGION == (int)CKPT_ITEM_MEM &&
                   (int)CKPT_KIND_FILE == (int)CKPT_ITEM_FILE &&
                   (int)CKPT_KIND_DEVICE == (int)CKPT_ITEM_DEVICE &&
                   (int)CKPT_KIND_LINK == (int)CKPT_ITEM_LINK,
               "ckpt_item_kind is the manifest's item kind");

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

ckpt_status ckpt_items(struct ckpt_ctx *ctx, uint64_t step, unsigned part, ckpt_item_fn fn,
                       void *user)
{
    struct ckpt_head h;
    struct ckpt_manifest m;
    const struct ckpt_head_entry *e = NULL;
    const int all = part == CKPT_PART_ALL;
    bool exists;
    unsigned world;
    size_t n;
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
            ckpt__set_ctx_err(ctx, "run %s has no committed checkpoint in %s", ctx->run,
                              ctx->store_url);
        else
            ckpt__set_ctx_err(ctx, "run %s has no committed checkpoint at step %" PRIu64, ctx->run,
                              step);
        st = CKPT_E_NOENT;
        goto out;
    }
    /* one part's view: its own items and the replicated ones; part 0's
     * view also carries the other ranks' items as `others` (each with its
     * part), which is the whole checkpoint */
    st = ckpt__read_manifest_view(ctx, e->manifest, all ? 0 : part, &m);
    if (st == CKPT_E_NOENT) {
        /* HEAD names it: missing is damage to this reader, not "no such
         * checkpoint" */
        ckpt__set_ctx_err(ctx, "checkpoint step %" PRIu64 " is damaged: %s", e->step, ckpt__errmsg(ctx));
        st = CKPT_E_CORRUPT;
    }
    if (st)
        goto out;
    world = m.world_size ? m.world_size : 1;
    if (!all && part >= world) {
        ckpt__set_ctx_err(ctx, "checkpoint step %" PRIu64 " has %u part%s: no part %u", m.step,
                          world, world == 1 ? "" : "s", part);
        st = CKPT_E_NOENT;
        goto out;
    }
    n = m.nitems + (all ? m.nothers : 0);
    for (size_t j = 0; j < n; j++) {
        const struct ckpt_mitem *it = j < m.nitems ? &m.items[j] : &m.others[j - m.nitems];
        struct ckpt_item_info info;
        memset(&info, 0, sizeof info);
        info.name = it->name;
        info.size = it->size;
        info.kind = (ckpt_item_kind)it->kind; /* the manifest's kinds are ckpt.h's */
        info.elem_size = it->elem_size > 1 ? it->elem_size : 0;
        info.replicated = it->replicated != 0;
        info.target = it->kind == CKPT_ITEM_LINK ? it->target : NULL;
        info.step = m.step;
        info.world_size = world;
        info.part = it->replicated ? 0 : j < m.nitems ? m.rank : it->part;
        info.mode = it->kind == CKPT_ITEM_FILE ? it->mode : 0;
        item_sizes(it, &info.stored_bytes, &info.chunks);
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
