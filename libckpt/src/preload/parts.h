/*
 * parts.h -- the parts of libckpt_preload.so (docs/preload.md), each owning
 * its own state, called by shim.c's constructor, fork handler and
 * in-process API:
 *
 *   paths.c    which paths lie inside CKPT_DIR (lexical, the cached cwd)
 *   files.c    the interposed open/close/rename calls, the fd table, and
 *              the `file` messages on the shim's own connection
 *   signal.c   the request signal: recorded, chained, never fatal
 *   shim.c     load, fork and exec; the in-process API (ckpt_preload.h)
 *
 * Every part runs inside someone else's process: any wrapper may run
 * before the constructor or after a fork (real functions are resolved
 * lazily, an unset configuration means "pass through"); errno as the
 * program sees it is what the real call set; nothing is printed.
 */
#ifndef CKPT_PRELOAD_PARTS_H
#define CKPT_PRELOAD_PARTS_H

#include <dlfcn.h>
#include <limits.h>
#include <stdatomic.h>
#include <stddef.h>

#include "ckpt.h"

/* The next definition of `name` (libc's), looked up once and kept in
 * *slot: a wrapper can run before the constructor. Racing threads store
 * the same value; the atomics keep that well-defined. */
static inline void *ckpt__shim_real(_Atomic(void *) *slot, const char *name)
{
    void *f = atomic_load_explicit(slot, memory_order_acquire);
    if (!f) {
        f = dlsym(RTLD_NEXT, name);
        atomic_store_explicit(slot, f, memory_order_release);
    }
    return f;
}
/* static type real_<name>(void): the real function, resolved on first use */
#define CKPT_SHIM_REAL(type, name)                                            \
    static _Atomic(void *) real_##name##_p;                                   \
    static type real_##name(void)                                             \
    {                                                                         \
        return (type)ckpt__shim_real(&real_##name##_p, #name);                \
    }

/* ---- paths.c ----------------------------------------------------------- */
/* Set CKPT_DIR (relative: against the working directory now). @return 0,
 * or -1 when it cannot be watched (too long, unresolvable, "/"). */
int ckpt__shim_paths_init(const char *dir);
/* If `path` (relative to dirfd, or AT_FDCWD) names something strictly
 * inside CKPT_DIR, write its absolute form, spelled with CKPT_DIR as given
 * (the name ckptrun watches), into out and return its length; else 0.
 * No allocation; a lock only to read the cached working directory. */
size_t ckpt__shim_resolve(int dirfd, const char *path, char out[PATH_MAX]);
/* The working directory changed (chdir, fchdir): drop the cached one. */
void ckpt__shim_cwd_changed(void);
void ckpt__shim_paths_atfork_child(void);

/* ---- files.c ----------------------------------------------------------- */
/* Start tracking files under CKPT_DIR (paths.c set) for ckptrun at
 * `socket_path` (CKPT_SOCKET). Until then every wrapper passes through. */
void ckpt__shim_files_init(const char *socket_path);
/* In a forked child: the parent's connection and open files are the
 * parent's. */
void ckpt__shim_files_atfork_child(void);

/* ---- signal.c ---------------------------------------------------------- */
/* Take over the request signal named by CKPT_SIGNAL (`name`: NULL or ""
 * is SIGUSR1, "none" or an unknown name none), if the program left it at
 * its default action. */
void ckpt__shim_signal_init(const char *name);
/* @return 1 once per signal caught since the last call, then 0.
 * Async-signal-safe. */
int ckpt__shim_signal_take(void);
/* 1 while a caught signal has not been taken. */
int ckpt__shim_signal_pending(void);
/* Also make each signal caught from now on a request of `ctx` (NULL:
 * none), as ckpt_request() does. */
void ckpt__shim_signal_forward(struct ckpt_ctx *ctx);
void ckpt__shim_signal_atfork_child(void);

#endif
