/* Unit tests of the supervisor's stop state machine (ckptrun/sup/stop.h) and
 * of what its events mean (ckptrun/sup/sup_events.h), under a fake clock and a
 * fake world (fake_sup.h, over ckptrun/sup/sup_seam.h). Nothing sleeps, no
 * process is started, no socket or store is opened.
 *
 * The paths: a notice (its deadline, answered or not), SIGTERM to ckptrun
 * (a signal-aware trainer), SIGTERM to the whole job (clients that asked
 * themselves, `stopping` acknowledged or not), a deadline too short (the
 * faster codec by speed class, the final checkpoint given up in time), a
 * commit that failed (74), the child gone before the commit (entries
 * complete before the stop count: 75; a failed one: 74), a user's Ctrl-C
 * (130, no SIGKILL), a request that reaches nobody, SIGUSR1's lead time,
 * scancel under SLURM, a lost lease, a stop after the child ended; and the
 * other decision by time, the warning for a CKPT_DIR without checkpoints. */
#include <signal.h>
#include "fake_sup.h"
#include "watch/commit_files.h"
#include "sup/keeper.h"
#include "sup/notice_queue.h"
#include "base/runlog.h"
#include "sup/stop.h"
#include "sup/sup_events.h"
#include "watch/watch.h"
#include "sup/sup_report.h"

/* ---- a notice ------------------------------------------------------------------ */

/* AWS's two minutes: the stop's deadline is the notice's less the margin,
 * the last third of it (at most --grace) is the child's to exit; the save
 * that began after the request answers, not one already in flight. */
static void test_notice_answered(void **state)
{
    struct sup *s = sup_new();
    int64_t notice_at = WALL0 + 120000;
    const char *st;
    (void)state;

    lib_connects(s);
    ctl_msg(s, CTL_SAVING, 6); /* a save in flight before the notice */
    notice(s, notice_at);
    assert_int_equal(s->stop.phase, P_CKPT);
    assert_int_equal(s->stop.deadline, T0 + 120000 - STOP_MARGIN_MS);
    assert_int_equal(s->stop.ckpt_end, T0 + 115000 - 30000); /* a third is 38 s: --grace caps it */
    assert_int_equal(W.nreq, 1);
    assert_string_equal(W.req_reason, "stop");
    assert_int_equal(W.req_deadline, WALL0 + 85000);
    assert_string_equal(W.req_codec, ""); /* 85 s: the run's own codec */
    assert_false(W.codec_set);
    assert_int_equal(W.settle, STOP_SETTLE_MS); /* --settle 5s shortened */
    assert_int_equal(s->preemptions, 1);

    assert_false(run_until(s, T0 + 10000));
    ctl_msg(s, CTL_COMMITTED, 6); /* older state: not the answer */
    assert_int_equal(s->stop.phase, P_CKPT);
    assert_int_equal(W.nsent, 0);
    ctl_msg(s, CTL_SAVING, 7);
    assert_false(run_until(s, T0 + 14000));
    ctl_msg(s, CTL_COMMITTED, 7);
    assert_int_equal(s->stop.phase, P_TERM);
    assert_true(s->stop.final_ok);
    assert_int_equal(W.nsent, 1); /* no client to tell `stopping`: SIGTERM at once */
    assert_int_equal(W.sent[0].sig, SIGTERM);
    assert_int_equal(W.sent[0].at, T0 + 14000);
    assert_int_equal(W.acks, 1); /* the provider is answered with the result */
    assert_true(W.ack_ok);
    assert_int_equal(W.ack_step, 7);

    assert_false(run_until(s, T0 + 14500));
    child_exits(s, KILLED(SIGTERM));
    assert_int_equal(W.finished, 1); /* leftovers get --grace, as the deadline is far */
    assert_int_equal(W.finish_grace, 30000);
    assert_false(W.finish_kill);
    assert_true(run_until(s, T0 + 14500));
    assert_int_equal(W.kills, 0);
    assert_int_equal(outcome(s, &st), EXIT_STOPPED_OK);
    assert_string_equal(st, "preempted");
    assert_int_equal(s->last_step, 7);
}

/* A trainer that never answers: SIGTERM when the checkpoint's time is up,
 * SIGKILL at the deadline, both before the notice's deadline; exit 74. */
