/* keeper.c -- see keeper.h.
 *
 * The keeper is forked from ckptrun, which has threads by then (lease
 * renewal, the record writer, libckpt's workers): in the keeper only
 * async-signal-safe calls are made -- raw system calls, proctree.c, no
 * stdio and no allocation -- until it exits. It never returns into
 * ckptrun's code. */
#include "ckpt_common.h"
#include "sup/keeper.h"
#include "sup/proctree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ckptrun -> keeper */
enum { KC_FINISH = 1, KC_KILL = 2 };
struct keeper_cmd {
    int type;
    int value;                /* KC_FINISH: grace in ms */
};

/* Processes of a /proc scan. Static: the keeper may not allocate, and
 * ckptrun uses its own copy (another process) from its loop thread only. */
#define SCAN_MAX 32768
static struct pt_proc g_procs[SCAN_MAX];
static unsigned char g_mark[SCAN_MAX];
static signed char g_catch[SCAN_MAX];

static void put(int fd, int type, int pid, int value)
{
    struct keeper_msg m = { type, pid, value };
    /* 12 bytes on a pipe: written whole or not at all. ckptrun gone
     * (EPIPE, SIGPIPE ignored) is fine: nobody to tell. */
    while (write(fd, &m, sizeof m) < 0 && errno == EINTR)
        ;
}

/* Signal every process below the keeper. Its own children are signalled
 * by PID (not reusable before we reap them); the others through a pidfd
 * checked against their start time. @return how many there were. */
static int signal_tree(int sig)
{
    pid_t me = getpid();
    int n = pt_scan(g_procs, SCAN_MAX), count;

    if (n < 0)
        return 0;
    count = pt_mark_descendants(g_procs, n, me, g_mark);
    for (int i = 0; i < n; i++) {
        if (!g_mark[i])
            continue;
        if (g_procs[i].ppid == me)
            kill(g_procs[i].pid, sig);
        else
            pt_signal(g_procs[i].pid, g_procs[i].start, sig);
    }
    return count;
}

/* The descriptors ckptrun opened close-on-exec (store files and sockets,
 * its signalfd, inotify, the control socket) are its own: a copy held here
 * would keep, for example, a store's flock(2) alive. Those without the flag
 * were meant to be inherited by COMMAND and stay. */
static void close_ckptrun_fds(int k1, int k2, int k3)
{
    static int fds[4096]; /* ckptrun holds a few dozen; more are left open */
    char buf[2048];
    int dfd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC), n = 0;
    long r;

    if (dfd < 0)
        return;
    while (n < (int)(sizeof fds / sizeof fds[0]) &&
           (r = syscall(SYS_getdents64, dfd, buf, sizeof buf)) > 0) {
        for (long off = 0; off < r && n < (int)(sizeof fds / sizeof fds[0]);) {
            struct dirent64 *de = (struct dirent64 *)(buf + off);
            int fd = 0, ok = de->d_name[0] != '\0';
            off += de->d_reclen;
            for (const char *c = de->d_name; *c; c++) {
                if (*c < '0' || *c > '9') {
                    ok = 0;
                    break;
                }
                fd = fd * 10 + (*c - '0');
            }
            if (ok)
                fds[n++] = fd;
        }
    }
    for (int i = 0; i < n; i++) {
        int fd = fds[i], fl;
        if (fd < 3 || fd == dfd || fd == k1 || fd == k2 || fd == k3)
            continue;
        fl = fcntl(fd, F_GETFD);
        if (fl >= 0 && (fl & FD_CLOEXEC))
            close(fd);
    }
    close(dfd);
}

static void set_disp(int sig, void (*h)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = h;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
}

