/* sup_report.c -- what is not safe, said at the level a user sees
 * (sup_report.h). */
#include "sup/sup_report.h"
#include "sup/resume_cmd.h"
#include "record/record.h"
#include "base/runlog.h"
#include "sup/sup.h"
#include "watch/watch.h"
#include "ckpt_common.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int sup_report_init(struct sup *s)
{
    struct sup_report *r = &s->rep;
    const char *v = getenv("CKPT_WARN_NO_CHECKPOINT");
    uint64_t ms;

    r->activity_mono = sup_mono_ms(s);
    /* A trainer that checkpoints on its own schedule may go a while without
     * one; twice --interval means requests went unanswered. */
    r->no_ckpt_ms = NO_CKPT_WARN_MS;
    if ((int64_t)s->o->interval_ms * 2 > r->no_ckpt_ms)
        r->no_ckpt_ms = (int64_t)s->o->interval_ms * 2;
    if (v && *v) {
        if (ckpt__parse_duration_ms(v, &ms) != 0) {
            log_error("CKPT_WARN_NO_CHECKPOINT='%s' is not a duration (e.g. 15m; 0 is off)", v);
            return EXIT_CONFIG;
        }
        r->no_ckpt_ms = (int64_t)ms;
    }
    return 0;
}

void sup_report_carry(struct sup *s, const cJSON *prev)
{
    struct sup_report *r = &s->rep;
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(prev, "commit_failures");
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(prev, "last_error");

    /* Older records have neither: no failures known. */
    if (cJSON_IsNumber(n) && n->valuedouble > 0)
        r->failures_before = (uint64_t)n->valuedouble;
    if (cJSON_IsObject(e))
        r->prev_error = cJSON_Duplicate(e, 1);
}

void sup_report_started(struct sup *s)
{
    s->rep.activity_mono = sup_mono_ms(s);
}

void sup_report_free(struct sup *s)
{
    cJSON_Delete(s->rep.prev_error);
    cJSON_Delete(s->rep.uncommitted_entries);
    s->rep.prev_error = s->rep.uncommitted_entries = NULL;
}

/* ---- commits ---------------------------------------------------------------- */

void sup_report_activity(struct sup *s)
{
    s->rep.activity_mono = sup_mono_ms(s);
    s->rep.saw_checkpoint = 1;
}

void sup_report_commit_ok(struct sup *s)
{
    struct sup_report *r = &s->rep;

    if (r->in_row >= FAIL_ESCALATE)
        log_msg(LOG_INFO, "commit", "commits succeed again after %u failures in a row", r->in_row);
    r->in_row = 0;
    sup_report_activity(s);
}

int sup_report_commit_failed(struct sup *s, uint64_t step, const char *error, const char *detail,
                             cJSON *f)
{
    struct sup_report *r = &s->rep;
    char newest[32] = "none";

    r->failures++;
    r->in_row++;
    snprintf(r->last_err, sizeof r->last_err, "%s", error ? error : "");
    snprintf(r->last_detail, sizeof r->last_detail, "%s", detail ? detail : "");
    snprintf(r->last_error, sizeof r->last_error, "step %" PRIu64 ": %s%s%s", step, r->last_err,
             r->last_detail[0] ? ": " : "", r->last_detail);
    r->last_error_step = step;
    r->last_error_ms = sup_now_ms(s);
    r->last_error_mono = sup_mono_ms(s);
    sup_report_activity(s); /* something complete was there to commit */
    if (f && r->in_row > 1)
        cJSON_AddNumberToObject(f, "in_row", r->in_row);
    if (r->in_row != FAIL_ESCALATE)
        return r->in_row > FAIL_ESCALATE ? LOG_ERROR : LOG_WARN;
    if (s->last_step >= 0)
        snprintf(newest, sizeof newest, "step %" PRId64, s->last_step);
    log_msg(LOG_ERROR, "store",
            "%u commits in a row failed (the last: %s); the store holds "
            "nothing newer than %s, so a stop or a lost machine now loses everything since. "
            "Fix the store (space, quota, credentials: `ckptrun doctor --store %s --run %s` "
            "checks it); every new checkpoint is tried, and a run that ends with its newest "
            "checkpoint uncommitted exits %d",
            r->in_row, r->last_error, newest, s->o->store, s->o->run, EXIT_STOPPED_LOST);
    return LOG_ERROR;
}

/* ---- requests that reach nobody, a directory that stays empty ------------------- */

