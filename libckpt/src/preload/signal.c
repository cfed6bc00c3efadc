/* signal.c -- the preload shim's request signal (parts.h, docs/preload.md
 * "The request signal"): CKPT_SIGNAL, SIGUSR1 unless told otherwise, would
 * kill a program that has no handler for it; under the shim it is recorded
 * instead, and a handler the program installs still runs.
 *
 * While the shim owns the signal, the kernel always runs on_signal(); the
 * disposition the program asked for (its "view") is kept in one of a few
 * static slots, published through an atomic pointer so that the handler
 * reads it without a lock. sigaction() and signal() on this signal report
 * and change that view, so the program sees exactly what it set.
 * on_signal() is async-signal-safe: atomics, and ckpt_request(). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "parts.h"

/* An interposer is a static shim_<name> exported under libc's name as an
 * alias: the same symbol to the dynamic linker, and no second definition
 * of open(), close() ... in the tree for a reader (or a tool) to mistake
 * for the one the library's own calls reach. */
#define INTERPOSE(name)                                                       \
    __typeof__(shim_##name) name __attribute__((alias("shim_" #name), visibility("default")))

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
CKPT_SHIM_REAL(sigaction_fn, sigaction)

static int g_sig;                  /* the request signal, 0 = none (set at load) */
static atomic_int g_sig_owned;     /* 1 once on_signal() is installed */
static atomic_int g_pending;       /* a request not yet taken */
static _Atomic(struct ckpt_ctx *) g_forward; /* also requested there, NULL none */
static pthread_mutex_t g_sig_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction g_view_slots[4];
static unsigned g_view_next;
static const struct sigaction g_view_dfl; /* zero: SIG_DFL */
static _Atomic(const struct sigaction *) g_view = &g_view_dfl;

static void on_signal(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    const struct sigaction *v = atomic_load(&g_view);
    struct sigaction app = *v; /* copy: the slot may be reused later */

    atomic_store(&g_pending, 1);
    struct ckpt_ctx *ctx = atomic_load(&g_forward);
    if (ctx)
        ckpt_request(ctx, CKPT_CODEC_DEFAULT); /* async-signal-safe */
    if (app.sa_flags & SA_RESETHAND)
        atomic_compare_exchange_strong(&g_view, &v, &g_view_dfl);
    errno = saved;
    if (app.sa_flags & SA_SIGINFO) {
        if (app.sa_sigaction)
            app.sa_sigaction(sig, si, uc);
    } else if (app.sa_handler != SIG_DFL && app.sa_handler != SIG_IGN) {
        app.sa_handler(sig);
    }
    /* SIG_DFL / SIG_IGN: the request is recorded, the process lives on --
     * that is the point of the shim. */
}

static int install_handler(const struct sigaction *view)
{
    struct sigaction k;
    memset(&k, 0, sizeof k);
    k.sa_sigaction = on_signal;
    k.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&k.sa_mask);
    if (view && !(view->sa_flags & SA_SIGINFO) &&
        (view->sa_handler == SIG_DFL || view->sa_handler == SIG_IGN))
        view = NULL;
    if (view) {
        /* Run the program's handler under the mask and flags it asked
         * for; SA_RESETHAND is emulated in on_signal(). */
        k.sa_mask = view->sa_mask;
        k.sa_flags = SA_SIGINFO |
                     (view->sa_flags & (SA_RESTART | SA_NODEFER | SA_ONSTACK));
    }
    return real_sigaction()(g_sig, &k, NULL);
}

static int wrap_sigaction(int sig, const struct sigaction *act,
                          struct sigaction *old)
{
    sigaction_fn f = real_sigaction();
    if (sig != g_sig || sig <= 0 || !atomic_load(&g_sig_owned))
        return f(sig, act, old);
    pthread_mutex_lock(&g_sig_mu);
    const struct sigaction *cur = atomic_load(&g_view);
    struct sigaction prev = *cur;
    int rc = 0;
    if (act) {
        struct sigaction *slot = &g_view_slots[g_view_next++ % 4];
        rc = install_handler(act);
        if (rc == 0) {
            *slot = *act;
            atomic_store(&g_view, slot);
        }
    }
    pthread_mutex_unlock(&g_sig_mu);
    if (rc == 0 && old)
        *old = prev;
    return rc;
}

/* sigaction() is wrap_sigaction under libc's name (signal() below calls
 * it too). */
__typeof__(wrap_sigaction) sigaction
    __attribute__((alias("wrap_sigaction"), visibility("default")));

/* glibc's signal() calls its internal sigaction, not ours: wrap it too, with
 * its BSD semantics (SA_RESTART, the signal blocked in its handler). */
static sighandler_t shim_signal(int sig, sighandler_t handler)
{
    struct sigaction sa, old;
    if (sig != g_sig || sig <= 0 || !atomic_load(&g_sig_owned)) {
        typedef sighandler_t (*signal_fn)(int, sighandler_t);
        static _Atomic(void *) p;
        return ((signal_fn)ckpt__shim_real(&p, "signal"))(sig, handler);
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, sig);
    sa.sa_flags = SA_RESTART;
    if (wrap_sigaction(sig, &sa, &old) != 0)
        return SIG_ERR;
    return old.sa_handler;
}
INTERPOSE(signal);

static int request_signal_by_name(const char *s)
{
    static const struct { const char *name; int sig; } names[] = {
        { "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "TERM", SIGTERM },
        { "INT", SIGINT },   { "HUP", SIGHUP },   { "XCPU", SIGXCPU },
        { "PWR", SIGPWR },   { "URG", SIGURG },   { "WINCH", SIGWINCH },
        { "ALRM", SIGALRM },
    };
    if (!s || !*s)
        return SIGUSR1; /* the conventional request signal */
    if (strcasecmp(s, "none") == 0)
        return 0;
    if (s[0] >= '0' && s[0] <= '9') {
        char *end;
        long v = strtol(s, &end, 10);
        return (*end == '\0' && v > 0 && v < NSIG && v != SIGKILL &&
                v != SIGSTOP) ? (int)v : 0;
    }
    if (strncasecmp(s, "SIG", 3) == 0)
        s += 3;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(s, names[i].name) == 0)
            return names[i].sig;
    return 0; /* unknown name: leave signals alone */
}

static void take_signal(void)
{
    struct sigaction cur;
    if (g_sig <= 0 || real_sigaction()(g_sig, NULL, &cur) != 0)
        return;
    /* Only a signal whose action would kill the program is taken over; a
     * program that installed a handler (or chose to ignore) before we ran
     * keeps exactly what it has. */
    if ((cur.sa_flags & SA_SIGINFO) || cur.sa_handler != SIG_DFL)
        return;
    if (install_handler(NULL) == 0)
        atomic_store(&g_sig_owned, 1);
}

void ckpt__shim_signal_init(const char *name)
{
    g_sig = request_signal_by_name(name);
    take_signal();
}

int ckpt__shim_signal_take(void)
{
    return atomic_exchange(&g_pending, 0) != 0;
}

int ckpt__shim_signal_pending(void)
{
    return atomic_load(&g_pending) != 0;
}

void ckpt__shim_signal_forward(struct ckpt_ctx *ctx)
{
    atomic_store(&g_forward, ctx);
}

void ckpt__shim_signal_atfork_child(void)
{
    /* the parent's threads did not survive the fork: a lock one of them
     * held would stay locked */
    pthread_mutex_init(&g_sig_mu, NULL);
}
