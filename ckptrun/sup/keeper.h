/*
 * keeper.h -- the process that holds the job's process tree, so that no
 * process of it outlives ckptrun, without cgroups (docs/ckptrun.md,
 * "Process tree").
 *
 *   ckptrun ── keeper (subreaper, leader of the job's process group)
 *                 └── COMMAND ── its children, grandchildren, ...
 *
 * The keeper is forked by ckptrun and forks COMMAND. It is the job's
 * child subreaper (PR_SET_CHILD_SUBREAPER): every process of the tree that
 * is orphaned -- a daemon that double-forks, a process that calls setsid(),
 * a launcher killed before its ranks -- is re-parented to the keeper, never
 * to init. So "the job's processes" are exactly the keeper's descendants,
 * and when the keeper has no child left, none is left at all.
 *
 * The keeper ignores every signal that a job-wide kill or a terminal sends
 * (it catches SIGTERM and SIGINT only to tell ckptrun), so only SIGKILL
 * aimed at it ends it. It reads commands from a pipe whose only writer is
 * ckptrun: end of file means ckptrun is gone (even by SIGKILL), and the
 * keeper then kills the whole tree with SIGKILL and exits once it is
 * empty. A signal to a process that is not the keeper's own child goes
 * through a pidfd checked against the process's start time (proctree.h),
 * so a reused PID is never hit.
 *
 * Between the two, messages are fixed-size records (atomic on a pipe).
 */
#ifndef CKPTRUN_KEEPER_H
#define CKPTRUN_KEEPER_H

#include <sys/types.h>

/* keeper -> ckptrun */
enum keeper_report {
    KR_STARTED = 1,           /* pid: COMMAND; value: exec errno (0 = ran) */
    KR_EXIT,                  /* pid: COMMAND; value: its wait status */
    KR_STOPPED,               /* pid: COMMAND stopped (Ctrl-Z); value: signal */
    KR_CONTINUED,             /* pid: COMMAND continued */
    KR_SIGNAL,                /* value: a signal the job's process group got (SIGTERM, SIGINT) */
};

struct keeper_msg {
    int type;
    int pid;
    int value;
};

struct keeper {
    pid_t pid;                /* the keeper; also the job's process group */
    pid_t child;              /* COMMAND */
    int cmd_fd;               /* write end: commands */
    int rep_fd;               /* read end: reports (non-blocking) */
    int alive;
};

/* Fork the keeper, which forks COMMAND (argv, env) in the keeper's process
 * group; with tty, that group gets the terminal's foreground. Blocks until
 * COMMAND was started or failed to start (*exec_errno, COMMAND then exits
 * 127). Call from the thread that reaps children.
 * @return 0, or -1 (fork failed, errno). */
int keeper_start(struct keeper *k, char *const *argv, char *const *env, int tty, int *exec_errno);

/* Read one report. @return 1 (one in *m), 0 (none now), -1 (keeper gone:
 * end of file). */
int keeper_read(struct keeper *k, struct keeper_msg *m);

/* Every process of the job except COMMAND itself is asked to end: SIGTERM
 * now, SIGKILL after grace_ms; the keeper exits once none is left. For the
 * processes left behind when COMMAND has ended. */
void keeper_finish(struct keeper *k, unsigned grace_ms);
/* SIGKILL to every process of the job now; the keeper exits once none is
 * left. */
void keeper_kill(struct keeper *k);
/* Close ckptrun's ends (after the keeper exited, or to let it clean up on
 * its own). NULL-safe fields. */
void keeper_close(struct keeper *k);

/* Signal the processes of the job that handle `sig`: COMMAND when it does,
 * else the topmost process handling it in each branch of the tree below
 * the keeper, never also a descendant of one signalled. pids receives
 * those signalled (up to max). @return the number signalled (0: none
 * handles it), -1 when /proc cannot be read. */
int keeper_signal_handlers(const struct keeper *k, int sig, int *pids, int max);

#endif
