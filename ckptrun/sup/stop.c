/* stop.c -- the stop state machine (stop.h). */
#include "sup/stop.h"
#include "base/runlog.h"
#include "sup/notice_queue.h"
#include "base/parse.h"
#include "sup/request.h"
#include "sup/sup.h"
#include "sup/sup_log.h"
#include "ckpt_store.h"
#include "sup/sup_report.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void stop_init(struct stop_state *st)
{
    memset(st, 0, sizeof *st);
    st->phase = P_RUN;
    st->term_sig = SIGTERM;
}

/* The store's retries end with the stop (retry.h). */
static void retry_until(int64_t deadline)
{
    ckpt_retry_set_deadline(deadline);
}

void stop_finish_acks(struct sup *s)
{
    while (s->stop.acks) {
        struct queued_notice *n = s->stop.acks;
        s->stop.acks = n->next;
        if (n->ack)
            n->ack(n->ack_user, s->stop.final_ok, s->last_step < 0 ? 0 : (uint64_t)s->last_step);
        free(n);
    }
}

static void final_result(struct sup *s, int ok)
{
    cJSON *f;

    if (s->stop.final_done)
        return;
    s->stop.final_done = 1;
    s->stop.final_ok = ok;
    if ((f = sup_fields())) {
        cJSON_AddBoolToObject(f, "committed", ok);
        if (s->last_step >= 0)
            cJSON_AddNumberToObject(f, "step", (double)s->last_step);
    }
    if (!ok)
        sup_report_final_why(s, f); /* said where it is decided (sup_report.h) */
    sup_event(s, ok ? LOG_INFO : LOG_WARN, "final", f, 0);
    stop_finish_acks(s);
}

static void kill_all(struct sup *s)
{
    if (s->w)
        s->seam->watch_stopping(s->w);
    s->seam->kill_all(&s->ch);
}

static void send_term(struct sup *s)
{
    if (s->stop.term_sent)
        return;
    s->stop.term_sent = 1;
    s->stop.term_due = 0;
    if (s->ch.alive) {
        if (s->w)
            s->seam->watch_stopping(s->w); /* what is closed from now on may be torn */
        s->seam->signal_group(&s->ch, s->stop.term_sig);
    }
}

/* The final checkpoint is settled (or the time for it is up): end the
 * child. Clients that turn signals into stops are first told `stopping`
 * (docs/CONTROL.md) so that the signal that follows takes its default
 * effect at once; their acknowledgements are awaited at most a second. */
static void enter_term(struct sup *s)
{
    struct stop_state *st = &s->stop;
    cJSON *f;
    int told;

    if (st->phase >= P_TERM)
        return;
    st->phase = P_TERM;
    if (!s->ch.alive)
        return;
    if (st->no_kill && st->via == CH_NONE) {
        /* A user's interrupt that reached the child directly, and nothing
         * else to wait for: it ends (or not) as it would without us. */
        st->term_sent = 1;
        return;
    }
    if ((f = sup_fields())) {
        cJSON_AddStringToObject(f, "signal", ckpt__signal_name(st->term_sig));
        if (!st->no_kill)
            cJSON_AddNumberToObject(f, "kill_in_ms", (double)(st->deadline - sup_mono_ms(s)));
    }
    sup_event(s, LOG_INFO, "terminate", f, 0);
    told = s->seam->ctl_stopping(s->ctl, st->reason, ckpt__signal_name(st->term_sig));
    if (told > 0) {
        int64_t due = sup_mono_ms(s) + STOPPING_ACK_MS;
        st->term_due = due < st->deadline || st->no_kill ? due : st->deadline;
    } else {
        send_term(s);
    }
}

void stop_lease_lost(struct sup *s, const char *why)
{
    struct stop_state *st = &s->stop;
    int64_t now = sup_mono_ms(s);
    cJSON *f;

    if (s->lease_lost)
        return;
    s->lease_lost = 1;
    log_msg(LOG_ERROR, "lease", "lease on run %s (epoch %" PRIu64 ") lost: %s; committing "
            "nothing more, stopping the child, exit %d",
            s->o->run, s->cl.epoch, why, EXIT_STOPPED_LOST);
    if ((f = sup_fields())) {
        cJSON_AddStringToObject(f, "action", "lost");
        cJSON_AddNumberToObject(f, "epoch", (double)s->cl.epoch);
        cJSON_AddStringToObject(f, "detail", why);
    }
    sup_event(s, LOG_DEBUG, "lease", f, 1);
    if (s->w)
        s->seam->watch_pause(s->w);
    if (st->phase == P_RUN) {
        st->t0 = now;
        st->deadline = st->t0 + (int64_t)s->o->grace_ms;
        snprintf(st->reason, sizeof st->reason, "lease-lost");
    } else if (st->deadline > now + (int64_t)s->o->grace_ms) {
        st->deadline = now + (int64_t)s->o->grace_ms;
    }
    enter_term(s);
}

