/*
 * cuda_bench -- libckpt's device snapshot against plain CUDA copies of the
 * same device state, printed as one table. Needs a GPU: without one it
 * prints why and exits 77.
 *
 *   cuda_bench [--mib N] [--pinned-mib P] [--dir DIR] [--reps R]
 *
 * N MiB of device memory (default 1024) holding weight-like floats is
 * protected with ckpt_protect_device() under a pinned pool of P MiB
 * (default 64, libckpt's default). Rows:
 *   plain D2H, pinned P      cudaMemcpy in P-sized pieces into one pinned
 *                            buffer of the pool's size: the bandwidth bar
 *                            (target: ckpt staging >= 0.85x of it)
 *   plain D2H, pinned whole  one cudaMemcpy into N MiB of pinned memory
 *   plain D2H, pageable      one cudaMemcpy into N MiB of malloc'd memory:
 *                            the synchronous copy a trainer would do itself
 *   ckpt_save() stall        what the training loop waits for: device sync,
 *                            device -> pinned -> host staging (persist runs
 *                            in the background afterwards)
 *   ckpt_save()+ckpt_wait()  until the checkpoint is durable (unchanged
 *                            data: chunks already stored are skipped)
 *   plain H2D, pageable      one cudaMemcpy back
 *   ckpt_restore()           read, verify, decode, host -> pinned -> device
 * Times are the best of R repetitions (default 3) after one warm-up.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ckpt.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#define CU(call)                                                                     \
    do {                                                                             \
        cudaError_t e_ = (call);                                                     \
        if (e_ != cudaSuccess) {                                                     \
            fprintf(stderr, "cuda_bench: %s: %s\n", #call, cudaGetErrorString(e_));  \
            goto out;                                                                \
        }                                                                            \
    } while (0)

static void row(const char *what, double secs, size_t bytes, double bar)
{
    double gbs = (double)bytes / 1e9 / secs;
    printf("  %-34s %9.4f %9.2f", what, secs, gbs);
    if (bar > 0)
        printf("   %5.2fx", gbs / bar);
    printf("\n");
}

int main(int argc, char **argv)
{
    size_t mib = 1024, pinned_mib = 64, reps = 3;
    const char *dir = getenv("TMPDIR");
    char tmpl[1024], url[1100], cmd[1200];
    uint8_t *dev = NULL, *pin = NULL, *pin_all = NULL, *page = NULL;
    float *init = NULL;
    struct ckpt_ctx *ctx = NULL;
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct cudaDeviceProp prop;
    double t, best, bar, t_sync_copy = 0, t_stall = 0;
    size_t bytes, piece;
    int ndev = 0, rc = 1, have_dir = 0;
    cudaError_t e;
    ckpt_status st;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--mib"))
            mib = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--pinned-mib"))
            pinned_mib = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--dir"))
            dir = argv[i + 1];
        else if (!strcmp(argv[i], "--reps"))
            reps = strtoull(argv[i + 1], NULL, 10);
        else {
            fprintf(stderr, "usage: cuda_bench [--mib N] [--pinned-mib P] [--dir DIR] "
                            "[--reps R]\n");
            return 64;
        }
    }
    if (!mib || !pinned_mib || !reps) {
        fprintf(stderr, "cuda_bench: sizes and --reps must be positive\n");
        return 64;
    }
    e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        printf("SKIP: cuda_bench needs a CUDA device: %s\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        return 77;
    }
    bytes = mib << 20;
    piece = pinned_mib << 20;
    if (piece > bytes)
        piece = bytes;
    CU(cudaGetDeviceProperties(&prop, 0));
    CU(cudaMalloc((void **)&dev, bytes));
    CU(cudaMallocHost((void **)&pin, piece));
    CU(cudaMallocHost((void **)&pin_all, bytes));
    page = malloc(bytes);
    init = malloc(bytes);
    if (!page || !init) {
        fprintf(stderr, "cuda_bench: out of host memory\n");
        goto out;
    }
    {
        /* weight-like floats: sums of uniforms, small spread */
        uint64_t s = 0x243F6A8885A308D3ull;
        for (size_t i = 0; i < bytes / 4; i++) {
            float acc = 0;
            for (int k = 0; k < 2; k++) {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                acc += (float)(s >> 40) / (float)(1 << 24) - 0.5f;
            }
            init[i] = acc * 0.05f;
        }
    }
    memset(page, 0, bytes); /* touched: no page faults inside the timings */
    CU(cudaMemcpy(dev, init, bytes, cudaMemcpyHostToDevice));
    CU(cudaDeviceSynchronize());

    snprintf(tmpl, sizeof tmpl, "%s/ckpt-cuda-bench-XXXXXX", dir && *dir ? dir : "/tmp");
    if (!mkdtemp(tmpl)) {
        perror("cuda_bench: mkdtemp");
        goto out;
    }
    have_dir = 1;
    snprintf(url, sizeof url, "file://%s/store", tmpl);
    cfg.store = url;
    cfg.run = "cuda-bench";
    cfg.codec = CKPT_CODEC_LZ4;
    cfg.pinned_max_bytes = pinned_mib << 20;
    cfg.no_control = 1;
    st = ckpt_open(&cfg, &ctx);
    if (st) {
        fprintf(stderr, "cuda_bench: ckpt_open: %s\n", ckpt_errmsg(NULL));
        goto out;
    }
    st = ckpt_protect_device(ctx, "state", dev, bytes);
    if (st) {
        fprintf(stderr, "cuda_bench: ckpt_protect_device: %s: %s\n", ckpt_strerror(st),
                ckpt_errmsg(ctx));
        goto out;
    }

    printf("cuda_bench: %s, %zu MiB of device state, pinned pool %zu MiB, best of %zu\n",
           prop.name, mib, pinned_mib, reps);
    printf("  %-34s %9s %9s   %s\n", "path", "seconds", "GB/s", "vs bar");

    /* the bar: plain cudaMemcpy through one pinned buffer of the pool's size */
    best = 1e30;
    for (size_t r = 0; r <= reps; r++) {
        t = now();
        for (size_t off = 0; off < bytes; off += piece)
            CU(cudaMemcpy(pin, dev + off, bytes - off < piece ? bytes - off : piece,
                          cudaMemcpyDeviceToHost));
        t = now() - t;
        if (r && t < best) /* r == 0 is the warm-up */
            best = t;
    }
    bar = (double)bytes / 1e9 / best;
    row("plain D2H, pinned pool-sized", best, bytes, bar);

    best = 1e30;
    for (size_t r = 0; r <= reps; r++) {
        t = now();
        CU(cudaMemcpy(pin_all, dev, bytes, cudaMemcpyDeviceToHost));
        t = now() - t;
        if (r && t < best)
            best = t;
    }
    row("plain D2H, pinned whole", best, bytes, bar);

    best = 1e30;
    for (size_t r = 0; r <= reps; r++) {
        t = now();
        CU(cudaMemcpy(page, dev, bytes, cudaMemcpyDeviceToHost));
        t = now() - t;
        if (r && t < best)
            best = t;
    }
    t_sync_copy = best;
    row("plain D2H, pageable (sync copy)", best, bytes, bar);

    best = 1e30;
    for (size_t r = 0; r <= reps; r++) {
        st = ckpt_wait(ctx);
        if (st) {
            fprintf(stderr, "cuda_bench: ckpt_wait: %s: %s\n", ckpt_strerror(st),
                    ckpt_errmsg(ctx));
            goto out;
        }
        t = now();
        st = ckpt_save(ctx, r + 1);
        t = now() - t;
        if (st) {
            fprintf(stderr, "cuda_bench: ckpt_save: %s: %s\n", ckpt_strerror(st),
                    ckpt_errmsg(ctx));
            goto out;
        }
        if (r && t < best)
            best = t;
    }
    t_stall = best;
    row("ckpt_save() stall (staging)", best, bytes, bar);

    t = now();
    st = ckpt_save(ctx, reps + 2);
    if (st == CKPT_OK)
        st = ckpt_wait(ctx);
    t = now() - t;
    if (st) {
        fprintf(stderr, "cuda_bench: save: %s: %s\n", ckpt_strerror(st), ckpt_errmsg(ctx));
        goto out;
    }
    row("ckpt_save()+ckpt_wait() (durable)", t, bytes, 0);

    best = 1e30;
    for (size_t r = 0; r <= reps; r++) {
        t = now();
        CU(cudaMemcpy(dev, page, bytes, cudaMemcpyHostToDevice));
        t = now() - t;
        if (r && t < best)
            best = t;
    }
    row("plain H2D, pageable", best, bytes, 0);

    CU(cudaMemset(dev, 0, bytes));
    t = now();
    st = ckpt_restore(ctx, NULL);
    t = now() - t;
    if (st) {
        fprintf(stderr, "cuda_bench: ckpt_restore: %s: %s\n", ckpt_strerror(st),
                ckpt_errmsg(ctx));
        goto out;
    }
    row("ckpt_restore() (verified)", t, bytes, 0);
    CU(cudaMemcpy(page, dev, bytes, cudaMemcpyDeviceToHost));
    if (memcmp(page, init, bytes) != 0) {
        fprintf(stderr, "cuda_bench: restored device state differs\n");
        goto out;
    }
    printf("  staging bandwidth %.2fx the bar (target >= 0.85): %s\n",
           ((double)bytes / 1e9 / t_stall) / bar,
           ((double)bytes / 1e9 / t_stall) / bar >= 0.85 ? "met" : "NOT met");
    printf("  training-loop stall: ckpt_save() %.1f ms vs synchronous pageable copy %.1f ms "
           "(%.2fx)\n", t_stall * 1e3, t_sync_copy * 1e3, t_stall / t_sync_copy);
    rc = 0;
out:
    ckpt_close(ctx);
    cudaFree(dev);
    cudaFreeHost(pin);
    cudaFreeHost(pin_all);
    free(page);
    free(init);
    if (have_dir) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
        if (system(cmd) != 0)
            fprintf(stderr, "cuda_bench: cleanup of %s failed\n", tmpl);
    }
    return rc;
}
