/*
 * shim.c -- libckpt_preload.so, the LD_PRELOAD shim (`ckptrun --preload`):
 * load, fork and exec, and the in-process API (ckpt_preload.h).
 *
 * What the shim does for an unmodified program (docs/preload.md is the
 * manual):
 *   1. makes the checkpoint request signal (CKPT_SIGNAL, default SIGUSR1)
 *      harmless: recorded instead of fatal, the program's own handler
 *      chained (signal.c);
 *   2. tells ckptrun when a file under CKPT_DIR is complete, from the libc
 *      calls that open, close and rename files (files.c, paths.c);
 *   3. carries libckpt inside and exposes its API in-process, with a lazily
 *      opened global context (below).
 * The rules every part follows inside someone else's process are in
 * parts.h.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "base/util.h"
#include "ckpt_preload.h"
#include "control/signals.h"
#include "parts.h"

static pthread_mutex_t g_ctx_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(struct ckpt_ctx *) g_ctx;

struct ckpt_ctx *ckpt_preload_ctx(void)
{
    struct ckpt_ctx *ctx = atomic_load(&g_ctx);
    if (ctx)
        return ctx;
    pthread_mutex_lock(&g_ctx_mu);
    ctx = atomic_load(&g_ctx);
    if (!ctx) {
        /* One rank, whatever the launcher's environment says (RANK and
         * WORLD_SIZE under torchrun): the shim has no collective to agree
         * with the other ranks through, and the Python helper agrees over
         * torch.distributed itself. Each process keeps its own context, as
         * before 0.3.0. */
        struct ckpt_config cfg = CKPT_CONFIG_INIT;
        cfg.world_size = 1;
        /* Its program writes its own checkpoints: without ckptrun a SIGTERM
         * keeps its default (no ckpt_save would answer it, docs/preload.md) */
        ckpt__signals_no_alone();
        if (ckpt_open(&cfg, &ctx) != CKPT_OK)
            ctx = NULL;
    }
    if (ctx && !atomic_load(&g_ctx)) {
        atomic_store(&g_ctx, ctx);
        ckpt__shim_signal_forward(ctx);
        /* A request that came before the context existed is not lost. */
        if (ckpt__shim_signal_pending())
            ckpt_request(ctx, CKPT_CODEC_DEFAULT);
    }
    pthread_mutex_unlock(&g_ctx_mu);
    return ctx;
}

int ckpt_preload_take_request(void)
{
    int r = ckpt__shim_signal_take();
    struct ckpt_ctx *ctx = atomic_load(&g_ctx);
    if (ctx && ckpt_should_save(ctx)) {
        /* What ckpt_save() does when it starts: the request is served and
         * the interval starts again. */
        atomic_store(&ctx->requested, 0);
        ctx->last_save_mono_ns = ckpt__mono_ns();
        r = 1;
    }
    return r;
}

/* CKPT_PRELOAD_ONCE=1: programs this one starts with exec() run without
 * the shim. Every LD_PRELOAD entry naming this library is removed. */
static void forget_ld_preload(void)
{
    const char *lp = getenv("LD_PRELOAD");
    char out[4096];
    size_t at = 0;
    if (!lp)
        return;
    for (const char *p = lp; *p;) {
        size_t n = strcspn(p, ": ");
        const char *base = memrchr(p, '/', n);
        base = base ? base + 1 : p;
        size_t bn = n - (size_t)(base - p);
        int ours = bn >= 15 && memcmp(base, "libckpt_preload", 15) == 0;
        if (n && !ours && at + n + 2 < sizeof out) {
            if (at)
                out[at++] = ':';
            memcpy(out + at, p, n);
            at += n;
        }
        p += n;
        if (*p)
            p++;
    }
    out[at] = '\0';
    if (at)
        setenv("LD_PRELOAD", out, 1);
    else
        unsetenv("LD_PRELOAD");
}

static void atfork_child(void)
{
    ckpt__shim_paths_atfork_child();
    ckpt__shim_files_atfork_child();
    ckpt__shim_signal_atfork_child();
    /* libckpt's worker threads are gone in the child; its context is not
     * usable there. Leaked on purpose: freeing it could deadlock. */
    pthread_mutex_init(&g_ctx_mu, NULL);
    ckpt__shim_signal_forward(NULL);
    atomic_store(&g_ctx, NULL);
}

__attribute__((constructor)) static void preload_init(void)
{
    const char *dir = getenv("CKPT_DIR");
    const char *sock = getenv("CKPT_SOCKET");
    const char *once = getenv("CKPT_PRELOAD_ONCE");

    pthread_atfork(NULL, NULL, atfork_child);
    if (once && strcmp(once, "1") == 0)
        forget_ld_preload();
    ckpt__shim_signal_init(getenv("CKPT_SIGNAL"));
    /* Tracking needs both: where to watch and whom to tell. */
    if (dir && *dir && sock && *sock && ckpt__shim_paths_init(dir) == 0)
        ckpt__shim_files_init(sock);
}
