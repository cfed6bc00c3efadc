/* prestart.c -- the restore before start (prestart.h). */
#include "sup/prestart.h"
#include "base/fsutil.h"
#include "base/runlog.h"
#include "opts.h"
#include "record/record.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Steps are read newest first; this many are tried. */
#define MAX_TRIED 64

struct newest_steps {
    uint64_t step[MAX_TRIED];
    unsigned world;           /* nodes that wrote the newest (0: none listed) */
    int n;
};

static int collect_steps(void *user, const struct ckpt_info *info)
{
    struct newest_steps *ns = user;
    if (ns->n == 0)
        ns->world = info->world_size ? info->world_size : 1;
    ns->step[ns->n++] = info->step;
    return ns->n == MAX_TRIED;
}

/* Restore checkpoint `step` into a hidden staging directory inside `dir`
 * (same file system; hidden names are never watched entries), then move
 * each top-level entry into place. A restore that fails half-way leaves
 * nothing behind for the trainer to trip over, and the trainer never sees a
 * partly restored entry. An entry of the same name already there is
 * replaced: the committed one is the truth. */
static ckpt_status restore_staged(struct ckpt_ctx *ctx, uint64_t step, const char *dir,
                                  uint64_t *got)
{
    char stage[PATH_MAX + 64], from[PATH_MAX + 320], to[PATH_MAX + 256];
    DIR *d = NULL;
    struct dirent *de;
    ckpt_status st;

    snprintf(stage, sizeof stage, "%s/.ckptrun-restore-XXXXXX", dir);
    if (!mkdtemp(stage)) {
        log_msg(LOG_WARN, "restore", "cannot create a staging directory in %s: %s", dir,
                strerror(errno));
        st = CKPT_E_IO;
        goto out;
    }
    st = ckpt_restore_dir(ctx, step, stage, got);
    if (st != CKPT_OK)
        goto out;
    if (!(d = opendir(stage))) {
        st = CKPT_E_IO;
        goto out;
    }
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        snprintf(from, sizeof from, "%s/%s", stage, de->d_name);
        snprintf(to, sizeof to, "%s/%s", dir, de->d_name);
        if (rename(from, to) != 0) {
            /* A non-empty directory or a file/dir mismatch is in the way. */
            if (rm_rf(to) != 0 || rename(from, to) != 0) {
                log_msg(LOG_WARN, "restore", "cannot move %s into place: %s", to, strerror(errno));
                st = CKPT_E_IO;
                goto out;
            }
        }
    }
out:
    if (d)
        closedir(d);
    if (stage[0] && strstr(stage, "XXXXXX") == NULL)
        rm_rf(stage);
    return st;
}

/* Whether ckptrun nodes wrote global step `step` of `world` parts: some
 * node left its files mark ("<step>.n<K>.json"). An error reading counts
 * as yes: the refusal is then the safe side. */
static int nodes_wrote_files(struct record *rec, uint64_t step, unsigned world)
{
    int found = 0;
    for (unsigned k = 0; k < world && !found; k++) {
        record_set_node(rec, k, world);
        found = record_has_files(rec, step) != 0;
    }
    record_set_node(rec, 0, 1); /* this ckptrun's own marks again */
    return found;
}

