/* cmd/ls.c -- `ckptrun ls`: the runs of a store as a table, the checkpoints
 * of a run, or the items of one checkpoint (docs/ckptrun.md, "ls"). */
#include "ckptrun.h"
#include "cmd/open.h"
#include "cmd/cmds.h"
#include "base/runlog.h"
#include "base/parse.h"
#include "cmd/pending_show.h"
#include "record/record.h"
#include "record/runs.h"
#include "ckpt_store.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the runs of a store ------------------------------------------------------------ */

/* Runs read at once: the --connections of an object store (CKPT_CONNECTIONS
 * carries it), 8 by default. */
static unsigned parallel_reads(void)
{
    const char *v = getenv("CKPT_CONNECTIONS");
    uint64_t n;
    return v && parse_u64(v, &n) == 0 && n >= 1 && n <= 64 ? (unsigned)n : 8;
}

static void runs_print(const struct runs *r)
{
    int64_t now = ckpt__now_ms();
    int w = 3;
    char step[24], upd[40], size[32];

    for (size_t i = 0; i < r->n; i++)
        if ((int)strlen(r->v[i].name) > w)
            w = (int)strlen(r->v[i].name) > 40 ? 40 : (int)strlen(r->v[i].name);
    printf("%-*s  %-9s  %11s  %-12s  %10s\n", w, "RUN", "STATE", "NEWEST STEP", "UPDATED", "SIZE");
    for (size_t i = 0; i < r->n; i++) {
        const struct run_sum *s = &r->v[i];
        if (s->have_step)
            /* '!': HEAD is damaged, the step is its manifests' (the warning says so) */
            snprintf(step, sizeof step, "%" PRIu64 "%s", s->step, s->head_damaged ? "!" : "");
        else
            snprintf(step, sizeof step, "%s", s->head_bad ? "?" : "-");
        printf("%-*s  %-9s  %11s  %-12s  %10s\n", w, s->name, s->state, step,
               s->newest_ms > 0 ? ago(s->newest_ms, now, upd, sizeof upd) : "?",
               ckpt__fmt_bytes(s->bytes, size, sizeof size));
    }
}

static cJSON *runs_json(const struct runs *r)
{
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; arr && i < r->n; i++) {
        const struct run_sum *s = &r->v[i];
        cJSON *o = cJSON_CreateObject();
        if (!o) {
            cJSON_Delete(arr);
            return NULL;
        }
        cJSON_AddStringToObject(o, "run", s->name);
        cJSON_AddStringToObject(o, "state", s->state);
        if (s->have_step)
            cJSON_AddNumberToObject(o, "newest_step", (double)s->step);
        else
            cJSON_AddNullToObject(o, "newest_step");
        cJSON_AddNumberToObject(o, "checkpoints", s->checkpoints);
        if (s->head_damaged) /* newest_step, checkpoints: what its manifests show */
            cJSON_AddTrueToObject(o, "head_damaged");
        if (s->newest_ms > 0)
            cJSON_AddNumberToObject(o, "updated_ms", (double)s->newest_ms);
        else
            cJSON_AddNullToObject(o, "updated_ms");
        cJSON_AddNumberToObject(o, "bytes", (double)s->bytes);
        cJSON_AddNumberToObject(o, "objects", (double)s->objects);
        if (s->error != CKPT_OK)
            cJSON_AddStringToObject(o, "error", s->detail);
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}

static int ls_runs(const struct opts *o)
{
    struct ckpt_store *st = NULL;
    struct runs r = { 0 };
    char err[CKPT_ERR_MAX] = "";
    cJSON *arr = NULL;
    ckpt_status s;
    int rc = 0;

    s = ckpt_store_open(o->store, NULL, &st, err);
    if (s == CKPT_OK)
        s = runs_walk(st, 0, &r, err);
    if (s != CKPT_OK) {
        log_error("ls: store %s: %s%s%s", o->store, ckpt_strerror(s), err[0] ? ": " : "", err);
        rc = exit_code_for_status(s);
        goto out;
    }
    runs_describe(st, &r, parallel_reads());
    for (size_t i = 0; i < r.n; i++)
        if (r.v[i].error != CKPT_OK)
            log_msg(LOG_WARN, "ls", "run %s: %s", r.v[i].name, r.v[i].detail);
    if (o->json) {
        if (!(arr = runs_json(&r))) {
            rc = EXIT_FAIL;
            goto out;
        }
        print_json(arr);
    } else if (r.n) {
        runs_print(&r);
    } else {
        log_msg(LOG_INFO, "ls", "store %s holds no run", o->store);
    }
out:
    cJSON_Delete(arr);
    runs_free(&r);
    ckpt_store_close(st);
    return rc;
}