/* Whether a committed entry of CKPT_DIR answers the stop: the request went
 * as a signal, or to processes that write their own files (the helper) --
 * or to libckpt clients none of which has saved through the library yet: a
 * program that writes its own files and reports them over libckpt's
 * connection (the Python package's saved()). Once one of them has saved
 * (`saving`), only its commit answers (docs/CONTROL.md). */
static int entries_answer(const struct sup *s)
{
    const struct stop_state *st = &s->stop;
    return st->via == CH_SIGNAL || st->via == CH_FILES || (st->via == CH_SOCKET && !s->ever_saving);
}

/* An entry written since the stop's signal reached the job may already
 * have been committed (a trainer that saved before we even heard of it):
 * that is the final checkpoint. */
static void check_answered(struct sup *s)
{
    struct stop_state *st = &s->stop;

    if (s->ns) { /* several nodes: only a global commit answers */
        stop_global_commit(s);
        return;
    }
    if (st->phase == P_CKPT && entries_answer(s) && s->last_changed >= 0 &&
        s->last_changed >= st->t_accept) {
        final_result(s, 1);
        enter_term(s);
    }
}

/* Already stopping: a nearer deadline shortens it, nothing else (but the
 * job's own processes may have got the signal too). */
static void stop_again(struct sup *s, const struct stop_cause *c, int64_t d)
{
    struct stop_state *st = &s->stop;

    if (d < st->deadline && !st->no_kill) {
        st->deadline = d;
        retry_until(d);
        if (st->ckpt_end > d)
            st->ckpt_end = d;
    }
    st->job_signalled |= c->job;
    if (c->since_mono > 0 && c->since_mono < st->t_accept && c->since_mono > st->t0 - 60000)
        st->t_accept = c->since_mono;
    log_msg(LOG_INFO, "stop", "already stopping (%s)", c->reason);
    check_answered(s);
}

/* A short budget takes a faster codec (a faster speed class of
 * CKPT_CODEC_MAP) for this one save. @return its row, or NULL for the
 * run's own. */
static const struct ckpt__codec_spec *stop_codec(const struct sup *s, int64_t budget)
{
    const struct ckpt__codec_spec *own = ckpt__codec_spec(s->o->codec); /* NULL: zstd's default */
    enum ckpt_codec_speed want;
    if (budget < 3000)
        want = CKPT_SPEED_COPY;
    else if (budget < 15000 || (s->last_commit_s > 0 && s->last_commit_s * 1500 > budget))
        want = CKPT_SPEED_FAST;
    else
        return NULL;
    if (own && own->speed <= CKPT_SPEED_FAST)
        return NULL; /* already fast: a short budget does not change it */
    return ckpt__codec_of_speed(want);
}