static void test_notice_unanswered_killed_in_time(void **state)
{
    struct sup *s = sup_new();
    int64_t notice_at = WALL0 + 120000;
    const char *st;
    (void)state;

    lib_connects(s);
    notice(s, notice_at);
    assert_false(run_until(s, T0 + 85000 - 1));
    assert_int_equal(W.nsent, 0);
    assert_false(run_until(s, T0 + 85000));
    assert_int_equal(W.nsent, 1);
    assert_int_equal(W.sent[0].sig, SIGTERM);
    assert_int_equal(W.sent[0].at, T0 + 85000);
    assert_int_equal(s->stop.phase, P_TERM);
    assert_int_equal(W.acks, 0); /* no result yet */
    assert_false(run_until(s, T0 + 115000 - 1));
    assert_int_equal(W.kills, 0);
    assert_false(run_until(s, T0 + 200000)); /* the child is still there */
    assert_int_equal(W.kills, 1);
    assert_int_equal(W.kill_at, T0 + 115000);
    assert_true(W.kill_wall <= notice_at - STOP_MARGIN_MS);
    assert_int_equal(s->stop.phase, P_KILL);
    child_exits(s, KILLED(SIGKILL));
    assert_true(W.finish_kill); /* what is left of the tree is killed too */
    assert_true(run_until(s, T0 + 200000));
    assert_int_equal(outcome(s, &st), EXIT_STOPPED_LOST);
    assert_string_equal(st, "preempted");
    assert_int_equal(W.acks, 1);
    assert_false(W.ack_ok);
    assert_non_null(strstr(s->rep.final_why, "asked (over the socket)"));
}

/* ---- SIGTERM ---------------------------------------------------------------------- */

/* SIGTERM to ckptrun, a trainer that saves on --signal: the request goes
 * as the signal; an entry last changed before the stop does not answer it,
 * one written after it does. */
static void test_sigterm_signal_aware(void **state)
{
    struct sup *s = sup_new();
    const char *st;
    (void)state;

    g_o.sig = SIGUSR1;
    W.handlers = 1;
    entry_result(s, 3, T0 - 5000, CKPT_OK); /* before the stop */
    move_to(T0 + 1000);
    sup_on_signal(s, SIGTERM);
    assert_int_equal(s->stop.phase, P_CKPT);
    assert_int_equal(s->stop.via, CH_SIGNAL);
    assert_int_equal(W.req_signals, 1);
    assert_int_equal(W.req_sig, SIGUSR1); /* the request */
    assert_int_equal(W.nsent, 0);
    assert_int_equal(s->stop.deadline, T0 + 1000 + 30000);
    assert_int_equal(s->stop.ckpt_end, T0 + 1000 + 20000);
    assert_int_equal(W.nreq, 0);

    assert_false(run_until(s, T0 + 2000));
    entry_result(s, 4, T0 + 900, CKPT_OK); /* was settling when the stop came */
    assert_int_equal(s->stop.phase, P_CKPT);
    assert_int_equal(W.nsent, 0);
    assert_false(run_until(s, T0 + 4000));
    entry_result(s, 5, T0 + 1300, CKPT_OK);
    assert_int_equal(s->stop.phase, P_TERM);
    assert_int_equal(W.nsent, 1);
    assert_int_equal(W.sent[0].sig, SIGTERM);
    assert_int_equal(W.sent[0].at, T0 + 4000);
    assert_int_equal(W.watch_stops, 1); /* the watcher's last look before the signal */
    child_exits(s, KILLED(SIGTERM));
    assert_true(run_until(s, T0 + 4000));
    assert_int_equal(outcome(s, &st), EXIT_STOPPED_OK);
    assert_string_equal(st, "preempted");
    assert_int_equal(s->last_step, 5);
}

/* kill -TERM of the whole job: the keeper reports the group's signal, and
 * a helper that took it as a stop reports it first, with the time it
 * arrived; an entry written after that time answers, although it was
 * written before ckptrun heard of it. The helper is told `stopping` and
 * SIGTERM goes once it acknowledges. */
