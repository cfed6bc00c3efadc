/*
 * common.h -- what the example trainers share (c_trainer, cuda_trainer,
 * mpi_trainer), so that each of their files tells only its own story: what
 * it protects and where that lives, how it restores, when it saves, and
 * how it ends.
 *
 * The three train the same model -- a two-layer MLP (tanh hidden layer,
 * softmax output over NOUT classes) learning a synthetic teacher with Adam
 * -- from the same fixed seed, take the same options and end the same way.
 * Here are:
 *   - the data: a deterministic RNG (xorshift128+);
 *   - the model: its parameters as one array, their initial values, the
 *     gradient of a batch and the Adam step on the host (cuda_trainer runs
 *     its own kernels);
 *   - the command line every trainer takes (--steps, --every, --out,
 *     --store, --run, --input, --hidden, --batch, --sleep-ms, --quiet,
 *     --help), with each trainer's own options beside them;
 *   - the --out file, written whole or not at all;
 *   - the exit status: 0 trained and the last checkpoint committed; 74
 *     trained, but the last checkpoint did not commit; 64 usage; 69/78 the
 *     store could not be opened.
 *
 * Header-only, on the public header ckpt.h alone; C and C++ (nvcc compiles
 * cuda_trainer.cu as C++). A trainer copied elsewhere takes this file with
 * it (#include "../common.h").
 */
#ifndef CKPT_EXAMPLES_COMMON_H
#define CKPT_EXAMPLES_COMMON_H

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ckpt.h"

#define NOUT 16 /* the teacher's classes */

/* ---- the data ------------------------------------------------------------- */

/* xorshift128+: tiny, fast, fully deterministic. */
static inline uint64_t next_u64(uint64_t *s)
{
    uint64_t s1 = s[0];
    const uint64_t s0 = s[1];
    s[0] = s0;
    s1 ^= s1 << 23;
    s[1] = s1 ^ s0 ^ (s1 >> 17) ^ (s0 >> 26);
    return s[1] + s0;
}

