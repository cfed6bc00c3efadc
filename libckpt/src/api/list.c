/* list.c -- ckpt_list(): the retained checkpoints of a run, newest step
 * first (the resume order); where HEAD is damaged, those its manifests
 * show. */
#include <string.h>

#include "core/ctx.h"
#include "run/headscan.h"
#include "run/runobj.h"

ckpt_status ckpt_list(struct ckpt_ctx *ctx, ckpt_list_fn fn, void *user)
{
    struct ckpt_head h;
    bool exists;
    unsigned scanned;
    ckpt_status st;
    if (!ctx || !fn)
        return CKPT_E_INVAL;
    /* a damaged HEAD: the checkpoints the manifests show (headscan.h) */
    st = ckpt__read_head_or_scan(ctx, &h, NULL, &exists, &scanned, NULL);
    if (st || !exists)
        return st;
    for (size_t i = 0; i < h.n; i++) {
        struct ckpt_manifest m;
        struct ckpt_info info = { 0 };
        char key[1024];
        ckpt__run_key(ctx, h.entries[i].manifest, key, sizeof key);
        info.step = h.entries[i].step;
        info.seq = h.entries[i].seq;
        info.manifest = key;
        info.world_size = h.entries[i].world_size > 1 ? h.entries[i].world_size : 1;
        if (ckpt__read_manifest(ctx, h.entries[i].manifest, &m) == CKPT_OK) {
            info.epoch = m.epoch;
            info.time_ms = m.time_ms;
            info.items = m.nitems + m.nothers; /* every rank's */
            info.world_size = m.world_size > 1 ? m.world_size : 1;
            info.new_bytes = m.new_bytes;
            ckpt__manifest_sizes(&m, &info.raw_bytes, &info.stored_bytes, &info.chunks,
                                 &info.links);
            ckpt__manifest_free(&m);
        } else {
            info.time_ms = -1; /* damaged: listed, flagged by time -1 */
        }
        if (fn(user, &info))
            break;
    }
    ckpt__head_free(&h);
    return CKPT_OK;
}
