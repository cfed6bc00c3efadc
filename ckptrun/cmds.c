/*
 * cmds.c -- the administration commands: save, restore, ls, verify, gc,
 * status. Each opens what it needs, does one thing, and returns the exit
 * code; errors are one line on stderr.
 */
#include "ckptrun.h"
#include "commit.h"
#include "lease.h"
#include "log.h"
#include "parse.h"
#include "record.h"
#include "store.h"

#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Exit code of a command that failed after starting. */
#define EXIT_FAIL 1

int mkdir_owner(const char *path)
{
    char p[4096];
    size_t len = strlen(path);
    struct stat sb;
    int rc = -1;

    if (len == 0 || len >= sizeof p) {
        errno = ENAMETOOLONG;
        goto out;
    }
    memcpy(p, path, len + 1);
    for (char *s = p + 1; ; s++) {
        if (*s == '/' || *s == '\0') {
            char c = *s;
            *s = '\0';
            if (mkdir(p, 0700) != 0 && errno != EEXIST)
                goto out;
            *s = c;
            if (!c)
                break;
        }
    }
    if (stat(path, &sb) != 0)
        goto out;
    if (!S_ISDIR(sb.st_mode)) {
        errno = ENOTDIR;
        goto out;
    }
    rc = 0;
out:
    return rc;
}

static int runtime_exit(ckpt_status st)
{
    return st == CKPT_E_UNREACHABLE ? EXIT_UNAVAILABLE
         : (st == CKPT_E_AUTH || st == CKPT_E_CONFIG || st == CKPT_E_PERM) ? EXIT_CONFIG
                                                                            : EXIT_FAIL;
}

/* ---- save ------------------------------------------------------------------ */

int cmd_save(struct opts *o)
{
    struct ckpt_ctx *ctx = NULL;
    struct record *rec = NULL;
    struct commit_src *src = NULL;
    char **names = NULL;
    struct commit_result res;
    char err[CKPT_ERR_MAX] = "";
    cJSON *f = NULL;
    struct stat sb;
    int rc = 0;

    if (!o->step_set) {
        log_error("save needs --step N (see ckptrun save --help)");
        rc = EXIT_USAGE;
        goto out;
    }
    if (o->nargs < 1) {
        log_error("save needs at least one PATH (see ckptrun save --help)");
        rc = EXIT_USAGE;
        goto out;
    }
    src = calloc((size_t)o->nargs, sizeof *src);
    names = calloc((size_t)o->nargs, sizeof *names);
    if (!src || !names) {
        log_error("out of memory");
        rc = EXIT_FAIL;
        goto out;
    }
    for (int i = 0; i < o->nargs; i++) {
        char tmp[4096];
        size_t l = strlen(o->args[i]);
        if (stat(o->args[i], &sb) != 0) {
            log_error("save: %s: %s", o->args[i], strerror(errno));
            rc = EXIT_USAGE;
            goto out;
        }
        /* Item names are relative to PATH's parent: its basename. */
        snprintf(tmp, sizeof tmp, "%s", o->args[i]);
        while (l > 1 && tmp[l - 1] == '/')
            tmp[--l] = '\0';
        names[i] = strdup(basename(tmp));
        if (!names[i] || strcmp(names[i], "/") == 0 || strcmp(names[i], ".") == 0 ||
            strcmp(names[i], "..") == 0) {
            log_error("save: %s: name the directory itself, not '/', '.' or '..'", o->args[i]);
            rc = EXIT_USAGE;
            goto out;
        }
        for (int j = 0; j < i; j++)
            if (strcmp(names[j], names[i]) == 0) {
                log_error("save: two paths have the same name '%s'", names[i]);
                rc = EXIT_USAGE;
                goto out;
            }
        src[i].path = o->args[i];
        src[i].name = names[i];
    }
    if ((rc = open_ctx(o, &ctx)) != 0)
        goto out;
    if (commit_paths(ctx, src, (size_t)o->nargs, o->step, &res) != CKPT_OK) {
        log_error("save: step %" PRIu64 " not committed: %s%s%s", o->step,
                  ckpt_strerror(res.st), res.detail[0] ? ": " : "", res.detail);
        rc = runtime_exit(res.st);
        goto out;
    }
    f = commit_fields(&res, "save");
    log_event(LOG_INFO, "commit", f);
    /* The record is secondary: the checkpoint is committed either way. */
    if (record_open(o->store, o->run, &rec, err) == CKPT_OK) {
        record_mark_files(rec, o->step, (const char *const *)names, (size_t)o->nargs);
        record_event(rec, "commit", f);
    }
out:
    cJSON_Delete(f);
    record_close(rec);
    ckpt_close(ctx);
    for (int i = 0; names && i < o->nargs; i++)
        free(names[i]);
    free(names);
    free(src);
    return rc;
}

