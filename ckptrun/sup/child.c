/* child.c -- COMMAND and its process tree (child.h). */
#include "sup/child.h"
#include "base/runlog.h"
#include "base/parse.h"
#include "sup/proctree.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

void child_init(struct child *c)
{
    memset(c, 0, sizeof *c);
    c->kp.cmd_fd = c->kp.rep_fd = -1;
}

/* The variables ckptrun sets: inherited values of these are dropped. */
static const char *const ours[] = { "CKPT_SOCKET=", "CKPT_DIR=", "CKPT_STORE=", "CKPT_RUN=",
                                    "CKPT_SIGNAL=", "CKPT_RESUMED=", "CKPT_STEP=",
                                    "CKPT_CODEC=", "CKPT_KEEP=", "LD_PRELOAD=",
                                    "CKPT_EPOCH=", "CKPT_SOCKET_KEY=", NULL };

/* The directory holding the Python package `ckpt` that goes with this
 * ckptrun: <bindir>/../python in a build tree, else the package directory
 * of our own prefix (CKPT_PYTHON_FROM_BIN, set by CMake). @return 0 and
 * out, or -1. */
static int python_dir(char *out, size_t n)
{
    static const char *const rel[] = { "../python",
#ifdef CKPT_PYTHON_FROM_BIN
                                       CKPT_PYTHON_FROM_BIN,
#endif
                                       NULL };
    char exe[PATH_MAX], p[PATH_MAX + 64], *slash;
    ssize_t l = readlink("/proc/self/exe", exe, sizeof exe - 1);

    if (l < 0)
        return -1;
    exe[l] = '\0';
    if (!(slash = strrchr(exe, '/')))
        return -1;
    *slash = '\0';
    for (int i = 0; rel[i]; i++) {
        snprintf(p, sizeof p, "%s/%s/ckpt/__init__.py", exe, rel[i]);
        if (access(p, R_OK) != 0)
            continue;
        snprintf(p, sizeof p, "%s/%s", exe, rel[i]);
        if (realpath(p, exe) && strlen(exe) < n) {
            snprintf(out, n, "%s", exe);
            return 0;
        }
        return -1;
    }
    return -1;
}

char **child_env(const struct child_vars *v)
{
    size_t n = 0, k = 0;
    char **env, buf[PATH_MAX + 64], pydir[PATH_MAX];
    const char *pypath = NULL;
    int have_py = python_dir(pydir, sizeof pydir) == 0;

    for (char **e = environ; *e; e++)
        n++;
    env = calloc(n + 16, sizeof *env);
    if (!env)
        return NULL;
    for (char **e = environ; *e; e++) {
        int skip = 0;
        for (int i = 0; ours[i]; i++)
            if (strncmp(*e, ours[i], strlen(ours[i])) == 0)
                skip = 1;
        if (have_py && strncmp(*e, "PYTHONPATH=", 11) == 0) {
            pypath = *e + 11; /* ours goes first, below */
            skip = 1;
        }
        /* copied: ckptrun's own environment changes later (hooks) */
        if (!skip && !(env[k++] = strdup(*e)))
            goto oom;
    }
#define ADD(...)                                                                  \
    do {                                                                          \
        snprintf(buf, sizeof buf, __VA_ARGS__);                                   \
        if (!(env[k++] = strdup(buf)))                                            \
            goto oom;                                                             \
    } while (0)
    if (v->sock && v->sock[0]) {
        ADD("CKPT_SOCKET=%s", v->sock);
        ADD("CKPT_SOCKET_KEY=%s", v->sock_key); /* for processes outside our tree */
    }
    ADD("CKPT_DIR=%s", v->dir);
    ADD("CKPT_STORE=%s", v->store);
    ADD("CKPT_RUN=%s", v->run);
    ADD("CKPT_SIGNAL=%s", v->sig ? ckpt__signal_name(v->sig) : "none");
    ADD("CKPT_RESUMED=%d", v->resumed);
    if (v->resumed)
        ADD("CKPT_STEP=%" PRIu64, v->step);
    if (v->codec)
        ADD("CKPT_CODEC=%s", v->codec);
    ADD("CKPT_KEEP=%u", v->keep);
    if (v->epoch)
        ADD("CKPT_EPOCH=%" PRIu64, v->epoch); /* the child's commits carry our lease epoch */
    if (have_py) {
        /* `import ckpt` finds the package that goes with this ckptrun and
         * its libckpt (docs/python.md); the program's own path follows */
        char *py = malloc(strlen(pydir) + (pypath ? strlen(pypath) : 0) + 16);
        if (!py)
            goto oom;
        sprintf(py, "PYTHONPATH=%s%s%s", pydir, pypath && *pypath ? ":" : "",
                pypath ? pypath : "");
        env[k++] = py;
    }
    if (v->preload) {
        const char *old = getenv("LD_PRELOAD");
        ADD("LD_PRELOAD=%s%s%s", v->preload, old && *old ? ":" : "", old && *old ? old : "");
    }
#undef ADD
    return env;
oom:
    child_env_free(env);
    return NULL;
}

void child_env_free(char **env)
{
    if (!env)
        return;
    for (char **e = env; *e; e++)
        free(*e);
    free(env);
}

