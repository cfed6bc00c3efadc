/* runread.c -- a run's keys and its single manifests read from the store
 * (runread.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
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
 * read the store's own bytes. Damaged or unreadable manifests are not kept
 * (a retry reads the store again). Two threads that want the same manifest
 * at once (ckpt_open's background load and the caller's first ckpt_list)
 * read it once: the second waits for the first. */
void ckpt__mcache_init(struct ckpt_mcache *c)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
}

static void mcache_drop(struct ckpt_mcache *c, struct ckpt_mcached *e)
{
    c->bytes -= e->len;
    free(e->rel);
    free(e->buf);
    memset(e, 0, sizeof *e);
}

void ckpt__mcache_clear(struct ckpt_mcache *c)
{
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < CKPT_MCACHE_N; i++)
        if (c->e[i].rel)
            mcache_drop(c, &c->e[i]);
    pthread_mutex_unlock(&c->mu);
}

void ckpt__mcache_destroy(struct ckpt_mcache *c)
{
    ckpt__mcache_clear(c);
    for (size_t i = 0; i < CKPT_MCACHE_N; i++) /* none: every reader has returned */
        free(c->reading[i]);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
}

static int reading_at(const struct ckpt_mcache *c, const char *rel)
{
    for (int i = 0; i < CKPT_MCACHE_N; i++)
        if (c->reading[i] && !strcmp(c->reading[i], rel))
            return i;
    return -1;
}

/* A copy of the manifest kept under rel, or NULL (*len: its length). On
 * NULL, *mine says the caller reads it for everyone and must call
 * mcache_read_done; while another thread reads it, this one waits. */
static void *mcache_get(struct ckpt_mcache *c, const char *rel, size_t *len, int *mine)
{
    void *copy = NULL;
    *mine = 0;
    pthread_mutex_lock(&c->mu);
    while (reading_at(c, rel) >= 0)
        pthread_cond_wait(&c->cv, &c->mu);
    for (size_t i = 0; i < CKPT_MCACHE_N; i++) {
        struct ckpt_mcached *e = &c->e[i];
        if (!e->rel || strcmp(e->rel, rel))
            continue;
        if ((copy = malloc(e->len ? e->len : 1)) != NULL) {
            memcpy(copy, e->buf, e->len);
            *len = e->len;
            e->used = ++c->tick;
        }
        break;
    }
    if (!copy) {
        for (size_t i = 0; i < CKPT_MCACHE_N; i++) /* none free: read without telling */
            if (!c->reading[i]) {
                *mine = (c->reading[i] = ckpt__strdup(rel)) != NULL;
                break;
            }
    }
    pthread_mutex_unlock(&c->mu);
    return copy;
}

static void mcache_read_done(struct ckpt_mcache *c, const char *rel)
{
    int i;
    pthread_mutex_lock(&c->mu);
    if ((i = reading_at(c, rel)) >= 0) {
        free(c->reading[i]);
        c->reading[i] = NULL;
    }
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* Keep buf (a manifest that decoded well) under rel; the least recently
 * read ones go to make room. Out of memory: not kept, nothing else lost. */
static void mcache_put(struct ckpt_mcache *c, const char *rel, const void *buf, size_t len)
{
    char *r;
    void *b;
    if (len > CKPT_MCACHE_BYTES / 2)
        return;
    r = ckpt__strdup(rel);
    b = malloc(len ? len : 1);
    if (!r || !b) {
        free(r);
        free(b);
        return;
    }
    memcpy(b, buf, len);
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < CKPT_MCACHE_N; i++) /* two threads read it at once */
        if (c->e[i].rel && !strcmp(c->e[i].rel, rel))
            mcache_drop(c, &c->e[i]);
    for (;;) {
        struct ckpt_mcached *slot = NULL, *oldest = NULL;
        for (size_t i = 0; i < CKPT_MCACHE_N; i++) {
            struct ckpt_mcached *e = &c->e[i];
            if (!e->rel)
                slot = slot ? slot : e;
            else if (!oldest || e->used < oldest->used)
                oldest = e;
        }
        if (slot && c->bytes + len <= CKPT_MCACHE_BYTES) {
            slot->rel = r;
            slot->buf = b;
            slot->len = len;
            slot->used = ++c->tick;
            c->bytes += len;
            break;
        }
        mcache_drop(c, oldest); /* no slot, or too many bytes: one is kept at least */
    }
    pthread_mutex_unlock(&c->mu);
}

ckpt_status ckpt__read_one_manifest(struct ckpt_ctx *ctx, const char *rel,
                                    struct ckpt_manifest *m)
{
    char key[1024], err[CKPT_ERR_MAX] = "";
    void *buf;
    size_t len = 0;
    int mine;
    ckpt_status st = CKPT_OK;
    ckpt__run_key(ctx, rel, key, sizeof key);
    buf = mcache_get(&ctx->mcache, rel, &len, &mine);
    if (!buf)
        st = ctx->store->ops->get(ctx->store, key, CKPT_MANIFEST_MAX, 0, &buf, &len, NULL, err);
    if (st) {
        if (mine)
            mcache_read_done(&ctx->mcache, rel);
        ckpt__set_ctx_err(ctx, "reading manifest %s: %s", key, err);
        return st;
    }
    st = ckpt__manifest_decode(buf, len, m, err);
    if (st == CKPT_OK)
        mcache_put(&ctx->mcache, rel, buf, len);
    if (mine)
        mcache_read_done(&ctx->mcache, rel);
    free(buf);
    if (st == CKPT_E_UNSUPPORTED) /* newer, not damaged: the reason says "upgrade" */
        ckpt__set_ctx_err(ctx, "manifest %s: %s", key, err);
    else if (st)
        ckpt__set_ctx_err(ctx, "manifest %s is damaged: %s", key, err);
    return st;
}
