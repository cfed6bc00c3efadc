/*
 * cmds.c -- the administration commands: save, restore, ls, verify, gc,
 * status. Each opens what it needs, does one thing, and returns the exit
 * code. What each prints (docs/ckptrun.md):
 *   - a failure: one error line (log_error), quoting the library's detail;
 *   - a success: one result line a person reads (log_result; -q hides it),
 *     after a progress line while the work lasts (terminal only);
 *   - with --json: one JSON document on stdout, whatever the outcome.
 * The read-only commands (ls, status, verify) never create a store or a
 * directory; a run that does not exist is an error for each of them.
 */
#include "ckptrun.h"
#include "commit.h"
#include "lease.h"
#include "log.h"
#include "parse.h"
#include "progress.h"
#include "record.h"
#include "ckpt_store.h"

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

static void print_json(cJSON *j)
{
    char *s = cJSON_Print(j);
    if (s)
        printf("%s\n", s);
    fflush(stdout);
    free(s);
}

static double secs_since(int64_t t0)
{
    return (double)(mono_ms() - t0) / 1000.0;
}

/* A file:// store is a directory: opening it creates it, so a read-only
 * command looks first. @return 1 when the store does not exist (said). */
static int file_store_missing(const struct opts *o)
{
    struct stat sb;
    if (strncmp(o->store, "file://", 7) != 0 || stat(o->store + 7, &sb) == 0)
        return 0;
    if (o->run)
        log_error("run %s not found: store %s does not exist", o->run, o->store);
    else
        log_error("store %s does not exist (nothing was saved there)", o->store);
    return 1;
}

int run_exists(const struct opts *o)
{
    static const char *const keys[] = { "HEAD", "RUN" };
    struct ckpt_store *st = NULL;
    char err[CKPT_ERR_MAX] = "", key[512];
    struct stat sb;
    int rc = 0;

    if (strncmp(o->store, "file://", 7) == 0) {
        /* no open: it would create the store's directory */
        for (size_t i = 0; i < 2 && !rc; i++) {
            snprintf(key, sizeof key, "%s/%s/%s", o->store + 7, o->run, keys[i]);
            rc = stat(key, &sb) == 0;
        }
        goto out;
    }
    {
        ckpt_status s = ckpt_store_open(o->store, NULL, &st, err);
        for (size_t i = 0; i < 2 && s == CKPT_OK && !rc; i++) {
            uint64_t size;
            snprintf(key, sizeof key, "%s/%s", o->run, keys[i]);
            s = st->ops->head(st, key, &size, NULL, err);
            if (s == CKPT_OK)
                rc = 1;
            else if (s == CKPT_E_NOENT)
                s = CKPT_OK;
        }
        if (s != CKPT_OK) {
            log_error("store %s: %s%s%s", o->store, ckpt_strerror(s), err[0] ? ": " : "", err);
            rc = -exit_code_for_status(s);
        }
    }
out:
    ckpt_store_close(st);
    return rc;
}

/* The checkpoints of a run, newest first (ckpt_list's order), with the
 * fields the commands report. */
struct ckpt_row {
    uint64_t step, items, raw, stored, new_bytes, chunks;
    int64_t time_ms;
};
struct rows {
    struct ckpt_row *v;
    size_t n, cap;
    int oom;
};

static int rows_cb(void *user, const struct ckpt_info *i)
{
    struct rows *r = user;
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 16;
        struct ckpt_row *v = realloc(r->v, cap * sizeof *v);
        if (!v) {
            r->oom = 1;
            return 1;
        }
        r->v = v;
        r->cap = cap;
    }
    r->v[r->n++] = (struct ckpt_row){ i->step, i->items, i->raw_bytes, i->stored_bytes,
                                      i->new_bytes, i->chunks, i->time_ms };
    return 0;
}

static const struct ckpt_row *row_of(const struct rows *r, uint64_t step)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->v[i].step == step)
            return &r->v[i];
    return NULL;
}

/* The highest step among the listed checkpoints (the one resumed from). */
static const struct ckpt_row *row_newest(const struct rows *r)
{
    const struct ckpt_row *b = NULL;
    for (size_t i = 0; i < r->n; i++)
        if (!b || r->v[i].step > b->step)
            b = &r->v[i];
    return b;
}

/* ---- save ------------------------------------------------------------------ */

