/* test_ranks.c -- multi-rank jobs (ckpt.h "Ranks"): rank and world size
 * from the config and the launchers' environment, and several ranks in one
 * process -- one thread each -- agreeing through a fake collective (a
 * shared barrier and reduction buffer): global save, commit and restore,
 * ckpt_should_save's agreement, a failed part, replicated items spread
 * over the ranks and their digest agreement, falling back together,
 * another world size, ckpt_restore_part, parts committed from the store
 * (CKPT_RANKS_STORE), retention and gc of global steps, ckpt_list and
 * ckpt_verify. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <time.h>

#define TEST_STORE_FIXTURE
#include "test_util.h"

#include "ckpt.h"
#include "api/config.h"
#include "core/ctx.h"
#include "format/head.h"
#include "format/manifest.h"
#include "run/globalckpt.h"
#include "run/runobj.h"
#include "rank_threads.h"
#include "fault_store.h"
#include "core/runstate.h"

/* A single-process context on run `run` (a reader, or a rank of its own
 * with a world size and flags). */
static struct ckpt_ctx *open_plain(const char *run, unsigned world, unsigned rank,
                                   unsigned flags)
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

struct listed {
    uint64_t steps[16];
    unsigned world[16];
    uint64_t items[16];
    size_t n;
};

static int list_cb(void *user, const struct ckpt_info *i)
{
    struct listed *l = user;
    if (l->n < 16) {
        l->steps[l->n] = i->step;
        l->world[l->n] = i->world_size;
        l->items[l->n++] = i->items;
    }
    return 0;
}

static struct listed list_run(const char *run)
{
    struct listed l = { 0 };
    struct ckpt_ctx *ctx = open_plain(run, 0, 0, 0);
    assert_int_equal(ckpt_list(ctx, list_cb, &l), CKPT_OK);
    ckpt_close(ctx);
    return l;
}

/* Files under <store>/<run>/manifests ending in `suffix`. */
static size_t count_keys(const char *run, const char *suffix)
{
    char dir[1200];
    DIR *d;
    struct dirent *e;
    size_t n = 0, sl = strlen(suffix);
    snprintf(dir, sizeof dir, "%s/store/%s/manifests", g_dir, run);
    d = opendir(dir);
    if (!d)
        return 0;
    while ((e = readdir(d)))
        if (strlen(e->d_name) > sl && !strcmp(e->d_name + strlen(e->d_name) - sl, suffix))
            n++;
    closedir(d);
    return n;
}

/* ---- the environment ---------------------------------------------------- */
static const char *launcher_vars[] = {
    "CKPT_RANK", "CKPT_WORLD_SIZE", "RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "PMIX_RANK", "SLURM_PROCID",
    "SLURM_NTASKS", "SLURM_STEP_ID", "SLURM_STEPID", NULL
};

static void clear_env(void)
{
    for (int i = 0; launcher_vars[i]; i++)
        unsetenv(launcher_vars[i]);
}

/* Resolve with the environment `env` ("NAME=value" pairs, NULL-ended). */
static ckpt_status resolve_env(const char *const *env, const struct ckpt_collective *coll,
                               unsigned flags, struct ckpt_settings *s, char *err)
{
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    clear_env();
    for (int i = 0; env[i]; i++) {
        char name[64];
        const char *eq = strchr(env[i], '=');
        snprintf(name, sizeof name, "%.*s", (int)(eq - env[i]), env[i]);
        setenv(name, eq + 1, 1);
    }
    cfg.run = "r";
    cfg.collective = coll;
    cfg.rank_flags = flags;
    return ckpt__config_resolve(&cfg, s, err);
}