void sup_report_unreachable(struct sup *s, const char *reason)
{
    struct sup_report *r = &s->rep;

    if (r->unreachable++)
        return; /* said once; the last line counts them */
    snprintf(r->unreachable_reason, sizeof r->unreachable_reason, "%s", reason);
    log_msg(LOG_WARN, "request",
            "the %s checkpoint request reached nobody: no --signal, and "
            "no process of the job connected to ckptrun (the Python helper, `import ckpt`, "
            "libckpt): only what the trainer writes into %s by itself is committed%s. Give it a "
            "way to be asked: --signal USR1 for a trainer that saves on it, the helper, or "
            "libckpt (--preload)",
            reason, s->dir,
            strcmp(reason, "stop") == 0 ? "; the final checkpoint is the newest complete entry"
                                        : "");
}

int64_t sup_report_due(const struct sup *s)
{
    const struct sup_report *r = &s->rep;

    if (r->no_ckpt_ms <= 0 || r->no_ckpt_told || !s->ch.alive || s->stop.phase != P_RUN)
        return -1;
    return r->activity_mono + r->no_ckpt_ms;
}

void sup_report_tick(struct sup *s, int64_t now)
{
    struct sup_report *r = &s->rep;
    int64_t due = sup_report_due(s);
    char d[32], newest[64] = "";

    if (due < 0 || now < due)
        return;
    if (s->seam->watch_busy(s->w) || s->seam->watch_uncommitted(s->w, 0, NULL, NULL) > 0) {
        r->activity_mono = now; /* something complete, being (or to be) committed */
        return;
    }
    r->no_ckpt_told = 1;
    ckpt__fmt_duration((uint64_t)r->no_ckpt_ms, d, sizeof d);
    if (s->last_step >= 0)
        snprintf(newest, sizeof newest, " (the newest committed: step %" PRId64 ")", s->last_step);
    log_msg(LOG_WARN, "watch",
            "no %scheckpoint for %s: nothing complete appeared in %s%s and "
            "the trainer saved nothing through libckpt%s; a stop or a lost machine now loses "
            "that time. If the trainer writes its checkpoints elsewhere, point --dir "
            "(CKPT_DIR) there (CKPT_WARN_NO_CHECKPOINT sets this delay)",
            r->saw_checkpoint ? "new " : "", d, s->dir,
            r->saw_checkpoint ? "" : " since the child started", newest);
}

/* ---- the end -------------------------------------------------------------------- */

struct collected {
    cJSON *entries;
    uint64_t step;
    int any;
    char names[200];
};

static void collect(void *user, const char *name, uint64_t step, const struct commit_print *p)
{
    struct collected *c = user;
    cJSON *e = cJSON_CreateObject();
    size_t len = strlen(c->names);

    if (!c->any || step > c->step)
        c->step = step;
    c->any = 1;
    snprintf(c->names + len, sizeof c->names - len, "%s%s", len ? ", " : "", name);
    if (!e)
        return;
    cJSON_AddStringToObject(e, "name", name);
    cJSON_AddNumberToObject(e, "files", (double)p->files);
    cJSON_AddNumberToObject(e, "bytes", (double)p->bytes);
    cJSON_AddItemToArray(c->entries, e);
}

int sup_report_last_attempt(struct sup *s)
{
    struct sup_report *r = &s->rep;
    struct collected c = { cJSON_CreateArray(), 0, 0, "" };
    int n;

    if (r->last_attempt || s->ns || s->lease_lost || s->stop.phase != P_RUN || !s->w ||
        s->ch.code != 0) {
        cJSON_Delete(c.entries);
        return 0;
    }
    r->last_attempt = 1;
    n = s->seam->watch_uncommitted(s->w, 1, collect, &c);
    if (n > 0)
        log_msg(LOG_WARN, "commit",
                "the child exited 0; step %" PRIu64 " (%s) is not in the "
                "store (%s): a last attempt",
                c.step, c.names, r->last_error[0] ? r->last_error : "not committed yet");
    cJSON_Delete(c.entries);
    return n > 0;
}

