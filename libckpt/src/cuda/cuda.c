/* cuda.c -- device regions (docs/cuda.md).
 *
 * The CUDA runtime is loaded with dlopen() at first use, never linked: the
 * library must load and its host paths must work on machines without a
 * driver or toolkit. Only the toolkit's headers are used at build time, for
 * the types and to check our function pointers against the real prototypes.
 * The runtime is searched as CKPT_CUDA_RUNTIME (a path or soname, the only
 * one tried when set), else libcudart.so.13, .12, then libcudart.so. Once
 * loaded it is never unloaded: unloading the CUDA runtime under a process
 * that may use it is unsafe.
 *
 * Snapshot: ckpt_save() synchronizes the device once (so it orders after
 * every application stream, including the legacy default stream), then
 * copies device -> pinned on a dedicated non-blocking stream, several pieces
 * in flight, while the training thread copies finished pinned pieces into the
 * host staging blocks the workers compress. Pinned memory is a fixed pool of
 * `pinned_max` bytes (slots of min(chunk, pinned_max/2) bytes, at least two,
 * so one slot is being filled by DMA while another is drained by memcpy).
 *
 * The pinned -> staging memcpy of large pieces is split over helper threads
 * (CKPT_CUDA_COPY_THREADS, default min(4, CPUs) including the caller).
 *
 * Restore: each worker copies its decoded chunk into pinned slots and issues
 * host -> device copies on the same stream, keeping up to two of its slots in
 * flight, and waits for them before it reports the chunk done.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "cuda/cuda.h"

#if defined(CKPT_HAVE_CUDA)

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <unistd.h>

#define PIECE_MIN (64u << 10) /* smallest pinned slot */
#define PCOPY_MIN (1u << 20)  /* pieces below this are copied by one thread */
#define PCOPY_MAX_THREADS 16

/* The runtime functions we use. __typeof__ ties each pointer to the
 * toolkit's prototype, so a signature mismatch fails the build. */
#define CUDA_FNS(X)                                                                   \
    X(cudaGetDeviceCount) X(cudaGetDevice) X(cudaSetDevice) X(cudaDeviceSynchronize) \
    X(cudaMallocHost) X(cudaFreeHost) X(cudaStreamCreateWithFlags)                   \
    X(cudaStreamDestroy) X(cudaStreamSynchronize) X(cudaMemcpyAsync)                 \
    X(cudaEventCreateWithFlags) X(cudaEventRecord) X(cudaEventSynchronize)           \
    X(cudaEventDestroy) X(cudaPointerGetAttributes) X(cudaGetErrorString)            \
    X(cudaRuntimeGetVersion)

static struct {
#define X(f) __typeof__(f) *f;
    CUDA_FNS(X)
#undef X
} rt;

static pthread_once_t rt_once = PTHREAD_ONCE_INIT;
static int rt_ok;                    /* runtime loaded and a device present */
static char rt_why[CKPT_ERR_MAX];    /* why not, or what was loaded */

struct slot {
    uint8_t *buf;                    /* pinned, slot_bytes */
    cudaEvent_t ev;                  /* recorded after the slot's copy */
    int busy;                        /* restore: taken by a worker (under mu) */
    const struct ckpt_item *it;      /* snapshot: the piece it holds */
    uint64_t off;
    size_t len;
};

/* Helpers for the pinned -> staging memcpy. One core's memcpy is slower than
 * a PCIe 5 DMA engine, so the training thread splits each large piece with a
 * few helper threads; otherwise that copy, not the transfer, would set the
 * save's stall. */
struct copier {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    pthread_t th[PCOPY_MAX_THREADS];
    unsigned n;                      /* helper threads started */
    int stop;
    uint64_t gen;                    /* bumped for each job */
    unsigned pending;                /* helpers still copying the job */
    uint8_t *dst;
    const uint8_t *src;
    size_t part, total;
};

struct ckpt_cuda {
    int device;                      /* every region of the context lives here */
    cudaStream_t stream;             /* ours, non-blocking */
    size_t slot_bytes;
    unsigned nslots, max_slots;
    struct slot *slots;
    uint64_t dev_bytes;              /* protected device bytes (sizes the pool) */