int cmd_save(struct opts *o)
{
    struct ckpt_ctx *ctx = NULL;
    struct record *rec = NULL;
    struct commit_src *src = NULL;
    struct progress *pg = NULL;
    struct rows rows = { 0 };
    char **names = NULL;
    struct commit_result res;
    char err[CKPT_ERR_MAX + 64] = "", b1[32], b2[32], b3[32], r1[32];
    cJSON *f = NULL;
    struct stat sb;
    int rc = 0;

    memset(&res, 0, sizeof res);
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
    log_lib_hold();
    if ((rc = open_ctx(o, &ctx)) != 0)
        goto out;
    /* "Newest" is the highest step: a lower one would never be resumed from,
     * and retention would count it among the kept ones. */
    if (ckpt_list(ctx, rows_cb, &rows) == CKPT_OK && !o->force) {
        const struct ckpt_row *nw = row_newest(&rows);
        if (rows.oom) {
            log_error("save: out of memory listing run %s's checkpoints", o->run);
            rc = EXIT_FAIL;
            goto out;
        }
        if (nw && o->step < nw->step) {
            log_error("save: step %" PRIu64 " is lower than run %s's newest checkpoint (step %"
                      PRIu64 "), which is what run and recover resume from; --force commits "
                      "it anyway", o->step, o->run, nw->step);
            rc = EXIT_USAGE;
            goto out;
        }
    }
    pg = progress_start(ctx, "save");
    if (commit_paths(ctx, src, (size_t)o->nargs, o->step, &res) != CKPT_OK) {
        progress_stop(pg);
        pg = NULL;
        snprintf(err, sizeof err, "%s%s%.511s", ckpt_strerror(res.st),
                 res.detail[0] ? ": " : "", res.detail);
        log_error("save: step %" PRIu64 " not committed: %s", o->step, err);
        rc = runtime_exit(res.st);
        goto out;
    }
    progress_stop(pg);
    pg = NULL;
    log_lib_release(NULL);
    f = commit_fields(&res, "save");
    /* The record is secondary: the checkpoint is committed either way. */
    if (record_open(o->store, o->run, &rec, err) == CKPT_OK) {
        record_mark_files(rec, o->step, (const char *const *)names, (size_t)o->nargs);
        record_event(rec, "commit", f);
    }
    {
        double rate = res.seconds > 0 ? (double)res.raw_bytes / res.seconds : 0;
        cJSON *j = cJSON_CreateObject();
        if (j) {
            cJSON_AddStringToObject(j, "run", o->run);
            cJSON_AddNumberToObject(j, "step", (double)res.step);
            cJSON_AddNumberToObject(j, "files", (double)res.files);
            cJSON_AddNumberToObject(j, "raw_bytes", (double)res.raw_bytes);
            cJSON_AddNumberToObject(j, "stored_bytes", (double)res.stored_bytes);
            cJSON_AddNumberToObject(j, "new_bytes", (double)res.new_bytes);
            cJSON_AddNumberToObject(j, "seconds", (double)(int64_t)(res.seconds * 1000) / 1000);
            cJSON_AddNumberToObject(j, "bytes_per_s", (double)(int64_t)rate);
        }
        log_result("save", j, "step %" PRIu64 " committed: %" PRIu64 " files, %s, %s stored "
                   "(%s new), %s in %.1fs", res.step, res.files,
                   fmt_bytes(res.raw_bytes, b1, sizeof b1),
                   fmt_bytes(res.stored_bytes, b2, sizeof b2),
                   fmt_bytes(res.new_bytes, b3, sizeof b3), fmt_rate(rate, r1, sizeof r1),
                   res.seconds);
        if (o->json && j)
            print_json(j);
        cJSON_Delete(j);
    }
out:
    progress_stop(pg);
    log_lib_release(NULL);
    free(rows.v);
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

int cmd_restore(struct opts *o)
{
    struct ckpt_ctx *ctx = NULL;
    struct progress *pg = NULL;
    struct rows rows = { 0 };
    const struct ckpt_row *nw, *got;
    uint64_t restored = 0;
    int64_t t0;
    char b1[32], r1[32], msg[CKPT_ERR_MAX + 200];
    ckpt_status st;
    cJSON *j = NULL;
    int rc = 0;

    if (o->nargs != 1) {
        log_error("restore needs exactly one DIR (see ckptrun restore --help)");
        rc = EXIT_USAGE;
        goto out;
    }
    if (file_store_missing(o)) {
        rc = EXIT_FAIL;
        goto out;
    }
    log_lib_hold();
    if ((rc = open_ctx(o, &ctx)) != 0)
        goto out;
    /* Ask the store first: a run or step that is not there creates no DIR. */
    st = ckpt_list(ctx, rows_cb, &rows);
    if (st != CKPT_OK) {
        log_error("restore: run %s: %s: %s", o->run, ckpt_strerror(st), ckpt_errmsg(ctx));
        rc = runtime_exit(st);
        goto out;
    }
    if (rows.n == 0 || (o->step_set && !row_of(&rows, o->step))) {
        int e = run_exists(o);
        if (e < 0)
            rc = -e;
        else if (e == 0)
            log_error("restore: run %s not found in %s", o->run, o->store);
        else if (o->step_set)
            log_error("restore: run %s has no committed checkpoint at step %" PRIu64, o->run,
                      o->step);
        else
            log_error("restore: run %s has no committed checkpoint", o->run);
        rc = rc ? rc : EXIT_FAIL;
        goto out;
    }
    nw = row_newest(&rows);
    if (mkdir_owner(o->args[0]) != 0) {
        log_error("restore: cannot create %s: %s", o->args[0], strerror(errno));
        rc = EXIT_CONFIG;
        goto out;
    }
    t0 = mono_ms();
    pg = progress_start(ctx, "restore");
    st = ckpt_restore_dir(ctx, o->step_set ? o->step : CKPT_STEP_LATEST, o->args[0], &restored);
    progress_stop(pg);
    pg = NULL;
    if (st != CKPT_OK) {
        if (st == CKPT_E_NOENT)
            snprintf(msg, sizeof msg, "run %s has no committed checkpoint", o->run);
        else
            snprintf(msg, sizeof msg, "%s: %s", ckpt_strerror(st), ckpt_errmsg(ctx));
        log_error("restore: %s", msg);
        rc = runtime_exit(st);
        goto out;
    }
    if (!o->step_set && nw && restored != nw->step) {
        /* the library's error about the damaged one is quoted here */
        snprintf(msg, sizeof msg, "newest checkpoint (step %" PRIu64 ") cannot be restored "
                 "(%s); restored step %" PRIu64 " instead", nw->step, ckpt_errmsg(ctx), restored);
        log_lib_release(msg);
        log_msg(LOG_WARN, "fallback", "%s", msg);
    }
    log_lib_release(NULL);
    got = row_of(&rows, restored);
    {
        double secs = secs_since(t0);
        uint64_t bytes = got ? got->raw : 0, files = got ? got->items : 0;
        double rate = secs > 0 ? (double)bytes / secs : 0;
        if ((j = cJSON_CreateObject())) {
            cJSON_AddStringToObject(j, "run", o->run);
            cJSON_AddNumberToObject(j, "step", (double)restored);
            cJSON_AddStringToObject(j, "dir", o->args[0]);
            cJSON_AddNumberToObject(j, "files", (double)files);
            cJSON_AddNumberToObject(j, "bytes", (double)bytes);
            cJSON_AddNumberToObject(j, "seconds", (double)(int64_t)(secs * 1000) / 1000);
            cJSON_AddNumberToObject(j, "bytes_per_s", (double)(int64_t)rate);
            if (!o->step_set && nw && restored != nw->step)
                cJSON_AddNumberToObject(j, "fallback_from", (double)nw->step);
        }
        log_result("restore", j, "step %" PRIu64 " into %s: %" PRIu64 " files, %s in %.1fs (%s)",
                   restored, o->args[0], files, fmt_bytes(bytes, b1, sizeof b1), secs,
                   fmt_rate(rate, r1, sizeof r1));
        if (o->json && j)
            print_json(j);
    }
out:
    progress_stop(pg);
    log_lib_release(NULL);
    cJSON_Delete(j);
    free(rows.v);
    ckpt_close(ctx);
    return rc;
}

/* ---- ls --------------------------------------------------------------------- */

static void run_name_cb(void *user, const char *run)
{
    cJSON *arr = user;
    if (arr)
        cJSON_AddItemToArray(arr, cJSON_CreateString(run));
    else
        printf("%s\n", run);
}

/* The table of ls: newest first, as ckpt_list gives them. */
static void ls_print(const struct rows *r)
{
    char ts[40], raw[32], stored[32], nw[32];
    for (size_t k = 0; k < r->n; k++) {
        const struct ckpt_row *i = &r->v[k];
        if (k == 0)
            printf("%-12s %-24s %7s %10s %10s %10s\n", "STEP", "COMMITTED", "ITEMS", "RAW",
                   "STORED", "NEW");
        printf("%-12" PRIu64 " %-24s %7" PRIu64 " %10s %10s %10s\n", i->step,
               i->time_ms < 0 ? "? (manifest unreadable)" : iso_time(i->time_ms, ts, sizeof ts),
               i->items, fmt_bytes(i->raw, raw, sizeof raw),
               fmt_bytes(i->stored, stored, sizeof stored), fmt_bytes(i->new_bytes, nw, sizeof nw));
    }
}

/* ls --json keeps every ckpt_info field it printed before (seq, epoch,
 * manifest): collected by a callback of its own. */
static int ls_json_cb(void *user, const struct ckpt_info *i)
{
    cJSON *arr = user, *c = cJSON_CreateObject();
    if (!c)
        return 1;
    cJSON_AddNumberToObject(c, "step", (double)i->step);
    cJSON_AddNumberToObject(c, "seq", (double)i->seq);
    cJSON_AddNumberToObject(c, "epoch", (double)i->epoch);
    cJSON_AddNumberToObject(c, "time_ms", (double)i->time_ms);
    cJSON_AddNumberToObject(c, "items", (double)i->items);
    cJSON_AddNumberToObject(c, "raw_bytes", (double)i->raw_bytes);
    cJSON_AddNumberToObject(c, "stored_bytes", (double)i->stored_bytes);
    cJSON_AddNumberToObject(c, "new_bytes", (double)i->new_bytes);
    cJSON_AddNumberToObject(c, "chunks", (double)i->chunks);
    if (i->manifest)
        cJSON_AddStringToObject(c, "manifest", i->manifest);
    cJSON_AddItemToArray(arr, c);
    return 0;
}

int cmd_ls(struct opts *o)
{
    struct ckpt_ctx *ctx = NULL;
    struct ckpt_store *st = NULL;
    struct rows rows = { 0 };
    cJSON *arr = NULL;
    char err[CKPT_ERR_MAX] = "";
    ckpt_status s;
    int rc = 0;

    if (o->nargs) {
        log_error("ls takes no arguments (got '%s'; see ckptrun ls --help)", o->args[0]);
        rc = EXIT_USAGE;
        goto out;
    }
    if (o->json && !(arr = cJSON_CreateArray())) {
        rc = EXIT_FAIL;
        goto out;
    }
    if (file_store_missing(o)) {
        rc = EXIT_FAIL;
        goto out;
    }
    log_lib_hold();
    if (!o->run) {
        s = ckpt_store_open(o->store, NULL, &st, err);
        if (s == CKPT_OK)
            s = record_list_runs(st, run_name_cb, arr, err);
        if (s != CKPT_OK) {
            log_error("ls: store %s: %s%s%s", o->store, ckpt_strerror(s), err[0] ? ": " : "", err);
            rc = exit_code_for_status(s);
            goto out;
        }
    } else {
        if ((rc = open_ctx(o, &ctx)) != 0)
            goto out;
        s = arr ? ckpt_list(ctx, ls_json_cb, arr) : ckpt_list(ctx, rows_cb, &rows);
        if (s == CKPT_OK && rows.oom)
            s = CKPT_E_NOMEM;
        if (s != CKPT_OK) {
            log_error("ls: run %s: %s: %s", o->run, ckpt_strerror(s), ckpt_errmsg(ctx));
            rc = runtime_exit(s);
            goto out;
        }
        if ((arr ? cJSON_GetArraySize(arr) : (int)rows.n) == 0) {
            int e = run_exists(o);
            if (e <= 0) {
                if (e == 0)
                    log_error("ls: run %s not found in %s (ckptrun ls without --run lists the "
                              "runs)", o->run, o->store);
                rc = e < 0 ? -e : EXIT_FAIL;
                goto out;
            }
            if (!o->json)
                log_msg(LOG_INFO, "ls", "run %s has no committed checkpoint", o->run);
        }
        if (!arr)
            ls_print(&rows);
    }
    if (arr)
        print_json(arr);
out:
    log_lib_release(NULL);
    cJSON_Delete(arr);
    free(rows.v);
    ckpt_close(ctx);
    if (st)
        ckpt_store_close(st);
    return rc;
}

/* ---- verify ----------------------------------------------------------------- */

int cmd_verify(struct opts *o)
{
    struct ckpt_ctx *ctx = NULL;
    struct progress *pg = NULL;
    struct ckpt_progress pr;
    struct rows rows = { 0 };
    uint64_t ncheck = 0, files = 0;
    char msg[CKPT_ERR_MAX + 200] = "", b1[32], r1[32];
    cJSON *j = NULL;
    ckpt_status st;
    int64_t t0;
    double secs;
    int rc = 0;

    if (o->nargs) {
        log_error("verify takes no arguments (use --step N; see ckptrun verify --help)");
        rc = EXIT_USAGE;
        goto out;
    }
    if (file_store_missing(o)) {
        rc = EXIT_FAIL;
        goto out;
    }
    log_lib_hold();
    if ((rc = open_ctx(o, &ctx)) != 0)
        goto out;
    if (ckpt_list(ctx, rows_cb, &rows) == CKPT_OK) {
        for (size_t i = 0; i < rows.n; i++)
            if (!o->step_set || rows.v[i].step == o->step) {
                ncheck++;
                files += rows.v[i].items;
            }
    }
    t0 = mono_ms();
    pg = progress_start(ctx, "verify");
    st = ckpt_verify(ctx, o->step_set ? o->step : CKPT_STEP_ALL);
    progress_stop(pg);
    pg = NULL;
    secs = secs_since(t0);
    ckpt_progress(ctx, &pr);
    if (st == CKPT_E_NOENT) {
        int e = run_exists(o);
        if (e < 0) {
            rc = -e;
            goto out;
        }
        if (e == 0)
            snprintf(msg, sizeof msg, "run %s not found in %s", o->run, o->store);
        else
            snprintf(msg, sizeof msg, "run %s has no committed checkpoint%s", o->run,
                     o->step_set ? " at that step" : "");
        rc = EXIT_FAIL;
    } else if (st == CKPT_E_CORRUPT) {
        snprintf(msg, sizeof msg, "run %s is damaged: %s", o->run, ckpt_errmsg(ctx));
        rc = EXIT_FAIL;
    } else if (st != CKPT_OK) {
        snprintf(msg, sizeof msg, "%s: %s", ckpt_strerror(st), ckpt_errmsg(ctx));
        rc = runtime_exit(st);
    }
    if ((j = cJSON_CreateObject())) {
        cJSON_AddStringToObject(j, "run", o->run);
        cJSON_AddBoolToObject(j, "intact", rc == 0);
        cJSON_AddNumberToObject(j, "checkpoints", (double)ncheck);
        cJSON_AddNumberToObject(j, "files", (double)files);
        cJSON_AddNumberToObject(j, "chunks", (double)pr.chunks_done);
        cJSON_AddNumberToObject(j, "bytes", (double)pr.bytes_done);
        cJSON_AddNumberToObject(j, "stored_bytes", (double)pr.stored_bytes);
        cJSON_AddNumberToObject(j, "seconds", (double)(int64_t)(secs * 1000) / 1000);
        if (rc)
            cJSON_AddStringToObject(j, "error", msg);
    }
    if (rc) {
        log_error("verify: %s", msg);
    } else {
        log_result("verify", j, "%" PRIu64 " checkpoint%s intact: %" PRIu64 " files, %" PRIu64
                   " chunks, %s checked in %.1fs (%s)", ncheck, ncheck == 1 ? "" : "s", files,
                   (uint64_t)pr.chunks_done, fmt_bytes(pr.bytes_done, b1, sizeof b1), secs,
                   fmt_rate(secs > 0 ? (double)pr.bytes_done / secs : 0, r1, sizeof r1));
    }
    if (o->json && j)
        print_json(j);
out:
    progress_stop(pg);
    log_lib_release(NULL);
    cJSON_Delete(j);
    free(rows.v);
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

struct gc_show {
    const struct opts *o;
    cJSON *list;              /* --dry-run --json: the objects */
    uint64_t bytes;
};

static void gc_show(void *user, const char *key, uint64_t size, const char *why)
{
    struct gc_show *g = user;
    g->bytes += size;
    if (!g->o->dry_run) {
        log_msg(LOG_DEBUG, "gc", "delete %s (%" PRIu64 " bytes): %s", key, size, why);
    } else if (g->list) {
        cJSON *e = cJSON_CreateObject();
        if (e) {
            cJSON_AddStringToObject(e, "key", key);
            cJSON_AddNumberToObject(e, "bytes", (double)size);
            cJSON_AddStringToObject(e, "why", why);
            cJSON_AddItemToArray(g->list, e);
        }
    } else {
        printf("would delete %s (%" PRIu64 " bytes): %s\n", key, size, why);
    }
}

/* Bytes of the run's objects, to tell what gc freed. */
struct usage {
    uint64_t bytes, objects;
};

static int usage_cb(void *user, const struct ckpt_obj_info *obj)
{
    struct usage *u = user;
    u->bytes += obj->size;
    u->objects++;
    return 0;
}

static ckpt_status run_usage(struct record *rec, const char *run, struct usage *u)
{
    char prefix[256], err[CKPT_ERR_MAX];
    struct ckpt_store *st = rec ? record_store(rec) : NULL;
    memset(u, 0, sizeof *u);
    if (!st)
        return CKPT_E_INVAL;
    snprintf(prefix, sizeof prefix, "%s/", run);
    return st->ops->list(st, prefix, usage_cb, u, err);
}

int cmd_gc(struct opts *o)
{
    struct ckpt_ctx *ctx = NULL;
    struct record *rec = NULL;
    struct steps kept = { 0 };
    struct usage before, after;
    struct gc_show show = { 0 };
    uint64_t deleted = 0, marks = 0;
    char err[CKPT_ERR_MAX] = "", msg[CKPT_ERR_MAX + 100], b1[32];
    int have_usage = 0;
    int64_t t0 = mono_ms();
    ckpt_status st;
    int rc = 0;

    if (o->nargs) {
        log_error("gc takes no arguments (see ckptrun gc --help)");
        rc = EXIT_USAGE;
        goto out;
    }
    if (file_store_missing(o)) {
        rc = EXIT_FAIL;
        goto out;
    }
    log_lib_hold();
    if ((rc = open_ctx(o, &ctx)) != 0)
        goto out;
    if (record_open(o->store, o->run, &rec, err) == CKPT_OK)
        have_usage = run_usage(rec, o->run, &before) == CKPT_OK;
    show.o = o;
    show.list = o->dry_run && o->json ? cJSON_CreateArray() : NULL;
    st = ckpt_gc_ex(ctx, o->keep, o->min_age_ms, o->dry_run ? CKPT_GC_DRY_RUN : 0, gc_show,
                    &show, &deleted);
    if (st == CKPT_OK && o->dry_run) {
        cJSON *f = cJSON_CreateObject();
        log_lib_release(NULL);
        if (f) {
            cJSON_AddStringToObject(f, "run", o->run);
            cJSON_AddBoolToObject(f, "dry_run", 1);
            cJSON_AddNumberToObject(f, "keep", o->keep);
            cJSON_AddNumberToObject(f, "would_delete", (double)deleted);
            cJSON_AddNumberToObject(f, "would_free_bytes", (double)show.bytes);
            if (show.list) {
                cJSON_AddItemToObject(f, "objects", show.list);
                show.list = NULL;
            }
        }
        log_result("gc", f, "dry run: %" PRIu64 " objects (%s) would be deleted; nothing was",
                   deleted, fmt_bytes(show.bytes, b1, sizeof b1));
        if (o->json && f)
            print_json(f);
        cJSON_Delete(f);
        goto out;
    }
    if (st != CKPT_OK) {
        snprintf(msg, sizeof msg, "%s: %s", ckpt_strerror(st), ckpt_errmsg(ctx));
        log_error("gc: %s", msg);
        rc = runtime_exit(st);
        goto out;
    }
    log_lib_release(NULL);
    /* Drop ckptrun's "files" marks of checkpoints that no longer exist. A
     * failed listing leaves them: they are only consulted for listed steps. */
    if (ckpt_list(ctx, steps_cb, &kept) == CKPT_OK && rec)
        record_prune_files(rec, step_kept, &kept, &marks);
    have_usage = have_usage && run_usage(rec, o->run, &after) == CKPT_OK;
    {
        /* a save committing meanwhile may add more than gc freed */
        uint64_t freed = have_usage && before.bytes > after.bytes ? before.bytes - after.bytes : 0;
        cJSON *f = cJSON_CreateObject();
        if (f) {
            cJSON_AddStringToObject(f, "run", o->run);
            cJSON_AddNumberToObject(f, "keep", o->keep);
            cJSON_AddNumberToObject(f, "retained", (double)kept.n);
            cJSON_AddNumberToObject(f, "deleted", (double)(deleted + marks));
            if (have_usage)
                cJSON_AddNumberToObject(f, "freed_bytes", (double)freed);
            cJSON_AddNumberToObject(f, "seconds",
                                    (double)(int64_t)(secs_since(t0) * 1000) / 1000);
        }
        log_result("gc", f, "kept %zu checkpoint%s; deleted %" PRIu64 " objects%s%s in %.1fs",
                   kept.n, kept.n == 1 ? "" : "s", deleted + marks,
                   have_usage ? ", freed " : "", have_usage ? fmt_bytes(freed, b1, sizeof b1) : "",
                   secs_since(t0));
        if (o->json && f)
            print_json(f);
        cJSON_Delete(f);
    }
out:
    log_lib_release(NULL);
    cJSON_Delete(show.list);
    free(kept.v);
    record_close(rec);
    ckpt_close(ctx);
    return rc;
}

/* ---- status ------------------------------------------------------------------- */

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
 * last commit (or its start when it committed nothing). A runner session
 * (one with a start event) that ends with no exit event died without a word
 * (SIGKILL, a lost machine): a crash, whose loss runs to its last event. */
struct history {
    uint64_t commits, commit_bytes, commit_stored, stops, failures, crashes, sessions;
    uint64_t run_ms, lost_ms;
    /* the last commit event: its size and speed */
    int have_last;
    double last_step, last_bytes, last_stored, last_seconds;
    int64_t last_ms;
};

static void summarize(const cJSON *events, int runner_live, struct history *h)
{
    const cJSON *ev;
    char cur[128] = "";
    int64_t start = 0, last = 0, last_commit = 0;
    int open = 0, had_start = 0, ended = 0;

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
            if (open) {
                h->run_ms += (uint64_t)(last - start);
                if (had_start && !ended) {
                    h->crashes++;
                    h->lost_ms += (uint64_t)(last - last_commit);
                }
            }
            snprintf(cur, sizeof cur, "%s", id);
            start = last = last_commit = t;
            open = 1;
            had_start = ended = 0;
            h->sessions++;
        }
        if (strcmp(type, "start") == 0)
            had_start = 1;
        if (strcmp(type, "exit") == 0)
            ended = 1;
        last = t;
        if (strcmp(type, "commit") == 0) {
            h->commits++;
            h->commit_bytes += (uint64_t)num(ev, "bytes", 0);
            h->commit_stored += (uint64_t)num(ev, "stored", 0);
            last_commit = t;
            h->have_last = 1;
            h->last_step = num(ev, "step", 0);
            h->last_bytes = num(ev, "bytes", 0);
            h->last_stored = num(ev, "stored", 0);
            h->last_seconds = num(ev, "seconds", 0);
            h->last_ms = t;
        } else if (strcmp(type, "stop") == 0) {
            /* a user's stop (Ctrl-C, scancel) is not a preemption */
            if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ev, "user")))
                h->stops++;
            h->lost_ms += (uint64_t)(t - last_commit);
        } else if (strcmp(type, "exit") == 0 && (strcmp(str(ev, "state", ""), "failed") == 0 ||
                                                 strcmp(str(ev, "state", ""), "lost") == 0)) {
            h->failures++;
            h->lost_ms += (uint64_t)(t - last_commit);
        }
    }
    if (open) {
        h->run_ms += (uint64_t)(last - start);
        /* the newest runner: dead if it said nothing and holds no live lease */
        if (had_start && !ended && !runner_live) {
            h->crashes++;
            h->lost_ms += (uint64_t)(last - last_commit);
        }
    }
}