/* ---- restore -------------------------------------------------------------- */

static int newest_cb(void *user, const struct ckpt_info *info)
{
    *(uint64_t *)user = info->step;
    return 1;
}

int cmd_restore(struct opts *o)
{
    struct ckpt_ctx *ctx = NULL;
    uint64_t restored = 0, newest = CKPT_STEP_LATEST;
    ckpt_status st;
    int rc = 0;

    if (o->nargs != 1) {
        log_error("restore needs exactly one DIR (see ckptrun restore --help)");
        rc = EXIT_USAGE;
        goto out;
    }
    if (mkdir_owner(o->args[0]) != 0) {
        log_error("restore: cannot create %s: %s", o->args[0], strerror(errno));
        rc = EXIT_CONFIG;
        goto out;
    }
    if ((rc = open_ctx(o, &ctx)) != 0)
        goto out;
    if (!o->step_set)
        ckpt_list(ctx, newest_cb, &newest); /* only to notice a fallback */
    st = ckpt_restore_dir(ctx, o->step_set ? o->step : CKPT_STEP_LATEST, o->args[0], &restored);
    if (st != CKPT_OK) {
        if (st == CKPT_E_NOENT && o->step_set)
            log_error("restore: run %s has no committed checkpoint at step %" PRIu64, o->run,
                      o->step);
        else if (st == CKPT_E_NOENT)
            log_error("restore: run %s has no committed checkpoint", o->run);
        else
            log_error("restore: %s: %s", ckpt_strerror(st), ckpt_errmsg(ctx));
        rc = runtime_exit(st);
        goto out;
    }
    if (!o->step_set && newest != CKPT_STEP_LATEST && restored != newest)
        log_msg(LOG_WARN, "fallback",
                "newest checkpoint (step %" PRIu64 ") is damaged; restored step %" PRIu64
                " instead", newest, restored);
    {
        cJSON *f = cJSON_CreateObject();
        if (f) {
            cJSON_AddNumberToObject(f, "step", (double)restored);
            cJSON_AddStringToObject(f, "dir", o->args[0]);
        }
        log_event(LOG_INFO, "restore", f);
        cJSON_Delete(f);
    }
out:
    ckpt_close(ctx);
    return rc;
}

/* ---- ls --------------------------------------------------------------------- */

struct ls_ctx {
    int json;
    cJSON *arr;
    int header;
};

