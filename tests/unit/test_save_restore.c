/* test_save_restore.c -- the library end to end on the file store. */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <poll.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <cjson/cJSON.h>
#define TEST_STORE_FIXTURE
#include "test_util.h"
#include "core/ctx.h"
#include "run/runobj.h"
#include "core/staging.h"
#include "fault_store.h"

static struct ckpt_ctx *open_run(const char *run, ckpt_codec codec, size_t chunk, unsigned keep)
{
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *ctx = NULL;
    cfg.store = g_url;
    cfg.run = run;
    cfg.codec = codec;
    cfg.chunk_bytes = chunk;
    cfg.keep = keep;
    cfg.no_control = 1;
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_OK);
    return ctx;
}

static void test_roundtrip_codecs(void **state)
{
    const ckpt_codec codecs[] = { CKPT_CODEC_ZSTD, CKPT_CODEC_LZ4, CKPT_CODEC_NONE };
    (void)state;
    for (size_t c = 0; c < 3; c++) {
        char run[32];
        size_t n1 = 300001, n2 = 77777;
        float *w = malloc(n1 * 4), *wcopy = malloc(n1 * 4);
        uint16_t *h = malloc(n2 * 2), *hcopy = malloc(n2 * 2);
        uint8_t small[13] = "hello, world", scopy[13];
        uint64_t step = 0;
        snprintf(run, sizeof run, "rt%zu", c);
        test_fill_weights(w, n1, c);
        for (size_t i = 0; i < n2; i++)
            h[i] = (uint16_t)(0x3c00 + (i * 37 % 512));
        memcpy(wcopy, w, n1 * 4);
        memcpy(hcopy, h, n2 * 2);
        memcpy(scopy, small, 13);
        struct ckpt_ctx *ctx = open_run(run, codecs[c], 64 << 10, 3);
        assert_int_equal(ckpt_restore(ctx, &step), CKPT_E_INVAL); /* nothing protected */
        assert_int_equal(ckpt_protect_ex(ctx, "w", w, n1 * 4, CKPT_ELEM_F32), CKPT_OK);
        assert_int_equal(ckpt_protect_ex(ctx, "h", h, n2 * 2, CKPT_ELEM_F16), CKPT_OK);
        assert_int_equal(ckpt_protect(ctx, "dir/small", small, 13), CKPT_OK);
        assert_int_equal(ckpt_protect(ctx, "w", w, 4), CKPT_E_EXISTS);
        assert_int_equal(ckpt_protect(ctx, "../evil", w, 4), CKPT_E_INVAL);
        assert_int_equal(ckpt_restore(ctx, &step), CKPT_E_NOENT);
        assert_int_equal(ckpt_save(ctx, 42), CKPT_OK);
        /* the snapshot is taken: changing memory now must not leak into it */
        memset(w, 0, n1 * 4);
        assert_int_equal(ckpt_wait(ctx), CKPT_OK);
        memset(h, 0, n2 * 2);
        memset(small, 0, 13);
        assert_int_equal(ckpt_restore(ctx, &step), CKPT_OK);
        assert_int_equal(step, 42);
        assert_memory_equal(w, wcopy, n1 * 4);
        assert_memory_equal(h, hcopy, n2 * 2);
        assert_memory_equal(small, scopy, 13);
        assert_int_equal(ckpt_verify(ctx, CKPT_STEP_ALL), CKPT_OK);
        ckpt_close(ctx);
        /* a second process (new context) restores the same */
        ctx = open_run(run, CKPT_CODEC_DEFAULT, 0, 0);
        memset(w, 0, n1 * 4);
        ckpt_protect(ctx, "w", w, n1 * 4);
        ckpt_protect(ctx, "h", h, n2 * 2);
        ckpt_protect(ctx, "dir/small", small, 13);
        assert_int_equal(ckpt_restore(ctx, &step), CKPT_OK);
        assert_memory_equal(w, wcopy, n1 * 4);
        ckpt_close(ctx);
        free(w);
        free(wcopy);
        free(h);
        free(hcopy);
    }
}

static int count_cb(void *u, const struct ckpt_info *i)
{
    struct ckpt_info *out = u;
    if (out[0].chunks == 0 && out[0].step == 0)
        out[0] = *i;
    else
        out[1] = *i;
    return 0;
}

