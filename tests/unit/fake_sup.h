/*
 * fake_sup.h -- a supervisor (ckptrun/sup/sup.h) in a fake world, for the unit
 * tests of its decisions (test_stop.c, test_sup_nodes.c): its seam
 * (ckptrun/sup/sup_seam.h) is a clock that moves only when a test moves it, a
 * job that records the signals it is sent, a control socket with the
 * clients a test gives it, a watcher that is busy when a test says so, and
 * other nodes whose view a test writes. Events are fed as data (a signal,
 * the keeper's report, a control message, a watched commit result, a
 * notice), and time is moved from due time to due time as the loop's
 * timer would (run_until). Nothing sleeps, no process is started, no
 * socket or store is opened.
 */
#ifndef TEST_FAKE_SUP_H
#define TEST_FAKE_SUP_H

#include "test_util.h"
#include "sup/ctlserver.h"
#include "nodes/nodesync.h"
#include "opts.h"
#include "sup/sup.h"
#include "sup/sup_log.h"

#define T0 5000000                 /* mono ms at the start of each test */
#define WALL0 1750000000000LL      /* Unix ms then */
#define EXITED(code) ((code) << 8) /* wait statuses */
#define KILLED(sig) (sig)

/* The world: what the seam was asked to do, and what it answers. */
struct world {
    int64_t mono, wall;
    struct {
        int sig;
        int64_t at;
    } sent[16]; /* signals to the job's group, in order */
    int nsent;
    int kills; /* SIGKILL to the whole tree */
    int64_t kill_at, kill_wall;
    int handlers;             /* processes of the job that handle --signal now */
    int req_signals, req_sig; /* requests sent as --signal to those */
    int finished;             /* finish_tree calls: the leftovers after COMMAND */
    int64_t finish_grace;
    int finish_kill;
    int lib, helpers;       /* connected clients: libckpt (hello), helpers */
    int sig_lib, sig_files; /* clients that turn SIGTERM/SIGINT into stops */
    int reached;            /* what ctl_request answers: clients it reached */
    int told;               /* what ctl_stopping answers: clients told */
    int unacked;
    int nreq; /* checkpoint requests over the socket */
    char req_reason[32], req_codec[16];
    int64_t req_deadline;
    int req_kinds, req_except;
    int watch_stops, paused, busy, uncommitted;
    uint64_t settle;
    int codec_set;
    ckpt_codec codec;
    int acks, ack_ok;
    uint64_t ack_step;
    /* the other nodes (nodes_*): the view the nodes' thread gives, what it
     * was asked to write */
    struct nodesync_view nv;
    int nviews;
    uint64_t empty[8]; /* empty parts written, in order */
    int nempty;
    char posted[96]; /* the job's stop object's reason, "" none */
    int64_t posted_deadline;
    int fast;
    uint64_t has_step; /* a step the watch holds an entry of (0 none) */
    uint64_t noted;    /* the newest step told to the watch */
};
extern struct world W;

/* The supervisor sup_new() returns, and its options (a test may change
 * them before the first event). */
extern struct opts g_o;
extern struct sup g_s;

/* A fresh supervisor at T0/WALL0: a live child (pid 4242), a watched
 * CKPT_DIR, --grace 30s, SIGUSR1 lead 2m, --settle 5s, --keep 3. */
struct sup *sup_new(void);
/* cmocka teardown for a test that called sup_new(). */
int teardown(void **state);
/* Move both clocks to mono `t` (never back). */
void move_to(int64_t t);
/* The loop's timer: the clock goes to each due time on the way to `t` and
 * what is due is done (sup_on_time), until `t` or until the loop is over.
 * A due time that stays in the past would make the real loop spin: fails.
 * @return 1 when the loop is over. */
int run_until(struct sup *s, int64_t t);

/* Events, as data. */
void child_exits(struct sup *s, int wstatus);
/* A signal to the whole job (the keeper saw the group get it). */
void group_signal(struct sup *s, int sig);
/* A control message of the libckpt client (pid 4242) about `step`. */
void ctl_msg(struct sup *s, enum ctl_ev_type type, uint64_t step);
/* A libckpt trainer connects: requests reach it over the socket. */
void lib_connects(struct sup *s);
/* A watched entry that last changed at `changed` was committed (or not). */
void entry_result(struct sup *s, uint64_t step, int64_t changed, ckpt_status st);
/* An AWS preemption notice with that deadline (Unix ms); its answer is
 * W.acks, W.ack_ok, W.ack_step (on_ack: the answer of a notice a test
 * makes itself). */
void notice(struct sup *s, int64_t deadline_wall);
void on_ack(void *user, int committed, uint64_t step);
/* The exit code and state of the run as it ends. */
int outcome(struct sup *s, const char **state);

#endif
