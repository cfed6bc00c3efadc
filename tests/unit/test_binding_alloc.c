/* test_binding_alloc.c -- ckpt_restore_alloc (ckpt.h "Since 0.4.0"), the
 * restore a binding's load() is (the Python package): into memory the
 * caller allocates per item, with ckpt_restore()'s rules --
 *   - alone: the newest, a given step, items left out, protected items
 *     untouched, a failing alloc handing back what it gave;
 *   - fallback past a damaged newest, its memory handed back, marked in
 *     HEAD by a lease holder; a checkpoint without the index items (a file
 *     checkpoint) passed over;
 *   - a lying manifest: the caller's index disagrees, the one before it is
 *     restored, nothing marked; a caller that fits no checkpoint;
 *   - ranks (the fake collective of rank_threads.h): one rank's damage
 *     makes every rank fall back together, passed-over steps agreed; a
 *     checkpoint of another world size, replicated items alone. */
#include <inttypes.h>
#include <limits.h>

#define TEST_STORE_FIXTURE
#include "test_util.h"

#include "ckpt.h"
#include "core/ctx.h"
#include "format/manifest.h"
#include "rank_threads.h"
#include "run/runobj.h"

static struct ckpt_ctx *open_run(const char *run)
{
    struct ckpt_config cfg = rank_cfg(g_url, run, 5);
    struct ckpt_ctx *ctx = NULL;
    if (ckpt_open(&cfg, &ctx) != CKPT_OK)
        fail_msg("ckpt_open: %s", ckpt_errmsg(NULL));
    return ctx;
}

/* A caller of ckpt_restore_alloc that mallocs what it is asked for and
 * records everything: the calls (step, round), the memory given (released
 * or not). With `check`, round 1 checks the items against the index item
 * "idx" (lines "name size"), as a binding checks a checkpoint against its
 * structure: an item the index does not describe, or of another size, is
 * refused. */
#define MAXG 64
struct alloc_rec {
    /* settings */
    const char *leave_out; /* never taken */
    ckpt_status fail;      /* every call returns it */
    bool check;            /* round 1 checks against "idx" */
    const char *require;   /* and refuses checkpoints without this item */
    bool rep_only;         /* takes only replicated items */
    /* what happened */
    unsigned calls;
    uint64_t asked[16];
    unsigned round[16];
    size_t ngiven, released;
    char name[MAXG][32];
    uint8_t *ptr[MAXG];
    uint64_t size[MAXG], step[MAXG];
    unsigned part[MAXG], world[MAXG]; /* as the item's info says */
    bool gone[MAXG];
};

static int given(const struct alloc_rec *s, uint64_t step, const char *name)
{
    for (size_t g = 0; g < s->ngiven; g++)
        if (s->step[g] == step && !strcmp(s->name[g], name) && !s->gone[g])
            return (int)g;
    return -1;
}

/* Refuse the round-1 items of req unless "idx" describes exactly them. */
static ckpt_status check_index(struct alloc_rec *s, struct ckpt_alloc_req *req)
{
    int g = given(s, req->step, "idx");
    char line[80];
    const char *p;
    size_t described = 0;
    if (g < 0) {
        snprintf(req->msg, sizeof req->msg, "no index");
        return CKPT_E_CORRUPT;
    }
    for (size_t k = 0; k < req->n; k++) {
        const char *at;
        snprintf(line, sizeof line, "%s ", req->items[k].name);
        at = strstr((const char *)s->ptr[g], line);
        if (!at) {
            snprintf(req->msg, sizeof req->msg, "'%s' is not in the index", req->items[k].name);
            return CKPT_E_MISMATCH;
        }
        if (strtoull(at + strlen(line), NULL, 10) != req->items[k].size) {
            snprintf(req->msg, sizeof req->msg, "'%s' is %" PRIu64 " bytes, the index says %s",
                     req->items[k].name, req->items[k].size, at + strlen(line));
            return CKPT_E_SIZE;
        }
    }
    for (p = (const char *)s->ptr[g]; (p = strchr(p, '\n')); p++)
        described++;
    if (described != req->n || (s->require && !strstr((const char *)s->ptr[g], s->require))) {
        snprintf(req->msg, sizeof req->msg, "the index describes other items");
        return CKPT_E_MISMATCH;
    }
    return CKPT_OK;
}

