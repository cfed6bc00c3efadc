/* save_victim -- a process that saves in a loop, to be SIGKILLed at random
 * instants by test_save_kill.sh, and a checker for what it leaves behind.
 *
 *   save_victim write   STORE RUN [--tolerant]   save steps 1, 2, ... forever;
 *                                   print each committed step on stdout
 *                                   (--tolerant: a refused save is reported
 *                                   on stderr and the next step is saved)
 *   save_victim gc      STORE RUN MIN_AGE_MS   gc --keep 1 in a loop
 *   save_victim check   STORE RUN MIN   restore; the data must be exactly
 *                                   what step S wrote, with S >= MIN
 * Region contents are a function of the step, so any mix of two
 * checkpoints, or a torn chunk, is detected. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"

#define N_A (3u << 20)   /* 3 MiB: several chunks at 256 KiB */
#define N_B 1000u

static void fill(uint8_t *a, uint32_t *b, uint64_t step)
{
    uint64_t s = step * 0x9E3779B97F4A7C15ull | 1;
    for (size_t i = 0; i < N_A; i += 8) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        memcpy(a + i, &s, 8);
    }
    /* half the chunks keep their content from step to step: dedup in play */
    if (step % 2)
        memset(a, 0x11, N_A / 2);
    for (size_t i = 0; i < N_B; i++)
        b[i] = (uint32_t)(step * 31 + i);
}

int main(int argc, char **argv)
{
    static uint8_t a[N_A], want_a[N_A];
    static uint32_t b[N_B], want_b[N_B];
    uint64_t meta = 0, step = 0;
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *ctx;
    ckpt_status st;
    if (argc < 4)
        return 64;
    cfg.store = argv[2];
    cfg.run = argv[3];
    cfg.chunk_bytes = 256 << 10;
    cfg.keep = 2;
    cfg.no_control = 1;
    if (ckpt_open(&cfg, &ctx)) {
        fprintf(stderr, "open: %s\n", ckpt_errmsg(NULL));
        return 2;
    }
    if (!strcmp(argv[1], "gc")) {
        uint64_t min_age = argc > 4 ? strtoull(argv[4], NULL, 10) : 0, n = 0;
        for (;;) {
            st = ckpt_gc(ctx, 1, min_age, &n);
            if (st && st != CKPT_E_PRECONDITION) {
                fprintf(stderr, "gc: %s: %s\n", ckpt_strerror(st), ckpt_errmsg(ctx));
                ckpt_close(ctx);
                return 1;
            }
            printf("gc %s %" PRIu64 "\n", ckpt_strerror(st), n);
            fflush(stdout);
        }
    }
    ckpt_protect(ctx, "a", a, sizeof a);
    ckpt_protect(ctx, "b", b, sizeof b);
    ckpt_protect(ctx, "meta", &meta, sizeof meta);
    st = ckpt_restore(ctx, &step);
    if (!strcmp(argv[1], "check")) {
        uint64_t min = argc > 4 ? strtoull(argv[4], NULL, 10) : 0;
        if (st == CKPT_E_NOENT && min == 0) {
            puts("none");
            ckpt_close(ctx);
            return 0;
        }
        if (st) {
            fprintf(stderr, "restore failed: %s: %s\n", ckpt_strerror(st), ckpt_errmsg(ctx));
            ckpt_close(ctx);
            return 1;
        }
        fill(want_a, want_b, step);
        if (meta != step || step < min || memcmp(a, want_a, N_A) || memcmp(b, want_b, sizeof b)) {
            fprintf(stderr, "INCONSISTENT: step %" PRIu64 " meta %" PRIu64 " min %" PRIu64 "\n",
                    step, meta, min);
            ckpt_close(ctx);
            return 1;
        }
        if (ckpt_verify(ctx, CKPT_STEP_ALL)) {
            fprintf(stderr, "verify failed: %s\n", ckpt_errmsg(ctx));
            ckpt_close(ctx);
            return 1;
        }
        printf("%" PRIu64 "\n", step);
        ckpt_close(ctx);
        return 0;
    }
    for (step = st == CKPT_OK ? step + 1 : 1;; step++) {
        fill(a, b, step);
        meta = step;
        if ((st = ckpt_save(ctx, step)) != CKPT_OK || (st = ckpt_wait(ctx)) != CKPT_OK) {
            fprintf(stderr, "save %" PRIu64 ": %s\n", step, ckpt_errmsg(ctx));
            /* a save refused because a gc deletes what it used, or because
             * gc rewrote HEAD: the next one commits */
            if (argc > 4 && !strcmp(argv[4], "--tolerant") &&
                (st == CKPT_E_PRECONDITION || st == CKPT_E_FENCED))
                continue;
            ckpt_close(ctx);
            return 1;
        }
        printf("%" PRIu64 "\n", step);
        fflush(stdout);
    }
}
