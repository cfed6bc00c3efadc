/* restalloc.c -- ckpt_restore_alloc(): restoring into memory the caller
 * allocates per item, with ckpt_restore()'s rules. This file only asks the
 * caller and remembers what it gave; which checkpoint is tried, the
 * fallback past damage, its marking in HEAD and the ranks' agreement stay
 * in restore.c and ranks.c, which consult ctx->into: the members of
 * struct ckpt_into (restore.h) that this file fills.
 *
 * Memory the caller gave for a checkpoint stays recorded until the next
 * checkpoint is tried or the call ends: only then is it known to be given
 * up (with ranks, the agreement that follows a rank's own check decides),
 * and only then is it handed back through release(). */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "base/idset.h"
#include "ranks/ranks.h"
#include "restore/restore.h"
#include "core/runstate.h"

struct alloc_into {
    struct ckpt_into base; /* first: ctx->into points here */
    const struct ckpt_alloc *a;
    /* the checkpoint prepared last */
    uint64_t step;
    size_t n;            /* its items (the manifest's view) */
    void **dest;         /* n: where item i goes; NULL: not taken */
    unsigned char *done; /* n: written already (round 0) */
    void **given;        /* every pointer the caller gave for it */
    size_t ngiven;
    size_t skipped; /* checkpoints passed over (no index item) */
    bool fell_back; /* an older checkpoint than the newest was restored */
};

static void into_fell_back(struct ckpt_into *base)
{
    struct alloc_into *in = (struct alloc_into *)base;
    in->fell_back = true;
}

/* Forget the checkpoint prepared last; its memory goes back to the caller
 * (`release`) unless it was restored (keep). */
static void forget(struct alloc_into *in, bool keep)
{
    if (!keep && in->ngiven && in->a->release)
        in->a->release(in->a->user, in->step, (void *const *)in->given, in->ngiven);
    free(in->dest);
    free(in->done);
    free(in->given);
    in->dest = in->given = NULL;
    in->done = NULL;
    in->n = in->ngiven = 0;
}

static uint8_t *into_dest(const struct ckpt_into *base, size_t i)
{
    const struct alloc_into *in = (const struct alloc_into *)base;
    return in && i < in->n && !in->done[i] ? in->dest[i] : NULL;
}

/* One round: the caller is asked for items idx[0..k) of m. */
static ckpt_status ask(struct ckpt_ctx *ctx, struct alloc_into *in, const struct ckpt_manifest *m,
                       unsigned world, unsigned round, const size_t *idx, size_t k,
                       enum ckpt__misfit *why)
{
    struct ckpt_item_info *infos = calloc(k ? k : 1, sizeof *infos);
    struct ckpt_alloc_req req;
    ckpt_status st = CKPT_OK;

    memset(&req, 0, sizeof req);
    req.dest = calloc(k ? k : 1, sizeof *req.dest);
    if (!infos || !req.dest) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    for (size_t j = 0; j < k; j++) {
        const struct ckpt_mitem *it = &m->items[idx[j]];
        infos[j].name = it->name;
        infos[j].size = it->size;
        infos[j].kind = (ckpt_item_kind)it->kind; /* the manifest's kinds are ckpt.h's */
        infos[j].elem_size = it->elem_size > 1 ? it->elem_size : 0;
        infos[j].replicated = it->replicated != 0;
        infos[j].step = m->step;
        infos[j].world_size = world;
        infos[j].part = it->replicated ? 0 : m->rank;
        infos[j].mode = it->kind == CKPT_ITEM_FILE ? it->mode : 0;
    }
    req.step = m->step;
    req.world_size = world;
    req.round = round;
    req.n = k;
    req.items = infos;
    st = in->a->alloc(in->a->user, &req);
    for (size_t j = 0; j < k; j++) {
        if (!req.dest[j])
            continue;
        in->dest[idx[j]] = req.dest[j];
        in->given[in->ngiven++] = req.dest[j]; /* released with the checkpoint */
    }
    req.msg[sizeof req.msg - 1] = '\0';
    if (st) {
        if (st == CKPT_E_SIZE || st == CKPT_E_MISMATCH)
            *why = CKPT__SHAPE; /* the manifest lies, or the program changed */
        ckpt__set_ctx_err(ctx, "checkpoint step %" PRIu64 " %s: %s (%s)", m->step,
                          st == CKPT_E_CORRUPT ? "is damaged" : "refused by the caller",
                          req.msg[0] ? req.msg : ckpt_strerror(st), ckpt_status_name(st));
        goto out;
    }
    if (world == ctx->world_size || in->base.other_part >= 0)
        goto out; /* the same world, or the caller takes another's part */
    for (size_t j = 0; j < k; j++) {
        if (req.dest[j] && !m->items[idx[j]].replicated) {
            ckpt__set_ctx_err(ctx,
                              "checkpoint step %" PRIu64 " was written by %u rank%s; this "
                              "job has %u: resume it with %u ranks, or take only its "
                              "replicated items ('%s' is rank %u's own)",
                              m->step, world, world == 1 ? "" : "s", ctx->world_size, world,
                              m->items[idx[j]].name, m->rank);
            st = CKPT_E_WORLD;
            break;
        }
    }
out:
    free(infos);
    free(req.dest);
    return st;
}

