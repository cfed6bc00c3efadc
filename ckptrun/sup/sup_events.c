/* sup_events.c -- the supervisor's event sources (sup_events.h). */
#include "sup/sup_events.h"
#include "sup/sup_nodes.h"
#include "sup/ctlserver.h"
#include "base/runlog.h"
#include "sup/notice_queue.h"
#include "base/parse.h"
#include "record/record.h"
#include "sup/request.h"
#include "ckpt_store.h"
#include "sup/sup.h"
#include "sup/sup_log.h"
#include "watch/watch.h"
#include "sup/sup_report.h"
#include "sup/stop.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- the child ------------------------------------------------------------ */

/* COMMAND ended (reported by the keeper, or reaped by us if the keeper
 * died). Leftover processes of the job (a metrics uploader, a daemon it
 * started) get SIGTERM now and SIGKILL after --grace (in a stop: by the
 * deadline). */
static void child_exited(struct sup *s, pid_t pid, int st)
{
    int64_t grace = (int64_t)s->o->grace_ms, left = s->stop.deadline - sup_mono_ms(s);
    cJSON *f;

    if (!child_ended(&s->ch, st))
        return;
    if ((f = sup_fields())) {
        cJSON_AddNumberToObject(f, "pid", (double)pid);
        cJSON_AddNumberToObject(f, "code", s->ch.code);
        if (WIFSIGNALED(st))
            cJSON_AddStringToObject(f, "signal", ckpt__signal_name(WTERMSIG(st)));
    }
    sup_event(s, LOG_INFO, "child-exit", f, 0);
    /* A clean exit leaves no writer: what is still settling is done;
     * after any exit the links are read again (watch.h). */
    if (s->w)
        s->seam->watch_child_exit(s->w, s->ch.code);
    if (s->stop.phase != P_RUN && left < grace)
        grace = left;
    s->seam->finish_tree(&s->ch, grace, s->stop.phase == P_KILL);
}

/* The child saves through libckpt: its checkpoints are the run's, and a
 * run has a single writer, so the watcher stands down. (The preload shim
 * alone never saves: with it, the watcher keeps committing files.) */
static void child_writes(struct sup *s)
{
    if (s->child_writes)
        return;
    s->child_writes = 1;
    s->seam->watch_pause(s->w);
    log_msg(LOG_INFO, "watch", "the child commits through libckpt: entries of %s are no "
            "longer committed by ckptrun", s->dir);
}

void sup_on_keeper_msg(struct sup *s, const struct keeper_msg *m)
{
    cJSON *f;

    switch (m->type) {
    case KR_EXIT:
        child_exited(s, m->pid, m->value);
        break;
    case KR_STOPPED:
        child_suspended(&s->ch);
        break;
    case KR_SIGNAL:
        /* The job's process group got SIGTERM (kill -TERM -PGID, a
         * scheduler or systemd signalling every process) or SIGINT
         * (Ctrl-C on the terminal, which the job holds): a stop, as if
         * it had been sent to us. */
        if (m->value == SIGTERM || m->value == SIGINT) {
            if ((f = sup_fields())) {
                cJSON_AddStringToObject(f, "signal", ckpt__signal_name(m->value));
                cJSON_AddNumberToObject(f, "sender", m->pid);
            }
            sup_event(s, LOG_INFO, "group-signal", f, 0);
            stop_on_signal(s, m->value, 1, -1, CH_NONE, sup_mono_ms(s));
        }
        break;
    default:
        break;
    }
}

void sup_on_keeper(struct sup *s)
{
    struct keeper_msg m;
    int r;

    while ((r = keeper_read(&s->ch.kp, &m)) > 0)
        sup_on_keeper_msg(s, &m);
    if (r < 0) {
        /* The keeper exited: every report is read. */
        close(s->ch.kp.rep_fd);
        s->ch.kp.rep_fd = -1;
    }
}

/* ---- signals to ckptrun ----------------------------------------------------- */