static ckpt_status rec_alloc(void *user, struct ckpt_alloc_req *req)
{
    struct alloc_rec *s = user;
    ckpt_status st;
    if (s->calls < 16) {
        s->asked[s->calls] = req->step;
        s->round[s->calls] = req->round;
    }
    s->calls++;
    if (s->fail) {
        snprintf(req->msg, sizeof req->msg, "told to fail");
        req->dest[0] = req->n ? malloc(req->items[0].size + 1) : NULL; /* given, then refused */
        if (req->dest[0])
            s->ptr[s->ngiven] = req->dest[0], s->step[s->ngiven] = req->step,
            snprintf(s->name[s->ngiven++], 32, "%s", req->items[0].name);
        return s->fail;
    }
    if (s->check && req->round == 1 && (st = check_index(s, req)))
        return st;
    for (size_t k = 0; k < req->n && s->ngiven < MAXG; k++) {
        const struct ckpt_item_info *i = &req->items[k];
        if ((s->leave_out && !strcmp(i->name, s->leave_out)) || (s->rep_only && !i->replicated))
            continue;
        assert_int_equal(i->step, req->step);
        req->dest[k] = calloc(1, i->size + 1); /* + 1: the index reads as a string */
        s->ptr[s->ngiven] = req->dest[k];
        s->size[s->ngiven] = i->size;
        s->step[s->ngiven] = req->step;
        s->part[s->ngiven] = i->part;
        s->world[s->ngiven] = i->world_size;
        snprintf(s->name[s->ngiven++], 32, "%s", i->name);
    }
    return CKPT_OK;
}

static void rec_release(void *user, uint64_t step, void *const *dest, size_t n)
{
    struct alloc_rec *s = user;
    for (size_t k = 0; k < n; k++)
        for (size_t g = 0; g < s->ngiven; g++)
            if (s->ptr[g] == dest[k] && !s->gone[g]) {
                assert_int_equal(s->step[g], step);
                s->gone[g] = true;
                s->released++;
                free(s->ptr[g]);
            }
}

static const char *const g_index[] = { "idx" };

static struct ckpt_alloc rec_ops(struct alloc_rec *s, bool index)
{
    struct ckpt_alloc a = {
        CKPT_ALLOC_VERSION, s, index ? g_index : NULL, index ? 1 : 0, rec_alloc, rec_release, { 0 }
    };
    return a;
}

static void rec_free(struct alloc_rec *s)
{
    for (size_t g = 0; g < s->ngiven; g++)
        if (!s->gone[g])
            free(s->ptr[g]);
    memset(s, 0, sizeof *s);
}

/* Whether the memory given for `name` at `step` holds test_fill_bytes(seed). */
static bool rec_holds(const struct alloc_rec *s, uint64_t step, const char *name, size_t n,
                      uint64_t seed)
{
    int g = given(s, step, name);
    uint8_t *want = malloc(n);
    bool ok;
    test_fill_bytes(want, n, seed);
    ok = g >= 0 && s->size[g] == n && !memcmp(s->ptr[g], want, n);
    free(want);
    return ok;
}

#define A_BYTES 5000u
#define B_BYTES (150u * 1024u) /* three chunks */

/* A writer of `run`: items a, b (and "idx" describing them) at each step
 * of steps[], a and b holding test_fill_bytes(step) and test_fill_bytes(100 + step). */
