/*
 * ckpt_preload.h -- the in-process API of libckpt_preload.so, the LD_PRELOAD
 * shim that `ckptrun --preload` injects (docs/preload.md).
 *
 * A program that was never linked with libckpt runs under the shim; the
 * shim carries the whole library, so every function of ckpt.h is in the
 * process too, and these two reach the shim's own state. Nothing links
 * against them: a program finds them at run time, only when the shim is
 * there --
 *
 *   struct ckpt_ctx *(*get)(void) =
 *       (struct ckpt_ctx *(*)(void))dlsym(RTLD_DEFAULT, "ckpt_preload_ctx");
 *   if (get && (ctx = get()) != NULL) ...       // else: not under the shim
 *
 * or, from Python, ctypes.CDLL(None).ckpt_preload_ctx with
 * restype = c_void_p (examples/python/ckpt_helper.py). The declarations
 * below give the exact types to use for either.
 *
 * Since 0.1.0; declared here since 0.2.0.
 */
#ifndef CKPT_PRELOAD_H
#define CKPT_PRELOAD_H

#include "ckpt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The process's global context, opened on the first call with the CKPT_*
 * environment (as ckpt_open(NULL), but one rank: see below): under ckptrun
 * it connects to the control socket and says `hello`, after which ckptrun sends its requests there.
 * The context is a single-rank one (world_size 1) whatever the launcher's
 * environment says: the shim has no collective (ckpt.h, "Ranks").
 * A request signal the shim caught -- before the context existed too -- is
 * forwarded to it (ckpt_request()), so ckpt_should_save() on it is true for
 * both. Thread-safe. In a child forked after the call, the first call opens
 * a new context (the parent's threads did not survive the fork).
 * @return the context, owned by the shim and valid until the process exits
 *         (never pass it to ckpt_close()); NULL when it cannot be opened
 *         (a bad CKPT_STORE, say: ckpt_errmsg(NULL) says why, and the next
 *         call tries again). */
CKPT_API struct ckpt_ctx *ckpt_preload_ctx(void);

/* For programs that write their own checkpoint files and so never call
 * ckpt_save(), which is what clears ckpt_should_save() (the Python helper).
 * @return 1 once per checkpoint request -- a request signal the shim caught
 *         (whatever handler the program has), or, once ckpt_preload_ctx()
 *         has opened the global context, a request from ckptrun over the
 *         socket or the context's interval come due -- then 0 until the
 *         next one. Taking a request clears it as ckpt_save() would (the
 *         interval starts again). Never opens a context. Any thread;
 *         async-signal-safe while no context is open. */
CKPT_API int ckpt_preload_take_request(void);

#ifdef __cplusplus
}
#endif
#endif /* CKPT_PRELOAD_H */
