/* test_cuda_fake.c -- cuda.c's snapshot and restore logic against a fake CUDA
 * runtime (tests/tools/fake_cudart.c, loaded by libckpt through
 * CKPT_CUDA_RUNTIME), so the pinned ring, the events, the ordering after
 * application streams and the error paths are exercised on machines without
 * a GPU. The fake's copies run late on their own threads: reading a pinned
 * slot before its copy completed, or snapshotting before earlier application
 * work finished, gives wrong bytes here. test_cuda.c covers a real GPU. */
#include <dlfcn.h>
#define TEST_STORE_FIXTURE
#include "test_util.h"
#include "ckpt.h"


static void *(*dev_alloc)(size_t);
static void (*dev_free)(void *);
static void (*app_write)(void *, int, size_t);
static void (*fail_copy_after)(long);
static void (*clear_error)(void);
static void (*stats)(long *, long *);

static struct ckpt_ctx *open_run(const char *run, size_t chunk, size_t pinned, size_t cap)
{
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *ctx = NULL;
    cfg.store = g_url;
    cfg.run = run;
    cfg.chunk_bytes = chunk;
    cfg.pinned_max_bytes = pinned;
    cfg.staging_max_bytes = cap;
    cfg.codec = CKPT_CODEC_LZ4;
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

static void test_fake_roundtrip(void **state)
{
    static const struct { size_t chunk, pinned, cap; long min_inflight; } cfgs[] = {
        { 64 << 10, 256 << 10, 0, 2 },       /* 4 slots: the ring wraps */
        { 1 << 20, 512 << 10, 0, 2 },        /* 2 slots, 4 pieces per chunk */
        { 64 << 10, 64 << 20, 0, 8 },        /* a large pool: many in flight */
        { 64 << 10, 256 << 10, 256 << 10, 2 }, /* staging cap: block waits meet DMA */
        { 64 << 10, 1, 0, 2 },               /* tiny cap: still two slots */
        { 4 << 20, 16 << 20, 0, 2 },         /* 4 MiB pieces: split over copy threads */
    };
    const size_t na = (5u << 20) + 12345, nb = 100003, nh = 70000;
    (void)state;
    for (size_t c = 0; c < sizeof cfgs / sizeof *cfgs; c++) {
        char run[16];
        uint8_t *a = malloc(na), *b = malloc(nb), *h = malloc(nh), *hcopy = malloc(nh);
        uint8_t *da = dev_alloc(na), *db = dev_alloc(nb);
        uint64_t step = 0;
        long ncopies, maxin;
        struct ckpt_ctx *ctx;
        assert_true(a && b && h && hcopy && da && db);
        snprintf(run, sizeof run, "rt%zu", c);
        pattern(a, na, 1 + (uint32_t)c);
        memset(b, 0x77, nb);
        pattern(h, nh, 3 + (uint32_t)c);
        memcpy(hcopy, h, nh);
        memcpy(da, a, na);
        memset(db, 0, nb);
        ctx = open_run(run, cfgs[c].chunk, cfgs[c].pinned, cfgs[c].cap);
        assert_int_equal(ckpt_protect_device(ctx, "dev/a", da, na), CKPT_OK);
        assert_int_equal(ckpt_protect(ctx, "host", h, nh), CKPT_OK);
        assert_int_equal(ckpt_protect_device(ctx, "dev/empty", NULL, 0), CKPT_OK);
        assert_int_equal(ckpt_protect_device(ctx, "dev/b", db, nb), CKPT_OK);
        stats(&ncopies, &maxin);
        /* slow application work queued on its own stream, not waited for */
        app_write(da, 0x33, 4096);
        memset(a, 0x33, 4096);
        app_write(db, 0x77, nb);
        assert_int_equal(ckpt_save(ctx, 10 + c), CKPT_OK);
        stats(&ncopies, &maxin);
        {
            size_t piece = cfgs[c].pinned / 2 < cfgs[c].chunk ? cfgs[c].pinned / 2
                                                                : cfgs[c].chunk;
            if (piece < (64u << 10))
                piece = 64u << 10;
            /* every piece copied once, several at a time */
            assert_true((size_t)ncopies >= (na + nb) / piece);
            assert_true(maxin >= cfgs[c].min_inflight);
        }
        memset(da, 0x5a, na); /* after ckpt_save returned: not in the snapshot */
        memset(db, 0x5a, nb);
        memset(h, 0x5a, nh);
        assert_int_equal(ckpt_wait(ctx), CKPT_OK);
        assert_int_equal(ckpt_restore(ctx, &step), CKPT_OK);
        assert_int_equal(step, 10 + c);
        assert_memory_equal(da, a, na);
        assert_memory_equal(db, b, nb);
        assert_memory_equal(h, hcopy, nh);
        assert_int_equal(ckpt_verify(ctx, CKPT_STEP_LATEST), CKPT_OK);
        ckpt_close(ctx);
        /* a new context, other pool size, restores the same */
        memset(da, 0, na);
        memset(db, 0, nb);
        ctx = open_run(run, 0, 128 << 10, 0);
        assert_int_equal(ckpt_protect_device(ctx, "dev/a", da, na), CKPT_OK);
        assert_int_equal(ckpt_protect_device(ctx, "dev/b", db, nb), CKPT_OK);
        assert_int_equal(ckpt_restore(ctx, &step), CKPT_OK);
        assert_memory_equal(da, a, na);
        assert_memory_equal(db, b, nb);
        ckpt_close(ctx);
        dev_free(da);
        dev_free(db);
        free(a);
        free(b);
        free(h);
        free(hcopy);
    }
}

static void test_fake_errors(void **state)
{
    const size_t n = 1u << 20;
    uint8_t *d = dev_alloc(n), *p = malloc(n), *big = dev_alloc(n + 8);
    uint8_t host[64];
    uint64_t step = 0;
    struct ckpt_ctx *ctx;
    (void)state;
    pattern(p, n, 5);
    memcpy(d, p, n);
    ctx = open_run("err", 64 << 10, 256 << 10, 0);
    assert_int_equal(ckpt_protect_device(ctx, "host", host, sizeof host), CKPT_E_INVAL);
    assert_non_null(strstr(ckpt_errmsg(ctx), "not CUDA device"));
    assert_int_equal(ckpt_protect_device(ctx, "d", d, n), CKPT_OK);
    /* a copy fails mid-snapshot: the save fails, nothing is committed */
    fail_copy_after(5);
    assert_int_equal(ckpt_save(ctx, 1), CKPT_E_CUDA);
    assert_non_null(strstr(ckpt_errmsg(ctx), "device region d"));
    ckpt_wait(ctx);
    clear_error();
    assert_int_equal(ckpt_restore(ctx, &step), CKPT_E_NOENT);
    /* and the next save works */
    assert_int_equal(ckpt_save(ctx, 2), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    /* a copy fails during restore: reported, later restores work */
    memset(d, 0, n);
    fail_copy_after(3);
    assert_int_not_equal(ckpt_restore(ctx, &step), CKPT_OK);
    clear_error();
    assert_int_equal(ckpt_restore(ctx, &step), CKPT_OK);
    assert_int_equal(step, 2);
    assert_memory_equal(d, p, n);
    ckpt_close(ctx);
    /* size mismatch: found before anything is written */
    memset(big, 0x11, n + 8);
    ctx = open_run("err", 64 << 10, 256 << 10, 0);
    assert_int_equal(ckpt_protect_device(ctx, "d", big, n + 8), CKPT_OK);
    assert_int_equal(ckpt_restore(ctx, &step), CKPT_E_SIZE);
    for (size_t i = 0; i < n + 8; i++)
        assert_int_equal(big[i], 0x11);
    ckpt_close(ctx);
    dev_free(d);
    dev_free(big);
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fake_roundtrip, store_setup, store_teardown),
        cmocka_unit_test_setup_teardown(test_fake_errors, store_setup, store_teardown),
    };
    const char *path = getenv("CKPT_CUDA_RUNTIME");
    void *h = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    void *syms[6];
    static const char *const names[6] = { "fake_dev_alloc", "fake_dev_free", "fake_app_write",
                                           "fake_fail_copy_after", "fake_clear_error",
                                           "fake_stats" };
    if (!h) {
        printf("SKIP: CKPT_CUDA_RUNTIME must name the fake runtime (%s)\n",
               path ? dlerror() : "unset");
        return 77;
    }
    for (int i = 0; i < 6; i++) {
        syms[i] = dlsym(h, names[i]);
        if (!syms[i]) {
            printf("SKIP: %s is not the fake runtime (no %s)\n", path, names[i]);
            return 77;
        }
    }
    memcpy(&dev_alloc, &syms[0], sizeof syms[0]);
    memcpy(&dev_free, &syms[1], sizeof syms[1]);
    memcpy(&app_write, &syms[2], sizeof syms[2]);
    memcpy(&fail_copy_after, &syms[3], sizeof syms[3]);
    memcpy(&clear_error, &syms[4], sizeof syms[4]);
    memcpy(&stats, &syms[5], sizeof syms[5]);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
