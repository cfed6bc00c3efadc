/*
 * supervise.c -- `ckptrun [run] -- COMMAND` (supervise.h): the set-up, the
 * event loop and the outcome. What the events mean is sup_events.c's; the
 * stop is stop.c's.
 *
 * Lease (docs/recover.md): before anything else the supervisor takes the
 * run's lease, fences HEAD at the new epoch (claim.h), and hands the epoch
 * to the child (CKPT_EPOCH) and to its own commit context. A thread renews
 * the lease (renewer.h); when renewal is refused (another runner took the
 * run) or cannot succeed before expiry, the loop stops committing, stops
 * the child and exits 74. A normal end releases the lease.
 */
#include "ckptrun.h"
#include "sup/ctlserver.h"
#include "base/fsutil.h"
#include "sup/hooks.h"
#include "record/lease.h"
#include "base/runlog.h"
#include "sup/notice_glue.h"
#include "sup/notice_queue.h"
#include "sup/prestart.h"
#include "record/record.h"
#include "ckpt_store.h"
#include "sup/sup.h"
#include "sup/sup_log.h"
#include "sup/sup_events.h"
#include "sup/sup_leftover.h"
#include "sup/sup_nodes.h"
#include "base/tty_progress.h"
#include "watch/watch.h"
#include "sup/sup_report.h"
#include "sup/stop.h"
#include "sup/supervise.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#define MAX_PFDS (8 + CTL_MAX_CLIENTS + 1)

int cmd_run(struct opts *o)
{
    return supervise(o, SUP_RUN);
}

/* Block the signals we handle before anything can send them; they are read
 * from the signalfd. The child unblocks everything before exec. @return 0
 * or an exit code (logged). */
static int setup_signals(struct sup *s)
{
    static const int handled[] = { SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT,
                                   SIGUSR1, SIGUSR2, SIGXCPU };

    sigemptyset(&s->mask);
    for (size_t i = 0; i < sizeof handled / sizeof handled[0]; i++)
        sigaddset(&s->mask, handled[i]);
    if (sigprocmask(SIG_BLOCK, &s->mask, NULL) != 0 ||
        (s->sfd = signalfd(-1, &s->mask, SFD_NONBLOCK | SFD_CLOEXEC)) < 0 ||
        (s->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)) < 0 ||
        notice_queue_open() != 0) {
        log_error("cannot set up signals/timers: %s", strerror(errno));
        return EXIT_CONFIG;
    }
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTTOU, SIG_IGN); /* tcsetpgrp from the background */
    if (getpid() != 1)
        prctl(PR_SET_CHILD_SUBREAPER, 1); /* orphans of the job come to us */
    return 0;
}

/* The record, and the run claimed (claim.h). recover with nothing to do
 * costs a GET of RUN and one of LEASE, and touches nothing (not even
 * CKPT_DIR): it runs every minute. @return 1 when the caller must exit
 * with *rc. */
static int claim_run(struct sup *s, int *rc)
{
    char err[CKPT_ERR_MAX] = "";
    ckpt_status st;
    int recover = s->recover;

    st = record_open(s->o->store, s->o->run, &s->rec, err);
    if (st != CKPT_OK) {
        log_error("cannot open store %s: %s%s%s", s->o->store, ckpt_strerror(st),
                  err[0] ? ": " : "", err);
        *rc = exit_code_for_status(st);
        return 1;
    }
    if (recover && claim_nothing_to_do(s->rec, s->o, rc))
        return 1;
    if (s->nid.nnodes > 1 ? sup_nodes_claim(s, rc) : claim_lease(s->rec, s->o, recover, &s->cl, rc))
        return 1;
    /* The run may have completed between our look and the lease. */
    if (recover && claim_nothing_to_do(s->rec, s->o, rc))
        return 1;
    record_set_epoch(s->rec, s->cl.epoch);
    return 0;
}