static int ls_cb(void *user, const struct ckpt_info *i)
{
    struct ls_ctx *l = user;
    char ts[40], raw[32], stored[32], nw[32];

    if (l->json) {
        cJSON *o = cJSON_CreateObject();
        if (!o)
            return 1;
        cJSON_AddNumberToObject(o, "step", (double)i->step);
        cJSON_AddNumberToObject(o, "seq", (double)i->seq);
        cJSON_AddNumberToObject(o, "epoch", (double)i->epoch);
        cJSON_AddNumberToObject(o, "time_ms", (double)i->time_ms);
        cJSON_AddNumberToObject(o, "items", (double)i->items);
        cJSON_AddNumberToObject(o, "raw_bytes", (double)i->raw_bytes);
        cJSON_AddNumberToObject(o, "stored_bytes", (double)i->stored_bytes);
        cJSON_AddNumberToObject(o, "new_bytes", (double)i->new_bytes);
        cJSON_AddNumberToObject(o, "chunks", (double)i->chunks);
        if (i->manifest)
            cJSON_AddStringToObject(o, "manifest", i->manifest);
        cJSON_AddItemToArray(l->arr, o);
        return 0;
    }
    if (!l->header) {
        printf("%-12s %-24s %7s %10s %10s %10s\n", "STEP", "COMMITTED", "ITEMS", "RAW", "STORED",
               "NEW");
        l->header = 1;
    }
    printf("%-12" PRIu64 " %-24s %7" PRIu64 " %10s %10s %10s\n", i->step,
           iso_time(i->time_ms, ts, sizeof ts), i->items,
           fmt_bytes(i->raw_bytes, raw, sizeof raw), fmt_bytes(i->stored_bytes, stored, sizeof stored),
           fmt_bytes(i->new_bytes, nw, sizeof nw));
    return 0;
}

static void run_name_cb(void *user, const char *run)
{
    cJSON *arr = user;
    if (arr)
        cJSON_AddItemToArray(arr, cJSON_CreateString(run));
    else
        printf("%s\n", run);
}

static void print_json(cJSON *j)
{
    char *s = cJSON_Print(j);
    if (s)
        printf("%s\n", s);
    free(s);
}

int cmd_ls(struct opts *o)
{
    struct ckpt_ctx *ctx = NULL;
    struct ckpt_store *st = NULL;
    struct ls_ctx l = { o->json, NULL, 0 };
    char err[CKPT_ERR_MAX] = "";
    ckpt_status s;
    int rc = 0;

    if (o->nargs) {
        log_error("ls takes no arguments (got '%s'; see ckptrun ls --help)", o->args[0]);
        rc = EXIT_USAGE;
        goto out;
    }
    if (o->json && !(l.arr = cJSON_CreateArray())) {
        rc = EXIT_FAIL;
        goto out;
    }
    if (!o->run) {
        s = ckpt_store_open(o->store, NULL, &st, err);
        if (s == CKPT_OK)
            s = record_list_runs(st, run_name_cb, l.arr, err);
        if (s != CKPT_OK) {
            log_error("ls: store %s: %s%s%s", o->store, ckpt_strerror(s), err[0] ? ": " : "", err);
            rc = exit_code_for_status(s);
            goto out;
        }
    } else {
        if ((rc = open_ctx(o, &ctx)) != 0)
            goto out;
        s = ckpt_list(ctx, ls_cb, &l);
        if (s != CKPT_OK) {
            log_error("ls: run %s: %s: %s", o->run, ckpt_strerror(s), ckpt_errmsg(ctx));
            rc = runtime_exit(s);
            goto out;
        }
    }
    if (l.arr)
        print_json(l.arr);
out:
    cJSON_Delete(l.arr);
    ckpt_close(ctx);
    if (st)
        ckpt_store_close(st);
    return rc;
}

/* ---- verify ----------------------------------------------------------------- */

int cmd_verify(struct opts *o)
{
    struct ckpt_ctx *ctx = NULL;
    ckpt_status st;
    int rc = 0;

    if (o->nargs) {
        log_error("verify takes no arguments (use --step N; see ckptrun verify --help)");
        rc = EXIT_USAGE;
        goto out;
    }
    if ((rc = open_ctx(o, &ctx)) != 0)
        goto out;
    st = ckpt_verify(ctx, o->step_set ? o->step : CKPT_STEP_ALL);
    if (st == CKPT_E_NOENT) {
        log_error("verify: run %s has no committed checkpoint%s", o->run,
                  o->step_set ? " at that step" : "");
        rc = EXIT_FAIL;
    } else if (st != CKPT_OK) {
        log_error("verify: %s: %s", ckpt_strerror(st), ckpt_errmsg(ctx));
        rc = runtime_exit(st);
    } else {
        log_msg(LOG_INFO, "verified", "run %s: %s intact", o->run,
                o->step_set ? "checkpoint" : "every committed checkpoint");
    }
out:
    ckpt_close(ctx);
    return rc;
}

