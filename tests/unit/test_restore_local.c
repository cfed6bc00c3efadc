/* test_restore_local.c -- restores bounded by the local machine, and its
 * errors told as its own: any number of files under a low open-file limit,
 * a full or read-only target (never "damaged", never "the store"), a
 * read-only file store; manifests validated whole (verify and restore agree);
 * an older writer that meets a newer format does not commit. */
#include <errno.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#define TEST_STORE_FIXTURE
#include "test_util.h"
#include "core/ctx.h"
#include "format/envelope.h"
#include "run/runobj.h"

static struct ckpt_ctx *open_ctx(const char *url, const char *run, uint64_t epoch)
{
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *ctx = NULL;
    cfg.store = url;
    cfg.run = run;
    cfg.chunk_bytes = 64 << 10;
    cfg.codec = CKPT_CODEC_NONE;
    cfg.epoch = epoch;
    cfg.no_control = 1;
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_OK);
    return ctx;
}

static void fill(uint8_t *b, size_t n, uint64_t seed)
{
    uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b[i] = (uint8_t)(x >> 24);
    }
}

static void write_bytes(const char *path, const uint8_t *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}

static size_t count_entries(const char *dir)
{
    char cmd[1024], line[64];
    size_t n = 0;
    snprintf(cmd, sizeof cmd, "find '%s' -mindepth 1 2>/dev/null | wc -l", dir);
    FILE *p = popen(cmd, "r");
    if (p && fgets(line, sizeof line, p))
        n = (size_t)atol(line);
    if (p)
        pclose(p);
    return n;
}

#define NFILES 300
#define FSIZE ((64 << 10) + 1) /* two chunks each */

/* 300 files of two chunks each (their chunks fetched in
 * any order, so many files are half-written at once) restore under an
 * open-file limit of 128: into a directory and into the protected files.
 * Before the fix restore opened every temporary file at once and failed
 * with "Too many open files" (and called the checkpoint damaged). */