static inline float uniform(uint64_t *s) /* [-1, 1) */
{
    return (float)((double)(next_u64(s) >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

/* The stream the batches are drawn from, at step 0. It is training state:
 * a trainer checkpoints it, so that a resumed run draws what the
 * uninterrupted one would have. */
static inline void batch_rng_init(uint64_t s[2])
{
    s[0] = 0x0123456789ABCDEFull;
    s[1] = 0xFEDCBA9876543210ull;
}

/* ---- the model ------------------------------------------------------------ */

/* The parameters, one array so that Adam runs over one array:
 * w1 (d*h), b1 (h), w2 (h*NOUT), b2 (NOUT). */
static inline size_t mlp_nparam(size_t d, size_t h)
{
    return d * h + h + h * NOUT + NOUT;
}

/* The initial parameters into w (mlp_nparam floats; the biases 0) and the
 * teacher (d*NOUT floats: not state, it is derived again at every start)
 * from a fixed seed: every trainer and every rank starts from the same
 * bytes. */
static inline void mlp_init(float *w, float *teacher, size_t d, size_t h)
{
    uint64_t seed[2] = { 0x9E3779B97F4A7C15ull, 0xD1B54A32D192ED03ull };
    float *b1 = w + d * h, *w2 = b1 + h, *b2 = w2 + h * NOUT;

    for (size_t i = 0; i < d * h; i++)
        w[i] = uniform(seed) / sqrtf((float)d);
    memset(b1, 0, h * sizeof *b1);
    for (size_t i = 0; i < h * NOUT; i++)
        w2[i] = uniform(seed) / sqrtf((float)h);
    memset(b2, 0, NOUT * sizeof *b2);
    for (size_t i = 0; i < d * NOUT; i++)
        teacher[i] = uniform(seed);
}

/* The model's state in host memory (c_trainer, mpi_trainer): what
 * mlp_alloc() makes. */
struct mlp {
    size_t d, h, b, nparam; /* input and hidden widths, batch, mlp_nparam(d, h) */
    float *w;               /* the parameters */
    float *m, *v;           /* Adam's moments, one per parameter */
    float *teacher;         /* fixed, derived from the seed: not state */
};

static inline void mlp_free(struct mlp *net)
{
    free(net->w);
    free(net->m);
    free(net->v);
    free(net->teacher);
}

/* The model at step 0: its parameters from mlp_init, the moments 0.
 * @return 0, or -1 out of memory (mlp_free frees what was made). */
static inline int mlp_alloc(struct mlp *net, size_t d, size_t h, size_t b)
{
    net->d = d;
    net->h = h;
    net->b = b;
    net->nparam = mlp_nparam(d, h);
    net->w = (float *)calloc(net->nparam, sizeof(float));
    net->m = (float *)calloc(net->nparam, sizeof(float));
    net->v = (float *)calloc(net->nparam, sizeof(float));
    net->teacher = (float *)calloc(d * NOUT, sizeof(float));
    if (!net->w || !net->m || !net->v || !net->teacher)
        return -1;
    mlp_init(net->w, net->teacher, d, h);
    return 0;
}

/* The gradient of a batch of b samples drawn from rng, summed over the
 * batch (not averaged) into grad (mlp_nparam floats, zeroed here); the
 * label of a sample is the teacher's highest output. x (d floats), hid and
 * gh (h floats each) are scratch. @return the batch's summed loss. */
static inline float mlp_grad(const float *w, const float *teacher, size_t d, size_t h, size_t b,
                             uint64_t *rng, float *x, float *hid, float *gh, float *grad)
{
    const float *w1 = w, *b1 = w + d * h, *w2 = b1 + h, *b2 = w2 + h * NOUT;
    float *gw1 = grad, *gb1 = grad + d * h, *gw2 = gb1 + h, *gb2 = gw2 + h * NOUT;
    float loss = 0;

    memset(grad, 0, mlp_nparam(d, h) * sizeof(float));
    for (size_t s = 0; s < b; s++) {
        float logits[NOUT], tl[NOUT], p[NOUT], mx = -1e30f, sum = 0;
        int label = 0;
        for (size_t i = 0; i < d; i++)
            x[i] = uniform(rng);
        for (int o = 0; o < NOUT; o++) {
            tl[o] = 0;
            for (size_t i = 0; i < d; i++)
                tl[o] += x[i] * teacher[i * NOUT + o];
            if (tl[o] > tl[label])
                label = o;
        }
        for (size_t j = 0; j < h; j++)
            hid[j] = b1[j];
        for (size_t i = 0; i < d; i++) {
            const float xi = x[i], *row = w1 + i * h;
            for (size_t j = 0; j < h; j++)
                hid[j] += xi * row[j];
        }
        for (size_t j = 0; j < h; j++)
            hid[j] = tanhf(hid[j]);
        for (int o = 0; o < NOUT; o++)
            logits[o] = b2[o];
        for (size_t j = 0; j < h; j++)
            for (int o = 0; o < NOUT; o++)
                logits[o] += hid[j] * w2[j * NOUT + o];
        for (int o = 0; o < NOUT; o++)
            mx = logits[o] > mx ? logits[o] : mx;
        for (int o = 0; o < NOUT; o++)
            sum += p[o] = expf(logits[o] - mx);
        for (int o = 0; o < NOUT; o++)
            p[o] /= sum;
        loss += -logf(p[label] + 1e-12f);
        p[label] -= 1.0f; /* dlogits */
        for (int o = 0; o < NOUT; o++)
            gb2[o] += p[o];
        for (size_t j = 0; j < h; j++) {
            float g = 0;
            for (int o = 0; o < NOUT; o++) {
                gw2[j * NOUT + o] += hid[j] * p[o];
                g += w2[j * NOUT + o] * p[o];
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
    return loss;
}

/* Adam's step number t (1 for the first) over n parameters w with moments
 * m and v, the gradient being grad * inv (inv: 1 / the samples summed). */
static inline void adam_step(float *w, float *m, float *v, const float *grad, size_t n, float inv,
                             uint64_t t)
{
    const float lr = 1e-3f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    const float c1 = 1.0f - powf(b1, (float)t), c2 = 1.0f - powf(b2, (float)t);

    for (size_t i = 0; i < n; i++) {
        float g = grad[i] * inv;
        m[i] = b1 * m[i] + (1 - b1) * g;
        v[i] = b2 * v[i] + (1 - b2) * g * g;
        w[i] -= lr * (m[i] / c1) / (sqrtf(v[i] / c2) + eps);
    }
}

/* ---- the command line ------------------------------------------------------- */

struct trainer_opts {
    uint64_t steps;    /* --steps: train until this many steps are done */
    uint64_t every;    /* --every: save every K steps, 0 only when ckptrun asks */
    const char *out;   /* --out: the final state's file */
    const char *store; /* --store, --run: NULL for CKPT_STORE, CKPT_RUN */
    const char *run;
    uint64_t input, hidden, batch; /* --input, --hidden, --batch: the caller's defaults */
    uint64_t sleep_ms;             /* --sleep-ms: after every step */
    int quiet;                     /* --quiet: the summary only */
};

/* What one trainer adds to the common command line. */
struct trainer_cli {
    const char *name;                          /* "c_trainer": its messages' prefix */
    const char *synopsis;                      /* the usage line, after "usage: " */
    const char *out_help;                      /* what --out gets */
    const char *state_help;                    /* after --hidden's default: the state's size */
    const char *batch_help;                    /* after "batch size": "" or " per rank" */
    const char *extra_help;                    /* the help lines of its own options, or "" */
    uint64_t max_input, max_hidden, max_batch; /* 0: no bound */
    int usage_here; /* 0: usage is printed by another process (MPI rank 0) */
    /* Its own options, asked first: opt is the option, val the next word
     * (NULL at the end). @return OPT_FLAG, OPT_VALUE (it took val too),
     * OPT_STOPS (the option is the whole command: parsing ends there with
     * nothing else checked, and the trainer does what it asks), OPT_UNKNOWN
     * (not one of its own) or OPT_BAD_VALUE (val missing or wrong). NULL:
     * it has none. */
    int (*option)(void *user, const char *opt, const char *val);
    void *user;
};
enum { OPT_UNKNOWN = -1, OPT_FLAG, OPT_VALUE, OPT_STOPS, OPT_BAD_VALUE };

static inline void trainer_usage(FILE *to, const struct trainer_cli *c,
                                 const struct trainer_opts *dflt)
{
    fprintf(to,
            "usage: %s\n"
            "  --steps N       train until N steps are done (resuming if a checkpoint exists)\n"
            "  --every K       checkpoint every K steps (0 = only when ckptrun asks)\n"
            "  --out FILE      %s\n"
            "  --store URL     store (default $CKPT_STORE, else file://~/.local/share/ckpt)\n"
            "  --run NAME      run name (default $CKPT_RUN, else the directory's name)\n"
            "  --input D       input width (default %llu)\n"
            "  --hidden H      hidden width (default %llu; %s)\n"
            "  --batch B       batch size%s (default %llu)\n"
            "  --sleep-ms MS   sleep after every step (tests use it to slow down)\n"
            "%s"
            "  --quiet         print only the summary\n"
            "exit: 0 done; 74 done, but the last checkpoint was not committed\n",
            c->synopsis, c->out_help, (unsigned long long)dflt->input,
            (unsigned long long)dflt->hidden, c->state_help, c->batch_help,
            (unsigned long long)dflt->batch, c->extra_help);
}

static inline int parse_u64(const char *s, uint64_t *v)
{
    char *end;
    errno = 0;
    *v = strtoull(s, &end, 10);
    return (*s && !*end && !errno) ? 0 : -1;
}

/* A size option: a number from 1 to max (0: no bound). */
static inline int parse_size(const char *s, uint64_t *v, uint64_t max)
{
    return parse_u64(s, v) || !*v || (max && *v > max) ? -1 : 0;
}

/* Parse argv into o (holding the defaults) and the trainer's own options.
 * @return -1 to go on (also after an option that OPT_STOPS), else the
 * exit status: 0 after --help, 64 for a bad command line (said, with the
 * usage when --steps or --out is missing). */
static inline int trainer_parse(int argc, char **argv, const struct trainer_cli *c,
                                struct trainer_opts *o)
{
    const struct trainer_opts dflt = *o;
    int have_steps = 0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0, own = c->option ? c->option(c->user, a, v) : OPT_UNKNOWN;
        if (own == OPT_STOPS)
            return -1;
        if (own == OPT_FLAG)
            continue;
        if (own == OPT_VALUE || own == OPT_BAD_VALUE) {
            bad = own == OPT_BAD_VALUE;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            if (c->usage_here)
                trainer_usage(stdout, c, &dflt);
            return 0;
        } else if (!strcmp(a, "--quiet")) {
            o->quiet = 1;
            continue;
        } else if (!v) {
            fprintf(stderr, "%s: %s needs a value\n", c->name, a);
            return 64;
        } else if (!strcmp(a, "--steps")) {
            bad = parse_u64(v, &o->steps), have_steps = 1;
        } else if (!strcmp(a, "--every")) {
            bad = parse_u64(v, &o->every);
        } else if (!strcmp(a, "--out")) {
            o->out = v;
        } else if (!strcmp(a, "--store")) {
            o->store = v;
        } else if (!strcmp(a, "--run")) {
            o->run = v;
        } else if (!strcmp(a, "--input")) {
            bad = parse_size(v, &o->input, c->max_input);
        } else if (!strcmp(a, "--hidden")) {
            bad = parse_size(v, &o->hidden, c->max_hidden);
        } else if (!strcmp(a, "--batch")) {
            bad = parse_size(v, &o->batch, c->max_batch);
        } else if (!strcmp(a, "--sleep-ms")) {
            bad = parse_u64(v, &o->sleep_ms);
        } else {
            fprintf(stderr, "%s: unknown option %s (see --help)\n", c->name, a);
            return 64;
        }
        if (bad && !v) {
            fprintf(stderr, "%s: %s needs a value\n", c->name, a);
            return 64;
        }
        if (bad) {
            fprintf(stderr, "%s: bad value for %s: %s\n", c->name, a, v);
            return 64;
        }
        i++;
    }
    if (!have_steps || !o->out) {
        if (c->usage_here)
            trainer_usage(stderr, c, &dflt);
        return 64;
    }
    return -1;
}

/* ---- the run ---------------------------------------------------------------- */

/* The exit status for a store that could not be opened (ckpt_open), as
 * ckptrun's: 78 configuration or credentials, 69 the store unreachable. */
static inline int open_failed_exit(ckpt_status st)
{
    return st == CKPT_E_CONFIG || st == CKPT_E_AUTH ? 78 : 69;
}

static inline void sleep_ms(uint64_t ms)
{
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* One piece of the --out file. */
struct out_piece {
    const void *p;
    size_t size;
};

/* Write the pieces, in order, to path, whole or not at all: a temporary
 * file, fsync, rename. @return 0, or -1 (errno says why). */
static inline int write_out(const char *path, const struct out_piece *pc, size_t n)
{
    char tmp[4096];
    FILE *f;
    int ok;

    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    if (!(f = fopen(tmp, "wb")))
        return -1;
    ok = 1;
    for (size_t i = 0; i < n && ok; i++)
        ok = fwrite(pc[i].p, 1, pc[i].size, f) == pc[i].size;
    if (!ok || fflush(f) || fsync(fileno(f))) {
        fclose(f);
        unlink(tmp);
        return -1;
    }
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* The run's last checkpoint: `saved`, the last ckpt_save()'s own outcome,
 * when it was refused at once, else its commit (ckpt_wait: collective
 * under MPI). Said on stderr when it did not commit; `who` prefixes the
 * message ("rank 1: ", or ""). */
static inline ckpt_status last_commit(const char *name, const char *who, struct ckpt_ctx *ctx,
                                      ckpt_status saved)
{
    ckpt_status st = saved ? saved : ckpt_wait(ctx);

    if (st)
        fprintf(stderr, "%s: %slast checkpoint not committed: %s: %s (exit 74)\n", name, who,
                ckpt_strerror(st), ckpt_errmsg(ctx));
    return st;
}

/* Trained and --out written: success only when the last checkpoint is in
 * the store. A script that deletes the instance on exit 0 would otherwise
 * lose the work; 74, as ckptrun's, says a restart resumes from an older
 * committed step. */
static inline int done_exit(ckpt_status last)
{
    return last ? 74 : 0;
}

#endif
