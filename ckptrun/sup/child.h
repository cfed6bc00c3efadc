/*
 * child.h -- COMMAND and its process tree, as the supervisor sees them:
 * its environment, its start under the keeper (keeper.h: the job's process
 * group and subreaper), signals to it, its end, and the reaping of every
 * process that comes back to ckptrun.
 *
 * The functions only act and report; what an exit or a signal means for
 * the run is the supervisor's (sup_events.c). Main thread only.
 */
#ifndef CKPTRUN_CHILD_H
#define CKPTRUN_CHILD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "sup/keeper.h"

struct child {
    struct keeper kp;         /* the job's process tree */
    pid_t pid;                /* COMMAND */
    pid_t pgid;               /* the job's process group (the keeper's) */
    int alive;
    int sigint;               /* COMMAND died of SIGINT or exited 130 */
    int sigterm;              /* COMMAND died of SIGTERM or exited 143 */
    int code;                 /* exit code as a shell reports it */
    int tty;                  /* COMMAND holds the terminal's foreground */
};

/* What the child's environment says (DESIGN.md §3, "The child"). Strings
 * are copied into the environment. */
struct child_vars {
    const char *sock;         /* CKPT_SOCKET ("": none) */
    const char *sock_key;     /* CKPT_SOCKET_KEY, with sock */
    const char *dir;          /* CKPT_DIR */
    const char *store;        /* CKPT_STORE */
    const char *run;          /* CKPT_RUN */
    int sig;                  /* CKPT_SIGNAL (0: none) */
    int resumed;              /* CKPT_RESUMED, and CKPT_STEP = step when 1 */
    uint64_t step;
    const char *codec;        /* CKPT_CODEC, or NULL */
    unsigned keep;            /* CKPT_KEEP */
    uint64_t epoch;           /* CKPT_EPOCH (0: none) */
    const char *preload;      /* prepended to LD_PRELOAD, or NULL */
};

void child_init(struct child *c);
/* ckptrun's environment with the CKPT_* variables replaced. @return an
 * array for child_env_free, or NULL (out of memory). */
char **child_env(const struct child_vars *v);
void child_env_free(char **env);
/* Where the preload shim lives: CKPT_PRELOAD_LIB, else next to our library
 * directory. @return 0 and out, or -1. */
int child_find_preload(char *out, size_t n);

/* Start COMMAND (args) under the keeper, in the keeper's process group,
 * which gets the terminal's foreground when `tty`. @return 0, or -1 when
 * nothing could be started (errno); an exec failure is logged, returns -1
 * and leaves a child (c->alive) that exits 127. */
int child_spawn(struct child *c, char **args, char **env, int tty);

/* `sig` to the job's process group. */
void child_signal_group(struct child *c, int sig);
/* Send `sig` to the processes of the job that handle it (keeper.h: COMMAND
 * if it does, else the topmost handler in each branch, never one of their
 * descendants). @return the number signalled; their pids, comma-separated,
 * in pids_txt (size n). */
int child_signal_handlers(struct child *c, int sig, char *pids_txt, size_t n);
/* SIGKILL to the whole job: the keeper kills every process of its tree
 * (also those outside the process group); without it, the group. */
void child_kill_all(struct child *c);

/* COMMAND ended with wait status `st`: records how, hands the terminal
 * back. @return 1, or 0 when its end was known already. */
int child_ended(struct child *c, int st);
/* After COMMAND ended: leftover processes of the job get SIGTERM now and
 * SIGKILL after grace_ms, or SIGKILL now (`kill`). */
void child_finish_tree(struct child *c, int64_t grace_ms, int kill);
/* Ctrl-Z stopped COMMAND: hand the terminal back and stop ourselves so the
 * shell sees the job stopped; on `fg` give it back and continue the job. */
void child_suspended(struct child *c);
/* Reap every child of ours: the keeper, hooks, and (as PID 1 or subreaper)
 * orphans; COMMAND itself only when the keeper died before it. @return 1
 * and *st when COMMAND was reaped here, else 0. */
int child_reap(struct child *c, int *st);
/* Nothing of the job may outlive us: the keeper SIGKILLs what is left;
 * wait briefly (2 s) for it. */
void child_end_tree(struct child *c);
/* Close the keeper's pipes (a keeper still there kills what is left). */
void child_close(struct child *c);

#endif
