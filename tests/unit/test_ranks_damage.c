/* test_ranks_damage.c -- damage in multi-rank runs (issue 26, item 12, the
 * follow-ups), ranks as threads over a fake collective (rank_threads.h):
 *   - a part manifest that lies about its items' sizes (consistent with its
 *     own chunk list: a hostile or broken store) while older steps fit:
 *     every rank falls back past it together, as ckpt_restore does alone;
 *     asked for that one step, every rank refuses it, nothing written;
 *   - a program whose items fit no checkpoint on one rank: every rank
 *     refuses (CKPT_E_SIZE), and no rank's memory is written -- the ranks
 *     agree that every item fits before any rank restores;
 *   - ckpt_pending and ckpt_commit_parts over a damaged HEAD: the parts
 *     above the newest step the run's manifests show. */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>

#define TEST_STORE_FIXTURE
#include "test_util.h"

#include "ckpt.h"
#include "core/ctx.h"
#include "format/head.h"
#include "format/manifest.h"
#include "rank_threads.h"
#include "run/runobj.h"

static struct ckpt_ctx *open_plain(const char *run, unsigned world, unsigned rank, unsigned flags)
{
    struct ckpt_config cfg = rank_cfg(g_url, run, 3);
    struct ckpt_ctx *ctx = NULL;
    cfg.world_size = world;
    cfg.rank = rank;
    cfg.rank_flags = flags;
    if (ckpt_open(&cfg, &ctx) != CKPT_OK)
        fail_msg("ckpt_open: %s", ckpt_errmsg(NULL));
    return ctx;
}

/* Rank r protects "own" (`own_bytes` of it) and the replicated "rep". */
static void protect(struct job *j, unsigned r, struct ckpt_ctx *ctx, size_t own_bytes)
{
    CHECK_ST(j, r, ctx, ckpt_protect(ctx, "own", j->own[r], own_bytes), CKPT_OK);
    CHECK_ST(j, r, ctx, ckpt_protect_replicated(ctx, "rep", j->rep[r], REP_BYTES, CKPT_ELEM_BYTES),
             CKPT_OK);
}

static void fill_step(struct job *j, unsigned r, uint64_t step)
{
    test_fill_bytes(j->own[r], OWN_BYTES, 1000 * step + r);
    test_fill_bytes(j->rep[r], REP_BYTES, 7 * step + 1);
}

static void save_two(struct job *j, unsigned r, struct ckpt_ctx *ctx)
{
    protect(j, r, ctx, OWN_BYTES);
    for (uint64_t step = 1; step <= 2; step++) {
        fill_step(j, r, step);
        CHECK_ST(j, r, ctx, ckpt_save(ctx, step), CKPT_OK);
        CHECK_ST(j, r, ctx, ckpt_wait(ctx), CKPT_OK);
    }
}

/* Every rank restores (j->arg: NULL for the newest, else the one step),
 * its memory set to 0xee first; the outcome in st[r][0], msg[r]. */
static void restore_rank(struct job *j, unsigned r, struct ckpt_ctx *ctx)
{
    const uint64_t *one = j->arg;
    uint64_t step = 0;
    /* rank 2 of a changed program: its "own" is 5 bytes shorter */
    protect(j, r, ctx, j->flag[r][0] ? OWN_BYTES - 5 : OWN_BYTES);
    memset(j->own[r], 0xee, OWN_BYTES);
    memset(j->rep[r], 0xee, REP_BYTES);
    j->st[r][0] = one ? ckpt_restore_step(ctx, *one, &step) : ckpt_restore(ctx, &step);
    j->got_step[r] = step;
    snprintf(j->msg[r], sizeof j->msg[r], "%s", ckpt_errmsg(ctx));
}

/* Whether rank r's memory holds step `step` (0: untouched, all 0xee). */
static bool holds(struct job *j, unsigned r, uint64_t step)
{
    uint8_t *own = malloc(OWN_BYTES), *rep = malloc(REP_BYTES);
    bool ok;
    if (step) {
        test_fill_bytes(own, OWN_BYTES, 1000 * step + r);
        test_fill_bytes(rep, REP_BYTES, 7 * step + 1);
    } else {
        memset(own, 0xee, OWN_BYTES);
        memset(rep, 0xee, REP_BYTES);
    }
    ok = !memcmp(own, j->own[r], OWN_BYTES) && !memcmp(rep, j->rep[r], REP_BYTES);
    free(own);
    free(rep);
    return ok;
}

