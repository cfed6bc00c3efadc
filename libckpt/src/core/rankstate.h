/* rankstate.h -- a context's state for the ranks of a job (ctx.h holds
 * it): the phase of the global step in progress and this rank's last part.
 * What the ranks do with it -- agree, save, restore -- is ranks.h's. */
#ifndef CKPT_RANKSTATE_H
#define CKPT_RANKSTATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"

enum { CKPT_RANKS_IDLE = 0, CKPT_RANKS_PART = 1, CKPT_RANKS_COMMITTING = 2 };

struct ckpt_ranks {
    pthread_mutex_t mu;
    /* this rank's last part (mu): its replicated items' agreement values
     * (digest and name), in name order */
    size_t ndig;
    uint64_t *digs;
    char **dig_names;
    /* the part writer's (one save in flight at a time): the time of this
     * rank's last part, so that a newer part is always later */
    int64_t last_part_ms;

    /* the application thread's */
    int phase;
    uint64_t step;        /* of the global step in progress */
    uint32_t nonce;       /* the job step's nonce (rank 0's) */
    uint64_t epoch;       /* rank 0's lease epoch at the save */
    ckpt_status local_st; /* this rank's snapshot failed: its part will not come */
    ckpt_status outcome;  /* the last global outcome, until ckpt_wait reports it */
    bool reload;          /* ranks > 0: a commit changed the run; load it again
                             before the next save dedups */
    bool broken;          /* the collective failed: no more collective calls */
};

/* A context's ranks state, zeroed (ckpt_open), and released (ckpt_close). */
void ckpt__ranks_init(struct ckpt_ranks *r);
void ckpt__ranks_destroy(struct ckpt_ranks *r);

#endif
