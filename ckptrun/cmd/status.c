/* cmd/status.c -- `ckptrun status`: the run record: state, lease, preemptions, bytes, time. */
#include "ckptrun.h"
#include "cmd/open.h"
#include "cmd/cmds.h"
#include "record/history.h"
#include "record/lease.h"
#include "base/runlog.h"
#include "base/parse.h"
#include "record/record.h"
#include "cmd/pending_show.h"
#include "ckpt_store.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The state word status shows. It is the record's state; a runner that is
 * gone without saying so is judged from the lease (lease.c decides
 * "stale", docs/ckptrun.md "status"). */
/* The run's state as status shows it: RUN's, except that a RUN saying
 * `running` while no live runner holds the lease (its holder died: stale on
 * this host, or expired) is `stale` (lease_state: the one definition). */
static const char *state_word(const cJSON *run, const struct lease_info *li, int have_lease,
                              int64_t now)
{
    const char *state = run ? field_str(run, "state", "unknown") : "unknown";
    if (strcmp(state, "running") == 0 && have_lease && lease_state(li, now) != LEASE_LIVE)
        state = "stale";
    return state;
}

/* Commits that failed (every failed-commit event; the record's own count
 * when RUN has a larger one) and the newest complete local step the store
 * does not hold: the newest session's failed steps above the newest
 * committed one, or RUN's `uncommitted` (state uncommitted). */
static void add_commit_failures(cJSON *out, const cJSON *run, const struct history *h,
                                const struct ckpt_row *nw)
{
    const cJSON *unc = cJSON_GetObjectItemCaseSensitive(run, "uncommitted");
    double n = field_num(run, "commit_failures", 0), local = h->local_step;
    const char *host = h->local_host, *dir = NULL;
    cJSON *e;

    if ((double)h->commit_failures > n)
        n = (double)h->commit_failures;
    cJSON_AddNumberToObject(out, "commit_failures", n);
    if (h->have_error && (e = cJSON_AddObjectToObject(out, "last_error"))) {
        cJSON_AddNumberToObject(e, "step", h->error_step);
        cJSON_AddNumberToObject(e, "time_ms", (double)h->error_ms);
        cJSON_AddStringToObject(e, "error", h->error);
        cJSON_AddStringToObject(e, "detail", h->detail);
        if (h->error_entry[0])
            cJSON_AddStringToObject(e, "entry", h->error_entry);
    } else if (cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(run, "last_error"))) {
        cJSON_AddItemToObject(
            out, "last_error",
            cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(run, "last_error"), 1));
    }
    if (strcmp(field_str(run, "state", ""), "uncommitted") == 0 && cJSON_IsObject(unc)) {
        local = field_num(unc, "step", local);
        host = field_str(unc, "host", host);
        dir = field_str(unc, "dir", NULL);
    }
    if (local >= 0 && (!nw || local > (double)nw->step) &&
        (e = cJSON_AddObjectToObject(out, "uncommitted"))) {
        cJSON_AddNumberToObject(e, "step", local);
        cJSON_AddStringToObject(e, "host", host);
        if (dir)
            cJSON_AddStringToObject(e, "dir", dir);
    }
}

static void print_failures(const cJSON *out, const struct history *h, int64_t now)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(out, "last_error");
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(out, "uncommitted");
    const cJSON *ls = cJSON_GetObjectItemCaseSensitive(out, "last_step");
    double n = field_num(out, "commit_failures", 0);
    char a[40], newest[32] = "none";

    printf("failures     %" PRIu64, h->failures);
    if (n > 0)
        printf(" run%s, %.0f commit%s", h->failures == 1 ? "" : "s", n, n == 1 ? "" : "s");
    if (cJSON_IsObject(e))
        printf(" (the last %s, step %.0f: %s%s%s)",
               ago((int64_t)field_num(e, "time_ms", 0), now, a, sizeof a), field_num(e, "step", 0),
               field_str(e, "error", "?"), *field_str(e, "detail", "") ? ": " : "",
               field_str(e, "detail", ""));
    printf("\n");
    if (cJSON_IsNumber(ls))
        snprintf(newest, sizeof newest, "step %.0f", ls->valuedouble);
    if (cJSON_IsObject(u))
        printf("uncommitted  step %.0f is complete on %s%s%s but not in the store (newest "
               "committed: %s)\n",
               field_num(u, "step", 0), field_str(u, "host", "?"),
               field_str(u, "dir", NULL) ? " in " : "", field_str(u, "dir", ""), newest);
}

