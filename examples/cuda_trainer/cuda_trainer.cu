/*
 * cuda_trainer -- c_trainer on the GPU: a small deterministic MLP whose
 * weights and Adam moments live in device memory, checkpointed with libckpt.
 *
 * A two-layer MLP (tanh hidden layer, softmax output) learns a synthetic
 * teacher with Adam. Parameters and Adam moments are device regions
 * (ckpt_protect_device); the RNG that draws the batches and the step counter
 * are host regions (ckpt_protect). Every kernel reduces in a fixed order with
 * one thread per output and no atomics, and launch shapes depend only on the
 * model's size, so a run is bit-reproducible on a given GPU and binary: a
 * run killed at any moment and restarted until done ends with parameters
 * byte-identical to an uninterrupted run's.
 *
 *   cuda_trainer --steps N --every K --out FILE [--store URL] [--run NAME]
 *                [--hidden H] [--input D] [--batch B] [--sleep-ms MS] [--quiet]
 *   cuda_trainer --check-device     exit 0 if a CUDA device is usable, else 77
 *
 * Store and run come from --store/--run or CKPT_STORE/CKPT_RUN. Kernels run
 * on the trainer's own non-blocking stream and ckpt_save() is called without
 * synchronizing it first: libckpt's snapshot orders after all submitted work.
 * The model's layout and seed, the options and the --out file are
 * ../common.h's, shared with c_trainer and mpi_trainer.
 *
 * Exit status as c_trainer's: 0 trained, its last save (if any) committed;
 * 74 trained and wrote --out, but its last save did not commit (never
 * success when the final checkpoint is not in the store); 64 usage; 69/78
 * the store could not be opened; 77 no usable device; 1 anything else.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "../common.h" /* the model's layout and seed, the options, --out, the exit status */

#define TPB 256

#define CU(call)                                                                        \
    do {                                                                                \
        cudaError_t e_ = (call);                                                        \
        if (e_ != cudaSuccess) {                                                        \
            fprintf(stderr, "cuda_trainer: %s: %s\n", #call, cudaGetErrorString(e_));  \
            goto out;                                                                   \
        }                                                                               \
    } while (0)

struct meta {
    uint64_t step;      /* steps completed */
    uint64_t magic;
    uint32_t input, hidden, batch, pad;
};

/* ---- kernels: one thread per output, sequential sums, no atomics -------- */

__global__ void k_hidden(const float *x, const float *w1, const float *b1, float *hid, int d,
                         int h, int b)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= b * h)
        return;
    int s = idx / h, j = idx % h;
    float acc = b1[j];
    for (int i = 0; i < d; i++)
        acc += x[s * d + i] * w1[(size_t)i * h + j];
    hid[idx] = tanhf(acc);
}

/* Per sample: the teacher's label, the softmax, the loss and dlogits. */
__global__ void k_output(const float *x, const float *teacher, const float *hid,
                         const float *w2, const float *b2, float *dlog, float *loss, int d,
                         int h, int b)
{
    int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= b)
        return;
    float tl[NOUT], p[NOUT], mx = -1e30f, sum = 0;
    int label = 0;
    for (int o = 0; o < NOUT; o++) {
        float t = 0;
        for (int i = 0; i < d; i++)
            t += x[s * d + i] * teacher[i * NOUT + o];
        tl[o] = t;
        if (tl[o] > tl[label])
            label = o;
    }
    for (int o = 0; o < NOUT; o++) {
        float l = b2[o];
        for (int j = 0; j < h; j++)
            l += hid[s * h + j] * w2[j * NOUT + o];
        p[o] = l;
        mx = l > mx ? l : mx;
    }
    for (int o = 0; o < NOUT; o++) {
        p[o] = expf(p[o] - mx);
        sum += p[o];
    }
    for (int o = 0; o < NOUT; o++)
        p[o] /= sum;
    loss[s] = -logf(p[label] + 1e-12f);
    p[label] -= 1.0f;
    for (int o = 0; o < NOUT; o++)
        dlog[s * NOUT + o] = p[o];
}

