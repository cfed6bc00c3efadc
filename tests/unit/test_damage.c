/* test_damage.c -- damage told as damage, and only damage (issue: a
 * hostile-store and kill review):
 *   - a format-1 manifest claiming 2 ranks is damage, not a newer format:
 *     restore falls back past it, verify reports it, saves go on above it;
 *   - a checkpoint retention removes while verify or restore reads it is
 *     gone, not damaged (deterministic: the store seam runs a commit of
 *     another writer in the middle of the read);
 *   - an in-memory restore falls back past a newest manifest that lies
 *     about its items' sizes or names while older ones fit, and still
 *     refuses (CKPT_E_SIZE / CKPT_E_MISMATCH, nothing written) when every
 *     checkpoint disagrees with the program;
 *   - a damaged HEAD (garbage, a bad checksum, empty) leaves the run
 *     readable from its manifests, the next commit or fence rewrites it
 *     conditionally, a fenced runner's leftovers stay out and that runner
 *     still cannot commit, gc deletes nothing meanwhile;
 *   - over a damaged HEAD, ckpt_mark_damaged (and a lease holder's restore
 *     that falls back) rewrite HEAD with the marks, and a writer whose HEAD
 *     was damaged between two saves commits the second (its own manifest,
 *     in the manifests' view, is not another runner's commit). */
#include <stdatomic.h>
#define TEST_STORE_FIXTURE
#include "test_util.h"
#include "core/ctx.h"
#include "format/envelope.h"
#include "fault_store.h"
#include "run/runobj.h"

#define N 1000

/* A context on the run keeping `keep` checkpoints. */
static struct ckpt_ctx *open_kept(const char *run, uint64_t epoch, unsigned keep)
{
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *ctx = NULL;
    cfg.store = g_url;
    cfg.run = run;
    cfg.chunk_bytes = 64 << 10;
    cfg.codec = CKPT_CODEC_NONE;
    cfg.epoch = epoch;
    cfg.keep = keep;
    cfg.no_control = 1;
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_OK);
    return ctx;
}

static struct ckpt_ctx *open_ctx(const char *run, uint64_t epoch)
{
    return open_kept(run, epoch, 3);
}

/* Bytes that differ with every seed: each step has chunks of its own. */
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

/* A writer of run `run` with steps 1..n committed, item "b" holding
 * fill(step) (and "c" holding fill(100 + step) when two). */
/* Steps 1..n saved on a context keeping `keep`: b (and c unless NULL)
 * filled from each step. */
static struct ckpt_ctx *writer_kept(const char *run, uint64_t epoch, unsigned keep, uint8_t *b,
                                    uint8_t *c, uint64_t n)
{
    struct ckpt_ctx *ctx = open_kept(run, epoch, keep);
    assert_int_equal(ckpt_protect(ctx, "b", b, N), CKPT_OK);
    if (c)
        assert_int_equal(ckpt_protect(ctx, "c", c, N), CKPT_OK);
    for (uint64_t s = 1; s <= n; s++) {
        fill(b, N, s);
        if (c)
            fill(c, N, 100 + s);
        assert_int_equal(ckpt_save(ctx, s), CKPT_OK);
        assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    }
    return ctx;
}

static struct ckpt_ctx *writer(const char *run, uint64_t epoch, uint8_t *b, uint8_t *c, uint64_t n)
{
    return writer_kept(run, epoch, 3, b, c, n);
}

/* The full key of the manifest HEAD names for `step` ("" when none). */
static void manifest_of(struct ckpt_ctx *ctx, uint64_t step, char *key, size_t n)
{
    struct ckpt_head h;
    bool exists;
    key[0] = '\0';
    assert_int_equal(ckpt__read_head(ctx, &h, NULL, &exists), CKPT_OK);
    for (size_t i = 0; i < h.n; i++)
        if (h.entries[i].step == step)
            ckpt__run_key(ctx, h.entries[i].manifest, key, n);
    ckpt__head_free(&h);
    assert_true(key[0]);
}

/* The store's bytes at key replaced behind the library's back. A context
 * keeps the manifests it read (runread.c: they are immutable), so this one
 * forgets them too: it then reads the run as one opened after the damage. */
static void put_raw(struct ckpt_ctx *ctx, const char *key, const void *b, size_t n)
{
    struct ckpt_put_opts po = { CKPT_PUT_PLAIN, NULL, 0 };
    assert_int_equal(ckpt_store_put(ctx->store, key, b, n, &po, NULL, NULL), CKPT_OK);
    ckpt__mcache_clear(&ctx->mcache);
}

/* A hostile store's doing: the record at key edited and sealed again (its
 * checksum is right, its content is not). */