void sup_on_signal(struct sup *s, int sig)
{
    cJSON *f;
    int st;

    switch (sig) {
    case SIGCHLD:
        if (child_reap(&s->ch, &st))
            child_exited(s, s->ch.pid, st);
        break;
    case SIGTERM:
    case SIGUSR1:
    case SIGXCPU:
        stop_on_signal(s, sig, 0, -1, CH_NONE, 0);
        break;
    case SIGUSR2:
        request_checkpoint(s, "manual", 0, NULL, -1, CH_NONE);
        break;
    case SIGINT:
    case SIGHUP:
    case SIGQUIT:
        if ((f = sup_fields()))
            cJSON_AddStringToObject(f, "signal", ckpt__signal_name(sig));
        sup_event(s, LOG_INFO, "forward", f, 0);
        s->seam->signal_group(&s->ch, sig);
        /* SIGINT is the user interrupting the run: the job's processes got
         * it now (those that turn it into a stop ask themselves). */
        if (sig == SIGINT)
            stop_on_signal(s, SIGINT, 1, -1, CH_NONE, sup_mono_ms(s));
        break;
    default:
        break;
    }
}

void sup_on_signals(struct sup *s)
{
    struct signalfd_siginfo si;

    while (read(s->sfd, &si, sizeof si) == (ssize_t)sizeof si)
        sup_on_signal(s, (int)si.ssi_signo);
}

/* ---- the control socket ------------------------------------------------------- */

static void on_commit_msg(struct sup *s, const struct ctl_event *ev, cJSON *f)
{
    child_writes(s);
    sup_note_commit(s, ev->step, ev->seconds);
    sup_report_commit_ok(s);
    if (f) {
        cJSON_AddNumberToObject(f, "step", (double)ev->step);
        cJSON_AddNumberToObject(f, "bytes", (double)ev->bytes);
        cJSON_AddNumberToObject(f, "stored", (double)ev->stored);
        cJSON_AddNumberToObject(f, "ratio", ev->stored ? (double)(int64_t)((double)ev->bytes / (double)ev->stored * 100) / 100.0 : 0);
        cJSON_AddNumberToObject(f, "mb_s", ev->seconds > 0 ? (double)(int64_t)((double)ev->bytes / 1e6 / ev->seconds * 10) / 10.0 : 0);
        cJSON_AddNumberToObject(f, "seconds", ev->seconds);
        cJSON_AddStringToObject(f, "source", "socket");
    }
    sup_event(s, LOG_INFO, "commit", f, 1);
    stop_socket_commit(s, ev->step, 1);
}

static void on_failed_msg(struct sup *s, const struct ctl_event *ev, cJSON *f)
{
    int level;

    if (f) {
        cJSON_AddNumberToObject(f, "step", (double)ev->step);
        cJSON_AddStringToObject(f, "error", ev->error);
        cJSON_AddStringToObject(f, "detail", ev->detail);
    }
    level = sup_report_commit_failed(s, ev->step, ev->error, ev->detail, f);
    sup_event(s, level, "commit-failed", f, 1);
    if (ev->error && strcmp(ev->error, ckpt_strerror(CKPT_E_FENCED)) == 0)
        renewer_kick(&s->rn); /* a takeover? the renewal says */
    stop_socket_commit(s, ev->step, 0);
}

void sup_on_ctl(void *user, const struct ctl_event *ev)
{
    struct sup *s = user;
    cJSON *f = sup_fields();

    switch (ev->type) {
    case CTL_HELLO:
        s->ever_connected = 1;
        if (f) {
            cJSON_AddNumberToObject(f, "pid", ev->pid);
            cJSON_AddNumberToObject(f, "items", (double)ev->items);
        }
        sup_event(s, LOG_INFO, "connect", f, 0);
        return;
    case CTL_HELPER:
        s->rep.ever_helper = 1;
        if (f) {
            cJSON_AddNumberToObject(f, "pid", ev->pid);
            cJSON_AddStringToObject(f, "kind", "helper");
        }
        sup_event(s, LOG_INFO, "connect", f, 0);
        return;
    case CTL_GONE:
        if (f)
            cJSON_AddNumberToObject(f, "pid", ev->pid);
        sup_event(s, LOG_INFO, "disconnect", f, 0);
        stop_client_acked(s);
        return;
    case CTL_SIGNAL:
        /* A process of the job took a SIGTERM or SIGINT that reached it
         * directly as a stop: it saves at its next safe point. */
        if (f) {
            cJSON_AddNumberToObject(f, "pid", ev->pid);
            cJSON_AddStringToObject(f, "signal", ev->signal);
        }
        sup_event(s, LOG_INFO, "child-signal", f, 0);
        stop_on_signal(s, strcmp(ev->signal, "SIGINT") == 0 ? SIGINT : SIGTERM, 1, ev->client,
                       ev->kind == CTL_KIND_LIB ? CH_SOCKET : CH_FILES, ev->mono_ms);
        return;
    case CTL_STOPPING_ACK:
        cJSON_Delete(f);
        stop_client_acked(s);
        return;
    case CTL_SAVING:
        s->ever_saving = 1;
        child_writes(s);
        sup_report_activity(s);
        stop_saving(s, ev->step);
        if (f)
            cJSON_AddNumberToObject(f, "step", (double)ev->step);
        sup_event(s, LOG_DEBUG, "saving", f, 0);
        return;
    case CTL_COMMITTED:
        on_commit_msg(s, ev, f);
        return;
    case CTL_FAILED:
        on_failed_msg(s, ev, f);
        return;
    case CTL_FILE:
        cJSON_Delete(f);
        watch_saved(s->w, ev->path, ev->file_event, ev->has_step, ev->step);
        return;
    }
    cJSON_Delete(f);
}