__attribute__((noreturn)) static void keeper_main(char *const *argv, char *const *env, int tty,
                                                  int cmd, int rep, pid_t parent)
{
    static const int ignored[] = { SIGHUP, SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU, SIGUSR1,
                                   SIGUSR2, SIGXCPU, SIGPIPE, SIGALRM, SIGVTALRM, SIGPROF };
    enum { M_RUN, M_FINISH, M_KILL } mode = M_RUN;
    pid_t me, child;
    sigset_t set, none;
    int sfd, ep[2], err = 0;
    unsigned reported = 0;    /* SIGTERM, SIGINT already told */
    int64_t kill_at = 0;
    ssize_t r;

    setpgid(0, 0);
    me = getpid();
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    prctl(PR_SET_NAME, "ckptrun-keeper");
    for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++)
        set_disp(ignored[i], SIG_IGN);
    /* SIGTERM and SIGINT stay blocked and are read from a signalfd: the
     * keeper learns that the job's group got them (kill -TERM -PGID,
     * Ctrl-C) and tells ckptrun, and is never ended by them. */
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP && !sigismember(&set, s)) {
            int ign = 0;
            for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++)
                ign |= ignored[i] == s;
            if (!ign)
                set_disp(s, SIG_DFL);
        }
    set_disp(SIGTERM, SIG_DFL);
    set_disp(SIGINT, SIG_DFL);
    sigprocmask(SIG_SETMASK, &set, NULL);
    sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    close_ckptrun_fds(cmd, rep, sfd);
    if (getppid() != parent) /* ckptrun died before we got here */
        _exit(0);
    if (tty)
        tcsetpgrp(STDIN_FILENO, me); /* SIGTTOU is ignored */
    if (pipe2(ep, O_CLOEXEC) != 0) {
        put(rep, KR_STARTED, -1, errno);
        _exit(1);
    }
    sigemptyset(&none);
    child = fork();
    if (child == 0) {
        setpgid(0, me);
        /* Should the keeper itself be killed, COMMAND goes with it. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != me)
            _exit(127);
        for (int s = 1; s < NSIG; s++)
            if (s != SIGKILL && s != SIGSTOP)
                set_disp(s, SIG_DFL);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execvpe(argv[0], argv, env);
        err = errno;
        if (write(ep[1], &err, sizeof err) < 0)
            (void)0;
        _exit(127);
    }
    if (child < 0) {
        put(rep, KR_STARTED, -1, errno);
        _exit(1);
    }
    setpgid(child, me); /* both sides, whoever runs first */
    close(ep[1]);
    while ((r = read(ep[0], &err, sizeof err)) < 0 && errno == EINTR)
        ;
    if (r != (ssize_t)sizeof err)
        err = 0;
    close(ep[0]);
    put(rep, KR_STARTED, child, err);

    for (;;) {
        struct pollfd pf[2];
        int nfd = 0, timeout = -1, st, none_left = 0;
        pid_t p;

        while ((p = waitpid(-1, &st, WNOHANG | WUNTRACED | WCONTINUED)) != 0) {
            if (p < 0) {
                none_left = errno == ECHILD;
                break;
            }
            if (p != child)
                continue; /* an orphan of the job, re-parented to us */
            if (WIFSTOPPED(st))
                put(rep, KR_STOPPED, p, WSTOPSIG(st));
            else if (WIFCONTINUED(st))
                put(rep, KR_CONTINUED, p, 0);
            else
                put(rep, KR_EXIT, p, st);
        }
        if (none_left && mode != M_RUN)
            _exit(0); /* nothing of the job is left */
        if (mode == M_FINISH && ckpt__mono_ms() >= kill_at)
            mode = M_KILL;
        if (mode == M_KILL) {
            signal_tree(SIGKILL);
            timeout = 20;
        } else if (mode == M_FINISH) {
            int64_t left = kill_at - ckpt__mono_ms();
            timeout = left < 0 ? 0 : left > 50 ? 50 : (int)left;
        }
        if (cmd >= 0)
            pf[nfd++] = (struct pollfd){ .fd = cmd, .events = POLLIN };
        pf[nfd++] = (struct pollfd){ .fd = sfd, .events = POLLIN };
        if (poll(pf, (nfds_t)nfd, timeout) < 0 && errno != EINTR)
            timeout = 20; /* keep going; signalfd and waitpid still work */
        if (cmd >= 0 && pf[0].revents) {
            struct keeper_cmd c;
            r = read(cmd, &c, sizeof c);
            if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) {
                /* ckptrun is gone, perhaps by SIGKILL: nothing of the job
                 * may outlive it. */
                close(cmd);
                cmd = -1;
                mode = M_KILL;
            } else if (r == (ssize_t)sizeof c && c.type == KC_KILL) {
                mode = M_KILL;
            } else if (r == (ssize_t)sizeof c && c.type == KC_FINISH && mode == M_RUN) {
                mode = M_FINISH;
                kill_at = ckpt__mono_ms() + (c.value > 0 ? c.value : 0);
                signal_tree(SIGTERM);
            }
        }
        {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
                if (si.ssi_signo == SIGCHLD || mode != M_RUN || (pid_t)si.ssi_pid == parent)
                    continue; /* ckptrun's own signals to the group are known to it */
                /* Once per signal: a launcher forwarding it to its ranks
                 * makes no second stop. */
                unsigned bit = si.ssi_signo == SIGTERM ? 1u : 2u;
                if (!(reported & bit)) {
                    reported |= bit;
                    put(rep, KR_SIGNAL, (int)si.ssi_pid, (int)si.ssi_signo);
                }
            }
        }
    }
}

