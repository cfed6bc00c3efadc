/* fake_cudart.c -- a stand-in for libcudart, for machines without a GPU.
 *
 * libckpt loads it through CKPT_CUDA_RUNTIME, so the real cuda.c (stream,
 * pinned ring, events, restore workers) runs against it. "Device memory" is
 * host memory handed out by fake_dev_alloc(); each stream is a thread that
 * runs its queued copies in order, slowly (FAKE_CUDA_DELAY_US per copy,
 * default 200), so reading a pinned buffer before its event completed, or
 * snapshotting before earlier application work finished, shows up as wrong
 * bytes. Only what libckpt uses is implemented, with the runtime's ABI (enums
 * are ints, handles are pointers). Not thread-safe beyond what libckpt needs:
 * one mutex guards everything.
 *
 * Test hooks (found with dlsym by the test):
 *   fake_dev_alloc/fake_dev_free       device allocations
 *   fake_app_write(dev, byte, len)     queue a slow memset on an application
 *                                      stream, not waited for
 *   fake_fail_copy_after(n)            the n-th next async copy fails
 *   fake_stats(&copies, &max_inflight) counters
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))

typedef int cudaError_t;
enum { OK = 0, ERR_INVALID_VALUE = 1, ERR_LAUNCH = 719 };

struct op {
    int kind;                 /* 0 copy, 1 event mark, 2 memset */
    void *dst;
    const void *src;
    size_t n;
    int byte;
    struct fevent *ev;
    uint64_t ticket;
    struct op *next;
};

struct fstream {
    pthread_t th;
    struct op *head, *tail;
    int stop, busy;
};

struct fevent {
    uint64_t recorded, done; /* ticket of the last record, last completed */
};