static void test_env_table(void **state)
{
    static const struct {
        const char *env[6];
        ckpt_status st;
        unsigned rank, size; /* with CKPT_RANKS_STORE */
        const char *says;    /* in the error */
    } rows[] = {
        { { NULL }, CKPT_OK, 0, 1, NULL },
        { { "CKPT_RANK=2", "CKPT_WORLD_SIZE=4", NULL }, CKPT_OK, 2, 4, NULL },
        { { "RANK=1", "WORLD_SIZE=2", NULL }, CKPT_OK, 1, 2, NULL },
        { { "OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=8", NULL }, CKPT_OK, 3, 8, NULL },
        { { "PMI_RANK=0", "PMI_SIZE=3", NULL }, CKPT_OK, 0, 3, NULL },
        /* srun: a job step */
        { { "SLURM_PROCID=1", "SLURM_NTASKS=4", "SLURM_STEP_ID=0", NULL }, CKPT_OK, 1, 4, NULL },
        /* the batch script: one process whatever SLURM_NTASKS says */
        { { "SLURM_PROCID=0", "SLURM_NTASKS=4", NULL }, CKPT_OK, 0, 1, NULL },
        { { "SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_STEP_ID=4294967294", NULL }, CKPT_OK, 0,
          1, NULL },
        /* srun torchrun: torchrun's worker, not the node's task */
        { { "RANK=5", "WORLD_SIZE=8", "SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_STEP_ID=0",
            NULL }, CKPT_OK, 5, 8, NULL },
        /* innermost first: CKPT_* over torchrun */
        { { "CKPT_RANK=0", "CKPT_WORLD_SIZE=2", "RANK=3", "WORLD_SIZE=4", NULL }, CKPT_OK, 0, 2,
          NULL },
        /* srun --mpi=pmix: PMIx's rank, the step's size, same rank */
        { { "PMIX_RANK=2", "SLURM_PROCID=2", "SLURM_NTASKS=3", "SLURM_STEP_ID=7", NULL }, CKPT_OK,
          2, 3, NULL },
        /* mixed launchers */
        { { "CKPT_RANK=1", "WORLD_SIZE=4", NULL }, CKPT_E_CONFIG, 0, 0, "different launchers" },
        { { "WORLD_SIZE=4", NULL }, CKPT_E_CONFIG, 0, 0, "gives no rank" },
        { { "RANK=1", "OMPI_COMM_WORLD_SIZE=2", NULL }, CKPT_E_CONFIG, 0, 0, "different" },
        { { "PMIX_RANK=1", NULL }, CKPT_E_CONFIG, 0, 0, "no world size" },
        { { "RANK=4", "WORLD_SIZE=4", NULL }, CKPT_E_CONFIG, 0, 0, "outside" },
        { { "RANK=x", "WORLD_SIZE=4", NULL }, CKPT_E_CONFIG, 0, 0, "RANK='x'" },
    };
    struct ckpt_settings s;
    char err[CKPT_ERR_MAX];
    (void)state;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        ckpt_status st = resolve_env(rows[i].env, NULL, CKPT_RANKS_STORE, &s, err);
        if (st != rows[i].st)
            fail_msg("row %zu: %s, expected %s (%s)", i, ckpt_status_name(st),
                     ckpt_status_name(rows[i].st), err);
        if (st == CKPT_OK && (s.rank != rows[i].rank || s.world_size != rows[i].size))
            fail_msg("row %zu: rank %u of %u, expected %u of %u", i, s.rank, s.world_size,
                     rows[i].rank, rows[i].size);
        if (st && !strstr(err, rows[i].says))
            fail_msg("row %zu: '%s' does not say '%s'", i, err, rows[i].says);
    }
    /* several ranks need a collective or CKPT_RANKS_STORE */
    {
        const char *env[] = { "RANK=1", "WORLD_SIZE=2", NULL };
        assert_int_equal(resolve_env(env, NULL, 0, &s, err), CKPT_E_CONFIG);
        assert_non_null(strstr(err, "collective"));
    }
    /* the collective's rank and size must be the launcher's */
    {
        struct ckpt_collective c = { .version = CKPT_COLLECTIVE_VERSION, .rank = 1, .size = 2,
                                     .allreduce_u64 = f_allreduce, .barrier = f_barrier };
        const char *same[] = { "RANK=1", "WORLD_SIZE=2", NULL };
        const char *other[] = { "RANK=0", "WORLD_SIZE=2", NULL };
        const char *bigger[] = { "OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=4", NULL };
        const char *none[] = { NULL };
        const char *pmix[] = { "PMIX_RANK=1", NULL };
        assert_int_equal(resolve_env(same, &c, 0, &s, err), CKPT_OK);
        assert_int_equal(s.world_size, 2);
        assert_int_equal(resolve_env(other, &c, 0, &s, err), CKPT_E_CONFIG);
        assert_non_null(strstr(err, "collective's rank 1"));
        assert_int_equal(resolve_env(bigger, &c, 0, &s, err), CKPT_E_CONFIG);
        assert_non_null(strstr(err, "collective's 2"));
        assert_int_equal(resolve_env(none, &c, 0, &s, err), CKPT_OK);
        assert_int_equal(s.rank, 1);
        assert_int_equal(resolve_env(pmix, &c, 0, &s, err), CKPT_OK);
        assert_int_equal(s.world_size, 2);
    }
    clear_env();
}

/* ---- two processes claiming one rank ------------------------------------ */
static void noop_rank(struct job *j, unsigned r, struct ckpt_ctx *ctx)
{
    (void)j;
    (void)r;
    (void)ctx;
}

static void test_duplicate_rank(void **state)
{
    struct job *j = job_new(g_url);
    (void)state;
    j->same_rank = true;
    run_job(j, 3, "dup", noop_rank, false);
    for (unsigned r = 0; r < 3; r++) {
        assert_int_equal(j->open_st[r], CKPT_E_CONFIG);
        if (!strstr(j->open_err[r], "rank 0 of 3 is claimed by 3"))
            fail_msg("rank %u: %s", r, j->open_err[r]);
    }
    free(j);
}

