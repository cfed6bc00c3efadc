/* staging.h -- where the snapshot puts a save's copy of host and device
 * regions: chunk-sized blocks, shared and kept between saves, within the
 * staging cap (a save waits for blocks the workers give back); and arenas,
 * the mappings blocks live in (a region without a cap has an arena of its
 * own, its private stage). Blocks and arenas are anonymous mappings asked
 * for transparent huge pages and touched once when reserved (at
 * ckpt_protect time): on virtual machines first-touch faults can cost more
 * than the copy itself, and they must not land inside ckpt_save()'s stall. */
#ifndef CKPT_STAGING_H
#define CKPT_STAGING_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"

struct ckpt_block {        /* a chunk-sized staging buffer */
    struct ckpt_block *next;
    uint8_t *data;
};

struct ckpt_touch;
struct ckpt_arena {        /* one mapping holding many blocks */
    struct ckpt_arena *next;
    void *base;
    size_t len;
    struct ckpt_block *blocks;
    struct ckpt_touch *touch;  /* its background touching, while queued or running */
};

/* A mapping of n chunk-sized blocks, asked for huge pages and touched. */
struct ckpt_arena *ckpt__arena_new(size_t chunk, size_t n);
/* The same, touched by an idle job of `pool` (where the kernel can fault
 * pages in without writing them, MADV_POPULATE_WRITE: a save copying into
 * the arena meanwhile loses nothing; else touched now). For ckpt_protect:
 * a restore that follows (a recover) neither waits for the touching of a
 * state-sized stage nor shares its workers with it: the job steps aside,
 * slice by slice, while ordinary jobs are queued (pool.h). */
struct ckpt_pool;
struct ckpt_arena *ckpt__arena_new_background(size_t chunk, size_t n, struct ckpt_pool *pool);
/* Fault in [base, base + len) writable without writing it. -1 where the
 * kernel cannot (before Linux 5.14). */
int ckpt__populate(void *base, size_t len);
/* Unmap (NULL-safe). Background touching still to do is called off first
 * and a slice being touched is waited for: nothing is faulted in at the
 * address afterwards, where another mapping may come. */
void ckpt__arena_free(struct ckpt_arena *a);

/* The shared blocks (training thread takes, workers give back). */
struct ckpt_staging {
    pthread_mutex_t mu;
    pthread_cond_t cv;             /* a block came back */
    size_t chunk_bytes;            /* block size */
    size_t max_bytes;              /* the staging cap; 0: none */
    struct ckpt_block *free;
    size_t total;                  /* blocks that exist */
    struct ckpt_arena *arenas;
};
void ckpt__staging_init(struct ckpt_staging *s);
/* Block size and cap, set once ckpt_open knows them. */
void ckpt__staging_setup(struct ckpt_staging *s, size_t chunk_bytes, size_t max_bytes);
void ckpt__staging_destroy(struct ckpt_staging *s);
/* Make sure `n` blocks exist (within the cap), mapped and touched, so the
 * first save does not pay page faults inside its copy. */
ckpt_status ckpt__staging_reserve(struct ckpt_staging *s, size_t n);
/* A free block: waits while the cap is reached; NULL without memory. */
struct ckpt_block *ckpt__staging_get(struct ckpt_staging *s);
void ckpt__staging_put(struct ckpt_staging *s, struct ckpt_block *b); /* NULL-safe */
size_t ckpt__staging_blocks(struct ckpt_staging *s); /* blocks that exist */

#endif