static void test_many_files_low_ulimit(void **state)
{
    char src[800], out[800], p[1200], name[64];
    uint8_t *b = malloc(FSIZE);
    struct rlimit old, low;
    uint64_t step = 0;
    (void)state;
    snprintf(src, sizeof src, "%s/many", g_dir);
    mkdir(src, 0700);
    struct ckpt_ctx *ctx = open_ctx(g_url, "many", 0);
    for (int i = 0; i < NFILES; i++) {
        snprintf(p, sizeof p, "%s/f%03d", src, i);
        fill(b, FSIZE, (uint64_t)i);
        write_bytes(p, b, FSIZE);
        snprintf(name, sizeof name, "d%d/f%03d.bin", i % 7, i);
        assert_int_equal(ckpt_protect_file(ctx, name, p), CKPT_OK);
    }
    assert_int_equal(ckpt_save(ctx, 1), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
    low = old;
    low.rlim_cur = 128;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    snprintf(out, sizeof out, "%s/many-out", g_dir);
    ckpt_status st = ckpt_restore_dir(ctx, CKPT_STEP_LATEST, out, &step);
    if (st != CKPT_OK) {
        setrlimit(RLIMIT_NOFILE, &old);
        fail_msg("restore under ulimit -n 128: %s: %s", ckpt_strerror(st), ckpt_errmsg(ctx));
    }
    /* and over the protected files themselves */
    for (int i = 0; i < NFILES; i++) {
        snprintf(p, sizeof p, "%s/f%03d", src, i);
        write_bytes(p, (const uint8_t *)"x", 1);
    }
    st = ckpt_restore(ctx, &step);
    setrlimit(RLIMIT_NOFILE, &old);
    if (st != CKPT_OK)
        fail_msg("ckpt_restore under ulimit -n 128: %s: %s", ckpt_strerror(st),
                 ckpt_errmsg(ctx));
    for (int i = 0; i < NFILES; i++) {
        fill(b, FSIZE, (uint64_t)i);
        snprintf(p, sizeof p, "%s/d%d/f%03d.bin", out, i % 7, i);
        assert_true(test_same_file(p, b, FSIZE));
        snprintf(p, sizeof p, "%s/f%03d", src, i);
        assert_true(test_same_file(p, b, FSIZE));
    }
    ckpt_close(ctx);
    free(b);
}

/* A small tmpfs under g_dir, or NULL (then the case is skipped). */
static const char *tiny_mount(const char *name, const char *opts)
{
    static char mnt[800];
    snprintf(mnt, sizeof mnt, "%s/%s", g_dir, name);
    mkdir(mnt, 0700);
    if (mount("tmpfs", mnt, "tmpfs", 0, opts) != 0) {
        print_message("skipped: cannot mount a tmpfs here (%s)\n", strerror(errno));
        return NULL;
    }
    return mnt;
}

/* A full restore target is the local disk's problem,
 * found before anything is written (the sum of the files' sizes against the
 * free space, a chunk named many times counting each time), never
 * "damaged" (no fallback, nothing marked even by the lease holder) and
 * never "no space left on the store". */
static void test_local_disk_full(void **state)
{
    size_t n = 2 << 20;
    uint8_t *b = malloc(n);
    char p[900];
    uint64_t step = 0;
    (void)state;
    struct ckpt_ctx *ctx = open_ctx(g_url, "full", 3);
    assert_int_equal(ckpt_fence(ctx, 3), CKPT_OK);
    fill(b, n, 1);
    snprintf(p, sizeof p, "%s/big.bin", g_dir);
    write_bytes(p, b, n);
    assert_int_equal(ckpt_protect_file(ctx, "big.bin", p), CKPT_OK);
    assert_int_equal(ckpt_save(ctx, 1), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    assert_int_equal(ckpt_save(ctx, 2), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    const char *mnt = tiny_mount("full-mnt", "size=512k");
    if (!mnt) {
        ckpt_close(ctx);
        free(b);
        return;
    }
    assert_int_equal(ckpt_restore_dir(ctx, CKPT_STEP_LATEST, mnt, &step), CKPT_E_NOSPACE);
    assert_non_null(strstr(ckpt_errmsg(ctx), "local disk"));
    assert_non_null(strstr(ckpt_errmsg(ctx), "not enough space"));
    assert_null(strstr(ckpt_errmsg(ctx), "damaged"));
    assert_int_equal(count_entries(mnt), 0); /* nothing written */
    assert_null(strstr(ckpt_strerror(CKPT_E_NOSPACE), "on the store"));
    {
        struct ckpt_head h;
        bool exists;
        assert_int_equal(ckpt__read_head(ctx, &h, NULL, &exists), CKPT_OK);
        assert_int_equal(h.n, 2);
        assert_int_equal(h.ndamaged, 0); /* a full disk damages nothing */
        ckpt__head_free(&h);
    }
    /* a manifest naming one 64 KiB chunk 10^4 times: 655 MB to write, found
     * before writing (and quickly) */
    {
        struct ckpt_head h;
        struct ckpt_manifest m;
        char etag[CKPT_ETAG_MAX], key[1024], *buf;
        size_t len;
        bool exists;
        struct ckpt_put_opts po = { CKPT_PUT_IF_MATCH, etag, 0 };
        assert_int_equal(ckpt__read_head(ctx, &h, etag, &exists), CKPT_OK);
        assert_int_equal(ckpt__read_manifest(ctx, h.entries[0].manifest, &m), CKPT_OK);
        struct ckpt_chunk_ref one = m.items[0].chunks[0];
        free(m.items[0].chunks);
        m.items[0].nchunks = 10000;
        m.items[0].chunks = calloc(10000, sizeof one);
        for (size_t c = 0; c < 10000; c++)
            m.items[0].chunks[c] = one;
        m.items[0].size = 10000ull * one.raw_len;
        m.step = 3;
        m.seq = h.seq + 1;
        assert_int_equal(ckpt__manifest_encode(&m, &buf, &len), CKPT_OK);
        ckpt__manifest_key("full", m.seq, 3, 3, 7, key, sizeof key);
        assert_int_equal(ckpt_store_put(ctx->store, key, buf, len, NULL, NULL, NULL), CKPT_OK);
        free(buf);
        ckpt__manifest_free(&m);
        free(h.entries[1].manifest);
        h.entries[1] = h.entries[0];
        h.entries[0].manifest = strdup(key + strlen("full/"));
        h.entries[0].step = 3;
        h.entries[0].seq = h.seq + 1;
        h.seq++;
        h.rev++;
        assert_int_equal(ckpt__head_encode(&h, &buf, &len), CKPT_OK);
        ckpt__head_free(&h);
        assert_int_equal(ckpt_store_put(ctx->store, "full/HEAD", buf, len, &po, NULL, NULL),
                         CKPT_OK);
        free(buf);
        uint64_t t0 = ckpt__mono_ns();
        assert_int_equal(ckpt_restore_dir(ctx, 3, mnt, &step), CKPT_E_NOSPACE);
        assert_true(ckpt__mono_ns() - t0 < 10ull * 1000000000ull);
        assert_non_null(strstr(ckpt_errmsg(ctx), "not enough space"));
        assert_int_equal(count_entries(mnt), 0);
    }
    umount(mnt);
    ckpt_close(ctx);
    free(b);
}

/* A read-only restore target and a read-only file store say "read-only",
 * the local disk's or the store directory's, never "damaged" nor "the store
 * refused the credentials". */
static void test_read_only(void **state)
{
    uint8_t b[1000];
    char url[900], p[900];
    uint64_t step = 0;
    (void)state;
    struct ckpt_ctx *ctx = open_ctx(g_url, "ro", 0);
    fill(b, sizeof b, 3);
    assert_int_equal(ckpt_protect(ctx, "b", b, sizeof b), CKPT_OK);
    assert_int_equal(ckpt_save(ctx, 1), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    const char *mnt = tiny_mount("ro-mnt", "size=512k");
    if (!mnt) {
        ckpt_close(ctx);
        return;
    }
    /* a file store there, written once, then the mount turns read-only */
    snprintf(url, sizeof url, "file://%s/store", mnt);
    struct ckpt_ctx *rs = open_ctx(url, "ro", 0);
    assert_int_equal(ckpt_protect(rs, "b", b, sizeof b), CKPT_OK);
    assert_int_equal(ckpt_save(rs, 1), CKPT_OK);
    assert_int_equal(ckpt_wait(rs), CKPT_OK);
    snprintf(p, sizeof p, "%s/out", mnt);
    mkdir(p, 0700);
    assert_int_equal(mount(NULL, mnt, NULL, MS_REMOUNT | MS_RDONLY, NULL), 0);
    assert_int_equal(ckpt_restore_dir(ctx, CKPT_STEP_LATEST, p, &step), CKPT_E_PERM);
    assert_non_null(strstr(ckpt_errmsg(ctx), "local disk"));
    assert_non_null(strstr(ckpt_errmsg(ctx), "Read-only"));
    assert_null(strstr(ckpt_errmsg(ctx), "damaged"));
    assert_int_equal(ckpt_save(rs, 2), CKPT_OK);
    ckpt_status st = ckpt_wait(rs);
    assert_int_equal(st, CKPT_E_PERM);
    assert_non_null(strstr(ckpt_errmsg(rs), "Read-only file system"));
    assert_null(strstr(ckpt_strerror(st), "credentials"));
    /* reading it still works */
    assert_int_equal(ckpt_verify(rs, CKPT_STEP_ALL), CKPT_OK);
    ckpt_close(rs);
    umount(mnt);
    ckpt_close(ctx);
}

/* Verify and restore give the same verdict on a manifest
 * of a 2-rank checkpoint (restore refused it while verify said intact). */
static void test_world_size_verdict(void **state)
{
    uint8_t b[1000];
    struct ckpt_head h;
    struct ckpt_manifest m;
    char etag[CKPT_ETAG_MAX], *buf;
    size_t len;
    bool exists;
    uint64_t step = 0;
    struct ckpt_put_opts po = { CKPT_PUT_PLAIN, NULL, 0 };
    (void)state;
    (void)etag;
    struct ckpt_ctx *ctx = open_ctx(g_url, "ws", 0);
    fill(b, sizeof b, 4);
    assert_int_equal(ckpt_protect(ctx, "b", b, sizeof b), CKPT_OK);
    assert_int_equal(ckpt_save(ctx, 1), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    assert_int_equal(ckpt__read_head(ctx, &h, NULL, &exists), CKPT_OK);
    assert_int_equal(ckpt__read_manifest(ctx, h.entries[0].manifest, &m), CKPT_OK);
    m.world_size = 2;
    assert_int_equal(ckpt__manifest_encode(&m, &buf, &len), CKPT_OK);
    {
        char key[1024];
        ckpt__run_key(ctx, h.entries[0].manifest, key, sizeof key);
        assert_int_equal(ckpt_store_put(ctx->store, key, buf, len, &po, NULL, NULL), CKPT_OK);
        ckpt__mcache_clear(&ctx->mcache); /* read as a context opened after it */
    }
    free(buf);
    ckpt__manifest_free(&m);
    ckpt__head_free(&h);
    assert_int_equal(ckpt_restore(ctx, &step), CKPT_E_UNSUPPORTED);
    assert_int_equal(ckpt_verify(ctx, CKPT_STEP_ALL), CKPT_E_UNSUPPORTED);
    assert_non_null(strstr(ckpt_errmsg(ctx), "2-rank"));
    ckpt_close(ctx);
}

/* A writer that meets checkpoints of a newer format (a
 * HEAD of format 5, or a retained manifest of format 5) refuses to commit:
 * its retention would push them out. */
static void test_newer_format_not_pushed_out(void **state)
{
    uint8_t b[1000];
    char *buf, key[1024];
    size_t len;
    struct ckpt_put_opts po = { CKPT_PUT_PLAIN, NULL, 0 };
    (void)state;
    for (int where = 0; where < 2; where++) {
        char run[16];
        snprintf(run, sizeof run, "newer%d", where);
        struct ckpt_ctx *ctx = open_ctx(g_url, run, 0);
        fill(b, sizeof b, 5);
        assert_int_equal(ckpt_protect(ctx, "b", b, sizeof b), CKPT_OK);
        assert_int_equal(ckpt_save(ctx, 1), CKPT_OK);
        assert_int_equal(ckpt_wait(ctx), CKPT_OK);
        ckpt_close(ctx);
        /* a future writer's step 2 */
        const char *fut =
            "{\"format\":5,\"kind\":\"manifest\",\"step\":\"2\",\"seq\":\"2\",\"epoch\":\"0\","
            "\"time_ms\":1,\"rank\":0,\"world_size\":1,\"chunk_bytes\":65536,\"new_bytes\":0,"
            "\"writer\":\"future:1\",\"items\":[],\"hyperspace\":[1,2,3]}";
        buf = ckpt__envelope_seal(fut, &len);
        snprintf(key, sizeof key, "%s/manifests/00000000000000000002_00000000000000000002_"
                                  "0000000000_00000000.ckm", run);
        ctx = open_ctx(g_url, run, 0);
        assert_int_equal(ckpt_store_put(ctx->store, key, buf, len, &po, NULL, NULL), CKPT_OK);
        free(buf);
        {
            struct ckpt_head h;
            bool exists;
            assert_int_equal(ckpt__read_head(ctx, &h, NULL, &exists), CKPT_OK);
            struct ckpt_head_entry *e = realloc(h.entries, 2 * sizeof *e);
            h.entries = e;
            e[1] = e[0];
            e[0].manifest = strdup(key + strlen(run) + 1);
            e[0].step = 2;
            e[0].seq = 2;
            /* 0: the future HEAD says format 5 (it names a format-5
             * manifest); 1: HEAD says 1, only the manifest is newer */
            e[0].format = where == 0 ? 5 : 0;
            h.n = 2;
            h.seq = 2;
            h.rev++;
            assert_int_equal(ckpt__head_encode(&h, &buf, &len), CKPT_OK);
            ckpt__head_free(&h);
            assert_non_null(strstr(buf, where == 0 ? "\"format\":5," : "\"format\":1,"));
            snprintf(key, sizeof key, "%s/HEAD", run);
            assert_int_equal(ckpt_store_put(ctx->store, key, buf, len, &po, NULL, NULL),
                             CKPT_OK);
            free(buf);
        }
        ckpt_close(ctx);
        ctx = open_ctx(g_url, run, 0);
        assert_int_equal(ckpt_protect(ctx, "b", b, sizeof b), CKPT_OK);
        assert_int_equal(ckpt_save(ctx, 3), CKPT_OK);
        assert_int_equal(ckpt_wait(ctx), CKPT_E_UNSUPPORTED);
        assert_non_null(strstr(ckpt_errmsg(ctx), "upgrade"));
        /* and gc deletes nothing */
        uint64_t n = 0;
        assert_int_equal(ckpt_gc(ctx, 1, 0, &n), CKPT_E_UNSUPPORTED);
        assert_int_equal(n, 0);
        ckpt_close(ctx);
    }
}

/* A failed case leaves its tmpfs mounted: take them down before the
 * directory goes. */
static int teardown(void **state)
{
    const char *mnts[] = { "full-mnt", "ro-mnt" };
    for (size_t i = 0; i < 2; i++) {
        char p[900];
        snprintf(p, sizeof p, "%s/%s", g_dir, mnts[i]);
        umount2(p, MNT_DETACH);
    }
    return store_teardown(state);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_files_low_ulimit),
        cmocka_unit_test(test_local_disk_full),
        cmocka_unit_test(test_read_only),
        cmocka_unit_test(test_world_size_verdict),
        cmocka_unit_test(test_newer_format_not_pushed_out),
    };
    if (getenv("CKPT_TEST_FILTER"))
        cmocka_set_test_filter(getenv("CKPT_TEST_FILTER"));
    return cmocka_run_group_tests(tests, store_setup, teardown);
}
