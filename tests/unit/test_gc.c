/* test_gc.c -- gc against saves of other contexts, at the instants that
 * matter, made deterministic by pausing or hooking store calls
 * (fault_store.h): gc never deletes what a committed checkpoint or a save
 * in flight will commit with. */
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#define TEST_STORE_FIXTURE
#include "test_util.h"
#include "format/codec.h"
#include "core/ctx.h"
#include "format/gcrecord.h"
#include "format/head.h"
#include "run/runobj.h"
#include "fault_store.h"

#define N (4 * (64 << 10)) /* 4 chunks of 64 KiB */

static struct ckpt_ctx *open_ctx(const char *run, unsigned keep)
{
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *ctx = NULL;
    cfg.store = g_url;
    cfg.run = run;
    cfg.chunk_bytes = 64 << 10;
    cfg.keep = keep;
    cfg.codec = CKPT_CODEC_NONE;
    cfg.no_control = 1;
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_OK);
    return ctx;
}

/* Chunk c of step s: each chunk's bytes a function of (seed, c). */
static void fill(uint8_t *b, const uint32_t seed[4])
{
    for (int c = 0; c < 4; c++) {
        uint64_t x = 0x9e3779b97f4a7c15ull * (seed[c] + 1);
        for (size_t i = 0; i < (64 << 10); i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b[(size_t)c * (64 << 10) + i] = (uint8_t)(x >> 24);
        }
    }
}

static void save_ok(struct ckpt_ctx *ctx, uint64_t step)
{
    assert_int_equal(ckpt_save(ctx, step), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);
}

/* Every committed checkpoint verifies, and the newest restores to `want`
 * at `step`, in a fresh context. */