/* ---- the checkpoints of a run ------------------------------------------------------- */

/* Where a checkpoint's step comes from, as its files mark says: "counter"
 * when ckptrun counted it (the trainer gave none); "" unknown (no mark: a
 * checkpoint of memory regions, `save`, an older ckptrun). One GET. */
static void step_from(struct record *rec, uint64_t step, char *out, size_t n)
{
    out[0] = '\0';
    if (rec && record_files_from(rec, step, out, n) != CKPT_OK)
        out[0] = '\0';
}

/* The table of ls: newest first, as ckpt_list gives them. A step ckptrun
 * counted is marked '*'. */
static void ls_print(const struct rows *r, struct record *rec)
{
    char ts[40], raw[32], stored[32], nw[32], from[16], st[32];
    int counted = 0;
    for (size_t k = 0; k < r->n; k++) {
        const struct ckpt_row *i = &r->v[k];
        if (k == 0)
            printf("%-12s %-24s %7s %10s %10s %10s\n", "STEP", "COMMITTED", "ITEMS", "RAW",
                   "STORED", "NEW");
        step_from(rec, i->step, from, sizeof from);
        counted |= strcmp(from, "counter") == 0;
        snprintf(st, sizeof st, "%" PRIu64 "%s", i->step, strcmp(from, "counter") ? "" : "*");
        printf("%-12s %-24s %7" PRIu64 " %10s %10s %10s\n", st,
               i->time_ms < 0 ? "? (manifest unreadable)" : iso_time(i->time_ms, ts, sizeof ts),
               i->items, ckpt__fmt_bytes(i->raw, raw, sizeof raw),
               ckpt__fmt_bytes(i->stored, stored, sizeof stored),
               ckpt__fmt_bytes(i->new_bytes, nw, sizeof nw));
    }
    if (counted)
        printf("* step counted by ckptrun: the trainer gave none (saved(path, step), a number "
               "in the entry's name, trainer_state.json)\n");
}

struct ls_json {
    cJSON *arr;
    struct record *rec;
};

/* ls --json keeps every ckpt_info field it printed before (seq, epoch,
 * manifest) and the world size: collected by a callback of its own. */
static int ls_json_cb(void *user, const struct ckpt_info *i)
{
    struct ls_json *lj = user;
    cJSON *arr = lj->arr, *c = cJSON_CreateObject();
    char from[16];
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
    /* ranks whose parts make the checkpoint (0.3.0; 1 for one writer) */
    cJSON_AddNumberToObject(c, "world_size", (double)(i->world_size ? i->world_size : 1));
    if (i->manifest)
        cJSON_AddStringToObject(c, "manifest", i->manifest);
    /* where the step comes from, when its files mark says (docs/ckptrun.md) */
    step_from(lj->rec, i->step, from, sizeof from);
    if (from[0])
        cJSON_AddStringToObject(c, "step_from", from);
    cJSON_AddItemToArray(arr, c);
    return 0;
}

/* "run R not found in S" (with the names it resembles), or the store's
 * error. @return the exit code, 0 when the run exists. */
static int run_missing(const struct opts *o)
{
    char why[CKPT_ERR_MAX + 200];
    int rc = cmd_run_missing(o, why, sizeof why);

    if (why[0])
        log_error("ls: %s (ckptrun ls without --run lists the runs)", why);
    return rc;
}