/* CKPT_DIR made (owner-only) and resolved. @return 0 or an exit code. */
static int open_dir(struct sup *s)
{
    const char *dir = s->o->dir;

    if (mkdir_owner(dir) != 0 || access(dir, W_OK | X_OK) != 0) {
        log_error("checkpoint directory %s is not usable: %s", dir, strerror(errno));
        return EXIT_CONFIG;
    }
    if (!realpath(dir, s->dir)) {
        log_error("checkpoint directory %s: %s", dir, strerror(errno));
        return EXIT_CONFIG;
    }
    return 0;
}

/* From the claimed run to what the child needs: our commit context at the
 * lease's epoch, HEAD fenced, the renewer, the restore before start, the
 * record writer, the watcher, the control socket and the notices.
 * @return 0 or an exit code (logged). */
static int prepare(struct sup *s, int *notices)
{
    struct ckpt_config cfg;
    struct ckpt_ctx *ctx = NULL;
    struct prestart ps;
    cJSON *prev = NULL, *f;
    ckpt_status st;
    int rc = 0;

    opts_to_config(s->o, &cfg);
    cfg.epoch = s->cl.epoch; /* our own commits carry the epoch too */
    sup_nodes_config(s, &cfg); /* several nodes: this node's part */
    st = ckpt_open(&cfg, &ctx);
    if (st != CKPT_OK) {
        log_error("cannot open store %s (run %s): %s", s->o->store, s->o->run, ckpt_strerror(st));
        rc = exit_code_for_status(st);
        goto out;
    }
    /* Node 0 holds the lease of a job of several nodes; the others joined it. */
    if (s->cl.lease && claim_fence(ctx, s->o->run, s->cl.epoch, &rc))
        goto out;
    /* Renew from now on: a restore or a long start must not let it lapse. */
    if (s->cl.lease && renewer_start(&s->rn, s->cl.lease, notice_queue_wake) != 0) {
        log_error("cannot start the lease renewal thread");
        rc = EXIT_CONFIG;
        goto out;
    }
    if (record_read_run(s->rec, &prev) == CKPT_OK) {
        s->preemptions =
            (uint64_t)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(prev, "preemptions"));
        sup_report_carry(s, prev);
    }
    if (s->nid.nnodes > 1) {
        if ((rc = sup_nodes_prestart(s, ctx)) != 0)
            goto out;
    } else if ((rc = sup_commit_leftover(s, ctx, prev, &s->restored_step, &s->resumed)) != 0) {
        goto out;
    } else if (s->resumed) {
        /* What the last session left is committed, and in CKPT_DIR as it
         * was: the trainer resumes from it, no restore needed. */
        log_msg(LOG_INFO, "restore", "step %" PRIu64 " is in %s already", s->restored_step, s->dir);
    } else {
        s->pg = progress_start(ctx, "restore"); /* on a terminal */
        rc = prestart_restore(ctx, s->rec, s->o->run, s->o->store, s->dir, &ps);
        progress_stop(s->pg);
        s->pg = NULL;
        if (rc != 0)
            goto out;
        s->last_step = ps.last_step;
        s->resumed = ps.resumed;
        s->restored_step = ps.restored_step;
        s->trainer_restores = ps.trainer_restores;
        s->trainer_step = ps.trainer_step;
    }
    if (record_start_writer(s->rec) != 0) {
        log_error("cannot start the record writer thread");
        rc = EXIT_CONFIG;
        goto out;
    }
    if ((f = sup_fields())) {
        cJSON_AddStringToObject(f, "action", s->cl.lease ? "acquired" : "joined");
        if (s->cl.lease)
            cJSON_AddStringToObject(f, "holder", lease_holder(s->cl.lease));
        if (s->nid.nnodes > 1) {
            cJSON_AddStringToObject(f, "job", s->nid.job);
            cJSON_AddNumberToObject(f, "node", s->nid.rank);
            cJSON_AddNumberToObject(f, "nnodes", s->nid.nnodes);
        }
        cJSON_AddNumberToObject(f, "epoch", (double)s->cl.epoch);
        if (s->cl.lease)
            cJSON_AddNumberToObject(f, "ttl_ms", (double)lease_ttl_ms(s->cl.lease));
        if (s->cl.stale_holder[0])
            cJSON_AddStringToObject(f, "stale_holder", s->cl.stale_holder);
    }
    sup_event(s, LOG_INFO, "lease", f, 1);
    s->lease_told = 1;
    if (watch_open(&s->w, s->dir, s->o->marker, s->o->settle_ms, ctx, s->rec) != 0) {
        rc = EXIT_CONFIG;
        goto out;
    }
    s->commit_ctx = ctx; /* borrowed for the progress display until watch_close */
    ctx = NULL;          /* owned by the watcher now */
    s->pg = progress_start_run(s->commit_ctx);
    if (s->last_step >= 0)
        watch_note_step(s->w, (uint64_t)s->last_step);
    if ((rc = sup_nodes_start(s)) != 0)
        goto out;
    if (ctl_open(&s->ctl, s->sock, sizeof s->sock) != 0) {
        rc = EXIT_CONFIG;
        goto out;
    }
    {
        struct ckptrun_notice_cfg nc = { s->o->notice, s->o->metadata_url, s->o->verbosity };
        if (ckptrun_notice_start(&nc) != 0) {
            log_error("--notice %s: cannot watch for notices",
                      s->o->notice ? s->o->notice : "auto");
            rc = EXIT_CONFIG;
            goto out;
        }
        *notices = 1;
    }