/* ---- gc --------------------------------------------------------------------- */

struct steps {
    uint64_t *v;
    size_t n, cap;
};

static int steps_cb(void *user, const struct ckpt_info *info)
{
    struct steps *s = user;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 32;
        uint64_t *v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return 1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = info->step;
    return 0;
}

static int step_kept(void *user, uint64_t step)
{
    struct steps *s = user;
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i] == step)
            return 1;
    return 0;
}

static void gc_show(void *user, const char *key, uint64_t size, const char *why)
{
    const struct opts *o = user;
    if (o->dry_run)
        printf("would delete %s (%" PRIu64 " bytes): %s\n", key, size, why);
    else
        log_msg(LOG_DEBUG, "gc", "delete %s (%" PRIu64 " bytes): %s", key, size, why);
}

int cmd_gc(struct opts *o)
{
    struct ckpt_ctx *ctx = NULL;
    struct record *rec = NULL;
    struct steps kept = { 0 };
    uint64_t deleted = 0, marks = 0;
    char err[CKPT_ERR_MAX] = "";
    ckpt_status st;
    int rc = 0;

    if (o->nargs) {
        log_error("gc takes no arguments (see ckptrun gc --help)");
        rc = EXIT_USAGE;
        goto out;
    }
    if ((rc = open_ctx(o, &ctx)) != 0)
        goto out;
    st = ckpt_gc_ex(ctx, o->keep, o->min_age_ms, o->dry_run ? CKPT_GC_DRY_RUN : 0, gc_show, o,
                    &deleted);
    if (st == CKPT_OK && o->dry_run) {
        log_msg(LOG_INFO, "gc", "dry run: %" PRIu64 " objects would be deleted", deleted);
        goto out;
    }
    if (st != CKPT_OK) {
        log_error("gc: %s: %s", ckpt_strerror(st), ckpt_errmsg(ctx));
        rc = runtime_exit(st);
        goto out;
    }
    /* Drop ckptrun's "files" marks of checkpoints that no longer exist. A
     * failed listing leaves them: they are only consulted for listed steps. */
    if (ckpt_list(ctx, steps_cb, &kept) == CKPT_OK &&
        record_open(o->store, o->run, &rec, err) == CKPT_OK)
        record_prune_files(rec, step_kept, &kept, &marks);
    {
        cJSON *f = cJSON_CreateObject();
        if (f) {
            cJSON_AddNumberToObject(f, "keep", o->keep);
            cJSON_AddNumberToObject(f, "deleted", (double)(deleted + marks));
            cJSON_AddNumberToObject(f, "retained", (double)kept.n);
        }
        log_event(LOG_INFO, "gc", f);
        cJSON_Delete(f);
    }
out:
    free(kept.v);
    record_close(rec);
    ckpt_close(ctx);
    return rc;
}

/* ---- status ------------------------------------------------------------------- */

struct ckpt_sum {
    uint64_t count, raw, stored;
    int64_t newest_step, oldest_step;
};

static int sum_cb(void *user, const struct ckpt_info *i)
{
    struct ckpt_sum *s = user;
    if (s->count == 0)
        s->newest_step = (int64_t)i->step;
    s->oldest_step = (int64_t)i->step;
    s->count++;
    s->raw += i->raw_bytes;
    s->stored += i->new_bytes;
    return 0;
}

