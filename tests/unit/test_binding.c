/* test_binding.c -- the API a language binding needs (ckpt.h "Since 0.4.0",
 * the Python package): ckpt_protect_region's flags (NO_STAGE reserves no
 * memory), ckpt_items, ckpt_restore_step alone and agreed by ranks (the
 * fake collective of rank_threads.h), ckpt_take_request and
 * ckpt_report_file over a fake ckptrun socket. ckpt_signal is tested with
 * the other signals (test_signals.c). */
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#define TEST_STORE_FIXTURE
#include "test_util.h"

#include "ckpt.h"
#include "rank_threads.h"

static struct ckpt_ctx *open_run(const char *run)
{
    struct ckpt_config cfg = rank_cfg(g_url, run, 5);
    struct ckpt_ctx *ctx = NULL;
    if (ckpt_open(&cfg, &ctx) != CKPT_OK)
        fail_msg("ckpt_open: %s", ckpt_errmsg(NULL));
    return ctx;
}

/* Resident pages of this process, in bytes. */
static size_t rss(void)
{
    unsigned long size = 0, res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%lu %lu", &size, &res), 2);
    fclose(f);
    return res * (size_t)sysconf(_SC_PAGESIZE);
}

/* ---- ckpt_protect_region ------------------------------------------------ */
static void test_region_flags(void **state)
{
    struct ckpt_ctx *ctx = open_run("flags");
    uint32_t x[4] = { 1, 2, 3, 4 };
    (void)state;
    assert_int_equal(ckpt_protect_region(ctx, "x", x, sizeof x, CKPT_ELEM_F32, 64u), CKPT_E_INVAL);
    assert_int_equal(ckpt_protect_region(ctx, "x", x, sizeof x, (ckpt_elem)9, 0), CKPT_E_INVAL);
    assert_int_equal(ckpt_protect_region(ctx, "../x", x, sizeof x, CKPT_ELEM_F32, 0), CKPT_E_INVAL);
    /* a host pointer is no device region, whether this build has CUDA or not */
    assert_int_not_equal(
        ckpt_protect_region(ctx, "d", x, sizeof x, CKPT_ELEM_BYTES, CKPT_REGION_DEVICE), CKPT_OK);
    assert_int_equal(ckpt_protect_region(ctx, "x", x, sizeof x, CKPT_ELEM_F32,
                                         CKPT_REGION_REPLICATED | CKPT_REGION_NO_STAGE),
                     CKPT_OK);
    assert_int_equal(ckpt_protect_region(ctx, "x", x, sizeof x, CKPT_ELEM_F32, 0), CKPT_E_EXISTS);
    ckpt_close(ctx);
}

/* NO_STAGE: protecting reserves nothing (a plain protect touches a staging
 * copy of the whole region); the region still saves and restores. */