out:
    ckpt_close(ctx);
    cJSON_Delete(prev);
    return rc;
}

/* Start COMMAND. @return 0 or an exit code (logged). */
static int start_child(struct sup *s, const char *preload)
{
    struct child_vars v = { s->sock, s->sock[0] ? ctl_key(s->ctl) : NULL, s->dir, s->o->store,
                            s->o->run, s->o->sig, s->resumed, s->restored_step,
                            s->o->codec_str, s->o->keep, s->cl.epoch, preload };
    char **env = child_env(&v);
    cJSON *f;
    int rc = 0;

    if (!env) {
        log_error("out of memory");
        rc = EXIT_CONFIG;
        goto out;
    }
    sup_set_state(s, "running");
    if (child_spawn(&s->ch, s->o->args, env,
                    isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp()) != 0 &&
        !s->ch.alive) {
        log_error("cannot start '%s' (the keeper of its process tree: %s)", s->o->args[0],
                  strerror(errno));
        rc = EXIT_CONFIG;
        goto out;
    }
    watch_set_pgid(s->w, s->ch.pgid);
    if ((f = sup_fields())) {
        cJSON *a = cJSON_AddArrayToObject(f, "command");
        for (int i = 0; a && i < s->o->nargs; i++)
            cJSON_AddItemToArray(a, cJSON_CreateString(s->o->args[i]));
        cJSON_AddNumberToObject(f, "child_pid", (double)s->ch.pid);
        cJSON_AddStringToObject(f, "run", s->o->run);
        cJSON_AddBoolToObject(f, "resumed", s->resumed);
        if (s->resumed)
            cJSON_AddNumberToObject(f, "step", (double)s->restored_step);
        /* resumed=false said only that no files were restored; a trainer
         * that saves its memory (libckpt, `import ckpt`) loads it itself */
        if (s->trainer_restores) {
            cJSON_AddStringToObject(f, "restore", "trainer");
            cJSON_AddNumberToObject(f, "newest", (double)s->trainer_step);
        }
    }
    sup_event(s, LOG_INFO, "start", f, 1);
    sup_report_started(s);
    if (s->o->interval_ms)
        s->next_periodic = sup_mono_ms(s) + (int64_t)s->o->interval_ms;
out:
    child_env_free(env);
    return rc;
}

/* On a terminal: the commit in flight, and during a stop what it waits
 * for and the time left (tty_progress.h). */