static void save_alloc_steps(const char *run, uint64_t epoch, bool index, const uint64_t *steps,
                             size_t n)
{
    struct ckpt_config cfg = rank_cfg(g_url, run, 5);
    static uint8_t a[A_BYTES], b[B_BYTES];
    static char idx[64];
    struct ckpt_ctx *ctx;
    cfg.epoch = epoch;
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_OK);
    snprintf(idx, sizeof idx, "a %u\nb %u\n", A_BYTES, B_BYTES);
    if (index)
        assert_int_equal(ckpt_protect(ctx, "idx", idx, strlen(idx)), CKPT_OK);
    assert_int_equal(ckpt_protect(ctx, "a", a, sizeof a), CKPT_OK);
    assert_int_equal(ckpt_protect(ctx, "b", b, sizeof b), CKPT_OK);
    for (size_t i = 0; i < n; i++) {
        test_fill_bytes(a, sizeof a, steps[i]);
        test_fill_bytes(b, sizeof b, 100 + steps[i]);
        assert_int_equal(ckpt_save(ctx, steps[i]), CKPT_OK);
        assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    }
    ckpt_close(ctx);
}

/* The damaged checkpoints HEAD lists (ckpt_head_parse of the file). */
static unsigned head_damaged(const char *run)
{
    char path[1000], buf[1 << 16];
    struct ckpt_head_info hi;
    size_t len;
    FILE *f;
    snprintf(path, sizeof path, "%s/store/%s/HEAD", g_dir, run);
    f = fopen(path, "rb");
    assert_non_null(f);
    len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_int_equal(ckpt_head_parse(buf, len, &hi), CKPT_OK);
    return hi.damaged;
}

static void test_alloc_restore(void **state)
{
    const uint64_t steps[] = { 3, 5 };
    struct alloc_rec s = { 0 };
    struct ckpt_alloc a = rec_ops(&s, false), bad;
    struct ckpt_ctx *ctx = open_run("alloc");
    uint8_t pa[A_BYTES];
    uint64_t step = 0;
    (void)state;
    assert_int_equal(ckpt_restore_alloc(ctx, CKPT_STEP_LATEST, &a, &step), CKPT_E_NOENT);
    assert_int_equal(s.calls, 0);
    save_alloc_steps("alloc", 0, false, steps, 2);
    /* nothing protected: the newest, whole, into the caller's memory */
    assert_int_equal(ckpt_restore_alloc(ctx, CKPT_STEP_LATEST, &a, &step), CKPT_OK);
    assert_int_equal(step, 5);
    assert_int_equal(s.calls, 1);
    assert_int_equal(s.round[0], 0);
    assert_true(rec_holds(&s, 5, "a", A_BYTES, 5));
    assert_true(rec_holds(&s, 5, "b", B_BYTES, 105));
    assert_int_equal(s.released, 0);           /* the caller's now */
    assert_string_equal(ckpt_errmsg(ctx), ""); /* no fallback to tell */
    rec_free(&s);
    /* one step; an item left out; a protected item of the same name
     * untouched */
    memset(pa, 0xee, sizeof pa);
    assert_int_equal(ckpt_protect(ctx, "a", pa, sizeof pa), CKPT_OK);
    s.leave_out = "b";
    assert_int_equal(ckpt_restore_alloc(ctx, 3, &a, &step), CKPT_OK);
    assert_int_equal(step, 3);
    assert_true(rec_holds(&s, 3, "a", A_BYTES, 3));
    assert_int_equal(given(&s, 3, "b"), -1);
    for (size_t i = 0; i < sizeof pa; i++)
        assert_int_equal(pa[i], 0xee);
    rec_free(&s);
    step = 0;
    assert_int_equal(ckpt_restore_alloc(ctx, 4, &a, &step), CKPT_E_NOENT);
    assert_int_equal(step, 0);
    /* a failing alloc stops the restore, and what it gave comes back */
    s.fail = CKPT_E_NOMEM;
    assert_int_equal(ckpt_restore_alloc(ctx, CKPT_STEP_LATEST, &a, &step), CKPT_E_NOMEM);
    assert_int_equal(s.calls, 1);
    assert_int_equal(s.ngiven, 1);
    assert_int_equal(s.released, 1);
    assert_non_null(strstr(ckpt_errmsg(ctx), "told to fail"));
    rec_free(&s);
    /* ckpt_restore_alloc_any on a checkpoint of this job's world size: as
     * ckpt_restore_alloc, whatever part it names */
    assert_int_equal(ckpt_restore_alloc_any(ctx, CKPT_STEP_LATEST, 7, &a, &step), CKPT_OK);
    assert_int_equal(step, 5);
    assert_true(rec_holds(&s, 5, "a", A_BYTES, 5));
    assert_int_equal(s.part[given(&s, 5, "a")], 0);
    assert_int_equal(s.world[given(&s, 5, "a")], 1);
    rec_free(&s);
    assert_int_equal(ckpt_restore_alloc_any(ctx, 1, (unsigned)INT_MAX + 1u, &a, NULL),
                     CKPT_E_INVAL);
    /* usage */
    assert_int_equal(ckpt_restore_alloc(NULL, 1, &a, NULL), CKPT_E_INVAL);
    assert_int_equal(ckpt_restore_alloc(ctx, 1, NULL, NULL), CKPT_E_INVAL);
    bad = a;
    bad.version = 0;
    assert_int_equal(ckpt_restore_alloc(ctx, 1, &bad, NULL), CKPT_E_INVAL);
    bad = a;
    bad.alloc = NULL;
    assert_int_equal(ckpt_restore_alloc(ctx, 1, &bad, NULL), CKPT_E_INVAL);
    bad = a;
    bad.nindex = 1;
    assert_int_equal(ckpt_restore_alloc(ctx, 1, &bad, NULL), CKPT_E_INVAL);
    ckpt_close(ctx);
}

