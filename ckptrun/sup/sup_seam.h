/*
 * sup_seam.h -- where the supervisor's decisions meet the world: the clocks
 * they read and what they do to the job's processes, the control socket's
 * clients, the directory watch and the other nodes of a job. The stop
 * state machine (stop.c), the event handlers (sup_events.c), checkpoint
 * requests (request.c), the report (sup_report.c) and a node's part of a
 * job (sup_nodes.c) reach these through `s->seam` (sup.h), never
 * directly, and the loop (supervise.c) reads its time there too (it sets
 * up, polls and closes the real modules itself), so that a test replaces
 * them: a clock
 * that moves only when told, a job that records the signals it was sent, a
 * socket with the clients the test says (tests/unit/test_stop.c). What an
 * event means (a signal, a keeper report, a control message, a commit
 * result, a notice, the time) is decided by functions that take the event
 * as data (sup_events.h); only reading the descriptors stays outside.
 *
 * sup_seam_system is the real one: each member is the function of child.h,
 * ctlserver.h or watch.h of the same name, or nodesync.h's for nodes_*
 * (so what ckptrun does is what it did before the seam), and the clocks
 * are ckpt__mono_ms/ckpt__now_ms.
 *
 * The same rule as lease.h's `struct lease_clock` (STYLE.md 16): code that
 * decides by time reads the time here. Both clocks come from the same seam
 * because the stop converts between them (a notice's deadline is Unix ms,
 * the stop's due times are monotonic).
 *
 * Supervisor's thread only, like everything in sup.h.
 */
#ifndef CKPTRUN_SUP_SEAM_H
#define CKPTRUN_SUP_SEAM_H

#include <stddef.h>
#include <stdint.h>
#include "ckpt.h"

struct child;
struct commit_print;
struct ctl;
struct nodesync;
struct nodesync_view;
struct watch;

/* The supervisor's time. mono_ms: monotonic ms (deadlines, ages, the
 * timerfd's clock when real); now_ms: Unix ms (notices' deadlines, the
 * record). */
struct sup_clock {
    int64_t (*mono_ms)(void *user);
    int64_t (*now_ms)(void *user);
    void *user;
};

struct sup_seam {
    struct sup_clock clock;

    /* The job's processes (child.h). */
    void (*signal_group)(struct child *c, int sig);
    void (*kill_all)(struct child *c);
    int (*signal_handlers)(struct child *c, int sig, char *pids_txt, size_t n);
    void (*finish_tree)(struct child *c, int64_t grace_ms, int kill);

    /* The control socket's clients (ctlserver.h). */
    int (*ctl_connected)(const struct ctl *c);
    int (*ctl_helpers)(const struct ctl *c);
    int (*ctl_signal_clients)(const struct ctl *c, int kinds);
    int (*ctl_unacked)(const struct ctl *c);
    int (*ctl_request)(struct ctl *c, const char *reason, int64_t deadline_ms, const char *codec,
                       uint64_t id, int kinds, int except);
    int (*ctl_stopping)(struct ctl *c, const char *reason, const char *signal);

    /* The directory watch (watch.h). */
    void (*watch_stopping)(struct watch *w);
    void (*watch_pause)(struct watch *w);
    void (*watch_set_settle)(struct watch *w, uint64_t settle_ms);
    void (*watch_next_codec)(struct watch *w, ckpt_codec codec);
    int (*watch_busy)(struct watch *w);
    int (*watch_has_step)(const struct watch *w, uint64_t step);
    void (*watch_child_exit)(struct watch *w, int code);
    void (*watch_note_step)(struct watch *w, uint64_t step);
    int (*watch_uncommitted)(struct watch *w, int retry,
                             void (*fn)(void *user, const char *name, uint64_t step,
                                        const struct commit_print *print),
                             void *user);

    /* The other nodes of a job, through the store (nodesync.h). */
    void (*nodes_view)(struct nodesync *ns, struct nodesync_view *v);
    void (*nodes_post_stop)(struct nodesync *ns, const char *reason, int64_t deadline_ms, int user);
    void (*nodes_write_empty)(struct nodesync *ns, uint64_t step);
    void (*nodes_fast)(struct nodesync *ns, int on);
};

extern const struct sup_seam sup_seam_system;

#endif