static void show_progress(struct sup *s)
{
    const struct stop_state *st = &s->stop;
    int busy = watch_busy(s->w);

    if (!s->pg)
        return;
    if (st->phase == P_RUN)
        progress_run_state(s->pg, busy, NULL, 0);
    else if (st->phase == P_CKPT)
        progress_run_state(s->pg, busy,
                           st->via == CH_NONE ? NULL
                                              : "stop: waiting for the trainer's final checkpoint",
                           st->ckpt_end);
    else
        progress_run_state(s->pg, busy, NULL, st->deadline);
}

static void loop(struct sup *s)
{
    while (!sup_loop_done(s)) {
        struct pollfd pf[MAX_PFDS];
        int n = 0, nbase;
        if (watch_dirty(s->w) || (s->watch_due >= 0 && sup_mono_ms(s) >= s->watch_due))
            s->watch_due = watch_tick(s->w);
        if (sup_loop_done(s))
            break;
        sup_arm_timer(s);
        show_progress(s);
        pf[n++] = (struct pollfd){ .fd = s->sfd, .events = POLLIN };
        pf[n++] = (struct pollfd){ .fd = s->tfd, .events = POLLIN };
        pf[n++] = (struct pollfd){ .fd = watch_inotify_fd(s->w), .events = POLLIN };
        pf[n++] = (struct pollfd){ .fd = watch_result_fd(s->w), .events = POLLIN };
        pf[n++] = (struct pollfd){ .fd = notice_queue_fd(), .events = POLLIN };
        pf[n++] = (struct pollfd){ .fd = s->ch.kp.rep_fd, .events = POLLIN }; /* -1: ignored */
        nbase = n;
        ctl_pollfds(s->ctl, pf, &n, MAX_PFDS);
        if (poll(pf, (nfds_t)n, -1) < 0) {
            if (errno == EINTR)
                continue;
            log_msg(LOG_ERROR, "poll", "%s", strerror(errno));
            break;
        }
        if (pf[0].revents)
            sup_on_signals(s);
        if (pf[2].revents)
            watch_handle_inotify(s->w);
        if (pf[3].revents)
            sup_on_results(s);
        if (pf[4].revents)
            sup_on_notices(s);
        if (pf[5].revents)
            sup_on_keeper(s);
        ctl_handle(s->ctl, pf + nbase, n - nbase, sup_on_ctl, s);
        if (pf[1].revents)
            sup_on_timer(s);
    }
}

/* The loop is over: nothing of the job may outlive us; the outcome is
 * logged and written to the record. @return the exit code; *state. */
static int finish(struct sup *s, const char **state)
{
    char why[CKPT_ERR_MAX];
    cJSON *f;
    int rc;

    progress_stop(s->pg); /* the lines below are the run's last */
    s->pg = NULL;
    child_end_tree(&s->ch);
    if (!s->lease_lost && renewer_lost(&s->rn, why, sizeof why))
        stop_lease_lost(s, why);
    rc = stop_outcome(s, state);
    sup_report_outcome(s, &rc, state); /* exit 0 leaving a checkpoint behind: 74 */
    if (watch_busy(s->w))
        log_msg(LOG_WARN, "exit", "a commit was still in flight at the deadline; abandoned");
    if ((f = sup_fields())) {
        cJSON_AddStringToObject(f, "state", *state);
        cJSON_AddNumberToObject(f, "code", rc);
        if (s->stop.phase != P_RUN) {
            cJSON_AddStringToObject(f, "stop", s->stop.reason);
            if (s->stop.provider[0])
                cJSON_AddStringToObject(f, "provider", s->stop.provider);
        }
        if (s->last_step >= 0)
            cJSON_AddNumberToObject(f, "last_step", (double)s->last_step);
    }
    sup_event(s, LOG_INFO, "exit", f, 1);
    if (!s->lease_lost)
        sup_set_state(s, *state); /* RUN is the new holder's to write */
    return rc;
}

/* The record lands before the lease is released (a recover that takes it
 * over must see `completed`), and both before hooks run: a hook may read
 * the record (ckptrun status) or power the machine off. */
