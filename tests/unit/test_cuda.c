/* test_cuda.c -- device regions end to end on the file store. Needs a GPU:
 * without one it prints why and exits 77 (ctest SKIP_RETURN_CODE). */
#include <cuda_runtime_api.h>
#define TEST_STORE_FIXTURE
#include "test_util.h"
#include "core/ctx.h"
#include "run/runobj.h"

#define CU(call) assert_int_equal((int)(call), (int)cudaSuccess)

static struct ckpt_ctx *open_run(const char *run, size_t chunk, size_t pinned, ckpt_codec codec)
{
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *ctx = NULL;
    cfg.store = g_url;
    cfg.run = run;
    cfg.chunk_bytes = chunk;
    cfg.pinned_max_bytes = pinned;
    cfg.codec = codec;
    cfg.no_control = 1;
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_OK);
    return ctx;
}

static void pattern(uint8_t *p, size_t n, uint32_t seed)
{
    uint32_t s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        p[i] = (uint8_t)(s >> 3);
    }
}

static void dev_equals(const void *dev, const uint8_t *want, size_t n)
{
    uint8_t *got = malloc(n ? n : 1);
    assert_non_null(got);
    CU(cudaMemcpy(got, dev, n, cudaMemcpyDeviceToHost));
    assert_memory_equal(got, want, n);
    free(got);
}

/* Several device regions (one empty, one odd-sized, one larger than the
 * pinned pool) around a host region; chunk larger and smaller than a pinned
 * slot; data written by an unsynchronized async memset on a user stream just
 * before ckpt_save must be in the snapshot, data written just after must
 * not. */
static void test_roundtrip(void **state)
{
    static const struct { size_t chunk, pinned; ckpt_codec codec; } cfgs[] = {
        { 64 << 10, 256 << 10, CKPT_CODEC_NONE },   /* 4 slots, ring wraps often */
        { 1 << 20, 512 << 10, CKPT_CODEC_ZSTD },    /* 2 slots, 4 pieces per chunk */
        { 4 << 20, 0, CKPT_CODEC_LZ4 },             /* defaults: 64 MiB pool */
    };
    const size_t na = (5u << 20) + 12345, nb = 100003, nh = 70000;
    (void)state;
    for (size_t c = 0; c < sizeof cfgs / sizeof *cfgs; c++) {
        char run[16];
        uint8_t *a = malloc(na), *b = malloc(nb), *h = malloc(nh), *hcopy = malloc(nh);
        void *da, *db, *dempty = NULL;
        cudaStream_t us;
        uint64_t step = 0;
        struct ckpt_ctx *ctx;
        assert_true(a && b && h && hcopy);
        snprintf(run, sizeof run, "rt%zu", c);
        pattern(a, na, 1 + (uint32_t)c);
        pattern(b, nb, 2 + (uint32_t)c);
        pattern(h, nh, 3 + (uint32_t)c);
        memcpy(hcopy, h, nh);
        CU(cudaMalloc(&da, na));
        CU(cudaMalloc(&db, nb));
        CU(cudaStreamCreateWithFlags(&us, cudaStreamNonBlocking));
        CU(cudaMemcpy(da, a, na, cudaMemcpyHostToDevice));
        CU(cudaMemset(db, 0, nb));
        ctx = open_run(run, cfgs[c].chunk, cfgs[c].pinned, cfgs[c].codec);
        assert_int_equal(ckpt_protect_device(ctx, "dev/a", da, na), CKPT_OK);
        assert_int_equal(ckpt_protect(ctx, "host", h, nh), CKPT_OK);
        assert_int_equal(ckpt_protect_device(ctx, "dev/empty", dempty, 0), CKPT_OK);
        assert_int_equal(ckpt_protect_device(ctx, "dev/b", db, nb), CKPT_OK);
        assert_int_equal(ckpt_protect_device(ctx, "dev/b", db, nb), CKPT_E_EXISTS);
        /* queued, not waited for: ckpt_save must order after it */
        CU(cudaMemcpyAsync(db, b, nb, cudaMemcpyHostToDevice, us));
        assert_int_equal(ckpt_save(ctx, 10 + c), CKPT_OK);
        CU(cudaMemset(da, 0x5a, na)); /* after the snapshot: must not leak in */
        CU(cudaMemset(db, 0x5a, nb));
        memset(h, 0x5a, nh);
        assert_int_equal(ckpt_wait(ctx), CKPT_OK);
        assert_int_equal(ckpt_restore(ctx, &step), CKPT_OK);
        assert_int_equal(step, 10 + c);
        dev_equals(da, a, na);
        dev_equals(db, b, nb);
        assert_memory_equal(h, hcopy, nh);
        assert_int_equal(ckpt_verify(ctx, CKPT_STEP_LATEST), CKPT_OK);
        ckpt_close(ctx);
        /* a new context with another pool size restores the same */
        CU(cudaMemset(da, 0, na));
        CU(cudaMemset(db, 0, nb));
        ctx = open_run(run, 0, 128 << 10, CKPT_CODEC_DEFAULT);
        assert_int_equal(ckpt_protect_device(ctx, "dev/a", da, na), CKPT_OK);
        assert_int_equal(ckpt_protect_device(ctx, "dev/b", db, nb), CKPT_OK);
        assert_int_equal(ckpt_restore(ctx, &step), CKPT_OK);
        dev_equals(da, a, na);
        dev_equals(db, b, nb);
        ckpt_close(ctx);
        CU(cudaStreamDestroy(us));
        CU(cudaFree(da));
        CU(cudaFree(db));
        free(a);
        free(b);
        free(h);
        free(hcopy);
    }
}