static int ls_checkpoints(const struct opts *o, struct ckpt_ctx *ctx)
{
    struct rows rows = { 0 };
    struct record *rec = NULL;
    struct ls_json lj = { NULL, NULL };
    char err[CKPT_ERR_MAX] = "";
    cJSON *arr = NULL;
    ckpt_status s;
    int rc = 0;

    if (o->json && !(arr = cJSON_CreateArray())) {
        rc = EXIT_FAIL;
        goto out;
    }
    if (record_open(o->store, o->run, &rec, err) != CKPT_OK)
        rec = NULL; /* the steps' origins are not shown */
    lj.arr = arr;
    lj.rec = rec;
    s = arr ? ckpt_list(ctx, ls_json_cb, &lj) : ckpt_list(ctx, rows_cb, &rows);
    if (s == CKPT_OK && rows.oom)
        s = CKPT_E_NOMEM;
    if (s != CKPT_OK) {
        log_error("ls: run %s: %s: %s", o->run, ckpt_strerror(s), ckpt_errmsg(ctx));
        rc = runtime_exit(s);
        goto out;
    }
    if ((arr ? cJSON_GetArraySize(arr) : (int)rows.n) == 0) {
        if ((rc = run_missing(o)) != 0)
            goto out;
        if (!o->json)
            log_msg(LOG_INFO, "ls", "run %s has no committed checkpoint", o->run);
    }
    if (!arr) {
        cJSON *pend = NULL;
        ls_print(&rows, rec);
        /* steps of a job of several nodes waiting for parts (not in --json:
         * its array lists committed checkpoints only; status has them) */
        if (pending_json(ctx, &pend) == CKPT_OK)
            pending_print(stdout, pend, "pending");
        cJSON_Delete(pend);
    } else {
        print_json(arr);
    }
out:
    cJSON_Delete(arr);
    record_close(rec);
    free(rows.v);
    return rc;
}

/* ---- the items of a checkpoint ------------------------------------------------------ */

static const char *const kind_names[] = {
    [CKPT_KIND_REGION] = "region",
    [CKPT_KIND_FILE] = "file",
    [CKPT_KIND_DEVICE] = "device",
    [CKPT_KIND_LINK] = "link",
};

static const char *kind_name(ckpt_item_kind k)
{
    return (size_t)k < sizeof kind_names / sizeof kind_names[0] ? kind_names[k] : "?";
}

struct item_row {
    char *name, *target;
    ckpt_item_kind kind;
    uint64_t size, stored, chunks;
    int replicated;
    unsigned part;
};

struct items {
    struct item_row *v;
    size_t n, cap;
    int oom;
};

static int items_cb(void *user, const struct ckpt_item_info *it)
{
    struct items *l = user;
    struct item_row *r;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        struct item_row *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            goto oom;
        l->v = v;
        l->cap = cap;
    }
    r = &l->v[l->n];
    memset(r, 0, sizeof *r);
    r->name = strdup(it->name);
    r->target = it->target ? strdup(it->target) : NULL;
    r->kind = it->kind;
    r->size = it->size;
    r->stored = it->stored_bytes;
    r->chunks = it->chunks;
    r->replicated = it->replicated;
    r->part = it->part;
    if (!r->name || (it->target && !r->target)) {
        free(r->name);
        free(r->target);
        goto oom;
    }
    l->n++;
    return 0;
oom:
    l->oom = 1;
    return 1;
}

static void items_print(const struct items *l)
{
    int w = 4, parts = 0;
    char size[32], stored[32], part[16], name[4200];

    for (size_t i = 0; i < l->n; i++) {
        int nl = (int)strlen(l->v[i].name);
        if (l->v[i].target)
            nl += 4 + (int)strlen(l->v[i].target);
        w = nl > w ? (nl > 60 ? 60 : nl) : w;
        parts |= l->v[i].part != 0 || l->v[i].replicated;
    }
    printf("%-*s  %-10s  %10s  %10s%s\n", w, "NAME", "TYPE", "SIZE", "STORED",
           parts ? "  PART" : "");
    for (size_t i = 0; i < l->n; i++) {
        const struct item_row *r = &l->v[i];
        snprintf(name, sizeof name, "%s%s%s", r->name, r->target ? " -> " : "",
                 r->target ? r->target : "");
        snprintf(part, sizeof part, r->replicated ? "all" : "%u", r->part);
        /* a link has no bytes of its own; an item of bytes always has chunks */
        printf("%-*s  %-10s  %10s  %10s%s%s\n", w, name,
               r->replicated ? "replicated" : kind_name(r->kind),
               r->kind == CKPT_KIND_LINK ? "-" : ckpt__fmt_bytes(r->size, size, sizeof size),
               r->kind == CKPT_KIND_LINK   ? "-"
               : r->chunks || r->size == 0 ? ckpt__fmt_bytes(r->stored, stored, sizeof stored)
                                           : "?",
               parts ? "  " : "", parts ? part : "");
    }
}