static void release(struct sup *s)
{
    char err[CKPT_ERR_MAX] = "";
    ckpt_status st;
    cJSON *f;

    stop_finish_acks(s);
    renewer_stop(&s->rn);
    record_drain(s->rec);
    if (s->cl.lease && s->cl.epoch && !s->lease_lost) {
        st = lease_release(s->cl.lease, err);
        if (st != CKPT_OK)
            log_msg(LOG_WARN, "lease", "cannot release the lease of run %s (it expires by "
                    "itself): %s %s", s->o->run, ckpt_strerror(st), err);
        if ((f = sup_fields())) {
            cJSON_AddStringToObject(f, "action", st == CKPT_OK ? "released" : "release-failed");
            cJSON_AddNumberToObject(f, "epoch", (double)s->cl.epoch);
        }
        /* a start that failed early says only why it failed */
        sup_event(s, s->lease_told ? LOG_INFO : LOG_DEBUG, "lease", f, s->lease_told);
    }
    lease_close(s->cl.lease);
    s->cl.lease = NULL;
    record_close(s->rec);
    s->rec = NULL;
}

static void run_hooks(struct sup *s, const char *state, int rc)
{
    const struct opts *o = s->o;

    if (strcmp(state, "completed") == 0)
        hook_run(o->on_complete, o->run, state, s->last_step, rc);
    else if (strcmp(state, "preempted") == 0)
        hook_run(o->on_preempt, o->run, state, s->last_step, rc);
    else if (strcmp(state, "stopped") != 0) /* a user's stop runs no hook */
        hook_run(o->on_failure, o->run, state, s->last_step, rc);
}

int supervise(struct opts *o, enum sup_mode mode)
{
    struct sup sv, *s = &sv;
    char preload[PATH_MAX];
    int rc = 0, started = 0, notices = 0;
    const char *state = "failed";

    memset(s, 0, sizeof *s);
    s->o = o;
    s->recover = mode == SUP_RECOVER;
    s->seam = &sup_seam_system;
    s->sfd = s->tfd = -1;
    child_init(&s->ch);
    stop_init(&s->stop);
    s->last_step = -1;
    s->last_changed = -1;
    s->watch_due = -1;
    s->started_ms = sup_now_ms(s);
    if (o->nargs < 1) {
        log_error("no command to run: ckptrun [run] [OPTIONS] -- COMMAND [ARG...]");
        rc = EXIT_USAGE;
        goto out;
    }
    if ((rc = sup_report_init(s)) != 0)
        goto out;
    if ((rc = sup_nodes_resolve(s)) != 0)
        goto out;
    if (o->preload && child_find_preload(preload, sizeof preload) != 0) {
        log_error("--preload: libckpt_preload.so not found next to ckptrun "
                  "(set CKPT_PRELOAD_LIB to its path)");
        rc = EXIT_CONFIG;
        goto out;
    }
    if ((rc = setup_signals(s)) != 0 || claim_run(s, &rc) || (rc = open_dir(s)) != 0 ||
        (rc = prepare(s, &notices)) != 0 ||
        (rc = start_child(s, o->preload ? preload : NULL)) != 0)
        goto out;
    started = 1;
    loop(s);
    rc = finish(s, &state);
out:
    release(s);
    if (started)
        run_hooks(s, state, rc);
    if (started)
        sup_report_end(s, state, rc); /* the last line: outcome, step, how to resume */
    if (notices)
        ckptrun_notice_stop();
    sup_nodes_close(s);
    ctl_close(s->ctl);
    progress_stop(s->pg);
    if (s->w)
        watch_close(s->w, !watch_busy(s->w));
    child_close(&s->ch); /* a keeper still there kills what is left */
    notice_queue_close();
    if (s->sfd >= 0)
        close(s->sfd);
    if (s->tfd >= 0)
        close(s->tfd);
    sup_report_free(s);
    return rc;
}
