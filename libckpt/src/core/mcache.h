/* mcache.h -- the manifests a context read last, kept as stored: a few
 * objects by key, the least recently read going first. run/runread.c reads
 * manifests through it and says why it may keep them; ckpt_verify clears
 * it. Thread-safe. */
#ifndef CKPT_MCACHE_H
#define CKPT_MCACHE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define CKPT_MCACHE_N 8                /* objects kept at most */
#define CKPT_MCACHE_BYTES (64u << 20)  /* their bytes at most */

struct ckpt_mcache {
    pthread_mutex_t mu;
    pthread_cond_t cv;            /* a read in flight ended */
    char *reading[CKPT_MCACHE_N]; /* keys some thread reads from the store now */
    struct ckpt_mcached {
        char *key;                /* NULL: a free slot */
        void *buf;
        size_t len;
        uint64_t used;            /* the tick of its last read */
    } e[CKPT_MCACHE_N];
    uint64_t tick;
    uint64_t gen;                 /* clears so far: a read begun before one is not kept */
    size_t bytes;                 /* of every e[].buf */
};

void ckpt__mcache_init(struct ckpt_mcache *c);
/* Every reader has returned. */
void ckpt__mcache_destroy(struct ckpt_mcache *c);
/* Forget every kept object: the next reads go to the store, and what a read
 * already in flight brings back is not kept (its put is dropped). */
void ckpt__mcache_clear(struct ckpt_mcache *c);
/* A malloc'd copy of the object kept under key (*len: its length), or
 * NULL. On NULL, *mine says the caller reads it from the store for every
 * thread and must call ckpt__mcache_read_done, and *gen is what to give
 * ckpt__mcache_put with the bytes it read; while another thread reads it,
 * this one waits for that read (one read where two would be). */
void *ckpt__mcache_get(struct ckpt_mcache *c, const char *key, size_t *len, int *mine,
                       uint64_t *gen);
void ckpt__mcache_read_done(struct ckpt_mcache *c, const char *key);
/* Keep a copy of buf under key, making room (out of memory: not kept,
 * nothing else lost; an object over half the byte bound: not kept; read
 * before a clear, gen not the cache's: not kept). */
void ckpt__mcache_put(struct ckpt_mcache *c, const char *key, const void *buf, size_t len,
                      uint64_t gen);

#endif