/* gw2[j][o] = sum_s hid[s][j] dlog[s][o]; gb2[o] = sum_s dlog[s][o]. */
__global__ void k_grad_out(const float *hid, const float *dlog, float *gw2, float *gb2, int h,
                           int b)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < h * NOUT) {
        int j = idx / NOUT, o = idx % NOUT;
        float acc = 0;
        for (int s = 0; s < b; s++)
            acc += hid[s * h + j] * dlog[s * NOUT + o];
        gw2[idx] = acc;
    } else if (idx < h * NOUT + NOUT) {
        int o = idx - h * NOUT;
        float acc = 0;
        for (int s = 0; s < b; s++)
            acc += dlog[s * NOUT + o];
        gb2[o] = acc;
    }
}

/* gh[s][j] = (sum_o w2[j][o] dlog[s][o]) (1 - hid[s][j]^2). */
__global__ void k_grad_hidden(const float *hid, const float *w2, const float *dlog, float *gh,
                              int h, int b)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= b * h)
        return;
    int s = idx / h, j = idx % h;
    float g = 0;
    for (int o = 0; o < NOUT; o++)
        g += w2[j * NOUT + o] * dlog[s * NOUT + o];
    gh[idx] = g * (1 - hid[idx] * hid[idx]);
}

/* gw1[i][j] = sum_s x[s][i] gh[s][j]; gb1[j] = sum_s gh[s][j]. */
__global__ void k_grad_in(const float *x, const float *gh, float *gw1, float *gb1, int d, int h,
                          int b)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < (size_t)d * h) {
        int i = (int)(idx / h), j = (int)(idx % h);
        float acc = 0;
        for (int s = 0; s < b; s++)
            acc += x[s * d + i] * gh[s * h + j];
        gw1[idx] = acc;
    } else if (idx < (size_t)d * h + h) {
        int j = (int)(idx - (size_t)d * h);
        float acc = 0;
        for (int s = 0; s < b; s++)
            acc += gh[s * h + j];
        gb1[j] = acc;
    }
}

__global__ void k_adam(float *w, float *m, float *v, const float *grad, size_t n, float inv_b,
                       float c1, float c2)
{
    const float lr = 1e-3f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float g = grad[i] * inv_b;
    m[i] = b1 * m[i] + (1 - b1) * g;
    v[i] = b2 * v[i] + (1 - b2) * g * g;
    w[i] -= lr * (m[i] / c1) / (sqrtf(v[i] / c2) + eps);
}

/* ---- host side ------------------------------------------------------------ */

static unsigned blocks(size_t n)
{
    return (unsigned)((n + TPB - 1) / TPB);
}

static int check_device(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        printf("cuda_trainer: no usable CUDA device: %s\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        return 77;
    }
    return 0;
}

static int check_option(void *user, const char *opt, const char *val)
{
    (void)val;
    if (strcmp(opt, "--check-device") != 0)
        return OPT_UNKNOWN;
    *(int *)user = 1;
    return OPT_STOPS;
}