static void test_whole_job_sigterm(void **state)
{
    struct sup *s = sup_new();
    struct ctl_event ev;
    const char *st;
    (void)state;

    W.helpers = 1;
    W.sig_files = 1;
    W.told = 1;
    memset(&ev, 0, sizeof ev);
    ev.type = CTL_SIGNAL;
    ev.client = 2;
    ev.kind = CTL_KIND_FILES;
    ev.pid = 4243;
    ev.signal = "SIGTERM";
    ev.mono_ms = T0 - 400; /* when the helper got it */
    sup_on_ctl(s, &ev);
    assert_int_equal(s->stop.phase, P_CKPT);
    assert_int_equal(s->stop.via, CH_FILES);
    assert_true(s->stop.job_signalled);
    assert_int_equal(s->stop.t_accept, T0 - 400);
    assert_int_equal(W.req_except, 2); /* the helper asked itself */
    group_signal(s, SIGTERM);          /* the keeper saw it too: the same stop */
    assert_int_equal(s->stop.t_accept, T0 - 400);
    assert_int_equal(s->preemptions, 1);

    move_to(T0 + 700);
    entry_result(s, 8, T0 - 200, CKPT_OK);
    assert_int_equal(s->stop.phase, P_TERM);
    assert_true(s->stop.final_ok);
    assert_int_equal(W.nsent, 0); /* `stopping` told: awaiting the ack */
    assert_int_equal(s->stop.term_due, T0 + 700 + STOPPING_ACK_MS);
    move_to(T0 + 900);
    W.unacked = 0;
    ctl_msg(s, CTL_STOPPING_ACK, 0);
    assert_int_equal(W.nsent, 1);
    assert_int_equal(W.sent[0].sig, SIGTERM);
    assert_int_equal(W.sent[0].at, T0 + 900);
    child_exits(s, EXITED(0)); /* it ended by itself after saving */
    assert_true(run_until(s, T0 + 900));
    assert_int_equal(outcome(s, &st), EXIT_STOPPED_OK);
    assert_string_equal(st, "preempted");
}

/* The same with a libckpt client that never acknowledges `stopping`: the
 * signal goes STOPPING_ACK_MS later all the same. */
static void test_whole_job_sigterm_unacknowledged(void **state)
{
    struct sup *s = sup_new();
    const char *st;
    (void)state;

    lib_connects(s);
    W.sig_lib = 1;
    W.reached = 0; /* it asked itself: nobody left to send the request to */
    W.told = 1;
    group_signal(s, SIGTERM);
    assert_int_equal(s->stop.via, CH_SOCKET);
    assert_int_equal(W.req_except, -2);
    ctl_msg(s, CTL_SAVING, 12);
    ctl_msg(s, CTL_COMMITTED, 12);
    assert_int_equal(s->stop.phase, P_TERM);
    assert_false(run_until(s, T0 + STOPPING_ACK_MS - 1));
    assert_int_equal(W.nsent, 0);
    assert_false(run_until(s, T0 + STOPPING_ACK_MS));
    assert_int_equal(W.nsent, 1);
    assert_int_equal(W.sent[0].at, T0 + STOPPING_ACK_MS);
    child_exits(s, KILLED(SIGTERM));
    assert_int_equal(W.finish_grace, 30000 - STOPPING_ACK_MS); /* what is left to the deadline */
    assert_true(run_until(s, T0 + 5000));
    assert_int_equal(outcome(s, &st), EXIT_STOPPED_OK);
}

/* ---- a deadline too short ------------------------------------------------------------ */

/* Ten seconds of notice: five after the margin, the checkpoint gets two
 * thirds (3.3 s) and a faster codec; nothing commits in time, so it is
 * given up at 3.3 s and the child killed at 5 s, before the notice's
 * deadline less the margin. */
static void test_deadline_too_short(void **state)
{
    struct sup *s = sup_new();
    int64_t notice_at = WALL0 + 10000;
    const char *st;
    (void)state;

    lib_connects(s);
    notice(s, notice_at);
    assert_int_equal(s->stop.deadline, T0 + 5000);
    assert_int_equal(s->stop.ckpt_end, T0 + 5000 - 5000 / 3);
    assert_string_equal(W.req_codec, "lz4");
    assert_true(W.codec_set);
    assert_int_equal(W.codec, CKPT_CODEC_LZ4);
    assert_int_equal(W.req_deadline, WALL0 + 5000 - 5000 / 3);
    assert_false(run_until(s, T0 + 3333));
    assert_int_equal(W.nsent, 0);
    assert_false(run_until(s, T0 + 3334));
    assert_int_equal(W.nsent, 1);
    assert_false(run_until(s, T0 + 60000));
    assert_int_equal(W.kills, 1);
    assert_int_equal(W.kill_at, T0 + 5000);
    assert_int_equal(W.kill_wall, notice_at - STOP_MARGIN_MS);
    child_exits(s, KILLED(SIGKILL));
    assert_true(run_until(s, T0 + 60000));
    assert_int_equal(outcome(s, &st), EXIT_STOPPED_LOST);
    assert_false(W.ack_ok);
}

