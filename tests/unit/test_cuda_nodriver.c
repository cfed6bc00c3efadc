/* test_cuda_nodriver.c -- with no CUDA runtime loadable, device regions are
 * refused with a clear message and host regions keep working. Runs on every
 * machine: CKPT_CUDA_RUNTIME points at a runtime that does not exist (set by
 * ctest and again in main, before the library's first CUDA call). */
#include <dlfcn.h>
#include <link.h>
#include "test_util.h"
#include "ckpt.h"

#define NO_RUNTIME "/nonexistent/libcudart.so"

static char *g_dir;
static char g_url[700];

static int setup(void **state)
{
    (void)state;
    g_dir = test_tmpdir();
    snprintf(g_url, sizeof g_url, "file://%s/store", g_dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_rmrf(g_dir);
    free(g_dir);
    return 0;
}

static int find_cudart(struct dl_phdr_info *info, size_t size, void *user)
{
    (void)size;
    if (info->dlpi_name && strstr(info->dlpi_name, "libcudart"))
        *(int *)user = 1;
    return 0;
}

static void test_device_refused_host_works(void **state)
{
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *ctx = NULL;
    uint32_t host[50000], copy[50000];
    uint64_t step = 0;
    char dummy[64];
    int loaded = 0;
    (void)state;
    cfg.store = g_url;
    cfg.run = "nodrv";
    cfg.chunk_bytes = 64 << 10;
    cfg.no_control = 1;
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_OK);
    for (size_t i = 0; i < 50000; i++)
        host[i] = (uint32_t)(i * 2654435761u);
    memcpy(copy, host, sizeof host);
    assert_int_equal(ckpt_protect(ctx, "host", host, sizeof host), CKPT_OK);
    /* any pointer: the library must refuse before touching it */
    assert_int_equal(ckpt_protect_device(ctx, "dev", dummy, sizeof dummy), CKPT_E_UNSUPPORTED);
    fprintf(stderr, "# ckpt_errmsg: %s\n", ckpt_errmsg(ctx));
    assert_non_null(strstr(ckpt_errmsg(ctx), "device region 'dev'"));
    assert_non_null(strstr(ckpt_errmsg(ctx), "CUDA"));
#if defined(CKPT_HAVE_CUDA)
    assert_non_null(strstr(ckpt_errmsg(ctx), "CKPT_CUDA_RUNTIME"));
    assert_non_null(strstr(ckpt_errmsg(ctx), NO_RUNTIME));
#endif
    /* asking again gives the same answer (the loader runs once) */
    assert_int_equal(ckpt_protect_device(ctx, "dev", dummy, sizeof dummy), CKPT_E_UNSUPPORTED);
    /* the refused region is not protected: host save/restore as usual */
    assert_int_equal(ckpt_save(ctx, 7), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    memset(host, 0, sizeof host);
    assert_int_equal(ckpt_restore(ctx, &step), CKPT_OK);
    assert_int_equal(step, 7);
    assert_memory_equal(host, copy, sizeof host);
    assert_int_equal(ckpt_unprotect(ctx, "dev"), CKPT_E_NOENT);
    ckpt_close(ctx);
    /* and no CUDA runtime was loaded behind our back */
    dl_iterate_phdr(find_cudart, &loaded);
    assert_int_equal(loaded, 0);
}

/* The shared library loads without any CUDA library (it links none). */
static void test_shared_library_loads(void **state)
{
    const char *libdir = getenv("CKPT_LIBDIR");
    char path[1024];
    void *h;
    int loaded = 0;
    const char *(*ver)(void);
    (void)state;
    if (!libdir)
        skip();
    snprintf(path, sizeof path, "%s/libckpt.so", libdir);
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
    assert_non_null(h);
    {
        void *sym = dlsym(h, "ckpt_version_string");
        assert_non_null(sym);
        memcpy(&ver, &sym, sizeof sym);
    }
    assert_string_equal(ver(), CKPT_VERSION_STRING);
    dl_iterate_phdr(find_cudart, &loaded);
    assert_int_equal(loaded, 0);
    dlclose(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_device_refused_host_works, setup, teardown),
        cmocka_unit_test(test_shared_library_loads),
    };
    setenv("CKPT_CUDA_RUNTIME", NO_RUNTIME, 1);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