int main(int argc, char **argv)
{
    struct trainer_cli cli;
    struct trainer_opts o;
    uint64_t restored = 0, rng[2], d, h, b;
    int check_only = 0, rc;
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *ctx = NULL;
    struct meta meta;
    size_t nparam = 0;
    float *hw = NULL, *hx = NULL, *hloss = NULL, *hteach = NULL;
    float *w = NULL, *m = NULL, *v = NULL, *grad = NULL, *teacher = NULL, *x = NULL;
    float *hid = NULL, *gh = NULL, *dlog = NULL, *loss = NULL;
    cudaStream_t stream = NULL;
    ckpt_status st, saved = CKPT_OK; /* saved: the last ckpt_save's own outcome */

    memset(&cli, 0, sizeof cli); /* C++: no designated initializers */
    cli.name = "cuda_trainer";
    cli.synopsis = "cuda_trainer --steps N --every K --out FILE [options]";
    cli.out_help = "write the final parameters (raw float32) to FILE";
    cli.state_help = "device state = ~12*D*H bytes";
    cli.batch_help = "";
    cli.extra_help = "  --check-device  exit 0 if a CUDA device is usable, else print why and "
                     "exit 77\n";
    cli.max_input = cli.max_hidden = 65536; /* the kernels index with int */
    cli.max_batch = 4096;
    cli.usage_here = 1;
    cli.option = check_option;
    cli.user = &check_only;
    memset(&o, 0, sizeof o);
    o.input = 256; /* the defaults */
    o.hidden = 2048;
    o.batch = 32;
    if ((rc = trainer_parse(argc, argv, &cli, &o)) >= 0)
        return rc;
    if (check_only)
        return check_device();
    if (check_device())
        return 77;
    rc = 1;
    d = o.input;
    h = o.hidden;
    b = o.batch;
    batch_rng_init(rng);

    nparam = mlp_nparam(d, h);
    memset(&meta, 0, sizeof meta);
    meta.magic = 0x636b70745f637531ull;
    meta.input = (uint32_t)d;
    meta.hidden = (uint32_t)h;
    meta.batch = (uint32_t)b;
    hw = (float *)calloc(nparam, sizeof(float));
    hx = (float *)malloc(b * d * sizeof(float));
    hloss = (float *)malloc(b * sizeof(float));
    hteach = (float *)malloc(d * NOUT * sizeof(float));
    if (!hw || !hx || !hloss || !hteach) {
        fprintf(stderr, "cuda_trainer: out of memory\n");
        goto out;
    }
    mlp_init(hw, hteach, d, h); /* the initial weights and the teacher, as c_trainer's */

    CU(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CU(cudaMalloc(&w, nparam * sizeof(float)));
    CU(cudaMalloc(&m, nparam * sizeof(float)));
    CU(cudaMalloc(&v, nparam * sizeof(float)));
    CU(cudaMalloc(&grad, nparam * sizeof(float)));
    CU(cudaMalloc(&teacher, d * NOUT * sizeof(float)));
    CU(cudaMalloc(&x, b * d * sizeof(float)));
    CU(cudaMalloc(&hid, b * h * sizeof(float)));
    CU(cudaMalloc(&gh, b * h * sizeof(float)));
    CU(cudaMalloc(&dlog, b * NOUT * sizeof(float)));
    CU(cudaMalloc(&loss, b * sizeof(float)));
    CU(cudaMemcpy(w, hw, nparam * sizeof(float), cudaMemcpyHostToDevice));
    CU(cudaMemset(m, 0, nparam * sizeof(float)));
    CU(cudaMemset(v, 0, nparam * sizeof(float)));
    CU(cudaMemcpy(teacher, hteach, d * NOUT * sizeof(float), cudaMemcpyHostToDevice));

    cfg.store = o.store; /* NULL: CKPT_STORE, else the default store */
    cfg.run = o.run;     /* NULL: CKPT_RUN, else the directory's name */
    st = ckpt_open(&cfg, &ctx);
    if (st) {
        fprintf(stderr, "cuda_trainer: cannot open checkpoint store: %s (%s)\n",
                ckpt_errmsg(NULL), ckpt_strerror(st));
        rc = open_failed_exit(st);
        goto out;
    }
    if ((st = ckpt_protect_device(ctx, "params", w, nparam * sizeof(float))) ||
        (st = ckpt_protect_device(ctx, "adam_m", m, nparam * sizeof(float))) ||
        (st = ckpt_protect_device(ctx, "adam_v", v, nparam * sizeof(float))) ||
        (st = ckpt_protect(ctx, "rng", rng, sizeof rng)) ||
        (st = ckpt_protect(ctx, "meta", &meta, sizeof meta))) {
        fprintf(stderr, "cuda_trainer: protect: %s: %s\n", ckpt_strerror(st), ckpt_errmsg(ctx));
        goto out;
    }
    st = ckpt_restore(ctx, &restored);
    if (st == CKPT_OK) {
        if (meta.input != d || meta.hidden != h || meta.batch != b) {
            fprintf(stderr,
                    "cuda_trainer: checkpoint was made with other --input/--hidden/--batch\n");
            goto out;
        }
        printf("cuda_trainer: resumed from step %llu\n", (unsigned long long)meta.step);
    } else if (st == CKPT_E_NOENT) {
        printf("cuda_trainer: starting fresh (no checkpoint)\n");
    } else {
        fprintf(stderr, "cuda_trainer: restore failed: %s: %s\n", ckpt_strerror(st),
                ckpt_errmsg(ctx));
        goto out;
    }
    fflush(stdout);
    while (meta.step < o.steps) {
        const uint64_t t = meta.step + 1;
        /* bias corrections on the host, in double then rounded: deterministic */
        const float c1 = (float)(1.0 - pow(0.9, (double)t));
        const float c2 = (float)(1.0 - pow(0.999, (double)t));
        const int di = (int)d, hi = (int)h, bi = (int)b;
        for (size_t i = 0; i < b * d; i++)
            hx[i] = uniform(rng);
        /* pageable source: the call returns once hx is consumed */
        CU(cudaMemcpyAsync(x, hx, b * d * sizeof(float), cudaMemcpyHostToDevice, stream));
        k_hidden<<<blocks(b * h), TPB, 0, stream>>>(x, w, w + d * h, hid, di, hi, bi);
        k_output<<<blocks(b), TPB, 0, stream>>>(x, teacher, hid, w + d * h + h,
                                                w + d * h + h + h * NOUT, dlog, loss, di, hi, bi);
        k_grad_out<<<blocks(h * NOUT + NOUT), TPB, 0, stream>>>(hid, dlog, grad + d * h + h,
                                                                 grad + d * h + h + h * NOUT, hi,
                                                                 bi);
        k_grad_hidden<<<blocks(b * h), TPB, 0, stream>>>(hid, w + d * h + h, dlog, gh, hi, bi);
        k_grad_in<<<blocks(d * h + h), TPB, 0, stream>>>(x, gh, grad, grad + d * h, di, hi, bi);
        k_adam<<<blocks(nparam), TPB, 0, stream>>>(w, m, v, grad, nparam, 1.0f / (float)b, c1,
                                                   c2);
        CU(cudaGetLastError());
        meta.step = t;
        if (!o.quiet && (meta.step % 50 == 0 || meta.step == o.steps)) {
            float sum = 0;
            CU(cudaMemcpyAsync(hloss, loss, b * sizeof(float), cudaMemcpyDeviceToHost, stream));
            CU(cudaStreamSynchronize(stream));
            for (size_t s = 0; s < b; s++)
                sum += hloss[s];
            printf("cuda_trainer: step %llu loss %.4f\n", (unsigned long long)meta.step,
                   sum / (float)b);
        }
        /* no stream synchronize here: ckpt_save() orders after our kernels */
        if ((o.every && meta.step % o.every == 0) || ckpt_should_save(ctx)) {
            st = saved = ckpt_save(ctx, meta.step);
            if (st)
                fprintf(stderr, "cuda_trainer: save at step %llu failed: %s: %s\n",
                        (unsigned long long)meta.step, ckpt_strerror(st), ckpt_errmsg(ctx));
        }
        if (o.sleep_ms)
            sleep_ms(o.sleep_ms);
        fflush(stdout);
    }
    CU(cudaStreamSynchronize(stream));
    st = last_commit("cuda_trainer", "", ctx, saved);
    CU(cudaMemcpy(hw, w, nparam * sizeof(float), cudaMemcpyDeviceToHost));
    {
        const struct out_piece params = { hw, nparam * sizeof(float) };
        if (write_out(o.out, &params, 1)) {
            fprintf(stderr, "cuda_trainer: cannot write %s: %s\n", o.out, strerror(errno));
            goto out;
        }
    }
    printf("cuda_trainer: done, %llu steps, parameters in %s\n", (unsigned long long)meta.step,
           o.out);
    rc = done_exit(st); /* 74 when the last checkpoint is not in the store */
out:
    ckpt_close(ctx);
    if (stream)
        cudaStreamDestroy(stream);
    cudaFree(w);
    cudaFree(m);
    cudaFree(v);
    cudaFree(grad);
    cudaFree(teacher);
    cudaFree(x);
    cudaFree(hid);
    cudaFree(gh);
    cudaFree(dlog);
    cudaFree(loss);
    free(hw);
    free(hx);
    free(hloss);
    free(hteach);
    return rc;
}