/* The state word status shows. It is the record's state; a runner that is
 * gone without saying so is judged from the lease (lease.c decides
 * "stale", docs/ckptrun.md "status"). */
/* The run's state as status shows it: RUN's, except that a RUN saying
 * `running` while no live runner holds the lease (its holder died: stale on
 * this host, or expired) is `stale` (lease_state: the one definition). */
static const char *state_word(const cJSON *run, const struct lease_info *li, int have_lease,
                              int64_t now)
{
    const char *state = run ? str(run, "state", "unknown") : "unknown";
    if (strcmp(state, "running") == 0 && have_lease && lease_state(li, now) != LEASE_LIVE)
        state = "stale";
    return state;
}

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
    int64_t now = now_ms();
    char err[CKPT_ERR_MAX] = "";
    ckpt_status st;
    int rc = 0;

    if (o->nargs) {
        log_error("status takes no arguments (see ckptrun status --help)");
        rc = EXIT_USAGE;
        goto out;
    }
    if (file_store_missing(o)) {
        rc = EXIT_FAIL;
        goto out;
    }
    log_lib_hold();
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
    summarize(events, have_lease && lease_state(&li, now) == LEASE_LIVE, &h);
    if ((rc = open_ctx(o, &ctx)) != 0)
        goto out;
    if (ckpt_list(ctx, rows_cb, &rows) != CKPT_OK)
        log_msg(LOG_WARN, "status", "cannot list checkpoints: %s", ckpt_errmsg(ctx));
    if (!run && rows.n == 0 && cJSON_GetArraySize(events) == 0) {
        log_error("status: run %s not found in %s", o->run, o->store);
        rc = EXIT_FAIL;
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
        }
    }
    if (run) {
        cJSON_AddNumberToObject(out, "updated_ms", num(run, "updated_ms", 0));
        cJSON_AddStringToObject(out, "host", str(run, "host", ""));
        cJSON_AddNumberToObject(out, "pid", num(run, "pid", 0));
        cJSON_AddNumberToObject(out, "epoch", num(run, "epoch", 0));
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
    if (o->json) {
        print_json(out);
    } else {
        char a[40], b[40], c[40], d[40];
        const cJSON *l = cJSON_GetObjectItemCaseSensitive(out, "lease");
        printf("run          %s\n", o->run);
        printf("store        %s\n", o->store);
        printf("state        %s\n", str(out, "state", "unknown"));
        if (run) {
            int64_t up = (int64_t)num(run, "updated_ms", 0);
            printf("updated      %s (%s) by %s pid %.0f\n", iso_time(up, a, sizeof a),
                   ago(up, now, b, sizeof b), str(run, "host", "?"), num(run, "pid", 0));
        }
        if (l) {
            int rel = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(l, "released"));
            int64_t hb = (int64_t)num(l, "heartbeat_ms", 0), ex = (int64_t)num(l, "expires_ms", 0);
            printf("lease        %s, epoch %.0f, %s\n", str(l, "holder", "?"), num(l, "epoch", 0),
                   str(l, "state", "?"));
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
                   nw->items, fmt_bytes(nw->raw, c, sizeof c), fmt_bytes(nw->stored, d, sizeof d));
            printf("checkpoints  %zu retained (steps %" PRIu64 "..%" PRIu64 "), %s\n", rows.n,
                   rows.v[rows.n - 1].step, rows.v[0].step, fmt_bytes(raw, a, sizeof a));
        } else {
            printf("checkpoints  none\n");
        }
        if (h.have_last) {
            double rate = h.last_seconds > 0 ? h.last_bytes / h.last_seconds : 0;
            printf("last commit  step %.0f %s: %s, %s new, %s in %.1fs\n", h.last_step,
                   ago(h.last_ms, now, a, sizeof a),
                   fmt_bytes((uint64_t)h.last_bytes, b, sizeof b),
                   fmt_bytes((uint64_t)h.last_stored, c, sizeof c),
                   fmt_rate(rate, d, sizeof d), h.last_seconds);
        }
        printf("commits      %" PRIu64 " (%s, %s new stored)\n", h.commits,
               fmt_bytes(h.commit_bytes, a, sizeof a), fmt_bytes(h.commit_stored, b, sizeof b));
        printf("preemptions  %" PRIu64 "\n", h.stops);
        printf("failures     %" PRIu64 "\n", h.failures);
        if (h.crashes)
            printf("crashes      %" PRIu64 " (runners that ended without a word: SIGKILL, a "
                   "lost machine)\n", h.crashes);
        printf("run time     %s in %" PRIu64 " session%s\n", fmt_duration(h.run_ms, c, sizeof c),
               h.sessions, h.sessions == 1 ? "" : "s");
        printf("lost work    %s (estimate, %" PRIu64 " stop%s, %" PRIu64 " failure%s, %" PRIu64
               " crash%s: training done after a session's last commit, or its start, until it "
               "stopped, failed or was last heard of; a resume redoes it)\n",
               fmt_duration(h.lost_ms, a, sizeof a), h.stops, h.stops == 1 ? "" : "s",
               h.failures, h.failures == 1 ? "" : "s", h.crashes, h.crashes == 1 ? "" : "es");
    }
out:
    log_lib_release(NULL);
    cJSON_Delete(out);
    cJSON_Delete(run);
    cJSON_Delete(events);
    free(rows.v);
    ckpt_close(ctx);
    record_close(rec);
    return rc;
}
