/*
 * signals.c -- under ckptrun, SIGTERM and SIGINT that reach the trainer
 * directly become a stop (docs/CONTROL.md, "Signals").
 *
 * A scheduler, Kubernetes, systemd or `kill -TERM -PGID` signals every
 * process of a job at once, and Ctrl-C reaches the trainer directly (it
 * holds the terminal). Without help the trainer would die before ckptrun's
 * checkpoint request reaches it. So, when a context connects to ckptrun
 * and the program has left the signal's default action (it installed no
 * handler of its own), a handler is installed that:
 *
 *   - on the first SIGTERM (or SIGINT): asks for a checkpoint (the context's
 *     request flag, as ckpt_request) and has the control connection tell
 *     ckptrun (`signal` message); the trainer saves at its next safe point;
 *   - once ckptrun has said `stopping` (it is about to end the trainer,
 *     after the final checkpoint), on a second one, or in a process forked
 *     from the one that installed it: restores the default action and
 *     raises the signal again, so it takes effect at once. A repeat within
 *     REPEAT_MS is the same stop, forwarded by a launcher to its workers
 *     (torchrun sends the signal it got on to its ranks at once).
 *
 * A program that installs its own handler later wins (sigaction replaces
 * ours); ckpt_close puts the previous action back only if ours is still the
 * one installed. One context per process owns the handlers.
 *
 * Alone (no ckptrun: ckpt__signals_install_alone), SIGTERM only, once the
 * program has called ckpt_should_save (it asks; a program that never does
 * dies at once, as before): the first one is a stop as above, the save
 * that follows (ckpt__signals_alone_saving) waits for its commit, says so
 * on stderr and ends the process with the SIGTERM's default effect
 * (ckpt__signals_alone_end); a watch thread exits 143 if no save begins
 * within the grace. Nobody else would end the process after the save:
 * under ckptrun, ckptrun does.
 *
 * The handler is async-signal-safe: atomics, getpid, clock_gettime, write
 * to a pipe (read by the control thread, which sends the message, or alone
 * by the watch thread), sigaction and raise. Library threads block every
 * signal (ckpt__thread_start), so it runs on one of the program's threads.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/ctx.h"
#include "ckpt_common.h"
#include "control/signals.h"

#define REPEAT_MS 500

enum { S_TERM = 0, S_INT = 1, S_N = 2 };
static const int g_signo[S_N] = { SIGTERM, SIGINT };

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* install/uninstall */
static atomic_int g_owner;             /* pid whose handlers these are, 0 none */
static _Atomic(struct ckpt_ctx *) g_ctx; /* its context, NULL after uninstall */
static atomic_int g_busy;              /* handlers using g_ctx right now */
static atomic_int g_stopping;          /* ckptrun said `stopping` */
static atomic_int g_stop_req;          /* ckptrun's stop request arrived */
static atomic_int g_seen;              /* bit per signal: taken as a stop */
static atomic_int g_report;            /* bit per signal: not yet reported */
static atomic_llong g_when[S_N];       /* CLOCK_MONOTONIC ms of the first */
static int g_installed[S_N];
static struct sigaction g_prev[S_N];
static int g_pipe[2] = { -1, -1 };     /* wakes the control thread */
static int g_pipe_pid;
/* alone (no ckptrun) */
static atomic_int g_alone;             /* the handlers end the process themselves */
static atomic_int g_polled;            /* the program called ckpt_should_save */
static atomic_int g_alone_saving;      /* the stop's save began */
static uint64_t g_grace_ms;
static pthread_t g_watch;
static int g_watch_on;
static int g_quit[2] = { -1, -1 };     /* ends the watch thread */
/* The handler's clock: ckpt__mono_ms unless a test set its own
 * (ckpt__signals_test_clock). */
static _Atomic(ckpt__signals_clock_fn) g_clock;

/* What signal `sig` (SIGTERM or SIGINT) means now, in this process:
 * CKPT_SIGNAL_STOP (a request is made and a report queued),
 * CKPT_SIGNAL_REPEAT or CKPT_SIGNAL_DEFAULT. `ctx`: the context the
 * program's own handler asks for (ckpt_signal), NULL from ours. */
