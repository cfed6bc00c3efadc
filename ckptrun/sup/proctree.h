/*
 * proctree.h -- the processes of the supervised job, read from /proc.
 *
 * This machine may have no usable cgroup (a container with cgroup v1, or no
 * delegation): the job's processes are found by their parent links. Every
 * function here uses raw system calls, fixed buffers supplied by the
 * caller and no allocation, so the keeper (keeper.c) may call them in a
 * process forked from multithreaded ckptrun (async-signal-safe only).
 *
 * PID reuse: a PID read from /proc may name another process by the time it
 * is signalled. pt_signal() therefore signals through a pidfd and only
 * after checking, through that pidfd's PID, that the process still has the
 * start time read with it. (A parent's own unreaped children need no such
 * check: their PIDs cannot be reused before the parent reaps them.)
 */
#ifndef CKPTRUN_PROCTREE_H
#define CKPTRUN_PROCTREE_H

#include <stdint.h>

struct pt_proc {
    int pid, ppid;
    uint64_t start;           /* clock ticks after boot (field 22 of stat) */
    char state;               /* R, S, D, Z, T, ... */
};

/* Read /proc/PID/stat into *out. @return 0, or -1 (no such process). */
int pt_stat(int pid, struct pt_proc *out);

/* Every process of this PID namespace, up to max, in increasing PID order
 * (the order of /proc). @return the count, or -1 when /proc cannot be read. */
int pt_scan(struct pt_proc *v, int max);

/* Set mark[i] = 1 for each v[i] that descends from `root` (not root
 * itself), following ppid links; v as pt_scan returns it (sorted by pid).
 * @return the number marked. */
int pt_mark_descendants(const struct pt_proc *v, int n, int root, unsigned char *mark);

/* Index of `pid` in v (as pt_scan returns it), or -1. */
int pt_find(const struct pt_proc *v, int n, int pid);

/* 1 when `pid` is `anc` or descends from it (parent links, at most 64
 * levels), else 0. */
int pt_descends(int pid, int anc);

/* 1 when `pid` has a handler for `sig` (SigCgt in /proc/PID/status), 0 when
 * not, -1 when unknown (gone). */
int pt_catches(int pid, int sig);

/* Send `sig` to `pid` if it still is the process that started at `start`.
 * @return 0 sent, -1 gone (or another process now). */
int pt_signal(int pid, uint64_t start, int sig);

#endif
