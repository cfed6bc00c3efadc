/* cuda/cuda.h -- device regions on CUDA GPUs (cuda.c, docs/cuda.md). The CUDA
 * runtime is dlopen'ed at first use (CKPT_CUDA_RUNTIME overrides the
 * search). */
#ifndef CKPT_CUDA_H
#define CKPT_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"

struct ckpt_ctx;
struct ckpt_item;
struct ckpt_cuda;  /* per-context stream and pinned pool, ctx->cuda */

/* 1 if CUDA device regions can be used in this process, else 0 with why. */
int ckpt__cuda_available(char *err);
/* Check a region about to be protected (device memory, one device per
 * context) and grow the pinned pool for it. */
ckpt_status ckpt__cuda_protect(struct ckpt_ctx *ctx, void *dev, size_t size, char *err);
/* Free the stream and pinned pool (ckpt_close). NULL-state safe. */
void ckpt__cuda_release(struct ckpt_ctx *ctx);
/* Save, training thread: copy [off, off+len) of device item `it` into dst.
 * Must be called for every chunk of every device item in list order; the
 * first call of a save synchronizes the device and starts the pipelined
 * device -> pinned copies. */
ckpt_status ckpt__cuda_snapshot_chunk(struct ckpt_ctx *ctx, const struct ckpt_item *it,
                                      uint64_t off, size_t len, void *dst, char *err);
/* End of a save's snapshot (also after a failure): drains queued copies. */
void ckpt__cuda_snapshot_end(struct ckpt_ctx *ctx);
/* Restore, any worker: host -> pinned -> device; done when it returns. */
ckpt_status ckpt__cuda_h2d(struct ckpt_ctx *ctx, void *dev, const void *host, size_t len,
                           char *err);

#endif