void sup_report_outcome(struct sup *s, int *rc, const char **state)
{
    struct sup_report *r = &s->rep;
    struct collected c = { NULL, 0, 0, "" };

    if (strcmp(*state, "completed") != 0 || !s->w || s->ns)
        goto out;
    if (!(c.entries = cJSON_CreateArray()))
        goto out;
    if (s->seam->watch_uncommitted(s->w, 0, collect, &c) == 0)
        goto out;
    r->uncommitted = 1;
    r->uncommitted_step = c.step;
    cJSON_Delete(r->uncommitted_entries);
    r->uncommitted_entries = c.entries;
    c.entries = NULL;
    *rc = EXIT_STOPPED_LOST;
    *state = "uncommitted";
    log_msg(LOG_ERROR, "exit",
            "the child exited 0, but step %" PRIu64 " (%s) is still not in "
            "the store after a last attempt (%s): exit %d, state uncommitted. It is still in %s: "
            "`ckptrun recover` on this machine commits it before anything else (the last line "
            "says how)",
            c.step, c.names, r->last_error[0] ? r->last_error : "not committed", EXIT_STOPPED_LOST,
            s->dir);
out:
    if (!r->saw_checkpoint && !s->lease_lost && s->stop.phase == P_RUN && !s->child_writes)
        log_msg(LOG_WARN, "exit",
                "the child wrote no checkpoint: nothing complete appeared in %s "
                "and it saved nothing through libckpt%s",
                s->dir, s->last_step >= 0 ? "" : "; the store holds none of this run");
    cJSON_Delete(c.entries);
}

void sup_report_final_why(struct sup *s, cJSON *f)
{
    struct sup_report *r = &s->rep;
    const struct stop_state *st = &s->stop;
    char *w = r->final_why;
    size_t n = sizeof r->final_why;

    if (st->failed_since_stop || (r->last_error_mono && r->last_error_mono >= st->t0))
        snprintf(w, n, "a commit failed since the stop (%.300s)", r->last_error);
    else if (s->w && s->seam->watch_busy(s->w))
        snprintf(w, n, "its commit was still in flight at the deadline");
    else if (st->via == CH_NONE && r->unreachable)
        snprintf(w, n,
                 "no request could reach the trainer (no --signal, no helper, `import "
                 "ckpt` or libckpt connection)%s",
                 s->last_step < 0 ? " and nothing complete is in CKPT_DIR" : "");
    else if (st->via == CH_NONE)
        snprintf(w, n, "the trainer could not be asked, and nothing complete is in CKPT_DIR");
    else
        snprintf(w, n,
                 "the trainer was asked (%s) but no checkpoint it wrote after the request "
                 "committed in time",
                 st->via == CH_SIGNAL ? ckpt__signal_name(s->o->sig) : "over the socket");
    if (s->last_step < 0 && strlen(w) + 40 < n)
        strcat(w, "; the run has no committed checkpoint");
    if (f)
        cJSON_AddStringToObject(f, "why", w);
}

cJSON *sup_report_run_fields(struct sup *s, const char *state)
{
    struct sup_report *r = &s->rep;
    cJSON *j = cJSON_CreateObject(), *e;

    if (!j)
        return NULL;
    cJSON_AddNumberToObject(j, "commit_failures", (double)(r->failures_before + r->failures));
    if (r->last_error_ms && (e = cJSON_AddObjectToObject(j, "last_error"))) {
        cJSON_AddNumberToObject(e, "step", (double)r->last_error_step);
        cJSON_AddStringToObject(e, "error", r->last_err);
        cJSON_AddStringToObject(e, "detail", r->last_detail);
        cJSON_AddNumberToObject(e, "time_ms", (double)r->last_error_ms);
    } else if (r->prev_error) {
        cJSON_AddItemToObject(j, "last_error", cJSON_Duplicate(r->prev_error, 1));
    }
    if (strcmp(state, "uncommitted") == 0 && r->uncommitted_entries &&
        (e = cJSON_AddObjectToObject(j, "uncommitted"))) {
        cJSON_AddNumberToObject(e, "step", (double)r->uncommitted_step);
        cJSON_AddStringToObject(e, "host", record_host(s->rec));
        cJSON_AddStringToObject(e, "dir", s->dir);
        cJSON_AddItemToObject(e, "entries", cJSON_Duplicate(r->uncommitted_entries, 1));
    }
    return j;
}

/* "ckptrun" when PATH finds this very program, else its absolute path. */
static void self_name(char *buf, size_t n)
{
    char exe[PATH_MAX], cand[PATH_MAX + 16], real[PATH_MAX];
    const char *path = getenv("PATH");
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);

    snprintf(buf, n, "ckptrun");
    if (len <= 0)
        return;
    exe[len] = '\0';
    while (path && *path) {
        size_t k = strcspn(path, ":");
        snprintf(cand, sizeof cand, "%.*s/ckptrun", (int)k, path);
        if (k && access(cand, X_OK) == 0 && realpath(cand, real))
            if (strcmp(real, exe) == 0)
                return; /* the first one PATH finds is us */
        if (k && access(cand, X_OK) == 0)
            break; /* another ckptrun comes first */
        path += k + (path[k] == ':');
    }
    snprintf(buf, n, "%s", exe);
}

