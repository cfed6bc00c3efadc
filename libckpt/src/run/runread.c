/* runread.c -- a run's keys and its single manifests read from the store
 * (runread.h). */
#include <stdio.h>
#include <stdlib.h>

#include "core/ctx.h"
#include "run/runread.h"

void ckpt__run_key(const struct ckpt_ctx *ctx, const char *rel, char *out, size_t n)
{
    snprintf(out, n, "%s/%s", ctx->run, rel);
}

/* Manifests are immutable: each is written once, create-only, under a key
 * that holds its sequence, step, epoch and a random nonce (commit.c), and
 * only a deletion ends it. So a context keeps the few it read last and
 * decoded well, and reads them from memory again: `ckptrun restore` read
 * the newest manifest three times (the open's load, the list, the
 * restore), a round trip to the store each. Whether a checkpoint still
 * exists is HEAD's to say, and HEAD is always read from the store; a kept
 * manifest of a checkpoint deleted since is found by no HEAD that a reader
 * follows. ckpt_verify clears the cache first: it is the call that must
 * read the store's own bytes (and what a read in flight across the clear
 * brings back is not kept). Damaged or unreadable manifests are not kept
 * (a retry reads the store again). Two threads that want the same manifest
 * at once (ckpt_open's background load and the caller's first ckpt_list)
 * read it once: the second waits for the first. */
ckpt_status ckpt__read_one_manifest(struct ckpt_ctx *ctx, const char *rel,
                                    struct ckpt_manifest *m)
{
    char key[1024], err[CKPT_ERR_MAX] = "";
    void *buf;
    size_t len = 0;
    int mine, kept;
    uint64_t gen;
    ckpt_status st = CKPT_OK;
    ckpt__run_key(ctx, rel, key, sizeof key);
    buf = ckpt__mcache_get(&ctx->mcache, rel, &len, &mine, &gen);
    kept = buf != NULL;
    if (!kept)
        st = ctx->store->ops->get(ctx->store, key, CKPT_MANIFEST_MAX, 0, &buf, &len, NULL, err);
    if (st) {
        if (mine)
            ckpt__mcache_read_done(&ctx->mcache, rel);
        ckpt__set_ctx_err(ctx, "reading manifest %s: %s", key, err);
        return st;
    }
    st = ckpt__manifest_decode(buf, len, m, err);
    if (st == CKPT_OK && !kept) /* a copy kept is kept already (its get marked it read) */
        ckpt__mcache_put(&ctx->mcache, rel, buf, len, gen);
    if (mine)
        ckpt__mcache_read_done(&ctx->mcache, rel);
    free(buf);
    if (st == CKPT_E_UNSUPPORTED) /* newer, not damaged: the reason says "upgrade" */
        ckpt__set_ctx_err(ctx, "manifest %s: %s", key, err);
    else if (st)
        ckpt__set_ctx_err(ctx, "manifest %s is damaged: %s", key, err);
    return st;
}