static void rewrite(struct ckpt_ctx *ctx, const char *key, void (*edit)(cJSON *))
{
    void *buf = NULL;
    size_t len, jl;
    char err[CKPT_ERR_MAX], *txt, *out, *sealed;
    assert_int_equal(ckpt_store_get(ctx->store, key, 1u << 24, &buf, &len, NULL, err), CKPT_OK);
    assert_int_equal(ckpt__envelope_open(buf, len, &jl, err), CKPT_OK);
    txt = strndup(buf, jl);
    cJSON *root = cJSON_Parse(txt);
    assert_non_null(root);
    edit(root);
    out = cJSON_PrintUnformatted(root);
    sealed = ckpt__envelope_seal(out, &len);
    put_raw(ctx, key, sealed, len);
    free(sealed);
    cJSON_free(out);
    cJSON_Delete(root);
    free(txt);
    free(buf);
}

static int has_step(void *user, const struct ckpt_info *i)
{
    uint64_t *want = user;
    if (i->step == want[0])
        want[1] = 1;
    return 0;
}

static int listed(struct ckpt_ctx *ctx, uint64_t step)
{
    uint64_t q[2] = { step, 0 };
    assert_int_equal(ckpt_list(ctx, has_step, q), CKPT_OK);
    return (int)q[1];
}

static int count_rows(void *user, const struct ckpt_info *i)
{
    (void)i;
    (*(size_t *)user)++;
    return 0;
}

/* ---- a format-1 manifest of 2 ranks --------------------------------------- */

static void two_ranks(cJSON *root)
{
    cJSON_ReplaceItemInObject(root, "world_size", cJSON_CreateNumber(2));
}

/* It was taken for a newer format: every later save failed with "holds
 * checkpoints of a newer format ... upgrade; nothing committed". */
static void test_old_format_with_ranks_is_damage(void **state)
{
    uint8_t b[N], got[N], want[N];
    char key[1024];
    uint64_t step = 0;
    (void)state;
    struct ckpt_ctx *w = writer("ranks1", 0, b, NULL, 2);
    manifest_of(w, 2, key, sizeof key);
    ckpt_close(w);
    {
        struct ckpt_ctx *r = open_ctx("ranks1", 0);
        rewrite(r, key, two_ranks);
        assert_int_equal(ckpt_verify(r, CKPT_STEP_ALL), CKPT_E_CORRUPT);
        assert_non_null(strstr(ckpt_errmsg(r), "only format 4 has ranks"));
        assert_null(strstr(ckpt_errmsg(r), "newer"));
        assert_int_equal(ckpt_protect(r, "b", got, N), CKPT_OK);
        assert_int_equal(ckpt_restore(r, &step), CKPT_OK);
        assert_int_equal(step, 1);
        fill(want, N, 1);
        assert_memory_equal(got, want, N);
        ckpt_close(r);
    }
    /* saves go on above it */
    w = open_ctx("ranks1", 0);
    assert_int_equal(ckpt_protect(w, "b", b, N), CKPT_OK);
    fill(b, N, 3);
    assert_int_equal(ckpt_save(w, 3), CKPT_OK);
    assert_int_equal(ckpt_wait(w), CKPT_OK);
    assert_true(listed(w, 3));
    ckpt_close(w);
    {
        struct ckpt_ctx *r = open_ctx("ranks1", 0);
        assert_int_equal(ckpt_protect(r, "b", got, N), CKPT_OK);
        assert_int_equal(ckpt_restore(r, &step), CKPT_OK);
        assert_int_equal(step, 3);
        assert_memory_equal(got, b, N);
        ckpt_close(r);
    }
}

/* ---- gone while read ------------------------------------------------------ */

struct commit_now {
    struct ckpt_ctx *w;
    uint8_t *b;
    uint64_t step;
    atomic_int done;
};

/* The store seam's hook, inside the reader's read: another writer commits
 * (keep 3), and its retention removes the oldest checkpoint. */
static void commit_hook(void *user, const char *key)
{
    struct commit_now *c = user;
    (void)key;
    if (atomic_exchange(&c->done, 1))
        return;
    fill(c->b, N, c->step);
    assert_int_equal(ckpt_save(c->w, c->step), CKPT_OK);
    assert_int_equal(ckpt_wait(c->w), CKPT_OK);
}

/* 16 of 20 `ckptrun verify` beside a trainer saving every 20 ms with
 * --keep 3 said "damaged: reading manifest ...: No such file". */