static cJSON *items_json(const struct items *l)
{
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; arr && i < l->n; i++) {
        const struct item_row *r = &l->v[i];
        cJSON *o = cJSON_CreateObject();
        if (!o) {
            cJSON_Delete(arr);
            return NULL;
        }
        cJSON_AddStringToObject(o, "name", r->name);
        cJSON_AddStringToObject(o, "type", kind_name(r->kind));
        cJSON_AddNumberToObject(o, "size", (double)r->size);
        cJSON_AddNumberToObject(o, "stored_bytes", (double)r->stored);
        cJSON_AddNumberToObject(o, "chunks", (double)r->chunks);
        cJSON_AddBoolToObject(o, "replicated", r->replicated);
        if (r->replicated)
            cJSON_AddNullToObject(o, "part");
        else
            cJSON_AddNumberToObject(o, "part", r->part);
        if (r->target)
            cJSON_AddStringToObject(o, "target", r->target);
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}

static int ls_items(const struct opts *o, struct ckpt_ctx *ctx)
{
    struct items l = { 0 };
    cJSON *arr = NULL;
    ckpt_status s;
    int rc = 0;

    s = ckpt_items(ctx, o->step, CKPT_PART_ALL, items_cb, &l);
    if (s == CKPT_OK && l.oom)
        s = CKPT_E_NOMEM;
    if (s == CKPT_E_NOENT) {
        if ((rc = run_missing(o)) == 0) {
            log_error("ls: %s (ckptrun ls --run %s lists its steps)", ckpt_errmsg(ctx), o->run);
            rc = EXIT_FAIL;
        }
        goto out;
    }
    if (s != CKPT_OK) {
        log_error("ls: run %s step %" PRIu64 ": %s: %s", o->run, o->step, ckpt_strerror(s),
                  ckpt_errmsg(ctx));
        rc = s == CKPT_E_CORRUPT || s == CKPT_E_UNSUPPORTED ? EXIT_FAIL : runtime_exit(s);
        goto out;
    }
    if (o->json) {
        if (!(arr = items_json(&l))) {
            rc = EXIT_FAIL;
            goto out;
        }
        print_json(arr);
    } else {
        items_print(&l);
    }
out:
    cJSON_Delete(arr);
    for (size_t i = 0; i < l.n; i++) {
        free(l.v[i].name);
        free(l.v[i].target);
    }
    free(l.v);
    return rc;
}

static int ls_check(const struct opts *o, void *arg)
{
    (void)arg;
    if (o->step_set && !o->run) {
        log_error("ls --step needs the run: --run NAME or CKPT_RUN");
        return EXIT_USAGE;
    }
    return 0;
}

static const struct cmd_form ls_form = {
    .name = "ls", .takes = TAKES_NOTHING, .flags = CMD_EXISTING_STORE, .check = ls_check
};

int cmd_ls(struct opts *o)
{
    struct ckpt_ctx *ctx = NULL;
    int rc;

    /* without a run: the store's runs, read without a context */
    if ((rc = cmd_open(o, &ls_form, NULL, o->run ? &ctx : NULL)) != 0)
        goto out;
    if (!o->run)
        rc = ls_runs(o);
    else
        rc = o->step_set ? ls_items(o, ctx) : ls_checkpoints(o, ctx);
out:
    cmd_close(ctx);
    return rc;
}