struct alloc {
    uint8_t *p;
    size_t n;
    int type;                 /* 1 host (pinned), 2 device */
    struct alloc *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct alloc *allocs;
static struct fstream *streams[64];
static int nstreams;
static uint64_t next_ticket = 1;
static long fail_after = -1;
static long copies, inflight, max_inflight;
static int sticky;
static int current_device;

static unsigned delay_us(void)
{
    const char *s = getenv("FAKE_CUDA_DELAY_US");
    return s ? (unsigned)atoi(s) : 200;
}

static void *stream_main(void *arg)
{
    struct fstream *s = arg;
    pthread_mutex_lock(&mu);
    for (;;) {
        struct op *o;
        while (!s->stop && !s->head)
            pthread_cond_wait(&cv, &mu);
        if (!s->head)
            break;
        o = s->head;
        s->busy = 1;
        pthread_mutex_unlock(&mu);
        if (o->kind == 0 || o->kind == 2) {
            /* application work is slower still: a snapshot that does not
             * wait for it reads the old bytes */
            usleep(o->kind == 2 ? 50 * delay_us() : delay_us());
            if (o->kind == 0)
                memcpy(o->dst, o->src, o->n);
            else
                memset(o->dst, o->byte, o->n);
        }
        pthread_mutex_lock(&mu);
        if (o->kind == 1 && o->ev->done < o->ticket)
            o->ev->done = o->ticket;
        if (o->kind == 0)
            inflight--;
        s->head = o->next;
        if (!s->head)
            s->tail = NULL;
        s->busy = 0;
        free(o);
        pthread_cond_broadcast(&cv);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

static struct fstream *stream_new(void)
{
    struct fstream *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    pthread_create(&s->th, NULL, stream_main, s);
    pthread_mutex_lock(&mu);
    streams[nstreams++] = s;
    pthread_mutex_unlock(&mu);
    return s;
}

static void push(struct fstream *s, struct op *o) /* under mu */
{
    if (s->tail)
        s->tail->next = o;
    else
        s->head = o;
    s->tail = o;
    pthread_cond_broadcast(&cv);
}

static struct alloc *find(const void *p)
{
    for (struct alloc *a = allocs; a; a = a->next)
        if ((const uint8_t *)p >= a->p && (const uint8_t *)p < a->p + a->n)
            return a;
    return NULL;
}

/* ---- the runtime API used by libckpt ----------------------------------------- */

API cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return OK; }
API cudaError_t cudaGetDevice(int *d) { *d = current_device; return OK; }
API cudaError_t cudaSetDevice(int d) { if (d != 0) return ERR_INVALID_VALUE; current_device = d; return OK; }
API cudaError_t cudaRuntimeGetVersion(int *v) { *v = 13000; return OK; }
API const char *cudaGetErrorString(cudaError_t e)
{
    return e == ERR_LAUNCH ? "fake: injected copy failure" : e ? "fake: error" : "no error";
}

API cudaError_t cudaDeviceSynchronize(void)
{
    cudaError_t e;
    pthread_mutex_lock(&mu);
    for (;;) {
        int idle = 1;
        for (int i = 0; i < nstreams; i++)
            if (streams[i]->head)
                idle = 0;
        if (idle)
            break;
        pthread_cond_wait(&cv, &mu);
    }
    e = sticky;
    pthread_mutex_unlock(&mu);
    return e;
}

API cudaError_t cudaMallocHost(void **p, size_t n)
{
    struct alloc *a = calloc(1, sizeof *a);
    if (!a || !(a->p = malloc(n)))
        return 2;
    a->n = n;
    a->type = 1;
    pthread_mutex_lock(&mu);
    a->next = allocs;
    allocs = a;
    pthread_mutex_unlock(&mu);
    *p = a->p;
    return OK;
}

static cudaError_t alloc_free(void *p)
{
    pthread_mutex_lock(&mu);
    for (struct alloc **pp = &allocs; *pp; pp = &(*pp)->next) {
        if ((*pp)->p == p) {
            struct alloc *a = *pp;
            *pp = a->next;
            free(a->p);
            free(a);
            break;
        }
    }
    pthread_mutex_unlock(&mu);
    return OK;
}

API cudaError_t cudaFreeHost(void *p) { return alloc_free(p); }

API cudaError_t cudaStreamCreateWithFlags(void **s, unsigned flags)
{
    (void)flags;
    *s = stream_new();
    return *s ? OK : 2;
}

API cudaError_t cudaStreamSynchronize(void *sv)
{
    struct fstream *s = sv;
    cudaError_t e;
    pthread_mutex_lock(&mu);
    while (s->head)
        pthread_cond_wait(&cv, &mu);
    e = sticky;
    pthread_mutex_unlock(&mu);
    return e;
}

API cudaError_t cudaStreamDestroy(void *sv)
{
    struct fstream *s = sv;
    pthread_mutex_lock(&mu);
    s->stop = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(s->th, NULL);
    pthread_mutex_lock(&mu);
    for (int i = 0; i < nstreams; i++)
        if (streams[i] == s)
            streams[i] = streams[--nstreams];
    pthread_mutex_unlock(&mu);
    free(s);
    return OK;
}

API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *sv)
{
    struct op *o;
    cudaError_t e = OK;
    (void)kind;
    if (!sv) /* libckpt must never use the legacy stream */
        return ERR_INVALID_VALUE;
    o = calloc(1, sizeof *o);
    if (!o)
        return 2;
    o->dst = dst;
    o->src = src;
    o->n = n;
    pthread_mutex_lock(&mu);
    if (!find(dst) || !find(src) || !find((const uint8_t *)dst + n - 1) ||
        !find((const uint8_t *)src + n - 1)) {
        e = ERR_INVALID_VALUE; /* out of any allocation: a bug in the caller */
        free(o);
    } else if (fail_after >= 0 && fail_after-- == 0) {
        e = sticky = ERR_LAUNCH;
        free(o);
    } else {
        copies++;
        if (++inflight > max_inflight)
            max_inflight = inflight;
        push(sv, o);
    }
    pthread_mutex_unlock(&mu);
    return e;
}

API cudaError_t cudaEventCreateWithFlags(void **ev, unsigned flags)
{
    (void)flags;
    *ev = calloc(1, sizeof(struct fevent));
    return *ev ? OK : 2;
}

API cudaError_t cudaEventDestroy(void *ev) { free(ev); return OK; }

API cudaError_t cudaEventRecord(void *evv, void *sv)
{
    struct fevent *ev = evv;
    struct op *o = calloc(1, sizeof *o);
    if (!o || !sv)
        return ERR_INVALID_VALUE;
    o->kind = 1;
    o->ev = ev;
    pthread_mutex_lock(&mu);
    o->ticket = ev->recorded = next_ticket++;
    push(sv, o);
    pthread_mutex_unlock(&mu);
    return OK;
}

API cudaError_t cudaEventSynchronize(void *evv)
{
    struct fevent *ev = evv;
    cudaError_t e;
    pthread_mutex_lock(&mu);
    while (ev->done < ev->recorded)
        pthread_cond_wait(&cv, &mu);
    e = sticky;
    pthread_mutex_unlock(&mu);
    return e;
}

struct attrs {
    int type;
    int device;
    void *devicePointer;
    void *hostPointer;
    long reserved[8];
};

API cudaError_t cudaPointerGetAttributes(struct attrs *a, const void *p)
{
    struct alloc *al;
    memset(a, 0, sizeof *a);
    pthread_mutex_lock(&mu);
    al = find(p);
    a->type = al ? al->type : 0;
    pthread_mutex_unlock(&mu);
    a->devicePointer = (void *)p;
    return OK;
}

/* ---- test hooks ------------------------------------------------------------- */

API void *fake_dev_alloc(size_t n)
{
    struct alloc *a = calloc(1, sizeof *a);
    if (!a || !(a->p = calloc(1, n ? n : 1)))
        return NULL;
    a->n = n ? n : 1;
    a->type = 2;
    pthread_mutex_lock(&mu);
    a->next = allocs;
    allocs = a;
    pthread_mutex_unlock(&mu);
    return a->p;
}

API void fake_dev_free(void *p) { alloc_free(p); }

API void fake_app_write(void *dev, int byte, size_t n)
{
    static struct fstream *app;
    struct op *o = calloc(1, sizeof *o);
    if (!app)
        app = stream_new();
    o->kind = 2;
    o->dst = dev;
    o->byte = byte;
    o->n = n;
    pthread_mutex_lock(&mu);
    push(app, o);
    pthread_mutex_unlock(&mu);
}

API void fake_fail_copy_after(long n)
{
    pthread_mutex_lock(&mu);
    fail_after = n;
    sticky = 0;
    pthread_mutex_unlock(&mu);
}

API void fake_clear_error(void)
{
    pthread_mutex_lock(&mu);
    sticky = 0;
    fail_after = -1;
    pthread_mutex_unlock(&mu);
}

API void fake_stats(long *ncopies, long *maxin)
{
    pthread_mutex_lock(&mu);
    *ncopies = copies;
    *maxin = max_inflight;
    copies = max_inflight = 0;
    pthread_mutex_unlock(&mu);
}