/* A contiguous 1% change of a 1 GiB item writes at most 3% of the bytes. */
static void test_dedup_1gib(void **state)
{
    size_t n = (size_t)1 << 30;
    uint8_t *big = malloc(n);
    struct ckpt_info info[2];
    (void)state;
    assert_non_null(big);
    test_fill_weights((float *)big, n / 4, 11);
    struct ckpt_ctx *ctx = open_run("dedup", CKPT_CODEC_LZ4, 0, 3);
    assert_int_equal(ckpt_protect_ex(ctx, "big", big, n, CKPT_ELEM_F32), CKPT_OK);
    assert_int_equal(ckpt_save(ctx, 1), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    /* change 1% somewhere not aligned to chunks */
    size_t off = n / 3 + 12345, len = n / 100;
    test_fill_weights((float *)(big + (off & ~(size_t)3)), len / 4, 99);
    assert_int_equal(ckpt_save(ctx, 2), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    memset(info, 0, sizeof info);
    assert_int_equal(ckpt_list(ctx, count_cb, info), CKPT_OK);
    assert_int_equal(info[0].step, 2); /* newest first */
    assert_int_equal(info[1].step, 1);
    print_message("full: %llu bytes stored, incremental: %llu (%.2f%%)\n",
                  (unsigned long long)info[1].new_bytes, (unsigned long long)info[0].new_bytes,
                  100.0 * (double)info[0].new_bytes / (double)info[1].new_bytes);
    assert_true(info[0].new_bytes * 100 <= info[1].new_bytes * 3);
    assert_true(info[0].new_bytes * 100 <= (uint64_t)n * 3);
    ckpt_close(ctx);
    free(big);
}

static size_t count_files(const char *sub)
{
    char cmd[1024], line[64];
    snprintf(cmd, sizeof cmd, "find '%s/store/%s' -type f | wc -l", g_dir, sub);
    FILE *p = popen(cmd, "r");
    size_t n = 0;
    if (p && fgets(line, sizeof line, p))
        n = (size_t)atol(line);
    if (p)
        pclose(p);
    return n;
}

static void test_retention_and_gc(void **state)
{
    uint32_t buf[50000];
    struct ckpt_info info[2];
    uint64_t step, deleted = 0;
    (void)state;
    struct ckpt_ctx *ctx = open_run("keep", CKPT_CODEC_ZSTD, 64 << 10, 2);
    ckpt_protect(ctx, "b", buf, sizeof buf);
    for (uint32_t s = 1; s <= 5; s++) {
        for (size_t i = 0; i < 50000; i++)
            buf[i] = s * 1000003u + (uint32_t)i * 7919u;
        assert_int_equal(ckpt_save(ctx, s), CKPT_OK);
        assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    }
    assert_int_equal(count_files("keep/manifests"), 2);
    /* 200000 bytes / 64 KiB = 4 chunks per checkpoint, all different */
    assert_int_equal(count_files("keep/chunks"), 8);
    memset(info, 0, sizeof info);
    ckpt_list(ctx, count_cb, info);
    assert_int_equal(info[0].step, 5);
    assert_int_equal(info[1].step, 4);
    /* orphans, as a crashed save leaves them */
    char p[900];
    snprintf(p, sizeof p, "%s/store/keep/chunks/00/00000000000000000000000000000000", g_dir);
    ckpt__mkdirs(p, 0700, NULL);
    rmdir(p);
    FILE *f = fopen(p, "w");
    fputs("junk", f);
    fclose(f);
    /* gc --keep 1: drops step 4 and the orphan; step 5 restorable */
    assert_int_equal(ckpt_gc(ctx, 1, 0, &deleted), CKPT_OK);
    assert_true(deleted >= 6);
    assert_int_equal(count_files("keep/manifests"), 1);
    assert_int_equal(count_files("keep/chunks"), 4);
    memset(buf, 0, sizeof buf);
    assert_int_equal(ckpt_restore(ctx, &step), CKPT_OK);
    assert_int_equal(step, 5);
    assert_int_equal(buf[7], 5 * 1000003u + 7 * 7919u);
    /* saves continue after gc */
    assert_int_equal(ckpt_save(ctx, 6), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    ckpt_close(ctx);
}

static void fill_random(uint8_t *p, size_t n, uint32_t seed)
{
    uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (uint8_t)(x >> 24);
    }
}

/* Save `step` and wait for its commit. */
static void save_ok(struct ckpt_ctx *ctx, uint64_t step)
{
    assert_int_equal(ckpt_save(ctx, step), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);
}

/* Remember the protected bytes, zero them, restore: the latest step is
 * `step` and the bytes come back. */
static void restore_equals(struct ckpt_ctx *ctx, uint8_t *buf, uint8_t *want, size_t n,
                           uint64_t step)
{
    uint64_t got = 0;
    memcpy(want, buf, n);
    memset(buf, 0, n);
    assert_int_equal(ckpt_restore(ctx, &got), CKPT_OK);
    assert_int_equal(got, step);
    assert_memory_equal(buf, want, n);
}

/* Packs on a store that asks for them (CKPT_PACK_BYTES; object stores by
 * default): chunks go into packs, dedup reuses chunks inside older packs,
 * retention deletes a pack only when no retained checkpoint uses it, any
 * reader (without the setting) restores, verify catches a damaged pack, gc
 * removes stray packs. 1 MiB of incompressible bytes in 64 KiB chunks,
 * packs of 256 KiB: 4 chunks a pack, 4 packs a full save. */
static void test_packs(void **state)
{
    size_t n = 1 << 20, cs = 64 << 10;
    uint8_t *buf = malloc(n), *want = malloc(n);
    uint64_t step, deleted = 0;
    struct ckpt_info info[2];
    (void)state;
    setenv("CKPT_PACK_BYTES", "256K", 1);
    struct ckpt_ctx *ctx = open_run("pk", CKPT_CODEC_ZSTD, cs, 2);
    unsetenv("CKPT_PACK_BYTES");
    assert_int_equal(ckpt_protect(ctx, "b", buf, n), CKPT_OK);
    fill_random(buf, n, 1);
    save_ok(ctx, 1);
    assert_int_equal(count_files("pk/packs"), 4);
    assert_int_equal(count_files("pk/chunks"), 0);
    /* one chunk changes: one more pack holding it, the rest reused */
    fill_random(buf + 5 * cs, cs, 2);
    save_ok(ctx, 2);
    memset(info, 0, sizeof info);
    assert_int_equal(ckpt_list(ctx, count_cb, info), CKPT_OK);
    assert_int_equal(info[0].step, 2);
    assert_true(info[0].new_bytes > cs && info[0].new_bytes < cs + 200);
    assert_int_equal(count_files("pk/packs"), 5);
    /* step 3 drops step 1 (keep 2): its packs still hold chunks steps 2
     * and 3 use, so none is deleted */
    fill_random(buf + 9 * cs, cs, 3);
    save_ok(ctx, 3);
    assert_int_equal(count_files("pk/manifests"), 2);
    assert_int_equal(count_files("pk/packs"), 6);
    memcpy(want, buf, n);
    ckpt_close(ctx);
    /* a new reader, no pack setting: restores and verifies */
    ctx = open_run("pk", CKPT_CODEC_DEFAULT, 0, 2);
    memset(buf, 0, n);
    assert_int_equal(ckpt_protect(ctx, "b", buf, n), CKPT_OK);
    assert_int_equal(ckpt_restore(ctx, &step), CKPT_OK);
    assert_int_equal(step, 3);
    assert_memory_equal(buf, want, n);
    assert_int_equal(ckpt_verify(ctx, CKPT_STEP_ALL), CKPT_OK);
    /* every chunk new twice: the packs only steps 2 and 3 used go */
    setenv("CKPT_PACK_BYTES", "256K", 1);
    ckpt_close(ctx);
    ctx = open_run("pk", CKPT_CODEC_ZSTD, cs, 2);
    unsetenv("CKPT_PACK_BYTES");
    assert_int_equal(ckpt_protect(ctx, "b", buf, n), CKPT_OK);
    for (uint64_t s = 4; s <= 5; s++) {
        fill_random(buf, n, (uint32_t)s * 10);
        save_ok(ctx, s);
    }
    assert_int_equal(count_files("pk/packs"), 8);
    memcpy(want, buf, n);
    /* a damaged byte inside a pack: verify names the chunk, restore of that
     * step refuses it */
    {
        char cmd[1200], path[1024] = "";
        snprintf(cmd, sizeof cmd, "find '%s/store/pk/packs' -type f | head -1", g_dir);
        FILE *p = popen(cmd, "r");
        assert_non_null(fgets(path, sizeof path, p));
        pclose(p);
        path[strcspn(path, "\n")] = '\0';
        FILE *f = fopen(path, "r+b");
        assert_non_null(f);
        fseek(f, 1000, SEEK_SET);
        int c = fgetc(f);
        fseek(f, 1000, SEEK_SET);
        fputc(c ^ 0x10, f);
        fclose(f);
        assert_int_equal(ckpt_verify(ctx, CKPT_STEP_ALL), CKPT_E_CORRUPT);
        assert_non_null(strstr(ckpt_errmsg(ctx), "item b"));
        fseek(f = fopen(path, "r+b"), 1000, SEEK_SET);
        fputc(c, f);
        fclose(f);
        assert_int_equal(ckpt_verify(ctx, CKPT_STEP_ALL), CKPT_OK);
    }
    /* a stray pack (a save that crashed before its commit) goes with gc */
    {
        char p[900];
        snprintf(p, sizeof p, "%s/store/pk/packs/00/00000000000000000000000000000000", g_dir);
        ckpt__mkdirs(p, 0700, NULL);
        rmdir(p);
        FILE *f = fopen(p, "w");
        fputs("junk", f);
        fclose(f);
        assert_int_equal(count_files("pk/packs"), 9);
        assert_int_equal(ckpt_gc(ctx, 2, 0, &deleted), CKPT_OK);
        assert_int_equal(deleted, 1);
        assert_int_equal(count_files("pk/packs"), 8);
    }
    memset(buf, 0, n);
    assert_int_equal(ckpt_restore(ctx, &step), CKPT_OK);
    assert_int_equal(step, 5);
    assert_memory_equal(buf, want, n);
    ckpt_close(ctx);
    free(buf);
    free(want);
}

/* A run written one chunk per object (before packs, or CKPT_PACK_BYTES=0)
 * and continued with packs: new chunks go into packs, unchanged ones stay
 * the old objects (a manifest mixes both), restore and verify read both,
 * and retention deletes the old chunk objects once no checkpoint uses
 * them. 1 MiB in 64 KiB chunks, incompressible. */
static void test_packs_mixed(void **state)
{
    size_t n = 1 << 20, cs = 64 << 10;
    uint8_t *buf = malloc(n), *want = malloc(n);
    (void)state;
    struct ckpt_ctx *ctx = open_run("mix", CKPT_CODEC_ZSTD, cs, 2);
    assert_int_equal(ckpt_protect(ctx, "b", buf, n), CKPT_OK);
    fill_random(buf, n, 5);
    save_ok(ctx, 1);
    ckpt_close(ctx);
    assert_int_equal(count_files("mix/chunks"), 16);
    setenv("CKPT_PACK_BYTES", "256K", 1);
    ctx = open_run("mix", CKPT_CODEC_ZSTD, cs, 2);
    unsetenv("CKPT_PACK_BYTES");
    assert_int_equal(ckpt_protect(ctx, "b", buf, n), CKPT_OK);
    fill_random(buf, 2 * cs, 6); /* two chunks change */
    save_ok(ctx, 2);
    assert_int_equal(count_files("mix/packs"), 1);
    assert_int_equal(count_files("mix/chunks"), 16);
    restore_equals(ctx, buf, want, n, 2);
    assert_int_equal(ckpt_verify(ctx, CKPT_STEP_ALL), CKPT_OK);
    /* step 3 drops step 1: its two changed chunk objects go, the 14 that
     * steps 2 and 3 still use stay */
    fill_random(buf + 8 * cs, cs, 7);
    save_ok(ctx, 3);
    assert_int_equal(count_files("mix/chunks"), 14);
    assert_int_equal(count_files("mix/packs"), 2);
    restore_equals(ctx, buf, want, n, 3);
    ckpt_close(ctx);
    free(buf);
    free(want);
}

static void corrupt_one_chunk_of(const char *run, uint64_t step, const uint8_t *only_in)
{
    (void)only_in;
    struct ckpt_ctx *ctx = open_run(run, CKPT_CODEC_DEFAULT, 0, 0);
    struct ckpt_head h;
    bool exists;
    char etag[CKPT_ETAG_MAX];
    assert_int_equal(ckpt__read_head(ctx, &h, etag, &exists), CKPT_OK);
    for (size_t i = 0; i < h.n; i++) {
        if (h.entries[i].step != step)
            continue;
        struct ckpt_manifest m;
        assert_int_equal(ckpt__read_manifest(ctx, h.entries[i].manifest, &m), CKPT_OK);
        char key[1024], path[1500];
        ckpt__chunk_key(run, m.items[0].chunks[m.items[0].nchunks - 1].id, key, sizeof key);
        snprintf(path, sizeof path, "%s/store/%s", g_dir, key);
        FILE *f = fopen(path, "r+b");
        assert_non_null(f);
        fseek(f, 60, SEEK_SET);
        int c = fgetc(f);
        fseek(f, 60, SEEK_SET);
        fputc(c ^ 0xff, f);
        fclose(f);
        ckpt__manifest_free(&m);
    }
    ckpt__head_free(&h);
    ckpt_close(ctx);
}

static void test_damage_falls_back(void **state)
{
    uint32_t buf[40000];
    uint64_t step;
    (void)state;
    struct ckpt_ctx *ctx = open_run("dmg", CKPT_CODEC_ZSTD, 64 << 10, 3);
    ckpt_protect(ctx, "b", buf, sizeof buf);
    for (uint32_t s = 1; s <= 2; s++) {
        for (size_t i = 0; i < 40000; i++)
            buf[i] = s * 77u + (uint32_t)i;
        assert_int_equal(ckpt_save(ctx, s), CKPT_OK);
        assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    }
    corrupt_one_chunk_of("dmg", 2, NULL);
    assert_int_equal(ckpt_verify(ctx, 2), CKPT_E_CORRUPT);
    assert_non_null(strstr(ckpt_errmsg(ctx), "item b"));
    assert_int_equal(ckpt_verify(ctx, 1), CKPT_OK);
    assert_int_equal(ckpt_verify(ctx, CKPT_STEP_ALL), CKPT_E_CORRUPT);
    assert_int_equal(ckpt_verify(ctx, 77), CKPT_E_NOENT);
    memset(buf, 0, sizeof buf);
    assert_int_equal(ckpt_restore(ctx, &step), CKPT_OK);
    assert_int_equal(step, 1);
    assert_int_equal(buf[5], 77u + 5);
    assert_int_equal(buf[39999], 77u + 39999);
    /* restore_dir of the damaged step by number fails, latest falls back */
    char out[800];
    snprintf(out, sizeof out, "%s/out-dmg", g_dir);
    assert_int_equal(ckpt_restore_dir(ctx, 2, out, &step), CKPT_E_CORRUPT);
    assert_int_equal(ckpt_restore_dir(ctx, CKPT_STEP_LATEST, out, &step), CKPT_OK);
    assert_int_equal(step, 1);
    ckpt_close(ctx);
}

static void test_shape_errors(void **state)
{
    uint8_t a[1000], b[10];
    uint64_t step;
    (void)state;
    memset(a, 1, sizeof a);
    struct ckpt_ctx *ctx = open_run("shape", CKPT_CODEC_ZSTD, 0, 0);
    ckpt_protect(ctx, "a", a, sizeof a);
    ckpt_protect(ctx, "b", b, sizeof b);
    assert_int_equal(ckpt_save(ctx, 1), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    ckpt_close(ctx);
    /* a region of another size: error, nothing overwritten */
    uint8_t a2[999], c[5];
    memset(a2, 9, sizeof a2);
    ctx = open_run("shape", CKPT_CODEC_ZSTD, 0, 0);
    ckpt_protect(ctx, "b", b, sizeof b);
    ckpt_protect(ctx, "a", a2, sizeof a2);
    memset(b, 7, sizeof b);
    assert_int_equal(ckpt_restore(ctx, &step), CKPT_E_SIZE);
    assert_non_null(strstr(ckpt_errmsg(ctx), "'a'"));
    for (size_t i = 0; i < sizeof a2; i++)
        assert_int_equal(a2[i], 9);
    for (size_t i = 0; i < sizeof b; i++)
        assert_int_equal(b[i], 7);
    ckpt_close(ctx);
    /* a protected name the checkpoint lacks */
    ctx = open_run("shape", CKPT_CODEC_ZSTD, 0, 0);
    ckpt_protect(ctx, "a", a, sizeof a);
    ckpt_protect(ctx, "c", c, sizeof c);
    assert_int_equal(ckpt_restore(ctx, &step), CKPT_E_MISMATCH);
    ckpt_close(ctx);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* A store that hands ranges over piece by piece, as the object stores do
 * (the file store reads a range in one pread and never calls the watch),
 * and damages one byte of the first read of every range. */
static const struct ckpt_store_ops *g_inner;
static struct ckpt_store_ops g_streaming;
static atomic_int g_watch_calls, g_range_reads;
/* Ranges read so far (workers read them at once): a read is damaged when
 * no earlier read of its object covered the byte it damages, so the first
 * read of each range is and the read again from its failed chunk is not,
 * however the workers interleave. */
static pthread_mutex_t g_ranges_mu = PTHREAD_MUTEX_INITIALIZER;
static struct { char key[256]; uint64_t off, len; } g_ranges[4096];
static size_t g_nranges;

static int first_read_of(const char *key, uint64_t off, uint64_t len)
{
    uint64_t at = off + len / 2;
    int first = 1;
    pthread_mutex_lock(&g_ranges_mu);
    for (size_t i = 0; i < g_nranges && first; i++)
        if (g_ranges[i].off <= at && at < g_ranges[i].off + g_ranges[i].len &&
            !strcmp(g_ranges[i].key, key))
            first = 0;
    if (g_nranges < sizeof g_ranges / sizeof g_ranges[0]) {
        snprintf(g_ranges[g_nranges].key, sizeof g_ranges[0].key, "%s", key);
        g_ranges[g_nranges].off = off;
        g_ranges[g_nranges++].len = len;
    }
    pthread_mutex_unlock(&g_ranges_mu);
    return first;
}

static ckpt_status streaming_get_range(struct ckpt_store *s, const char *key, uint64_t off,
                                       size_t len, unsigned flags, void *dst,
                                       const struct ckpt_range_watch *w, char *err)
{
    ckpt_status st = g_inner->get_range(s, key, off, len, flags, dst, NULL, err);
    if (st || !w)
        return st;
    atomic_fetch_add(&g_range_reads, 1);
    if (first_read_of(key, off, len))
        ((uint8_t *)dst)[len / 2] ^= 0x20;
    /* 10000 bytes at a time, as a slow connection would */
    size_t want = w->fn(w->arg, 0);
    for (size_t have = 10000; want && have < len; have += 10000)
        if (have >= want) {
            want = w->fn(w->arg, have);
            atomic_fetch_add(&g_watch_calls, 1);
        }
    return CKPT_OK;
}

/* Chunks delivered while their range arrives: stored as they are (random
 * bytes: taken piece by piece, hashed and written) and compressed (decoded
 * whole once in); a damaged byte in the middle of each range is caught
 * there, and the range is fetched again from the damaged chunk on, into a
 * restored directory, a protected file and a verify. */
static void test_streamed_ranges(void **state)
{
    size_t n = 1000000;
    uint8_t *buf = malloc(n), *got = malloc(n);
    char src[800], p[1600], out[800];
    uint64_t step;
    FILE *f;
    (void)state;
    snprintf(src, sizeof src, "%s/ssrc", g_dir);
    mkdir(src, 0700);
    fill_random(buf, n, 7);
    for (size_t i = n / 4 * 3; i < n; i++) /* the last quarter compresses */
        buf[i] = (uint8_t)"checkpoint "[i % 11];
    snprintf(p, sizeof p, "%s/state.bin", src);
    f = fopen(p, "wb");
    assert_int_equal(fwrite(buf, 1, n, f), n);
    fclose(f);
    setenv("CKPT_PACK_BYTES", "256K", 1);
    struct ckpt_ctx *ctx = open_run("streamed", CKPT_CODEC_ZSTD, 64 << 10, 2);
    unsetenv("CKPT_PACK_BYTES");
    assert_int_equal(ckpt_protect_file(ctx, "state.bin", p), CKPT_OK);
    save_ok(ctx, 1);
    g_inner = ctx->store->ops;
    g_streaming = *g_inner;
    g_streaming.get_range = streaming_get_range;
    ctx->store->ops = &g_streaming;
    snprintf(out, sizeof out, "%s/sout", g_dir);
    assert_int_equal(ckpt_restore_dir(ctx, CKPT_STEP_LATEST, out, &step), CKPT_OK);
    assert_int_equal(step, 1);
    assert_true(g_watch_calls >= 12);
    assert_true(g_range_reads >= 2 && g_range_reads % 2 == 0); /* each range twice */
    snprintf(p, sizeof p, "%s/state.bin", out);
    f = fopen(p, "rb");
    assert_non_null(f);
    assert_int_equal(fread(got, 1, n, f), n);
    fclose(f);
    assert_memory_equal(got, buf, n);
    /* into the protected file (overwritten meanwhile), damaged again */
    pthread_mutex_lock(&g_ranges_mu);
    g_nranges = 0;
    pthread_mutex_unlock(&g_ranges_mu);
    snprintf(p, sizeof p, "%s/state.bin", src);
    f = fopen(p, "wb");
    fclose(f);
    assert_int_equal(ckpt_restore(ctx, &step), CKPT_OK);
    f = fopen(p, "rb");
    assert_int_equal(fread(got, 1, n, f), n);
    fclose(f);
    assert_memory_equal(got, buf, n);
    atomic_store(&g_range_reads, 0);
    pthread_mutex_lock(&g_ranges_mu);
    g_nranges = 0;
    pthread_mutex_unlock(&g_ranges_mu);
    assert_int_equal(ckpt_verify(ctx, CKPT_STEP_ALL), CKPT_OK);
    assert_true(g_range_reads >= 2 && g_range_reads % 2 == 0);
    ctx->store->ops = g_inner;
    ckpt_close(ctx);
    free(buf);
    free(got);
}

/* The library's threads block every signal: SIGTERM or SIGUSR1 sent to a
 * trainer (or to ckptrun, which reads them from a signalfd) must reach the
 * application's threads, never a worker where nobody waits for it. */
static void test_threads_block_signals(void **state)
{
    char path[300], line[256];
    int checked = 0;
    DIR *d;
    struct dirent *de;
    (void)state;
    struct ckpt_ctx *ctx = open_run("sig", CKPT_CODEC_ZSTD, 0, 0);
    assert_non_null(d = opendir("/proc/self/task"));
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.' || atoi(de->d_name) == getpid())
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/status", de->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue; /* ended meanwhile */
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "SigBlk:", 7) == 0) {
                unsigned long long m = strtoull(line + 7, NULL, 16);
                assert_true(m & (1ull << (SIGTERM - 1)));
                assert_true(m & (1ull << (SIGINT - 1)));
                assert_true(m & (1ull << (SIGUSR1 - 1)));
                assert_true(m & (1ull << (SIGUSR2 - 1)));
                checked++;
            }
        fclose(f);
    }
    closedir(d);
    assert_true(checked >= 1); /* the workers */
    ckpt_close(ctx);
}

static void test_files_and_restore_dir(void **state)
{
    char src[800], out[800], p[1600];
    uint64_t step;
    (void)state;
    snprintf(src, sizeof src, "%s/src", g_dir);
    mkdir(src, 0700);
    snprintf(p, sizeof p, "%s/model.bin", src);
    write_file(p, "weights weights weights");
    struct ckpt_ctx *ctx = open_run("files", CKPT_CODEC_ZSTD, 0, 0);
    assert_int_equal(ckpt_protect_file(ctx, "checkpoint-100/model.bin", p), CKPT_OK);
    assert_int_equal(ckpt_save(ctx, 100), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    /* restore into the protected file itself */
    write_file(p, "changed");
    assert_int_equal(ckpt_restore(ctx, &step), CKPT_OK);
    FILE *f = fopen(p, "r");
    char line[100] = "";
    assert_non_null(fgets(line, sizeof line, f));
    fclose(f);
    assert_string_equal(line, "weights weights weights");
    /* materialize into a directory */
    snprintf(out, sizeof out, "%s/out", g_dir);
    assert_int_equal(ckpt_restore_dir(ctx, CKPT_STEP_LATEST, out, &step), CKPT_OK);
    assert_int_equal(step, 100);
    snprintf(p, sizeof p, "%s/checkpoint-100/model.bin", out);
    f = fopen(p, "r");
    assert_non_null(f);
    assert_non_null(fgets(line, sizeof line, f));
    fclose(f);
    assert_string_equal(line, "weights weights weights");
    {
        struct stat sb; /* the source was 0644: restored files are owner-only */
        assert_int_equal(stat(p, &sb), 0);
        assert_int_equal(sb.st_mode & 0777, 0600);
    }
    /* a symbolic link in the way is refused, nothing written through it */
    char out2[800], target[800];
    snprintf(out2, sizeof out2, "%s/out2", g_dir);
    snprintf(target, sizeof target, "%s/elsewhere", g_dir);
    mkdir(out2, 0700);
    mkdir(target, 0700);
    snprintf(p, sizeof p, "%s/checkpoint-100", out2);
    assert_int_equal(symlink(target, p), 0);
    assert_int_equal(ckpt_restore_dir(ctx, CKPT_STEP_LATEST, out2, &step), CKPT_E_UNSAFE);
    snprintf(p, sizeof p, "%s/model.bin", target);
    assert_int_not_equal(access(p, F_OK), 0);
    assert_int_equal(ckpt_restore_dir(ctx, 5, out, &step), CKPT_E_NOENT);
    /* a protected file that vanished: clear error at save */
    snprintf(p, sizeof p, "%s/gone.bin", src);
    assert_int_equal(ckpt_protect_file(ctx, "gone", p), CKPT_OK);
    assert_int_equal(ckpt_save(ctx, 101), CKPT_E_NOENT);
    assert_non_null(strstr(ckpt_errmsg(ctx), "gone"));
    ckpt_close(ctx);
}

/* The first line of a file ("" if it cannot be read). */
static void read_line(const char *path, char *line, size_t n)
{
    FILE *f = fopen(path, "r");
    line[0] = '\0';
    if (f) {
        if (!fgets(line, (int)n, f))
            line[0] = '\0';
        fclose(f);
    }
}

/* Whether the newest file under <store>/<sub> (by name) contains `text`. */
static int store_file_has(const char *sub, const char *text)
{
    char cmd[1200], buf[65536];
    size_t n;
    snprintf(cmd, sizeof cmd, "cat \"$(ls -d %s/store/%s | sort | tail -n 1)\"", g_dir, sub);
    FILE *p = popen(cmd, "r");
    if (!p)
        return 0;
    n = fread(buf, 1, sizeof buf - 1, p);
    pclose(p);
    buf[n] = '\0';
    return strstr(buf, text) != NULL;
}

/* Link items: committed with their target, recreated by ckpt_restore_dir as
 * links after the files (replacing a file or link of that name, never
 * writing through one), ignored by ckpt_restore; targets that leave the
 * checkpoint, dangle or name another link fail the save (CKPT_E_INVAL)
 * before anything is written. The manifest and HEAD say format 3, so older
 * readers say "upgrade" and older writers do not commit over it. */
static void test_links(void **state)
{
    char src[800], out[800], p[1600], q[1600], line[200], lt[200];
    uint64_t step;
    struct stat sb;
    (void)state;
    snprintf(src, sizeof src, "%s/lsrc", g_dir);
    mkdir(src, 0700);
    snprintf(p, sizeof p, "%s/sub", src);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/epoch=3.ckpt", src);
    write_file(p, "epoch three");
    snprintf(q, sizeof q, "%s/sub/x", src);
    write_file(q, "x in sub");
    struct ckpt_ctx *ctx = open_run("links", CKPT_CODEC_ZSTD, 0, 0);
    assert_int_equal(ckpt_protect_link(ctx, "last.ckpt", "epoch=3.ckpt"), CKPT_OK);
    assert_int_equal(ckpt_protect_link(ctx, "lastdir", "sub/"), CKPT_OK);
    assert_int_equal(ckpt_protect_link(ctx, "sub/up", "../epoch=3.ckpt"), CKPT_OK);
    assert_int_equal(ckpt_protect_file(ctx, "epoch=3.ckpt", p), CKPT_OK); /* after its link */
    assert_int_equal(ckpt_protect_file(ctx, "sub/x", q), CKPT_OK);
    assert_int_equal(ckpt_protect_link(ctx, "abs", "/etc/passwd"), CKPT_E_INVAL);
    assert_int_equal(ckpt_protect_link(ctx, "ctl", "a\nb"), CKPT_E_INVAL);
    assert_int_equal(ckpt_protect_link(ctx, "last.ckpt", "sub/x"), CKPT_E_EXISTS);
    save_ok(ctx, 3);
    assert_true(store_file_has("links/manifests/*", "\"format\":3,"));
    assert_true(store_file_has("links/manifests/*", "\"kind\":\"link\","));
    assert_true(store_file_has("links/manifests/*", "\"target\":\"epoch=3.ckpt\""));
    assert_true(store_file_has("links/HEAD", "\"format\":3,"));
    assert_int_equal(ckpt_verify(ctx, CKPT_STEP_ALL), CKPT_OK);

    /* into a directory where last.ckpt is a file and lastdir a link to
     * somewhere else: both replaced by the checkpoint's links */
    snprintf(out, sizeof out, "%s/lout", g_dir);
    mkdir(out, 0700);
    snprintf(p, sizeof p, "%s/last.ckpt", out);
    write_file(p, "stale file");
    snprintf(p, sizeof p, "%s/lastdir", out);
    assert_int_equal(symlink(g_dir, p), 0);
    assert_int_equal(ckpt_restore_dir(ctx, CKPT_STEP_LATEST, out, &step), CKPT_OK);
    assert_int_equal(step, 3);
    const char *links[][2] = { { "last.ckpt", "epoch=3.ckpt" }, { "lastdir", "sub/" },
                               { "sub/up", "../epoch=3.ckpt" } };
    for (size_t i = 0; i < 3; i++) {
        ssize_t n;
        snprintf(p, sizeof p, "%s/%s", out, links[i][0]);
        assert_int_equal(lstat(p, &sb), 0);
        assert_true(S_ISLNK(sb.st_mode));
        n = readlink(p, lt, sizeof lt - 1);
        assert_true(n > 0);
        lt[n] = '\0';
        assert_string_equal(lt, links[i][1]);
    }
    snprintf(p, sizeof p, "%s/last.ckpt", out);
    read_line(p, line, sizeof line);
    assert_string_equal(line, "epoch three");
    snprintf(p, sizeof p, "%s/lastdir/x", out);
    read_line(p, line, sizeof line);
    assert_string_equal(line, "x in sub");
    snprintf(p, sizeof p, "%s/sub/up", out);
    read_line(p, line, sizeof line);
    assert_string_equal(line, "epoch three");
    snprintf(p, sizeof p, "%s/x", g_dir); /* nothing went through the old link */
    assert_int_not_equal(access(p, F_OK), 0);
    /* a second restore over its own links */
    assert_int_equal(ckpt_restore_dir(ctx, CKPT_STEP_LATEST, out, &step), CKPT_OK);
    /* into the protected regions: the links are ignored */
    snprintf(p, sizeof p, "%s/epoch=3.ckpt", src);
    write_file(p, "changed");
    assert_int_equal(ckpt_restore(ctx, &step), CKPT_OK);
    read_line(p, line, sizeof line);
    assert_string_equal(line, "epoch three");

    /* targets that do not land on an item of the checkpoint */
    const char *bad[][2] = { { "esc", "../epoch=3.ckpt" },   { "dang", "nothing" },
                             { "l2l", "last.ckpt" },         { "self", "." },
                             { "sub/loop", ".." },           { "thru", "last.ckpt/../sub/x" },
                             { "filedir", "epoch=3.ckpt/" } };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(ckpt_protect_link(ctx, bad[i][0], bad[i][1]), CKPT_OK);
        if (ckpt_save(ctx, 4) != CKPT_E_INVAL)
            fail_msg("link %s -> %s saved", bad[i][0], bad[i][1]);
        assert_non_null(strstr(ckpt_errmsg(ctx), bad[i][0]));
        assert_int_equal(ckpt_unprotect(ctx, bad[i][0]), CKPT_OK);
    }
    /* an item that is also the directory of another */
    uint32_t v = 7;
    assert_int_equal(ckpt_protect(ctx, "sub", &v, sizeof v), CKPT_OK);
    assert_int_equal(ckpt_save(ctx, 4), CKPT_E_INVAL);
    assert_non_null(strstr(ckpt_errmsg(ctx), "directory"));
    assert_int_equal(ckpt_unprotect(ctx, "sub"), CKPT_OK);
    save_ok(ctx, 4);
    ckpt_close(ctx);
}

/* Any real file name (spaces, '+', accents, CJK) is checkpointed and
 * restored under its name; the manifest is format 3 only then. */
static void test_utf8_names(void **state)
{
    const char *names[] = { "model bin+x.bin", "r\xc3\xa9sum\xc3\xa9.txt",
                            "\xe6\xa8\xa1\xe5\x9e\x8b v2.pt", "dir with space/a b" };
    char src[800], out[800], p[1600], line[100];
    uint64_t step;
    (void)state;
    snprintf(src, sizeof src, "%s/usrc", g_dir);
    mkdir(src, 0700);
    struct ckpt_ctx *ctx = open_run("utf8", CKPT_CODEC_ZSTD, 0, 0);
    for (size_t i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/f%zu", src, i);
        write_file(p, names[i]);
        assert_int_equal(ckpt_protect_file(ctx, names[i], p), CKPT_OK);
    }
    assert_int_equal(ckpt_protect_file(ctx, "bad\x01name", p), CKPT_E_INVAL);
    save_ok(ctx, 1);
    assert_true(store_file_has("utf8/manifests/*", "\"format\":3,"));
    snprintf(out, sizeof out, "%s/uout", g_dir);
    assert_int_equal(ckpt_restore_dir(ctx, CKPT_STEP_LATEST, out, &step), CKPT_OK);
    for (size_t i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", out, names[i]);
        read_line(p, line, sizeof line);
        assert_string_equal(line, names[i]);
    }
    ckpt_close(ctx);
    /* the old alphabet stays format 1 */
    ctx = open_run("ascii", CKPT_CODEC_ZSTD, 0, 0);
    snprintf(p, sizeof p, "%s/f0", src);
    assert_int_equal(ckpt_protect_file(ctx, "checkpoint-1/model+x=1@a,b.bin", p), CKPT_OK);
    save_ok(ctx, 1);
    assert_true(store_file_has("ascii/manifests/*", "\"format\":1,"));
    assert_true(store_file_has("ascii/HEAD", "\"format\":1,"));
    ckpt_close(ctx);
}

/* ---- protected files that change while the workers read them ---------- */
struct rewrite {
    const char *path;
    size_t n;
    uint32_t seed;      /* content of the next rewrite */
    int mode;           /* 0 rewrite in place, 1 rename a new file over it, 2 delete */
    int done;
};

static void write_bytes(const char *path, const uint8_t *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}

/* Store hook, at a chunk's put: the trainer writes the protected file
 * again, between the reads of two of its chunks. */
static void rewrite_hook(void *user, const char *key)
{
    struct rewrite *r = user;
    uint8_t *b = malloc(r->n);
    char tmp[900];
    (void)key;
    fill_random(b, r->n, r->seed++);
    if (r->mode == 0) {
        write_bytes(r->path, b, r->n); /* same size, new bytes */
    } else if (r->mode == 1) {
        snprintf(tmp, sizeof tmp, "%s.new", r->path);
        write_bytes(tmp, b, r->n);
        assert_int_equal(rename(tmp, r->path), 0);
    } else {
        unlink(r->path);
    }
    r->done++;
    free(b);
}

static struct ckpt_ctx *open_one_worker(const char *run)
{
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *ctx = NULL;
    cfg.store = g_url;
    cfg.run = run;
    cfg.chunk_bytes = 64 << 10;
    cfg.workers = 1; /* chunks read in order: the rewrite lands between two */
    cfg.no_control = 1;
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_OK);
    return ctx;
}

