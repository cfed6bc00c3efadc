/* mcache.c -- the manifests a context read last (mcache.h). */
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "core/mcache.h"

void ckpt__mcache_init(struct ckpt_mcache *c)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
}

static void drop(struct ckpt_mcache *c, struct ckpt_mcached *e)
{
    c->bytes -= e->len;
    free(e->key);
    free(e->buf);
    memset(e, 0, sizeof *e);
}

void ckpt__mcache_clear(struct ckpt_mcache *c)
{
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < CKPT_MCACHE_N; i++)
        if (c->e[i].key)
            drop(c, &c->e[i]);
    c->gen++;
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

static int reading_at(const struct ckpt_mcache *c, const char *key)
{
    for (int i = 0; i < CKPT_MCACHE_N; i++)
        if (c->reading[i] && !strcmp(c->reading[i], key))
            return i;
    return -1;
}

void *ckpt__mcache_get(struct ckpt_mcache *c, const char *key, size_t *len, int *mine,
                       uint64_t *gen)
{
    void *copy = NULL;
    *mine = 0;
    pthread_mutex_lock(&c->mu);
    while (reading_at(c, key) >= 0)
        pthread_cond_wait(&c->cv, &c->mu);
    *gen = c->gen;
    for (size_t i = 0; i < CKPT_MCACHE_N; i++) {
        struct ckpt_mcached *e = &c->e[i];
        if (!e->key || strcmp(e->key, key))
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
                *mine = (c->reading[i] = ckpt__strdup(key)) != NULL;
                break;
            }
    }
    pthread_mutex_unlock(&c->mu);
    return copy;
}

void ckpt__mcache_read_done(struct ckpt_mcache *c, const char *key)
{
    int i;
    pthread_mutex_lock(&c->mu);
    if ((i = reading_at(c, key)) >= 0) {
        free(c->reading[i]);
        c->reading[i] = NULL;
    }
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

void ckpt__mcache_put(struct ckpt_mcache *c, const char *key, const void *buf, size_t len,
                      uint64_t gen)
{
    char *k;
    void *b;
    if (len > CKPT_MCACHE_BYTES / 2)
        return;
    k = ckpt__strdup(key);
    b = malloc(len ? len : 1);
    if (!k || !b) {
        free(k);
        free(b);
        return;
    }
    memcpy(b, buf, len);
    pthread_mutex_lock(&c->mu);
    if (gen != c->gen) { /* read before a clear: the bytes may be older than it */
        pthread_mutex_unlock(&c->mu);
        free(k);
        free(b);
        return;
    }
    for (size_t i = 0; i < CKPT_MCACHE_N; i++) /* two threads read it at once */
        if (c->e[i].key && !strcmp(c->e[i].key, key))
            drop(c, &c->e[i]);
    for (;;) {
        struct ckpt_mcached *slot = NULL, *oldest = NULL;
        for (size_t i = 0; i < CKPT_MCACHE_N; i++) {
            struct ckpt_mcached *e = &c->e[i];
            if (!e->key)
                slot = slot ? slot : e;
            else if (!oldest || e->used < oldest->used)
                oldest = e;
        }
        if (slot && c->bytes + len <= CKPT_MCACHE_BYTES) {
            slot->key = k;
            slot->buf = b;
            slot->len = len;
            slot->used = ++c->tick;
            c->bytes += len;
            break;
        }
        drop(c, oldest); /* no slot, or too many bytes: then one is kept at least */
    }
    pthread_mutex_unlock(&c->mu);
}
