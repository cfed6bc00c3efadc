/* staging.c -- blocks and arenas for the snapshot's copy (staging.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/pool.h"
#include "core/staging.h"

/* MADV_POPULATE_WRITE holds the process's address-space lock (mmap_lock)
 * for as long as it runs, and every mmap, munmap or brk of any other thread
 * waits for it: a state-sized stage faulted in by one call (300 MiB took
 * 0.03 s on memory the VM had used before, 0.57 s on memory it had not)
 * held up the next ckpt_protect's own mapping, the restore workers' buffers
 * and libcurl's allocations, so a recover began its downloads up to a
 * second late. In slices the lock is let go every POPULATE_SLICE bytes
 * (one 2 MiB huge page): a waiting mapping gets in after one slice,
 * milliseconds. */
#define POPULATE_SLICE (2u << 20)

int ckpt__populate(void *base, size_t len)
{
#ifdef MADV_POPULATE_WRITE
    uint8_t *p = base;
    if (!len)
        return -1;
    while (len) {
        size_t n = len < POPULATE_SLICE ? len : POPULATE_SLICE;
        if (madvise(p, n, MADV_POPULATE_WRITE) != 0)
            return -1;
        p += n;
        len -= n;
    }
    return 0;
#else
    (void)base;
    (void)len;
    return -1;
#endif
}

static struct ckpt_arena *arena_map(size_t chunk, size_t n, int touch)
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
    /* faulted in without a pass of writes where the kernel can */
    if (touch && ckpt__populate(a->base, a->len) != 0)
        memset(a->base, 0, a->len);
    for (size_t i = 0; i < n; i++) {
        a->blocks[i].data = (uint8_t *)a->base + i * chunk;
        a->blocks[i].next = i + 1 < n ? &a->blocks[i + 1] : NULL;
    }
    return a;
}

struct ckpt_arena *ckpt__arena_new(size_t chunk, size_t n)
{
    return arena_map(chunk, n, 1);
}

/* An idle pool job: fault in an arena's mapping. It steps aside, a slice
 * at a time, for the pool's ordinary jobs: a recover protects its state and
 * restores into it at once, and touching a state-sized stage on four
 * workers while the downloads wait (their ranges queued behind it, their
 * buffers' mappings behind its lock) made the restore in the trainer up to
 * 1.6 s slower than `ckptrun restore` of the same checkpoint over a 20 ms
 * link. The arena and the job share this state: freeing the arena calls
 * the rest off (under `mu`, which a slice is touched under), and so does
 * the pool's stop; whichever of the two lets go last frees it. */
struct ckpt_touch {
    pthread_mutex_t mu;
    int refs;                  /* the arena's and the job's */
    int off;                   /* called off: the arena is going */
    struct ckpt_pool *pool;
    uint8_t *base;
    size_t len;
};

static void touch_release(struct ckpt_touch *t)
{
    int last;
    pthread_mutex_lock(&t->mu);
    last = --t->refs == 0;
    pthread_mutex_unlock(&t->mu);
    if (last) {
        pthread_mutex_destroy(&t->mu);
        free(t);
    }
}

static void touch_job(void *arg, struct ckpt_codec_ws *ws)
{
    struct ckpt_touch *t = arg;
    (void)ws;
    for (;;) {
        int more;
        pthread_mutex_lock(&t->mu);
        if (!t->off && ckpt__pool_closing(t->pool))
            t->off = 1; /* a close right after ckpt_protect: not worth a pass */
        if (!t->off && t->len) {
            size_t n = t->len < POPULATE_SLICE ? t->len : POPULATE_SLICE;
            if (ckpt__populate(t->base, n) != 0)
                t->len = 0;
            else {
                t->base += n;
                t->len -= n;
            }
        }
        more = !t->off && t->len;
        pthread_mutex_unlock(&t->mu);
        if (!more)
            break;
        if (ckpt__pool_wanted(t->pool) && ckpt__pool_submit_idle(t->pool, touch_job, t) == CKPT_OK)
            return; /* the rest after the ordinary jobs */
    }
    touch_release(t);
}

struct ckpt_arena *ckpt__arena_new_background(size_t chunk, size_t n, struct ckpt_pool *pool)
{
    struct ckpt_arena *a = arena_map(chunk, n, 0);
    struct ckpt_touch *t;
    size_t head;
    if (!a)
        return NULL;
    /* the first 2 MiB now: whether the kernel can fault in without writing */
    head = a->len < (2u << 20) ? a->len : (2u << 20);
    if (ckpt__populate(a->base, head) != 0) {
        /* it cannot: a save copying into the stage would race a memset of
         * it in the background, so the memset is now */
        memset(a->base, 0, a->len);
        return a;
    }
    if (a->len == head)
        return a;
    t = malloc(sizeof *t);
    if (t) {
        pthread_mutex_init(&t->mu, NULL);
        t->refs = 2;
        t->off = 0;
        t->pool = pool;
        t->base = (uint8_t *)a->base + head;
        t->len = a->len - head;
        a->touch = t;
    }
    if (!t || ckpt__pool_submit_idle(pool, touch_job, t) != CKPT_OK) {
        if (t) {
            pthread_mutex_destroy(&t->mu);
            free(t);
        }
        a->touch = NULL;
        (void)ckpt__populate((uint8_t *)a->base + head, a->len - head); /* now, then */
    }
    return a;
}

void ckpt__arena_free(struct ckpt_arena *a)
{
    if (!a)
        return;
    if (a->touch) {
        pthread_mutex_lock(&a->touch->mu);
        a->touch->off = 1;
        pthread_mutex_unlock(&a->touch->mu);
        touch_release(a->touch);
    }
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