static void test_verify_beside_retention(void **state)
{
    uint8_t b[N], got[N];
    char m1[1024], chunk[1200];
    uint64_t next = 4, step = 0;
    (void)state;
    struct ckpt_ctx *w = writer("gone", 0, b, NULL, 3);
    for (int round = 0; round < 4; round++) {
        /* 0: the oldest's manifest goes between HEAD and its read; 1: its
         * chunk goes after its manifest was read (verify); 2: --step of it;
         * 3: a restore of it into a directory */
        struct ckpt_ctx *v = open_ctx("gone", 0);
        struct commit_now cn = { w, b, next++, 0 };
        struct ckpt_manifest m;
        struct ckpt_head h;
        bool exists;
        ckpt_status st;
        uint64_t oldest;
        assert_int_equal(ckpt__read_head(v, &h, NULL, &exists), CKPT_OK);
        oldest = h.entries[h.n - 1].step;
        ckpt__run_key(v, h.entries[h.n - 1].manifest, m1, sizeof m1);
        assert_int_equal(ckpt__read_manifest(v, h.entries[h.n - 1].manifest, &m), CKPT_OK);
        ckpt__chunk_key(v->run, m.items[0].chunks[0].id, chunk, sizeof chunk);
        ckpt__manifest_free(&m);
        ckpt__head_free(&h);
        ckpt__run_wait_loaded(&v->rs); /* the load reads ->store */
        struct fault_store *fs = fault_wrap(&v->store);
        if (round == 1) {
            fault_add(fs, &(struct fault_rule){ .op = FAULT_GET,
                                                .key_has = chunk,
                                                .act = FAULT_HOOK,
                                                .hook = commit_hook,
                                                .user = &cn });
            fault_add(fs, &(struct fault_rule){ .op = FAULT_GET_RANGE,
                                                .key_has = chunk,
                                                .act = FAULT_HOOK,
                                                .hook = commit_hook,
                                                .user = &cn });
        } else {
            /* the race is with the manifest's read from the store: not one
             * this context kept from its first read (runread.c) */
            ckpt__mcache_clear(&v->mcache);
            fault_add(fs, &(struct fault_rule){ .op = FAULT_GET,
                                                .key_has = m1,
                                                .act = FAULT_HOOK,
                                                .hook = commit_hook,
                                                .user = &cn });
        }
        if (round < 2) {
            st = ckpt_verify(v, CKPT_STEP_ALL);
            assert_int_equal(cn.done, 1);
            assert_int_equal(st, CKPT_OK);
        } else if (round == 2) {
            st = ckpt_verify(v, oldest);
            assert_int_equal(cn.done, 1);
            assert_int_equal(st, CKPT_E_NOENT);
            assert_non_null(strstr(ckpt_errmsg(v), "removed"));
        } else {
            char dir[900];
            snprintf(dir, sizeof dir, "%s/r%d", g_dir, round);
            st = ckpt_restore_dir(v, oldest, dir, &step);
            assert_int_equal(cn.done, 1);
            assert_int_equal(st, CKPT_E_NOENT);
            assert_non_null(strstr(ckpt_errmsg(v), "removed"));
        }
        assert_false(listed(v, oldest)); /* it really went */
        ckpt_close(v);
    }
    /* Real damage is still damage: HEAD names a manifest that is not there. */
    {
        struct ckpt_ctx *v = open_ctx("gone", 0);
        manifest_of(v, next - 1, m1, sizeof m1);
        const char *del[1] = { m1 };
        assert_int_equal(v->store->ops->del(v->store, del, 1, NULL), CKPT_OK);
        assert_int_equal(ckpt_verify(v, CKPT_STEP_ALL), CKPT_E_CORRUPT);
        assert_non_null(strstr(ckpt_errmsg(v), "reading manifest"));
        /* and a restore falls back past it */
        assert_int_equal(ckpt_protect(v, "b", got, N), CKPT_OK);
        assert_int_equal(ckpt_restore(v, &step), CKPT_OK);
        assert_int_equal(step, next - 2);
        ckpt_close(v);
    }
    ckpt_close(w);
}

/* ---- a manifest that lies about its items ---------------------------------- */

/* Item b's size and its chunk's raw length, both halved: consistent in
 * itself (decode cannot tell), not what was saved. */
static void halve_b(cJSON *root)
{
    cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(root, "items"))
    {
        if (strcmp(cJSON_GetObjectItemCaseSensitive(it, "name")->valuestring, "b"))
            continue;
        cJSON_ReplaceItemInObject(it, "size", cJSON_CreateNumber(N / 2));
        cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(it, "chunks"), 0);
        cJSON_ReplaceItemInArray(ch, 1, cJSON_CreateNumber(N / 2));
    }
}

/* Item c left out (a truncated item list, sealed again). */
static void drop_c(cJSON *root)
{
    cJSON *items = cJSON_GetObjectItemCaseSensitive(root, "items");
    for (int i = 0; i < cJSON_GetArraySize(items); i++)
        if (!strcmp(
                cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(items, i), "name")->valuestring,
                "c"))
            cJSON_DeleteItemFromArray(items, i);
}