/* Damage in the newest checkpoint: the one before it is restored, the
 * memory given for the damaged one handed back, and a lease holder marks
 * it in HEAD; a checkpoint without the index (a file checkpoint above
 * them) is passed over, never offered to alloc. */
static void test_alloc_fallback(void **state)
{
    const uint64_t steps[] = { 1, 2 }, three = 3;
    struct alloc_rec s = { 0 };
    struct ckpt_alloc a = rec_ops(&s, true);
    struct ckpt_config cfg = rank_cfg(g_url, "afall", 5);
    struct ckpt_ctx *ctx;
    char path[900];
    uint64_t step = 0;
    FILE *f;
    (void)state;
    save_alloc_steps("afall", 1, true, steps, 2);
    test_store_chunks("afall", "list");
    save_alloc_steps("afall", 1, true, &three, 1);
    test_store_chunks("afall", "damage"); /* step 3's own chunks: a and b, not its index */
    cfg.epoch = 1;
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_OK);
    snprintf(path, sizeof path, "%s/model.bin", g_dir);
    f = fopen(path, "wb");
    assert_non_null(f);
    fputs("a file checkpoint", f);
    fclose(f);
    assert_int_equal(ckpt_protect_file(ctx, "model.bin", path), CKPT_OK);
    assert_int_equal(ckpt_save(ctx, 4), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    assert_int_equal(ckpt_unprotect(ctx, "model.bin"), CKPT_OK);
    /* the file checkpoint alone, asked for: passed over */
    assert_int_equal(ckpt_restore_alloc(ctx, 4, &a, &step), CKPT_E_NOENT);
    assert_non_null(strstr(ckpt_errmsg(ctx), "passed over"));
    assert_int_equal(s.calls, 0);
    /* step 3 alone: damaged, no fallback, not marked */
    assert_int_equal(ckpt_restore_alloc(ctx, 3, &a, &step), CKPT_E_CORRUPT);
    assert_int_equal(s.released, s.ngiven);
    assert_int_equal(head_damaged("afall"), 0);
    rec_free(&s);
    /* the newest it takes: 3 tried (index read, then a and b), damaged;
     * its memory back; 2 restored; 3 marked */
    s.check = true;
    assert_int_equal(ckpt_restore_alloc(ctx, CKPT_STEP_LATEST, &a, &step), CKPT_OK);
    assert_int_equal(step, 2);
    assert_int_equal(s.calls, 4);
    assert_true(s.asked[0] == 3 && s.round[0] == 0 && s.asked[1] == 3 && s.round[1] == 1);
    assert_true(s.asked[2] == 2 && s.round[2] == 0 && s.asked[3] == 2 && s.round[3] == 1);
    assert_int_equal(s.released, 3);
    assert_int_equal(given(&s, 3, "a"), -1);
    assert_string_equal(ckpt_errmsg(ctx), "restored step 2 instead of the newer step 3, which is "
                                          "damaged");
    assert_true(rec_holds(&s, 2, "a", A_BYTES, 2));
    assert_true(rec_holds(&s, 2, "b", B_BYTES, 102));
    assert_int_equal(head_damaged("afall"), 1);
    rec_free(&s);
    ckpt_close(ctx);
    /* a run of file checkpoints only: nothing it takes */
    ctx = open_run("afiles");
    assert_int_equal(ckpt_protect_file(ctx, "model.bin", path), CKPT_OK);
    assert_int_equal(ckpt_save(ctx, 1), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    assert_int_equal(ckpt_restore_alloc(ctx, CKPT_STEP_LATEST, &a, &step), CKPT_E_NOENT);
    assert_non_null(strstr(ckpt_errmsg(ctx), "no committed checkpoint of the kind"));
    ckpt_close(ctx);
}

/* Step 2's manifest says item a is 77 bytes shorter, its last chunk too
 * (consistent in itself, sealed again: a hostile or broken store). The
 * index disagrees: step 1 is restored instead, nothing marked. */
static void test_alloc_lying_manifest(void **state)
{
    const uint64_t steps[] = { 1, 2 };
    struct alloc_rec s = { .check = true };
    struct ckpt_alloc a = rec_ops(&s, true);
    struct ckpt_config cfg = rank_cfg(g_url, "alies", 5);
    struct ckpt_put_opts po = { CKPT_PUT_PLAIN, NULL, 0 };
    struct ckpt_ctx *ctx;
    struct ckpt_manifest m;
    struct ckpt_head h;
    char key[1200], *buf;
    bool exists;
    size_t len;
    uint64_t step = 0;
    (void)state;
    save_alloc_steps("alies", 1, true, steps, 2);
    cfg.epoch = 1;
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_OK);
    assert_int_equal(ckpt__read_head(ctx, &h, NULL, &exists), CKPT_OK);
    assert_int_equal(h.entries[0].step, 2);
    assert_int_equal(ckpt__read_manifest(ctx, h.entries[0].manifest, &m), CKPT_OK);
    for (size_t i = 0; i < m.nitems; i++)
        if (!strcmp(m.items[i].name, "a")) {
            m.items[i].size -= 77;
            m.items[i].chunks[m.items[i].nchunks - 1].raw_len -= 77;
        }
    assert_int_equal(ckpt__manifest_encode(&m, &buf, &len), CKPT_OK);
    ckpt__run_key(ctx, h.entries[0].manifest, key, sizeof key);
    assert_int_equal(ckpt_store_put(ctx->store, key, buf, len, &po, NULL, NULL), CKPT_OK);
    ckpt__mcache_clear(&ctx->mcache); /* read as a context opened after it */
    free(buf);
    ckpt__manifest_free(&m);
    ckpt__head_free(&h);

    assert_int_equal(ckpt_restore_alloc(ctx, CKPT_STEP_LATEST, &a, &step), CKPT_OK);
    assert_int_equal(step, 1);
    assert_true(rec_holds(&s, 1, "a", A_BYTES, 1));
    assert_int_equal(s.released, 1); /* step 2's index */
    assert_non_null(strstr(ckpt_errmsg(ctx), "instead of the newer step 2, which holds items"));
    assert_int_equal(head_damaged("alies"), 0);
    rec_free(&s);
    /* that step alone: refused, the caller's reason */
    s.check = true;
    assert_int_equal(ckpt_restore_alloc(ctx, 2, &a, &step), CKPT_E_SIZE);
    assert_non_null(strstr(ckpt_errmsg(ctx), "'a' is 4923 bytes, the index says 5000"));
    rec_free(&s);
    /* the caller changed: every checkpoint refused, the newest one's reason */
    s.check = true;
    s.require = "zz ";
    assert_int_equal(ckpt_restore_alloc(ctx, CKPT_STEP_LATEST, &a, &step), CKPT_E_SIZE);
    assert_non_null(strstr(ckpt_errmsg(ctx), "checkpoint step 2"));
    assert_int_equal(s.released, s.ngiven);
    rec_free(&s);
    ckpt_close(ctx);
}