int prestart_restore(struct ckpt_ctx *ctx, struct record *rec, const char *run,
                     const char *store, const char *dir, struct prestart *out)
{
    struct newest_steps ns = { .n = 0 };
    ckpt_status st;
    int rc = 0, nbad = 0;
    uint64_t bad[MAX_TRIED];

    out->last_step = -1;
    out->resumed = 0;
    out->restored_step = 0;
    out->trainer_restores = 0;
    out->trainer_step = 0;
    st = ckpt_list(ctx, collect_steps, &ns);
    if (st != CKPT_OK) {
        log_error("cannot list checkpoints of run %s in %s: %s %s", run, store,
                  ckpt_strerror(st), ckpt_errmsg(ctx));
        rc = exit_code_for_status(st);
        goto out;
    }
    if (ns.n > 0)
        out->last_step = (int64_t)ns.step[0];
    if (ns.n > 0 && ns.world > 1 && nodes_wrote_files(rec, ns.step[0], ns.world)) {
        /* A job of several nodes wrote it (docs/multirank.md): each node
         * resumes its own part, so it resumes on as many nodes. (A global
         * checkpoint of memory regions -- the ranks of an MPI job under
         * this one ckptrun -- is the trainer's to restore, with its
         * collective: libckpt's business, as below.) */
        log_error("the newest checkpoint of run %s (step %" PRIu64 ") was written by %u "
                  "nodes; this job has 1 (--nnodes): %s. Resume it with --nnodes %u, or "
                  "restore its parts by hand", run, ns.step[0], ns.world,
                  ckpt_strerror(CKPT_E_WORLD), ns.world);
        rc = EXIT_CONFIG;
        goto out;
    }
    for (int i = 0; i < ns.n; i++) {
        uint64_t got = 0;
        int m = record_has_files(rec, ns.step[i]);
        if (m < 0) {
            log_error("cannot read the run record of %s", run);
            rc = EXIT_UNAVAILABLE;
            goto out;
        }
        if (m == 0) { /* a checkpoint of memory regions: libckpt's business */
            if (!out->trainer_restores) {
                out->trainer_restores = 1;
                out->trainer_step = ns.step[i];
            }
            continue;
        }
        st = restore_staged(ctx, ns.step[i], dir, &got);
        if (st == CKPT_E_CORRUPT)
            bad[nbad++] = ns.step[i]; /* damaged: out of the resume order below */
        if (st == CKPT_OK) {
            cJSON *f = cJSON_CreateObject();
            char from[16] = "";
            out->resumed = 1;
            out->restored_step = got;
            if (f) {
                cJSON_AddNumberToObject(f, "step", (double)got);
                cJSON_AddStringToObject(f, "dir", dir);
                /* CKPT_STEP is then ckptrun's count, not a training step */
                if (record_files_from(rec, got, from, sizeof from) == CKPT_OK &&
                    strcmp(from, "counter") == 0)
                    cJSON_AddStringToObject(f, "step_from", from);
            }
            log_event(LOG_INFO, "restore", f);
            cJSON_Delete(f);
            goto out;
        }
        if (st != CKPT_E_CORRUPT) {
            /* Not damage (libckpt calls a missing part damage too): the
             * store or this machine failed. An older checkpoint would hit
             * the same wall, or resume the trainer below an intact one it
             * could never resume past: stop, starting nothing. */
            int local = st == CKPT_E_IO || st == CKPT_E_NOSPACE || st == CKPT_E_PERM ||
                        st == CKPT_E_UNSAFE || st == CKPT_E_NOMEM;
            log_error("cannot restore step %" PRIu64 " of run %s into %s (%s%s: %s); not "
                      "starting the command", ns.step[i], run, dir,
                      local ? "this machine: " : "the store: ", ckpt_strerror(st),
                      ckpt_errmsg(ctx));
            rc = local ? EXIT_CONFIG : exit_code_for_status(st);
            goto out;
        }
        log_msg(LOG_WARN, "fallback", "checkpoint at step %" PRIu64 " cannot be restored (%s: %s); "
                "trying an older one", ns.step[i], ckpt_strerror(st), ckpt_errmsg(ctx));
    }
out:
    /* the lease holder drops what it found damaged from the resume order, so
     * the trainer's commits from here on resume (docs/FORMAT.md, HEAD) */
    if (nbad && rc == 0 && ckpt_mark_damaged(ctx, bad, (size_t)nbad) != CKPT_OK)
        log_msg(LOG_WARN, "fallback", "cannot mark the damaged checkpoints: %s", ckpt_errmsg(ctx));
    return rc;
}