static void count_call(void *user, const char *key)
{
    (void)key;
    atomic_fetch_add((atomic_uint *)user, 1);
}

/* A context reads each manifest from the store once (runread.c): the
 * open's load, ckpt_list and ckpt_restore share what it read; HEAD is read
 * from the store each time. ckpt_verify reads the store's own bytes, and
 * finds damage done there after the context's first read. */
static void test_manifests_read_once(void **state)
{
    uint8_t b[N], got[N], want[N];
    char key[1024];
    atomic_uint gets = 0, heads = 0;
    uint64_t step = 0;
    struct ckpt_put_opts po = { CKPT_PUT_PLAIN, NULL, 0 };
    (void)state;
    struct ckpt_ctx *w = writer("once", 0, b, NULL, 3);
    manifest_of(w, 3, key, sizeof key);
    ckpt_close(w);
    struct ckpt_ctx *r = open_ctx("once", 0);
    ckpt__run_wait_loaded(&r->rs); /* its load read the three manifests */
    struct fault_store *fs = fault_wrap(&r->store);
    fault_add(fs, &(struct fault_rule){ .op = FAULT_GET, .key_has = "/manifests/",
                                        .count = ~0u, .act = FAULT_HOOK, .hook = count_call,
                                        .user = &gets });
    fault_add(fs, &(struct fault_rule){ .op = FAULT_GET, .key_has = "/HEAD", .count = ~0u,
                                        .act = FAULT_HOOK, .hook = count_call, .user = &heads });
    assert_true(listed(r, 3));
    assert_true(listed(r, 1));
    assert_int_equal(ckpt_protect(r, "b", got, N), CKPT_OK);
    assert_int_equal(ckpt_restore(r, &step), CKPT_OK);
    assert_int_equal(step, 3);
    fill(want, N, 3);
    assert_memory_equal(got, want, N);
    assert_int_equal(atomic_load(&gets), 0);
    assert_true(atomic_load(&heads) >= 3);

    /* step 3's manifest damaged in the store: the copy kept is whole (a
     * restore from it is right: every chunk is checked against it) */
    assert_int_equal(ckpt_store_put(r->store, key, "garbage\n", 8, &po, NULL, NULL), CKPT_OK);
    memset(got, 0, N);
    assert_int_equal(ckpt_restore(r, &step), CKPT_OK);
    assert_int_equal(step, 3);
    assert_memory_equal(got, want, N);
    assert_int_equal(atomic_load(&gets), 0);
    /* verify reads the store: three manifests, step 3's damaged */
    assert_int_equal(ckpt_verify(r, CKPT_STEP_ALL), CKPT_E_CORRUPT);
    assert_int_equal(atomic_load(&gets), 3);
    assert_non_null(strstr(ckpt_errmsg(r), "damaged"));
    /* and what it found stays found: no copy of step 3 is kept now */
    memset(got, 0, N);
    assert_int_equal(ckpt_restore(r, &step), CKPT_OK);
    assert_int_equal(step, 2);
    fill(want, N, 2);
    assert_memory_equal(got, want, N);
    ckpt_close(r);
}

/* A read in flight while the cache is cleared (ckpt_verify's clear, or a
 * test's after it rewrote a manifest) brings back bytes that may be older
 * than the clear: they are not kept, and the next read goes to the store.
 * Seen under ThreadSanitizer: ckpt_open's background load of a manifest
 * ended after the test rewrote it and cleared the cache, and ckpt_verify
 * then found the old bytes kept and called the damaged run sound. */
static void test_manifest_read_across_clear(void **state)
{
    struct ckpt_mcache c;
    uint64_t gen;
    size_t len = 0;
    int mine = 0;
    void *got;
    (void)state;
    ckpt__mcache_init(&c);
    /* a read, then a clear, then the read's bytes: not kept */
    assert_null(ckpt__mcache_get(&c, "m/1", &len, &mine, &gen));
    assert_true(mine);
    ckpt__mcache_clear(&c);
    ckpt__mcache_put(&c, "m/1", "old", 3, gen);
    ckpt__mcache_read_done(&c, "m/1");
    assert_null(ckpt__mcache_get(&c, "m/1", &len, &mine, &gen));
    assert_true(mine); /* this caller reads the store */
    /* no clear between a read and its bytes: kept */
    ckpt__mcache_put(&c, "m/1", "new", 3, gen);
    ckpt__mcache_read_done(&c, "m/1");
    got = ckpt__mcache_get(&c, "m/1", &len, &mine, &gen);
    assert_non_null(got);
    assert_false(mine);
    assert_int_equal(len, 3);
    assert_memory_equal(got, "new", 3);
    free(got);
    ckpt__mcache_destroy(&c);
}

