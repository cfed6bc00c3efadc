/* test_resume.c -- what resumes: the highest step among the checkpoints
 * that restore, whatever the order of commits; every missing or damaged
 * part falls back; damaged checkpoints leave the resume order without
 * making later work unreachable. */
#include <sys/stat.h>
#define TEST_STORE_FIXTURE
#include "test_util.h"
#include "core/ctx.h"
#include "run/runobj.h"

#define N 200000

static struct ckpt_ctx *open_ctx(const char *run, unsigned keep, uint64_t epoch)
{
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *ctx = NULL;
    cfg.store = g_url;
    cfg.run = run;
    cfg.chunk_bytes = 64 << 10;
    cfg.keep = keep;
    cfg.epoch = epoch;
    cfg.no_control = 1;
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_OK);
    return ctx;
}

/* The region's bytes for step s (each chunk different from every other
 * step's). */
static void fill(uint8_t *b, uint64_t s)
{
    uint64_t x = 0x9e3779b97f4a7c15ull * (s + 1);
    for (size_t i = 0; i < N; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b[i] = (uint8_t)(x >> 24);
    }
}

static uint8_t g_buf[N], g_want[N];

static void save_step(struct ckpt_ctx *ctx, uint64_t s)
{
    fill(g_buf, s);
    assert_int_equal(ckpt_save(ctx, s), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);
}

/* ckpt_restore of a fresh context: the step it restores (0: none), and its
 * bytes must be that step's. */
static uint64_t resumes(const char *run)
{
    uint64_t s = 0;
    struct ckpt_ctx *ctx = open_ctx(run, 3, 0);
    assert_int_equal(ckpt_protect(ctx, "b", g_buf, N), CKPT_OK);
    memset(g_buf, 0, N);
    ckpt_status st = ckpt_restore(ctx, &s);
    if (st == CKPT_OK) {
        fill(g_want, s);
        assert_memory_equal(g_buf, g_want, N);
    } else {
        s = 0;
    }
    ckpt_close(ctx);
    return s;
}

struct steps {
    uint64_t v[16];
    int n;
};

static int steps_cb(void *user, const struct ckpt_info *i)
{
    struct steps *s = user;
    if (s->n < 16)
        s->v[s->n++] = i->step;
    return 0;
}

static struct steps listed(struct ckpt_ctx *ctx)
{
    struct steps s = { .n = 0 };
    assert_int_equal(ckpt_list(ctx, steps_cb, &s), CKPT_OK);
    return s;
}

static size_t count_files(const char *sub)
{
    char cmd[1024], line[64];
    size_t n = 0;
    snprintf(cmd, sizeof cmd, "find '%s/store/%s' -type f 2>/dev/null | wc -l", g_dir, sub);
    FILE *p = popen(cmd, "r");
    if (p && fgets(line, sizeof line, p))
        n = (size_t)atol(line);
    if (p)
        pclose(p);
    return n;
}

/* Delete the manifest of `step` (the file whose name carries it). */
static void remove_manifest(const char *run, uint64_t step)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -f %s/store/%s/manifests/*_%020llu_*.ckm", g_dir, run,
             (unsigned long long)step);
    assert_int_equal(system(cmd), 0);
}

/* Delete one chunk object only `step` uses (its last chunk: every step's
 * bytes differ). */
static void remove_chunk_of(struct ckpt_ctx *ctx, uint64_t step)
{
    struct ckpt_head h;
    bool exists;
    struct ckpt_manifest m;
    char key[1024], path[1600];
    assert_int_equal(ckpt__read_head(ctx, &h, NULL, &exists), CKPT_OK);
    for (size_t i = 0; i < h.n; i++)
        if (h.entries[i].step == step) {
            assert_int_equal(ckpt__read_manifest(ctx, h.entries[i].manifest, &m), CKPT_OK);
            const struct ckpt_chunk_ref *r = &m.items[0].chunks[m.items[0].nchunks - 1];
            ckpt__object_key(ctx->run, r->pack ? CKPT_OBJ_PACK : CKPT_OBJ_CHUNK,
                             r->pack ? m.packs[r->pack - 1].id : r->id, key, sizeof key);
            snprintf(path, sizeof path, "%s/store/%s", g_dir, key);
            assert_int_equal(unlink(path), 0);
            ckpt__manifest_free(&m);
        }
    ckpt__head_free(&h);
}

