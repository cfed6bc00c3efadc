/*
 * mpi_trainer -- a small, deterministic data-parallel MPI trainer that uses
 * libckpt's multi-rank API (ckpt.h "Ranks", ckpt_mpi.h).
 *
 * The model of examples/c_trainer (a two-layer MLP learning a synthetic
 * teacher with Adam), trained data-parallel: every rank draws its own batch
 * from its own RNG, the ranks exchange their gradients (MPI_Allgather) and
 * every rank sums them in rank order, so the weights and Adam moments stay
 * the same bytes on every rank. Checkpointed state:
 *
 *   replicated (ckpt_protect_replicated): params, adam_m, adam_v, meta
 *   per rank   (ckpt_protect):            rank (RNG, counters), grad_ema
 *
 * A run killed at any moment and restarted on the same number of ranks
 * resumes from its last global commit, and its --out (written by rank 0:
 * the replicated state once, then every rank's own state, gathered with
 * MPI) is byte-identical to an uninterrupted run's.
 *
 *   mpirun -np N mpi_trainer --steps N --every K --out FILE [--store URL]
 *          [--run NAME] [--hidden H] [--input D] [--batch B] [--sleep-ms MS]
 *          [--quiet]
 *
 * It calls ckpt_should_save() every step (collective: a request from
 * ckptrun reaching any rank saves the same step on all), ckpt_save() and
 * ckpt_restore() on every rank, ckpt_wait() before writing --out. The
 * model's math, the options and the --out file are ../common.h's, shared
 * with c_trainer and cuda_trainer.
 * Exit status: 0 trained, and the last global step saved (if any) was
 * committed; 74 trained and wrote --out, but that step was not committed
 * (ckpt_wait's outcome, the same on every rank: never success when the
 * final checkpoint is not in the store); 64 usage; 1 anything else.
 * Test hook: --stall-rank R --stall-step S makes rank R stop forever (in a
 * pause()) right after its ckpt_save(S) returned: its part is in flight,
 * the global commit of S cannot happen (every rank must report its part
 * durable), and a test can SIGKILL it there.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "ckpt.h"
#include "ckpt_mpi.h"
#include "../common.h" /* the model, the options, --out, the exit status */

/* replicated: the same bytes on every rank */
struct meta {
    uint64_t step; /* steps completed */
    uint64_t magic;
    uint32_t input, hidden, batch, world;
};

/* per rank: this rank's own */
struct rank_state {
    uint64_t rng[2];
    uint64_t samples; /* samples this rank drew */
    double loss_sum;  /* of this rank's batches */
    uint32_t rank, world;
};

struct model {
    struct mlp net; /* the parameters and Adam's moments (common.h) */
    float *ema;     /* this rank's EMA of its own gradient */
    struct meta meta;
    struct rank_state rs;
};

static int model_init(struct model *md, size_t d, size_t h, size_t b, int rank, int world)
{
    /* the same bytes on every rank */
    if (mlp_alloc(&md->net, d, h, b) || !(md->ema = calloc(md->net.nparam, sizeof(float))))
        return -1;
    /* each rank its own data stream */
    batch_rng_init(md->rs.rng);
    md->rs.rng[0] ^= 0x9E3779B97F4A7C15ull * (uint64_t)(rank + 1);
    md->rs.rng[1] += (uint64_t)rank;
    md->rs.rank = (uint32_t)rank;
    md->rs.world = (uint32_t)world;
    md->meta.magic = 0x636b70745f6d7069ull;
    md->meta.input = (uint32_t)d;
    md->meta.hidden = (uint32_t)h;
    md->meta.batch = (uint32_t)b;
    md->meta.world = (uint32_t)world;
    return 0;
}

/* One data-parallel step: gradients exchanged, summed in rank order on every
 * rank (the same float operations everywhere: the same bytes), then Adam.
 * @return the mean loss of this rank's batch, or NAN if MPI failed. */