static double num(const cJSON *o, const char *k, double dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

static const char *str(const cJSON *o, const char *k, const char *dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : dflt;
}

/* Figures derived from the event history. A "session" is one ckptrun
 * process (host + pid): its running time is from its start event to its last
 * event; the work lost at a stop or failure is the time since the session's
 * last commit (or its start when it committed nothing). */
struct history {
    uint64_t commits, commit_bytes, commit_stored, stops, failures, sessions;
    uint64_t run_ms, lost_ms;
};

static void summarize(const cJSON *events, struct history *h)
{
    const cJSON *ev;
    char cur[128] = "";
    int64_t start = 0, last = 0, last_commit = 0;
    int open = 0, had_start = 0;

    memset(h, 0, sizeof *h);
    /* Events are sorted by time; sessions do not overlap (one live runner),
     * so a change of host/pid closes the previous session. */
    cJSON_ArrayForEach(ev, events) {
        char id[128];
        const char *type = str(ev, "type", "");
        int64_t t = (int64_t)num(ev, "time_ms", 0);
        snprintf(id, sizeof id, "%s/%.0f", str(ev, "host", "?"), num(ev, "pid", 0));
        /* (a runner's `lease` event comes before its `start`: same session) */
        if ((strcmp(type, "start") == 0 && had_start) || strcmp(id, cur) != 0) {
            if (open)
                h->run_ms += (uint64_t)(last - start);
            snprintf(cur, sizeof cur, "%s", id);
            start = last = last_commit = t;
            open = 1;
            had_start = 0;
            h->sessions++;
        }
        if (strcmp(type, "start") == 0)
            had_start = 1;
        last = t;
        if (strcmp(type, "commit") == 0) {
            h->commits++;
            h->commit_bytes += (uint64_t)num(ev, "bytes", 0);
            h->commit_stored += (uint64_t)num(ev, "stored", 0);
            last_commit = t;
        } else if (strcmp(type, "stop") == 0) {
            h->stops++;
            h->lost_ms += (uint64_t)(t - last_commit);
        } else if (strcmp(type, "exit") == 0 && (strcmp(str(ev, "state", ""), "failed") == 0 ||
                                                 strcmp(str(ev, "state", ""), "lost") == 0)) {
            h->failures++;
            h->lost_ms += (uint64_t)(t - last_commit);
        }
    }
    if (open)
        h->run_ms += (uint64_t)(last - start);
}

int cmd_status(struct opts *o)
{
    struct record *rec = NULL;
    struct ckpt_ctx *ctx = NULL;
    cJSON *run = NULL, *events = NULL, *out = NULL;
    struct ckpt_sum cs = { 0, 0, 0, -1, -1 };
    struct history h;
    size_t skipped = 0;
    char err[CKPT_ERR_MAX] = "";
    ckpt_status st;
    int rc = 0;

    if (o->nargs) {
        log_error("status takes no arguments (see ckptrun status --help)");
        rc = EXIT_USAGE;
        goto out;
    }
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
    summarize(events, &h);
    if ((rc = open_ctx(o, &ctx)) != 0)
        goto out;
    if (ckpt_list(ctx, sum_cb, &cs) != CKPT_OK)
        log_msg(LOG_WARN, "status", "cannot list checkpoints: %s", ckpt_errmsg(ctx));
    if (!run && cs.count == 0 && cJSON_GetArraySize(events) == 0) {
        log_error("status: run %s not found in %s", o->run, o->store);
        rc = EXIT_FAIL;
        goto out;
    }
    if (!(out = cJSON_CreateObject()))
        goto out;
    cJSON_AddStringToObject(out, "run", o->run);
    cJSON_AddStringToObject(out, "store", o->store);
    /* The lease, when recovery keeps one: who runs the job now. A RUN
     * that says `running` while no live runner holds the lease (its holder
     * died: stale on this host, or expired) is shown as `stale`. */
    {
        struct lease_info li;
        char lerr[CKPT_ERR_MAX] = "";
        const char *state = run ? str(run, "state", "unknown") : "unknown";
        if (lease_read(record_store(rec), o->run, &li, NULL, lerr) == CKPT_OK) {
            enum lease_state ls = lease_state(&li, now_ms());
            cJSON *l = cJSON_AddObjectToObject(out, "lease");
            if (l) {
                cJSON_AddStringToObject(l, "holder", li.holder);
                cJSON_AddNumberToObject(l, "epoch", (double)li.epoch);
                cJSON_AddNumberToObject(l, "expires_ms", (double)li.expires_ms);
                cJSON_AddNumberToObject(l, "heartbeat_ms", (double)li.heartbeat_ms);
                cJSON_AddBoolToObject(l, "released", li.released);
                cJSON_AddBoolToObject(l, "live", ls == LEASE_LIVE);
                cJSON_AddStringToObject(l, "state", lease_state_name(ls));
            }
            if (strcmp(state, "running") == 0 && ls != LEASE_LIVE)
                state = "stale";
        }
        cJSON_AddStringToObject(out, "state", state);
    }
    if (run) {
        cJSON_AddNumberToObject(out, "updated_ms", num(run, "updated_ms", 0));
        cJSON_AddStringToObject(out, "host", str(run, "host", ""));
        cJSON_AddNumberToObject(out, "pid", num(run, "pid", 0));
        cJSON_AddNumberToObject(out, "epoch", num(run, "epoch", 0));
    }
    if (cs.newest_step >= 0)
        cJSON_AddNumberToObject(out, "last_step", (double)cs.newest_step);
    else
        cJSON_AddNullToObject(out, "last_step");
    cJSON_AddNumberToObject(out, "checkpoints", (double)cs.count);
    cJSON_AddNumberToObject(out, "checkpoint_bytes", (double)cs.raw);
    cJSON_AddNumberToObject(out, "preemptions", (double)h.stops);
    cJSON_AddNumberToObject(out, "failures", (double)h.failures);
    cJSON_AddNumberToObject(out, "sessions", (double)h.sessions);
    cJSON_AddNumberToObject(out, "commits", (double)h.commits);
    cJSON_AddNumberToObject(out, "committed_bytes", (double)h.commit_bytes);
    cJSON_AddNumberToObject(out, "stored_bytes", (double)h.commit_stored);
    cJSON_AddNumberToObject(out, "run_ms", (double)h.run_ms);
    cJSON_AddNumberToObject(out, "lost_ms", (double)h.lost_ms);
    if (o->json) {
        print_json(out);
    } else {
        char a[40], b[40], c[40];
        printf("run          %s\n", o->run);
        printf("store        %s\n", o->store);
        printf("state        %s\n", str(out, "state", "unknown"));
        if (run)
            printf("updated      %s by %s pid %.0f\n",
                   iso_time((int64_t)num(run, "updated_ms", 0), a, sizeof a), str(run, "host", "?"),
                   num(run, "pid", 0));
        {
            const cJSON *l = cJSON_GetObjectItemCaseSensitive(out, "lease");
            if (l) {
                int rel = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(l, "released"));
                printf("lease        %s, epoch %.0f, %s\n", str(l, "holder", "?"),
                       num(l, "epoch", 0), str(l, "state", "?"));
                printf("heartbeat    %s\n",
                       iso_time((int64_t)num(l, "heartbeat_ms", 0), a, sizeof a));
                if (!rel)
                    printf("expiry       %s\n",
                           iso_time((int64_t)num(l, "expires_ms", 0), b, sizeof b));
            }
            else
                printf("lease        none\n");
        }
        if (cs.newest_step >= 0)
            printf("checkpoints  %" PRIu64 " (steps %" PRId64 "..%" PRId64 "), %s\n", cs.count,
                   cs.oldest_step, cs.newest_step, fmt_bytes(cs.raw, a, sizeof a));
        else
            printf("checkpoints  none\n");
        printf("preemptions  %" PRIu64 "\n", h.stops);
        printf("failures     %" PRIu64 "\n", h.failures);
        printf("commits      %" PRIu64 " (%s, %s stored)\n", h.commits,
               fmt_bytes(h.commit_bytes, a, sizeof a), fmt_bytes(h.commit_stored, b, sizeof b));
        printf("run time     %s in %" PRIu64 " sessions\n", fmt_duration(h.run_ms, c, sizeof c),
               h.sessions);
        printf("lost work    %s (estimate: last commit to each stop or failure)\n",
               fmt_duration(h.lost_ms, a, sizeof a));
    }
out:
    cJSON_Delete(out);
    cJSON_Delete(run);
    cJSON_Delete(events);
    ckpt_close(ctx);
    record_close(rec);
    return rc;
}
