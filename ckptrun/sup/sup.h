/*
 * sup.h -- the supervisor's state and its clocks, shared by the files of
 * `run` (header only: the event log and run record are sup_log.h):
 * supervise.c (setup, loop, outcome), sup_events.c (the event sources),
 * stop.c (the stop state machine) and request.c (checkpoint requests).
 * Everything here is touched by the supervisor's thread only; what other
 * threads hand it arrives through the renewer's `lost` flag and the notice
 * queue (both wake the loop through notice_queue_fd()).
 */
#ifndef CKPTRUN_SUP_H
#define CKPTRUN_SUP_H

#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "sup/child.h"
#include "sup/claim.h"
#include "nodes/nodes.h"
#include "nodes/nodesync.h"
#include "opts.h"
#include "sup/renewer.h"
#include "sup/stop.h"
#include "sup/sup_report.h"
#include "sup/sup_seam.h"
#include "sup/supervise.h"

struct ctl;
struct progress;
struct record;
struct watch;

struct sup {
    struct opts *o;
    enum sup_mode mode;
    /* The clocks and the world the decisions act on (sup_seam.h):
     * &sup_seam_system, or a test's. */
    const struct sup_seam *seam;

    /* The run: claimed (claim.h), its record, what is committed. */
    struct claim cl;          /* lease, epoch */
    struct renewer rn;
    int lease_lost;           /* stop committing: another runner holds the run */
    int lease_told;           /* the `lease acquired` event was logged */
    struct record *rec;
    int64_t last_step;        /* last committed step of the run, -1 none */
    double last_commit_s;     /* duration of the last commit, for codec choice */
    int64_t last_changed;     /* newest changed_mono of a committed watched entry, -1 */
    uint64_t preemptions;
    int64_t started_ms;
    int resumed;              /* restored before start (prestart.h) */
    uint64_t restored_step;

    /* Event sources. */
    char dir[PATH_MAX];       /* CKPT_DIR, absolute */
    struct watch *w;
    struct ctl *ctl;
    char sock[300];
    int sfd, tfd;             /* signalfd, timerfd */
    sigset_t mask;
    int64_t next_periodic;    /* mono ms, 0 = off */
    int64_t watch_due;        /* mono ms, -1 = none */

    /* The child. */
    struct child ch;
    uint64_t req_id;
    int ever_connected;       /* a process sent hello at some point */
    int ever_saving;          /* the child's libckpt sends "saving" messages */
    int child_writes;         /* the child commits checkpoints itself */

    struct stop_state stop;
    struct sup_report rep;       /* what is not safe, said (sup_report.h) */
    struct progress *pg;         /* the commit's progress on a terminal, or NULL */
    struct ckpt_ctx *commit_ctx; /* the watcher's context (borrowed: for pg) */

    /* Several nodes (nodes.h, sup_nodes.c); ns NULL with one. */
    struct nodes_id nid;
    struct nodesync *ns;
    /* Told when a stop begins (set by sup_nodes.c with ns: the other
     * nodes learn of it), so stop.c need not know of nodes. */
    void (*stop_begun)(struct sup *s, const struct stop_cause *c, int64_t deadline_unix);
    struct nodesync_view nv;  /* as last copied */
    int64_t part_step;        /* newest part this node wrote, -1 none */
    uint64_t empty_asked;     /* newest step whose empty part was asked for, 0 none */
    int64_t empty_asked_first_ms; /* Unix ms of the first part of that step */
    int remote_stop_taken;    /* the job's stop object was acted on */
    int64_t child_end_mono;   /* when the child was seen gone, 0 while alive */
    uint64_t seq_at_end;      /* nv.seq then */
    int64_t stop_ref_ms;      /* Unix ms: parts written since answer the stop */
    int64_t stop_global0;     /* newest global step when the stop began */
};

/* The supervisor's clocks (sup_seam.h): monotonic ms, Unix ms. */
static inline int64_t sup_mono_ms(const struct sup *s)
{
    return s->seam->clock.mono_ms(s->seam->clock.user);
}

static inline int64_t sup_now_ms(const struct sup *s)
{
    return s->seam->clock.now_ms(s->seam->clock.user);
}

#endif