/* Any missing part of the newest checkpoint falls back
 * to the newest older one that restores: a missing manifest (before the
 * fix: "no committed checkpoint", and a trainer started fresh), a missing
 * chunk object, a missing pack; into the protected regions and into a
 * directory. */
static void test_missing_parts_fall_back(void **state)
{
    char out[800];
    uint64_t got = 0;
    (void)state;
    for (int what = 0; what < 3; what++) {
        char run[32];
        snprintf(run, sizeof run, "miss%d", what);
        if (what == 2)
            setenv("CKPT_PACK_BYTES", "64K", 1);
        struct ckpt_ctx *w = open_ctx(run, 3, 0);
        unsetenv("CKPT_PACK_BYTES");
        assert_int_equal(ckpt_protect(w, "b", g_buf, N), CKPT_OK);
        save_step(w, 1);
        save_step(w, 2);
        if (what == 0)
            remove_manifest(run, 2);
        else
            remove_chunk_of(w, 2);
        ckpt_close(w);
        assert_int_equal(resumes(run), 1);
        w = open_ctx(run, 3, 0);
        snprintf(out, sizeof out, "%s/out-%s", g_dir, run);
        assert_int_equal(ckpt_restore_dir(w, CKPT_STEP_LATEST, out, &got), CKPT_OK);
        assert_int_equal(got, 1);
        /* asked for by step, it says which part is missing */
        assert_int_equal(ckpt_restore_dir(w, 2, out, &got), CKPT_E_CORRUPT);
        assert_non_null(strstr(ckpt_errmsg(w), what == 0 ? "manifest" : "missing"));
        assert_int_not_equal(ckpt_verify(w, CKPT_STEP_ALL), CKPT_OK);
        /* no epoch (not the lease holder): nothing marked, step 2 still listed */
        assert_int_equal(listed(w).v[0], 2);
        ckpt_close(w);
    }
}

/* The resume order is the step order. Commits of steps
 * 5, 3, 4 (keep 2) keep 5 and 4; a late commit of step 1 is retained as
 * well (the checkpoint just committed always is) but never resumes; a
 * re-commit of step 5 supersedes it. */
static void test_step_order(void **state)
{
    struct steps s;
    (void)state;
    struct ckpt_ctx *w = open_ctx("order", 2, 0);
    assert_int_equal(ckpt_protect(w, "b", g_buf, N), CKPT_OK);
    save_step(w, 5);
    save_step(w, 3);
    s = listed(w);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.v[0], 5);
    assert_int_equal(s.v[1], 3);
    assert_int_equal(resumes("order"), 5);
    save_step(w, 4);
    s = listed(w);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.v[0], 5);
    assert_int_equal(s.v[1], 4);
    assert_int_equal(count_files("order/manifests"), 2); /* 3's was deleted */
    save_step(w, 1); /* a straggler */
    s = listed(w);
    assert_int_equal(s.n, 3);
    assert_int_equal(s.v[0], 5);
    assert_int_equal(s.v[1], 4);
    assert_int_equal(s.v[2], 1);
    assert_int_equal(resumes("order"), 5);
    save_step(w, 2); /* the next straggler replaces the previous one */
    s = listed(w);
    assert_int_equal(s.n, 3);
    assert_int_equal(s.v[2], 2);
    /* a re-commit of step 5 with other bytes supersedes the first */
    fill(g_buf, 55);
    assert_int_equal(ckpt_save(w, 5), CKPT_OK);
    assert_int_equal(ckpt_wait(w), CKPT_OK);
    s = listed(w);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.v[0], 5);
    assert_int_equal(s.v[1], 4);
    {
        uint64_t got = 0;
        struct ckpt_ctx *r = open_ctx("order", 2, 0);
        uint8_t *b = malloc(N);
        assert_int_equal(ckpt_protect(r, "b", b, N), CKPT_OK);
        assert_int_equal(ckpt_restore(r, &got), CKPT_OK);
        assert_int_equal(got, 5);
        fill(g_want, 55);
        assert_memory_equal(b, g_want, N);
        ckpt_close(r);
        free(b);
    }
    assert_int_equal(ckpt_verify(w, CKPT_STEP_ALL), CKPT_OK);
    /* gc keeps the highest steps */
    assert_int_equal(ckpt_gc(w, 1, 0, NULL), CKPT_OK);
    s = listed(w);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.v[0], 5);
    ckpt_close(w);
}