static void test_no_stage(void **state)
{
    const size_t n = 32u << 20;
    struct ckpt_ctx *ctx = open_run("nostage");
    uint8_t *a = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint8_t *b = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint8_t *want = malloc(1 << 20);
    size_t before;
    uint64_t step = 0;
    (void)state;
    assert_true(a != MAP_FAILED && b != MAP_FAILED && want);
    before = rss();
    assert_int_equal(ckpt_protect_region(ctx, "a", a, n, CKPT_ELEM_BYTES, CKPT_REGION_NO_STAGE),
                     CKPT_OK);
    if (rss() > before + (8u << 20))
        fail_msg("NO_STAGE protect made %zu MiB resident", (rss() - before) >> 20);
    before = rss();
    assert_int_equal(ckpt_protect(ctx, "b", b, n), CKPT_OK);
    /* a worker touches the staging copy after ckpt_protect returns
     * (staging.c): wait for it, bounded */
    for (int i = 0; i < 1000 && rss() < before + n / 2; i++) {
        struct timespec ms10 = { 0, 10000000 };
        nanosleep(&ms10, NULL);
    }
    if (rss() < before + n / 2)
        fail_msg("a plain protect made only %zu MiB resident (its staging) in 10 s",
                 (rss() - before) >> 20);
    assert_int_equal(ckpt_unprotect(ctx, "b"), CKPT_OK);
    test_fill_bytes(a + n - (1 << 20), 1 << 20, 42);
    memcpy(want, a + n - (1 << 20), 1 << 20);
    assert_int_equal(ckpt_save(ctx, 7), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    memset(a + n - (1 << 20), 0, 1 << 20);
    assert_int_equal(ckpt_restore(ctx, &step), CKPT_OK);
    assert_int_equal(step, 7);
    assert_memory_equal(a + n - (1 << 20), want, 1 << 20);
    ckpt_close(ctx);
    munmap(a, n);
    munmap(b, n);
    free(want);
}

/* A region's staging copy is its own size, not rounded up to chunks: a
 * state of many small tensors (an optimizer's `step` per parameter) adds
 * about its own size. */
static void test_stage_size(void **state)
{
    struct ckpt_config cfg = rank_cfg(g_url, "stagesize", 3);
    struct ckpt_ctx *ctx;
    static uint8_t small[64][1000];
    size_t before;
    (void)state;
    cfg.chunk_bytes = 4u << 20;
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_OK);
    before = rss();
    for (int i = 0; i < 64; i++) {
        char name[16];
        snprintf(name, sizeof name, "s%d", i);
        assert_int_equal(ckpt_protect(ctx, name, small[i], sizeof small[i]), CKPT_OK);
    }
    /* whole chunks: 256 MiB; their size: 64 pages */
    if (rss() > before + (16u << 20))
        fail_msg("64 regions of 1000 bytes made %zu MiB resident", (rss() - before) >> 20);
    memset(small[63], 7, sizeof small[63]);
    assert_int_equal(ckpt_save(ctx, 1), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    memset(small[63], 0, sizeof small[63]);
    assert_int_equal(ckpt_restore(ctx, NULL), CKPT_OK);
    assert_int_equal(small[63][999], 7);
    ckpt_close(ctx);
}

/* ---- ckpt_items --------------------------------------------------------- */
struct seen {
    size_t n, stop_after;
    char names[8][64];
    uint64_t size[8], step[8];
    unsigned elem[8], world[8];
    int kind[8], rep[8];
};

static int seen_cb(void *user, const struct ckpt_item_info *i)
{
    struct seen *s = user;
    if (s->n < 8) {
        snprintf(s->names[s->n], sizeof s->names[s->n], "%s", i->name);
        s->size[s->n] = i->size;
        s->elem[s->n] = i->elem_size;
        s->kind[s->n] = (int)i->kind;
        s->rep[s->n] = i->replicated;
        s->step[s->n] = i->step;
        s->world[s->n] = i->world_size;
    }
    s->n++;
    return s->stop_after && s->n == s->stop_after;
}

static void test_items(void **state)
{
    struct ckpt_ctx *ctx = open_run("items");
    float w[1000];
    uint16_t h[300];
    uint8_t raw[77];
    char path[800];
    struct seen s;
    FILE *f;
    (void)state;
    memset(&s, 0, sizeof s);
    assert_int_equal(ckpt_items(ctx, CKPT_STEP_LATEST, 0, seen_cb, &s), CKPT_E_NOENT);
    assert_int_equal(s.n, 0);
    test_fill_weights(w, 1000, 1);
    memset(h, 3, sizeof h);
    memset(raw, 9, sizeof raw);
    snprintf(path, sizeof path, "%s/file.bin", g_dir);
    f = fopen(path, "wb");
    assert_non_null(f);
    fputs("file bytes", f);
    fclose(f);
    assert_int_equal(ckpt_protect_ex(ctx, "model/w", w, sizeof w, CKPT_ELEM_F32), CKPT_OK);
    assert_int_equal(ckpt_protect_region(ctx, "model/h", h, sizeof h, CKPT_ELEM_F16, 0), CKPT_OK);
    assert_int_equal(ckpt_protect(ctx, "raw", raw, sizeof raw), CKPT_OK);
    assert_int_equal(ckpt_protect_file(ctx, "f.bin", path), CKPT_OK);
    assert_int_equal(ckpt_save(ctx, 3), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    assert_int_equal(ckpt_unprotect(ctx, "raw"), CKPT_OK);
    assert_int_equal(ckpt_save(ctx, 5), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);

    assert_int_equal(ckpt_items(ctx, 3, 0, seen_cb, &s), CKPT_OK);
    assert_int_equal(s.n, 4);
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(s.step[i], 3);
        assert_int_equal(s.world[i], 1);
        assert_int_equal(s.rep[i], 0);
        if (!strcmp(s.names[i], "model/w")) {
            assert_int_equal(s.size[i], sizeof w);
            assert_int_equal(s.elem[i], 4);
            assert_int_equal(s.kind[i], CKPT_KIND_REGION);
        } else if (!strcmp(s.names[i], "model/h")) {
            assert_int_equal(s.size[i], sizeof h);
            assert_int_equal(s.elem[i], 2);
        } else if (!strcmp(s.names[i], "raw")) {
            assert_int_equal(s.size[i], 77);
            assert_int_equal(s.elem[i], 0);
        } else {
            assert_string_equal(s.names[i], "f.bin");
            assert_int_equal(s.kind[i], CKPT_KIND_FILE);
            assert_int_equal(s.size[i], 10);
        }
    }
    memset(&s, 0, sizeof s);
    assert_int_equal(ckpt_items(ctx, CKPT_STEP_LATEST, 0, seen_cb, &s), CKPT_OK);
    assert_int_equal(s.n, 3); /* step 5: raw is gone */
    assert_int_equal(s.step[0], 5);
    memset(&s, 0, sizeof s);
    s.stop_after = 1;
    assert_int_equal(ckpt_items(ctx, 5, 0, seen_cb, &s), CKPT_OK);
    assert_int_equal(s.n, 1);
    assert_int_equal(ckpt_items(ctx, 4, 0, seen_cb, &s), CKPT_E_NOENT);
    assert_non_null(strstr(ckpt_errmsg(ctx), "no committed checkpoint at step 4"));
    assert_int_equal(ckpt_items(ctx, 5, 1, seen_cb, &s), CKPT_E_NOENT);
    assert_non_null(strstr(ckpt_errmsg(ctx), "no part 1"));
    assert_int_equal(ckpt_items(ctx, 5, 0, NULL, &s), CKPT_E_INVAL);
    ckpt_close(ctx);
}

/* ---- ckpt_restore_step -------------------------------------------------- */
static void test_restore_step(void **state)
{
    struct ckpt_ctx *ctx = open_run("rstep");
    uint8_t x[5000], want[5000];
    uint64_t step = 0;
    (void)state;
    assert_int_equal(ckpt_protect(ctx, "x", x, sizeof x), CKPT_OK);
    assert_int_equal(ckpt_restore_step(ctx, 3, &step), CKPT_E_NOENT);
    for (uint64_t s = 3; s <= 5; s += 2) {
        if (s == 5)
            test_store_chunks("rstep", "list");
        test_fill_bytes(x, sizeof x, s);
        assert_int_equal(ckpt_save(ctx, s), CKPT_OK);
        assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    }
    memset(x, 0, sizeof x);
    assert_int_equal(ckpt_restore_step(ctx, 3, &step), CKPT_OK);
    assert_int_equal(step, 3);
    test_fill_bytes(want, sizeof want, 3);
    assert_memory_equal(x, want, sizeof x);
    assert_int_equal(ckpt_restore_step(ctx, 4, &step), CKPT_E_NOENT);
    assert_int_equal(ckpt_restore_step(ctx, CKPT_STEP_LATEST, &step), CKPT_OK);
    assert_int_equal(step, 5);
    /* a size that differs: nothing written */
    assert_int_equal(ckpt_unprotect(ctx, "x"), CKPT_OK);
    assert_int_equal(ckpt_protect(ctx, "x", x, 10), CKPT_OK);
    memset(x, 0, sizeof x);
    assert_int_equal(ckpt_restore_step(ctx, 3, &step), CKPT_E_SIZE);
    assert_int_equal(x[0], 0);
    ckpt_close(ctx);

    /* step 5's chunk damaged: step 5 alone fails, with no fallback, where
     * ckpt_restore falls back to step 3 */
    test_store_chunks("rstep", "damage");
    ctx = open_run("rstep");
    assert_int_equal(ckpt_protect(ctx, "x", x, sizeof x), CKPT_OK);
    step = 0;
    assert_int_equal(ckpt_restore_step(ctx, 5, &step), CKPT_E_CORRUPT);
    assert_int_equal(step, 0);
    assert_int_equal(ckpt_restore(ctx, &step), CKPT_OK);
    assert_int_equal(step, 3);
    assert_memory_equal(x, want, sizeof x);
    assert_int_equal(ckpt_restore_step(ctx, 3, &step), CKPT_OK);
    ckpt_close(ctx);
}

/* ---- ranks agree on ckpt_restore_step ----------------------------------- */
static void save_steps(struct job *j, unsigned r, struct ckpt_ctx *ctx)
{
    CHECK_ST(j, r, ctx, ckpt_protect(ctx, "own", j->own[r], OWN_BYTES), CKPT_OK);
    CHECK_ST(j, r, ctx,
             ckpt_protect_region(ctx, "rep", j->rep[r], REP_BYTES, CKPT_ELEM_BYTES,
                                 CKPT_REGION_REPLICATED),
             CKPT_OK);
    for (uint64_t s = 1; s <= 2; s++) {
        test_fill_bytes(j->own[r], OWN_BYTES, 100 * s + r);
        test_fill_bytes(j->rep[r], REP_BYTES, s);
        CHECK_ST(j, r, ctx, ckpt_save(ctx, s), CKPT_OK);
        CHECK_ST(j, r, ctx, ckpt_wait(ctx), CKPT_OK);
    }
}

static void restore_step_one(struct job *j, unsigned r, struct ckpt_ctx *ctx)
{
    uint8_t *want = malloc(OWN_BYTES);
    uint64_t step = 0;
    CHECK_ST(j, r, ctx,
             ckpt_protect_region(ctx, "own", j->own[r], OWN_BYTES, CKPT_ELEM_BYTES,
                                 CKPT_REGION_NO_STAGE),
             CKPT_OK);
    CHECK_ST(j, r, ctx,
             ckpt_protect_region(ctx, "rep", j->rep[r], REP_BYTES, CKPT_ELEM_BYTES,
                                 CKPT_REGION_REPLICATED | CKPT_REGION_NO_STAGE),
             CKPT_OK);
    memset(j->own[r], 0, OWN_BYTES);
    CHECK_ST(j, r, ctx, ckpt_restore_step(ctx, 1, &step), CKPT_OK);
    CHECK(j, r, step == 1);
    test_fill_bytes(want, OWN_BYTES, 100 + r);
    CHECK(j, r, memcmp(want, j->own[r], OWN_BYTES) == 0);
    /* a step no rank has: every rank is told */
    CHECK_ST(j, r, ctx, ckpt_restore_step(ctx, 9, &step), CKPT_E_NOENT);
    /* ranks that pass different steps: refused on every rank */
    j->st[r][0] = ckpt_restore_step(ctx, r == 0 ? 1 : 2, &step);
    /* and then they agree again */
    CHECK_ST(j, r, ctx, ckpt_restore_step(ctx, 2, &step), CKPT_OK);
    test_fill_bytes(want, OWN_BYTES, 200 + r);
    CHECK(j, r, memcmp(want, j->own[r], OWN_BYTES) == 0);
    free(want);
}

static void test_restore_step_ranks(void **state)
{
    struct job *j = job_new(g_url);
    (void)state;
    run_job(j, 2, "rranks", save_steps, true);
    run_job(j, 2, "rranks", restore_step_one, true);
    assert_int_equal(j->st[0][0], CKPT_E_WORLD);
    assert_int_equal(j->st[1][0], CKPT_E_WORLD);
    free(j);
}

/* ---- ckpt_take_request -------------------------------------------------- */
static void test_take_request(void **state)
{
    struct ckpt_config cfg = rank_cfg(g_url, "take", 3);
    struct ckpt_ctx *ctx;
    struct timespec ms5 = { 0, 5000000 };
    (void)state;
    cfg.interval_ms = 0;
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_OK);
    assert_int_equal(ckpt_take_request(ctx), 0);
    ckpt_request(ctx, CKPT_CODEC_LZ4);
    assert_int_not_equal(ckpt_take_request(ctx), 0);
    assert_int_equal(ckpt_take_request(ctx), 0); /* once */
    assert_int_equal(ckpt_should_save(ctx), 0);
    ckpt_close(ctx);
    cfg.interval_ms = 3;
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_OK);
    nanosleep(&ms5, NULL);
    assert_int_not_equal(ckpt_take_request(ctx), 0);
    assert_int_equal(ckpt_should_save(ctx), 0); /* the interval starts again */
    nanosleep(&ms5, NULL);
    assert_int_not_equal(ckpt_should_save(ctx), 0);
    ckpt_close(ctx);
    assert_int_equal(ckpt_take_request(NULL), 0);
}

