/* test_write_pieces.c -- local files are written in pieces of at most
 * CKPT_WRITE_PIECE (ckpt_common.h): the file store's objects and a
 * restore's files, with their bytes intact. Linked with --wrap=write and
 * --wrap=pwrite, so every write the library makes is seen here. */
#include <unistd.h>
#define TEST_STORE_FIXTURE
#include "test_util.h"
#include "ckpt.h"
#include "ckpt_common.h"

ssize_t __real_write(int fd, const void *buf, size_t n);
ssize_t __real_pwrite(int fd, const void *buf, size_t n, off_t off);

static size_t g_max_write, g_writes;

ssize_t __wrap_write(int fd, const void *buf, size_t n)
{
    if (n > g_max_write)
        g_max_write = n;
    g_writes++;
    return __real_write(fd, buf, n);
}

ssize_t __wrap_pwrite(int fd, const void *buf, size_t n, off_t off)
{
    if (n > g_max_write)
        g_max_write = n;
    g_writes++;
    return __real_pwrite(fd, buf, n, off);
}

#define BIG (3u << 20) /* 3 MiB: a chunk of 2 MiB and one of 1 MiB */

static void test_pieces(void **state)
{
    char src[800], out[800], got[900];
    uint8_t *b = malloc(BIG);
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *ctx = NULL;
    uint64_t step = 0;
    FILE *f;
    (void)state;
    assert_non_null(b);
    test_fill_bytes(b, BIG, 0);
    snprintf(src, sizeof src, "%s/big.bin", g_dir);
    f = fopen(src, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, BIG, f), BIG);
    fclose(f);
    cfg.store = g_url;
    cfg.run = "pieces";
    cfg.chunk_bytes = 2u << 20;   /* chunks, and chunk objects, larger than a piece */
    cfg.codec = CKPT_CODEC_NONE;
    cfg.no_control = 1;
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_OK);
    assert_int_equal(ckpt_protect_file(ctx, "big.bin", src), CKPT_OK);

    g_max_write = g_writes = 0;
    assert_int_equal(ckpt_save(ctx, 1), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    /* the store wrote 3 MiB of chunk objects in pieces, none larger */
    assert_true(g_writes >= BIG / CKPT_WRITE_PIECE);
    assert_true(g_max_write <= CKPT_WRITE_PIECE);

    g_max_write = g_writes = 0;
    snprintf(out, sizeof out, "%s/out", g_dir);
    assert_int_equal(ckpt_restore_dir(ctx, CKPT_STEP_LATEST, out, &step), CKPT_OK);
    assert_int_equal(step, 1);
    assert_true(g_writes >= BIG / CKPT_WRITE_PIECE);
    assert_true(g_max_write <= CKPT_WRITE_PIECE);
    snprintf(got, sizeof got, "%s/big.bin", out);
    assert_true(test_same_file(got, b, BIG));
    ckpt_close(ctx);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pieces),
    };
    return cmocka_run_group_tests(tests, store_setup, store_teardown);
}