/* What a context keeps is bounded: CKPT_MCACHE_N manifests, the least
 * recently read going first. */
static void test_manifests_kept_bounded(void **state)
{
    uint8_t b[N];
    atomic_uint gets = 0;
    size_t kept = 0, bytes = 0;
    (void)state;
    ckpt_close(writer_kept("bounded", 0, 12, b, NULL, 12));
    struct ckpt_ctx *r = open_ctx("bounded", 0);
    ckpt__run_wait_loaded(&r->rs); /* read 12, oldest first: 5..12 kept */
    for (size_t i = 0; i < CKPT_MCACHE_N; i++)
        if (r->mcache.e[i].key) {
            kept++;
            bytes += r->mcache.e[i].len;
        }
    assert_int_equal(kept, CKPT_MCACHE_N);
    assert_int_equal(bytes, r->mcache.bytes);
    struct fault_store *fs = fault_wrap(&r->store);
    fault_add(fs, &(struct fault_rule){ .op = FAULT_GET, .key_has = "/manifests/",
                                        .count = ~0u, .act = FAULT_HOOK, .hook = count_call,
                                        .user = &gets });
    assert_true(listed(r, 12)); /* newest first: 12..5 from memory, 4..1 read */
    assert_int_equal(atomic_load(&gets), 4);
    ckpt_close(r);
}

static void test_restore_past_a_lying_manifest(void **state)
{
    uint8_t b[N], c[N], gb[N], gc[N], want[N];
    char key[1024];
    uint64_t step = 0;
    (void)state;
    struct ckpt_ctx *w = writer("lies", 0, b, c, 3);
    manifest_of(w, 3, key, sizeof key);
    ckpt_close(w);
    for (int how = 0; how < 2; how++) {
        struct ckpt_ctx *r = open_ctx("lies", 0);
        rewrite(r, key, how == 0 ? halve_b : drop_c);
        memset(gb, 0xee, N);
        assert_int_equal(ckpt_protect(r, "b", gb, N), CKPT_OK);
        assert_int_equal(ckpt_protect(r, "c", gc, N), CKPT_OK);
        /* was: "region size differs ... nothing restored", older intact */
        assert_int_equal(ckpt_restore(r, &step), CKPT_OK);
        assert_int_equal(step, 2);
        fill(want, N, 2);
        assert_memory_equal(gb, want, N);
        fill(want, N, 102);
        assert_memory_equal(gc, want, N);
        ckpt_close(r);
    }
    /* The program changed: every checkpoint disagrees. Nothing restored,
     * the newest one's reason. */
    {
        uint8_t big[2 * N];
        struct ckpt_ctx *r = open_ctx("lies", 0);
        memset(big, 0xee, sizeof big);
        assert_int_equal(ckpt_protect(r, "b", big, sizeof big), CKPT_OK);
        assert_int_equal(ckpt_restore(r, &step), CKPT_E_SIZE);
        assert_non_null(strstr(ckpt_errmsg(r), "checkpoint step 3"));
        assert_non_null(strstr(ckpt_errmsg(r), "nothing restored"));
        for (size_t i = 0; i < sizeof big; i++)
            assert_int_equal(big[i], 0xee);
        ckpt_close(r);
        r = open_ctx("lies", 0);
        assert_int_equal(ckpt_protect(r, "d", gc, N), CKPT_OK); /* in no checkpoint */
        assert_int_equal(ckpt_protect(r, "b", gb, N), CKPT_OK);
        assert_int_equal(ckpt_restore(r, &step), CKPT_E_MISMATCH);
        assert_non_null(strstr(ckpt_errmsg(r), "'d' is not in checkpoint step 3"));
        ckpt_close(r);
    }
}

/* ---- a damaged HEAD -------------------------------------------------------- */

static void damage_head(struct ckpt_ctx *ctx, int how)
{
    char key[1024];
    void *buf = NULL;
    size_t len;
    ckpt__run_key(ctx, "HEAD", key, sizeof key);
    if (how == 0) {
        put_raw(ctx, key, "garbage\n", 8);
    } else if (how == 1) {
        /* one byte of the JSON changed, the checksum trailer kept */
        char err[CKPT_ERR_MAX], *p;
        assert_int_equal(ckpt_store_get(ctx->store, key, 1u << 24, &buf, &len, NULL, err), CKPT_OK);
        p = memmem(buf, len, "\"step\":\"", 8);
        assert_non_null(p);
        p[8] = p[8] == '9' ? '8' : '9';
        put_raw(ctx, key, buf, len);
        free(buf);
    } else {
        put_raw(ctx, key, "", 0);
    }
}