static int decide(int sig, struct ckpt_ctx *ctx)
{
    int k = sig == SIGTERM ? S_TERM : S_INT, bit = 1 << k;
    ckpt__signals_clock_fn test_clock = atomic_load(&g_clock);
    long long now = (long long)(test_clock ? test_clock() : ckpt__mono_ms());
    struct ckpt_ctx *own;

    if (getpid() != atomic_load(&g_owner) || atomic_load(&g_stopping))
        return CKPT_SIGNAL_DEFAULT;
    if (ctx && ctx != atomic_load(&g_ctx))
        return CKPT_SIGNAL_DEFAULT; /* another context handles the stops */
    if (atomic_load(&g_alone) && !atomic_load(&g_polled))
        return CKPT_SIGNAL_DEFAULT; /* alone, a program that never asks */
    if (atomic_fetch_or(&g_seen, bit) & bit) {
        if (now - atomic_load(&g_when[k]) < REPEAT_MS)
            return CKPT_SIGNAL_REPEAT; /* the same stop, forwarded */
        return CKPT_SIGNAL_DEFAULT;    /* a second one: now */
    }
    atomic_store(&g_when[k], now);
    /* A stop ckptrun already asked for (it got the same job-wide signal
     * first) is the one this signal means: its save is asked for already. */
    if (!atomic_load(&g_stop_req)) {
        atomic_fetch_add(&g_busy, 1);
        if ((own = atomic_load(&g_ctx)))
            atomic_store(&own->requested, 1);
        atomic_fetch_sub(&g_busy, 1);
    }
    atomic_fetch_or(&g_report, bit);
    if (write(g_pipe[1], "s", 1) < 0) {
        /* full: the control thread is already woken */
    }
    return CKPT_SIGNAL_STOP;
}

static void on_signal(int sig)
{
    int saved = errno;

    if (decide(sig, NULL) == CKPT_SIGNAL_DEFAULT) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_DFL;
        sigemptyset(&sa.sa_mask);
        sigaction(sig, &sa, NULL);
        /* Blocked while this handler runs: delivered, with its default
         * action, as soon as it returns. */
        raise(sig);
    }
    errno = saved;
}

int ckpt_signal(struct ckpt_ctx *ctx, int sig)
{
    int saved = errno, r;
    if (!ctx || (sig != SIGTERM && sig != SIGINT))
        return CKPT_SIGNAL_DEFAULT;
    r = decide(sig, ctx);
    errno = saved;
    return r;
}