int keeper_start(struct keeper *k, char *const *argv, char *const *env, int tty, int *exec_errno)
{
    int cp[2] = { -1, -1 }, rp[2] = { -1, -1 }, rc = -1;
    pid_t parent = getpid(), pid;
    struct keeper_msg m;
    ssize_t r;
    size_t got = 0;

    memset(k, 0, sizeof *k);
    k->cmd_fd = k->rep_fd = -1;
    *exec_errno = 0;
    if (pipe2(cp, O_CLOEXEC) != 0 || pipe2(rp, O_CLOEXEC) != 0)
        goto out;
    pid = fork();
    if (pid < 0)
        goto out;
    if (pid == 0) {
        close(cp[1]);
        close(rp[0]);
        keeper_main(argv, env, tty, cp[0], rp[1], parent);
    }
    setpgid(pid, pid); /* both sides */
    k->pid = pid;
    k->alive = 1;
    k->cmd_fd = cp[1];
    k->rep_fd = rp[0];
    close(cp[0]);
    close(rp[1]);
    cp[0] = cp[1] = rp[0] = rp[1] = -1;
    while (got < sizeof m) {
        r = read(k->rep_fd, (char *)&m + got, sizeof m - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            errno = ECHILD;
            goto out; /* the keeper died before starting COMMAND */
        }
        got += (size_t)r;
    }
    if (m.type != KR_STARTED || m.pid <= 0) {
        errno = m.type == KR_STARTED ? m.value : EPROTO;
        goto out;
    }
    k->child = m.pid;
    *exec_errno = m.value;
    fcntl(k->rep_fd, F_SETFL, fcntl(k->rep_fd, F_GETFL) | O_NONBLOCK);
    rc = 0;
out:
    for (int i = 0; i < 2; i++) {
        if (cp[i] >= 0)
            close(cp[i]);
        if (rp[i] >= 0)
            close(rp[i]);
    }
    return rc;
}

int keeper_read(struct keeper *k, struct keeper_msg *m)
{
    ssize_t r;
    if (k->rep_fd < 0)
        return -1;
    do
        r = read(k->rep_fd, m, sizeof *m);
    while (r < 0 && errno == EINTR);
    if (r == (ssize_t)sizeof *m)
        return 1;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    return -1;
}

static void send_cmd(struct keeper *k, int type, int value)
{
    struct keeper_cmd c = { type, value };
    if (k->cmd_fd >= 0 && write(k->cmd_fd, &c, sizeof c) < 0)
        (void)0; /* the keeper is gone: nothing left to end */
}

void keeper_finish(struct keeper *k, unsigned grace_ms)
{
    send_cmd(k, KC_FINISH, grace_ms > INT32_MAX ? INT32_MAX : (int)grace_ms);
}

void keeper_kill(struct keeper *k)
{
    send_cmd(k, KC_KILL, 0);
}

void keeper_close(struct keeper *k)
{
    if (k->cmd_fd >= 0)
        close(k->cmd_fd);
    if (k->rep_fd >= 0)
        close(k->rep_fd);
    k->cmd_fd = k->rep_fd = -1;
}

int keeper_signal_handlers(const struct keeper *k, int sig, int *pids, int max)
{
    struct pt_proc c;
    int n, count = 0;

    /* COMMAND handles it: only COMMAND, as without a tree. */
    if (pt_stat(k->child, &c) == 0 && pt_catches(k->child, sig) == 1) {
        if (max > 0 && pt_signal(k->child, c.start, sig) == 0) {
            pids[0] = k->child;
            return 1;
        }
        return 0;
    }
    n = pt_scan(g_procs, SCAN_MAX);
    if (n < 0)
        return -1;
    pt_mark_descendants(g_procs, n, k->pid, g_mark);
    for (int i = 0; i < n; i++)
        g_catch[i] = g_mark[i] ? (signed char)pt_catches(g_procs[i].pid, sig) : 0;
    for (int i = 0; i < n && count < max; i++) {
        int top = 1, j = i;
        if (!g_mark[i] || g_catch[i] != 1)
            continue;
        /* Topmost in its branch: no ancestor below the keeper handles it
         * (a data-loader worker forked after its rank installed the handler
         * inherits it, and must not be signalled as well). */
        while (top && (j = pt_find(g_procs, n, g_procs[j].ppid)) >= 0 && g_mark[j])
            top = g_catch[j] != 1;
        if (top && pt_signal(g_procs[i].pid, g_procs[i].start, sig) == 0)
            pids[count++] = g_procs[i].pid;
    }
    return count;
}