/* ---- 4 ranks: save, commit, restore ------------------------------------- */
static void protect_all(struct job *j, unsigned r, struct ckpt_ctx *ctx)
{
    CHECK_ST(j, r, ctx, ckpt_protect(ctx, "own", j->own[r], OWN_BYTES), CKPT_OK);
    CHECK_ST(j, r, ctx, ckpt_protect_replicated(ctx, "rep", j->rep[r], REP_BYTES, CKPT_ELEM_BYTES),
             CKPT_OK);
}

static void fill_step(struct job *j, unsigned r, uint64_t step)
{
    test_fill_bytes(j->own[r], OWN_BYTES, 1000 * step + r);
    test_fill_bytes(j->rep[r], REP_BYTES, 7 * step + 1); /* the same on every rank */
}

static void save_two_steps(struct job *j, unsigned r, struct ckpt_ctx *ctx)
{
    CHECK(j, r, ckpt_rank(ctx) == r && ckpt_world_size(ctx) == j->n);
    protect_all(j, r, ctx);
    for (uint64_t step = 1; step <= 2; step++) {
        fill_step(j, r, step);
        CHECK_ST(j, r, ctx, ckpt_save(ctx, step), CKPT_OK);
        memset(j->own[r], 0xee, OWN_BYTES); /* the snapshot is taken */
        CHECK_ST(j, r, ctx, ckpt_wait(ctx), CKPT_OK);
    }
}

static void restore_check(struct job *j, unsigned r, struct ckpt_ctx *ctx)
{
    uint64_t step = 0;
    uint8_t *want_own = malloc(OWN_BYTES), *want_rep = malloc(REP_BYTES);
    protect_all(j, r, ctx);
    memset(j->own[r], 0, OWN_BYTES);
    memset(j->rep[r], 0, REP_BYTES);
    CHECK_ST(j, r, ctx, ckpt_restore(ctx, &step), CKPT_OK);
    j->got_step[r] = step;
    test_fill_bytes(want_own, OWN_BYTES, 1000 * step + r);
    test_fill_bytes(want_rep, REP_BYTES, 7 * step + 1);
    CHECK(j, r, memcmp(j->own[r], want_own, OWN_BYTES) == 0);
    CHECK(j, r, memcmp(j->rep[r], want_rep, REP_BYTES) == 0);
    free(want_own);
    free(want_rep);
}

static void test_four_ranks(void **state)
{
    struct job *j = job_new(g_url);
    struct listed l;
    (void)state;
    run_job(j, 4, "four", save_two_steps, true);
    l = list_run("four");
    assert_int_equal(l.n, 2);
    assert_int_equal(l.steps[0], 2);
    assert_int_equal(l.world[0], 4);
    assert_int_equal(l.items[0], 5); /* 4 own items and the replicated one */
    run_job(j, 4, "four", restore_check, true);
    for (unsigned r = 0; r < 4; r++)
        assert_int_equal(j->got_step[r], 2);
    {
        struct ckpt_ctx *ctx = open_plain("four", 0, 0, 0);
        assert_int_equal(ckpt_verify(ctx, CKPT_STEP_ALL), CKPT_OK);
        ckpt_close(ctx);
    }
    free(j);
}

/* ---- ckpt_should_save agrees -------------------------------------------- */
static void should_save_rank(struct job *j, unsigned r, struct ckpt_ctx *ctx)
{
    protect_all(j, r, ctx);
    for (int call = 0; call < 6; call++) {
        if (call == 3 && r == 2)
            ckpt_request(ctx, CKPT_CODEC_DEFAULT); /* one rank only */
        j->flag[r][call] = ckpt_should_save(ctx);
        if (j->flag[r][call]) {
            fill_step(j, r, 10);
            CHECK_ST(j, r, ctx, ckpt_save(ctx, 10), CKPT_OK);
        }
    }
    /* should_save after the save commits without ckpt_wait */
    for (int call = 0; call < 200 && !j->flag[r][7]; call++) {
        ckpt_should_save(ctx);
        j->flag[r][7] = ctx->ranks.phase == CKPT_RANKS_IDLE;
    }
    CHECK_ST(j, r, ctx, ckpt_wait(ctx), CKPT_OK);
}

static void test_should_save_agrees(void **state)
{
    struct job *j = job_new(g_url);
    struct listed l;
    (void)state;
    run_job(j, 4, "should", should_save_rank, true);
    for (unsigned r = 0; r < 4; r++)
        for (int call = 0; call < 6; call++)
            if (j->flag[r][call] != (call == 3))
                fail_msg("rank %u, call %d: should_save %d", r, call, j->flag[r][call]);
    l = list_run("should");
    assert_int_equal(l.n, 1);
    assert_int_equal(l.steps[0], 10);
    free(j);
}