/* The row of CKPT_CODEC_MAP named `name`, NULL for "". */
static const struct ckpt__codec_spec *spec_named(const char *name)
{
    const struct ckpt__codec_spec *c = NULL;

    for (size_t k = 0; *name && (c = ckpt__codec_at(k)) != NULL; k++)
        if (strcmp(c->name, name) == 0)
            return c;
    assert_true(*name == '\0'); /* a name the map has */
    return NULL;
}

/* The codec of a stop's save by its budget and the run's codec. */
static void test_stop_codec_by_speed_class(void **state)
{
    static const struct {
        int64_t notice_in_ms; /* from now */
        double last_commit_s; /* the last commit took */
        ckpt_codec own;
        const char *want; /* "" the run's own */
    } cases[] = {
        { 120000, 0, CKPT_CODEC_DEFAULT, "" },   /* 85 s */
        { 20000, 0, CKPT_CODEC_DEFAULT, "lz4" }, /* 10 s */
        { 20000, 0, CKPT_CODEC_ZSTD, "lz4" },
        { 9000, 0, CKPT_CODEC_DEFAULT, "none" },  /* 2.7 s: just copy */
        { 60000, 30, CKPT_CODEC_DEFAULT, "lz4" }, /* 36.7 s, but the last took 30 */
        { 60000, 20, CKPT_CODEC_DEFAULT, "" },    /* ... 20: in time */
        { 20000, 0, CKPT_CODEC_LZ4, "" },         /* already fast */
        { 9000, 0, CKPT_CODEC_LZ4, "" },
        { 9000, 0, CKPT_CODEC_NONE, "" },
        { 2000, 0, CKPT_CODEC_DEFAULT, "none" }, /* past: a second for SIGTERM */
    };
    (void)state;

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct sup *s = sup_new();
        const struct ckpt__codec_spec *want = spec_named(cases[i].want);
        g_o.codec = cases[i].own;
        lib_connects(s);
        s->last_commit_s = cases[i].last_commit_s;
        notice(s, WALL0 + cases[i].notice_in_ms);
        if (strcmp(W.req_codec, cases[i].want) != 0)
            fail_msg("case %zu: codec '%s', expected '%s'", i, W.req_codec, cases[i].want);
        assert_int_equal(W.codec_set, want != NULL);
        if (want)
            assert_int_equal(W.codec, want->id);
        teardown(NULL);
    }
    /* A deadline already past still gives the child a second. */
    assert_int_equal(g_s.stop.deadline, T0 + 1000);
}

/* ---- failures ------------------------------------------------------------------------ */

/* The final checkpoint's commit failed: the child is stopped at once, not
 * at the end of the checkpoint's time, and the run exits 74 saying why. */
static void test_commit_failed_exits_74(void **state)
{
    struct sup *s = sup_new();
    const char *st;
    (void)state;

    lib_connects(s);
    ctl_msg(s, CTL_SAVING, 4);
    ctl_msg(s, CTL_COMMITTED, 4);
    sup_on_signal(s, SIGTERM);
    ctl_msg(s, CTL_SAVING, 9);
    move_to(T0 + 2500);
    ctl_msg(s, CTL_FAILED, 9);
    assert_int_equal(s->stop.phase, P_TERM);
    assert_false(s->stop.final_ok);
    assert_int_equal(W.nsent, 1);
    assert_int_equal(W.sent[0].at, T0 + 2500);
    assert_int_equal(s->rep.failures, 1);
    child_exits(s, KILLED(SIGTERM));
    assert_true(run_until(s, T0 + 2500));
    assert_int_equal(outcome(s, &st), EXIT_STOPPED_LOST);
    assert_string_equal(st, "preempted");
    assert_int_equal(s->last_step, 4); /* the older one is still there */
    assert_non_null(strstr(s->rep.final_why, "a commit failed since the stop"));
}

/* A signal-aware trainer's final entry could not be committed: 74. */
static void test_entry_commit_failed_exits_74(void **state)
{
    struct sup *s = sup_new();
    const char *st;
    (void)state;

    g_o.sig = SIGUSR1;
    W.handlers = 1;
    entry_result(s, 3, T0 - 5000, CKPT_OK);
    sup_on_signal(s, SIGTERM);
    move_to(T0 + 3000);
    entry_result(s, 4, T0 + 1000, CKPT_E_IO);
    assert_int_equal(s->stop.phase, P_TERM);
    assert_true(s->stop.failed_since_stop);
    child_exits(s, KILLED(SIGTERM));
    assert_true(run_until(s, T0 + 3000));
    assert_int_equal(outcome(s, &st), EXIT_STOPPED_LOST);
    assert_int_equal(s->last_step, 3);
}