static float train_step(struct model *md, int world, float *x, float *hid, float *gh, float *grad,
                        float *all)
{
    struct mlp *net = &md->net;
    const size_t n = net->nparam;
    float loss =
        mlp_grad(net->w, net->teacher, net->d, net->h, net->b, md->rs.rng, x, hid, gh, grad);

    md->rs.samples += net->b;
    md->rs.loss_sum += loss;
    for (size_t i = 0; i < n; i++)
        md->ema[i] = 0.9f * md->ema[i] + 0.1f * grad[i];
    if (MPI_Allgather(grad, (int)n, MPI_FLOAT, all, (int)n, MPI_FLOAT, MPI_COMM_WORLD) !=
        MPI_SUCCESS)
        return NAN;
    for (size_t i = 0; i < n; i++) { /* the job's gradient, summed in rank order */
        float g = 0;
        for (int r = 0; r < world; r++)
            g += all[(size_t)r * n + i];
        grad[i] = g;
    }
    adam_step(net->w, net->m, net->v, grad, n, 1.0f / (float)(net->b * (size_t)world),
              md->meta.step + 1);
    md->meta.step++;
    return loss / (float)net->b;
}

/* FNV-1a over the replicated state: the ranks compare it at the end. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ c[i]) * 0x100000001b3ull;
    return h;
}

/* The per-rank state as one record: rank_state, then grad_ema. */
static void pack_rank(const struct model *md, unsigned char *buf)
{
    memcpy(buf, &md->rs, sizeof md->rs);
    memcpy(buf + sizeof md->rs, md->ema, md->net.nparam * sizeof(float));
}

/* Rank 0 writes the replicated state once, then every rank's record (in
 * rank order), to `path`. Collective. @return 0 or -1. */
static int write_state(const char *path, const struct model *md, int rank, int world)
{
    const size_t rec = sizeof md->rs + md->net.nparam * sizeof(float);
    unsigned char *mine = malloc(rec), *all = rank == 0 ? malloc(rec * (size_t)world) : NULL;
    int ok = mine && (rank != 0 || all), okall = 0, rc = -1;

    /* every rank reaches the gather, whatever its own allocation did */
    MPI_Allreduce(&ok, &okall, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!okall)
        goto out;
    pack_rank(md, mine);
    if (MPI_Gather(mine, (int)rec, MPI_BYTE, all, (int)rec, MPI_BYTE, 0, MPI_COMM_WORLD) !=
        MPI_SUCCESS)
        goto out;
    if (rank == 0) {
        const struct out_piece pieces[] = {
            { &md->meta, sizeof md->meta },
            { md->net.w, md->net.nparam * sizeof(float) },
            { md->net.m, md->net.nparam * sizeof(float) },
            { md->net.v, md->net.nparam * sizeof(float) },
            { all, rec * (size_t)world },
        };
        if (write_out(path, pieces, sizeof pieces / sizeof pieces[0]))
            goto out;
    }
    rc = 0;
out:
    free(mine);
    free(all);
    return rc;
}

/* The command line: common.h's, and the options of this trainer. */
struct args {
    struct trainer_opts o;
    uint64_t stall_rank, stall_step;
    int stall, reshard;
};

static int own_option(void *user, const char *opt, const char *val)
{
    struct args *a = user;
    if (!strcmp(opt, "--reshard")) {
        a->reshard = 1;
        return OPT_FLAG;
    }
    if (!strcmp(opt, "--stall-rank") || !strcmp(opt, "--stall-step")) {
        int rank = opt[8] == 'r';
        a->stall |= rank ? 1 : 2;
        return val && !parse_u64(val, rank ? &a->stall_rank : &a->stall_step) ? OPT_VALUE
                                                                              : OPT_BAD_VALUE;
    }
    return OPT_UNKNOWN;
}

