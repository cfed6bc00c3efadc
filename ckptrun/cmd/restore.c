/* cmd/restore.c -- `ckptrun restore [--step N] DIR`: materialize a checkpoint's files into DIR. */
#include "ckptrun.h"
#include "cmd/open.h"
#include "cmd/cmds.h"
#include "base/fsutil.h"
#include "base/runlog.h"
#include "base/parse.h"
#include "base/tty_progress.h"
#include "ckpt_store.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct cmd_form restore_form = {
    .name = "restore", .takes = TAKES_ONE, .operand = "DIR", .flags = CMD_EXISTING_STORE
};

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

    if ((rc = cmd_open(o, &restore_form, NULL, &ctx)) != 0)
        goto out;
    /* Ask the store first: a run or step that is not there creates no DIR. */
    st = ckpt_list(ctx, rows_cb, &rows);
    if (st != CKPT_OK) {
        log_error("restore: run %s: %s: %s", o->run, ckpt_strerror(st), ckpt_errmsg(ctx));
        rc = runtime_exit(st);
        goto out;
    }
    if (rows.n == 0 || (o->step_set && !row_of(&rows, o->step))) {
        if ((rc = cmd_run_missing(o, msg, sizeof msg)) != 0) {
            if (msg[0])
                log_error("restore: %s", msg);
        } else if (o->step_set) {
            log_error("restore: run %s has no committed checkpoint at step %" PRIu64, o->run,
                      o->step);
        } else {
            log_error("restore: run %s has no committed checkpoint", o->run);
        }
        rc = rc ? rc : EXIT_FAIL;
        goto out;
    }
    nw = row_newest(&rows);
    if (mkdir_owner(o->args[0]) != 0) {
        log_error("restore: cannot create %s: %s", o->args[0], strerror(errno));
        rc = EXIT_CONFIG;
        goto out;
    }
    t0 = ckpt__mono_ms();
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
                   restored, o->args[0], files, ckpt__fmt_bytes(bytes, b1, sizeof b1), secs,
                   ckpt__fmt_rate(rate, r1, sizeof r1));
        if (o->json && j)
            print_json(j);
    }
out:
    progress_stop(pg);
    cJSON_Delete(j);
    free(rows.v);
    cmd_close(ctx);
    return rc;
}