/* Nothing can reach the trainer (no --signal, no connection): the child is
 * stopped at once; it is gone before the commit of an entry it completed
 * before the stop, which the loop waits for: that entry counts, 75. */
static void test_child_gone_before_the_commit(void **state)
{
    struct sup *s = sup_new();
    const char *st;
    (void)state;

    entry_result(s, 3, T0 - 9000, CKPT_OK);
    W.busy = 1; /* checkpoint-4, complete before the stop, being committed */
    sup_on_signal(s, SIGTERM);
    assert_int_equal(s->stop.via, CH_NONE);
    assert_int_equal(s->stop.phase, P_TERM);
    assert_int_equal(W.nsent, 1);
    assert_int_equal(W.sent[0].at, T0);
    child_exits(s, KILLED(SIGTERM));
    assert_false(run_until(s, T0 + 4000)); /* waits for the commit */
    W.busy = 0;
    entry_result(s, 4, T0 - 1000, CKPT_OK);
    assert_true(run_until(s, T0 + 4000));
    assert_int_equal(outcome(s, &st), EXIT_STOPPED_OK);
    assert_string_equal(st, "preempted");
    assert_int_equal(s->last_step, 4);
}

/* ... and when that commit fails, or never ends before the deadline: 74. */
static void test_child_gone_commit_failed_or_late(void **state)
{
    struct sup *s = sup_new();
    const char *st;
    (void)state;

    entry_result(s, 3, T0 - 9000, CKPT_OK);
    W.busy = 1;
    sup_on_signal(s, SIGTERM);
    child_exits(s, KILLED(SIGTERM));
    W.busy = 0;
    entry_result(s, 4, T0 - 1000, CKPT_E_IO);
    assert_true(run_until(s, T0 + 4000));
    assert_int_equal(outcome(s, &st), EXIT_STOPPED_LOST);
    assert_non_null(strstr(s->rep.final_why, "a commit failed since the stop"));
    teardown(NULL);

    s = sup_new();
    entry_result(s, 3, T0 - 9000, CKPT_OK);
    W.busy = 1;
    sup_on_signal(s, SIGTERM);
    child_exits(s, KILLED(SIGTERM));
    assert_false(run_until(s, T0 + 30000 - 1));
    assert_true(run_until(s, T0 + 30000)); /* the deadline: abandoned */
    assert_int_equal(outcome(s, &st), EXIT_STOPPED_LOST);
    assert_non_null(strstr(s->rep.final_why, "still in flight at the deadline"));
}

/* A child that ends during the stop, before any answer, of the stop's own
 * signal: it died of SIGTERM, or the whole job got it and it exited by
 * itself. Either is the stop's consequence: state preempted, 74 (nothing
 * committed), not its own code and state failed. */
static void test_child_ends_of_the_stops_signal(void **state)
{
    struct sup *s = sup_new();
    const char *st;
    (void)state;

    g_o.sig = SIGUSR1;
    W.handlers = 1;
    sup_on_signal(s, SIGTERM);
    assert_int_equal(s->stop.via, CH_SIGNAL);
    move_to(T0 + 500);
    child_exits(s, KILLED(SIGTERM)); /* not ours: we sent only the request */
    assert_int_equal(W.nsent, 0);
    assert_int_equal(s->stop.phase, P_CKPT);
    assert_true(run_until(s, T0 + 500));
    assert_int_equal(outcome(s, &st), EXIT_STOPPED_LOST);
    assert_string_equal(st, "preempted");
    teardown(NULL);

    s = sup_new();
    W.helpers = 1;
    W.sig_files = 1;
    group_signal(s, SIGTERM);
    assert_int_equal(s->stop.via, CH_FILES);
    child_exits(s, EXITED(1));
    assert_true(run_until(s, T0));
    assert_int_equal(outcome(s, &st), EXIT_STOPPED_LOST);
    assert_string_equal(st, "preempted");
}

/* ---- the user's stop ------------------------------------------------------------------- */

/* Ctrl-C on ckptrun: forwarded to the job, the run is stopped by its user:
 * no preemption counted, no SIGTERM or SIGKILL from us however long the
 * child takes (the --interval timer still wakes the loop past the stop's
 * deadline), exit 130 whatever code it exits with. */