/* ---- a rank's part fails ------------------------------------------------ */
static void failing_part_rank(struct job *j, unsigned r, struct ckpt_ctx *ctx)
{
    char path[1200];
    FILE *f;
    snprintf(path, sizeof path, "%s/file-%u", g_dir, r);
    f = fopen(path, "w");
    CHECK(j, r, f != NULL);
    if (f) {
        fputs("data", f);
        fclose(f);
    }
    protect_all(j, r, ctx);
    CHECK_ST(j, r, ctx, ckpt_protect_file(ctx, "file", path), CKPT_OK);
    fill_step(j, r, 1);
    CHECK_ST(j, r, ctx, ckpt_save(ctx, 1), CKPT_OK);
    CHECK_ST(j, r, ctx, ckpt_wait(ctx), CKPT_OK);
    if (r == 1)
        unlink(path); /* rank 1's part of step 2 cannot be made */
    fill_step(j, r, 2);
    CHECK_ST(j, r, ctx, ckpt_save(ctx, 2), r == 1 ? CKPT_E_NOENT : CKPT_OK);
    j->st[r][0] = ckpt_wait(ctx);
    snprintf(j->msg[r], sizeof j->msg[r], "%s", ckpt_errmsg(ctx));
}

static void test_failed_part(void **state)
{
    struct job *j = job_new(g_url);
    struct listed l;
    (void)state;
    run_job(j, 3, "failpart", failing_part_rank, true);
    for (unsigned r = 0; r < 3; r++) {
        assert_int_equal(j->st[r][0], CKPT_E_NOENT);
        if (r != 1 && !strstr(j->msg[r], "part of rank 1 failed"))
            fail_msg("rank %u: %s", r, j->msg[r]);
    }
    l = list_run("failpart");
    assert_int_equal(l.n, 1);
    assert_int_equal(l.steps[0], 1);
    /* the step-1 parts restore (the file items are not protected here) */
    run_job(j, 3, "failpart", restore_check, true);
    for (unsigned r = 0; r < 3; r++)
        assert_int_equal(j->got_step[r], 1);
    free(j);
}

/* ---- injected store errors: a rank's part, rank 0's commit --------------- */
static void store_error_rank(struct job *j, unsigned r, struct ckpt_ctx *ctx)
{
    struct fault_store *fs;
    ckpt__run_wait_loaded(&ctx->rs); /* the store is not in use while it is wrapped */
    fs = fault_wrap(&ctx->store);
    protect_all(j, r, ctx);
    fill_step(j, r, 1);
    CHECK_ST(j, r, ctx, ckpt_save(ctx, 1), CKPT_OK);
    CHECK_ST(j, r, ctx, ckpt_wait(ctx), CKPT_OK);
    /* step 2: rank 2's part manifest is refused by its store */
    if (r == 2)
        fault_add(fs, &(struct fault_rule){ .op = FAULT_PUT, .key_has = ".ckp",
                                            .act = FAULT_FAIL, .status = CKPT_E_AUTH });
    fill_step(j, r, 2);
    CHECK_ST(j, r, ctx, ckpt_save(ctx, 2), CKPT_OK);
    j->st[r][0] = ckpt_wait(ctx);
    /* step 3: rank 0's commit record is refused */
    if (r == 0)
        fault_add(fs, &(struct fault_rule){ .op = FAULT_PUT, .key_has = ".ckc",
                                            .act = FAULT_FAIL, .status = CKPT_E_NOSPACE });
    fill_step(j, r, 3);
    CHECK_ST(j, r, ctx, ckpt_save(ctx, 3), CKPT_OK);
    j->st[r][1] = ckpt_wait(ctx);
    snprintf(j->msg[r], sizeof j->msg[r], "%s", ckpt_errmsg(ctx));
}

static void test_store_errors(void **state)
{
    struct job *j = job_new(g_url);
    struct listed l;
    (void)state;
    run_job(j, 3, "storeerr", store_error_rank, true);
    for (unsigned r = 0; r < 3; r++) {
        assert_int_equal(j->st[r][0], CKPT_E_AUTH);
        assert_int_equal(j->st[r][1], CKPT_E_NOSPACE);
        if (r && !strstr(j->msg[r], "rank 0 could not commit step 3"))
            fail_msg("rank %u: %s", r, j->msg[r]);
    }
    l = list_run("storeerr");
    assert_int_equal(l.n, 1);
    assert_int_equal(l.steps[0], 1);
    run_job(j, 3, "storeerr", restore_check, true);
    for (unsigned r = 0; r < 3; r++)
        assert_int_equal(j->got_step[r], 1);
    free(j);
}