/* A protected file rewritten while its chunks are read (after the first
 * chunk's put, before the second chunk's read) is read again: the
 * checkpoint holds one version of it, never a mix. Rewritten at every
 * read, the save fails naming the file; deleted before or during the read,
 * it fails with CKPT_E_NOENT. Nothing is committed by a failed save. */
static void test_file_changes_during_save(void **state)
{
    size_t n = 8 * (64 << 10) + 100;
    uint8_t *got = malloc(n), *want = malloc(n);
    char src[800], p[900], out[800];
    uint64_t step = 0;
    struct ckpt_info info[2];
    (void)state;
    snprintf(src, sizeof src, "%s/csrc", g_dir);
    mkdir(src, 0700);
    snprintf(p, sizeof p, "%s/state.pt", src);
    for (int mode = 0; mode < 2; mode++) {
        char run[32];
        struct rewrite rw = { p, n, 100, mode, 0 };
        snprintf(run, sizeof run, "chg%d", mode);
        fill_random(want, n, 1);
        write_bytes(p, want, n);
        struct ckpt_ctx *ctx = open_one_worker(run);
        ckpt__run_wait_loaded(&ctx->rs); /* the load reads ->store */
        struct fault_store *fs = fault_wrap(&ctx->store);
        fault_add(fs, &(struct fault_rule){ .op = FAULT_PUT, .key_has = "/chunks/", .nth = 1,
                                            .act = FAULT_HOOK, .hook = rewrite_hook,
                                            .user = &rw, .after = 1 });
        assert_int_equal(ckpt_protect_file(ctx, "state.pt", p), CKPT_OK);
        save_ok(ctx, 1);
        assert_int_equal(rw.done, 1);
        fill_random(want, n, 100); /* the version after the rewrite */
        snprintf(out, sizeof out, "%s/cout%d", g_dir, mode);
        assert_int_equal(ckpt_restore_dir(ctx, CKPT_STEP_LATEST, out, &step), CKPT_OK);
        snprintf(p, sizeof p, "%s/state.pt", out);
        FILE *f = fopen(p, "rb");
        assert_non_null(f);
        assert_int_equal(fread(got, 1, n, f), n);
        fclose(f);
        assert_memory_equal(got, want, n);
        snprintf(p, sizeof p, "%s/state.pt", src);
        ckpt_close(ctx);
    }
    /* rewritten at every chunk: it never holds still */
    {
        struct rewrite rw = { p, n, 200, 0, 0 };
        struct ckpt_ctx *ctx = open_one_worker("chg2");
        ckpt__run_wait_loaded(&ctx->rs); /* the load reads ->store */
        struct fault_store *fs = fault_wrap(&ctx->store);
        fault_add(fs, &(struct fault_rule){ .op = FAULT_PUT, .key_has = "/chunks/",
                                            .count = ~0u, .act = FAULT_HOOK,
                                            .hook = rewrite_hook, .user = &rw, .after = 1 });
        assert_int_equal(ckpt_protect_file(ctx, "state.pt", p), CKPT_OK);
        assert_int_equal(ckpt_save(ctx, 1), CKPT_OK);
        assert_int_equal(ckpt_wait(ctx), CKPT_E_IO);
        assert_non_null(strstr(ckpt_errmsg(ctx), "state.pt"));
        assert_non_null(strstr(ckpt_errmsg(ctx), "kept changing"));
        memset(info, 0, sizeof info);
        assert_int_equal(ckpt_list(ctx, count_cb, info), CKPT_OK);
        assert_int_equal(info[0].step, 0); /* nothing committed */
        ckpt_close(ctx);
    }
    /* deleted while it is read */
    {
        struct rewrite rw = { p, n, 300, 2, 0 };
        struct ckpt_ctx *ctx = open_one_worker("chg3");
        ckpt__run_wait_loaded(&ctx->rs); /* the load reads ->store */
        struct fault_store *fs = fault_wrap(&ctx->store);
        fault_add(fs, &(struct fault_rule){ .op = FAULT_PUT, .key_has = "/chunks/", .nth = 2,
                                            .act = FAULT_HOOK, .hook = rewrite_hook,
                                            .user = &rw, .after = 1 });
        fill_random(want, n, 1);
        write_bytes(p, want, n);
        assert_int_equal(ckpt_protect_file(ctx, "state.pt", p), CKPT_OK);
        assert_int_equal(ckpt_save(ctx, 1), CKPT_OK);
        assert_int_equal(ckpt_wait(ctx), CKPT_E_NOENT);
        assert_non_null(strstr(ckpt_errmsg(ctx), "state.pt"));
        assert_non_null(strstr(ckpt_errmsg(ctx), "deleted"));
        memset(info, 0, sizeof info);
        assert_int_equal(ckpt_list(ctx, count_cb, info), CKPT_OK);
        assert_int_equal(info[0].step, 0);
        /* and deleted before the save */
        assert_int_equal(ckpt_save(ctx, 2), CKPT_E_NOENT);
        assert_non_null(strstr(ckpt_errmsg(ctx), "state.pt"));
        ckpt_close(ctx);
    }
    /* CKPT_FILE_AS_IS: rewritten once while read -- not read again, the
     * save fails; rewritten between protect and save -- refused at once;
     * left alone -- committed as it was */
    {
        struct rewrite rw = { p, n, 400, 0, 0 };
        struct ckpt_ctx *ctx = open_one_worker("chg4");
        ckpt__run_wait_loaded(&ctx->rs); /* the load reads ->store */
        struct fault_store *fs = fault_wrap(&ctx->store);
        fault_add(fs, &(struct fault_rule){ .op = FAULT_PUT, .key_has = "/chunks/", .nth = 1,
                                            .act = FAULT_HOOK, .hook = rewrite_hook,
                                            .user = &rw, .after = 1 });
        fill_random(want, n, 1);
        write_bytes(p, want, n);
        assert_int_equal(ckpt_protect_file_ex(ctx, "state.pt", p, 8u), CKPT_E_INVAL);
        assert_int_equal(ckpt_protect_file_ex(ctx, "state.pt", p, CKPT_FILE_AS_IS), CKPT_OK);
        assert_int_equal(ckpt_save(ctx, 1), CKPT_OK);
        assert_int_equal(ckpt_wait(ctx), CKPT_E_CHANGED);
        assert_int_equal(rw.done, 1);
        assert_non_null(strstr(ckpt_errmsg(ctx), "state.pt"));
        memset(info, 0, sizeof info);
        assert_int_equal(ckpt_list(ctx, count_cb, info), CKPT_OK);
        assert_int_equal(info[0].step, 0); /* nothing committed */
        /* the item still expects the version it was protected at */
        assert_int_equal(ckpt_save(ctx, 2), CKPT_E_CHANGED);
        assert_int_equal(ckpt_unprotect(ctx, "state.pt"), CKPT_OK);
        fill_random(want, n, 7);
        write_bytes(p, want, n);
        assert_int_equal(ckpt_protect_file_ex(ctx, "state.pt", p, CKPT_FILE_AS_IS), CKPT_OK);
        fill_random(got, n, 8);
        write_bytes(p, got, n); /* another version before the save */
        assert_int_equal(ckpt_save(ctx, 3), CKPT_E_CHANGED);
        assert_int_equal(ckpt_unprotect(ctx, "state.pt"), CKPT_OK);
        assert_int_equal(ckpt_protect_file_ex(ctx, "state.pt", p, CKPT_FILE_AS_IS), CKPT_OK);
        save_ok(ctx, 4);
        snprintf(out, sizeof out, "%s/cout4", g_dir);
        assert_int_equal(ckpt_restore_dir(ctx, CKPT_STEP_LATEST, out, &step), CKPT_OK);
        assert_int_equal(step, 4);
        snprintf(p, sizeof p, "%s/state.pt", out);
        FILE *f = fopen(p, "rb");
        assert_non_null(f);
        assert_int_equal(fread(want, 1, n, f), n);
        fclose(f);
        assert_memory_equal(got, want, n);
        snprintf(p, sizeof p, "%s/state.pt", src);
        assert_int_equal(ckpt_protect_file_ex(ctx, "gone", "/nonexistent/x", CKPT_FILE_AS_IS),
                         CKPT_E_NOENT);
        ckpt_close(ctx);
    }
    free(got);
    free(want);
}

