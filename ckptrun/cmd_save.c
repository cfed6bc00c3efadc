/* cmd_save.c -- `ckptrun save --step N PATH...`: commit files and directories as one checkpoint by hand. */
#include "ckptrun.h"
#include "cmds.h"
#include "commit_files.h"
#include "fsutil.h"
#include "runlog.h"
#include "parse.h"
#include "tty_progress.h"
#include "record.h"
#include "ckpt_store.h"

#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
                   ckpt_fmt_bytes(res.raw_bytes, b1, sizeof b1),
                   ckpt_fmt_bytes(res.stored_bytes, b2, sizeof b2),
                   ckpt_fmt_bytes(res.new_bytes, b3, sizeof b3), ckpt_fmt_rate(rate, r1, sizeof r1),
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