    pthread_mutex_t mu;              /* slot hand-out to restore workers */
    pthread_cond_t cv;

    /* Snapshot cursor and ring: training thread only. Save and restore never
     * overlap (a context is used by one application thread at a time). */
    int active;
    const struct ckpt_item *cit;     /* next piece to enqueue */
    uint64_t coff;
    unsigned rhead, rcount;

    struct copier cp;
};

static const char *cuerr(cudaError_t e)
{
    const char *s = rt.cudaGetErrorString ? rt.cudaGetErrorString(e) : NULL;
    return s ? s : "unknown CUDA error";
}

static void rt_load(void)
{
    static const char *const names[] = { "libcudart.so.13", "libcudart.so.12", "libcudart.so" };
    const char *env = getenv("CKPT_CUDA_RUNTIME");
    const char *name = NULL, *missing = NULL;
    void *h = NULL;
    int n = 0, ver = 0;
    cudaError_t e;

    if (env && *env) {
        name = env;
        h = dlopen(env, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            snprintf(rt_why, sizeof rt_why,
                     "cannot load the CUDA runtime named by CKPT_CUDA_RUNTIME (%s): %s", env,
                     dlerror());
            goto out;
        }
    } else {
        for (size_t i = 0; i < sizeof names / sizeof *names && !h; i++) {
            name = names[i];
            h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
        }
        if (!h) {
            snprintf(rt_why, sizeof rt_why,
                     "cannot load the CUDA runtime (tried libcudart.so.13, libcudart.so.12, "
                     "libcudart.so; set CKPT_CUDA_RUNTIME to its path): %s", dlerror());
            goto out;
        }
    }
    /* memcpy: ISO C has no conversion from void * to a function pointer */
#define X(f)                                                                          \
    if (!missing) {                                                                   \
        void *p = dlsym(h, #f);                                                       \
        if (p)                                                                        \
            memcpy(&rt.f, &p, sizeof p);                                              \
        else                                                                          \
            missing = #f;                                                             \
    }
    CUDA_FNS(X)
#undef X
    if (missing) {
        snprintf(rt_why, sizeof rt_why, "the CUDA runtime %s lacks %s", name, missing);
        memset(&rt, 0, sizeof rt);
        goto out;
    }
    rt.cudaRuntimeGetVersion(&ver);
    e = rt.cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
        snprintf(rt_why, sizeof rt_why, "CUDA runtime %s (%d.%d) loaded, but no usable device: %s",
                 name, ver / 1000, ver % 1000 / 10,
                 e != cudaSuccess ? cuerr(e) : "the driver reports no device");
        goto out;
    }
    snprintf(rt_why, sizeof rt_why, "CUDA runtime %s (%d.%d), %d device(s)", name, ver / 1000,
             ver % 1000 / 10, n);
    rt_ok = 1;
out:
    /* The handle is kept even on failure paths that loaded it: the runtime
     * may have started threads, and unloading it is never safe. */
    return;
}

int ckpt__cuda_available(char *err)
{
    pthread_once(&rt_once, rt_load);
    if (!rt_ok)
        ckpt__seterr(err, "%s", rt_why);
    return rt_ok;
}

/* Make cu->device current on this thread; *prev receives the previous one so
 * the application's choice is put back on its own threads. */
static ckpt_status dev_enter(const struct ckpt_cuda *cu, int *prev, char *err)
{
    cudaError_t e = rt.cudaGetDevice(prev);
    if (e == cudaSuccess && *prev != cu->device)
        e = rt.cudaSetDevice(cu->device);
    if (e != cudaSuccess) {
        ckpt__seterr(err, "select device %d: %s", cu->device, cuerr(e));
        *prev = cu->device;
        return CKPT_E_CUDA;
    }
    return CKPT_OK;
}

static void dev_leave(const struct ckpt_cuda *cu, int prev)
{
    if (prev != cu->device)
        rt.cudaSetDevice(prev);
}