void stop_begin(struct sup *s, const struct stop_cause *c)
{
    struct stop_state *st = &s->stop;
    int64_t now = sup_mono_ms(s), wall = sup_now_ms(s), d, total, killwin;
    const struct ckpt__codec_spec *codec;
    const char *reason = c->reason;
    int user = 0;
    cJSON *f;

    if (c->deadline_unix > 0)
        d = now + (c->deadline_unix - wall) - STOP_MARGIN_MS;
    else
        d = now + (int64_t)s->o->grace_ms;
    if (d < now + 1000)
        d = now + 1000; /* a deadline already past: still give SIGTERM a second */
    if (!s->ch.alive && st->phase == P_RUN) {
        /* The child already ended by itself; only commits are left. They
         * get until the deadline; the outcome stays the child's. */
        st->drain_deadline = d;
        log_msg(LOG_INFO, "stop", "%s after the child exited: finishing commits", reason);
        return;
    }
    if (st->phase != P_RUN) {
        stop_again(s, c, d);
        return;
    }
    /* Ctrl-C is the user stopping the run; so is a plain SIGTERM under
     * SLURM (scancel): the scheduler warns with --signal (SIGUSR1/SIGXCPU)
     * before a time limit or preemption, and a requeued job resumes anyway.
     * Stopped runs are not resumed by `recover`. */
    if (strcmp(reason, "SIGINT") == 0) {
        user = 1;
        st->term_sig = SIGINT;
        st->no_kill = 1; /* let the interrupt proceed; the child decides */
    } else if (strcmp(reason, "SIGTERM") == 0 && getenv("SLURM_JOB_ID") && !st->warned) {
        user = 1;
    } else if (c->remote == 2) {
        user = 1; /* every node of the job ends as the one its user stopped */
    }
    st->user = user;
    st->job_signalled = c->job;
    total = d - now;
    killwin = total / 3;
    if (killwin > (int64_t)s->o->grace_ms)
        killwin = (int64_t)s->o->grace_ms;
    st->t0 = now;
    st->t_accept = c->since_mono > 0 && c->since_mono < now && c->since_mono > now - 60000
                       ? c->since_mono : now;
    st->deadline = d;
    st->ckpt_end = d - killwin;
    retry_until(d);
    snprintf(st->reason, sizeof st->reason, "%s", reason);
    snprintf(st->provider, sizeof st->provider, "%s", c->provider ? c->provider : "");
    st->phase = P_CKPT;
    st->t_wall = wall;
    if (!user)
        s->preemptions++;
    codec = stop_codec(s, st->ckpt_end - now);
    if ((f = sup_fields())) {
        cJSON_AddStringToObject(f, "reason", reason);
        if (c->provider && *c->provider)
            cJSON_AddStringToObject(f, "provider", c->provider);
        if (user)
            cJSON_AddBoolToObject(f, "user", 1);
        if (c->deadline_unix > 0)
            cJSON_AddNumberToObject(f, "deadline_ms", (double)c->deadline_unix);
        cJSON_AddNumberToObject(f, "budget_ms", (double)total);
        if (s->last_step >= 0)
            cJSON_AddNumberToObject(f, "last_step", (double)s->last_step);
    }
    sup_event(s, LOG_INFO, "stop", f, 1);
    s->seam->watch_set_settle(s->w,
                              s->o->settle_ms < STOP_SETTLE_MS ? s->o->settle_ms : STOP_SETTLE_MS);
    if (codec)
        s->seam->watch_next_codec(s->w, codec->id);
    st->via = s->ch.alive ? request_checkpoint(s, "stop", wall + (st->ckpt_end - now),
                                               codec ? codec->name : NULL, c->except, c->self)
                          : CH_NONE;
    if (s->stop_begun) /* the other nodes learn of it; what answered it already */
        s->stop_begun(s, c,
                      c->deadline_unix > 0 ? c->deadline_unix : wall + (d - now) + STOP_MARGIN_MS);
    if (st->via == CH_NONE) {
        /* Nothing can reach the child: the final checkpoint is what is
         * complete already plus the commits in flight. Stop it at once. */
        enter_term(s);
    }
    check_answered(s);
}

void stop_on_signal(struct sup *s, int sig, int job, int from_slot, enum channel self,
                    int64_t since_mono)
{
    char reason[16];
    struct stop_cause c = { reason, 0, NULL, -1, CH_NONE, since_mono, job, 0 };

    /* a copy: ckpt__signal_name() reuses one buffer */
    snprintf(reason, sizeof reason, "%s", ckpt__signal_name(sig));
    if (job && from_slot < 0) {
        c.except = -2;
    } else if (from_slot >= 0) {
        c.except = from_slot;
        c.self = self;
    }
    if (sig == SIGUSR1 || sig == SIGXCPU) {
        /* Batch schedulers (SLURM --signal, LSF, PBS) warn this way ahead
         * of the time limit: a stop with --lead to go. */
        s->stop.warned = 1;
        c.deadline_unix = sup_now_ms(s) + (int64_t)s->o->lead_ms + STOP_MARGIN_MS;
    }
    stop_begin(s, &c);
}

void stop_on_notice(struct sup *s, struct queued_notice *n)
{
    struct stop_cause c = { "notice", n->deadline_ms, n->provider, -1, CH_NONE, 0, 0, 0 };

    n->next = s->stop.acks;
    s->stop.acks = n;
    stop_begin(s, &c);
    if (s->stop.final_done)
        stop_finish_acks(s);
}

void stop_saving(struct sup *s, uint64_t step)
{
    if (s->stop.phase != P_RUN && !s->stop.saw_saving) {
        s->stop.saw_saving = 1;
        s->stop.await_step = step;
    }
}

/* The answer to the stop request is the save that started after it
 * ("saving" after the request); a save already in flight then holds older
 * state. Without "saving" messages, any commit after it. */
void stop_socket_commit(struct sup *s, uint64_t step, int ok)
{
    struct stop_state *st = &s->stop;

    if (st->phase != P_RUN && st->via == CH_SOCKET &&
        (st->saw_saving ? step == st->await_step : !s->ever_saving)) {
        final_result(s, ok);
        enter_term(s);
    }
}

/* A signal-aware trainer's answer to the stop request: an entry written
 * (last changed) after the request -- or after the stop's signal reached
 * the job, when the trainer took it itself; one that was only settling
 * then is older state. */
