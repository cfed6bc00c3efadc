/*
 * c_trainer -- a small, deterministic C trainer that uses libckpt.
 *
 * A two-layer MLP (tanh hidden layer, softmax output) learns a synthetic
 * teacher with Adam. Its whole state -- weights, Adam moments, the RNG and
 * the step counter -- lives in protected regions, so a run killed at any
 * moment and restarted resumes exactly where its last commit left it, and its
 * final weights are byte-identical to an uninterrupted run's.
 *
 *   c_trainer --steps N --every K --out FILE [--store URL] [--run NAME]
 *             [--hidden H] [--input D] [--batch B] [--sleep-ms MS] [--bf16] [--quiet]
 *
 * Store and run come from --store/--run or CKPT_STORE/CKPT_RUN. Under
 * ckptrun it also saves whenever ckptrun asks (ckpt_should_save()).
 *
 * Exit status: 0 trained, and its last save (if any) committed; 74 trained
 * and wrote --out, but its last save did not commit (the store holds an
 * older step: as ckptrun's 74, a run that must not be taken as complete,
 * and a restart resumes from what was committed); 64 usage; 69/78 the
 * store could not be opened; 1 anything else.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ckpt.h"

#define NOUT 16

struct meta {
    uint64_t step;      /* steps completed */
    uint64_t magic;
    uint32_t input, hidden, batch, pad;
};

struct model {
    size_t d, h, b;
    float *w1, *b1, *w2, *b2;     /* d*h, h, h*NOUT, NOUT */
    float *m, *v;                 /* Adam moments over all parameters */
    float *teacher;               /* fixed, derived from the seed: not state */
    uint16_t *w16;                /* --bf16: the parameters rounded to bf16, as a
                                     mixed-precision model holds them beside
                                     its fp32 master copy (NULL without) */
    size_t nparam;
    uint64_t rng[2];
    struct meta meta;
};