static const struct cmd_form status_form = { .name = "status",
                                             .takes = TAKES_NOTHING,
                                             .flags = CMD_EXISTING_STORE };

int cmd_status(struct opts *o)
{
    struct record *rec = NULL;
    struct ckpt_ctx *ctx = NULL;
    cJSON *run = NULL, *events = NULL, *out = NULL;
    struct rows rows = { 0 };
    const struct ckpt_row *nw = NULL;
    struct lease_info li;
    int have_lease = 0;
    struct history h;
    size_t skipped = 0;
    uint64_t raw = 0;
    int64_t now = ckpt__now_ms();
    char err[CKPT_ERR_MAX] = "", why[CKPT_ERR_MAX + 200];
    ckpt_status st;
    int rc = 0;

    /* the record first: a store that does not answer is said by it */
    if ((rc = cmd_open(o, &status_form, NULL, NULL)) != 0)
        goto out;
    st = record_open(o->store, o->run, &rec, err);
    if (st != CKPT_OK) {
        log_error("status: store %s: %s%s%s", o->store, ckpt_strerror(st), err[0] ? ": " : "", err);
        rc = exit_code_for_status(st);
        goto out;
    }
    st = record_read_run(rec, &run);
    if (st != CKPT_OK && st != CKPT_E_NOENT && st != CKPT_E_CORRUPT) {
        log_error("status: cannot read the run record: %s", ckpt_strerror(st));
        rc = runtime_exit(st);
        goto out;
    }
    if (st == CKPT_E_CORRUPT)
        log_msg(LOG_WARN, "record", "%s/RUN is damaged or of a newer format; ignored", o->run);
    if (record_read_events(rec, 100000, &events, &skipped) != CKPT_OK)
        events = cJSON_CreateArray();
    if (skipped)
        log_msg(LOG_WARN, "record", "%zu event objects unreadable; skipped", skipped);
    have_lease = lease_read(record_store(rec), o->run, &li, NULL, err) == CKPT_OK;
    history_summarize(events, have_lease && lease_state(&li, now) == LEASE_LIVE, &h);
    if ((rc = open_ctx(o, &ctx)) != 0)
        goto out;
    if (ckpt_list(ctx, rows_cb, &rows) != CKPT_OK)
        log_msg(LOG_WARN, "status", "cannot list checkpoints: %s", ckpt_errmsg(ctx));
    if (!run && rows.n == 0 && cJSON_GetArraySize(events) == 0 &&
        (rc = cmd_run_missing(o, why, sizeof why)) != 0) {
        if (why[0])
            log_error("status: %s", why);
        goto out;
    }
    nw = row_newest(&rows);
    for (size_t i = 0; i < rows.n; i++)
        raw += rows.v[i].raw;
    if (!(out = cJSON_CreateObject()))
        goto out;
    cJSON_AddStringToObject(out, "run", o->run);
    cJSON_AddStringToObject(out, "store", o->store);
    cJSON_AddStringToObject(out, "state", state_word(run, &li, have_lease, now));
    /* The lease, when recovery keeps one: who runs the job now. */
    if (have_lease) {
        enum lease_state ls = lease_state(&li, now);
        cJSON *l = cJSON_AddObjectToObject(out, "lease");
        if (l) {
            cJSON_AddStringToObject(l, "holder", li.holder);
            cJSON_AddNumberToObject(l, "epoch", (double)li.epoch);
            cJSON_AddNumberToObject(l, "expires_ms", (double)li.expires_ms);
            cJSON_AddNumberToObject(l, "heartbeat_ms", (double)li.heartbeat_ms);
            cJSON_AddBoolToObject(l, "released", li.released);
            cJSON_AddBoolToObject(l, "live", ls == LEASE_LIVE);
            cJSON_AddStringToObject(l, "state", lease_state_name(ls));
            if (li.job[0]) /* a job of several nodes: its generation */
                cJSON_AddStringToObject(l, "job", li.job);
        }
    }
    if (run) {
        cJSON_AddNumberToObject(out, "updated_ms", field_num(run, "updated_ms", 0));
        cJSON_AddStringToObject(out, "host", field_str(run, "host", ""));
        cJSON_AddNumberToObject(out, "pid", field_num(run, "pid", 0));
        cJSON_AddNumberToObject(out, "epoch", field_num(run, "epoch", 0));
    }
    if (nw) {
        cJSON *c;
        cJSON_AddNumberToObject(out, "last_step", (double)nw->step);
        if ((c = cJSON_AddObjectToObject(out, "newest"))) {
            cJSON_AddNumberToObject(c, "step", (double)nw->step);
            cJSON_AddNumberToObject(c, "time_ms", (double)nw->time_ms);
            cJSON_AddNumberToObject(c, "raw_bytes", (double)nw->raw);
            cJSON_AddNumberToObject(c, "stored_bytes", (double)nw->stored);
            cJSON_AddNumberToObject(c, "items", (double)nw->items);
        }
    } else {
        cJSON_AddNullToObject(out, "last_step");
    }
    if (nw && nw->world > 1)
        cJSON_AddNumberToObject(cJSON_GetObjectItemCaseSensitive(out, "newest"), "world_size",
                                nw->world);
    {
        /* steps of a job of several nodes waiting for parts */
        cJSON *pend = NULL;
        if (pending_json(ctx, &pend) == CKPT_OK)
            cJSON_AddItemToObject(out, "pending", pend);
    }
    cJSON_AddNumberToObject(out, "checkpoints", (double)rows.n);
    cJSON_AddNumberToObject(out, "checkpoint_bytes", (double)raw);
    cJSON_AddNumberToObject(out, "preemptions", (double)h.stops);
    cJSON_AddNumberToObject(out, "failures", (double)h.failures);
    cJSON_AddNumberToObject(out, "crashes", (double)h.crashes);
    cJSON_AddNumberToObject(out, "sessions", (double)h.sessions);
    cJSON_AddNumberToObject(out, "commits", (double)h.commits);
    cJSON_AddNumberToObject(out, "committed_bytes", (double)h.commit_bytes);
    cJSON_AddNumberToObject(out, "stored_bytes", (double)h.commit_stored);
    if (h.have_last) {
        cJSON *c = cJSON_AddObjectToObject(out, "last_commit");
        if (c) {
            cJSON_AddNumberToObject(c, "step", h.last_step);
            cJSON_AddNumberToObject(c, "time_ms", (double)h.last_ms);
            cJSON_AddNumberToObject(c, "bytes", h.last_bytes);
            cJSON_AddNumberToObject(c, "stored", h.last_stored);
            cJSON_AddNumberToObject(c, "seconds", h.last_seconds);
            cJSON_AddNumberToObject(c, "bytes_per_s", h.last_seconds > 0
                                    ? (double)(int64_t)(h.last_bytes / h.last_seconds) : 0);
        }
    }
    cJSON_AddNumberToObject(out, "run_ms", (double)h.run_ms);
    cJSON_AddNumberToObject(out, "lost_ms", (double)h.lost_ms);
    add_commit_failures(out, run, &h, nw);
    if (o->json) {
        print_json(out);
    } else {
        char a[40], b[40], c[40], d[40];
        const cJSON *l = cJSON_GetObjectItemCaseSensitive(out, "lease");
        printf("run          %s\n", o->run);
        printf("store        %s\n", o->store);
        printf("state        %s\n", field_str(out, "state", "unknown"));
        if (run) {
            int64_t up = (int64_t)field_num(run, "updated_ms", 0);
            printf("updated      %s (%s) by %s pid %.0f\n", iso_time(up, a, sizeof a),
                   ago(up, now, b, sizeof b), field_str(run, "host", "?"),
                   field_num(run, "pid", 0));
        }
        if (l) {
            int rel = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(l, "released"));
            int64_t hb = (int64_t)field_num(l, "heartbeat_ms", 0),
                    ex = (int64_t)field_num(l, "expires_ms", 0);
            printf("lease        %s, epoch %.0f, %s\n", field_str(l, "holder", "?"),
                   field_num(l, "epoch", 0), field_str(l, "state", "?"));
            printf("heartbeat    %s (%s)\n", iso_time(hb, a, sizeof a), ago(hb, now, b, sizeof b));
            if (!rel)
                printf("expiry       %s (%s)\n", iso_time(ex, a, sizeof a),
                       ago(ex, now, b, sizeof b));
        } else {
            printf("lease        none\n");
        }
        if (nw) {
            printf("newest       step %" PRIu64 ", %s (%s), %" PRIu64 " items, %s (%s stored)\n",
                   nw->step, iso_time(nw->time_ms, a, sizeof a), ago(nw->time_ms, now, b, sizeof b),
                   nw->items, ckpt__fmt_bytes(nw->raw, c, sizeof c),
                   ckpt__fmt_bytes(nw->stored, d, sizeof d));
            printf("checkpoints  %zu retained (steps %" PRIu64 "..%" PRIu64 "), %s\n", rows.n,
                   rows.v[rows.n - 1].step, rows.v[0].step, ckpt__fmt_bytes(raw, a, sizeof a));
        } else {
            printf("checkpoints  none\n");
        }
        pending_print(stdout, cJSON_GetObjectItemCaseSensitive(out, "pending"), "pending");
        if (h.have_last) {
            double rate = h.last_seconds > 0 ? h.last_bytes / h.last_seconds : 0;
            printf("last commit  step %.0f %s: %s, %s new, %s in %.1fs\n", h.last_step,
                   ago(h.last_ms, now, a, sizeof a),
                   ckpt__fmt_bytes((uint64_t)h.last_bytes, b, sizeof b),
                   ckpt__fmt_bytes((uint64_t)h.last_stored, c, sizeof c),
                   ckpt__fmt_rate(rate, d, sizeof d), h.last_seconds);
        }
        printf("commits      %" PRIu64 " (%s, %s new stored)\n", h.commits,
               ckpt__fmt_bytes(h.commit_bytes, a, sizeof a),
               ckpt__fmt_bytes(h.commit_stored, b, sizeof b));
        printf("preemptions  %" PRIu64 "\n", h.stops);
        print_failures(out, &h, now);
        if (h.crashes)
            printf("crashes      %" PRIu64 " (runners that ended without a word: SIGKILL, a "
                   "lost machine)\n", h.crashes);
        printf("run time     %s in %" PRIu64 " session%s\n",
               ckpt__fmt_duration(h.run_ms, c, sizeof c), h.sessions, h.sessions == 1 ? "" : "s");
        printf("lost work    %s (estimate, %" PRIu64 " stop%s, %" PRIu64 " failure%s, %" PRIu64
               " crash%s: training done after a session's last commit, or its start, until it "
               "stopped, failed or was last heard of; a resume redoes it)\n",
               ckpt__fmt_duration(h.lost_ms, a, sizeof a), h.stops, h.stops == 1 ? "" : "s",
               h.failures, h.failures == 1 ? "" : "s", h.crashes, h.crashes == 1 ? "" : "es");
        if (h.uncommitted_ends)
            printf("             %" PRIu64 " end%s with the newest checkpoint not in the store "
                   "count too\n",
                   h.uncommitted_ends, h.uncommitted_ends == 1 ? "" : "s");
    }
out:
    cJSON_Delete(out);
    cJSON_Delete(run);
    cJSON_Delete(events);
    free(rows.v);
    record_close(rec);
    cmd_close(ctx);
    return rc;
}
