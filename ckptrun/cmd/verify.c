/* cmd/verify.c -- `ckptrun verify [--step N]`: check every chunk's checksum. */
#include "ckptrun.h"
#include "cmd/open.h"
#include "cmd/cmds.h"
#include "base/runlog.h"
#include "base/parse.h"
#include "base/tty_progress.h"
#include "ckpt_store.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct cmd_form verify_form = {
    .name = "verify", .takes = TAKES_NOTHING, .instead = "use --step N", .flags = CMD_EXISTING_STORE
};

int cmd_verify(struct opts *o)
{
    struct ckpt_ctx *ctx = NULL;
    struct progress *pg = NULL;
    struct ckpt_progress pr;
    struct rows rows = { 0 };
    uint64_t ncheck = 0, files = 0, ngone = 0;
    char msg[CKPT_ERR_MAX + 200] = "", b1[32], r1[32];
    cJSON *j = NULL;
    ckpt_status st;
    int64_t t0;
    double secs;
    int rc = 0;

    if ((rc = cmd_open(o, &verify_form, NULL, &ctx)) != 0)
        goto out;
    if (ckpt_list(ctx, rows_cb, &rows) == CKPT_OK) {
        for (size_t i = 0; i < rows.n; i++)
            if (!o->step_set || rows.v[i].step == o->step) {
                ncheck++;
                files += rows.v[i].items;
            }
    }
    t0 = ckpt__mono_ms();
    pg = progress_start(ctx, "verify");
    st = ckpt_verify(ctx, o->step_set ? o->step : CKPT_STEP_ALL);
    progress_stop(pg);
    pg = NULL;
    secs = secs_since(t0);
    ckpt_progress(ctx, &pr);
    if (st == CKPT_E_NOENT) {
        if ((rc = cmd_run_missing(o, msg, sizeof msg)) != 0 && !msg[0])
            goto out; /* the store could not be asked: said */
        if (rc == 0)
            snprintf(msg, sizeof msg, "run %s has no committed checkpoint%s", o->run,
                     o->step_set ? " at that step" : "");
        rc = EXIT_FAIL;
    } else if (st == CKPT_E_CORRUPT) {
        snprintf(msg, sizeof msg, "run %s is damaged: %s", o->run, ckpt_errmsg(ctx));
        rc = EXIT_FAIL;
    } else if (st != CKPT_OK) {
        snprintf(msg, sizeof msg, "%s: %s", ckpt_strerror(st), ckpt_errmsg(ctx));
        rc = runtime_exit(st);
    } else {
        /* A run still training commits while verify reads it: what its
         * retention removed meanwhile was skipped (gone, not damaged) and is
         * not counted as checked. */
        struct rows after = { 0 };
        if (ckpt_list(ctx, rows_cb, &after) == CKPT_OK && !after.oom)
            for (size_t i = 0; i < rows.n; i++)
                if ((!o->step_set || rows.v[i].step == o->step) &&
                    !row_of(&after, rows.v[i].step) && ncheck > 0) {
                    ncheck--;
                    files -= rows.v[i].items;
                    ngone++;
                }
        free(after.v);
    }
    if ((j = cJSON_CreateObject())) {
        cJSON_AddStringToObject(j, "run", o->run);
        cJSON_AddBoolToObject(j, "intact", rc == 0);
        cJSON_AddNumberToObject(j, "checkpoints", (double)ncheck);
        cJSON_AddNumberToObject(j, "gone", (double)ngone);
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
        char g[96] = "";
        if (ngone)
            snprintf(g, sizeof g, " (%" PRIu64 " more removed by retention while verify ran)",
                     ngone);
        log_result("verify", j,
                   "%" PRIu64 " checkpoint%s intact%s: %" PRIu64 " files, %" PRIu64
                   " chunks, %s checked in %.1fs (%s)",
                   ncheck, ncheck == 1 ? "" : "s", g, files, (uint64_t)pr.chunks_done,
                   ckpt__fmt_bytes(pr.bytes_done, b1, sizeof b1), secs,
                   ckpt__fmt_rate(secs > 0 ? (double)pr.bytes_done / secs : 0, r1, sizeof r1));
    }
    if (o->json && j)
        print_json(j);
out:
    progress_stop(pg);
    cJSON_Delete(j);
    free(rows.v);
    cmd_close(ctx);
    return rc;
}
