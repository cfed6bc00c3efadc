/* packbuf.h -- pack buffers: a pack is assembled in memory and uploaded in
 * one PUT. Buffers are kept for the next save (no page faults at every
 * save): their free list, beside its lock, is struct ckpt_packs. */
#ifndef CKPT_PACKBUF_H
#define CKPT_PACKBUF_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct ckpt_packbuf {
    struct ckpt_packbuf *next;
    uint8_t *data;
    size_t len, cap;
    uint32_t slot;              /* index in the save's manifest packs */
};

struct ckpt_packs {
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* a buffer came back */
    struct ckpt_packbuf *free;
    unsigned total;             /* buffers that exist */
};

void ckpt__packs_init(struct ckpt_packs *pk);
void ckpt__packs_destroy(struct ckpt_packs *pk); /* frees the buffers */
/* An empty buffer of at least `cap` bytes: a free one, else a new one while
 * fewer than max + 1 exist, else the next one given back. NULL without
 * memory. */
struct ckpt_packbuf *ckpt__packbuf_get(struct ckpt_packs *pk, size_t cap, unsigned max);
void ckpt__packbuf_put(struct ckpt_packs *pk, struct ckpt_packbuf *b); /* NULL-safe */
/* Room for at least `cap` bytes, keeping the content. -1 without memory. */
int ckpt__packbuf_grow(struct ckpt_packbuf *b, size_t cap);

#endif