/* Rank 1's part of the newest step says its "own" item is 77 bytes
 * shorter, its last chunk too: consistent in itself, sealed again. */
static void shorten_part(const char *run)
{
    struct ckpt_ctx *ctx = open_plain(run, 0, 0, 0);
    struct ckpt_put_opts po = { CKPT_PUT_PLAIN, NULL, 0 };
    struct ckpt_manifest gm, p;
    struct ckpt_head h;
    bool exists, done = false;
    char key[1200], *buf;
    size_t len;
    assert_int_equal(ckpt__read_head(ctx, &h, NULL, &exists), CKPT_OK);
    assert_int_equal(ckpt__read_manifest(ctx, h.entries[0].manifest, &gm), CKPT_OK);
    assert_int_equal(ckpt__read_manifest(ctx, gm.parts[1], &p), CKPT_OK);
    for (size_t i = 0; i < p.nitems; i++)
        if (!strcmp(p.items[i].name, "own")) {
            p.items[i].size -= 77;
            p.items[i].chunks[p.items[i].nchunks - 1].raw_len -= 77;
            done = true;
        }
    assert_true(done);
    assert_int_equal(ckpt__manifest_encode(&p, &buf, &len), CKPT_OK);
    ckpt__run_key(ctx, gm.parts[1], key, sizeof key);
    assert_int_equal(ckpt_store_put(ctx->store, key, buf, len, &po, NULL, NULL), CKPT_OK);
    free(buf);
    ckpt__manifest_free(&p);
    ckpt__manifest_free(&gm);
    ckpt__head_free(&h);
    ckpt_close(ctx);
}

/* Was: rank 1 stopped every rank with "item 'own' is ... bytes,
 * checkpoint step 2 holds ...: nothing restored", step 1 intact. */
static void test_fall_back_past_a_lying_part(void **state)
{
    struct job *j = job_new(g_url);
    uint64_t two = 2;
    (void)state;
    run_job(j, 3, "lies", save_two, true);
    shorten_part("lies");
    run_job(j, 3, "lies", restore_rank, true);
    for (unsigned r = 0; r < 3; r++) {
        if (j->st[r][0] != CKPT_OK)
            fail_msg("rank %u: %s: %s", r, ckpt_status_name(j->st[r][0]), j->msg[r]);
        assert_int_equal(j->got_step[r], 1);
        assert_true(holds(j, r, 1));
    }
    /* that one step asked for: refused on every rank, nothing written */
    j->arg = &two;
    run_job(j, 3, "lies", restore_rank, true);
    for (unsigned r = 0; r < 3; r++) {
        assert_int_equal(j->st[r][0], CKPT_E_SIZE);
        assert_true(holds(j, r, 0));
        if (!strstr(j->msg[r], r == 1 ? "item 'own' is"
                                      : "the items of rank 1 do not fit "
                                        "checkpoint step 2"))
            fail_msg("rank %u: %s", r, j->msg[r]);
    }
    free(j);
}

/* The program changed on rank 2: no step fits it. Every rank refuses with
 * the newest step's reason, and no rank's memory is written (rank 0 and 1
 * fit every step: before, they restored it before rank 2's refusal). */
static void test_program_changed_on_one_rank(void **state)
{
    struct job *j = job_new(g_url);
    (void)state;
    run_job(j, 3, "changed", save_two, true);
    j->flag[2][0] = 1;
    run_job(j, 3, "changed", restore_rank, true);
    for (unsigned r = 0; r < 3; r++) {
        if (j->st[r][0] != CKPT_E_SIZE)
            fail_msg("rank %u: %s: %s", r, ckpt_status_name(j->st[r][0]), j->msg[r]);
        assert_true(holds(j, r, 0));
        if (!strstr(j->msg[r], r == 2 ? "checkpoint step 2 holds"
                                      : "the items of rank 2 do "
                                        "not fit checkpoint step 2"))
            fail_msg("rank %u: %s", r, j->msg[r]);
    }
    free(j);
}