static void test_ctrl_c_is_the_users_stop(void **state)
{
    struct sup *s = sup_new();
    const char *st;
    (void)state;

    g_o.interval_ms = 60000;
    s->next_periodic = T0 + 60000;
    entry_result(s, 3, T0 - 9000, CKPT_OK);
    sup_on_signal(s, SIGINT);
    assert_int_equal(W.nsent, 1);
    assert_int_equal(W.sent[0].sig, SIGINT); /* forwarded */
    assert_true(s->stop.user);
    assert_int_equal(s->preemptions, 0);
    assert_false(run_until(s, T0 + 600000));
    assert_int_equal(W.nsent, 1);
    assert_int_equal(W.kills, 0);
    assert_int_equal(s->next_periodic, T0 + 660000); /* the timer did run */
    assert_int_equal(W.nreq, 0);                     /* but asked nothing */
    child_exits(s, EXITED(7));                       /* its KeyboardInterrupt handler */
    assert_true(run_until(s, T0 + 600000));
    assert_int_equal(outcome(s, &st), 128 + SIGINT);
    assert_string_equal(st, "stopped");
}

/* A plain SIGTERM under SLURM is scancel, the user's stop (143); after the
 * scheduler's warning signal it is the end of that warning instead. */
static void test_slurm_scancel_and_warning(void **state)
{
    struct sup *s = sup_new();
    const char *st;
    (void)state;

    setenv("SLURM_JOB_ID", "77", 1);
    sup_on_signal(s, SIGTERM);
    assert_true(s->stop.user);
    child_exits(s, KILLED(SIGTERM));
    assert_true(run_until(s, T0 + 1000));
    assert_int_equal(outcome(s, &st), 128 + SIGTERM);
    assert_string_equal(st, "stopped");
    teardown(NULL);

    s = sup_new();
    setenv("SLURM_JOB_ID", "77", 1);
    g_o.lead_ms = 90000;
    lib_connects(s);
    sup_on_signal(s, SIGUSR1); /* sbatch --signal=B:USR1@90 */
    assert_false(s->stop.user);
    assert_int_equal(s->stop.deadline, T0 + 90000); /* --lead, the margin given back */
    move_to(T0 + 1000);
    sup_on_signal(s, SIGTERM); /* the end of the time limit */
    assert_false(s->stop.user);
    assert_int_equal(s->stop.deadline, T0 + 1000 + 30000); /* nearer: shortened */
    ctl_msg(s, CTL_SAVING, 2);
    ctl_msg(s, CTL_COMMITTED, 2);
    child_exits(s, KILLED(SIGTERM));
    assert_true(run_until(s, T0 + 2000));
    assert_int_equal(outcome(s, &st), EXIT_STOPPED_OK);
    assert_string_equal(st, "preempted");
}

/* ---- requests that reach nobody ---------------------------------------------------------- */

/* No --signal and no connection: a periodic request reaches nobody (said
 * once), the stop's too; the final checkpoint is the newest complete entry
 * and the child is stopped at once. With --signal but no process handling
 * it, the signal is not sent (it would kill the child). */
static void test_request_reaches_nobody(void **state)
{
    struct sup *s = sup_new();
    const char *st;
    (void)state;

    g_o.interval_ms = 60000;
    s->next_periodic = T0 + 60000;
    assert_false(run_until(s, T0 + 130000));
    assert_int_equal(s->rep.unreachable, 2);
    assert_string_equal(s->rep.unreachable_reason, "periodic");
    assert_int_equal(W.nsent, 0);
    sup_on_signal(s, SIGTERM);
    assert_int_equal(s->rep.unreachable, 3);
    assert_int_equal(s->stop.via, CH_NONE);
    assert_int_equal(W.nsent, 1);
    assert_int_equal(W.sent[0].sig, SIGTERM);
    child_exits(s, KILLED(SIGTERM));
    assert_true(run_until(s, T0 + 131000));
    assert_int_equal(outcome(s, &st), EXIT_STOPPED_LOST); /* nothing was ever complete */
    assert_non_null(strstr(s->rep.final_why, "no request could reach the trainer"));
    teardown(NULL);

    s = sup_new();
    g_o.sig = SIGUSR1; /* W.handlers 0: nobody handles it (yet) */
    entry_result(s, 3, T0 - 9000, CKPT_OK);
    sup_on_signal(s, SIGTERM);
    assert_int_equal(s->stop.via, CH_NONE);
    assert_int_equal(s->rep.unreachable, 0); /* said as "does not handle", not this */
    assert_int_equal(W.req_signals, 0);
    assert_int_equal(W.nsent, 1);
    assert_int_equal(W.sent[0].sig, SIGTERM); /* never SIGUSR1 */
    child_exits(s, KILLED(SIGTERM));
    assert_true(run_until(s, T0 + 1000));
    assert_int_equal(outcome(s, &st), EXIT_STOPPED_OK); /* step 3 counts */
}