/* @return -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, struct args *a, int rank)
{
    const struct trainer_cli cli = {
        .name = "mpi_trainer",
        .synopsis = "mpirun -np N mpi_trainer --steps N --every K --out FILE [options]",
        .out_help = "rank 0 writes the final state of every rank to FILE",
        .state_help = "replicated state = ~12*D*H bytes,\n"
                      "                  per-rank state ~4*D*H bytes",
        .batch_help = " per rank",
        .extra_help = "  --stall-rank R --stall-step S\n"
                      "                  (tests) rank R stops forever after its save of step S\n"
                      "  --reshard       resume a checkpoint of another number of ranks: the\n"
                      "                  replicated state from it, rank r's own state from its\n"
                      "                  part r (a fresh one where it had no rank r)\n",
        .usage_here = rank == 0,
        .option = own_option,
        .user = a,
    };
    int rc = trainer_parse(argc, argv, &cli, &a->o);

    if (rc < 0 && a->stall && a->stall != 3) {
        fprintf(stderr, "mpi_trainer: --stall-rank and --stall-step go together\n");
        rc = 64;
    }
    return rc;
}

static int newest_cb(void *user, const struct ckpt_info *i)
{
    uint64_t *v = user;
    v[0] = i->step;
    v[1] = i->world_size ? i->world_size : 1;
    return 1; /* the first listed: the one ckpt_restore would take first */
}

/* The newest global checkpoint was written by another number of ranks:
 * rank 0 names it (step and world size, to every rank), each rank reads
 * the part of its own rank (replicated items with it) with
 * ckpt_restore_part(), or part 0 for the replicated state only where the
 * old job had no such rank, whose own state then starts afresh.
 * @return CKPT_OK or the failure (on every rank). */