/* ---- replicated items: each rank uploads about 1/N ----------------------- */
static void spread_rank(struct job *j, unsigned r, struct ckpt_ctx *ctx)
{
    /* one large item (9 chunks) and 7 small ones (1 chunk each): 16 chunks */
    static uint8_t small[MAXR][7][1000];
    uint8_t *big = malloc(9 * CHUNK);
    test_fill_bytes(big, 9 * CHUNK, 99);
    for (int k = 0; k < 7; k++) {
        char name[16];
        snprintf(name, sizeof name, "s%d", k);
        test_fill_bytes(small[r][k], sizeof small[r][k], 200 + (uint64_t)k);
        CHECK_ST(j, r, ctx, ckpt_protect_replicated(ctx, name, small[r][k], 1000,
                                                    CKPT_ELEM_BYTES), CKPT_OK);
    }
    CHECK_ST(j, r, ctx, ckpt_protect_replicated(ctx, "big", big, 9 * CHUNK, CKPT_ELEM_BYTES),
             CKPT_OK);
    CHECK_ST(j, r, ctx, ckpt_save(ctx, 1), CKPT_OK);
    CHECK_ST(j, r, ctx, ckpt_wait(ctx), CKPT_OK);
    free(big);
}

static void test_replicated_spread(void **state)
{
    struct job *j = job_new(g_url);
    struct ckpt_ctx *ctx;
    struct ckpt_head h;
    struct ckpt_manifest gm;
    bool exists;
    (void)state;
    run_job(j, 4, "spread", spread_rank, true);
    ctx = open_plain("spread", 0, 0, 0);
    assert_int_equal(ckpt__read_head(ctx, &h, NULL, &exists), CKPT_OK);
    assert_int_equal(h.n, 1);
    assert_int_equal(ckpt__read_manifest(ctx, h.entries[0].manifest, &gm), CKPT_OK);
    assert_int_equal(gm.nparts, 4);
    for (unsigned r = 0; r < 4; r++) {
        struct ckpt_manifest p;
        uint64_t bytes = 0, chunks = 0, small_chunks = 0;
        assert_int_equal(ckpt__read_manifest(ctx, gm.parts[r], &p), CKPT_OK);
        for (size_t i = 0; i < p.nitems; i++) {
            assert_true(p.items[i].replicated);
            chunks += p.items[i].nchunks;
            small_chunks += p.items[i].name[0] == 's' ? p.items[i].nchunks : 0;
            for (size_t c = 0; c < p.items[i].nchunks; c++)
                bytes += p.items[i].chunks[c].stored_len;
        }
        /* 16 chunks over 4 ranks: 4 each, about a quarter of the bytes */
        if (chunks != 4)
            fail_msg("rank %u stored %" PRIu64 " chunks", r, chunks);
        if (r == 3 && small_chunks == 0)
            fail_msg("the small items all went to the first ranks");
        (void)bytes;
        ckpt__manifest_free(&p);
    }
    /* every rank stored some: the small items (s0..s6, last in name order
     * after "big") are spread too */
    ckpt__manifest_free(&gm);
    ckpt__head_free(&h);
    assert_int_equal(ckpt_verify(ctx, CKPT_STEP_LATEST), CKPT_OK);
    ckpt_close(ctx);
    free(j);
}

/* ---- replicated items that differ --------------------------------------- */
static void mismatch_rank(struct job *j, unsigned r, struct ckpt_ctx *ctx)
{
    protect_all(j, r, ctx);
    fill_step(j, r, 1);
    CHECK_ST(j, r, ctx, ckpt_save(ctx, 1), CKPT_OK);
    CHECK_ST(j, r, ctx, ckpt_wait(ctx), CKPT_OK);
    fill_step(j, r, 2);
    if (r == 2)
        j->rep[r][REP_BYTES - 1] ^= 1; /* rank 2's copy drifted */
    CHECK_ST(j, r, ctx, ckpt_save(ctx, 2), CKPT_OK);
    j->st[r][0] = ckpt_wait(ctx);
    snprintf(j->msg[r], sizeof j->msg[r], "%s", ckpt_errmsg(ctx));
}

static void test_replicated_mismatch(void **state)
{
    struct job *j = job_new(g_url);
    struct listed l;
    (void)state;
    run_job(j, 3, "mismatch", mismatch_rank, true);
    for (unsigned r = 0; r < 3; r++) {
        assert_int_equal(j->st[r][0], CKPT_E_WORLD);
        if (!strstr(j->msg[r], "replicated item rep differs"))
            fail_msg("rank %u: %s", r, j->msg[r]);
    }
    /* rank 0 reports the failed step (ckptrun's stop hears it now, not at
     * its deadline); the others leave it to rank 0 */
    assert_int_equal(atomic_load(&j->failed_events[0]), 1);
    assert_int_equal(atomic_load(&j->failed_events[1]), 0);
    l = list_run("mismatch");
    assert_int_equal(l.n, 1);
    assert_int_equal(l.steps[0], 1);
    assert_int_equal(count_keys("mismatch", ".ckc"), 1);
    free(j);
}

