/* runload.h -- loading a run into the run state (runstate.h): HEAD, or
 * the manifests' view when it is damaged (headscan.h), and the manifests
 * and gc records it names (runobj.h). Errors go to the context's message. */
#ifndef CKPT_RUNLOAD_H
#define CKPT_RUNLOAD_H

#include <stdbool.h>
#include <stddef.h>

#include "ckpt.h"

struct ckpt_ctx;

/* Read HEAD (and, with ids, the retained and damaged manifests' objects and
 * the gc records HEAD names) into ctx's run state, whole or not at all;
 * either way the state is `loaded`. A damaged HEAD is replaced by the
 * manifests' view (headscan.h), against which nothing is deduplicated; the
 * next commit writes HEAD over the damaged one. Called without its mu
 * held. */
ckpt_status ckpt__load_run(struct ckpt_ctx *ctx, bool ids);

#endif
