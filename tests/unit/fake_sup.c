/* fake_sup.c -- a supervisor in a fake world, for the unit tests of its
 * decisions (fake_sup.h). */
#include <signal.h>
#include "fake_sup.h"
#include "watch/commit_files.h"
#include "sup/ctlserver.h"
#include "sup/keeper.h"
#include "sup/notice_queue.h"
#include "base/runlog.h"
#include "sup/stop.h"
#include "sup/sup_events.h"
#include "watch/watch.h"
#include "sup/sup_report.h"

/* ---- the fake world ---------------------------------------------------------- */

struct world W;

static int64_t fake_mono(void *u)
{
    (void)u;
    return W.mono;
}

static int64_t fake_wall(void *u)
{
    (void)u;
    return W.wall;
}

static void fake_signal_group(struct child *c, int sig)
{
    (void)c;
    assert_true(W.nsent < 16);
    W.sent[W.nsent].sig = sig;
    W.sent[W.nsent++].at = W.mono;
}

static void fake_kill_all(struct child *c)
{
    (void)c;
    W.kills++;
    W.kill_at = W.mono;
    W.kill_wall = W.wall;
}

static int fake_signal_handlers(struct child *c, int sig, char *pids, size_t n)
{
    (void)c;
    snprintf(pids, n, "%s", W.handlers ? "4243" : "");
    if (W.handlers) {
        W.req_signals++;
        W.req_sig = sig;
    }
    return W.handlers;
}

static void fake_finish_tree(struct child *c, int64_t grace_ms, int kill)
{
    (void)c;
    W.finished++;
    W.finish_grace = grace_ms;
    W.finish_kill = kill;
}

static int fake_connected(const struct ctl *c)
{
    (void)c;
    return W.lib;
}

static int fake_helpers(const struct ctl *c)
{
    (void)c;
    return W.helpers;
}

static int fake_signal_clients(const struct ctl *c, int kinds)
{
    (void)c;
    return ((kinds & CTL_KIND_LIB) ? W.sig_lib : 0) + ((kinds & CTL_KIND_FILES) ? W.sig_files : 0);
}

static int fake_unacked(const struct ctl *c)
{
    (void)c;
    return W.unacked;
}

static int fake_request(struct ctl *c, const char *reason, int64_t deadline_ms, const char *codec,
                        uint64_t id, int kinds, int except)
{
    (void)c;
    (void)id;
    W.nreq++;
    snprintf(W.req_reason, sizeof W.req_reason, "%s", reason);
    snprintf(W.req_codec, sizeof W.req_codec, "%s", codec ? codec : "");
    W.req_deadline = deadline_ms;
    W.req_kinds = kinds;
    W.req_except = except;
    return W.reached;
}

static int fake_stopping(struct ctl *c, const char *reason, const char *signal)
{
    (void)c;
    (void)reason;
    (void)signal;
    W.unacked = W.told;
    return W.told;
}

static void fake_watch_stopping(struct watch *w)
{
    (void)w;
    W.watch_stops++;
}

static void fake_watch_pause(struct watch *w)
{
    (void)w;
    W.paused = 1;
}

static void fake_set_settle(struct watch *w, uint64_t ms)
{
    (void)w;
    W.settle = ms;
}

static void fake_next_codec(struct watch *w, ckpt_codec codec)
{
    (void)w;
    W.codec_set = 1;
    W.codec = codec;
}

static int fake_busy(struct watch *w)
{
    (void)w;
    return W.busy;
}

static void fake_child_exit(struct watch *w, int code)
{
    (void)w;
    (void)code;
}

static void fake_note_step(struct watch *w, uint64_t step)
{
    (void)w;
    W.noted = step;
}

static int fake_has_step(const struct watch *w, uint64_t step)
{
    (void)w;
    return W.has_step && W.has_step == step;
}

static int fake_uncommitted(struct watch *w, int retry,
                            void (*fn)(void *, const char *, uint64_t, const struct commit_print *),
                            void *user)
{
    (void)w;
    (void)retry;
    (void)fn;
    (void)user;
    return W.uncommitted;
}

static void fake_nodes_view(struct nodesync *ns, struct nodesync_view *v)
{
    (void)ns;
    W.nviews++;
    *v = W.nv;
}

static void fake_post_stop(struct nodesync *ns, const char *reason, int64_t deadline_ms, int user)
{
    (void)ns;
    (void)user;
    snprintf(W.posted, sizeof W.posted, "%s", reason);
    W.posted_deadline = deadline_ms;
}

static void fake_write_empty(struct nodesync *ns, uint64_t step)
{
    (void)ns;
    assert_true(W.nempty < 8);
    W.empty[W.nempty++] = step;
}

static void fake_nodes_fast(struct nodesync *ns, int on)
{
    (void)ns;
    W.fast = on;
}

