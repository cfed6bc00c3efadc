/* items.c -- ckpt_items(): what a committed checkpoint holds, item by item,
 * as one of its parts sees it. A binding allocates the regions it then
 * protects and restores (ckpt_restore_step) from this: names, sizes,
 * element hints, kinds. Only HEAD and the manifests are read, never a
 * chunk; the manifest is decoded and checked as a restore would
 * (runload.h), so what a damaged manifest says never reaches the caller. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ctx.h"
#include "runload.h"

_Static_assert((int)CKPT_KIND_MEMORY == (int)CKPT_ITEM_MEM &&
                   (int)CKPT_KIND_FILE == (int)CKPT_ITEM_FILE &&
                   (int)CKPT_KIND_DEVICE == (int)CKPT_ITEM_DEVICE &&
                   (int)CKPT_KIND_LINK == (int)CKPT_ITEM_LINK,
               "ckpt_item_kind is the manifest's item kind");

ckpt_status ckpt_items(struct ckpt_ctx *ctx, uint64_t step, unsigned part, ckpt_item_fn fn,
                       void *user)
{
    struct ckpt_head h;
    struct ckpt_manifest m;
    const struct ckpt_head_entry *e = NULL;
    bool exists;
    unsigned world;
    ckpt_status st;

    if (!ctx || !fn)
        return CKPT_E_INVAL;
    st = ckpt__read_head(ctx, &h, NULL, &exists);
    if (st)
        return st;
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
        ckpt__head_free(&h);
        return CKPT_E_NOENT;
    }
    st = ckpt__read_manifest_view(ctx, e->manifest, part, &m);
    if (st == CKPT_E_NOENT) {
        /* HEAD names it: missing is damage, as for a restore */
        ckpt__set_ctx_err(ctx, "checkpoint step %" PRIu64 " is damaged: %s", e->step, ctx->errmsg);
        st = CKPT_E_CORRUPT;
    }
    ckpt__head_free(&h);
    if (st)
        return st;
    world = m.world_size ? m.world_size : 1;
    if (part >= world) {
        ckpt__set_ctx_err(ctx, "checkpoint step %" PRIu64 " has %u part%s: no part %u", m.step,
                          world, world == 1 ? "" : "s", part);
        st = CKPT_E_NOENT;
    }
    for (size_t i = 0; i < m.nitems && !st; i++) {
        const struct ckpt_mitem *mi = &m.items[i];
        struct ckpt_item_info info;
        memset(&info, 0, sizeof info);
        info.name = mi->name;
        info.size = mi->size;
        info.kind = (ckpt_item_kind)mi->kind; /* the manifest's kinds are ckpt.h's */
        info.elem_size = mi->elem_size > 1 ? mi->elem_size : 0;
        info.replicated = mi->replicated != 0;
        info.target = mi->kind == CKPT_ITEM_LINK ? mi->target : NULL;
        info.step = m.step;
        info.world_size = world;
        if (fn(user, &info))
            break;
    }
    ckpt__manifest_free(&m);
    return st;
}