static void check_run(const char *run, uint64_t step, const uint8_t *want)
{
    static uint8_t got[N];
    uint64_t s = 0;
    struct ckpt_ctx *ctx = open_ctx(run, 3);
    assert_int_equal(ckpt_verify(ctx, CKPT_STEP_ALL), CKPT_OK);
    assert_int_equal(ckpt_protect(ctx, "b", got, N), CKPT_OK);
    assert_int_equal(ckpt_restore(ctx, &s), CKPT_OK);
    assert_int_equal(s, step);
    assert_memory_equal(got, want, N);
    ckpt_close(ctx);
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

/* ---- the race: a save commits while gc works -------------------- */
struct save_now {
    struct ckpt_ctx *w;
    const char *run;
    uint64_t step;
    int done;
};

/* The files under the run's directory in the store, one per line. */
static char *run_files(const char *run)
{
    char cmd[1024], *text = NULL;
    size_t cap = 0;
    FILE *p;
    snprintf(cmd, sizeof cmd, "find '%s/store/%s' -type f | sort", g_dir, run);
    p = popen(cmd, "r");
    assert_non_null(p);
    assert_true(getdelim(&text, &cap, '\0', p) >= 0);
    pclose(p);
    return text;
}

static void save_hook(void *user, const char *key)
{
    struct save_now *sn = user;
    struct timespec now;
    char *before, *after, *line, *next, path[1200];
    (void)key;
    /* gc read any clock it reads before listing by now */
    assert_int_equal(clock_gettime(CLOCK_REALTIME, &now), 0);
    before = run_files(sn->run);
    save_ok(sn->w, sn->step);
    sn->done++;
    /* The save's objects get times well past those of gc's start, set
     * rather than waited for (file times come from a clock that lags the
     * wall clock by a tick: written at once, they may share its time). */
    after = run_files(sn->run);
    for (line = after; *line; line = next + 1) {
        struct timespec t[2] = { { 0, UTIME_OMIT }, { now.tv_sec + 1, now.tv_nsec } };
        next = strchr(line, '\n');
        assert_non_null(next);
        *next = '\0';
        snprintf(path, sizeof path, "%s\n", line);
        if (strstr(before, path))
            continue; /* there before the save */
        assert_int_equal(utimensat(AT_FDCWD, line, t, 0), 0);
    }
    free(before);
    free(after);
}

/* gc --keep 1 with the default --min-age (15 min) lists chunks; a save of
 * step 2 commits (chunks, manifest, HEAD); gc then lists manifests and
 * finds step 2's, unknown to the HEAD it read. Before the fix its clock,
 * read before it waited and listed, made every object written after it
 * look older than any --min-age (the difference wrapped) and gc deleted
 * the new manifest: HEAD named a checkpoint that was gone. */
static void test_save_commits_during_gc(void **state)
{
    static uint8_t b[N];
    const uint32_t s1[4] = { 1, 2, 3, 4 }, s2[4] = { 5, 6, 7, 8 };
    uint64_t deleted = 0;
    (void)state;
    struct ckpt_ctx *w = open_ctx("race1", 3), *g = open_ctx("race1", 3);
    assert_int_equal(ckpt_protect(w, "b", b, N), CKPT_OK);
    fill(b, s1);
    save_ok(w, 1);
    struct save_now sn = { w, "race1", 2, 0 };
    fill(b, s2);
    ckpt__run_wait_loaded(&g->rs); /* the load reads ->store */
    struct fault_store *fs = fault_wrap(&g->store);
    fault_add(fs, &(struct fault_rule){ .op = FAULT_LIST, .key_has = "/chunks/",
                                        .act = FAULT_HOOK, .hook = save_hook, .user = &sn,
                                        .after = 1 });
    assert_int_equal(ckpt_gc(g, 1, 15 * 60000, &deleted), CKPT_OK);
    assert_int_equal(sn.done, 1);
    check_run("race1", 2, b);
    ckpt_close(g);
    ckpt_close(w);
}

/* ---- a save in flight whose objects gc deletes: refused, not broken ----- */
struct gc_now {
    struct ckpt_ctx *g;
    unsigned keep;
    uint64_t min_age;
    ckpt_status st;
    uint64_t deleted;
};

static void *gc_thread(void *arg)
{
    struct gc_now *gn = arg;
    gn->st = ckpt_gc(gn->g, gn->keep, gn->min_age, &gn->deleted);
    return NULL;
}

/* The writer's HEAD write (its manifest and new chunks written) is held
 * back while gc --keep 1 --min-age 0 runs: the new chunks and manifest are
 * unknown to HEAD and old enough, so gc deletes them. Released, the
 * writer's commit must be refused: before the fix it committed a
 * checkpoint whose chunks were gone (verify failed, restore fell back). */
static void test_inflight_save_refused(void **state)
{
    static uint8_t b[N], want[N];
    const uint32_t s1[4] = { 1, 2, 3, 4 }, s2[4] = { 1, 2, 30, 40 };
    struct gc_now gn = { NULL, 1, 0, CKPT_E_INTERNAL, 0 };
    (void)state;
    struct ckpt_ctx *w = open_ctx("race2", 3);
    gn.g = open_ctx("race2", 3);
    assert_int_equal(ckpt_protect(w, "b", b, N), CKPT_OK);
    fill(b, s1);
    save_ok(w, 1);
    memcpy(want, b, N);
    ckpt__run_wait_loaded(&w->rs); /* the load reads ->store */
    struct fault_store *fs = fault_wrap(&w->store);
    int r = fault_add(fs, &(struct fault_rule){ .op = FAULT_PUT, .key_has = "/HEAD",
                                                .act = FAULT_PAUSE });
    fill(b, s2);
    assert_int_equal(ckpt_save(w, 2), CKPT_OK);
    assert_int_equal(fault_wait_paused(fs, r, 30000), 0);
    gc_thread(&gn);
    assert_int_equal(gn.st, CKPT_OK);
    assert_true(gn.deleted >= 3); /* step 2's manifest and its 2 new chunks */
    fault_release(fs, r);
    assert_int_equal(ckpt_wait(w), CKPT_E_PRECONDITION);
    assert_non_null(strstr(ckpt_errmsg(w), "gc"));
    check_run("race2", 1, want);
    /* the next save writes what it needs again and commits */
    save_ok(w, 3);
    check_run("race2", 3, b);
    ckpt_close(gn.g);
    ckpt_close(w);
}

/* gc --keep 1 drops step 1; its chunk that step 2 does not use is a victim.
 * gc is held right after it published its record (HEAD names it) and before
 * it deletes. A writer whose view predates the gc dedups step 3 against
 * that chunk: its commit is refused (the gc is deleting it). Its next save,
 * with the record in force, writes the chunk again under a name the gc
 * does not delete (a pack of its own) and commits; after the gc, every
 * checkpoint verifies. */
static void test_record_in_force(void **state)
{
    static uint8_t b[N];
    const uint32_t s1[4] = { 1, 2, 3, 4 }, s2[4] = { 10, 2, 3, 4 }, s3[4] = { 1, 20, 3, 4 };
    struct gc_now gn = { NULL, 1, 0, CKPT_E_INTERNAL, 0 };
    pthread_t t;
    (void)state;
    struct ckpt_ctx *w = open_ctx("race3", 3);
    gn.g = open_ctx("race3", 3);
    assert_int_equal(ckpt_protect(w, "b", b, N), CKPT_OK);
    fill(b, s1);
    save_ok(w, 1);
    fill(b, s2);
    save_ok(w, 2);
    ckpt__run_wait_loaded(&gn.g->rs); /* the load reads ->store */
    struct fault_store *fs = fault_wrap(&gn.g->store);
    int r = fault_add(fs, &(struct fault_rule){ .op = FAULT_PUT, .key_has = "/HEAD",
                                                .act = FAULT_PAUSE, .after = 1 });
    assert_int_equal(pthread_create(&t, NULL, gc_thread, &gn), 0);
    assert_int_equal(fault_wait_paused(fs, r, 30000), 0);
    fill(b, s3); /* chunk 0 as in step 1: the victim */
    assert_int_equal(ckpt_save(w, 3), CKPT_OK);
    assert_int_equal(ckpt_wait(w), CKPT_E_PRECONDITION);
    assert_non_null(strstr(ckpt_errmsg(w), "is deleting"));
    save_ok(w, 4); /* same bytes, the record in force */
    fault_release(fs, r);
    pthread_join(t, NULL);
    assert_int_equal(gn.st, CKPT_OK);
    check_run("race3", 4, b);
    ckpt_close(gn.g);
    ckpt_close(w);
}

/* ---- the store's clock, not this machine's ------------------------------ */
static const struct ckpt_store_ops *g_inner;
static struct ckpt_store_ops g_skewed;
static int64_t g_skew_ms;

struct skew_list {
    ckpt_list_cb cb;
    void *user;
};

static int skew_cb(void *user, const struct ckpt_obj_info *o)
{
    struct skew_list *sl = user;
    struct ckpt_obj_info c = *o;
    c.mtime_ms += g_skew_ms;
    return sl->cb(sl->user, &c);
}

static ckpt_status skewed_list(struct ckpt_store *s, const char *prefix, ckpt_list_cb cb,
                               void *user, char *err)
{
    struct skew_list sl = { cb, user };
    return g_inner->list(s, prefix, skew_cb, &sl, err);
}

/* The store's clock is an hour behind this machine (its object times are):
 * a save in flight (chunks written, HEAD not yet) must keep its chunks
 * under gc --min-age 15m. Judged by this machine's clock they looked an
 * hour old and were deleted before the fix. */
static void test_store_clock(void **state)
{
    static uint8_t b[N];
    const uint32_t s1[4] = { 1, 2, 3, 4 }, s2[4] = { 5, 6, 7, 8 };
    uint64_t deleted = 0;
    (void)state;
    struct ckpt_ctx *w = open_ctx("skew", 3), *g = open_ctx("skew", 3);
    assert_int_equal(ckpt_protect(w, "b", b, N), CKPT_OK);
    fill(b, s1);
    save_ok(w, 1);
    ckpt__run_wait_loaded(&g->rs); /* its background load reads ->store */
    g_inner = g->store->ops;
    g_skewed = *g_inner;
    g_skewed.list = skewed_list;
    g_skew_ms = -3600 * 1000;
    g->store->ops = &g_skewed;
    ckpt__run_wait_loaded(&w->rs); /* the load reads ->store */
    struct fault_store *fs = fault_wrap(&w->store);
    int r = fault_add(fs, &(struct fault_rule){ .op = FAULT_PUT, .key_has = "/manifests/",
                                                .act = FAULT_PAUSE });
    fill(b, s2);
    assert_int_equal(ckpt_save(w, 2), CKPT_OK);
    assert_int_equal(fault_wait_paused(fs, r, 30000), 0);
    assert_int_equal(ckpt_gc(g, 1, 15 * 60000, &deleted), CKPT_OK);
    assert_int_equal(deleted, 0);
    fault_release(fs, r);
    assert_int_equal(ckpt_wait(w), CKPT_OK);
    check_run("skew", 2, b);
    g->store->ops = g_inner;
    ckpt_close(g);
    ckpt_close(w);
}

/* ---- out of memory while gc learns what is live: nothing deleted -------- */
/* Each id-set insertion gc makes (the objects present, then the live set)
 * fails in turn, on a fresh run each time: gc then deletes nothing, or, if
 * the failure fell where it does not matter, every checkpoint it kept
 * still verifies. Before the fix a failed insertion into the live set was
 * ignored and gc deleted a chunk the kept checkpoint used. */
static void test_nomem_deletes_nothing(void **state)
{
    static uint8_t b[N];
    const uint32_t s1[4] = { 1, 2, 3, 4 }, s2[4] = { 5, 6, 7, 8 };
    (void)state;
    for (unsigned nth = 1; nth <= 20; nth++) {
        char run[32], p[900];
        uint64_t deleted = 0;
        snprintf(run, sizeof run, "oom%u", nth);
        struct ckpt_ctx *w = open_ctx(run, 2);
        assert_int_equal(ckpt_protect(w, "b", b, N), CKPT_OK);
        fill(b, s1);
        save_ok(w, 1);
        fill(b, s2);
        save_ok(w, 2);
        /* an orphan, as a crashed save leaves it */
        snprintf(p, sizeof p, "%s/store/%s/chunks/00", g_dir, run);
        mkdir(p, 0700);
        snprintf(p, sizeof p, "%s/store/%s/chunks/00/00000000000000000000000000000000", g_dir,
                 run);
        FILE *f = fopen(p, "w");
        fputs("junk", f);
        fclose(f);
        size_t before = count_files(run);
        ckpt__failpoint_arm("idset_put", nth);
        ckpt_status st = ckpt_gc(w, 1, 0, &deleted);
        ckpt__failpoint_arm(NULL, 0);
        if (st != CKPT_OK) {
            assert_int_equal(st, CKPT_E_NOMEM);
            assert_int_equal(deleted, 0);
            assert_int_equal(count_files(run), before);
        }
        ckpt_close(w);
        check_run(run, 2, b);
    }
}

/* ---- --dry-run --------------------------------------------------------------- */
struct seen {
    char keys[32][300];
    char why[32][200];
    int n;
};

static void seen_fn(void *user, const char *key, uint64_t size, const char *why)
{
    struct seen *s = user;
    (void)size;
    if (s->n < 32) {
        snprintf(s->keys[s->n], sizeof s->keys[0], "%s", key);
        snprintf(s->why[s->n], sizeof s->why[0], "%s", why);
        s->n++;
    }
}

static void test_dry_run(void **state)
{
    static uint8_t b[N];
    const uint32_t s1[4] = { 1, 2, 3, 4 }, s2[4] = { 5, 6, 7, 8 };
    struct seen seen = { .n = 0 };
    uint64_t n = 0;
    (void)state;
    struct ckpt_ctx *w = open_ctx("dry", 3);
    assert_int_equal(ckpt_protect(w, "b", b, N), CKPT_OK);
    fill(b, s1);
    save_ok(w, 1);
    fill(b, s2);
    save_ok(w, 2);
    size_t before = count_files("dry");
    assert_int_equal(ckpt_gc_ex(w, 1, 0, CKPT_GC_DRY_RUN, seen_fn, &seen, &n), CKPT_OK);
    assert_int_equal(n, 5); /* step 1's manifest and its 4 chunks */
    assert_int_equal(seen.n, 5);
    assert_int_equal(count_files("dry"), before);
    int manifests = 0, chunks = 0;
    for (int i = 0; i < seen.n; i++) {
        if (strstr(seen.keys[i], "/manifests/")) {
            manifests++;
            assert_non_null(strstr(seen.why[i], "step 1: past --keep 1"));
        } else {
            chunks++;
            assert_non_null(strstr(seen.why[i], "no kept checkpoint uses"));
        }
    }
    assert_int_equal(manifests, 1);
    assert_int_equal(chunks, 4);
    /* the real one deletes exactly those */
    seen.n = 0;
    assert_int_equal(ckpt_gc_ex(w, 1, 0, 0, seen_fn, &seen, &n), CKPT_OK);
    assert_int_equal(n, 5);
    assert_int_equal(count_files("dry/manifests"), 1);
    assert_int_equal(count_files("dry/chunks"), 4);
    assert_int_equal(count_files("dry/gc"), 0); /* its record is gone */
    check_run("dry", 2, b);
    ckpt_close(w);
}

/* A record left by a gc that died (named by HEAD, past its time): ignored by
 * commits, removed by the next gc with the record object. */
static void test_void_record(void **state)
{
    static uint8_t b[N];
    const uint32_t s1[4] = { 1, 2, 3, 4 };
    struct ckpt_head h;
    char etag[CKPT_ETAG_MAX], key[1024], *buf;
    size_t len;
    bool exists;
    struct ckpt_put_opts po = { CKPT_PUT_IF_MATCH, etag, 0 };
    struct ckpt_gc_victims v = { 0 };
    uint64_t n = 0;
    uint8_t id[CKPT_ID_LEN];
    (void)state;
    struct ckpt_ctx *w = open_ctx("void", 3);
    assert_int_equal(ckpt_protect(w, "b", b, N), CKPT_OK);
    fill(b, s1);
    save_ok(w, 1);
    /* the dead gc's record names step 1's first chunk */
    assert_int_equal(ckpt__read_head(w, &h, etag, &exists), CKPT_OK);
    ckpt__chunk_id(b, 64 << 10, id);
    assert_int_equal(ckpt__idset_put(&v.objs, id, 1u << CKPT_OBJ_CHUNK), 0);
    assert_int_equal(ckpt__gc_record_encode(&v, 1, &buf, &len), CKPT_OK);
    ckpt__gc_victims_free(&v);
    assert_int_equal(ckpt_store_put(w->store, "void/gc/0123456789abcdef0123456789abcdef", buf,
                                    len, NULL, NULL, NULL), CKPT_OK);
    free(buf);
    h.gc = calloc(1, sizeof *h.gc);
    h.gc[0].record = strdup("gc/0123456789abcdef0123456789abcdef");
    h.gc[0].time_ms = ckpt__now_ms() - CKPT_GC_RECORD_TTL_MS - 1000;
    h.ngc = 1;
    assert_int_equal(ckpt__head_encode(&h, &buf, &len), CKPT_OK);
    ckpt__head_free(&h);
    snprintf(key, sizeof key, "void/HEAD");
    assert_int_equal(ckpt_store_put(w->store, key, buf, len, &po, NULL, NULL), CKPT_OK);
    free(buf);
    /* a save using that chunk commits: the record is void */
    struct ckpt_ctx *w2 = open_ctx("void", 3);
    assert_int_equal(ckpt_protect(w2, "b", b, N), CKPT_OK);
    save_ok(w2, 2);
    /* gc takes it out of HEAD and deletes the record object (older than a
     * gc deletes for: backdated here) */
    {
        char p[900];
        struct timeval tv[2] = { { time(NULL) - 7200, 0 }, { time(NULL) - 7200, 0 } };
        snprintf(p, sizeof p, "%s/store/void/gc/0123456789abcdef0123456789abcdef", g_dir);
        assert_int_equal(utimes(p, tv), 0);
    }
    assert_int_equal(ckpt_gc_ex(w2, 3, 0, 0, NULL, NULL, &n), CKPT_OK);
    assert_int_equal(ckpt__read_head(w2, &h, NULL, &exists), CKPT_OK);
    assert_int_equal(h.ngc, 0);
    ckpt__head_free(&h);
    assert_int_equal(count_files("void/gc"), 0);
    check_run("void", 2, b);
    ckpt_close(w2);
    ckpt_close(w);
}

/* A store without conditional writes (s3rver): gc names no record (writing
 * HEAD back there could undo a commit), writes HEAD only to drop what is
 * past --keep, and still collects. */
static void test_store_without_conditionals(void **state)
{
    static uint8_t b[N];
    const uint32_t s1[4] = { 1, 2, 3, 4 }, s2[4] = { 5, 6, 7, 8 };
    struct ckpt_head h;
    bool exists;
    uint64_t n = 0;
    (void)state;
    struct ckpt_ctx *w = open_ctx("nocond", 3);
    assert_int_equal(ckpt_protect(w, "b", b, N), CKPT_OK);
    fill(b, s1);
    save_ok(w, 1);
    fill(b, s2);
    save_ok(w, 2);
    w->store->caps.flags &= ~(unsigned)CKPT_STORE_CONDITIONAL;
    assert_int_equal(ckpt_gc(w, 1, 0, &n), CKPT_OK);
    assert_int_equal(n, 5);
    assert_int_equal(ckpt__read_head(w, &h, NULL, &exists), CKPT_OK);
    assert_int_equal(h.n, 1);
    assert_int_equal(h.ngc, 0);
    ckpt__head_free(&h);
    assert_int_equal(count_files("nocond/gc"), 0);
    w->store->caps.flags |= CKPT_STORE_CONDITIONAL;
    check_run("nocond", 2, b);
    ckpt_close(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_save_commits_during_gc),
        cmocka_unit_test(test_inflight_save_refused),
        cmocka_unit_test(test_record_in_force),
        cmocka_unit_test(test_store_clock),
        cmocka_unit_test(test_nomem_deletes_nothing),
        cmocka_unit_test(test_dry_run),
        cmocka_unit_test(test_void_record),
        cmocka_unit_test(test_store_without_conditionals),
    };
    if (getenv("CKPT_TEST_FILTER"))
        cmocka_set_test_filter(getenv("CKPT_TEST_FILTER"));
    return cmocka_run_group_tests(tests, store_setup, store_teardown);
}