/* ---- parts over a damaged HEAD (CKPT_RANKS_STORE) ------------------------ */
struct pend {
    unsigned n;
    uint64_t step[8];
};

static int pend_cb(void *user, const struct ckpt_part_info *p)
{
    struct pend *pd = user;
    if (pd->n < 8)
        pd->step[pd->n++] = p->step;
    return 0;
}

static void save_parts(struct ckpt_ctx **ctx, uint64_t step)
{
    for (unsigned r = 0; r < 2; r++) {
        assert_int_equal(ckpt_save(ctx[r], step), CKPT_OK);
        assert_int_equal(ckpt_wait(ctx[r]), CKPT_OK);
    }
}

/* Was: ckpt_pending failed with "HEAD is damaged" (and so `ckptrun ls
 * --run` and `status` lost the steps waiting for parts). */
static void test_pending_over_a_damaged_head(void **state)
{
    static uint8_t own[2][OWN_BYTES];
    struct ckpt_ctx *ctx[2];
    struct ckpt_put_opts po = { CKPT_PUT_PLAIN, NULL, 0 };
    struct pend pd = { 0 };
    struct ckpt_head h;
    bool exists;
    char key[1024];
    (void)state;
    for (unsigned r = 0; r < 2; r++) {
        ctx[r] = open_plain("parts", 2, r, CKPT_RANKS_STORE);
        test_fill_bytes(own[r], OWN_BYTES, 30 + r);
        assert_int_equal(ckpt_protect(ctx[r], "own", own[r], OWN_BYTES), CKPT_OK);
    }
    save_parts(ctx, 5);
    assert_int_equal(ckpt_commit_parts(ctx[0], 5, 2), CKPT_OK);
    save_parts(ctx, 6);
    save_parts(ctx, 4); /* below the newest commit: not pending */
    ckpt__run_key(ctx[0], "HEAD", key, sizeof key);
    assert_int_equal(ckpt_store_put(ctx[0]->store, key, "garbage\n", 8, &po, NULL, NULL), CKPT_OK);
    assert_int_equal(ckpt_pending(ctx[0], pend_cb, &pd), CKPT_OK);
    assert_int_equal(pd.n, 2);
    assert_int_equal(pd.step[0], 6);
    assert_int_equal(pd.step[1], 6);
    /* and committing them writes HEAD over the damaged one */
    if (ckpt_commit_parts(ctx[0], 6, 2) != CKPT_OK)
        fail_msg("commit_parts: %s", ckpt_errmsg(ctx[0]));
    assert_int_equal(ckpt__read_head(ctx[0], &h, NULL, &exists), CKPT_OK);
    assert_int_equal(h.n, 2);
    assert_int_equal(h.entries[0].step, 6);
    assert_int_equal(h.entries[1].step, 5);
    ckpt__head_free(&h);
    pd.n = 0;
    assert_int_equal(ckpt_pending(ctx[0], pend_cb, &pd), CKPT_OK);
    assert_int_equal(pd.n, 0);
    for (unsigned r = 0; r < 2; r++)
        ckpt_close(ctx[r]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fall_back_past_a_lying_part),
        cmocka_unit_test(test_program_changed_on_one_rank),
        cmocka_unit_test(test_pending_over_a_damaged_head),
    };
    static const char *const launcher_vars[] = { "CKPT_RANK",
                                                 "CKPT_WORLD_SIZE",
                                                 "RANK",
                                                 "WORLD_SIZE",
                                                 "OMPI_COMM_WORLD_RANK",
                                                 "OMPI_COMM_WORLD_SIZE",
                                                 "PMI_RANK",
                                                 "PMI_SIZE",
                                                 "PMIX_RANK",
                                                 "SLURM_PROCID",
                                                 "SLURM_NTASKS",
                                                 "SLURM_STEP_ID",
                                                 "SLURM_STEPID",
                                                 NULL };
    for (int i = 0; launcher_vars[i]; i++)
        unsetenv(launcher_vars[i]);
    return cmocka_run_group_tests(tests, store_setup, store_teardown);
}