struct helper_arg {
    struct copier *cp;
    unsigned idx;                    /* part index, 1.. (0 is the caller's) */
};

static void *copier_main(void *arg)
{
    struct helper_arg *ha = arg;
    struct copier *cp = ha->cp;
    const unsigned idx = ha->idx;
    uint64_t seen = 0;
    free(ha);
    pthread_mutex_lock(&cp->mu);
    for (;;) {
        size_t off, n;
        uint8_t *dst;
        const uint8_t *src;
        while (!cp->stop && cp->gen == seen)
            pthread_cond_wait(&cp->go, &cp->mu);
        if (cp->stop)
            break;
        seen = cp->gen;
        off = idx * cp->part;
        n = off < cp->total ? (cp->total - off < cp->part ? cp->total - off : cp->part) : 0;
        dst = cp->dst + off;
        src = cp->src + off;
        pthread_mutex_unlock(&cp->mu);
        if (n)
            memcpy(dst, src, n);
        pthread_mutex_lock(&cp->mu);
        if (--cp->pending == 0)
            pthread_cond_signal(&cp->done);
    }
    pthread_mutex_unlock(&cp->mu);
    return NULL;
}

/* Threads copying pinned -> staging: CKPT_CUDA_COPY_THREADS (1 = the
 * training thread alone), default min(4, online CPUs). Helpers that cannot
 * be started are simply fewer helpers. */
static void copier_start(struct copier *cp)
{
    const char *s = getenv("CKPT_CUDA_COPY_THREADS");
    long want = s && *s ? strtol(s, NULL, 10) : 4, ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (!(s && *s) && ncpu > 0 && ncpu < want)
        want = ncpu;
    if (want < 1)
        want = 1;
    if (want > PCOPY_MAX_THREADS + 1)
        want = PCOPY_MAX_THREADS + 1;
    pthread_mutex_init(&cp->mu, NULL);
    pthread_cond_init(&cp->go, NULL);
    pthread_cond_init(&cp->done, NULL);
    for (long i = 1; i < want; i++) {
        struct helper_arg *ha = malloc(sizeof *ha);
        if (!ha)
            break;
        ha->cp = cp;
        ha->idx = (unsigned)i;
        if (ckpt__thread_start(&cp->th[cp->n], copier_main, ha) != 0) {
            free(ha);
            break;
        }
        cp->n++;
    }
}

static void copier_stop(struct copier *cp)
{
    pthread_mutex_lock(&cp->mu);
    cp->stop = 1;
    pthread_cond_broadcast(&cp->go);
    pthread_mutex_unlock(&cp->mu);
    for (unsigned i = 0; i < cp->n; i++)
        pthread_join(cp->th[i], NULL);
    pthread_mutex_destroy(&cp->mu);
    pthread_cond_destroy(&cp->go);
    pthread_cond_destroy(&cp->done);
}

/* memcpy, split over the helpers when large; returns when all is copied. */
static void pcopy(struct copier *cp, void *dst, const void *src, size_t n)
{
    size_t part;
    if (!cp->n || n < PCOPY_MIN) {
        memcpy(dst, src, n);
        return;
    }
    part = (n / (cp->n + 1) + 4095) & ~(size_t)4095; /* page-aligned parts */
    pthread_mutex_lock(&cp->mu);
    cp->dst = dst;
    cp->src = src;
    cp->part = part;
    cp->total = n;
    cp->pending = cp->n;
    cp->gen++;
    pthread_cond_broadcast(&cp->go);
    pthread_mutex_unlock(&cp->mu);
    memcpy(dst, src, part < n ? part : n);
    pthread_mutex_lock(&cp->mu);
    while (cp->pending)
        pthread_cond_wait(&cp->done, &cp->mu);
    pthread_mutex_unlock(&cp->mu);
}