/* A HEAD written before the step order (the last commit first, as older
 * versions wrote it) reads in step order. */
static void test_old_head_order(void **state)
{
    struct ckpt_head h;
    bool exists;
    char etag[CKPT_ETAG_MAX], *buf;
    size_t len;
    struct ckpt_put_opts po = { CKPT_PUT_IF_MATCH, etag, 0 };
    (void)state;
    struct ckpt_ctx *w = open_ctx("oldhead", 3, 0);
    assert_int_equal(ckpt_protect(w, "b", g_buf, N), CKPT_OK);
    save_step(w, 7);
    save_step(w, 3);
    assert_int_equal(ckpt__read_head(w, &h, etag, &exists), CKPT_OK);
    assert_int_equal(h.entries[0].step, 7);
    /* as an older writer left it: step 3 (committed last) first, no rev */
    struct ckpt_head_entry e = h.entries[0];
    h.entries[0] = h.entries[1];
    h.entries[1] = e;
    h.rev = 0;
    assert_int_equal(ckpt__head_encode(&h, &buf, &len), CKPT_OK);
    ckpt__head_free(&h);
    assert_int_equal(ckpt_store_put(w->store, "oldhead/HEAD", buf, len, &po, NULL, NULL),
                     CKPT_OK);
    free(buf);
    ckpt_close(w);
    assert_int_equal(resumes("oldhead"), 7);
    w = open_ctx("oldhead", 3, 0);
    assert_int_equal(listed(w).v[0], 7);
    ckpt_close(w);
}

/* The lease holder (a context with an epoch)
 * that falls back past damaged checkpoints marks them damaged: they leave
 * the resume order and the count of --keep, their objects stay until gc's
 * age rule, and the trainer's later commits -- above the restored step or
 * not -- resume. Without the marking, with keep 1, a damaged step 30 would
 * hold the only place and every later commit would sit below it. */
static void test_damaged_marked(void **state)
{
    struct steps s;
    uint64_t got = 0;
    (void)state;
    struct ckpt_ctx *w = open_ctx("dmg", 3, 5);
    assert_int_equal(ckpt_fence(w, 5), CKPT_OK);
    assert_int_equal(ckpt_protect(w, "b", g_buf, N), CKPT_OK);
    save_step(w, 10);
    save_step(w, 20);
    save_step(w, 30);
    remove_chunk_of(w, 30);
    remove_manifest("dmg", 20);
    ckpt_close(w);
    /* the trainer under ckptrun (epoch 5) restores: 30 and 20 are damaged */
    w = open_ctx("dmg", 1, 5);
    assert_int_equal(ckpt_protect(w, "b", g_buf, N), CKPT_OK);
    assert_int_equal(ckpt_restore(w, &got), CKPT_OK);
    assert_int_equal(got, 10);
    fill(g_want, 10);
    assert_memory_equal(g_buf, g_want, N);
    s = listed(w);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.v[0], 10);
    assert_int_equal(ckpt_verify(w, CKPT_STEP_ALL), CKPT_OK);
    {
        struct ckpt_head h;
        bool exists;
        assert_int_equal(ckpt__read_head(w, &h, NULL, &exists), CKPT_OK);
        assert_int_equal(h.ndamaged, 2);
        assert_true(h.damaged[0].marked_ms > 0);
        ckpt__head_free(&h);
    }
    /* it trains on from 10 and commits 11, 12 (keep 1) */
    save_step(w, 11);
    save_step(w, 12);
    s = listed(w);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.v[0], 12);
    assert_int_equal(resumes("dmg"), 12);
    /* the damaged ones' objects are kept for inspection (step 30's
     * remaining chunks) until gc's age rule */
    size_t before = count_files("dmg/chunks");
    assert_int_equal(ckpt_gc(w, 1, 3600 * 1000, NULL), CKPT_OK);
    assert_int_equal(count_files("dmg/chunks"), before);
    assert_int_equal(ckpt_gc(w, 1, 0, NULL), CKPT_OK);
    assert_true(count_files("dmg/chunks") < before);
    {
        struct ckpt_head h;
        bool exists;
        assert_int_equal(ckpt__read_head(w, &h, NULL, &exists), CKPT_OK);
        assert_int_equal(h.ndamaged, 0);
        ckpt__head_free(&h);
    }
    assert_int_equal(count_files("dmg/manifests"), 1);
    assert_int_equal(resumes("dmg"), 12);
    ckpt_close(w);
}