/* ckpt_open cannot queue the background load of the run (out of memory):
 * the save must still commit, not wait forever for a load that never
 * comes (it did: chunk jobs waited on it). Checked from a thread with a
 * deadline, so the old behaviour fails instead of hanging the suite. */
struct bg_save {
    struct ckpt_ctx *ctx;
    ckpt_status st;
    int done;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static void *bg_save_fn(void *arg)
{
    struct bg_save *b = arg;
    ckpt_status st = ckpt_save(b->ctx, 7);
    if (st == CKPT_OK)
        st = ckpt_wait(b->ctx);
    pthread_mutex_lock(&b->mu);
    b->st = st;
    b->done = 1;
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

static void test_load_not_queued(void **state)
{
    uint8_t buf[100000], want[100000];
    struct bg_save b = { NULL, CKPT_E_INTERNAL, 0, PTHREAD_MUTEX_INITIALIZER,
                         PTHREAD_COND_INITIALIZER };
    struct timespec until;
    pthread_t t;
    (void)state;
    /* a first commit, so the load would have had something to read */
    struct ckpt_ctx *ctx = open_run("noload", CKPT_CODEC_ZSTD, 64 << 10, 3);
    fill_random(buf, sizeof buf, 1);
    assert_int_equal(ckpt_protect(ctx, "b", buf, sizeof buf), CKPT_OK);
    save_ok(ctx, 6);
    ckpt_close(ctx);
    ckpt__failpoint_arm("pool_submit", 1); /* ckpt_open's load job */
    b.ctx = open_run("noload", CKPT_CODEC_ZSTD, 64 << 10, 3);
    ckpt__failpoint_arm(NULL, 0);
    fill_random(buf, sizeof buf, 2);
    assert_int_equal(ckpt_protect(b.ctx, "b", buf, sizeof buf), CKPT_OK);
    assert_int_equal(pthread_create(&t, NULL, bg_save_fn, &b), 0);
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 60;
    pthread_mutex_lock(&b.mu);
    while (!b.done && pthread_cond_timedwait(&b.cv, &b.mu, &until) == 0)
        ;
    pthread_mutex_unlock(&b.mu);
    if (!b.done)
        fail_msg("ckpt_save did not return within 60 s: it waits for a load never queued");
    pthread_join(t, NULL);
    assert_int_equal(b.st, CKPT_OK);
    restore_equals(b.ctx, buf, want, sizeof buf, 7);
    ckpt_close(b.ctx);
}

/* A checkpoint written with a larger chunk size than the reader's (the writer
 * set CKPT_CHUNK_BYTES, the new machine did not) restores and verifies: into
 * memory, into a protected file and into a directory. */
static void test_reader_smaller_chunks(void **state)
{
    size_t n = (3 << 20) + 12345;
    uint8_t *a = malloc(n), *copy = malloc(n);
    char src[800], out[800], p[900];
    uint64_t step = 0;
    FILE *f;
    (void)state;
    for (size_t i = 0; i < n; i++)
        a[i] = (uint8_t)((i * 2654435761u) >> 13);
    memcpy(copy, a, n);
    snprintf(src, sizeof src, "%s/big.bin", g_dir);
    f = fopen(src, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(a, 1, n, f), n);
    fclose(f);
    struct ckpt_ctx *ctx = open_run("bigchunks", CKPT_CODEC_ZSTD, 2 << 20, 3);
    assert_int_equal(ckpt_protect(ctx, "mem", a, n), CKPT_OK);
    assert_int_equal(ckpt_protect_file(ctx, "file.bin", src), CKPT_OK);
    assert_int_equal(ckpt_save(ctx, 7), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    ckpt_close(ctx);
    memset(a, 0, n);
    assert_int_equal(unlink(src), 0);
    ctx = open_run("bigchunks", CKPT_CODEC_DEFAULT, 64 << 10, 3);
    assert_int_equal(ckpt_protect(ctx, "mem", a, n), CKPT_OK);
    assert_int_equal(ckpt_protect_file(ctx, "file.bin", src), CKPT_OK);
    assert_int_equal(ckpt_restore(ctx, &step), CKPT_OK);
    assert_int_equal(step, 7);
    assert_memory_equal(a, copy, n);
    assert_int_equal(ckpt_verify(ctx, CKPT_STEP_ALL), CKPT_OK);
    snprintf(out, sizeof out, "%s/bigout", g_dir);
    assert_int_equal(ckpt_restore_dir(ctx, CKPT_STEP_LATEST, out, &step), CKPT_OK);
    ckpt_close(ctx);
    for (int k = 0; k < 2; k++) {
        snprintf(p, sizeof p, "%s", k ? src : out);
        if (!k)
            strncat(p, "/file.bin", sizeof p - strlen(p) - 1);
        memset(a, 0, n);
        f = fopen(p, "r");
        assert_non_null(f);
        assert_int_equal(fread(a, 1, n, f), n);
        fclose(f);
        assert_memory_equal(a, copy, n);
    }
    free(a);
    free(copy);
}

static void test_staging_cap_and_busy(void **state)
{
    size_t n = 3 << 20;
    uint8_t *a = malloc(n), *copy = malloc(n);
    uint64_t step;
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *ctx;
    (void)state;
    for (size_t i = 0; i < n; i++)
        a[i] = (uint8_t)(i * 31 >> 5);
    memcpy(copy, a, n);
    cfg.store = g_url;
    cfg.run = "cap";
    cfg.chunk_bytes = 64 << 10;
    cfg.staging_max_bytes = 128 << 10; /* 2 blocks for 48 chunks */
    cfg.workers = 2;
    cfg.no_control = 1;
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_OK);
    ckpt_protect(ctx, "a", a, n);
    assert_int_equal(ckpt_save(ctx, 1), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    assert_true(ckpt__staging_blocks(&ctx->staging) <= 2);
    memset(a, 0, n);
    assert_int_equal(ckpt_restore(ctx, &step), CKPT_OK);
    assert_memory_equal(a, copy, n);
    ckpt_close(ctx);
    /* BUSY_SKIP: a save while one persists returns BUSY, never blocks */
    cfg.on_busy = CKPT_BUSY_SKIP;
    cfg.staging_max_bytes = 0;
    cfg.run = "busy";
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_OK);
    ckpt_protect(ctx, "a", a, n);
    int busy = 0;
    for (int i = 0; i < 50; i++) {
        ckpt_status st = ckpt_save(ctx, (uint64_t)i + 1);
        assert_true(st == CKPT_OK || st == CKPT_E_BUSY);
        busy += st == CKPT_E_BUSY;
    }
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    print_message("%d of 50 saves skipped as busy\n", busy);
    ckpt_close(ctx);
    free(a);
    free(copy);
}

/* A writer whose view of HEAD is stale cannot commit. */
static void test_fencing(void **state)
{
    uint32_t x = 1, y = 2;
    (void)state;
    struct ckpt_ctx *a = open_run("fence", CKPT_CODEC_ZSTD, 0, 0);
    struct ckpt_ctx *b = open_run("fence", CKPT_CODEC_ZSTD, 0, 0);
    /* b has read the run (no HEAD yet) before a commits */
    pthread_mutex_lock(&b->rs.mu);
    while (!b->rs.loaded)
        pthread_cond_wait(&b->rs.cv, &b->rs.mu);
    pthread_mutex_unlock(&b->rs.mu);
    ckpt_protect(a, "x", &x, 4);
    ckpt_protect(b, "x", &y, 4);
    assert_int_equal(ckpt_save(a, 1), CKPT_OK);
    assert_int_equal(ckpt_wait(a), CKPT_OK);
    /* b loaded the run before a committed: its commit must be refused */
    assert_int_equal(ckpt_save(b, 2), CKPT_OK);
    assert_int_equal(ckpt_wait(b), CKPT_E_FENCED);
    assert_non_null(strstr(ckpt_errmsg(b), "HEAD"));
    /* having re-read the run, b can commit again */
    assert_int_equal(ckpt_save(b, 3), CKPT_OK);
    assert_int_equal(ckpt_wait(b), CKPT_OK);
    ckpt_close(a);
    ckpt_close(b);
}

/* A writer with a lease epoch cannot commit over a HEAD fenced at a newer
 * epoch (ckpt_fence by the lease's new holder): not at once (HEAD's etag)
 * and not after it re-read the run either (the epoch check). */
static void test_fence_epoch(void **state)
{
    uint32_t x = 1, y = 2;
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *a = NULL, *b = NULL;
    (void)state;
    cfg.store = g_url;
    cfg.run = "fence-epoch";
    cfg.no_control = 1;
    cfg.epoch = 1;
    assert_int_equal(ckpt_open(&cfg, &a), CKPT_OK);
    cfg.epoch = 2;
    assert_int_equal(ckpt_open(&cfg, &b), CKPT_OK);
    ckpt_protect(a, "x", &x, 4);
    ckpt_protect(b, "x", &y, 4);
    assert_int_equal(ckpt_save(a, 1), CKPT_OK);
    assert_int_equal(ckpt_wait(a), CKPT_OK);
    assert_int_equal(ckpt_fence(b, 2), CKPT_OK);
    assert_int_equal(ckpt_save(a, 2), CKPT_OK);
    assert_int_equal(ckpt_wait(a), CKPT_E_FENCED);
    assert_int_equal(ckpt_save(a, 3), CKPT_OK);
    assert_int_equal(ckpt_wait(a), CKPT_E_FENCED);
    assert_non_null(strstr(ckpt_errmsg(a), "epoch"));
    /* the holder commits */
    assert_int_equal(ckpt_save(b, 4), CKPT_OK);
    assert_int_equal(ckpt_wait(b), CKPT_OK);
    ckpt_close(a);
    ckpt_close(b);
}

static void test_bad_stores(void **state)
{
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *ctx;
    char path[800], url[900];
    (void)state;
    cfg.no_control = 1;
    cfg.run = "x";
    /* the store is a regular file */
    snprintf(path, sizeof path, "%s/notadir", g_dir);
    write_file(path, "x");
    snprintf(url, sizeof url, "file://%s", path);
    cfg.store = url;
    assert_int_not_equal(ckpt_open(&cfg, &ctx), CKPT_OK);
    assert_non_null(strstr(ckpt_errmsg(NULL), "notadir"));
    cfg.store = "nonsense://x";
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_E_CONFIG);
    cfg.store = g_url;
    cfg.run = "bad/run";
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_E_CONFIG);
    cfg.run = "ok";
    cfg.chunk_bytes = 10;
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_E_CONFIG);
    /* a full store: a small tmpfs, where we may mount one */
    char mnt[800];
    snprintf(mnt, sizeof mnt, "%s/tiny", g_dir);
    mkdir(mnt, 0700);
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=512k") != 0) {
        print_message("skipped the full-store case: cannot mount a tmpfs here\n");
        return;
    }
    snprintf(url, sizeof url, "file://%s", mnt);
    cfg.store = url;
    cfg.chunk_bytes = 0;
    cfg.codec = CKPT_CODEC_NONE;
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_OK);
    size_t n = 4 << 20;
    uint8_t *big = malloc(n);
    for (size_t i = 0; i < n; i++)
        big[i] = (uint8_t)(i * 2654435761u >> 11);
    ckpt_protect(ctx, "big", big, n);
    assert_int_equal(ckpt_save(ctx, 1), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_E_NOSPACE);
    assert_non_null(strstr(ckpt_errmsg(ctx), "chunk"));
    ckpt_close(ctx);
    free(big);
    umount(mnt);
}

