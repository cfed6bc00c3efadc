/* cmd/save.c -- `ckptrun save --step N PATH...`: commit files and directories as one checkpoint by
 * hand. */
#include "ckptrun.h"
#include "cmd/open.h"
#include "cmd/cmds.h"
#include "watch/commit_files.h"
#include "base/fsutil.h"
#include "base/runlog.h"
#include "base/parse.h"
#include "base/tty_progress.h"
#include "record/record.h"
#include "ckpt_store.h"

#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The PATHs to commit and their item names (freed by sources_free). */
struct sources {
    struct commit_src *src;
    char **names;
    int n;
};

static void sources_free(struct sources *s)
{
    for (int i = 0; s->names && i < s->n; i++)
        free(s->names[i]);
    free(s->names);
    free(s->src);
}

/* cmd_open's check: --step given, and every PATH there with a name of its
 * own, before the store is opened. */
static int save_sources(const struct opts *o, void *arg)
{
    struct sources *s = arg;
    struct stat sb;

    if (!o->step_set) {
        log_error("save needs --step N (see ckptrun save --help)");
        return EXIT_USAGE;
    }
    s->src = calloc((size_t)o->nargs, sizeof *s->src);
    s->names = calloc((size_t)o->nargs, sizeof *s->names);
    if (!s->src || !s->names) {
        log_error("out of memory");
        return EXIT_FAIL;
    }
    s->n = o->nargs;
    for (int i = 0; i < o->nargs; i++) {
        char tmp[4096];
        size_t l = strlen(o->args[i]);
        if (stat(o->args[i], &sb) != 0) {
            log_error("save: %s: %s", o->args[i], strerror(errno));
            return EXIT_USAGE;
        }
        /* Item names are relative to PATH's parent: its basename. */
        snprintf(tmp, sizeof tmp, "%s", o->args[i]);
        while (l > 1 && tmp[l - 1] == '/')
            tmp[--l] = '\0';
        s->names[i] = strdup(basename(tmp));
        if (!s->names[i] || strcmp(s->names[i], "/") == 0 || strcmp(s->names[i], ".") == 0 ||
            strcmp(s->names[i], "..") == 0) {
            log_error("save: %s: name the directory itself, not '/', '.' or '..'", o->args[i]);
            return EXIT_USAGE;
        }
        for (int j = 0; j < i; j++)
            if (strcmp(s->names[j], s->names[i]) == 0) {
                log_error("save: two paths have the same name '%s'", s->names[i]);
                return EXIT_USAGE;
            }
        s->src[i].path = o->args[i];
        s->src[i].name = s->names[i];
    }
    return 0;
}

/* save creates the store and the run when they are new: no
 * CMD_EXISTING_STORE. */
static const struct cmd_form save_form = {
    .name = "save", .takes = TAKES_SOME, .operand = "PATH", .check = save_sources
};

int cmd_save(struct opts *o)
{
    struct ckpt_ctx *ctx = NULL;
    struct record *rec = NULL;
    struct sources srcs = { NULL, NULL, 0 };
    struct progress *pg = NULL;
    struct rows rows = { 0 };
    struct commit_result res;
    char err[CKPT_ERR_MAX + 64] = "", b1[32], b2[32], b3[32], r1[32];
    cJSON *f = NULL;
    int rc = 0;

    memset(&res, 0, sizeof res);
    if ((rc = cmd_open(o, &save_form, &srcs, &ctx)) != 0)
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
    if (commit_paths(ctx, srcs.src, (size_t)srcs.n, o->step, &res) != CKPT_OK) {
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
        record_mark_files(rec, o->step, (const char *const *)srcs.names, (size_t)srcs.n);
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
        log_result("save", j,
                   "step %" PRIu64 " committed: %" PRIu64 " files, %s, %s stored "
                   "(%s new), %s in %.1fs",
                   res.step, res.files, ckpt__fmt_bytes(res.raw_bytes, b1, sizeof b1),
                   ckpt__fmt_bytes(res.stored_bytes, b2, sizeof b2),
                   ckpt__fmt_bytes(res.new_bytes, b3, sizeof b3),
                   ckpt__fmt_rate(rate, r1, sizeof r1), res.seconds);
        if (o->json && j)
            print_json(j);
        cJSON_Delete(j);
    }
out:
    progress_stop(pg);
    free(rows.v);
    cJSON_Delete(f);
    record_close(rec);
    cmd_close(ctx);
    sources_free(&srcs);
    return rc;
}