/* ckpt_mark_damaged (for ckptrun's own fallback over file checkpoints):
 * the lease holder only; the steps named leave the resume order. */
static void test_mark_damaged_api(void **state)
{
    struct steps s;
    uint64_t steps[2] = { 3, 99 };
    (void)state;
    struct ckpt_ctx *w = open_ctx("mark", 3, 0);
    assert_int_equal(ckpt_protect(w, "b", g_buf, N), CKPT_OK);
    save_step(w, 2);
    save_step(w, 3);
    assert_int_equal(ckpt_mark_damaged(w, steps, 1), CKPT_E_INVAL); /* no epoch */
    ckpt_close(w);
    w = open_ctx("mark", 3, 4);
    assert_int_equal(ckpt_fence(w, 4), CKPT_OK);
    assert_int_equal(ckpt_mark_damaged(w, steps, 2), CKPT_OK);
    s = listed(w);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.v[0], 2);
    assert_int_equal(resumes("mark"), 2);
    /* fenced by a newer runner: refused */
    struct ckpt_ctx *other = open_ctx("mark", 3, 9);
    assert_int_equal(ckpt_fence(other, 9), CKPT_OK);
    steps[0] = 2;
    assert_int_equal(ckpt_mark_damaged(w, steps, 1), CKPT_E_FENCED);
    assert_int_equal(listed(w).v[0], 2);
    ckpt_close(other);
    ckpt_close(w);
}

/* A fresh start below the checkpoints that a restore could not use (here:
 * the program's shape changed) never pushes them out: keep 1, the highest
 * step stays, the latest low commit beside it. */
static void test_fresh_start_keeps_higher(void **state)
{
    struct steps s;
    uint64_t got;
    uint32_t other[10];
    (void)state;
    struct ckpt_ctx *w = open_ctx("fresh", 1, 0);
    assert_int_equal(ckpt_protect(w, "b", g_buf, N), CKPT_OK);
    save_step(w, 100);
    ckpt_close(w);
    w = open_ctx("fresh", 1, 0);
    assert_int_equal(ckpt_protect(w, "other", other, sizeof other), CKPT_OK);
    assert_int_equal(ckpt_restore(w, &got), CKPT_E_MISMATCH);
    for (uint32_t st = 1; st <= 3; st++) {
        other[0] = st;
        assert_int_equal(ckpt_save(w, st), CKPT_OK);
        assert_int_equal(ckpt_wait(w), CKPT_OK);
    }
    s = listed(w);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.v[0], 100);
    assert_int_equal(s.v[1], 3);
    assert_int_equal(ckpt_verify(w, CKPT_STEP_ALL), CKPT_OK);
    ckpt_close(w);
    assert_int_equal(resumes("fresh"), 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_missing_parts_fall_back),
        cmocka_unit_test(test_step_order),
        cmocka_unit_test(test_old_head_order),
        cmocka_unit_test(test_damaged_marked),
        cmocka_unit_test(test_mark_damaged_api),
        cmocka_unit_test(test_fresh_start_keeps_higher),
    };
    if (getenv("CKPT_TEST_FILTER"))
        cmocka_set_test_filter(getenv("CKPT_TEST_FILTER"));
    return cmocka_run_group_tests(tests, store_setup, store_teardown);
}
