/* packbuf.c -- pack buffers (packbuf.h). */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/packbuf.h"

/* Pack memory is mapped (huge pages where the kernel has them) and kept:
 * page faults on fresh memory cost virtual machines more than the copy. */
int ckpt__packbuf_grow(struct ckpt_packbuf *b, size_t cap)
{
    uint8_t *d;
    cap = (cap + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
    d = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (d == MAP_FAILED)
        return -1;
#ifdef MADV_HUGEPAGE
    madvise(d, cap, MADV_HUGEPAGE);
#endif
    if (b->data) {
        memcpy(d, b->data, b->len);
        munmap(b->data, b->cap);
    }
    b->data = d;
    b->cap = cap;
    return 0;
}

struct ckpt_packbuf *ckpt__packbuf_get(struct ckpt_packs *pk, size_t cap, unsigned max)
{
    struct ckpt_packbuf *b = NULL;
    pthread_mutex_lock(&pk->mu);
    while (!pk->free && pk->total > max)
        pthread_cond_wait(&pk->cv, &pk->mu);
    if (pk->free) {
        b = pk->free;
        pk->free = b->next;
    } else if ((b = calloc(1, sizeof *b)) != NULL) {
        if (ckpt__packbuf_grow(b, cap)) {
            free(b);
            b = NULL;
        } else {
            pk->total++;
        }
    }
    pthread_mutex_unlock(&pk->mu);
    if (b)
        b->len = 0;
    return b;
}

void ckpt__packbuf_put(struct ckpt_packs *pk, struct ckpt_packbuf *b)
{
    if (!b)
        return;
    pthread_mutex_lock(&pk->mu);
    b->next = pk->free;
    pk->free = b;
    pthread_cond_signal(&pk->cv);
    pthread_mutex_unlock(&pk->mu);
}

void ckpt__packs_init(struct ckpt_packs *pk)
{
    pthread_mutex_init(&pk->mu, NULL);
    pthread_cond_init(&pk->cv, NULL);
    pk->free = NULL;
    pk->total = 0;
}

void ckpt__packs_destroy(struct ckpt_packs *pk)
{
    struct ckpt_packbuf *b, *n;
    for (b = pk->free; b; b = n) {
        n = b->next;
        munmap(b->data, b->cap);
        free(b);
    }
    pk->free = NULL;
    pk->total = 0;
    pthread_mutex_destroy(&pk->mu);
    pthread_cond_destroy(&pk->cv);
}