static void test_damaged_head_readable_and_rewritten(void **state)
{
    const char *kinds[] = { "garbage", "bad checksum", "empty" };
    uint8_t b[N], got[N], want[N];
    uint64_t step = 0, deleted = 7;
    (void)state;
    for (int how = 0; how < 3; how++) {
        char run[16], dir[900], path[1000];
        size_t rows = 0;
        snprintf(run, sizeof run, "head%d", how);
        struct ckpt_ctx *w = writer(run, 0, b, NULL, 3);
        ckpt_close(w);
        struct ckpt_ctx *r = open_ctx(run, 0);
        damage_head(r, how);
        print_message("HEAD %s\n", kinds[how]);
        {
            struct ckpt_head h;
            bool exists;
            assert_int_equal(ckpt__read_head(r, &h, NULL, &exists), CKPT_E_CORRUPT);
        }
        /* listed, restored (memory and files) from the manifests */
        assert_int_equal(ckpt_list(r, count_rows, &rows), CKPT_OK);
        assert_int_equal(rows, 3);
        assert_int_equal(ckpt_protect(r, "b", got, N), CKPT_OK);
        assert_int_equal(ckpt_restore(r, &step), CKPT_OK);
        assert_int_equal(step, 3);
        fill(want, N, 3);
        assert_memory_equal(got, want, N);
        snprintf(dir, sizeof dir, "%s/%s-out", g_dir, run);
        assert_int_equal(ckpt_restore_dir(r, 2, dir, &step), CKPT_OK);
        snprintf(path, sizeof path, "%s/b", dir);
        assert_int_equal(access(path, F_OK), 0);
        /* verify: HEAD is damage, the checkpoints are intact */
        assert_int_equal(ckpt_verify(r, CKPT_STEP_ALL), CKPT_E_CORRUPT);
        assert_non_null(strstr(ckpt_errmsg(r), "HEAD is damaged"));
        assert_non_null(strstr(ckpt_errmsg(r), "3 checkpoints its manifests show verify intact"));
        /* gc acts on HEAD alone: it deletes nothing */
        assert_int_equal(ckpt_gc(r, 1, 0, &deleted), CKPT_E_CORRUPT);
        assert_int_equal(deleted, 0);
        assert_non_null(strstr(ckpt_errmsg(r), "gc deletes nothing until HEAD is rewritten"));
        ckpt_close(r);
        /* the next save commits, over the damaged HEAD */
        w = open_ctx(run, 0);
        assert_int_equal(ckpt_protect(w, "b", b, N), CKPT_OK);
        fill(b, N, 4);
        assert_int_equal(ckpt_save(w, 4), CKPT_OK);
        assert_int_equal(ckpt_wait(w), CKPT_OK);
        {
            struct ckpt_head h;
            bool exists;
            assert_int_equal(ckpt__read_head(w, &h, NULL, &exists), CKPT_OK);
            assert_int_equal(h.n, 3); /* keep 3: 4, 3, 2 */
            assert_int_equal(h.entries[0].step, 4);
            assert_int_equal(h.entries[2].step, 2);
            ckpt__head_free(&h);
        }
        assert_int_equal(ckpt_verify(w, CKPT_STEP_ALL), CKPT_OK);
        ckpt_close(w);
    }
}

/* A runner that lost its lease left a manifest (its refused commit's, not
 * deleted); then HEAD is damaged. The manifests' view leaves it out, that
 * runner still cannot commit, the holder can, and a fence rewrites HEAD
 * conditionally with the new epoch. A manifest of a newer format among
 * them stops writers (they could not keep it). */