int child_find_preload(char *out, size_t n)
{
    static const char *const rel[] = { "../lib/libckpt_preload.so", "../lib64/libckpt_preload.so",
                                       "../lib/x86_64-linux-gnu/libckpt_preload.so",
                                       "../lib/aarch64-linux-gnu/libckpt_preload.so", NULL };
    char exe[PATH_MAX], *slash;
    const char *env = getenv("CKPT_PRELOAD_LIB");
    ssize_t l;
    int rc = -1;

    if (env && *env) {
        snprintf(out, n, "%s", env);
        rc = access(out, R_OK) == 0 ? 0 : -1;
        goto out;
    }
    if ((l = readlink("/proc/self/exe", exe, sizeof exe - 1)) < 0)
        goto out;
    exe[l] = '\0';
    if (!(slash = strrchr(exe, '/')))
        goto out;
    *slash = '\0';
    for (int i = 0; rel[i] && rc != 0; i++) {
        char p[PATH_MAX + 64];
        snprintf(p, sizeof p, "%s/%s", exe, rel[i]);
        if (access(p, R_OK) == 0 && realpath(p, out))
            rc = 0;
    }
out:
    return rc;
}

int child_spawn(struct child *c, char **args, char **env, int tty)
{
    int exec_err = 0;

    c->tty = tty;
    if (keeper_start(&c->kp, args, env, tty, &exec_err) != 0)
        return -1;
    c->pid = c->kp.child;
    c->pgid = c->kp.pid;
    c->alive = 1;
    if (c->tty && tcsetpgrp(STDIN_FILENO, c->pgid) != 0)
        log_msg(LOG_DEBUG, "tty", "tcsetpgrp: %s", strerror(errno));
    if (exec_err) {
        log_error("cannot run '%s': %s", args[0], strerror(exec_err));
        errno = exec_err;
        return -1; /* the child exits 127; its exit is reported */
    }
    return 0;
}

void child_signal_group(struct child *c, int sig)
{
    if (c->pgid > 0 && kill(-c->pgid, sig) != 0 && errno != ESRCH)
        log_msg(LOG_WARN, "signal", "kill(-%d, %s): %s", (int)c->pgid, ckpt__signal_name(sig),
                strerror(errno));
}

int child_signal_handlers(struct child *c, int sig, char *pids_txt, size_t n)
{
    int pids[64], cnt;
    size_t at = 0;

    pids_txt[0] = '\0';
    if (c->kp.alive)
        cnt = keeper_signal_handlers(&c->kp, sig, pids, 64);
    else /* no keeper (it died): COMMAND alone, if it still handles it */
        cnt = pt_catches(c->pid, sig) == 1 && kill(c->pid, sig) == 0 ? (pids[0] = c->pid, 1) : 0;
    for (int i = 0; i < cnt && at + 12 < n; i++)
        at += (size_t)snprintf(pids_txt + at, n - at, "%s%d", i ? "," : "", pids[i]);
    return cnt < 0 ? 0 : cnt;
}

void child_kill_all(struct child *c)
{
    if (c->kp.alive)
        keeper_kill(&c->kp);
    else
        child_signal_group(c, SIGKILL);
}

int child_ended(struct child *c, int st)
{
    if (!c->alive)
        return 0;
    c->alive = 0;
    c->code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    c->sigint = (WIFSIGNALED(st) && WTERMSIG(st) == SIGINT) ||
                (WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGINT);
    c->sigterm = (WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM) ||
                 (WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGTERM);
    if (c->tty)
        tcsetpgrp(STDIN_FILENO, getpgrp());
    return 1;
}

void child_finish_tree(struct child *c, int64_t grace_ms, int kill)
{
    if (!c->kp.alive)
        return;
    if (kill)
        keeper_kill(&c->kp);
    else
        keeper_finish(&c->kp, grace_ms > 0 ? (unsigned)grace_ms : 0);
}

void child_suspended(struct child *c)
{
    if (!c->tty)
        return;
    tcsetpgrp(STDIN_FILENO, getpgrp());
    kill(getpid(), SIGSTOP);
    tcsetpgrp(STDIN_FILENO, c->pgid);
    child_signal_group(c, SIGCONT);
}

int child_reap(struct child *c, int *status)
{
    int st, got = 0;
    pid_t pid;

    while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
        if (pid == c->kp.pid && c->kp.alive) {
            c->kp.alive = 0;
            if (c->alive && !WIFEXITED(st))
                log_msg(LOG_WARN, "keeper",
                        "the job's keeper (pid %d) was killed (%s): its "
                        "processes are no longer tracked",
                        (int)pid, WIFSIGNALED(st) ? ckpt__signal_name(WTERMSIG(st)) : "?");
        } else if (pid == c->pid && c->alive) {
            *status = st; /* re-parented to us: the keeper is gone */
            got = 1;
        }
    }
    return got;
}

void child_end_tree(struct child *c)
{
    int64_t until = ckpt__mono_ms() + 2000;
    int st;

    if (!c->kp.alive)
        return;
    keeper_kill(&c->kp);
    while (c->kp.alive && ckpt__mono_ms() < until) {
        struct timespec ts = { 0, 10 * 1000000L };
        if (child_reap(c, &st))
            child_ended(c, st);
        if (c->kp.alive)
            nanosleep(&ts, NULL);
    }
    if (c->kp.alive)
        log_msg(LOG_WARN, "exit", "processes of the job are still exiting; the keeper (pid %d) "
                "kills them after we exit", (int)c->kp.pid);
}

void child_close(struct child *c)
{
    keeper_close(&c->kp);
}