/* ---- falling back together ---------------------------------------------- */
static void test_fallback_together(void **state)
{
    struct job *j = job_new(g_url);
    struct ckpt_ctx *ctx;
    struct ckpt_head h;
    struct ckpt_manifest p;
    bool exists;
    char key[1200];
    (void)state;
    run_job(j, 3, "fallback", save_two_steps, true);
    /* damage a chunk of rank 1's own item in step 2 */
    ctx = open_plain("fallback", 0, 0, 0);
    assert_int_equal(ckpt__read_head(ctx, &h, NULL, &exists), CKPT_OK);
    assert_int_equal(h.entries[0].step, 2);
    {
        struct ckpt_manifest gm;
        assert_int_equal(ckpt__read_manifest(ctx, h.entries[0].manifest, &gm), CKPT_OK);
        assert_int_equal(ckpt__read_manifest(ctx, gm.parts[1], &p), CKPT_OK);
        ckpt__manifest_free(&gm);
    }
    for (size_t i = 0; i < p.nitems; i++)
        if (!strcmp(p.items[i].name, "own")) {
            char rel[256];
            FILE *f;
            ckpt__chunk_key("fallback", p.items[i].chunks[0].id, rel, sizeof rel);
            snprintf(key, sizeof key, "%s/store/%s", g_dir, rel);
            f = fopen(key, "r+b");
            assert_non_null(f);
            fseek(f, 100, SEEK_SET);
            fputc(0x5a, f);
            fputc(0xa5, f);
            fclose(f);
        }
    ckpt__manifest_free(&p);
    ckpt__head_free(&h);
    assert_int_equal(ckpt_verify(ctx, 2), CKPT_E_CORRUPT);
    ckpt_close(ctx);
    run_job(j, 3, "fallback", restore_check, true);
    for (unsigned r = 0; r < 3; r++)
        assert_int_equal(j->got_step[r], 1);
    free(j);
}

/* ---- another world size ------------------------------------------------- */
static void restore_refused(struct job *j, unsigned r, struct ckpt_ctx *ctx)
{
    uint64_t step = 0;
    protect_all(j, r, ctx);
    j->st[r][0] = ckpt_restore(ctx, &step);
    snprintf(j->msg[r], sizeof j->msg[r], "%s", ckpt_errmsg(ctx));
}

static void restore_replicated_only(struct job *j, unsigned r, struct ckpt_ctx *ctx)
{
    uint64_t step = 0;
    uint8_t *want = malloc(REP_BYTES);
    CHECK_ST(j, r, ctx, ckpt_protect_replicated(ctx, "rep", j->rep[r], REP_BYTES,
                                                CKPT_ELEM_BYTES), CKPT_OK);
    memset(j->rep[r], 0, REP_BYTES);
    CHECK_ST(j, r, ctx, ckpt_restore(ctx, &step), CKPT_OK);
    test_fill_bytes(want, REP_BYTES, 7 * step + 1);
    CHECK(j, r, step == 2 && memcmp(want, j->rep[r], REP_BYTES) == 0);
    free(want);
}

static void test_world_size_mismatch(void **state)
{
    struct job *j = job_new(g_url);
    struct ckpt_ctx *ctx;
    uint64_t step = 0;
    uint8_t *want = malloc(OWN_BYTES);
    (void)state;
    run_job(j, 4, "world", save_two_steps, true);
    run_job(j, 2, "world", restore_refused, true);
    for (unsigned r = 0; r < 2; r++) {
        assert_int_equal(j->st[r][0], CKPT_E_WORLD);
        if (!strstr(j->msg[r], "written by 4 ranks") || !strstr(j->msg[r], "this job has 2"))
            fail_msg("rank %u: %s", r, j->msg[r]);
    }
    /* only replicated items: any world size resumes */
    run_job(j, 2, "world", restore_replicated_only, true);
    /* ckpt_restore_part: one process reads rank 2's part */
    ctx = open_plain("world", 0, 0, 0);
    assert_int_equal(ckpt_protect(ctx, "own", j->own[0], OWN_BYTES), CKPT_OK);
    assert_int_equal(ckpt_restore(ctx, &step), CKPT_E_WORLD);
    assert_int_equal(ckpt_restore_part(ctx, CKPT_STEP_LATEST, 2, &step), CKPT_OK);
    assert_int_equal(step, 2);
    test_fill_bytes(want, OWN_BYTES, 1000 * 2 + 2);
    assert_memory_equal(j->own[0], want, OWN_BYTES);
    assert_int_equal(ckpt_restore_part(ctx, 1, 1, &step), CKPT_OK);
    test_fill_bytes(want, OWN_BYTES, 1000 * 1 + 1);
    assert_memory_equal(j->own[0], want, OWN_BYTES);
    assert_int_equal(ckpt_restore_part(ctx, CKPT_STEP_LATEST, 4, &step), CKPT_E_NOENT);
    ckpt_close(ctx);
    free(want);
    free(j);
}

/* ---- parts committed from the store (CKPT_RANKS_STORE) ------------------- */
struct pend {
    unsigned n;
    uint64_t step[8];
    unsigned rank[8];
};