static void test_damaged_head_fencing(void **state)
{
    uint8_t a[N], b[N];
    char key[1024];
    uint64_t step = 0;
    (void)state;
    struct ckpt_ctx *ra = writer("fenced", 1, a, NULL, 2);
    struct ckpt_ctx *rb = open_ctx("fenced", 0);
    assert_int_equal(ckpt_protect(rb, "b", b, N), CKPT_OK);
    assert_int_equal(ckpt_fence(rb, 2), CKPT_OK);
    fill(b, N, 3);
    assert_int_equal(ckpt_save(rb, 3), CKPT_OK);
    assert_int_equal(ckpt_wait(rb), CKPT_OK);
    /* A, fenced out, saves step 10; its manifest's delete fails */
    ckpt__run_wait_loaded(&ra->rs);
    struct fault_store *fs = fault_wrap(&ra->store);
    fault_add(fs, &(struct fault_rule){ .op = FAULT_DEL,
                                        .key_has = "/manifests/",
                                        .count = ~0u,
                                        .act = FAULT_FAIL,
                                        .status = CKPT_E_TRANSIENT });
    fill(a, N, 10);
    assert_int_equal(ckpt_save(ra, 10), CKPT_OK);
    assert_int_equal(ckpt_wait(ra), CKPT_E_FENCED);
    damage_head(rb, 0);
    /* readers: 3, 2, 1 -- not A's step 10 */
    {
        struct ckpt_ctx *r = open_ctx("fenced", 0);
        uint8_t got[N];
        assert_false(listed(r, 10));
        assert_true(listed(r, 3) && listed(r, 1));
        assert_int_equal(ckpt_protect(r, "b", got, N), CKPT_OK);
        assert_int_equal(ckpt_restore(r, &step), CKPT_OK);
        assert_int_equal(step, 3);
        assert_memory_equal(got, b, N);
        ckpt_close(r);
    }
    /* A (a fresh context of its lease) still cannot commit: the manifests
     * carry epoch 2 */
    ckpt_close(ra);
    ra = open_ctx("fenced", 1);
    assert_int_equal(ckpt_protect(ra, "b", a, N), CKPT_OK);
    fill(a, N, 11);
    assert_int_equal(ckpt_save(ra, 11), CKPT_OK);
    assert_int_equal(ckpt_wait(ra), CKPT_E_FENCED);
    assert_non_null(strstr(ckpt_errmsg(ra), "fenced at epoch 2"));
    ckpt_close(ra);
    /* C takes the lease (epoch 3): its fence rewrites HEAD */
    {
        struct ckpt_ctx *rc = open_ctx("fenced", 0);
        struct ckpt_head h;
        bool exists;
        assert_int_equal(ckpt_fence(rc, 3), CKPT_OK);
        assert_int_equal(ckpt__read_head(rc, &h, NULL, &exists), CKPT_OK);
        assert_int_equal(h.epoch, 3);
        assert_int_equal(h.entries[0].step, 3);
        for (size_t i = 0; i < h.n; i++)
            assert_int_not_equal(h.entries[i].step, 10);
        ckpt__head_free(&h);
        ckpt_close(rc);
    }
    /* B, fenced by C now, is refused as before */
    fill(b, N, 4);
    assert_int_equal(ckpt_save(rb, 4), CKPT_OK);
    assert_int_equal(ckpt_wait(rb), CKPT_E_FENCED);
    ckpt_close(rb);
    /* a newer format among the manifests of a run whose HEAD is damaged */
    {
        struct ckpt_ctx *r = open_ctx("fenced", 3);
        const char *fut =
            "{\"format\":5,\"kind\":\"manifest\",\"step\":\"20\",\"seq\":\"20\",\"epoch\":\"3\","
            "\"time_ms\":1,\"rank\":0,\"world_size\":1,\"chunk_bytes\":65536,\"new_bytes\":0,"
            "\"writer\":\"future:1\",\"items\":[]}";
        size_t len;
        char *sealed = ckpt__envelope_seal(fut, &len);
        snprintf(key, sizeof key,
                 "fenced/manifests/00000000000000000020_00000000000000000020_"
                 "0000000003_00000000.ckm");
        put_raw(r, key, sealed, len);
        free(sealed);
        damage_head(r, 2);
        assert_true(listed(r, 3)); /* readers go on */
        assert_int_equal(ckpt_fence(r, 4), CKPT_E_UNSUPPORTED);
        assert_non_null(strstr(ckpt_errmsg(r), "upgrade"));
        assert_int_equal(ckpt_protect(r, "b", b, N), CKPT_OK);
        assert_int_equal(ckpt_save(r, 21), CKPT_OK);
        assert_int_equal(ckpt_wait(r), CKPT_E_UNSUPPORTED);
        ckpt_close(r);
    }
}

/* ---- marking damage, and committing, over a damaged HEAD ------------------ */

/* Step `step`'s first chunk deleted: that checkpoint is damaged. */
static void drop_chunk(struct ckpt_ctx *ctx, uint64_t step)
{
    struct ckpt_head h;
    struct ckpt_manifest m;
    bool exists;
    char chunk[1200];
    const char *del[1] = { chunk };
    assert_int_equal(ckpt__read_head(ctx, &h, NULL, &exists), CKPT_OK);
    for (size_t i = 0; i < h.n; i++)
        if (h.entries[i].step == step) {
            assert_int_equal(ckpt__read_manifest(ctx, h.entries[i].manifest, &m), CKPT_OK);
            ckpt__chunk_key(ctx->run, m.items[0].chunks[0].id, chunk, sizeof chunk);
            ckpt__manifest_free(&m);
        }
    ckpt__head_free(&h);
    assert_int_equal(ctx->store->ops->del(ctx->store, del, 1, NULL), CKPT_OK);
}