static bool is_index(const struct ckpt_alloc *a, const char *name)
{
    for (size_t j = 0; j < a->nindex; j++)
        if (!strcmp(a->index[j], name))
            return true;
    return false;
}

static ckpt_status into_prepare(struct ckpt_ctx *ctx, const struct ckpt_manifest *m, unsigned world,
                                enum ckpt__misfit *why)
{
    struct alloc_into *in = (struct alloc_into *)ctx->into;
    const struct ckpt_alloc *a = in->a;
    size_t *idx = NULL, k = 0, n = m->nitems;
    ckpt_status st = CKPT_OK;

    forget(in, false); /* the one tried before is given up */
    in->step = m->step;
    in->dest = calloc(n ? n : 1, sizeof *in->dest);
    in->done = calloc(n ? n : 1, 1);
    in->given = calloc(n ? n : 1, sizeof *in->given);
    idx = calloc(n ? n : 1, sizeof *idx);
    if (!in->dest || !in->done || !in->given || !idx) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    in->n = n;
    if (a->nindex) {
        /* round 0: the index items, in the order the caller named them */
        for (size_t j = 0; j < a->nindex; j++)
            for (size_t i = 0; i < n; i++)
                if (m->items[i].kind != CKPT_ITEM_LINK && !in->done[i] &&
                    !strcmp(m->items[i].name, a->index[j])) {
                    in->done[i] = 1; /* listed once */
                    idx[k++] = i;
                }
        memset(in->done, 0, n);
        if (!k) {
            *why = CKPT__SKIP;
            in->skipped++;
            ckpt__set_ctx_err(ctx,
                              "checkpoint step %" PRIu64 " holds no '%s'%s: not of the kind "
                              "the caller restores, passed over",
                              m->step, a->index[0],
                              a->nindex > 1 ? " nor its other index items" : "");
            st = CKPT_E_NOENT;
            goto out;
        }
        st = ask(ctx, in, m, world, 0, idx, k, why);
        if (st == CKPT_OK) {
            struct ckpt_idset bad;
            ckpt__idset_init(&bad);
            st = ckpt__restore_write(ctx, m, NULL, &bad); /* only what round 0 took */
            if (bad.n)
                ckpt__run_forget_bad(&ctx->rs, &bad);
            ckpt__idset_free(&bad);
        }
        if (st)
            goto out;
        for (size_t j = 0; j < k; j++)
            in->done[idx[j]] = 1;
    }
    /* round 1 (the only one without an index): the other items */
    k = 0;
    for (size_t i = 0; i < n; i++)
        if (m->items[i].kind != CKPT_ITEM_LINK && !is_index(a, m->items[i].name))
            idx[k++] = i;
    st = ask(ctx, in, m, world, a->nindex ? 1 : 0, idx, k, why);
out:
    free(idx);
    return st;
}

static ckpt_status restore_alloc(struct ckpt_ctx *ctx, uint64_t step, int part,
                                 const struct ckpt_alloc *a, uint64_t *restored)
{
    struct alloc_into in;
    ckpt_status st;

    if (!ctx || !a || !a->alloc || a->version != CKPT_ALLOC_VERSION || (a->nindex && !a->index))
        return CKPT_E_INVAL;
    for (size_t j = 0; j < a->nindex; j++)
        if (!a->index[j])
            return CKPT_E_INVAL;
    if (ctx->into) {
        ckpt__set_ctx_err(ctx, "ckpt_restore_alloc called from its own callback");
        return CKPT_E_INVAL;
    }
    memset(&in, 0, sizeof in);
    in.base.prepare = into_prepare;
    in.base.fell_back = into_fell_back;
    in.base.dest = into_dest;
    in.base.other_part = part;
    in.a = a;
    ctx->into = &in.base;
    if (ctx->coll && ctx->world_size > 1)
        st = ckpt__ranks_restore(ctx, step, restored); /* the ranks agree (ranks.c) */
    else if (step == CKPT_STEP_LATEST)
        st = ckpt__restore_latest(ctx, restored);
    else
        st = ckpt__restore_step(ctx, step, restored);
    ctx->into = NULL;
    forget(&in, st == CKPT_OK);
    if (st == CKPT_OK && !in.fell_back)
        ckpt__set_ctx_err(ctx, "%s", ""); /* not a passed-over step's message */
    if (st == CKPT_E_NOENT && in.skipped && step == CKPT_STEP_LATEST)
        ckpt__set_ctx_err(ctx,
                          "run %s has no committed checkpoint of the kind the caller restores "
                          "(holding '%s'); %zu passed over",
                          ctx->run, a->index[0], in.skipped);
    return st;
}

ckpt_status ckpt_restore_alloc(struct ckpt_ctx *ctx, uint64_t step, const struct ckpt_alloc *a,
                               uint64_t *restored)
{
    return restore_alloc(ctx, step, -1, a, restored);
}

ckpt_status ckpt_restore_alloc_any(struct ckpt_ctx *ctx, uint64_t step, unsigned part,
                                   const struct ckpt_alloc *a, uint64_t *restored)
{
    if (part > INT_MAX)
        return CKPT_E_INVAL;
    return restore_alloc(ctx, step, (int)part, a, restored);
}