/* ---- ckpt_report_file --------------------------------------------------- */
static void read_line(int fd, char *buf, size_t n)
{
    size_t at = 0;
    while (at + 1 < n) {
        struct pollfd p = { fd, POLLIN, 0 };
        assert_true(poll(&p, 1, 10000) == 1);
        assert_true(read(fd, buf + at, 1) == 1);
        if (buf[at] == '\n')
            break;
        at++;
    }
    buf[at] = '\0';
}

static void test_report_file(void **state)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    struct ckpt_config cfg = rank_cfg(g_url, "report", 3);
    struct ckpt_ctx *ctx;
    char line[4200], want[1200], cwd[800], *longp;
    int lfd, cfd;
    (void)state;
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_OK); /* no_control: alone */
    assert_int_equal(ckpt_report_file(ctx, "/x", 1), CKPT_E_NOENT);
    ckpt_close(ctx);

    snprintf(sa.sun_path, sizeof sa.sun_path, "%s/ctl", g_dir);
    lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(lfd, 2), 0);
    setenv("CKPT_SOCKET", sa.sun_path, 1);
    setenv("CKPT_SOCKET_KEY", "00112233445566778899aabbccddeeff", 1);
    cfg.no_control = 0;
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_OK);
    cfd = accept(lfd, NULL, NULL);
    assert_true(cfd >= 0);
    read_line(cfd, line, sizeof line);
    assert_non_null(strstr(line, "\"type\":\"hello\""));
    assert_int_equal(ckpt_report_file(ctx, "/ck/checkpoint-12", 12), CKPT_OK);
    read_line(cfd, line, sizeof line);
    assert_string_equal(line, "{\"type\":\"file\",\"path\":\"/ck/checkpoint-12\",\"event\":"
                              "\"renamed\",\"step\":12,\"key\":"
                              "\"00112233445566778899aabbccddeeff\"}");
    /* relative: from the current directory */
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(ckpt_report_file(ctx, "ck/e\"1", 3), CKPT_OK);
    read_line(cfd, line, sizeof line);
    snprintf(want, sizeof want, "\"path\":\"%s/ck/e\\\"1\"", cwd);
    assert_non_null(strstr(line, want));
    /* too long for one message: refused, nothing sent */
    longp = malloc(5000);
    memset(longp, 'a', 4999);
    longp[0] = '/';
    longp[4999] = '\0';
    assert_int_equal(ckpt_report_file(ctx, longp, 1), CKPT_E_INVAL);
    assert_int_equal(ckpt_report_file(ctx, "", 1), CKPT_E_INVAL);
    free(longp);
    {
        struct pollfd p = { cfd, POLLIN, 0 };
        assert_int_equal(poll(&p, 1, 100), 0);
    }
    /* ckptrun gone */
    close(cfd);
    close(lfd);
    {
        ckpt_status st = CKPT_OK;
        for (int i = 0; i < 50 && st == CKPT_OK; i++)
            st = ckpt_report_file(ctx, "/ck/x", 1);
        assert_int_equal(st, CKPT_E_UNREACHABLE);
    }
    ckpt_close(ctx);
    unsetenv("CKPT_SOCKET");
    unsetenv("CKPT_SOCKET_KEY");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_region_flags),
        cmocka_unit_test(test_no_stage),
        cmocka_unit_test(test_stage_size),
        cmocka_unit_test(test_items),
        cmocka_unit_test(test_restore_step),
        cmocka_unit_test(test_restore_step_ranks),
        cmocka_unit_test(test_take_request),
        cmocka_unit_test(test_report_file),
    };
    unsetenv("CKPT_SOCKET");
    return cmocka_run_group_tests(tests, store_setup, store_teardown);
}
