/* Shared helpers for the unit tests. */
#ifndef TEST_UTIL_H
#define TEST_UTIL_H
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

/* A fresh private directory under $TMPDIR for one test. */
static inline char *test_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    char tmpl[512];
    snprintf(tmpl, sizeof tmpl, "%s/ckpt-test-XXXXXX", base && *base ? base : "/tmp");
    char *d = mkdtemp(tmpl);
    assert_non_null(d);
    return strdup(d);
}

static inline void test_rmrf(const char *dir)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "chmod -R u+rwx '%s' 2>/dev/null; rm -rf '%s'", dir, dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cleanup of %s failed\n", dir);
}

/* Deterministic, weight-like float data: a normal-ish distribution. */
static inline void test_fill_weights(float *w, size_t n, uint64_t seed)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        float acc = 0;
        for (int k = 0; k < 4; k++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            acc += (float)(s >> 40) / (float)(1 << 24) - 0.5f;
        }
        w[i] = acc * 0.05f;
    }
}

/* Deterministic bytes that differ with every seed (xorshift64). */
static inline void test_fill_bytes(uint8_t *b, size_t n, uint64_t seed)
{
    uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b[i] = (uint8_t)x;
    }
}
/* Whether the file at path holds exactly the n bytes at b. */
static inline int test_same_file(const char *path, const uint8_t *b, size_t n)
{
    uint8_t *got = malloc(n + 1);
    FILE *f = fopen(path, "rb");
    int same = 0;
    if (f && got)
        same = fread(got, 1, n + 1, f) == n && memcmp(got, b, n) == 0;
    if (f)
        fclose(f);
    free(got);
    return same;
}

#ifdef TEST_STORE_FIXTURE
/* One private directory per test group with a file:// store at <dir>/store:
 * cmocka_run_group_tests(tests, store_setup, store_teardown). */
static char *g_dir;
static char g_url[700];

static int store_setup(void **state)
{
    (void)state;
    g_dir = test_tmpdir();
    snprintf(g_url, sizeof g_url, "file://%s/store", g_dir);
    return 0;
}

/* `what` on the chunk objects of `run` in the store: "list" them into
 * <dir>/before, or "damage" every one not listed there (4 bytes at offset
 * 40 overwritten: inside the chunk's payload, so its hash check fails). */
static inline void test_store_chunks(const char *run, const char *what)
{
    char cmd[1500];
    if (!strcmp(what, "list"))
        snprintf(cmd, sizeof cmd, "find '%s/store/%s/chunks' -type f > '%s/before'", g_dir, run,
                 g_dir);
    else
        snprintf(cmd, sizeof cmd,
                 "for f in $(find '%s/store/%s/chunks' -type f); do grep -qx \"$f\" "
                 "'%s/before' || printf 'junk' | dd of=\"$f\" bs=1 seek=40 conv=notrunc "
                 "status=none; done",
                 g_dir, run, g_dir);
    assert_int_equal(system(cmd), 0);
}

static int store_teardown(void **state)
{
    (void)state;
    test_rmrf(g_dir);
    free(g_dir);
    return 0;
}
#endif
#endif