/* The channel of the run's other requests: --signal to the processes
 * that handle it until a libckpt client connects, then the socket only --
 * and no signal after it disconnected (it closed its context; the signal
 * could kill it). SIGUSR2 and a rebalance notice ask too, and the run goes
 * on; the rebalance notice is answered at once. */
static void test_request_channels(void **state)
{
    struct sup *s = sup_new();
    struct queued_notice *n;
    (void)state;

    g_o.sig = SIGUSR1;
    g_o.interval_ms = 60000;
    s->next_periodic = T0 + 60000;
    W.handlers = 1;
    assert_false(run_until(s, T0 + 60000));
    assert_int_equal(W.req_signals, 1);
    assert_int_equal(W.req_sig, SIGUSR1);
    assert_int_equal(W.nreq, 0);
    lib_connects(s);
    assert_false(run_until(s, T0 + 120000));
    assert_int_equal(W.req_signals, 1);
    assert_int_equal(W.nreq, 1);
    assert_string_equal(W.req_reason, "periodic");
    assert_int_equal(W.req_kinds, CTL_KIND_LIB | CTL_KIND_FILES);
    W.lib = 0;
    W.reached = 0;
    ctl_msg(s, CTL_GONE, 0);
    assert_false(run_until(s, T0 + 180000));
    assert_int_equal(W.req_signals, 1); /* not after a libckpt client went away */
    assert_int_equal(W.nreq, 1);
    assert_int_equal(s->rep.unreachable, 0); /* --signal was given: not "no way" */

    lib_connects(s); /* another process of the job */
    sup_on_signal(s, SIGUSR2);
    assert_int_equal(s->stop.phase, P_RUN);
    assert_int_equal(W.nreq, 2);
    assert_string_equal(W.req_reason, "manual");
    n = calloc(1, sizeof *n);
    assert_non_null(n);
    n->kind = CKPTRUN_NOTICE_REBALANCE;
    n->ack = on_ack;
    snprintf(n->provider, sizeof n->provider, "aws");
    sup_on_notice(s, n);
    assert_int_equal(s->stop.phase, P_RUN);
    assert_int_equal(W.nreq, 3);
    assert_string_equal(W.req_reason, "rebalance");
    assert_int_equal(W.acks, 1);
    assert_false(W.ack_ok);
    assert_int_equal(s->preemptions, 0);
}

/* ---- the rest of the machine ---------------------------------------------------------------- */

/* The lease is lost: nothing more is committed, the child is stopped now
 * and gets --grace; exit 74, state lost, whatever the child does. */
static void test_lease_lost(void **state)
{
    struct sup *s = sup_new();
    const char *st;
    (void)state;

    lib_connects(s);
    stop_lease_lost(s, "another runner took epoch 2");
    assert_true(W.paused);
    assert_int_equal(W.nsent, 1);
    assert_int_equal(s->stop.deadline, T0 + 30000);
    assert_false(run_until(s, T0 + 30000));
    assert_int_equal(W.kills, 1);
    child_exits(s, EXITED(0));
    assert_true(run_until(s, T0 + 30000));
    assert_int_equal(outcome(s, &st), EXIT_STOPPED_LOST);
    assert_string_equal(st, "lost");
}

/* A stop after the child ended by itself only finishes the commits, until
 * the deadline; the outcome stays the child's. */
static void test_stop_after_the_child_ended(void **state)
{
    struct sup *s = sup_new();
    const char *st;
    (void)state;

    W.busy = 1;
    child_exits(s, EXITED(0));
    assert_false(sup_loop_done(s));
    move_to(T0 + 500);
    sup_on_signal(s, SIGTERM);
    assert_int_equal(s->stop.phase, P_RUN);
    assert_int_equal(s->stop.drain_deadline, T0 + 500 + 30000);
    assert_int_equal(s->preemptions, 0);
    assert_false(run_until(s, T0 + 30499));
    assert_true(run_until(s, T0 + 30500));
    assert_int_equal(W.nsent, 0);
    assert_int_equal(outcome(s, &st), 0);
    assert_string_equal(st, "completed");
}