/* ckpt_mark_damaged (and so the marking a restore by the lease holder
 * does) read HEAD alone: over a damaged HEAD they failed with "HEAD is
 * damaged", leaving the damaged checkpoint first in the resume order for
 * every restart to try again. */
static void test_mark_over_damaged_head(void **state)
{
    uint8_t b[N], got[N], want[N];
    uint64_t step = 0, three = 3;
    struct ckpt_head h;
    bool exists;
    (void)state;
    /* ckpt_mark_damaged by step: HEAD rewritten from the manifests, with
     * step 3 in its damaged list and the holder's epoch */
    struct ckpt_ctx *w = writer("mark", 1, b, NULL, 3);
    ckpt_close(w);
    struct ckpt_ctx *r = open_ctx("mark", 2);
    damage_head(r, 0);
    if (ckpt_mark_damaged(r, &three, 1) != CKPT_OK)
        fail_msg("ckpt_mark_damaged: %s", ckpt_errmsg(r));
    assert_int_equal(ckpt__read_head(r, &h, NULL, &exists), CKPT_OK);
    assert_int_equal(h.n, 2);
    assert_int_equal(h.entries[0].step, 2);
    assert_int_equal(h.ndamaged, 1);
    assert_int_equal(h.damaged[0].step, 3);
    assert_int_equal(h.epoch, 2);
    ckpt__head_free(&h);
    ckpt_close(r);
    /* a restore by the lease holder falls back past a damaged checkpoint
     * and marks it, HEAD damaged or not */
    w = writer("markr", 1, b, NULL, 3);
    drop_chunk(w, 3);
    damage_head(w, 1);
    ckpt_close(w);
    r = open_ctx("markr", 1);
    assert_int_equal(ckpt_protect(r, "b", got, N), CKPT_OK);
    assert_int_equal(ckpt_restore(r, &step), CKPT_OK);
    assert_int_equal(step, 2);
    fill(want, N, 2);
    assert_memory_equal(got, want, N);
    assert_int_equal(ckpt__read_head(r, &h, NULL, &exists), CKPT_OK);
    assert_int_equal(h.n, 2);
    assert_int_equal(h.ndamaged, 1);
    assert_int_equal(h.damaged[0].step, 3);
    ckpt__head_free(&h);
    ckpt_close(r);
}

/* A writer that read HEAD whole, then HEAD is damaged under it: its next
 * commit's conditional write is refused, the run read again from the
 * manifests -- which name the manifest this very commit just wrote. It was
 * taken for another runner's commit: refused (CKPT_E_FENCED) and its
 * manifest deleted, one checkpoint lost. */
static void test_commit_after_head_damaged_under_writer(void **state)
{
    uint8_t b[N], got[N];
    uint64_t step = 0;
    struct ckpt_head h;
    bool exists;
    (void)state;
    struct ckpt_ctx *w = writer("under", 0, b, NULL, 2);
    damage_head(w, 2);
    fill(b, N, 3);
    assert_int_equal(ckpt_save(w, 3), CKPT_OK);
    if (ckpt_wait(w) != CKPT_OK)
        fail_msg("the save over a damaged HEAD: %s", ckpt_errmsg(w));
    assert_int_equal(ckpt__read_head(w, &h, NULL, &exists), CKPT_OK);
    assert_int_equal(h.n, 3);
    assert_int_equal(h.entries[0].step, 3);
    ckpt__head_free(&h);
    assert_int_equal(ckpt_verify(w, CKPT_STEP_ALL), CKPT_OK);
    ckpt_close(w);
    struct ckpt_ctx *r = open_ctx("under", 0);
    assert_int_equal(ckpt_protect(r, "b", got, N), CKPT_OK);
    assert_int_equal(ckpt_restore(r, &step), CKPT_OK);
    assert_int_equal(step, 3);
    assert_memory_equal(got, b, N);
    ckpt_close(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_old_format_with_ranks_is_damage),
        cmocka_unit_test(test_verify_beside_retention),
        cmocka_unit_test(test_manifests_read_once),
        cmocka_unit_test(test_manifests_kept_bounded),
        cmocka_unit_test(test_manifest_read_across_clear),
        cmocka_unit_test(test_restore_past_a_lying_manifest),
        cmocka_unit_test(test_damaged_head_readable_and_rewritten),
        cmocka_unit_test(test_damaged_head_fencing),
        cmocka_unit_test(test_mark_over_damaged_head),
        cmocka_unit_test(test_commit_after_head_damaged_under_writer),
    };
    if (getenv("CKPT_TEST_FILTER"))
        cmocka_set_test_filter(getenv("CKPT_TEST_FILTER"));
    return cmocka_run_group_tests(tests, store_setup, store_teardown);
}