static int pend_cb(void *user, const struct ckpt_part_info *p)
{
    struct pend *pd = user;
    if (pd->n < 8) {
        pd->step[pd->n] = p->step;
        pd->rank[pd->n++] = p->rank;
    }
    return 0;
}

static void test_store_mode(void **state)
{
    static uint8_t own[3][OWN_BYTES], rep[3][REP_BYTES];
    struct ckpt_ctx *ctx[3];
    struct pend pd = { 0 };
    struct listed l;
    uint64_t step = 0;
    (void)state;
    for (unsigned r = 0; r < 3; r++) {
        ctx[r] = open_plain("store", 3, r, CKPT_RANKS_STORE);
        assert_int_equal(ckpt_rank(ctx[r]), r);
        assert_int_equal(ckpt_world_size(ctx[r]), 3);
        test_fill_bytes(own[r], OWN_BYTES, 50 + r);
        test_fill_bytes(rep[r], REP_BYTES, 77);
        if (r < 2) /* rank 2 has nothing to save at step 5: an empty part */
            assert_int_equal(ckpt_protect(ctx[r], "own", own[r], OWN_BYTES), CKPT_OK);
    }
    for (unsigned r = 0; r < 2; r++) {
        assert_int_equal(ckpt_save(ctx[r], 5), CKPT_OK);
        assert_int_equal(ckpt_wait(ctx[r]), CKPT_OK);
    }
    assert_int_equal(ckpt_pending(ctx[0], pend_cb, &pd), CKPT_OK);
    assert_int_equal(pd.n, 2);
    assert_int_equal(pd.step[0], 5);
    assert_int_equal(pd.rank[0], 0);
    assert_int_equal(pd.rank[1], 1);
    assert_int_equal(ckpt_commit_parts(ctx[0], 5, 3), CKPT_E_NOENT);
    assert_non_null(strstr(ckpt_errmsg(ctx[0]), "ranks 2"));
    assert_int_equal(list_run("store").n, 0);
    assert_int_equal(ckpt_save(ctx[2], 5), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx[2]), CKPT_OK);
    assert_int_equal(ckpt_commit_parts(ctx[0], 5, 3), CKPT_OK);
    l = list_run("store");
    assert_int_equal(l.n, 1);
    assert_int_equal(l.world[0], 3);
    /* replicated items: rank 1 holds other bytes -- refused, naming it */
    for (unsigned r = 0; r < 3; r++)
        assert_int_equal(ckpt_protect_replicated(ctx[r], "rep", rep[r], REP_BYTES,
                                                 CKPT_ELEM_BYTES), CKPT_OK);
    rep[1][5] ^= 1;
    for (unsigned r = 0; r < 3; r++) {
        assert_int_equal(ckpt_save(ctx[r], 6), CKPT_OK);
        assert_int_equal(ckpt_wait(ctx[r]), CKPT_OK);
    }
    assert_int_equal(ckpt_commit_parts(ctx[0], 6, 3), CKPT_E_WORLD);
    assert_non_null(strstr(ckpt_errmsg(ctx[0]), "replicated item rep"));
    rep[1][5] ^= 1;
    for (unsigned r = 0; r < 3; r++) {
        assert_int_equal(ckpt_save(ctx[r], 6), CKPT_OK); /* a newer part of each rank */
        assert_int_equal(ckpt_wait(ctx[r]), CKPT_OK);
    }
    assert_int_equal(ckpt_commit_parts(ctx[0], 6, 3), CKPT_OK);
    l = list_run("store");
    assert_int_equal(l.n, 2);
    assert_int_equal(l.steps[0], 6);
    assert_int_equal(l.world[0], 3);
    pd.n = 0;
    assert_int_equal(ckpt_pending(ctx[0], pend_cb, &pd), CKPT_OK);
    assert_int_equal(pd.n, 0); /* step 5's parts are below the commit */
    /* each rank restores its part */
    memset(own[1], 0, OWN_BYTES);
    memset(rep[1], 0, REP_BYTES);
    assert_int_equal(ckpt_restore(ctx[1], &step), CKPT_OK);
    assert_int_equal(step, 6);
    {
        uint8_t *want = malloc(OWN_BYTES);
        test_fill_bytes(want, OWN_BYTES, 51);
        assert_memory_equal(own[1], want, OWN_BYTES);
        free(want);
    }
    for (unsigned r = 0; r < 3; r++)
        ckpt_close(ctx[r]);
}

/* ---- retention and gc: a global step is one unit ------------------------ */
static void save_four_steps(struct job *j, unsigned r, struct ckpt_ctx *ctx)
{
    protect_all(j, r, ctx);
    for (uint64_t step = 1; step <= 4; step++) {
        fill_step(j, r, step);
        CHECK_ST(j, r, ctx, ckpt_save(ctx, step), CKPT_OK);
        CHECK_ST(j, r, ctx, ckpt_wait(ctx), CKPT_OK);
    }
    /* a step whose parts never commit: rank 1 saves alone below */
}

