/* sup_leftover.c -- entries a previous session left uncommitted, committed
 * before anything else (sup_leftover.h). */
#include "sup/sup_leftover.h"
#include "watch/commit_files.h"
#include "record/record.h"
#include "base/runlog.h"
#include "sup/sup.h"
#include "sup/sup_log.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LEFT 64

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* The entries named by `list`, as paths in `dir`, when every one is there
 * with the files and bytes recorded. @return how many, 0 when any differs. */
static size_t still_there(const char *dir, const cJSON *list, struct commit_src *src,
                          char paths[][PATH_MAX + 256], const char **why)
{
    const cJSON *e;
    size_t n = 0;

    cJSON_ArrayForEach(e, list) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        struct commit_print p = { 0 };
        if (n == MAX_LEFT || !cJSON_IsString(name) || !*name->valuestring ||
            strchr(name->valuestring, '/') || strcmp(name->valuestring, "..") == 0 ||
            strcmp(name->valuestring, ".") == 0) {
            *why = "the record names them oddly";
            return 0; /* the record is input too: a name must stay in dir */
        }
        snprintf(paths[n], sizeof paths[n], "%s/%s", dir, name->valuestring);
        if (commit_print_path(paths[n], &p, NULL, NULL) != 0) {
            *why = "they are not in the directory";
            return 0;
        }
        if ((double)p.files != num(e, "files") || (double)p.bytes != num(e, "bytes")) {
            *why = "they changed since";
            return 0;
        }
        src[n].path = paths[n];
        src[n].name = name->valuestring;
        src[n].link = NULL;
        n++;
    }
    if (!n)
        *why = "the record names none";
    return n;
}

int sup_commit_leftover(struct sup *s, struct ckpt_ctx *ctx, const cJSON *prev, uint64_t *step,
                        int *done)
{
    static char paths[MAX_LEFT][PATH_MAX + 256]; /* supervisor's thread only */
    struct commit_src src[MAX_LEFT];
    struct commit_result res;
    const cJSON *state = cJSON_GetObjectItemCaseSensitive(prev, "state");
    const cJSON *unc = cJSON_GetObjectItemCaseSensitive(prev, "uncommitted");
    const char *names[MAX_LEFT], *why = "";
    double st = num(unc, "step");
    cJSON *f;
    size_t n;
    int rc = 0;

    *done = 0;
    if (!cJSON_IsString(state) || strcmp(state->valuestring, "uncommitted") != 0 ||
        !cJSON_IsObject(unc) || st < 0 || s->nid.nnodes > 1)
        goto out;
    *step = (uint64_t)st;
    n = still_there(s->dir, cJSON_GetObjectItemCaseSensitive(unc, "entries"), src, paths, &why);
    if (!n) {
        log_msg(LOG_WARN, "leftover",
                "step %" PRIu64 " was left uncommitted by the last session, "
                "but %s (%s): resuming the newest committed step",
                *step, why, s->dir);
        goto out;
    }
    log_msg(LOG_INFO, "leftover",
            "step %" PRIu64 " was left uncommitted by the last session and "
            "is still in %s: committing it before anything else",
            *step, s->dir);
    if (commit_paths(ctx, src, n, *step, &res) != CKPT_OK) {
        log_error("cannot commit step %" PRIu64 " that the last session left in %s: %s: %s; not "
                  "starting the command (the entries stay there for the next attempt)",
                  *step, s->dir, ckpt_strerror(res.st), res.detail);
        rc = exit_code_for_status(res.st);
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        names[i] = src[i].name;
    record_mark_files(s->rec, *step, names, n);
    if ((f = commit_fields(&res, "leftover")))
        cJSON_AddStringToObject(f, "entry", names[0]);
    sup_event(s, LOG_INFO, "commit", f, 1);
    if ((int64_t)*step > s->last_step)
        s->last_step = (int64_t)*step;
    *done = 1;
out:
    return rc;
}
