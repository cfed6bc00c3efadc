/* runload.c -- loading a run into the run state (runload.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "run/headscan.h"
#include "run/runload.h"
#include "run/runobj.h"

ckpt_status ckpt__load_run(struct ckpt_ctx *ctx, bool ids)
{
    struct ckpt_run_load ld;
    ckpt_status st;
    unsigned scanned = 0;

    memset(&ld, 0, sizeof ld);
    ckpt__dedup_init(&ld.idx);
    st = ckpt__read_head_or_scan(ctx, &ld.head, ld.etag, &ld.exists, &scanned, NULL);
    if (st)
        goto out;
    /* a manifest of a newer format among them: do not write over it */
    ld.newer = (scanned & CKPT_HEAD_NEWER) != 0;
    ld.scanned = (scanned & CKPT_HEAD_SCANNED) != 0;
    if (ids && ld.head.ngc && (st = ckpt__read_gc_records(ctx, &ld.head, &ld.gcv)) != CKPT_OK)
        goto out;
    ld.retained = calloc(ld.head.n ? ld.head.n : 1, sizeof *ld.retained);
    ld.damaged = calloc(ld.head.ndamaged ? ld.head.ndamaged : 1, sizeof *ld.damaged);
    if (!ld.retained || !ld.damaged) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    /* damaged checkpoints: their objects are spared by retention (for
     * inspection), never used for dedup */
    for (size_t i = 0; ids && i < ld.head.ndamaged; i++) {
        struct ckpt_manifest m;
        if (ckpt__read_manifest(ctx, ld.head.damaged[i].manifest, &m) != CKPT_OK)
            continue;
        if (ckpt__manifest_objects(&m, &ld.damaged[i]) != 0)
            st = CKPT_E_NOMEM;
        ckpt__manifest_free(&m);
        if (st)
            goto out;
    }
    /* Oldest first: where a chunk lives, the newest manifest's word wins. */
    for (size_t i = ld.head.n; ids && i-- > 0;) {
        struct ckpt_manifest m;
        ckpt_status mst = ckpt__read_manifest(ctx, ld.head.entries[i].manifest, &m);
        /* A damaged retained manifest only costs dedup: skip it. One of a
         * newer format forbids committing (see ckpt_run.newer). */
        if (mst == CKPT_E_UNSUPPORTED)
            ld.newer = true;
        if (mst != CKPT_OK) {
            ckpt__log(&ctx->log, CKPT_LOG_WARN, "load", "%s", ckpt__errmsg(ctx));
            continue;
        }
        /* Over a HEAD rebuilt from the manifests, the gc records in force
         * are unknown: a chunk one of them is deleting would be trusted.
         * Dedup against nothing until HEAD is written again (one save
         * uploads everything). */
        if (ckpt__manifest_objects(&m, &ld.retained[i]) != 0 ||
            (!(scanned & CKPT_HEAD_SCANNED) && ckpt__dedup_put_manifest(&ld.idx, &m) != 0))
            st = CKPT_E_NOMEM;
        ckpt__manifest_free(&m);
        if (st)
            goto out;
    }
out:
    if (st)
        ckpt__log(&ctx->log, CKPT_LOG_WARN, "load", "cannot read the run's state: %s",
                  st == CKPT_E_NOMEM ? "out of memory" : ckpt__errmsg(ctx));
    /* loaded or not, savers may proceed: without the index they only write
     * more; the commit re-reads HEAD before it relies on it */
    ckpt__run_install(&ctx->rs, &ld, st == CKPT_OK);
    return st;
}