/* ---- the watcher's commits -------------------------------------------------- */

/* A watched checkpoint's commit (or this node's part) failed: its event's
 * fields, and the failure reported (sup_report.c). @return its log level. */
static int result_failed(struct sup *s, const struct watch_result *r, cJSON **fields)
{
    cJSON *f = sup_fields();
    if (f) {
        cJSON_AddStringToObject(f, "entry", r->entry);
        cJSON_AddNumberToObject(f, "step", (double)r->res.step);
        cJSON_AddStringToObject(f, "error", ckpt_strerror(r->res.st));
        cJSON_AddStringToObject(f, "detail", r->res.detail);
    }
    *fields = f;
    return sup_report_commit_failed(s, r->res.step, ckpt_strerror(r->res.st), r->res.detail, f);
}

/* Several nodes: a watched commit is this node's part; the global commit
 * is node 0's, seen through the store (sup_nodes.c). */
static void nodes_result(struct sup *s, struct watch_result *r)
{
    cJSON *f;
    int ok = r->res.st == CKPT_OK, level;

    if (ok) {
        sup_report_commit_ok(s);
        s->last_commit_s = r->res.seconds;
        s->seam->watch_note_step(s->w, r->res.step);
        if (r->changed_mono > s->last_changed)
            s->last_changed = r->changed_mono;
        if (s->rec)
            record_mark_files_from(s->rec, r->res.step, (const char *const *)r->entries,
                                   r->nentries, r->step_from);
        f = commit_fields(&r->res, "watch");
        if (f) {
            cJSON_AddStringToObject(f, "entry", r->entry);
            cJSON_AddNumberToObject(f, "node", s->nid.rank);
        }
        sup_event(s, LOG_INFO, "part", f, 1);
    } else {
        level = result_failed(s, r, &f);
        sup_event(s, level, "part-failed", f, 1);
    }
    sup_nodes_on_part(s, r->res.step, r->changed_mono, ok);
}

void sup_on_result(struct sup *s, struct watch_result *r)
{
    cJSON *f;
    int level;

    if (s->ns) { /* several nodes: this node's part of the step */
        nodes_result(s, r);
        return;
    }
    if (r->res.st == CKPT_OK) {
        sup_note_commit(s, r->res.step, r->res.seconds);
        sup_report_commit_ok(s);
        if (r->changed_mono > s->last_changed)
            s->last_changed = r->changed_mono;
        if (s->rec)
            record_mark_files_from(s->rec, r->res.step, (const char *const *)r->entries,
                                   r->nentries, r->step_from);
        f = commit_fields(&r->res, "watch");
        if (f)
            cJSON_AddStringToObject(f, "entry", r->entry);
        sup_event(s, LOG_INFO, "commit", f, 1);
    } else {
        level = result_failed(s, r, &f);
        sup_event(s, level, "commit-failed", f, 1);
        if (r->res.st == CKPT_E_FENCED)
            renewer_kick(&s->rn); /* a takeover? the renewal says */
    }
    stop_entry_commit(s, r->changed_mono, r->res.st == CKPT_OK);
}