static const struct sup_seam fake_seam = {
    .clock = { fake_mono, fake_wall, NULL },
    .signal_group = fake_signal_group,
    .kill_all = fake_kill_all,
    .signal_handlers = fake_signal_handlers,
    .finish_tree = fake_finish_tree,
    .ctl_connected = fake_connected,
    .ctl_helpers = fake_helpers,
    .ctl_signal_clients = fake_signal_clients,
    .ctl_unacked = fake_unacked,
    .ctl_request = fake_request,
    .ctl_stopping = fake_stopping,
    .watch_stopping = fake_watch_stopping,
    .watch_pause = fake_watch_pause,
    .watch_set_settle = fake_set_settle,
    .watch_next_codec = fake_next_codec,
    .watch_busy = fake_busy,
    .watch_child_exit = fake_child_exit,
    .watch_note_step = fake_note_step,
    .watch_uncommitted = fake_uncommitted,
    .watch_has_step = fake_has_step,
    .nodes_view = fake_nodes_view,
    .nodes_post_stop = fake_post_stop,
    .nodes_write_empty = fake_write_empty,
    .nodes_fast = fake_nodes_fast,
};

/* ---- a supervisor in that world ---------------------------------------------- */

struct opts g_o;
struct sup g_s;
/* Stands in for the watcher: never dereferenced, since every watcher call
 * of the code under test goes through the seam. */
static int64_t g_watch_stand_in;

struct sup *sup_new(void)
{
    struct sup *s = &g_s;

    memset(&W, 0, sizeof W);
    W.mono = T0;
    W.wall = WALL0;
    memset(&g_o, 0, sizeof g_o);
    g_o.run = "job";
    g_o.store = "file:///nowhere";
    g_o.dir = "/nowhere";
    g_o.grace_ms = 30000;
    g_o.lead_ms = 120000;
    g_o.settle_ms = 5000;
    g_o.keep = 3;
    memset(s, 0, sizeof *s);
    s->o = &g_o;
    s->recover = 0;
    s->seam = &fake_seam;
    child_init(&s->ch);
    s->ch.alive = 1;
    s->ch.pid = s->ch.pgid = 4242;
    stop_init(&s->stop);
    s->last_step = -1;
    s->last_changed = -1;
    s->watch_due = -1;
    s->part_step = -1;
    s->w = (struct watch *)&g_watch_stand_in;
    snprintf(s->dir, sizeof s->dir, "/nowhere/ck");
    assert_int_equal(sup_report_init(s), 0);
    sup_report_started(s);
    return s;
}

int teardown(void **state)
{
    (void)state;
    unsetenv("SLURM_JOB_ID");
    stop_finish_acks(&g_s); /* release() does it at the end of a run */
    sup_report_free(&g_s);
    return 0;
}

void move_to(int64_t t)
{
    assert_true(t >= W.mono);
    W.wall += t - W.mono;
    W.mono = t;
}

int run_until(struct sup *s, int64_t t)
{
    int spins = 0;

    while (!sup_loop_done(s)) {
        int64_t due = sup_next_due(s);
        if (due < 0 || due > t) {
            move_to(t);
            return sup_loop_done(s);
        }
        if (due > W.mono) {
            move_to(due);
            spins = 0;
        } else {
            assert_true(++spins < 3);
        }
        sup_on_time(s, W.mono);
    }
    return 1;
}

/* ---- events, as data ----------------------------------------------------------- */

void child_exits(struct sup *s, int wstatus)
{
    struct keeper_msg m = { KR_EXIT, s->ch.pid, wstatus };
    sup_on_keeper_msg(s, &m);
}

void group_signal(struct sup *s, int sig)
{
    struct keeper_msg m = { KR_SIGNAL, 1, sig };
    sup_on_keeper_msg(s, &m);
}

void ctl_msg(struct sup *s, enum ctl_ev_type type, uint64_t step)
{
    struct ctl_event ev;

    memset(&ev, 0, sizeof ev);
    ev.type = type;
    ev.kind = CTL_KIND_LIB;
    ev.pid = 4242;
    ev.step = step;
    ev.bytes = ev.stored = 1000;
    ev.seconds = 0.5;
    ev.error = "I/O error";
    ev.detail = "no space left on device";
    sup_on_ctl(s, &ev);
}

/* A libckpt trainer connects: requests reach it over the socket. */
void lib_connects(struct sup *s)
{
    W.lib = 1;
    W.reached = 1;
    ctl_msg(s, CTL_HELLO, 0);
}

/* A watched entry that last changed at `changed` was committed (or not). */
void entry_result(struct sup *s, uint64_t step, int64_t changed, ckpt_status st)
{
    struct watch_result r;

    memset(&r, 0, sizeof r);
    snprintf(r.entry, sizeof r.entry, "checkpoint-%llu", (unsigned long long)step);
    r.completed_mono = changed;
    r.changed_mono = changed;
    r.res.st = st;
    r.res.step = step;
    r.res.seconds = 0.5;
    if (st != CKPT_OK)
        snprintf(r.res.detail, sizeof r.res.detail, "no space left on device");
    r.step_from = "name";
    sup_on_result(s, &r);
}

void on_ack(void *user, int committed, uint64_t step)
{
    (void)user;
    W.acks++;
    W.ack_ok = committed;
    W.ack_step = step;
}

void notice(struct sup *s, int64_t deadline_wall)
{
    struct queued_notice *n = calloc(1, sizeof *n);

    assert_non_null(n);
    n->kind = CKPTRUN_NOTICE_PREEMPT;
    n->deadline_ms = deadline_wall;
    snprintf(n->provider, sizeof n->provider, "aws");
    n->ack = on_ack;
    sup_on_notice(s, n);
}

int outcome(struct sup *s, const char **state)
{
    int rc = stop_outcome(s, state);
    sup_report_outcome(s, &rc, state);
    return rc;
}