/* ---- ranks agree on ckpt_restore_alloc ---------------------------------- */
/* Two ranks save steps 1 and 2 ("idx", "own", replicated "rep"; own holds
 * test_fill_bytes(100 * step + rank), rep test_fill_bytes(step)), then 3 without "idx". */
static void save_alloc_ranks(struct job *j, unsigned r, struct ckpt_ctx *ctx)
{
    static char idx[MAXR][64];
    snprintf(idx[r], sizeof idx[r], "own %u\nrep %u\n", OWN_BYTES, REP_BYTES);
    CHECK_ST(j, r, ctx, ckpt_protect(ctx, "idx", idx[r], strlen(idx[r])), CKPT_OK);
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
    CHECK_ST(j, r, ctx, ckpt_unprotect(ctx, "idx"), CKPT_OK);
    CHECK_ST(j, r, ctx, ckpt_save(ctx, 3), CKPT_OK);
    CHECK_ST(j, r, ctx, ckpt_wait(ctx), CKPT_OK);
}

static void drop_own_chunk(const char *run, uint64_t step, unsigned rank)
{
    struct ckpt_config cfg = rank_cfg(g_url, run, 5);
    struct ckpt_ctx *ctx;
    struct ckpt_manifest m;
    struct ckpt_head h;
    bool exists;
    char chunk[1200];
    const char *del[1] = { chunk };
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_OK);
    assert_int_equal(ckpt__read_head(ctx, &h, NULL, &exists), CKPT_OK);
    chunk[0] = '\0';
    for (size_t i = 0; i < h.n; i++) {
        if (h.entries[i].step != step)
            continue;
        assert_int_equal(ckpt__read_manifest_view(ctx, h.entries[i].manifest, rank, &m), CKPT_OK);
        for (size_t k = 0; k < m.nitems; k++)
            if (!strcmp(m.items[k].name, "own"))
                ckpt__chunk_key(run, m.items[k].chunks[0].id, chunk, sizeof chunk);
        ckpt__manifest_free(&m);
    }
    ckpt__head_free(&h);
    assert_true(chunk[0]);
    assert_int_equal(ctx->store->ops->del(ctx->store, del, 1, NULL), CKPT_OK);
    ckpt_close(ctx);
}