/* Grow the pinned pool to `want` slots (within max_slots). */
static ckpt_status slots_grow(struct ckpt_cuda *cu, unsigned want, char *err)
{
    ckpt_status st = CKPT_OK;
    struct slot *ns;
    if (want > cu->max_slots)
        want = cu->max_slots;
    if (want <= cu->nslots)
        goto out;
    ns = realloc(cu->slots, want * sizeof *ns);
    if (!ns) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    cu->slots = ns;
    for (unsigned i = cu->nslots; i < want; i++) {
        struct slot *s = &cu->slots[i];
        cudaError_t e;
        memset(s, 0, sizeof *s);
        e = rt.cudaMallocHost((void **)&s->buf, cu->slot_bytes);
        if (e == cudaSuccess) {
            e = rt.cudaEventCreateWithFlags(&s->ev, cudaEventDisableTiming);
            if (e != cudaSuccess)
                rt.cudaFreeHost(s->buf);
        }
        if (e != cudaSuccess) {
            ckpt__seterr(err, "pinned staging (%zu bytes): %s", cu->slot_bytes, cuerr(e));
            st = CKPT_E_CUDA;
            goto out;
        }
        cu->nslots++;
    }
out:
    return st;
}

ckpt_status ckpt__cuda_protect(struct ckpt_ctx *ctx, void *dev, size_t size, char *err)
{
    struct cudaPointerAttributes pa;
    struct ckpt_cuda *cu = ctx->cuda;
    ckpt_status st = CKPT_OK;
    cudaError_t e;
    int prev = -1, entered = 0, fresh = 0;
    uint64_t pieces;

    if (!size)
        goto out; /* nothing will ever be copied */
    memset(&pa, 0, sizeof pa);
    e = rt.cudaPointerGetAttributes(&pa, dev);
    if (e != cudaSuccess) {
        ckpt__seterr(err, "pointer %p: %s", dev, cuerr(e));
        st = CKPT_E_CUDA;
        goto out;
    }
    if (pa.type != cudaMemoryTypeDevice && pa.type != cudaMemoryTypeManaged) {
        ckpt__seterr(err, "pointer %p is not CUDA device or managed memory (use ckpt_protect "
                          "for host memory)", dev);
        st = CKPT_E_INVAL;
        goto out;
    }
    if (!cu) {
        cu = calloc(1, sizeof *cu);
        if (!cu) {
            st = CKPT_E_NOMEM;
            goto out;
        }
        cu->device = pa.device;
        /* Slots no larger than a chunk (a piece never spans two chunks) and
         * at least two of them within the cap, for double buffering. */
        cu->slot_bytes = ctx->pinned_max / 2;
        if (cu->slot_bytes > ctx->chunk_bytes)
            cu->slot_bytes = ctx->chunk_bytes;
        if (cu->slot_bytes < PIECE_MIN)
            cu->slot_bytes = PIECE_MIN < ctx->chunk_bytes ? PIECE_MIN : ctx->chunk_bytes;
        cu->max_slots = (unsigned)(ctx->pinned_max / cu->slot_bytes);
        if (cu->max_slots < 2)
            cu->max_slots = 2;
        pthread_mutex_init(&cu->mu, NULL);
        pthread_cond_init(&cu->cv, NULL);
        copier_start(&cu->cp);
        ctx->cuda = cu;
        fresh = 1;
        st = dev_enter(cu, &prev, err);
        if (st)
            goto out;
        entered = 1;
        e = rt.cudaStreamCreateWithFlags(&cu->stream, cudaStreamNonBlocking);
        if (e != cudaSuccess) {
            ckpt__seterr(err, "create stream on device %d: %s", cu->device, cuerr(e));
            cu->stream = NULL;
            st = CKPT_E_CUDA;
            goto out;
        }
        ckpt__log(&ctx->log, CKPT_LOG_DEBUG, "cuda", "%s; device %d; pinned slots of %zu bytes, "
                  "at most %u; %u copy threads", rt_why, cu->device, cu->slot_bytes,
                  cu->max_slots, cu->cp.n + 1);
    } else if (pa.device != cu->device) {
        ckpt__seterr(err, "pointer %p is on device %d but this context's device regions are on "
                          "device %d: use one context per device", dev, pa.device, cu->device);
        st = CKPT_E_UNSUPPORTED;
        goto out;
    }
    if (!entered) {
        st = dev_enter(cu, &prev, err);
        if (st)
            goto out;
        entered = 1;
    }
    /* Reserve the pinned pool now (cudaMallocHost is slow), so the first
     * save does not pay for it: enough slots for every piece, within the cap. */
    cu->dev_bytes += size;
    pieces = (cu->dev_bytes + cu->slot_bytes - 1) / cu->slot_bytes + 1;
    st = slots_grow(cu, pieces > cu->max_slots ? cu->max_slots : (unsigned)pieces, err);
    if (st == CKPT_OK && cu->nslots < 2)
        st = slots_grow(cu, 2, err);
out:
    if (entered)
        dev_leave(cu, prev);
    if (st && fresh)
        ckpt__cuda_release(ctx); /* no half-made state: the next protect retries */
    return st;
}

