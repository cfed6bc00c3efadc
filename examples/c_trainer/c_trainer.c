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
 * The model's math, the options and the --out file are ../common.h's,
 * shared with cuda_trainer and mpi_trainer: this file is what a trainer
 * does with libckpt (open, protect, restore, save, wait, close).
 *
 * Exit status: 0 trained, and its last save (if any) committed; 74 trained
 * and wrote --out, but its last save did not commit (the store holds an
 * older step: as ckptrun's 74, a run that must not be taken as complete,
 * and a restart resumes from what was committed); 64 usage; 69/78 the
 * store could not be opened; 1 anything else.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "../common.h" /* the model, the options, --out, the exit status */

struct meta {
    uint64_t step;      /* steps completed */
    uint64_t magic;
    uint32_t input, hidden, batch, pad;
};

/* The training state, in host memory: all of it is protected. */
struct model {
    struct mlp net; /* the parameters and Adam's moments (common.h) */
    uint16_t *w16;  /* --bf16: the parameters rounded to bf16, as a
                       mixed-precision model holds them beside
                       its fp32 master copy (NULL without) */
    uint64_t rng[2];
    struct meta meta;
};

static int model_init(struct model *md, size_t d, size_t h, size_t b)
{
    if (mlp_alloc(&md->net, d, h, b))
        return -1;
    batch_rng_init(md->rng);
    md->meta.magic = 0x636b70745f747231ull;
    md->meta.input = (uint32_t)d;
    md->meta.hidden = (uint32_t)h;
    md->meta.batch = (uint32_t)b;
    return 0;
}

/* The bf16 copy of the parameters (round to nearest even). */
static void to_bf16(struct model *md)
{
    for (size_t i = 0; i < md->net.nparam; i++) {
        uint32_t u;
        memcpy(&u, &md->net.w[i], 4);
        md->w16[i] = (uint16_t)((u + 0x7fff + (u >> 16 & 1)) >> 16);
    }
}

/* One step of Adam on a batch drawn from the RNG; returns the loss. */
static float train_step(struct model *md, float *x, float *hid, float *gh, float *grad)
{
    struct mlp *n = &md->net;
    float loss = mlp_grad(n->w, n->teacher, n->d, n->h, n->b, md->rng, x, hid, gh, grad);

    adam_step(n->w, n->m, n->v, grad, n->nparam, 1.0f / (float)n->b, md->meta.step + 1);
    md->meta.step++;
    if (md->w16)
        to_bf16(md);
    return loss / (float)n->b;
}

static int bf16_option(void *user, const char *opt, const char *val)
{
    (void)val;
    if (strcmp(opt, "--bf16") != 0)
        return OPT_UNKNOWN;
    *(int *)user = 1;
    return OPT_FLAG;
}

