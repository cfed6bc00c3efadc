/* cmd_ls.c -- `ckptrun ls`: the runs of a store, or the checkpoints of a run. */
#include "ckptrun.h"
#include "cmds.h"
#include "runlog.h"
#include "parse.h"
#include "pending_show.h"
#include "record.h"
#include "ckpt_store.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void run_name_cb(void *user, const char *run)
{
    cJSON *arr = user;
    if (arr)
        cJSON_AddItemToArray(arr, cJSON_CreateString(run));
    else
        printf("%s\n", run);
}

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
               i->items, ckpt_fmt_bytes(i->raw, raw, sizeof raw),
               ckpt_fmt_bytes(i->stored, stored, sizeof stored), ckpt_fmt_bytes(i->new_bytes, nw, sizeof nw));
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

int cmd_ls(struct opts *o)
{
    struct ckpt_ctx *ctx = NULL;
    struct ckpt_store *st = NULL;
    struct record *rec = NULL;
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
        struct ls_json lj = { arr, NULL };
        if ((rc = open_ctx(o, &ctx)) != 0)
            goto out;
        if (record_open(o->store, o->run, &rec, err) != CKPT_OK)
            rec = NULL; /* the steps' origins are not shown */
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
        if (!arr) {
            cJSON *pend = NULL;
            ls_print(&rows, rec);
            /* steps of a job of several nodes waiting for parts (not in --json:
             * its array lists committed checkpoints only; status has them) */
            if (pending_json(ctx, &pend) == CKPT_OK)
                pending_print(stdout, pend, "pending");
            cJSON_Delete(pend);
        }
    }
    if (arr)
        print_json(arr);
out:
    log_lib_release(NULL);
    cJSON_Delete(arr);
    free(rows.v);
    ckpt_close(ctx);
    record_close(rec);
    if (st)
        ckpt_store_close(st);
    return rc;
}
