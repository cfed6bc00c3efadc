/* retention.c -- the live set and deletion, for commits and gc (retention.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "commit/retention.h"
#include "core/runstate.h"

#define DELETE_BATCH 1000

int ckpt__live_add(struct ckpt_idset *live, const struct ckpt_idlist *lists, size_t n)
{
    for (size_t i = 0; lists && i < n; i++)
        for (size_t k = 0; k < lists[i].n; k++)
            if (ckpt__objset_add(live, lists[i].ids[k], lists[i].kind[k]))
                return -1;
    return 0;
}

static int key_kept(const char *key, const struct ckpt_idlist *kept, size_t n)
{
    for (size_t i = 0; kept && i < n; i++)
        for (size_t k = 0; k < kept[i].nkeys; k++)
            if (!strcmp(kept[i].keys[k], key))
                return 1;
    return 0;
}

static int is_manifest(const char *key)
{
    return strstr(key, "/manifests/") != NULL;
}

ckpt_status ckpt__delete_keys(struct ckpt_ctx *ctx, const char *who, const char **keys,
                              size_t n, uint64_t deadline_ns, uint64_t *deleted, char *err)
{
    size_t m = 0;
    /* manifests to the front, in their order, then the rest in theirs */
    for (size_t i = 0; i < n; i++)
        if (is_manifest(keys[i])) {
            const char *k = keys[i];
            memmove(&keys[m + 1], &keys[m], (i - m) * sizeof *keys);
            keys[m++] = k;
        }
    for (size_t i = 0; i < n; i++)
        ckpt__log(&ctx->log, CKPT_LOG_DEBUG, who, "delete %s", keys[i]);
    for (size_t i = 0; i < n; i += DELETE_BATCH) {
        size_t k = n - i < DELETE_BATCH ? n - i : DELETE_BATCH;
        ckpt_status st;
        if (deadline_ns && ckpt__mono_ns() > deadline_ns) {
            ckpt__log(&ctx->log, CKPT_LOG_WARN, who, "stopped after %lld minutes: %zu objects "
                      "left for the next gc", (long long)(CKPT_GC_DELETE_MS / 60000), n - i);
            break;
        }
        st = ctx->store->ops->del(ctx->store, keys + i, k, err);
        if (st)
            return st;
        *deleted += k;
    }
    return CKPT_OK;
}

void ckpt__retention_after_commit(struct ckpt_ctx *ctx, const struct ckpt_idlist *kept,
                                  size_t nkept, const struct ckpt_idlist *damaged,
                                  size_t ndamaged, const struct ckpt_dropped *dropped)
{
    struct ckpt_idset live; /* id -> bit (1 << kind) */
    char err[CKPT_ERR_MAX] = "", key[1024], **keys = NULL;
    size_t nkeys = 0, cap = dropped->n;
    uint64_t deleted = 0;

    ckpt__idset_init(&live);
    for (size_t d = 0; d < dropped->n; d++)
        cap += dropped->ids[d].n + dropped->ids[d].nkeys;
    keys = calloc(cap ? cap : 1, sizeof *keys);
    if (!keys || ckpt__live_add(&live, kept, nkept) || ckpt__live_add(&live, damaged, ndamaged))
        goto nomem;
    for (size_t d = 0; d < dropped->n; d++) {
        snprintf(key, sizeof key, "%s/%s", ctx->run, dropped->entries[d].manifest);
        if (!(keys[nkeys++] = ckpt__strdup(key)))
            goto nomem;
        /* a global checkpoint goes as a unit: its parts with its record */
        for (size_t k = 0; k < dropped->ids[d].nkeys; k++) {
            if (key_kept(dropped->ids[d].keys[k], kept, nkept))
                continue; /* a later commit of the same parts */
            snprintf(key, sizeof key, "%s/%s", ctx->run, dropped->ids[d].keys[k]);
            if (!(keys[nkeys++] = ckpt__strdup(key)))
                goto nomem;
        }
        for (size_t k = 0; k < dropped->ids[d].n; k++) {
            const uint8_t *id = dropped->ids[d].ids[k];
            int kind = dropped->ids[d].kind[k];
            if (ckpt__objset_has(&live, id, kind))
                continue;
            if (ckpt__objset_add(&live, id, kind)) /* once */
                goto nomem;
            /* forget it first: never dedup against an object being deleted */
            ckpt__run_forget(&ctx->rs, id, kind);
            ckpt__object_key(ctx->run, kind, id, key, sizeof key);
            if (!(keys[nkeys++] = ckpt__strdup(key)))
                goto nomem;
        }
    }
    if (ckpt__delete_keys(ctx, "retention", (const char **)keys, nkeys, 0, &deleted, err))
        ckpt__log(&ctx->log, CKPT_LOG_WARN, "retention", "cannot delete what %zu dropped "
                  "checkpoints used: %s (ckptrun gc removes what is left)", dropped->n, err);
    ckpt__log(&ctx->log, CKPT_LOG_DEBUG, "retention", "dropped %zu checkpoints, %" PRIu64
              " objects", dropped->n, deleted > dropped->n ? deleted - dropped->n : 0);
    goto out;
nomem:
    ckpt__log(&ctx->log, CKPT_LOG_WARN, "retention", "out of memory: nothing deleted "
              "(ckptrun gc removes what is left)");
out:
    for (size_t i = 0; i < nkeys; i++)
        free(keys[i]);
    free(keys);
    ckpt__idset_free(&live);
}