void sup_on_results(struct sup *s)
{
    struct watch_result *r;

    while ((r = watch_take_result(s->w)) != NULL) {
        sup_on_result(s, r);
        watch_result_free(r);
    }
}

/* ---- notices and the lease ------------------------------------------------------ */

void sup_on_notice(struct sup *s, struct queued_notice *n)
{
    cJSON *f = sup_fields();

    if (f) {
        cJSON_AddStringToObject(f, "kind", n->kind == CKPTRUN_NOTICE_REBALANCE ? "rebalance"
                                          : n->kind == CKPTRUN_NOTICE_MAINTENANCE ? "maintenance"
                                          : "preempt");
        cJSON_AddStringToObject(f, "provider", n->provider);
        if (n->deadline_ms)
            cJSON_AddNumberToObject(f, "deadline_ms", (double)n->deadline_ms);
    }
    sup_event(s, LOG_INFO, "notice", f, 1);
    if (n->kind != CKPTRUN_NOTICE_REBALANCE) {
        stop_on_notice(s, n); /* answered with the final result */
        return;
    }
    /* An early warning: a checkpoint now, and the run goes on. */
    request_checkpoint(s, "rebalance", 0, NULL, -1, CH_NONE);
    if (n->ack)
        n->ack(n->ack_user, 0, s->last_step < 0 ? 0 : (uint64_t)s->last_step);
    free(n);
}

void sup_on_notices(struct sup *s)
{
    struct queued_notice *list = notice_queue_take();
    char why[CKPT_ERR_MAX];

    while (list) {
        struct queued_notice *nx = list->next;
        sup_on_notice(s, list);
        list = nx;
    }
    if (renewer_lost(&s->rn, why, sizeof why))
        stop_lease_lost(s, why);
    sup_nodes_on_wake(s);
}

/* ---- time ------------------------------------------------------------------------ */

int64_t sup_next_due(const struct sup *s)
{
    int64_t due = stop_due(s), cands[3] = { s->next_periodic, s->watch_due, sup_report_due(s) };

    for (int i = 0; i < 3; i++)
        if (cands[i] > 0 && (due < 0 || cands[i] < due))
            due = cands[i];
    return due;
}

void sup_on_time(struct sup *s, int64_t now)
{
    if (s->next_periodic > 0 && now >= s->next_periodic) {
        if (s->stop.phase == P_RUN && s->ch.alive)
            request_checkpoint(s, "periodic", 0, NULL, -1, CH_NONE);
        s->next_periodic = now + (int64_t)s->o->interval_ms;
    }
    stop_tick(s, now);
    sup_report_tick(s, now);
}

int sup_loop_done(struct sup *s)
{
    int tree_left = s->ch.kp.alive || s->ch.kp.rep_fd >= 0, busy;
    int64_t now = sup_mono_ms(s);

    if (s->ch.alive)
        return 0;
    busy = s->seam->watch_busy(s->w);
    if (s->ns && !tree_left && !busy && sup_nodes_settling(s))
        return 0; /* the other nodes' parts, node 0's commit */
    if (!busy && !tree_left)
        return !sup_report_last_attempt(s); /* entries not in the store get one more try */
    if (s->stop.drain_deadline && now >= s->stop.drain_deadline && !tree_left)
        return 1;
    return s->stop.phase != P_RUN && now >= s->stop.deadline;
}

/* The timerfd counts on CLOCK_MONOTONIC, the system seam's mono_ms. */
void sup_arm_timer(struct sup *s)
{
    int64_t due = sup_next_due(s), now = sup_mono_ms(s);
    struct itimerspec its;

    memset(&its, 0, sizeof its);
    if (due > 0) {
        if (due <= now)
            due = now + 1; /* zero would disarm */
        its.it_value.tv_sec = due / 1000;
        its.it_value.tv_nsec = (due % 1000) * 1000000;
    }
    timerfd_settime(s->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

void sup_on_timer(struct sup *s)
{
    uint64_t ticks;

    if (read(s->tfd, &ticks, sizeof ticks) < 0)
        (void)0; /* spurious wake-up; the checks are idempotent */
    sup_on_time(s, sup_mono_ms(s));
}
