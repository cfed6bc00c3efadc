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
#include "sup/sup_seam.h"

struct ctl;
struct queued_notice;
struct progress;
struct record;
struct watch;

/* ---- the stop's state (stop.h: the state machine that drives it) ---------- */

enum phase { P_RUN, P_CKPT, P_TERM, P_KILL };

/* How a stop request reached the child, and so what answers it: CH_SOCKET
 * a libckpt commit (`committed`), CH_SIGNAL and CH_FILES (the request over
 * the socket to processes that write their own files, the Python helper)
 * the commit of an entry written after the stop began. */
enum channel { CH_NONE, CH_SIGNAL, CH_SOCKET, CH_FILES };

/* What started a stop. */
struct stop_cause {
    const char *reason;    /* "SIGTERM", "SIGUSR1", "SIGXCPU", "SIGINT", "notice" */
    int64_t deadline_unix; /* 0: now + --grace */
    const char *provider;  /* notices */
    int except;            /* control client that asked itself (request.h) */
    enum channel self;     /* ... and its channel */
    int64_t since_mono;    /* when the signal reached the job, 0 unknown */
    int job;               /* the signal reached the job's processes directly */
    int remote;            /* another node's stop, read from the store: 1, or
                              2 when it was its user's (scancel, Ctrl-C) */
};

struct stop_state {
    enum phase phase;
    char reason[32]; /* a copy: ckpt__signal_name() reuses one buffer */
    char provider[32];
    enum channel via;
    int64_t t0, ckpt_end, deadline; /* mono ms */
    int64_t drain_deadline;         /* stop after the child exited: mono ms, 0 none */
    int final_done, final_ok;
    int user;          /* Ctrl-C, or a plain SIGTERM under SLURM: state `stopped` */
    int job_signalled; /* the stop's signal also reached the job's processes */
    int warned;        /* a scheduler's warning signal (SIGUSR1/SIGXCPU) came */
    int term_sig;      /* what ends the child after the final checkpoint */
    int no_kill;       /* a user interrupt: no SIGKILL, the child ends itself */
    int64_t term_due;  /* mono ms: send term_sig (awaiting `stopping` acks), 0 none */
    int term_sent;
    int64_t t_accept;    /* mono ms: entries changed since answer the stop */
    int saw_saving;      /* a save began after the request ... */
    uint64_t await_step; /* ... at this step: its commit answers */
    int failed_since_stop;
    struct queued_notice *acks; /* notices waiting for the final result */
    int64_t t_wall;             /* Unix ms when the stop began */
    uint64_t await_global;      /* several nodes: the global commit of step
                                   await_global - 1 or later answers (0: none yet) */
};

/* ---- what the report keeps (sup_report.h: what it says) --------------------- */

struct sup_report {
    uint64_t failures;                   /* commits that failed in this session */
    uint64_t failures_before;            /* `commit_failures` of the previous RUN */
    unsigned in_row;                     /* failures since the last commit */
    char last_error[640];                /* "step N: error: detail" */
    char last_err[96], last_detail[512]; /* the event's error and detail */
    uint64_t last_error_step;
    int64_t last_error_ms; /* Unix ms; 0 none in this session */
    int64_t last_error_mono;
    cJSON *prev_error;    /* the previous RUN's `last_error`, carried */
    uint64_t unreachable; /* requests that reached nobody */
    char unreachable_reason[32];
    int ever_helper;       /* a process that writes its own files connected */
    int saw_checkpoint;    /* a complete entry or a libckpt save in this session */
    int64_t activity_mono; /* newest sign of a checkpoint (or the start) */
    int64_t no_ckpt_ms;    /* CKPT_DIR idle threshold, 0 off */
    int no_ckpt_told;
    int last_attempt; /* the last attempt at the end was made */
    int uncommitted;  /* complete entries still uncommitted at the end */
    uint64_t uncommitted_step;
    cJSON *uncommitted_entries; /* [{"name","files","bytes"}] */
    char final_why[400];        /* why the final checkpoint did not commit */
};

struct sup {
    struct opts *o;
    int recover; /* `recover`, not `run` (supervise.h: SUP_RECOVER) */
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
    int trainer_restores;     /* newer than any files: the trainer's memory */
    uint64_t trainer_step;

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