/* One line from the control socket (10 s at most) into buf, parsed. */
static cJSON *wire_line(int fd, char *buf, size_t n)
{
    size_t at = 0;
    while (at + 1 < n) {
        struct pollfd p = { fd, POLLIN, 0 };
        assert_int_equal(poll(&p, 1, 10000), 1);
        assert_int_equal(read(fd, buf + at, 1), 1);
        if (buf[at] == '\n')
            break;
        at++;
    }
    buf[at] = '\0';
    return cJSON_Parse(buf);
}

/* The object has exactly these fields, in this order. */
static void wire_fields(const cJSON *o, const char *const *names, size_t n)
{
    const cJSON *f = o->child;
    for (size_t i = 0; i < n; i++, f = f->next) {
        assert_non_null(f);
        assert_string_equal(f->string, names[i]);
    }
    assert_null(f);
}

/* A save's events reach ckptrun as docs/CONTROL.md has them: `saving`,
 * then `committed` with its fields, or `failed`. */
static void test_events_on_the_wire(void **state)
{
    static const char *const saving[] = { "type", "step" };
    static const char *const committed[] = { "type", "step", "seq", "bytes", "stored",
                                             "seconds", "manifest" };
    static const char *const failed[] = { "type", "step", "error" };
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *ctx = NULL, *other;
    uint32_t x = 7, y = 8;
    char path[800];
    char line[4096];
    cJSON *o;
    int lfd, fd;
    (void)state;

    snprintf(path, sizeof path, "%s/ctl", g_dir);
    assert_true(strlen(path) < sizeof sa.sun_path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(lfd, 1), 0);
    cfg.store = g_url;
    cfg.run = "wire";
    setenv("CKPT_SOCKET", path, 1);
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_OK);
    unsetenv("CKPT_SOCKET");
    fd = accept(lfd, NULL, NULL);
    assert_true(fd >= 0);
    o = wire_line(fd, line, sizeof line); /* hello */
    assert_string_equal(cJSON_GetObjectItem(o, "type")->valuestring, "hello");
    cJSON_Delete(o);

    assert_int_equal(ckpt_protect(ctx, "x", &x, sizeof x), CKPT_OK);
    assert_int_equal(ckpt_save(ctx, 9007199254740993ull), CKPT_OK); /* 2^53 + 1 */
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    o = wire_line(fd, line, sizeof line);
    wire_fields(o, saving, 2);
    assert_string_equal(cJSON_GetObjectItem(o, "type")->valuestring, "saving");
    cJSON_Delete(o);
    o = wire_line(fd, line, sizeof line);
    wire_fields(o, committed, 7);
    assert_string_equal(cJSON_GetObjectItem(o, "type")->valuestring, "committed");
    assert_int_equal(cJSON_GetObjectItem(o, "seq")->valuedouble, 1);
    assert_int_equal(cJSON_GetObjectItem(o, "bytes")->valuedouble, 4);
    assert_true(cJSON_IsNumber(cJSON_GetObjectItem(o, "stored")));
    assert_true(cJSON_IsNumber(cJSON_GetObjectItem(o, "seconds")));
    assert_non_null(strstr(cJSON_GetObjectItem(o, "manifest")->valuestring,
                           "wire/manifests/00000000000000000001_00009007199254740993_"));
    /* integers are written whole, not as doubles */
    assert_non_null(strstr(line, "\"step\":9007199254740993,\"seq\":1,\"bytes\":4,"));
    cJSON_Delete(o);

    /* another writer commits first: this one's save fails at its commit */
    cfg.no_control = 1;
    assert_int_equal(ckpt_open(&cfg, &other), CKPT_OK);
    assert_int_equal(ckpt_protect(other, "x", &y, sizeof y), CKPT_OK);
    assert_int_equal(ckpt_save(other, 10), CKPT_OK);
    assert_int_equal(ckpt_wait(other), CKPT_OK);
    ckpt_close(other);
    assert_int_equal(ckpt_save(ctx, 11), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_E_FENCED);
    o = wire_line(fd, line, sizeof line);
    wire_fields(o, saving, 2);
    cJSON_Delete(o);
    o = wire_line(fd, line, sizeof line);
    wire_fields(o, failed, 3);
    assert_int_equal(cJSON_GetObjectItem(o, "step")->valuedouble, 11);
    assert_string_equal(cJSON_GetObjectItem(o, "error")->valuestring,
                        ckpt_strerror(CKPT_E_FENCED));
    cJSON_Delete(o);
    ckpt_close(ctx);
    close(fd);
    close(lfd);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_codecs),
        cmocka_unit_test(test_dedup_1gib),
        cmocka_unit_test(test_retention_and_gc),
        cmocka_unit_test(test_packs),
        cmocka_unit_test(test_packs_mixed),
        cmocka_unit_test(test_streamed_ranges),
        cmocka_unit_test(test_threads_block_signals),
        cmocka_unit_test(test_damage_falls_back),
        cmocka_unit_test(test_shape_errors),
        cmocka_unit_test(test_files_and_restore_dir),
        cmocka_unit_test(test_links),
        cmocka_unit_test(test_utf8_names),
        cmocka_unit_test(test_file_changes_during_save),
        cmocka_unit_test(test_load_not_queued),
        cmocka_unit_test(test_reader_smaller_chunks),
        cmocka_unit_test(test_staging_cap_and_busy),
        cmocka_unit_test(test_fencing),
        cmocka_unit_test(test_fence_epoch),
        cmocka_unit_test(test_bad_stores),
        cmocka_unit_test(test_events_on_the_wire),
    };
    if (getenv("CKPT_TEST_FILTER")) /* one test by name, when working on it */
        cmocka_set_test_filter(getenv("CKPT_TEST_FILTER"));
    return cmocka_run_group_tests(tests, store_setup, store_teardown);
}
