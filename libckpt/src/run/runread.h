/* runread.h -- a run's keys, and one manifest (a single writer's, or one
 * rank's part) read from the store, below both the run's loading
 * (runload.h) and the global checkpoints composed from parts
 * (globalckpt.h). Errors go to the context's message. */
#ifndef CKPT_RUNREAD_H
#define CKPT_RUNREAD_H

#include <stddef.h>

#include "ckpt.h"
#include "format/manifest.h"

struct ckpt_ctx;

/* "<run>/<rel>" */
void ckpt__run_key(const struct ckpt_ctx *ctx, const char *rel, char *out, size_t n);
/* The manifest at rel, as stored (no commit record's composition). */
ckpt_status ckpt__read_one_manifest(struct ckpt_ctx *ctx, const char *rel,
                                    struct ckpt_manifest *m);

#endif