void ckpt__cuda_release(struct ckpt_ctx *ctx)
{
    struct ckpt_cuda *cu = ctx->cuda;
    int prev = -1;
    char err[CKPT_ERR_MAX];
    if (!cu)
        return;
    /* Errors are ignored: at process exit the runtime may already be torn
     * down, and the memory goes with the process anyway. */
    if (dev_enter(cu, &prev, err) == CKPT_OK) {
        if (cu->stream)
            rt.cudaStreamSynchronize(cu->stream);
        for (unsigned i = 0; i < cu->nslots; i++) {
            rt.cudaEventDestroy(cu->slots[i].ev);
            rt.cudaFreeHost(cu->slots[i].buf);
        }
        if (cu->stream)
            rt.cudaStreamDestroy(cu->stream);
        dev_leave(cu, prev);
    }
    copier_stop(&cu->cp);
    free(cu->slots);
    pthread_mutex_destroy(&cu->mu);
    pthread_cond_destroy(&cu->cv);
    free(cu);
    ctx->cuda = NULL;
}

/* ---- snapshot (training thread) -------------------------------------------- */

static const struct ckpt_item *next_dev_item(const struct ckpt_item *it)
{
    while (it && (it->kind != CKPT_ITEM_DEVICE || it->size == 0))
        it = it->next;
    return it;
}

/* Queue device -> pinned copies into free ring slots, in the order the
 * pipeline asks for chunks: items in list order, chunks in offset order. */
static ckpt_status ring_fill(struct ckpt_ctx *ctx, struct ckpt_cuda *cu, char *err)
{
    ckpt_status st = CKPT_OK;
    while (cu->cit && cu->rcount < cu->nslots) {
        struct slot *s = &cu->slots[(cu->rhead + cu->rcount) % cu->nslots];
        uint64_t chunk_end = (cu->coff / ctx->chunk_bytes + 1) * ctx->chunk_bytes;
        uint64_t end = chunk_end < cu->cit->size ? chunk_end : cu->cit->size;
        size_t len = (size_t)(end - cu->coff < cu->slot_bytes ? end - cu->coff : cu->slot_bytes);
        cudaError_t e = rt.cudaMemcpyAsync(s->buf, (const uint8_t *)cu->cit->ptr + cu->coff, len,
                                           cudaMemcpyDeviceToHost, cu->stream);
        if (e == cudaSuccess)
            e = rt.cudaEventRecord(s->ev, cu->stream);
        if (e != cudaSuccess) {
            ckpt__seterr(err, "copy device -> pinned at offset %" PRIu64 ": %s", cu->coff,
                         cuerr(e));
            st = CKPT_E_CUDA;
            goto out;
        }
        s->it = cu->cit;
        s->off = cu->coff;
        s->len = len;
        cu->rcount++;
        cu->coff += len;
        if (cu->coff >= cu->cit->size) {
            cu->cit = next_dev_item(cu->cit->next);
            cu->coff = 0;
        }
    }
out:
    return st;
}