static ckpt_status reshard(struct model *md, struct ckpt_ctx *ctx, int rank, int world)
{
    uint64_t v[2] = { 0, 0 }, restored = 0;
    int st = CKPT_OK, worst = 0;
    struct rank_state fresh = md->rs;

    if (rank == 0 && (st = ckpt_list(ctx, newest_cb, v)) == CKPT_OK && !v[1])
        st = CKPT_E_NOENT;
    MPI_Bcast(&st, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (st)
        return (ckpt_status)st;
    MPI_Bcast(v, 2, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    st = ckpt_restore_part(ctx, v[0], (uint64_t)rank < v[1] ? (unsigned)rank : 0, &restored);
    if (st == CKPT_OK && (uint64_t)rank >= v[1]) {
        md->rs = fresh; /* no rank of that number then: a fresh data stream */
        memset(md->ema, 0, md->net.nparam * sizeof(float));
    }
    MPI_Allreduce(&st, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (worst)
        return (ckpt_status)worst;
    printf("mpi_trainer: rank %d resharded step %llu of %llu ranks (part %u)\n", rank,
           (unsigned long long)v[0], (unsigned long long)v[1],
           (uint64_t)rank < v[1] ? (unsigned)rank : 0);
    md->meta.world = (uint32_t)world;
    md->rs.rank = (uint32_t)rank;
    md->rs.world = (uint32_t)world;
    return CKPT_OK;
}

/* Open, protect, restore: every rank the same calls in the same order.
 * @return 0, or the exit status. */
static int setup(struct model *md, struct ckpt_config *cfg, struct ckpt_ctx **ctx, int rank,
                 int world, int resharding)
{
    const size_t pb = md->net.nparam * sizeof(float);
    uint64_t restored = 0;
    ckpt_status st = ckpt_open(cfg, ctx);

    if (st) {
        fprintf(stderr, "mpi_trainer: rank %d: cannot open checkpoint store: %s (%s)\n", rank,
                ckpt_errmsg(NULL), ckpt_strerror(st));
        return open_failed_exit(st);
    }
    /* what libckpt resolved (config, environment, collective) */
    printf("mpi_trainer: rank %d of %d pid %d libckpt rank %u of %u\n", rank, world, (int)getpid(),
           ckpt_rank(*ctx), ckpt_world_size(*ctx));
    fflush(stdout);
    if ((st = ckpt_protect_replicated(*ctx, "params", md->net.w, pb, CKPT_ELEM_F32)) ||
        (st = ckpt_protect_replicated(*ctx, "adam_m", md->net.m, pb, CKPT_ELEM_F32)) ||
        (st = ckpt_protect_replicated(*ctx, "adam_v", md->net.v, pb, CKPT_ELEM_F32)) ||
        (st = ckpt_protect_replicated(*ctx, "meta", &md->meta, sizeof md->meta, CKPT_ELEM_BYTES)) ||
        (st = ckpt_protect(*ctx, "rank", &md->rs, sizeof md->rs)) ||
        (st = ckpt_protect_ex(*ctx, "grad_ema", md->ema, pb, CKPT_ELEM_F32))) {
        fprintf(stderr, "mpi_trainer: protect: %s\n", ckpt_strerror(st));
        return 1;
    }
    st = ckpt_restore(*ctx, &restored); /* collective: every rank the same step */
    if (st == CKPT_E_WORLD && resharding) {
        fprintf(stderr, "mpi_trainer: rank %d: %s: resharding\n", rank, ckpt_errmsg(*ctx));
        st = reshard(md, *ctx, rank, world);
    }
    if (st == CKPT_OK) {
        if (md->meta.input != md->net.d || md->meta.hidden != md->net.h ||
            md->meta.batch != md->net.b || md->meta.world != (uint32_t)world ||
            md->rs.rank != (uint32_t)rank) {
            fprintf(stderr, "mpi_trainer: checkpoint was made with other "
                            "--input/--hidden/--batch or ranks\n");
            return 1;
        }
        printf("mpi_trainer: rank %d resumed from step %llu\n", rank,
               (unsigned long long)md->meta.step);
    } else if (st == CKPT_E_NOENT) {
        printf("mpi_trainer: rank %d starting fresh (no checkpoint)\n", rank);
    } else {
        fprintf(stderr, "mpi_trainer: rank %d: restore failed: %s: %s\n", rank, ckpt_strerror(st),
                ckpt_errmsg(*ctx));
        return st == CKPT_E_WORLD ? 65 : 1;
    }
    return 0;
}

static int train(struct model *md, struct ckpt_ctx *ctx, const struct args *a, int rank, int world)
{
    const size_t n = md->net.nparam;
    float *x = malloc(md->net.d * sizeof *x), *hid = malloc(md->net.h * sizeof *hid);
    float *gh = malloc(md->net.h * sizeof *gh), *grad = malloc(n * sizeof *grad);
    float *all = malloc(n * (size_t)world * sizeof *all);
    int rc = 1;

    if (!x || !hid || !gh || !grad || !all) {
        fprintf(stderr, "mpi_trainer: rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    while (md->meta.step < a->o.steps) {
        float loss = train_step(md, world, x, hid, gh, grad, all);
        int want;
        if (isnan(loss)) {
            fprintf(stderr, "mpi_trainer: rank %d: MPI_Allgather failed\n", rank);
            goto out;
        }
        if (!a->o.quiet && rank == 0 && (md->meta.step % 50 == 0 || md->meta.step == a->o.steps))
            printf("mpi_trainer: step %llu loss %.4f\n", (unsigned long long)md->meta.step, loss);
        /* collective, every step: a request seen by any rank is seen by all,
         * and the ranks' durable parts get committed (by rank 0) */
        want = ckpt_should_save(ctx);
        if (want || (a->o.every && md->meta.step % a->o.every == 0)) {
            ckpt_status st = ckpt_save(ctx, md->meta.step);
            if (st)
                fprintf(stderr, "mpi_trainer: rank %d: save at step %llu failed: %s: %s\n", rank,
                        (unsigned long long)md->meta.step, ckpt_strerror(st), ckpt_errmsg(ctx));
            else if (!a->o.quiet || a->stall)
                printf("mpi_trainer: rank %d saving step %llu\n", rank,
                       (unsigned long long)md->meta.step);
            if (a->stall && a->stall_rank == (uint64_t)rank && a->stall_step == md->meta.step) {
                printf("mpi_trainer: rank %d stalled after saving step %llu\n", rank,
                       (unsigned long long)md->meta.step);
                fflush(stdout);
                for (;;)
                    pause();
            }
        }
        if (a->o.sleep_ms)
            sleep_ms(a->o.sleep_ms);
        fflush(stdout);
    }
    rc = 0;
out:
    free(x);
    free(hid);
    free(gh);
    free(grad);
    free(all);
    return rc;
}

int main(int argc, char **argv)
{
    struct args a = { .o = { .input = 256, .hidden = 1024, .batch = 4 } }; /* the defaults */
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *ctx = NULL;
    struct ckpt_mpi mpi;
    struct model md = { 0 };
    int provided = 0, rank = 0, world = 1, rc;
    uint64_t h[2], hmin[2], hmax[2];
    char who[32];
    ckpt_status st;

    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "mpi_trainer: MPI_Init_thread failed\n");
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (provided < MPI_THREAD_FUNNELED) {
        fprintf(stderr, "mpi_trainer: MPI gives no MPI_THREAD_FUNNELED\n");
        MPI_Finalize();
        return 1;
    }
    if ((rc = parse_args(argc, argv, &a, rank)) >= 0) {
        MPI_Finalize();
        return rc;
    }
    rc = 1;
    if (model_init(&md, a.o.input, a.o.hidden, a.o.batch, rank, world)) {
        fprintf(stderr, "mpi_trainer: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (ckpt_mpi_init(&mpi, MPI_COMM_WORLD) != 0) {
        fprintf(stderr, "mpi_trainer: MPI_Comm_dup failed\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    cfg.store = a.o.store;      /* NULL: CKPT_STORE, else the default store */
    cfg.run = a.o.run;          /* NULL: CKPT_RUN, else the directory's name */
    cfg.collective = &mpi.coll; /* rank and size come with it */
    if ((rc = setup(&md, &cfg, &ctx, rank, world, a.reshard)) != 0) {
        /* a rank that cannot go on takes the job with it: the others wait
         * in a collective */
        fflush(NULL);
        MPI_Abort(MPI_COMM_WORLD, rc);
    }
    if (rank == 0)
        printf("mpi_trainer: %d ranks start at step %llu\n", world,
               (unsigned long long)md.meta.step);
    fflush(stdout);
    if (train(&md, ctx, &a, rank, world) != 0)
        MPI_Abort(MPI_COMM_WORLD, 1);
    snprintf(who, sizeof who, "rank %d: ", rank);
    st = last_commit("mpi_trainer", who, ctx, CKPT_OK); /* collective: the same on every rank */
    /* the replicated state must be the same bytes on every rank */
    h[0] = fnv(0xcbf29ce484222325ull, md.net.w, md.net.nparam * sizeof(float));
    h[0] = fnv(h[0], md.net.m, md.net.nparam * sizeof(float));
    h[0] = fnv(h[0], md.net.v, md.net.nparam * sizeof(float));
    h[1] = fnv(0xcbf29ce484222325ull, &md.meta, sizeof md.meta);
    MPI_Allreduce(h, hmin, 2, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(h, hmax, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (hmin[0] != hmax[0] || hmin[1] != hmax[1]) {
        if (rank == 0)
            fprintf(stderr, "mpi_trainer: the replicated state differs between ranks\n");
        rc = 1;
    } else if (write_state(a.o.out, &md, rank, world)) {
        if (rank == 0)
            fprintf(stderr, "mpi_trainer: cannot write %s: %s\n", a.o.out, strerror(errno));
        rc = 1;
    } else {
        if (rank == 0)
            printf("mpi_trainer: done, %llu steps on %d ranks, state in %s\n",
                   (unsigned long long)md.meta.step, world, a.o.out);
        rc = done_exit(st); /* 74 when the last checkpoint is not in the store */
    }
    ckpt_close(ctx); /* collective */
    ckpt_mpi_free(&mpi);
    MPI_Finalize();
    mlp_free(&md.net);
    free(md.ema);
    return rc;
}