void stop_entry_commit(struct sup *s, int64_t changed_mono, int ok)
{
    struct stop_state *st = &s->stop;

    if (st->phase != P_RUN && !ok)
        st->failed_since_stop = 1;
    if (st->phase != P_RUN && entries_answer(s) && changed_mono >= st->t_accept) {
        final_result(s, ok);
        enter_term(s);
    }
}

void stop_node_part(struct sup *s, uint64_t step, int64_t changed_mono, int empty)
{
    struct stop_state *st = &s->stop;

    if (st->phase == P_RUN || st->final_done)
        return;
    if (!empty && changed_mono < st->t_accept)
        return; /* older state, settling when the stop came */
    if (step + 1 > st->await_global)
        st->await_global = step + 1;
    stop_global_commit(s);
}

void stop_global_commit(struct sup *s)
{
    struct stop_state *st = &s->stop;

    if (st->phase != P_CKPT || st->final_done || !st->await_global)
        return;
    if (s->last_step >= 0 && (uint64_t)s->last_step + 1 >= st->await_global) {
        final_result(s, 1);
        enter_term(s);
    }
}

void stop_client_acked(struct sup *s)
{
    if (s->stop.term_due && !s->stop.term_sent && s->seam->ctl_unacked(s->ctl) == 0)
        send_term(s);
}

int64_t stop_due(const struct sup *s)
{
    const struct stop_state *st = &s->stop;
    int64_t due = -1, cands[4] = { -1, -1, -1, st->drain_deadline };

    if (st->phase == P_CKPT)
        cands[0] = st->ckpt_end;
    if (st->phase == P_CKPT || (st->phase == P_TERM && (!st->no_kill || !s->ch.alive)) ||
        (st->phase == P_KILL && !s->ch.alive))
        cands[1] = st->deadline;
    if (st->term_due && !st->term_sent)
        cands[2] = st->term_due;
    for (int i = 0; i < 4; i++)
        if (cands[i] > 0 && (due < 0 || cands[i] < due))
            due = cands[i];
    return due;
}

void stop_tick(struct sup *s, int64_t now)
{
    struct stop_state *st = &s->stop;

    if (st->phase == P_CKPT && now >= st->ckpt_end) {
        log_msg(LOG_WARN, "stop", "no checkpoint committed in time; stopping the child");
        enter_term(s);
    }
    if (st->term_due && !st->term_sent && now >= st->term_due) {
        log_msg(LOG_DEBUG, "stop", "%d client(s) did not acknowledge `stopping` in time",
                s->seam->ctl_unacked(s->ctl));
        send_term(s);
    }
    if (st->phase == P_TERM && now >= st->deadline && !(st->no_kill && s->ch.alive)) {
        st->phase = P_KILL;
        if (s->ch.alive) {
            log_msg(LOG_WARN, "kill", "child did not exit in time: SIGKILL to every process "
                    "of the job (group %d)", (int)s->ch.pgid);
            kill_all(s);
        }
    }
}

int stop_outcome(struct sup *s, const char **state)
{
    struct stop_state *st = &s->stop;
    int rc;

    if (s->lease_lost) {
        /* Whatever the child did, the run is another runner's now. */
        rc = EXIT_STOPPED_LOST;
        *state = "lost";
    } else if (st->phase >= P_TERM ||
               (st->phase != P_RUN && (st->job_signalled || st->user || s->ch.sigterm))) {
        /* Stopped: by us, or by the stop's own signal, which reached the
         * child directly (kill -TERM of the whole job, Ctrl-C) -- whatever
         * code it then exited with is the stop's consequence; and a child
         * that died of SIGTERM while we were stopping it. */
        if (!st->final_done)
            final_result(s, st->via == CH_NONE && !st->failed_since_stop &&
                                !s->seam->watch_busy(s->w) && s->last_step >= 0);
        if (st->user) {
            rc = 128 + st->term_sig; /* 130 for Ctrl-C, 143 for scancel */
            *state = "stopped";
        } else {
            rc = st->final_ok ? EXIT_STOPPED_OK : EXIT_STOPPED_LOST;
            *state = "preempted";
        }
    } else if (st->phase == P_RUN && s->ch.sigint) {
        /* Interrupted by a SIGINT we never saw (not through our terminal
         * or our signals): the user stopped it all the same. */
        rc = 128 + SIGINT;
        *state = "stopped";
    } else {
        rc = s->ch.code;
        *state = rc == 0 ? "completed" : "failed";
        if (st->phase != P_RUN && !st->final_done)
            final_result(s, 0);
    }
    return rc;
}