static void test_retention_and_gc(void **state)
{
    struct job *j = job_new(g_url);
    struct ckpt_ctx *ctx;
    struct listed l;
    uint64_t deleted = 0;
    (void)state;
    j->keep = 2;
    run_job(j, 3, "keep", save_four_steps, true);
    l = list_run("keep");
    assert_int_equal(l.n, 2);
    assert_int_equal(l.steps[1], 3);
    /* steps 1 and 2 went whole: records and parts */
    assert_int_equal(count_keys("keep", ".ckc"), 2);
    assert_int_equal(count_keys("keep", ".ckp"), 6);
    /* a pending part (a store-mode rank of the same run) */
    ctx = open_plain("keep", 3, 1, CKPT_RANKS_STORE);
    assert_int_equal(ckpt_protect(ctx, "own", j->own[0], OWN_BYTES), CKPT_OK);
    assert_int_equal(ckpt_save(ctx, 9), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    assert_int_equal(count_keys("keep", ".ckp"), 7);
    /* gc with --keep 1: step 3 goes as a unit, the young pending part stays */
    assert_int_equal(ckpt_gc(ctx, 1, 3600 * 1000, &deleted), CKPT_OK);
    assert_int_equal(count_keys("keep", ".ckc"), 1);
    assert_int_equal(count_keys("keep", ".ckp"), 4);
    l = list_run("keep");
    assert_int_equal(l.n, 1);
    assert_int_equal(l.steps[0], 4);
    /* with no --min-age the pending part is old enough */
    assert_int_equal(ckpt_gc(ctx, 1, 0, &deleted), CKPT_OK);
    assert_int_equal(count_keys("keep", ".ckp"), 3);
    assert_int_equal(ckpt_verify(ctx, CKPT_STEP_ALL), CKPT_OK);
    ckpt_close(ctx);
    free(j);
}

/* ---- verify catches a mixed replicated item ------------------------------ */
static void test_verify_mixed(void **state)
{
    struct job *j = job_new(g_url);
    struct ckpt_ctx *ctx;
    struct ckpt_head h;
    struct ckpt_manifest gm, p;
    struct ckpt_put_opts po = { CKPT_PUT_PLAIN, NULL, 0 };
    bool exists;
    char key[1200], *buf;
    size_t len;
    uint64_t step = 0;
    (void)state;
    run_job(j, 2, "mixed", save_two_steps, true);
    ctx = open_plain("mixed", 0, 0, 0);
    assert_int_equal(ckpt_verify(ctx, CKPT_STEP_ALL), CKPT_OK);
    assert_int_equal(ckpt__read_head(ctx, &h, NULL, &exists), CKPT_OK);
    assert_int_equal(ckpt__read_manifest(ctx, h.entries[0].manifest, &gm), CKPT_OK);
    /* rank 1's part says its replicated item is other bytes */
    assert_int_equal(ckpt__read_manifest(ctx, gm.parts[1], &p), CKPT_OK);
    for (size_t i = 0; i < p.nitems; i++)
        if (p.items[i].replicated)
            p.items[i].digest ^= 1;
    assert_int_equal(ckpt__manifest_encode(&p, &buf, &len), CKPT_OK);
    ckpt__run_key(ctx, gm.parts[1], key, sizeof key);
    assert_int_equal(ckpt_store_put(ctx->store, key, buf, len, &po, NULL, NULL), CKPT_OK);
    free(buf);
    ckpt__manifest_free(&p);
    ckpt__manifest_free(&gm);
    ckpt__head_free(&h);
    assert_int_equal(ckpt_verify(ctx, 2), CKPT_E_CORRUPT);
    assert_non_null(strstr(ckpt_errmsg(ctx), "replicated item rep"));
    assert_int_equal(ckpt_verify(ctx, 1), CKPT_OK);
    ckpt_close(ctx);
    /* and the ranks fall back past it together */
    run_job(j, 2, "mixed", restore_check, true);
    assert_int_equal(j->got_step[0], 1);
    assert_int_equal(j->got_step[1], 1);
    (void)step;
    free(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_env_table),
        cmocka_unit_test(test_duplicate_rank),
        cmocka_unit_test(test_four_ranks),
        cmocka_unit_test(test_should_save_agrees),
        cmocka_unit_test(test_failed_part),
        cmocka_unit_test(test_store_errors),
        cmocka_unit_test(test_replicated_spread),
        cmocka_unit_test(test_replicated_mismatch),
        cmocka_unit_test(test_fallback_together),
        cmocka_unit_test(test_world_size_mismatch),
        cmocka_unit_test(test_store_mode),
        cmocka_unit_test(test_retention_and_gc),
        cmocka_unit_test(test_verify_mixed),
    };
    clear_env();
    return cmocka_run_group_tests(tests, store_setup, store_teardown);
}
