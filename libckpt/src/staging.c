/* staging.c -- blocks and arenas for the snapshot's copy (staging.h). */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "staging.h"

struct ckpt_arena *ckpt__arena_new(size_t chunk, size_t n)
{
    struct ckpt_arena *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->len = chunk * n;
    a->base = mmap(NULL, a->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    a->blocks = calloc(n, sizeof *a->blocks);
    if (a->base == MAP_FAILED || !a->blocks) {
        if (a->base != MAP_FAILED)
            munmap(a->base, a->len);
        free(a->blocks);
        free(a);
        return NULL;
    }
#ifdef MADV_HUGEPAGE
    madvise(a->base, a->len, MADV_HUGEPAGE);
#endif
    memset(a->base, 0, a->len);
    for (size_t i = 0; i < n; i++) {
        a->blocks[i].data = (uint8_t *)a->base + i * chunk;
        a->blocks[i].next = i + 1 < n ? &a->blocks[i + 1] : NULL;
    }
    return a;
}

void ckpt__arena_free(struct ckpt_arena *a)
{
    if (!a)
        return;
    munmap(a->base, a->len);
    free(a->blocks);
    free(a);
}

void ckpt__staging_init(struct ckpt_staging *s)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
}

void ckpt__staging_setup(struct ckpt_staging *s, size_t chunk_bytes, size_t max_bytes)
{
    s->chunk_bytes = chunk_bytes;
    s->max_bytes = max_bytes;
}

ckpt_status ckpt__staging_reserve(struct ckpt_staging *s, size_t n)
{
    struct ckpt_arena *a;
    size_t max = s->max_bytes ? s->max_bytes / s->chunk_bytes : SIZE_MAX;
    if (max == 0)
        max = 1;
    pthread_mutex_lock(&s->mu);
    if (n > max)
        n = max;
    n = n > s->total ? n - s->total : 0;
    pthread_mutex_unlock(&s->mu);
    if (!n)
        return CKPT_OK;
    a = ckpt__arena_new(s->chunk_bytes, n);
    if (!a)
        return CKPT_E_NOMEM;
    pthread_mutex_lock(&s->mu);
    a->next = s->arenas;
    s->arenas = a;
    a->blocks[n - 1].next = s->free;
    s->free = &a->blocks[0];
    s->total += n;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return CKPT_OK;
}

struct ckpt_block *ckpt__staging_get(struct ckpt_staging *s)
{
    struct ckpt_block *b = NULL;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        if (s->free) {
            b = s->free;
            s->free = b->next;
            break;
        }
        if (!s->max_bytes || (s->total + 1) * s->chunk_bytes <= s->max_bytes || s->total == 0) {
            /* not reserved (a region grew?): take one more, faults and all */
            struct ckpt_arena *a = ckpt__arena_new(s->chunk_bytes, 1);
            if (a) {
                a->next = s->arenas;
                s->arenas = a;
                b = &a->blocks[0];
                s->total++;
            }
            break;
        }
        pthread_cond_wait(&s->cv, &s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return b;
}

void ckpt__staging_put(struct ckpt_staging *s, struct ckpt_block *b)
{
    if (!b)
        return;
    pthread_mutex_lock(&s->mu);
    b->next = s->free;
    s->free = b;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

size_t ckpt__staging_blocks(struct ckpt_staging *s)
{
    size_t n;
    pthread_mutex_lock(&s->mu);
    n = s->total;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void ckpt__staging_destroy(struct ckpt_staging *s)
{
    struct ckpt_arena *a, *n;
    for (a = s->arenas; a; a = n) {
        n = a->next;
        ckpt__arena_free(a);
    }
    s->arenas = NULL;
    s->free = NULL;
    s->total = 0;
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
}
