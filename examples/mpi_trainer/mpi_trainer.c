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
 * ckpt_restore() on every rank, ckpt_wait() before writing --out.
 * Exit status: 0 trained, and the last global step saved (if any) was
 * committed; 74 trained and wrote --out, but that step was not committed
 * (ckpt_wait's outcome, the same on every rank: never success when the
 * final checkpoint is not in the store); 64 usage; 1 anything else.
 * Test hook: --stall-rank R --stall-step S makes rank R stop forever (in a
 * pause()) right after its ckpt_save(S) returned: its part is in flight,
 * the global commit of S cannot happen (every rank must report its part
 * durable), and a test can SIGKILL it there.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "ckpt.h"
#include "ckpt_mpi.h"

#define NOUT 16

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
    size_t d, h, b, nparam;
    float *w1, *b1, *w2, *b2; /* d*h, h, h*NOUT, NOUT: one array */
    float *m, *v;             /* Adam moments */
    float *ema;               /* this rank's EMA of its own gradient */
    float *teacher;           /* fixed from the seed: not state */
    struct meta meta;
    struct rank_state rs;
};

static uint64_t next_u64(uint64_t *s)
{
    uint64_t s1 = s[0];
    const uint64_t s0 = s[1];
    s[0] = s0;
    s1 ^= s1 << 23;
    s[1] = s1 ^ s0 ^ (s1 >> 17) ^ (s0 >> 26);
    return s[1] + s0;
}

