/*
 * claim.h -- claiming the run before the supervisor starts anything
 * (docs/recover.md): whether `recover` has anything to do, the run's lease,
 * and fencing HEAD at the lease's epoch.
 *
 * The lease makes this runner the run's only writer; fencing rewrites HEAD
 * at the new epoch, so a previous holder that is still alive (frozen,
 * partitioned) can no longer commit. The epoch then goes to the child
 * (CKPT_EPOCH) and to ckptrun's own commit context.
 */
#ifndef CKPTRUN_CLAIM_H
#define CKPTRUN_CLAIM_H

#include <stdint.h>
#include "ckpt.h"

struct lease;
struct opts;
struct record;

/* recover: a completed run needs nothing, and neither does one its user
 * stopped (unless --resume-stopped); one GET of the run record. @return 1
 * when the caller must exit with *rc (said why), 0 to go on. */
int claim_nothing_to_do(struct record *rec, const struct opts *o, int *rc);

struct claim {
    struct lease *lease;      /* held: lease_close() it */
    uint64_t epoch;
    char stale_holder[256];   /* taken over from this dead holder on this host, or "" */
    const char *job;          /* set by the caller: job generation recorded in LEASE
                                 (nodes.h), NULL none */
};

/* Take the run's lease. `recover`: a lease held elsewhere is nothing to do
 * (exit 0) rather than an error (EXIT_LEASE_HELD). @return 1 when the
 * caller must exit with *rc (c->lease may still need closing), 0 held. */
int claim_lease(struct record *rec, const struct opts *o, int recover, struct claim *c,
                int *rc);

/* Rewrite HEAD at `epoch` through ctx. @return 1 when the caller must exit
 * with *rc (logged), 0 fenced. */
int claim_fence(struct ckpt_ctx *ctx, const char *run, uint64_t epoch, int *rc);

#endif