static int install(struct ckpt_ctx *ctx, int mask, int alone)
{
    int any = 0, me = (int)getpid();

    pthread_mutex_lock(&g_mu);
    if (atomic_load(&g_owner) == me && atomic_load(&g_ctx))
        goto out; /* another context of this process owns them */
    if (g_pipe_pid != me) {
        /* First use, or a forked child: a pipe of our own (the parent's
         * copies stay the parent's). */
        if (g_pipe[0] >= 0) {
            close(g_pipe[0]);
            close(g_pipe[1]);
            g_pipe[0] = g_pipe[1] = -1;
        }
        if (pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
            goto out;
        g_pipe_pid = me;
    }
    atomic_store(&g_stopping, 0);
    atomic_store(&g_stop_req, 0);
    atomic_store(&g_seen, 0);
    atomic_store(&g_report, 0);
    atomic_store(&g_alone, alone);
    atomic_store(&g_polled, 0);
    atomic_store(&g_alone_saving, 0);
    atomic_store(&g_ctx, ctx);
    atomic_store(&g_owner, me);
    for (int k = 0; k < S_N; k++) {
        struct sigaction cur, sa;
        g_installed[k] = 0;
        if (!(mask & (1 << k)))
            continue;
        if (sigaction(g_signo[k], NULL, &cur) != 0 || (cur.sa_flags & SA_SIGINFO) ||
            cur.sa_handler != SIG_DFL)
            continue; /* the program has its own (or ignores it): it decides */
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART;
        if (sigaction(g_signo[k], &sa, &g_prev[k]) == 0) {
            g_installed[k] = 1;
            any = 1;
        }
    }
    if (!any) {
        atomic_store(&g_ctx, NULL);
        atomic_store(&g_owner, 0);
        atomic_store(&g_alone, 0);
    }
out:
    pthread_mutex_unlock(&g_mu);
    return any;
}

int ckpt__signals_install(struct ckpt_ctx *ctx)
{
    return install(ctx, (1 << S_TERM) | (1 << S_INT), 0);
}

/* Alone: no save began within the grace of the stop -> exit 143, saying so. */
static void *watch_main(void *arg)
{
    struct pollfd p[2];
    long long deadline = -1;
    char buf[64];

    (void)arg;
    p[0].fd = g_pipe[0];
    p[0].events = POLLIN;
    p[1].fd = g_quit[0];
    p[1].events = POLLIN;
    for (;;) {
        long long now = (long long)ckpt__mono_ms();
        int timeout = deadline < 0 ? -1 : (int)(deadline > now ? deadline - now : 0);
        if (poll(p, 2, timeout) < 0 && errno != EINTR)
            break;
        if (p[1].revents)
            break; /* ckpt_close */
        if (p[0].revents)
            while (read(g_pipe[0], buf, sizeof buf) > 0)
                ;
        if (deadline < 0 && (atomic_load(&g_seen) & (1 << S_TERM)))
            deadline = atomic_load(&g_when[S_TERM]) + (long long)g_grace_ms;
        if (deadline >= 0 && (long long)ckpt__mono_ms() >= deadline) {
            if (!atomic_load(&g_alone_saving)) {
                char msg[256];
                int n = snprintf(msg, sizeof msg,
                                 "ckpt: SIGTERM: no ckpt_save() within %" PRIu64 " ms of it "
                                 "(CKPT_STOP_GRACE): exiting without a final checkpoint; the "
                                 "newest one committed before it stays\n", g_grace_ms);
                if (write(STDERR_FILENO, msg, (size_t)n) < 0) {
                    /* nowhere to say it */
                }
                _exit(128 + SIGTERM);
            }
            deadline = -1;
            p[0].fd = -1; /* the save ends the process: nothing more to watch */
        }
    }
    return NULL;
}

static atomic_int g_no_alone; /* the preload shim: its program saves by itself */

void ckpt__signals_no_alone(void)
{
    atomic_store(&g_no_alone, 1);
}

int ckpt__signals_install_alone(struct ckpt_ctx *ctx, uint64_t grace_ms)
{
    if (!grace_ms || atomic_load(&g_no_alone) || !install(ctx, 1 << S_TERM, 1))
        return 0;
    g_grace_ms = grace_ms;
    if (pipe2(g_quit, O_CLOEXEC) != 0 ||
        ckpt__thread_start(&g_watch, watch_main, NULL) != 0) {
        if (g_quit[0] >= 0) {
            close(g_quit[0]);
            close(g_quit[1]);
            g_quit[0] = g_quit[1] = -1;
        }
        ckpt__signals_uninstall(ctx);
        return 0;
    }
    g_watch_on = 1;
    return 1;
}

void ckpt__signals_polled(void)
{
    if (!atomic_load_explicit(&g_polled, memory_order_relaxed))
        atomic_store(&g_polled, 1);
}

int ckpt__signals_alone_saving(struct ckpt_ctx *ctx)
{
    int zero = 0;
    if (!atomic_load(&g_alone) || atomic_load(&g_ctx) != ctx ||
        atomic_load(&g_owner) != (int)getpid() || !(atomic_load(&g_seen) & (1 << S_TERM)))
        return 0;
    return atomic_compare_exchange_strong(&g_alone_saving, &zero, 1);
}

void ckpt__signals_alone_end(uint64_t step, ckpt_status st, const char *why, int say)
{
    char msg[1024];
    int n;
    sigset_t set;

    if (say) {
        if (st == CKPT_OK)
            n = snprintf(msg, sizeof msg, "ckpt: SIGTERM: step %" PRIu64 " is committed; "
                         "exiting. Run the same command again to resume from it\n", step);
        else
            n = snprintf(msg, sizeof msg, "ckpt: SIGTERM: the final save (step %" PRIu64
                         ") failed: %s: %s; exiting; the newest checkpoint committed before "
                         "it stays\n", step, ckpt_strerror(st), why && *why ? why : "?");
        if (n > (int)sizeof msg - 1)
            n = (int)sizeof msg - 1;
        if (write(STDERR_FILENO, msg, (size_t)n) < 0) {
            /* nowhere to say it */
        }
    }
    signal(SIGTERM, SIG_DFL);
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    raise(SIGTERM);
    _exit(128 + SIGTERM); /* not reached */
}

void ckpt__signals_uninstall(struct ckpt_ctx *ctx)
{
    pthread_mutex_lock(&g_mu);
    if (atomic_load(&g_ctx) != ctx || atomic_load(&g_owner) != (int)getpid())
        goto out;
    for (int k = 0; k < S_N; k++) {
        struct sigaction cur;
        if (!g_installed[k])
            continue;
        /* Only ours is put back: a handler the program installed since
         * stays. */
        if (sigaction(g_signo[k], NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) &&
            cur.sa_handler == on_signal)
            sigaction(g_signo[k], &g_prev[k], NULL);
        g_installed[k] = 0;
    }
    atomic_store(&g_ctx, NULL);
    atomic_store(&g_owner, 0);
    atomic_store(&g_alone, 0);
    /* A handler that loaded the context before it was cleared is done
     * with it once g_busy drops: the context may then be freed. */
    while (atomic_load(&g_busy))
        sched_yield();
    if (g_watch_on) {
        if (write(g_quit[1], "q", 1) < 0) {
            /* a pipe of one byte's need: cannot be full */
        }
        pthread_join(g_watch, NULL);
        close(g_quit[0]);
        close(g_quit[1]);
        g_quit[0] = g_quit[1] = -1;
        g_watch_on = 0;
    }
out:
    pthread_mutex_unlock(&g_mu);
}

int ckpt__signals_wake_fd(void)
{
    return g_pipe_pid == (int)getpid() ? g_pipe[0] : -1;
}

int ckpt__signals_take(int *sig, long long *when_ms)
{
    char buf[64];

    if (g_pipe_pid == (int)getpid())
        while (read(g_pipe[0], buf, sizeof buf) > 0)
            ;
    for (int k = 0; k < S_N; k++) {
        /* One reporter wins each bit (the control thread or a sender). */
        if (atomic_fetch_and(&g_report, ~(1 << k)) & (1 << k)) {
            *sig = g_signo[k];
            *when_ms = atomic_load(&g_when[k]);
            return 1;
        }
    }
    return 0;
}

int ckpt__signals_taken(void)
{
    return atomic_load(&g_owner) == (int)getpid() && atomic_load(&g_seen) != 0;
}

void ckpt__signals_stopping(void)
{
    atomic_store(&g_stopping, 1);
}

void ckpt__signals_stop_requested(void)
{
    atomic_store(&g_stop_req, 1);
}

int ckpt__signals_stop_pending(void)
{
    return atomic_load(&g_stop_req) || ckpt__signals_taken();
}

void ckpt__signals_test_clock(ckpt__signals_clock_fn now_ms)
{
    atomic_store(&g_clock, now_ms);
}

/* ---- a process forked from the trainer (ckpt_child_signals) ---------- */

static volatile sig_atomic_t g_child_seen; /* the stop's SIGTERM came */
static long long g_child_when;             /* when (ms), written before g_child_seen */

static void on_child_term(int sig, siginfo_t *si, void *uc)
{
    long long now = (long long)ckpt__mono_ms();
    struct sigaction sa;
    (void)uc;
    if (si && si->si_code == SI_USER && si->si_pid == getppid())
        _exit(0); /* the parent ends its worker (a DataLoader's shutdown) */
    if (!g_child_seen) {
        g_child_when = now;
        g_child_seen = 1;
        return; /* the stop's: the trainer answers it, then ends this process */
    }
    if (now - g_child_when < REPEAT_MS)
        return; /* the same stop, forwarded */
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
    raise(sig); /* a later one: its default effect, once this returns */
}

ckpt_status ckpt_child_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_child_term;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    g_child_seen = 0;
    return sigaction(SIGTERM, &sa, NULL) == 0 ? CKPT_OK : CKPT_E_IO;
}
