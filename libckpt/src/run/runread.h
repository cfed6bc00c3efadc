/* runread.h -- a run's keys, and one manifest (a single writer's, or one
 * rank's part) read from the store, below both the run's loading
 * (runload.h) and the global checkpoints composed from parts
 * (globalckpt.h). Errors go to the context's message. */
#ifndef CKPT_RUNREAD_H
#define CKPT_RUNREAD_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "format/manifest.h"

struct ckpt_ctx;

/* The manifests a context read last, as stored (runread.c says why it may
 * keep them). Part of the context: ckpt__mcache_init/destroy. */
#define CKPT_MCACHE_N 8
#define CKPT_MCACHE_BYTES (64u << 20)
struct ckpt_mcache {
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* a read in flight ended */
    char *reading[CKPT_MCACHE_N]; /* being read from the store by some thread */
    struct ckpt_mcached {
        char *rel;          /* NULL: a free slot */
        void *buf;
        size_t len;
        uint64_t used;      /* the tick of its last read: the oldest goes first */
    } e[CKPT_MCACHE_N];
    uint64_t tick;
    size_t bytes;
};
void ckpt__mcache_init(struct ckpt_mcache *c);
void ckpt__mcache_destroy(struct ckpt_mcache *c);
/* Forget every kept manifest: the next reads go to the store. */
void ckpt__mcache_clear(struct ckpt_mcache *c);

/* "<run>/<rel>" */
void ckpt__run_key(const struct ckpt_ctx *ctx, const char *rel, char *out, size_t n);
/* The manifest at rel, as stored (no commit record's composition). */
ckpt_status ckpt__read_one_manifest(struct ckpt_ctx *ctx, const char *rel,
                                    struct ckpt_manifest *m);

#endif