/* Pointers that are not device memory are refused. */
static void test_not_device(void **state)
{
    struct ckpt_ctx *ctx = open_run("nd", 0, 0, CKPT_CODEC_DEFAULT);
    uint8_t host[256];
    void *pinned;
    (void)state;
    assert_int_equal(ckpt_protect_device(ctx, "h", host, sizeof host), CKPT_E_INVAL);
    assert_non_null(strstr(ckpt_errmsg(ctx), "not CUDA device"));
    CU(cudaMallocHost(&pinned, 4096));
    assert_int_equal(ckpt_protect_device(ctx, "p", pinned, 4096), CKPT_E_INVAL);
    assert_int_equal(ckpt_protect_device(ctx, "n", NULL, 16), CKPT_E_INVAL);
    CU(cudaFreeHost(pinned));
    ckpt_close(ctx);
}

/* A size difference is found before anything is written to the device. */
static void test_size_mismatch(void **state)
{
    const size_t n = 300000;
    uint8_t *p = malloc(n + 64);
    void *d;
    uint64_t step;
    struct ckpt_ctx *ctx;
    (void)state;
    pattern(p, n + 64, 9);
    CU(cudaMalloc(&d, n + 64));
    CU(cudaMemcpy(d, p, n, cudaMemcpyHostToDevice));
    ctx = open_run("sz", 64 << 10, 0, CKPT_CODEC_DEFAULT);
    assert_int_equal(ckpt_protect_device(ctx, "d", d, n), CKPT_OK);
    assert_int_equal(ckpt_save(ctx, 1), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    ckpt_close(ctx);
    pattern(p, n + 64, 10);
    CU(cudaMemcpy(d, p, n + 64, cudaMemcpyHostToDevice));
    ctx = open_run("sz", 64 << 10, 0, CKPT_CODEC_DEFAULT);
    assert_int_equal(ckpt_protect_device(ctx, "d", d, n + 64), CKPT_OK);
    assert_int_equal(ckpt_restore(ctx, &step), CKPT_E_SIZE);
    assert_non_null(strstr(ckpt_errmsg(ctx), "'d'"));
    dev_equals(d, p, n + 64); /* untouched */
    ckpt_close(ctx);
    CU(cudaFree(d));
    free(p);
}

/* Damage one chunk of the newest checkpoint's device item: restore falls
 * back to the previous checkpoint, on the device. */
static void corrupt_last_chunk(const char *run, uint64_t step)
{
    struct ckpt_ctx *ctx = open_run(run, 0, 0, CKPT_CODEC_DEFAULT);
    struct ckpt_head h;
    bool exists;
    char etag[CKPT_ETAG_MAX];
    int done = 0;
    assert_int_equal(ckpt__read_head(ctx, &h, etag, &exists), CKPT_OK);
    for (size_t i = 0; i < h.n; i++) {
        struct ckpt_manifest m;
        char key[1024], path[1500];
        FILE *f;
        int ch;
        if (h.entries[i].step != step)
            continue;
        assert_int_equal(ckpt__read_manifest(ctx, h.entries[i].manifest, &m), CKPT_OK);
        assert_int_equal(m.items[0].kind, CKPT_ITEM_DEVICE);
        ckpt__chunk_key(run, m.items[0].chunks[m.items[0].nchunks - 1].id, key, sizeof key);
        snprintf(path, sizeof path, "%s/store/%s", g_dir, key);
        f = fopen(path, "r+b");
        assert_non_null(f);
        fseek(f, 60, SEEK_SET);
        ch = fgetc(f);
        fseek(f, 60, SEEK_SET);
        fputc(ch ^ 0xff, f);
        fclose(f);
        ckpt__manifest_free(&m);
        done = 1;
    }
    assert_true(done);
    ckpt__head_free(&h);
    ckpt_close(ctx);
}

static void test_damage_falls_back(void **state)
{
    const size_t n = 200000;
    uint8_t *p1 = malloc(n), *p2 = malloc(n);
    void *d;
    uint64_t step;
    struct ckpt_ctx *ctx;
    (void)state;
    pattern(p1, n, 21);
    pattern(p2, n, 22);
    CU(cudaMalloc(&d, n));
    ctx = open_run("dmg", 64 << 10, 128 << 10, CKPT_CODEC_ZSTD);
    assert_int_equal(ckpt_protect_device(ctx, "d", d, n), CKPT_OK);
    CU(cudaMemcpy(d, p1, n, cudaMemcpyHostToDevice));
    assert_int_equal(ckpt_save(ctx, 1), CKPT_OK);
    CU(cudaMemcpy(d, p2, n, cudaMemcpyHostToDevice));
    assert_int_equal(ckpt_save(ctx, 2), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    corrupt_last_chunk("dmg", 2);
    assert_int_equal(ckpt_verify(ctx, 2), CKPT_E_CORRUPT);
    CU(cudaMemset(d, 0, n));
    assert_int_equal(ckpt_restore(ctx, &step), CKPT_OK);
    assert_int_equal(step, 1);
    dev_equals(d, p1, n);
    ckpt_close(ctx);
    CU(cudaFree(d));
    free(p1);
    free(p2);
}

/* The application's current device is left as it was. */
static void test_current_device_kept(void **state)
{
    int ndev = 0, cur = -1;
    void *d;
    uint64_t step;
    struct ckpt_ctx *ctx;
    (void)state;
    CU(cudaGetDeviceCount(&ndev));
    if (ndev < 2)
        skip();
    CU(cudaSetDevice(1));
    CU(cudaMalloc(&d, 1 << 20));
    CU(cudaMemset(d, 7, 1 << 20));
    CU(cudaSetDevice(0));
    ctx = open_run("dev1", 0, 0, CKPT_CODEC_DEFAULT);
    assert_int_equal(ckpt_protect_device(ctx, "d", d, 1 << 20), CKPT_OK);
    assert_int_equal(ckpt_save(ctx, 1), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    assert_int_equal(ckpt_restore(ctx, &step), CKPT_OK);
    CU(cudaGetDevice(&cur));
    assert_int_equal(cur, 0);
    ckpt_close(ctx);
    CU(cudaFree(d));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_roundtrip, store_setup, store_teardown),
        cmocka_unit_test_setup_teardown(test_not_device, store_setup, store_teardown),
        cmocka_unit_test_setup_teardown(test_size_mismatch, store_setup, store_teardown),
        cmocka_unit_test_setup_teardown(test_damage_falls_back, store_setup, store_teardown),
        cmocka_unit_test_setup_teardown(test_current_device_kept, store_setup, store_teardown),
    };
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        printf("SKIP: test_cuda needs a CUDA device: %s\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        return 77;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