ckpt_status ckpt__cuda_snapshot_chunk(struct ckpt_ctx *ctx, const struct ckpt_item *it,
                                      uint64_t off, size_t len, void *dst, char *err)
{
    struct ckpt_cuda *cu = ctx->cuda;
    ckpt_status st = CKPT_OK;
    size_t filled = 0;
    int prev = -1, entered = 0;
    cudaError_t e;

    if (!cu) {
        ckpt__seterr(err, "device region without CUDA state");
        st = CKPT_E_INTERNAL;
        goto out;
    }
    st = dev_enter(cu, &prev, err);
    if (st)
        goto out;
    entered = 1;
    if (!cu->active) {
        /* Once per save: everything submitted to the device so far, on any
         * stream, completes before we read. Our stream is non-blocking, so
         * without this it would not even wait for the legacy stream. */
        e = rt.cudaDeviceSynchronize();
        if (e != cudaSuccess) {
            ckpt__seterr(err, "device %d synchronize (an earlier kernel or copy failed?): %s",
                         cu->device, cuerr(e));
            st = CKPT_E_CUDA;
            goto out;
        }
        cu->active = 1;
        cu->rhead = cu->rcount = 0;
        cu->cit = next_dev_item(ctx->items);
        cu->coff = 0;
        st = ring_fill(ctx, cu, err);
        if (st)
            goto out;
    }
    while (filled < len) {
        struct slot *s = &cu->slots[cu->rhead];
        if (!cu->rcount || s->it != it || s->off != off + filled || s->len > len - filled) {
            ckpt__seterr(err, "snapshot out of order at offset %" PRIu64, off + filled);
            st = CKPT_E_INTERNAL;
            goto out;
        }
        e = rt.cudaEventSynchronize(s->ev);
        if (e != cudaSuccess) {
            ckpt__seterr(err, "copy device -> pinned at offset %" PRIu64 ": %s", s->off,
                         cuerr(e));
            st = CKPT_E_CUDA;
            goto out;
        }
        pcopy(&cu->cp, (uint8_t *)dst + filled, s->buf, s->len);
        filled += s->len;
        cu->rhead = (cu->rhead + 1) % cu->nslots;
        cu->rcount--;
        st = ring_fill(ctx, cu, err); /* the slot just drained goes back to DMA */
        if (st)
            goto out;
    }
out:
    if (entered)
        dev_leave(cu, prev);
    return st;
}

void ckpt__cuda_snapshot_end(struct ckpt_ctx *ctx)
{
    struct ckpt_cuda *cu = ctx->cuda;
    int prev = -1;
    char err[CKPT_ERR_MAX];
    if (!cu || !cu->active)
        return;
    /* Only a failed save leaves copies queued; they target our pinned slots,
     * which must be idle before the next save or restore reuses them. */
    if (cu->rcount && dev_enter(cu, &prev, err) == CKPT_OK) {
        rt.cudaStreamSynchronize(cu->stream);
        dev_leave(cu, prev);
    }
    cu->active = 0;
    cu->rhead = cu->rcount = 0;
    cu->cit = NULL;
    cu->coff = 0;
}

/* ---- restore (worker threads) -------------------------------------------------- */

/* Take a free slot; blocks only when `block` (the caller holds none, so
 * waiting cannot deadlock workers that each hold one). */
static struct slot *slot_take(struct ckpt_cuda *cu, int block)
{
    struct slot *s = NULL;
    pthread_mutex_lock(&cu->mu);
    for (;;) {
        for (unsigned i = 0; i < cu->nslots && !s; i++)
            if (!cu->slots[i].busy)
                s = &cu->slots[i];
        if (s || !block)
            break;
        pthread_cond_wait(&cu->cv, &cu->mu);
    }
    if (s)
        s->busy = 1;
    pthread_mutex_unlock(&cu->mu);
    return s;
}

static void slot_give(struct ckpt_cuda *cu, struct slot *s)
{
    pthread_mutex_lock(&cu->mu);
    s->busy = 0;
    pthread_cond_signal(&cu->cv);
    pthread_mutex_unlock(&cu->mu);
}

