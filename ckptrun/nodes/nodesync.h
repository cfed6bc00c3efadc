/*
 * nodesync.h -- the thread through which one node's ckptrun keeps step
 * with the other nodes of its job, through the store only (nodes.h,
 * docs/multirank.md "Several nodes").
 *
 * It owns a libckpt context of this node's rank (world size N,
 * CKPT_RANKS_STORE, the job's lease epoch) and, about every second (every
 * 250 ms while a stop is on or parts are pending):
 *   - reads the job's stop object, <run>/stops/<job>.e<epoch>.json: a node
 *     that gets a notice or signal writes it (create-only: a second node's
 *     stop in the same window finds it there and writes nothing), and
 *     every node handles it as its own notice;
 *   - lists the parts of steps not committed yet (ckpt_pending): node 0
 *     commits a step (ckpt_commit_parts) once every node's part of it, of
 *     this epoch, is durable; every node learns which steps wait for it;
 *   - reads the newest committed (global) step;
 *   - nodes other than 0: reads LEASE, and reports the job lost when its
 *     epoch or generation changed (a new generation took the run over).
 * On request it writes this node's *empty part* of a step (nothing of
 * that step in its CKPT_DIR: ckpt_save with nothing protected).
 *
 * What it learns is kept in a `struct nodesync_view` the supervisor copies
 * (nodesync_view) when `wake` is called; everything is guarded by one
 * mutex; store calls are made without it.
 */
#ifndef CKPTRUN_NODESYNC_H
#define CKPTRUN_NODESYNC_H

#include <stdint.h>
#include "ckpt.h"

struct ckpt_store;
struct nodesync;

#define NODESYNC_MAX_PENDING 16

struct nodesync_cfg {
    struct ckpt_store *st;    /* the record's store (stop objects, LEASE) */
    const char *run, *job;
    uint64_t epoch;
    unsigned rank, nnodes;
    struct ckpt_ctx *ctx;     /* owned by the thread from now on */
    void (*wake)(void);       /* tell the supervisor's loop: something changed */
};

struct nodesync_pending {
    uint64_t step;
    unsigned have;            /* nodes whose part of it is durable (this epoch) */
    int mine;                 /* this node's among them */
    int64_t first_ms;         /* wall time of the oldest part of it */
};

struct nodesync_view {
    uint64_t seq;             /* polls done; a view of seq > s saw the store after s */
    int64_t global_step;      /* newest committed step, -1 none */
    int stop_seen;            /* the job's stop object exists */
    unsigned stop_node;       /* ... written by this node */
    char stop_reason[96];
    int64_t stop_deadline_ms; /* Unix ms, 0 none */
    int64_t stop_time_ms;     /* Unix ms when it was written */
    int stop_user;            /* a user's stop (scancel, Ctrl-C): state `stopped` */
    struct nodesync_pending pending[NODESYNC_MAX_PENDING];
    int npending;
    uint64_t empty_done;      /* newest step whose empty part this node wrote (0 none) */
    int lost;                 /* LEASE is another epoch's or generation's now */
    char lost_why[512];
    char commit_error[256];   /* node 0: the last ckpt_commit_parts failure, "" none */
};

/* Start the thread. @return 0, or -1 (cfg->ctx is then closed). */
int nodesync_start(struct nodesync **out, const struct nodesync_cfg *cfg);
/* Stop the thread (a store call in flight finishes) and close its
 * context. NULL-safe. */
void nodesync_close(struct nodesync *ns);

void nodesync_view(struct nodesync *ns, struct nodesync_view *v);
/* Write the job's stop object, once (later calls do nothing). */
void nodesync_post_stop(struct nodesync *ns, const char *reason, int64_t deadline_ms,
                        int user);
/* Write this node's empty part of `step` (once per step). */
void nodesync_write_empty(struct nodesync *ns, uint64_t step);
/* Poll every 250 ms rather than every second. */
void nodesync_fast(struct nodesync *ns, int on);

/* The key of a job generation's stop object. */
void nodesync_stop_key(char *buf, size_t n, const char *run, const char *job, uint64_t epoch);

#endif
