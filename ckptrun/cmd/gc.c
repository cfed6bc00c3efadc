/* cmd/gc.c -- `ckptrun gc --keep N`: retention, and chunks no checkpoint references. */
#include "ckptrun.h"
#include "cmd/open.h"
#include "cmd/cmds.h"
#include "base/runlog.h"
#include "base/parse.h"
#include "base/tty_progress.h"
#include "record/record.h"
#include "ckpt_store.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gc_steps {
    uint64_t *v;
    size_t n, cap;
};

static int steps_cb(void *user, const struct ckpt_info *info)
{
    struct gc_steps *s = user;
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
    struct gc_steps *s = user;
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

static const struct cmd_form gc_form = { .name = "gc",
                                         .takes = TAKES_NOTHING,
                                         .flags = CMD_EXISTING_STORE };

int cmd_gc(struct opts *o)
{
    struct ckpt_ctx *ctx = NULL;
    struct record *rec = NULL;
    struct gc_steps kept = { 0 };
    struct usage before, after;
    struct gc_show show = { 0 };
    uint64_t deleted = 0, marks = 0;
    char err[CKPT_ERR_MAX] = "", msg[CKPT_ERR_MAX + 100], b1[32];
    int have_usage = 0;
    int64_t t0 = ckpt__mono_ms();
    ckpt_status st;
    int rc = 0;

    if ((rc = cmd_open(o, &gc_form, NULL, &ctx)) != 0)
        goto out;
    /* a mistyped --run is not "nothing to collect" */
    if ((rc = cmd_run_missing(o, msg, sizeof msg)) != 0) {
        if (msg[0])
            log_error("gc: %s", msg);
        goto out;
    }
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
                   deleted, ckpt__fmt_bytes(show.bytes, b1, sizeof b1));
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
                   kept.n, kept.n == 1 ? "" : "s", deleted + marks, have_usage ? ", freed " : "",
                   have_usage ? ckpt__fmt_bytes(freed, b1, sizeof b1) : "", secs_since(t0));
        if (o->json && f)
            print_json(f);
        cJSON_Delete(f);
    }
out:
    cJSON_Delete(show.list);
    free(kept.v);
    record_close(rec);
    cmd_close(ctx);
    return rc;
}