static float uniform(uint64_t *s) /* [-1, 1) */
{
    return (float)((double)(next_u64(s) >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

static int model_init(struct model *md, size_t d, size_t h, size_t b, int rank, int world)
{
    uint64_t seed[2] = { 0x9E3779B97F4A7C15ull, 0xD1B54A32D192ED03ull };
    md->d = d;
    md->h = h;
    md->b = b;
    md->nparam = d * h + h + h * NOUT + NOUT;
    md->w1 = calloc(md->nparam, sizeof(float));
    md->m = calloc(md->nparam, sizeof(float));
    md->v = calloc(md->nparam, sizeof(float));
    md->ema = calloc(md->nparam, sizeof(float));
    md->teacher = calloc(d * NOUT, sizeof(float));
    if (!md->w1 || !md->m || !md->v || !md->ema || !md->teacher)
        return -1;
    md->b1 = md->w1 + d * h;
    md->w2 = md->b1 + h;
    md->b2 = md->w2 + h * NOUT;
    for (size_t i = 0; i < d * h; i++)
        md->w1[i] = uniform(seed) / sqrtf((float)d);
    for (size_t i = 0; i < h * NOUT; i++)
        md->w2[i] = uniform(seed) / sqrtf((float)h);
    for (size_t i = 0; i < d * NOUT; i++)
        md->teacher[i] = uniform(seed);
    /* each rank its own data stream */
    md->rs.rng[0] = 0x0123456789ABCDEFull ^ (0x9E3779B97F4A7C15ull * (uint64_t)(rank + 1));
    md->rs.rng[1] = 0xFEDCBA9876543210ull + (uint64_t)rank;
    md->rs.rank = (uint32_t)rank;
    md->rs.world = (uint32_t)world;
    md->meta.magic = 0x636b70745f6d7069ull;
    md->meta.input = (uint32_t)d;
    md->meta.hidden = (uint32_t)h;
    md->meta.batch = (uint32_t)b;
    md->meta.world = (uint32_t)world;
    return 0;
}

/* This rank's gradient (summed over its batch) into grad; @return its loss sum. */
static float local_grad(struct model *md, float *x, float *hid, float *gh, float *grad)
{
    const size_t d = md->d, h = md->h;
    float loss = 0;
    memset(grad, 0, md->nparam * sizeof(float));
    float *gw1 = grad, *gb1 = grad + d * h, *gw2 = gb1 + h, *gb2 = gw2 + h * NOUT;

    for (size_t s = 0; s < md->b; s++) {
        float logits[NOUT], tl[NOUT], p[NOUT], mx = -1e30f, sum = 0;
        int label = 0;
        for (size_t i = 0; i < d; i++)
            x[i] = uniform(md->rs.rng);
        for (int o = 0; o < NOUT; o++) {
            tl[o] = 0;
            for (size_t i = 0; i < d; i++)
                tl[o] += x[i] * md->teacher[i * NOUT + o];
            if (tl[o] > tl[label])
                label = o;
        }
        for (size_t j = 0; j < h; j++)
            hid[j] = md->b1[j];
        for (size_t i = 0; i < d; i++) {
            const float xi = x[i], *row = md->w1 + i * h;
            for (size_t j = 0; j < h; j++)
                hid[j] += xi * row[j];
        }
        for (size_t j = 0; j < h; j++)
            hid[j] = tanhf(hid[j]);
        for (int o = 0; o < NOUT; o++)
            logits[o] = md->b2[o];
        for (size_t j = 0; j < h; j++)
            for (int o = 0; o < NOUT; o++)
                logits[o] += hid[j] * md->w2[j * NOUT + o];
        for (int o = 0; o < NOUT; o++)
            mx = logits[o] > mx ? logits[o] : mx;
        for (int o = 0; o < NOUT; o++)
            sum += p[o] = expf(logits[o] - mx);
        for (int o = 0; o < NOUT; o++)
            p[o] /= sum;
        loss += -logf(p[label] + 1e-12f);
        p[label] -= 1.0f;
        for (int o = 0; o < NOUT; o++)
            gb2[o] += p[o];
        for (size_t j = 0; j < h; j++) {
            float g = 0;
            for (int o = 0; o < NOUT; o++) {
                gw2[j * NOUT + o] += hid[j] * p[o];
                g += md->w2[j * NOUT + o] * p[o];
            }
            gh[j] = g * (1 - hid[j] * hid[j]);
            gb1[j] += gh[j];
        }
        for (size_t i = 0; i < d; i++) {
            const float xi = x[i];
            float *row = gw1 + i * h;
            for (size_t j = 0; j < h; j++)
                row[j] += xi * gh[j];
        }
    }
    md->rs.samples += md->b;
    return loss;
}

/* One data-parallel step: gradients exchanged, summed in rank order on every
 * rank (the same float operations everywhere: the same bytes), then Adam.
 * @return the mean loss of this rank's batch, or NAN if MPI failed. */
static float train_step(struct model *md, int world, float *x, float *hid, float *gh, float *grad,
                        float *all)
{
    const float lr = 1e-3f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    const uint64_t t = md->meta.step + 1;
    const size_t n = md->nparam;
    float loss = local_grad(md, x, hid, gh, grad);

    md->rs.loss_sum += loss;
    for (size_t i = 0; i < n; i++)
        md->ema[i] = 0.9f * md->ema[i] + 0.1f * grad[i];
    if (MPI_Allgather(grad, (int)n, MPI_FLOAT, all, (int)n, MPI_FLOAT, MPI_COMM_WORLD) !=
        MPI_SUCCESS)
        return NAN;
    {
        const float c1 = 1.0f - powf(b1, (float)t), c2 = 1.0f - powf(b2, (float)t);
        const float inv = 1.0f / (float)(md->b * (size_t)world);
        for (size_t i = 0; i < n; i++) {
            float g = 0;
            for (int r = 0; r < world; r++)
                g += all[(size_t)r * n + i];
            g *= inv;
            md->m[i] = b1 * md->m[i] + (1 - b1) * g;
            md->v[i] = b2 * md->v[i] + (1 - b2) * g * g;
            md->w1[i] -= lr * (md->m[i] / c1) / (sqrtf(md->v[i] / c2) + eps);
        }
    }
    md->meta.step = t;
    return loss / (float)md->b;
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
    memcpy(buf + sizeof md->rs, md->ema, md->nparam * sizeof(float));
}

/* Rank 0 writes the replicated state once, then every rank's record (in
 * rank order), to `path` (temp + rename). Collective. @return 0 or -1. */
static int write_out(const char *path, const struct model *md, int rank, int world)
{
    const size_t rec = sizeof md->rs + md->nparam * sizeof(float);
    unsigned char *mine = malloc(rec), *all = rank == 0 ? malloc(rec * (size_t)world) : NULL;
    int ok = mine && (rank != 0 || all), okall = 0;
    char tmp[4096];
    FILE *f = NULL;

    /* every rank reaches the gather, whatever its own allocation did */
    MPI_Allreduce(&ok, &okall, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!okall)
        goto fail;
    pack_rank(md, mine);
    if (MPI_Gather(mine, (int)rec, MPI_BYTE, all, (int)rec, MPI_BYTE, 0, MPI_COMM_WORLD) !=
        MPI_SUCCESS)
        goto fail;
    if (rank == 0) {
        snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
        if (!(f = fopen(tmp, "wb")))
            goto fail;
        if (fwrite(&md->meta, sizeof md->meta, 1, f) != 1 ||
            fwrite(md->w1, sizeof(float), md->nparam, f) != md->nparam ||
            fwrite(md->m, sizeof(float), md->nparam, f) != md->nparam ||
            fwrite(md->v, sizeof(float), md->nparam, f) != md->nparam ||
            fwrite(all, rec, (size_t)world, f) != (size_t)world || fflush(f) || fsync(fileno(f))) {
            fclose(f);
            unlink(tmp);
            goto fail;
        }
        if (fclose(f) != 0 || rename(tmp, path) != 0) {
            unlink(tmp);
            goto fail;
        }
    }
    free(mine);
    free(all);
    return 0;
fail:
    free(mine);
    free(all);
    return -1;
}

static void usage(FILE *to)
{
    fprintf(to, "usage: mpirun -np N mpi_trainer --steps N --every K --out FILE [options]\n"
                "  --steps N       train until N steps are done (resuming if a checkpoint exists)\n"
                "  --every K       checkpoint every K steps (0 = only when ckptrun asks)\n"
                "  --out FILE      rank 0 writes the final state of every rank to FILE\n"
                "  --store URL     store (default $CKPT_STORE, else file://~/.local/share/ckpt)\n"
                "  --run NAME      run name (default $CKPT_RUN, else the directory's name)\n"
                "  --input D       input width (default 256)\n"
                "  --hidden H      hidden width (default 1024; replicated state = ~12*D*H bytes,\n"
                "                  per-rank state ~4*D*H bytes)\n"
                "  --batch B       batch size per rank (default 4)\n"
                "  --sleep-ms MS   sleep after every step (tests use it to slow down)\n"
                "  --stall-rank R --stall-step S\n"
                "                  (tests) rank R stops forever after its save of step S\n"
                "  --reshard       resume a checkpoint of another number of ranks: the\n"
                "                  replicated state from it, rank r's own state from its\n"
                "                  part r (a fresh one where it had no rank r)\n"
                "  --quiet         print only the summary\n"
                "exit: 0 done; 74 done, but the last checkpoint was not committed\n");
}

static int parse_u64(const char *s, uint64_t *v)
{
    char *end;
    errno = 0;
    *v = strtoull(s, &end, 10);
    return (*s && !*end && !errno) ? 0 : -1;
}

struct args {
    uint64_t steps, every, d, h, b, sleep_ms, stall_rank, stall_step;
    const char *out;
    int quiet, have_steps, stall, reshard;
};

/* @return -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, struct args *a, struct ckpt_config *cfg, int rank)
{
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            if (rank == 0)
                usage(stdout);
            return 0;
        } else if (!strcmp(o, "--quiet")) {
            a->quiet = 1;
            continue;
        } else if (!strcmp(o, "--reshard")) {
            a->reshard = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "mpi_trainer: %s needs a value\n", o);
            return 64;
        }
        if (!strcmp(o, "--steps"))
            bad = parse_u64(v, &a->steps), a->have_steps = 1;
        else if (!strcmp(o, "--every"))
            bad = parse_u64(v, &a->every);
        else if (!strcmp(o, "--out"))
            a->out = v;
        else if (!strcmp(o, "--store"))
            cfg->store = v;
        else if (!strcmp(o, "--run"))
            cfg->run = v;
        else if (!strcmp(o, "--input"))
            bad = parse_u64(v, &a->d) || !a->d;
        else if (!strcmp(o, "--hidden"))
            bad = parse_u64(v, &a->h) || !a->h;
        else if (!strcmp(o, "--batch"))
            bad = parse_u64(v, &a->b) || !a->b;
        else if (!strcmp(o, "--sleep-ms"))
            bad = parse_u64(v, &a->sleep_ms);
        else if (!strcmp(o, "--stall-rank"))
            bad = parse_u64(v, &a->stall_rank), a->stall |= 1;
        else if (!strcmp(o, "--stall-step"))
            bad = parse_u64(v, &a->stall_step), a->stall |= 2;
        else {
            fprintf(stderr, "mpi_trainer: unknown option %s (see --help)\n", o);
            return 64;
        }
        if (bad) {
            fprintf(stderr, "mpi_trainer: bad value for %s: %s\n", o, v);
            return 64;
        }
        i++;
    }
    if (!a->have_steps || !a->out || (a->stall && a->stall != 3)) {
        if (rank == 0)
            usage(stderr);
        return 64;
    }
    return -1;
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
        memset(md->ema, 0, md->nparam * sizeof(float));
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
    const size_t pb = md->nparam * sizeof(float);
    uint64_t restored = 0;
    ckpt_status st = ckpt_open(cfg, ctx);

    if (st) {
        fprintf(stderr, "mpi_trainer: rank %d: cannot open checkpoint store: %s (%s)\n", rank,
                ckpt_errmsg(NULL), ckpt_strerror(st));
        return st == CKPT_E_CONFIG || st == CKPT_E_AUTH ? 78 : 69;
    }
    /* what libckpt resolved (config, environment, collective) */
    printf("mpi_trainer: rank %d of %d pid %d libckpt rank %u of %u\n", rank, world, (int)getpid(),
           ckpt_rank(*ctx), ckpt_world_size(*ctx));
    fflush(stdout);
    if ((st = ckpt_protect_replicated(*ctx, "params", md->w1, pb, CKPT_ELEM_F32)) ||
        (st = ckpt_protect_replicated(*ctx, "adam_m", md->m, pb, CKPT_ELEM_F32)) ||
        (st = ckpt_protect_replicated(*ctx, "adam_v", md->v, pb, CKPT_ELEM_F32)) ||
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
        if (md->meta.input != md->d || md->meta.hidden != md->h || md->meta.batch != md->b ||
            md->meta.world != (uint32_t)world || md->rs.rank != (uint32_t)rank) {
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
    const size_t n = md->nparam;
    float *x = malloc(md->d * sizeof *x), *hid = malloc(md->h * sizeof *hid);
    float *gh = malloc(md->h * sizeof *gh), *grad = malloc(n * sizeof *grad);
    float *all = malloc(n * (size_t)world * sizeof *all);
    int rc = 1;

    if (!x || !hid || !gh || !grad || !all) {
        fprintf(stderr, "mpi_trainer: rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    while (md->meta.step < a->steps) {
        float loss = train_step(md, world, x, hid, gh, grad, all);
        int want;
        if (isnan(loss)) {
            fprintf(stderr, "mpi_trainer: rank %d: MPI_Allgather failed\n", rank);
            goto out;
        }
        if (!a->quiet && rank == 0 && (md->meta.step % 50 == 0 || md->meta.step == a->steps))
            printf("mpi_trainer: step %llu loss %.4f\n", (unsigned long long)md->meta.step, loss);
        /* collective, every step: a request seen by any rank is seen by all,
         * and the ranks' durable parts get committed (by rank 0) */
        want = ckpt_should_save(ctx);
        if (want || (a->every && md->meta.step % a->every == 0)) {
            ckpt_status st = ckpt_save(ctx, md->meta.step);
            if (st)
                fprintf(stderr, "mpi_trainer: rank %d: save at step %llu failed: %s: %s\n", rank,
                        (unsigned long long)md->meta.step, ckpt_strerror(st), ckpt_errmsg(ctx));
            else if (!a->quiet || a->stall)
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
        if (a->sleep_ms) {
            struct timespec ts = { (time_t)(a->sleep_ms / 1000),
                                   (long)(a->sleep_ms % 1000) * 1000000L };
            nanosleep(&ts, NULL);
        }
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
    struct args a = { .d = 256, .h = 1024, .b = 4 };
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *ctx = NULL;
    struct ckpt_mpi mpi;
    struct model md = { 0 };
    int provided = 0, rank = 0, world = 1, rc;
    uint64_t h[2], hmin[2], hmax[2];
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
    if ((rc = parse_args(argc, argv, &a, &cfg, rank)) >= 0) {
        MPI_Finalize();
        return rc;
    }
    rc = 1;
    if (model_init(&md, a.d, a.h, a.b, rank, world)) {
        fprintf(stderr, "mpi_trainer: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (ckpt_mpi_init(&mpi, MPI_COMM_WORLD) != 0) {
        fprintf(stderr, "mpi_trainer: MPI_Comm_dup failed\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
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
    st = ckpt_wait(ctx); /* collective: the global outcome on every rank */
    if (st)
        fprintf(stderr, "mpi_trainer: rank %d: last checkpoint not committed: %s: %s (exit 74)\n",
                rank, ckpt_strerror(st), ckpt_errmsg(ctx));
    /* the replicated state must be the same bytes on every rank */
    h[0] = fnv(0xcbf29ce484222325ull, md.w1, md.nparam * sizeof(float));
    h[0] = fnv(h[0], md.m, md.nparam * sizeof(float));
    h[0] = fnv(h[0], md.v, md.nparam * sizeof(float));
    h[1] = fnv(0xcbf29ce484222325ull, &md.meta, sizeof md.meta);
    MPI_Allreduce(h, hmin, 2, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(h, hmax, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (hmin[0] != hmax[0] || hmin[1] != hmax[1]) {
        if (rank == 0)
            fprintf(stderr, "mpi_trainer: the replicated state differs between ranks\n");
        rc = 1;
    } else if (write_out(a.out, &md, rank, world)) {
        if (rank == 0)
            fprintf(stderr, "mpi_trainer: cannot write %s: %s\n", a.out, strerror(errno));
        rc = 1;
    } else {
        if (rank == 0)
            printf("mpi_trainer: done, %llu steps on %d ranks, state in %s\n",
                   (unsigned long long)md.meta.step, world, a.out);
        rc = st ? 74 : 0; /* a script that deletes the instance on 0 would lose the work */
    }
    ckpt_close(ctx); /* collective */
    ckpt_mpi_free(&mpi);
    MPI_Finalize();
    free(md.w1);
    free(md.m);
    free(md.v);
    free(md.ema);
    free(md.teacher);
    return rc;
}