/* Every rank: step 3 passed over, step 2 (damaged on rank 1 only) given
 * up together, step 1 restored; then step 2 alone fails on every rank. */
static void restore_alloc_rank(struct job *j, unsigned r, struct ckpt_ctx *ctx)
{
    struct alloc_rec *s = calloc(1, sizeof *s);
    struct ckpt_alloc a = rec_ops(s, true);
    uint64_t step = 0;
    uint8_t *want = malloc(REP_BYTES); /* the larger */
    s->check = true;
    CHECK_ST(j, r, ctx, ckpt_restore_alloc(ctx, CKPT_STEP_LATEST, &a, &step), CKPT_OK);
    CHECK(j, r, step == 1);
    test_fill_bytes(want, OWN_BYTES, 100 + r);
    CHECK(j, r, given(s, 1, "own") >= 0 && !memcmp(s->ptr[given(s, 1, "own")], want, OWN_BYTES));
    test_fill_bytes(want, REP_BYTES, 1);
    CHECK(j, r, given(s, 1, "rep") >= 0 && !memcmp(s->ptr[given(s, 1, "rep")], want, REP_BYTES));
    /* rank 0 read its part of step 2 whole; it gave it up with rank 1 */
    CHECK(j, r, s->asked[0] == 2 && s->released >= 1 && given(s, 2, "idx") == -1);
    if (r == 0)
        CHECK(j, r, s->calls == 4 && s->released == 3);
    rec_free(s);
    CHECK_ST(j, r, ctx, ckpt_restore_alloc(ctx, 2, &a, &step), CKPT_E_CORRUPT);
    CHECK(j, r, s->released == s->ngiven);
    rec_free(s);
    CHECK_ST(j, r, ctx, ckpt_restore_alloc(ctx, 3, &a, &step), CKPT_E_NOENT);
    rec_free(s);
    free(s);
    free(want);
}