/* ---- CKPT_DIR without a checkpoint (sup_report.h) ------------------------------------- */

/* The idle warning: once, at the threshold after the newest sign of a
 * checkpoint (the start, a commit); a commit in flight or an entry waiting
 * for one defers it; twice --interval when that is longer; never during a
 * stop. */
static void test_idle_warning(void **state)
{
    struct sup *s = sup_new();
    int64_t limit = NO_CKPT_WARN_MS;
    (void)state;

    assert_int_equal(sup_next_due(s), T0 + limit);
    assert_false(run_until(s, T0 + 600000));
    entry_result(s, 3, T0 + 590000, CKPT_OK); /* activity: the clock starts again */
    assert_false(run_until(s, T0 + 600000 + limit - 1));
    assert_false(s->rep.no_ckpt_told);
    W.busy = 1; /* something complete is being committed: not idle */
    assert_false(run_until(s, T0 + 600000 + limit));
    assert_false(s->rep.no_ckpt_told);
    assert_int_equal(sup_next_due(s), T0 + 600000 + 2 * limit);
    W.busy = 0;
    W.uncommitted = 1; /* ... or waits for a commit */
    assert_false(run_until(s, T0 + 600000 + 2 * limit));
    assert_false(s->rep.no_ckpt_told);
    W.uncommitted = 0;
    assert_false(run_until(s, T0 + 600000 + 3 * limit));
    assert_true(s->rep.no_ckpt_told);
    assert_int_equal(sup_next_due(s), -1); /* said once */
    teardown(NULL);

    s = sup_new();
    g_o.interval_ms = 20 * 60 * 1000; /* requests unanswered twice: 40 min */
    assert_int_equal(sup_report_init(s), 0);
    sup_report_started(s);
    assert_false(run_until(s, T0 + 40 * 60 * 1000 - 1));
    assert_false(s->rep.no_ckpt_told);
    assert_false(run_until(s, T0 + 40 * 60 * 1000));
    assert_true(s->rep.no_ckpt_told);
    teardown(NULL);

    s = sup_new();
    s->rep.no_ckpt_ms = 10000; /* CKPT_WARN_NO_CHECKPOINT=10s */
    lib_connects(s);
    sup_on_signal(s, SIGTERM);
    assert_int_equal(sup_next_due(s), T0 + 20000); /* the end of the checkpoint's time */
    assert_false(run_until(s, T0 + 29999));
    assert_int_equal(sup_next_due(s), T0 + 30000); /* the stop's, not the warning's */
    assert_false(s->rep.no_ckpt_told);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_notice_answered, teardown),
        cmocka_unit_test_teardown(test_notice_unanswered_killed_in_time, teardown),
        cmocka_unit_test_teardown(test_sigterm_signal_aware, teardown),
        cmocka_unit_test_teardown(test_whole_job_sigterm, teardown),
        cmocka_unit_test_teardown(test_whole_job_sigterm_unacknowledged, teardown),
        cmocka_unit_test_teardown(test_deadline_too_short, teardown),
        cmocka_unit_test_teardown(test_stop_codec_by_speed_class, teardown),
        cmocka_unit_test_teardown(test_commit_failed_exits_74, teardown),
        cmocka_unit_test_teardown(test_entry_commit_failed_exits_74, teardown),
        cmocka_unit_test_teardown(test_child_gone_before_the_commit, teardown),
        cmocka_unit_test_teardown(test_child_gone_commit_failed_or_late, teardown),
        cmocka_unit_test_teardown(test_child_ends_of_the_stops_signal, teardown),
        cmocka_unit_test_teardown(test_ctrl_c_is_the_users_stop, teardown),
        cmocka_unit_test_teardown(test_slurm_scancel_and_warning, teardown),
        cmocka_unit_test_teardown(test_request_reaches_nobody, teardown),
        cmocka_unit_test_teardown(test_request_channels, teardown),
        cmocka_unit_test_teardown(test_lease_lost, teardown),
        cmocka_unit_test_teardown(test_stop_after_the_child_ended, teardown),
        cmocka_unit_test_teardown(test_idle_warning, teardown),
    };
    unsetenv("SLURM_JOB_ID");
    unsetenv("CKPT_WARN_NO_CHECKPOINT");
    log_setup(0, -1); /* warnings and errors only */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
