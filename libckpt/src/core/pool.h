/* pool.h -- the worker pool: threads that run queued jobs, each with its
 * own codec workspace; and batches, to run many jobs and wait for them all.
 * The queue is unbounded: its producers bound themselves (the snapshot by
 * its staging blocks, restore and verify by what they plan). */
#ifndef CKPT_POOL_H
#define CKPT_POOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "ckpt.h"
#include "format/codec.h"
#include "ckpt_store.h" /* CKPT_ERR_MAX */

struct ckpt_idset;
struct ckpt_pool;

/* A job runs on a worker with that worker's codec workspace (NULL if it
 * could not be allocated: the job then reports out of memory). */
typedef void (*ckpt_job_fn)(void *arg, struct ckpt_codec_ws *ws);

/* Start `workers` threads (fewer if some cannot start, none: NOMEM), with
 * workspaces for chunks of `chunk_bytes`. */
ckpt_status ckpt__pool_start(struct ckpt_pool **out, unsigned workers, size_t chunk_bytes);
/* Run what is queued, then join the workers. NULL-safe. */
void ckpt__pool_stop(struct ckpt_pool *p);
/* Queue a job (failpoint "pool_submit"): CKPT_E_NOMEM if it cannot be. */
ckpt_status ckpt__pool_submit(struct ckpt_pool *p, ckpt_job_fn fn, void *arg);
/* Queue an idle job: workers take one only while no ordinary job is
 * queued (background work that must not delay a save or a restore: the
 * faulting in of a stage). A long idle job calls ckpt__pool_wanted between
 * its steps and, when it says yes, queues the rest of itself again
 * (ckpt__pool_submit_idle) and returns, so its worker goes to the queued
 * job. Held and stopped as ordinary jobs are (a stop runs them: an idle
 * job asks ckpt__pool_closing and lets its work go). */
ckpt_status ckpt__pool_submit_idle(struct ckpt_pool *p, ckpt_job_fn fn, void *arg);
/* true while an ordinary job waits in the queue */
bool ckpt__pool_wanted(struct ckpt_pool *p);
/* true once ckpt__pool_stop has begun: background work is not wanted */
bool ckpt__pool_closing(struct ckpt_pool *p);
/* While held, queued jobs wait; releasing starts them all at once. */
void ckpt__pool_hold(struct ckpt_pool *p, int hold);

/* A batch: jobs over the pool whose outcome is waited for together. The
 * first failure (status and message) wins. */
struct ckpt_batch {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t pending;
    ckpt_status st;
    atomic_bool failed;      /* st != CKPT_OK, readable without mu */
    char err[CKPT_ERR_MAX];
    struct ckpt_idset *bad;  /* restore: ids of chunks found damaged (may be NULL) */
};
void ckpt__batch_init(struct ckpt_batch *b);
void ckpt__batch_destroy(struct ckpt_batch *b);
void ckpt__batch_done(struct ckpt_batch *b, ckpt_status st, const char *err);
ckpt_status ckpt__batch_wait(struct ckpt_batch *b);
/* 1 once a job of the batch failed: later jobs may skip their work. Any
 * thread, no lock. */
bool ckpt__batch_failed(struct ckpt_batch *b);

#endif