void sup_report_end(struct sup *s, const char *state, int rc)
{
    struct sup_report *r = &s->rep;
    char outcome[1024], step[48], self[PATH_MAX], cwd[PATH_MAX], *resume = NULL;
    char notes[300] = "";
    int final_failed = 0; /* a final checkpoint was asked for and did not commit */
    cJSON *f = cJSON_CreateObject();

    if (s->last_step >= 0)
        snprintf(step, sizeof step, "newest committed step %" PRId64, s->last_step);
    else
        snprintf(step, sizeof step, "nothing committed");
    if (strcmp(state, "completed") == 0)
        snprintf(outcome, sizeof outcome, "completed");
    else if (strcmp(state, "uncommitted") == 0)
        snprintf(outcome, sizeof outcome,
                 "ended by itself (exit 0) but step %" PRIu64 " is not "
                 "in the store (%.400s)",
                 r->uncommitted_step, r->last_error[0] ? r->last_error : "not committed");
    else if (strcmp(state, "preempted") == 0 || strcmp(state, "stopped") == 0) {
        /* A preemption, or a user's stop (Ctrl-C, scancel): both ask for a
         * final checkpoint and say how it went -- but a SIGINT that reached
         * the child without ckptrun asked for none. */
        int user = strcmp(state, "stopped") == 0;
        const char *who = user ? "stopped by its user" : "stopped";
        const char *sig = s->stop.reason[0] || !user ? s->stop.reason : "SIGINT";
        if (user && !s->stop.final_done)
            snprintf(outcome, sizeof outcome, "%s (%s)", who, sig);
        else if (s->stop.final_ok)
            snprintf(outcome, sizeof outcome, "%s (%s), final checkpoint committed", who, sig);
        else {
            final_failed = 1;
            snprintf(outcome, sizeof outcome, "%s (%s), final checkpoint not committed: %s", who,
                     sig, r->final_why[0] ? r->final_why : "it failed");
        }
    } else if (strcmp(state, "lost") == 0)
        snprintf(outcome, sizeof outcome, "lost its lease: another runner has the run now");
    else
        snprintf(outcome, sizeof outcome, "failed");
    if (r->unreachable)
        snprintf(notes, sizeof notes,
                 "; no checkpoint request could reach the trainer "
                 "(%" PRIu64 " tried)",
                 r->unreachable);
    if (!r->saw_checkpoint && !s->child_writes) {
        size_t len = strlen(notes);
        snprintf(notes + len, sizeof notes - len, "; the trainer wrote no checkpoint into %.200s",
                 s->dir);
    }
    if (strcmp(state, "completed") != 0 && strcmp(state, "lost") != 0) {
        self_name(self, sizeof self);
        resume = resume_command(s->o, self, getcwd(cwd, sizeof cwd), s->dir,
                                strcmp(state, "stopped") == 0);
    }
    if (f) {
        cJSON_AddStringToObject(f, "run", s->o->run);
        cJSON_AddStringToObject(f, "state", state);
        cJSON_AddNumberToObject(f, "code", rc);
        if (s->last_step >= 0)
            cJSON_AddNumberToObject(f, "step", (double)s->last_step);
        else
            cJSON_AddNullToObject(f, "step");
        if (strcmp(state, "uncommitted") == 0)
            cJSON_AddNumberToObject(f, "uncommitted_step", (double)r->uncommitted_step);
        if (final_failed || (r->final_why[0] && rc == EXIT_STOPPED_LOST))
            cJSON_AddStringToObject(f, "why", r->final_why[0] ? r->final_why : "it failed");
        if (r->failures)
            cJSON_AddNumberToObject(f, "commit_failures", (double)r->failures);
        if (r->unreachable)
            cJSON_AddNumberToObject(f, "unreachable", (double)r->unreachable);
        if (!r->saw_checkpoint && !s->child_writes)
            cJSON_AddBoolToObject(f, "no_checkpoint", 1);
        if (resume)
            cJSON_AddStringToObject(f, "resume", resume);
    }
    log_result(s->recover ? "recover" : "run", f, "%s %s, exit %d: %s%s%s%s", s->o->run, outcome,
               rc, step, notes, resume ? ". Resume: " : "", resume ? resume : "");
    free(resume);
    cJSON_Delete(f);
}
