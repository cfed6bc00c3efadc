/* snapshot.h -- the training thread's part of a save: the save's shape
 * (items, sizes, protected files as they are now), then a copy of every
 * host and device region into staging, chunk by chunk, each chunk handed
 * to the pool as a chunk job (chunk.h). Without a staging cap the jobs are
 * held back until the copy is done, so workers do not compete with the
 * caller's memcpy for cores and memory bandwidth: the stall is one memcpy.
 * With a cap, jobs run as they are queued and the caller blocks only for
 * free blocks. A stop's save (signals.h: ckptrun asked for it, or a signal
 * was taken as one) is the last one kept, so the time to its commit
 * counts, not the stall: one rank's host regions are read in place by the
 * chunk jobs, the caller waiting until they are all done (it would only
 * compute what is thrown away, and leaves the cores to the workers);
 * ranks copy in 64 MiB pieces whose jobs start at once. */
#ifndef CKPT_SNAPSHOT_H
#define CKPT_SNAPSHOT_H

#include <stdint.h>

#include "ckpt.h"

struct ckpt_ctx;

/* ckpt_save(): take the snapshot of step `step` and start its save. */
ckpt_status ckpt__snapshot(struct ckpt_ctx *ctx, uint64_t step);

#endif