static void test_alloc_ranks(void **state)
{
    struct job *j = job_new(g_url);
    struct alloc_rec s = { 0 };
    struct ckpt_alloc a = rec_ops(&s, false);
    struct ckpt_ctx *ctx;
    uint64_t step = 0;
    (void)state;
    run_job(j, 2, "aranks", save_alloc_ranks, true);
    drop_own_chunk("aranks", 2, 1);
    run_job(j, 2, "aranks", restore_alloc_rank, true);
    free(j);
    /* one rank reads the 2-rank run: its own items are refused (both
     * sizes named), the replicated ones alone restore */
    ctx = open_run("aranks");
    assert_int_equal(ckpt_restore_alloc(ctx, 1, &a, &step), CKPT_E_WORLD);
    assert_non_null(strstr(ckpt_errmsg(ctx), "written by 2 ranks; this job has 1"));
    assert_int_equal(s.released, s.ngiven);
    rec_free(&s);
    s.rep_only = true;
    assert_int_equal(ckpt_restore_alloc(ctx, 1, &a, &step), CKPT_OK);
    assert_true(rec_holds(&s, 1, "rep", REP_BYTES, 1));
    assert_int_equal(s.ngiven, 1);
    rec_free(&s);
    /* ... or, with ckpt_restore_alloc_any, the part of the rank it names:
     * rank 1's own items of step 1 with the replicated ones */
    assert_int_equal(ckpt_restore_alloc_any(ctx, 1, 1, &a, &step), CKPT_OK);
    assert_int_equal(step, 1);
    assert_true(rec_holds(&s, 1, "own", OWN_BYTES, 101));
    assert_true(rec_holds(&s, 1, "rep", REP_BYTES, 1));
    assert_int_equal(s.part[given(&s, 1, "own")], 1);
    assert_int_equal(s.world[given(&s, 1, "own")], 2);
    assert_int_equal(s.part[given(&s, 1, "rep")], 0);
    rec_free(&s);
    /* the newest as part 0: step 3 (no index: this caller takes it), whose
     * own item is rank 0's as at step 2 */
    assert_int_equal(ckpt_restore_alloc_any(ctx, CKPT_STEP_LATEST, 0, &a, &step), CKPT_OK);
    assert_int_equal(step, 3);
    assert_true(rec_holds(&s, 3, "own", OWN_BYTES, 200));
    assert_true(rec_holds(&s, 3, "rep", REP_BYTES, 2));
    rec_free(&s);
    /* as part 1: rank 1's own chunk of steps 2 and 3 is gone, so the
     * restore falls back past both to step 1, saying so */
    assert_int_equal(ckpt_restore_alloc_any(ctx, CKPT_STEP_LATEST, 1, &a, &step), CKPT_OK);
    assert_int_equal(step, 1);
    assert_true(rec_holds(&s, 1, "own", OWN_BYTES, 101));
    assert_non_null(strstr(ckpt_errmsg(ctx), "instead of the newer step"));
    assert_int_equal(s.released, s.ngiven - 3); /* steps 3 and 2 handed back */
    rec_free(&s);
    /* a part that was never written: refused, naming both sizes */
    assert_int_equal(ckpt_restore_alloc_any(ctx, 1, 2, &a, &step), CKPT_E_WORLD);
    assert_non_null(strstr(ckpt_errmsg(ctx), "written by 2 ranks: it has no part 2 (this job has 1 rank)"));
    assert_int_equal(s.released, s.ngiven);
    rec_free(&s);
    ckpt_close(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_restore),
        cmocka_unit_test(test_alloc_fallback),
        cmocka_unit_test(test_alloc_lying_manifest),
        cmocka_unit_test(test_alloc_ranks),
    };
    unsetenv("CKPT_SOCKET");
    return cmocka_run_group_tests(tests, store_setup, store_teardown);
}