ckpt_status ckpt__cuda_h2d(struct ckpt_ctx *ctx, void *dev, const void *host, size_t len,
                           char *err)
{
    struct ckpt_cuda *cu = ctx->cuda;
    struct slot *held[2] = { NULL, NULL };
    unsigned nheld = 0;
    ckpt_status st = CKPT_OK;
    size_t done = 0;
    int prev = -1, entered = 0;
    cudaError_t e;

    if (!cu) {
        ckpt__seterr(err, "device region without CUDA state");
        st = CKPT_E_INTERNAL;
        goto out;
    }
    st = dev_enter(cu, &prev, err);
    if (st)
        goto out;
    entered = 1;
    while (done < len) {
        size_t n = len - done < cu->slot_bytes ? len - done : cu->slot_bytes;
        struct slot *s = nheld < 2 ? slot_take(cu, nheld == 0) : NULL;
        if (!s) {
            /* Two in flight, or none free: reuse our oldest once it is done. */
            s = held[0];
            held[0] = held[1];
            nheld--;
            e = rt.cudaEventSynchronize(s->ev);
            if (e != cudaSuccess) {
                slot_give(cu, s);
                ckpt__seterr(err, "copy pinned -> device: %s", cuerr(e));
                st = CKPT_E_CUDA;
                goto out;
            }
        }
        memcpy(s->buf, (const uint8_t *)host + done, n);
        e = rt.cudaMemcpyAsync((uint8_t *)dev + done, s->buf, n, cudaMemcpyHostToDevice,
                               cu->stream);
        if (e == cudaSuccess)
            e = rt.cudaEventRecord(s->ev, cu->stream);
        held[nheld++] = s;
        if (e != cudaSuccess) {
            ckpt__seterr(err, "copy pinned -> device at offset %zu: %s", done, cuerr(e));
            st = CKPT_E_CUDA;
            goto out;
        }
        done += n;
    }
out:
    /* The chunk is on the device (or failed) before we return: a restore
     * completes before ckpt_restore() does, so later application work on
     * any stream sees it. Slots go back only once their copy is finished. */
    for (unsigned i = 0; i < nheld; i++) {
        e = rt.cudaEventSynchronize(held[i]->ev);
        if (e != cudaSuccess && st == CKPT_OK) {
            ckpt__seterr(err, "copy pinned -> device: %s", cuerr(e));
            st = CKPT_E_CUDA;
        }
        slot_give(cu, held[i]);
    }
    if (entered)
        dev_leave(cu, prev);
    return st;
}

#else /* !CKPT_HAVE_CUDA */

/* Built without CUDA: every device call says so; host paths are unaffected. */
#define NO_CUDA "this build of libckpt has no CUDA support (built without the CUDA " \
                "toolkit or with CKPT_WITH_CUDA=OFF)"

int ckpt__cuda_available(char *err)
{
    ckpt__seterr(err, NO_CUDA);
    return 0;
}

ckpt_status ckpt__cuda_protect(struct ckpt_ctx *ctx, void *dev, size_t size, char *err)
{
    (void)ctx; (void)dev; (void)size;
    ckpt__seterr(err, NO_CUDA);
    return CKPT_E_UNSUPPORTED;
}

void ckpt__cuda_release(struct ckpt_ctx *ctx)
{
    (void)ctx;
}

ckpt_status ckpt__cuda_snapshot_chunk(struct ckpt_ctx *ctx, const struct ckpt_item *it,
                                      uint64_t off, size_t len, void *dst, char *err)
{
    (void)ctx; (void)it; (void)off; (void)len; (void)dst;
    ckpt__seterr(err, NO_CUDA);
    return CKPT_E_UNSUPPORTED;
}

void ckpt__cuda_snapshot_end(struct ckpt_ctx *ctx)
{
    (void)ctx;
}

ckpt_status ckpt__cuda_h2d(struct ckpt_ctx *ctx, void *dev, const void *host, size_t len,
                           char *err)
{
    (void)ctx; (void)dev; (void)host; (void)len;
    ckpt__seterr(err, NO_CUDA);
    return CKPT_E_UNSUPPORTED;
}

#endif