int main(int argc, char **argv)
{
    int bf16 = 0;
    const struct trainer_cli cli = {
        .name = "c_trainer",
        .synopsis = "c_trainer --steps N --every K --out FILE [options]",
        .out_help = "write the final parameters (raw float32) to FILE",
        .state_help = "state = ~12*D*H bytes",
        .batch_help = "",
        .extra_help =
            "  --bf16          also keep (and checkpoint) a bf16 copy of the parameters,\n"
            "                  as mixed-precision training does: state = ~14*D*H bytes\n",
        .usage_here = 1,
        .option = bf16_option,
        .user = &bf16,
    };
    struct trainer_opts o = { .input = 256, .hidden = 4096, .batch = 4 }; /* the defaults */
    uint64_t restored = 0;
    int rc;
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *ctx = NULL;
    struct model md = { 0 };
    float *x = NULL, *hid = NULL, *gh = NULL, *grad = NULL;
    ckpt_status st, saved = CKPT_OK; /* saved: the last ckpt_save's own outcome */

    if ((rc = trainer_parse(argc, argv, &cli, &o)) >= 0)
        return rc;
    rc = 1;
    if (model_init(&md, o.input, o.hidden, o.batch)) {
        fprintf(stderr, "c_trainer: out of memory\n");
        goto out;
    }
    if (bf16) {
        md.w16 = malloc(md.net.nparam * sizeof *md.w16);
        if (!md.w16) {
            fprintf(stderr, "c_trainer: out of memory\n");
            goto out;
        }
        to_bf16(&md);
    }
    x = malloc(md.net.d * sizeof *x);
    hid = malloc(md.net.h * sizeof *hid);
    gh = malloc(md.net.h * sizeof *gh);
    grad = malloc(md.net.nparam * sizeof *grad);
    if (!x || !hid || !gh || !grad)
        goto out;

    cfg.store = o.store; /* NULL: CKPT_STORE, else the default store */
    cfg.run = o.run;     /* NULL: CKPT_RUN, else the directory's name */
    st = ckpt_open(&cfg, &ctx);
    if (st) {
        fprintf(stderr, "c_trainer: cannot open checkpoint store: %s (%s)\n",
                ckpt_errmsg(NULL), ckpt_strerror(st));
        rc = open_failed_exit(st);
        goto out;
    }
    if ((st = ckpt_protect_ex(ctx, "params", md.net.w, md.net.nparam * sizeof(float),
                              CKPT_ELEM_F32)) ||
        (st = ckpt_protect_ex(ctx, "adam_m", md.net.m, md.net.nparam * sizeof(float),
                              CKPT_ELEM_F32)) ||
        (st = ckpt_protect_ex(ctx, "adam_v", md.net.v, md.net.nparam * sizeof(float),
                              CKPT_ELEM_F32)) ||
        (md.w16 && (st = ckpt_protect_ex(ctx, "params_bf16", md.w16, md.net.nparam * sizeof *md.w16,
                                         CKPT_ELEM_F16))) ||
        (st = ckpt_protect(ctx, "rng", md.rng, sizeof md.rng)) ||
        (st = ckpt_protect(ctx, "meta", &md.meta, sizeof md.meta))) {
        fprintf(stderr, "c_trainer: protect: %s\n", ckpt_strerror(st));
        goto out;
    }
    st = ckpt_restore(ctx, &restored);
    if (st == CKPT_OK) {
        if (md.meta.input != md.net.d || md.meta.hidden != md.net.h || md.meta.batch != md.net.b) {
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
    while (md.meta.step < o.steps) {
        float loss = train_step(&md, x, hid, gh, grad);
        if (!o.quiet && (md.meta.step % 50 == 0 || md.meta.step == o.steps))
            printf("c_trainer: step %llu loss %.4f\n", (unsigned long long)md.meta.step, loss);
        if ((o.every && md.meta.step % o.every == 0) || ckpt_should_save(ctx)) {
            st = saved = ckpt_save(ctx, md.meta.step);
            if (st)
                fprintf(stderr, "c_trainer: save at step %llu failed: %s\n",
                        (unsigned long long)md.meta.step, ckpt_strerror(st));
        }
        if (o.sleep_ms)
            sleep_ms(o.sleep_ms);
        fflush(stdout);
    }
    st = last_commit("c_trainer", "", ctx, saved);
    {
        const struct out_piece params = { md.net.w, md.net.nparam * sizeof(float) };
        if (write_out(o.out, &params, 1)) {
            fprintf(stderr, "c_trainer: cannot write %s: %s\n", o.out, strerror(errno));
            goto out;
        }
    }
    printf("c_trainer: done, %llu steps, parameters in %s\n", (unsigned long long)md.meta.step,
           o.out);
    rc = done_exit(st); /* 74 when the last checkpoint is not in the store */
out:
    ckpt_close(ctx);
    free(x);
    free(hid);
    free(gh);
    free(grad);
    mlp_free(&md.net);
    free(md.w16);
    return rc;
}