static uint64_t next_u64(uint64_t *s)
{
    /* xorshift128+ : tiny, fast, fully deterministic */
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

static int model_init(struct model *md, size_t d, size_t h, size_t b)
{
    uint64_t seed[2] = { 0x9E3779B97F4A7C15ull, 0xD1B54A32D192ED03ull };
    md->d = d;
    md->h = h;
    md->b = b;
    md->nparam = d * h + h + h * NOUT + NOUT;
    /* one allocation for all parameters so Adam runs over one array */
    md->w1 = calloc(md->nparam, sizeof(float));
    md->m = calloc(md->nparam, sizeof(float));
    md->v = calloc(md->nparam, sizeof(float));
    md->teacher = calloc(d * NOUT, sizeof(float));
    if (!md->w1 || !md->m || !md->v || !md->teacher)
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
    md->rng[0] = 0x0123456789ABCDEFull;
    md->rng[1] = 0xFEDCBA9876543210ull;
    md->meta.magic = 0x636b70745f747231ull;
    md->meta.input = (uint32_t)d;
    md->meta.hidden = (uint32_t)h;
    md->meta.batch = (uint32_t)b;
    return 0;
}

/* The bf16 copy of the parameters (round to nearest even). */
static void to_bf16(struct model *md)
{
    for (size_t i = 0; i < md->nparam; i++) {
        uint32_t u;
        memcpy(&u, &md->w1[i], 4);
        md->w16[i] = (uint16_t)((u + 0x7fff + (u >> 16 & 1)) >> 16);
    }
}

/* One step of Adam on a batch drawn from the RNG; returns the loss. */
static float train_step(struct model *md, float *x, float *hid, float *gh, float *grad)
{
    const size_t d = md->d, h = md->h;
    const float lr = 1e-3f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    float loss = 0;
    uint64_t t = md->meta.step + 1;
    memset(grad, 0, md->nparam * sizeof(float));
    float *gw1 = grad, *gb1 = grad + d * h, *gw2 = gb1 + h, *gb2 = gw2 + h * NOUT;

    for (size_t s = 0; s < md->b; s++) {
        float logits[NOUT], tl[NOUT], p[NOUT], mx = -1e30f, sum = 0;
        int label = 0;
        for (size_t i = 0; i < d; i++)
            x[i] = uniform(md->rng);
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
        p[label] -= 1.0f; /* dlogits */
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
    {
        const float c1 = 1.0f - powf(b1, (float)t), c2 = 1.0f - powf(b2, (float)t);
        const float inv = 1.0f / (float)md->b;
        float *w = md->w1;
        for (size_t i = 0; i < md->nparam; i++) {
            float g = grad[i] * inv;
            md->m[i] = b1 * md->m[i] + (1 - b1) * g;
            md->v[i] = b2 * md->v[i] + (1 - b2) * g * g;
            w[i] -= lr * (md->m[i] / c1) / (sqrtf(md->v[i] / c2) + eps);
        }
    }
    md->meta.step = t;
    if (md->w16)
        to_bf16(md);
    return loss / (float)md->b;
}

static int write_out(const char *path, const struct model *md)
{
    char tmp[4096];
    FILE *f;
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    f = fopen(tmp, "wb");
    if (!f)
        return -1;
    if (fwrite(md->w1, sizeof(float), md->nparam, f) != md->nparam || fflush(f) ||
        fsync(fileno(f))) {
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

static void usage(FILE *to)
{
    fprintf(to,
            "usage: c_trainer --steps N --every K --out FILE [options]\n"
            "  --steps N       train until N steps are done (resuming if a checkpoint exists)\n"
            "  --every K       checkpoint every K steps (0 = only when ckptrun asks)\n"
            "  --out FILE      write the final parameters (raw float32) to FILE\n"
            "  --store URL     store (default $CKPT_STORE, else file://~/.local/share/ckpt)\n"
            "  --run NAME      run name (default $CKPT_RUN, else the directory's name)\n"
            "  --input D       input width (default 256)\n"
            "  --hidden H      hidden width (default 4096; state = ~12*D*H bytes)\n"
            "  --batch B       batch size (default 4)\n"
            "  --sleep-ms MS   sleep after every step (tests use it to slow down)\n"
            "  --bf16          also keep (and checkpoint) a bf16 copy of the parameters,\n"
            "                  as mixed-precision training does: state = ~14*D*H bytes\n"
            "  --quiet         print only the summary\n");
    fputs("exit: 0 done; 74 done, but the last checkpoint was not committed\n", to);
}

static int parse_u64(const char *s, uint64_t *v)
{
    char *end;
    errno = 0;
    *v = strtoull(s, &end, 10);
    return (*s && !*end && !errno) ? 0 : -1;
}

int main(int argc, char **argv)
{
    uint64_t steps = 0, every = 0, d = 256, h = 4096, b = 4, sleep_ms = 0, restored = 0;
    const char *out = NULL;
    int quiet = 0, rc = 1, have_steps = 0, bf16 = 0;
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *ctx = NULL;
    struct model md = { 0 };
    float *x = NULL, *hid = NULL, *gh = NULL, *grad = NULL;
    ckpt_status st, saved = CKPT_OK; /* saved: the last ckpt_save's own outcome */

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--quiet")) {
            quiet = 1;
            continue;
        } else if (!strcmp(a, "--bf16")) {
            bf16 = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "c_trainer: %s needs a value\n", a);
            return 64;
        }
        if (!strcmp(a, "--steps"))
            bad = parse_u64(v, &steps), have_steps = 1;
        else if (!strcmp(a, "--every"))
            bad = parse_u64(v, &every);
        else if (!strcmp(a, "--out"))
            out = v;
        else if (!strcmp(a, "--store"))
            cfg.store = v;
        else if (!strcmp(a, "--run"))
            cfg.run = v;
        else if (!strcmp(a, "--input"))
            bad = parse_u64(v, &d) || !d;
        else if (!strcmp(a, "--hidden"))
            bad = parse_u64(v, &h) || !h;
        else if (!strcmp(a, "--batch"))
            bad = parse_u64(v, &b) || !b;
        else if (!strcmp(a, "--sleep-ms"))
            bad = parse_u64(v, &sleep_ms);
        else {
            fprintf(stderr, "c_trainer: unknown option %s (see --help)\n", a);
            return 64;
        }
        if (bad) {
            fprintf(stderr, "c_trainer: bad value for %s: %s\n", a, v);
            return 64;
        }
        i++;
    }
    if (!have_steps || !out) {
        usage(stderr);
        return 64;
    }
    if (model_init(&md, d, h, b)) {
        fprintf(stderr, "c_trainer: out of memory\n");
        return 1;
    }
    if (bf16) {
        md.w16 = malloc(md.nparam * sizeof *md.w16);
        if (!md.w16) {
            fprintf(stderr, "c_trainer: out of memory\n");
            goto out;
        }
        to_bf16(&md);
    }
    x = malloc(d * sizeof *x);
    hid = malloc(h * sizeof *hid);
    gh = malloc(h * sizeof *gh);
    grad = malloc(md.nparam * sizeof *grad);
    if (!x || !hid || !gh || !grad)
        goto out;

    st = ckpt_open(&cfg, &ctx);
    if (st) {
        fprintf(stderr, "c_trainer: cannot open checkpoint store: %s (%s)\n",
                ckpt_errmsg(NULL), ckpt_strerror(st));
        rc = st == CKPT_E_CONFIG || st == CKPT_E_AUTH ? 78 : 69;
        goto out;
    }
    if ((st = ckpt_protect_ex(ctx, "params", md.w1, md.nparam * sizeof(float), CKPT_ELEM_F32)) ||
        (st = ckpt_protect_ex(ctx, "adam_m", md.m, md.nparam * sizeof(float), CKPT_ELEM_F32)) ||
        (st = ckpt_protect_ex(ctx, "adam_v", md.v, md.nparam * sizeof(float), CKPT_ELEM_F32)) ||
        (md.w16 && (st = ckpt_protect_ex(ctx, "params_bf16", md.w16, md.nparam * sizeof *md.w16,
                                         CKPT_ELEM_F16))) ||
        (st = ckpt_protect(ctx, "rng", md.rng, sizeof md.rng)) ||
        (st = ckpt_protect(ctx, "meta", &md.meta, sizeof md.meta))) {
        fprintf(stderr, "c_trainer: protect: %s\n", ckpt_strerror(st));
        goto out;
    }
    st = ckpt_restore(ctx, &restored);
    if (st == CKPT_OK) {
        if (md.meta.input != d || md.meta.hidden != h || md.meta.batch != b) {
            fprintf(stderr, "c_trainer: checkpoint was made with other --input/--hidden/--batch\n");
            goto out;
        }
        printf("c_trainer: resumed from step %llu\n", (unsigned long long)md.meta.step);
    } else if (st == CKPT_E_NOENT) {
        printf("c_trainer: starting fresh (no checkpoint)\n");
    } else {
        fprintf(stderr, "c_trainer: restore failed: %s: %s\n", ckpt_strerror(st),
                ckpt_errmsg(ctx));
        goto out;
    }
    fflush(stdout);
    while (md.meta.step < steps) {
        float loss = train_step(&md, x, hid, gh, grad);
        if (!quiet && (md.meta.step % 50 == 0 || md.meta.step == steps))
            printf("c_trainer: step %llu loss %.4f\n", (unsigned long long)md.meta.step, loss);
        if ((every && md.meta.step % every == 0) || ckpt_should_save(ctx)) {
            st = saved = ckpt_save(ctx, md.meta.step);
            if (st)
                fprintf(stderr, "c_trainer: save at step %llu failed: %s\n",
                        (unsigned long long)md.meta.step, ckpt_strerror(st));
        }
        if (sleep_ms) {
            struct timespec ts = { (time_t)(sleep_ms / 1000), (long)(sleep_ms % 1000) * 1000000L };
            nanosleep(&ts, NULL);
        }
        fflush(stdout);
    }
    /* the last save's outcome: refused at once, or its commit */
    st = saved ? saved : ckpt_wait(ctx);
    if (st)
        fprintf(stderr, "c_trainer: last checkpoint not committed: %s: %s (exit 74)\n",
                ckpt_strerror(st), ckpt_errmsg(ctx));
    if (write_out(out, &md)) {
        fprintf(stderr, "c_trainer: cannot write %s: %s\n", out, strerror(errno));
        goto out;
    }
    printf("c_trainer: done, %llu steps, parameters in %s\n", (unsigned long long)md.meta.step,
           out);
    /* never success when the final checkpoint is not in the store: a script
     * that deletes the instance on exit 0 would lose the work */
    rc = st ? 74 : 0;
out:
    ckpt_close(ctx);
    free(x);
    free(hid);
    free(gh);
    free(grad);
    free(md.w1);
    free(md.m);
    free(md.v);
    free(md.teacher);
    free(md.w16);
    return rc;
}
