/* restore.c -- restoring a checkpoint into the protected items or into a
 * directory. The newest checkpoint that restores whole is used: one whose
 * manifest or chunks are damaged or missing is reported, and the one before
 * it tried; a local error (disk full, no descriptors) or the store's stops
 * the restore, since an older checkpoint would fare no better. The chunks
 * travel through fetch.h and land through deliver.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "core/ctx.h"
#include "commit/damaged.h"
#include "restore/deliver.h"
#include "restore/fetch.h"
#include "run/headscan.h"
#include "core/pool.h"
#include "run/runobj.h"
#include "restore/restore.h"
#include "core/runstate.h"

/* Room on the local file systems the restore writes to, before anything is
 * written: the sum of the files' sizes (a chunk a manifest names many times
 * counts every time: that many bytes get written) against what each file
 * system has free for us. */
static ckpt_status check_space(const struct ckpt_manifest *m, char *const *finals,
                               const char *dir, char *err)
{
    struct fsneed {
        unsigned long fsid;
        uint64_t need, avail;
        char path[512];
    } fs[8];
    size_t nfs = 0;
    for (size_t i = 0; i < m->nitems; i++) {
        struct statvfs sv;
        char where[4096];
        const char *slash;
        size_t k;
        if (!finals[i] || m->items[i].kind == CKPT_ITEM_LINK)
            continue;
        if (dir) {
            snprintf(where, sizeof where, "%s", dir);
        } else {
            slash = strrchr(finals[i], '/');
            snprintf(where, sizeof where, "%.*s", slash ? (int)(slash - finals[i]) : 1,
                     slash ? finals[i] : ".");
            if (!where[0])
                snprintf(where, sizeof where, "/");
        }
        if (statvfs(where, &sv) != 0)
            continue; /* the writes will say what is wrong */
        for (k = 0; k < nfs && fs[k].fsid != sv.f_fsid; k++)
            ;
        if (k == nfs) {
            if (nfs == sizeof fs / sizeof fs[0])
                continue;
            fs[nfs].fsid = sv.f_fsid;
            fs[nfs].need = 0;
            fs[nfs].avail = (uint64_t)sv.f_bavail * sv.f_frsize;
            snprintf(fs[nfs].path, sizeof fs[nfs].path, "%.500s", where);
            nfs++;
        }
        fs[k].need += m->items[i].size;
        if (fs[k].need > fs[k].avail) {
            ckpt__seterr(err, "local disk: not enough space in %s for checkpoint step %" PRIu64
                         ": its files need %.1f MiB, %.1f MiB free; nothing written",
                         fs[k].path, m->step, (double)fs[k].need / 1048576.0,
                         (double)fs[k].avail / 1048576.0);
            return CKPT_E_NOSPACE;
        }
    }
    return CKPT_OK;
}

/* Create the directories of `rel` under `dir`, refusing any component that
 * exists and is not a real directory (a symbolic link could point anywhere). */
static ckpt_status safe_parents(const char *dir, const char *rel, char *err)
{
    char path[4096];
    size_t dl = strlen(dir);
    const char *p = rel;
    if (dl + strlen(rel) + 2 > sizeof path)
        return CKPT_E_INVAL;
    memcpy(path, dir, dl);
    path[dl] = '\0';
    while ((p = strchr(p, '/'))) {
        struct stat sb;
        snprintf(path + dl, sizeof path - dl, "/%.*s", (int)(p - rel), rel);
        if (lstat(path, &sb) == 0) {
            if (!S_ISDIR(sb.st_mode)) {
                ckpt__seterr(err, "%s exists and is not a directory: refusing to write "
                                  "through it", path);
                return CKPT_E_UNSAFE;
            }
        } else if (mkdir(path, 0700) != 0 && errno != EEXIST) {
            ckpt__seterr(err, "mkdir %s: %s", path, strerror(errno));
            return ckpt__errno_status(errno);
        }
        p++;
    }
    return CKPT_OK;
}

/* The checkpoint's links, once every file is in place: each made under a
 * temporary name and renamed over whatever has its name (a link or file
 * from an earlier restore; a directory stays and fails the restore), so
 * nothing is ever written through a link, and a reader sees the old entry
 * or the new link. Targets were checked with the manifest
 * (ckpt__manifest_check): relative, landing on an item of this checkpoint. */
static ckpt_status make_links(const struct ckpt_manifest *m, const char *dir, char *err)
{
    char final[8192], tmp[8300];
    ckpt_status st = CKPT_OK;
    for (size_t i = 0; i < m->nitems && !st; i++) {
        const struct ckpt_mitem *mi = &m->items[i];
        if (mi->kind != CKPT_ITEM_LINK)
            continue;
        if ((size_t)snprintf(final, sizeof final, "%s/%s", dir, mi->name) >= sizeof final) {
            ckpt__seterr(err, "%s/%s: path too long", dir, mi->name);
            st = CKPT_E_INVAL;
            break;
        }
        snprintf(tmp, sizeof tmp, "%s.ckpt-tmp.%d", final, (int)getpid());
        st = safe_parents(dir, mi->name, err);
        if (st)
            break;
        unlink(tmp);
        if (symlink(mi->target, tmp) != 0) {
            ckpt__seterr(err, "symlink %s: %s", tmp, strerror(errno));
            st = ckpt__errno_status(errno);
        } else if (rename(tmp, final) != 0) {
            ckpt__seterr(err, "link %s: %s", final, strerror(errno));
            st = ckpt__errno_status(errno);
            unlink(tmp);
        }
    }
    return st;
}

/* The protected item named `name`, or NULL. */
static struct ckpt_item *protected_item(struct ckpt_ctx *ctx, const char *name)
{
    struct ckpt_item *it;
    for (it = ctx->items; it && strcmp(it->name, name); it = it->next)
        ;
    return it;
}

/* Room first: a full disk is reported before anything is written. The
 * files are the items under dir, or the protected files. */
static ckpt_status room(struct ckpt_ctx *ctx, const struct ckpt_manifest *m, const char *dir,
                        char *err)
{
    char **finals;
    ckpt_status st;
    if (!dir && ctx->into)
        return CKPT_OK; /* memory only */
    finals = calloc(m->nitems ? m->nitems : 1, sizeof *finals);
    if (!finals)
        return CKPT_E_NOMEM;
    for (size_t i = 0; i < m->nitems; i++) {
        char final[4096];
        if (dir) {
            snprintf(final, sizeof final, "%s/%s", dir, m->items[i].name);
            finals[i] = m->items[i].kind == CKPT_ITEM_LINK ? NULL : ckpt__strdup(final);
        } else {
            struct ckpt_item *it = protected_item(ctx, m->items[i].name);
            if (it && it->kind == CKPT_ITEM_FILE)
                finals[i] = ckpt__strdup(it->path);
        }
    }
    st = check_space(m, finals, dir, err);
    for (size_t i = 0; i < m->nitems; i++)
        free(finals[i]);
    free(finals);
    return st;
}

/* Where item mi goes: a file under dir, else the protected item of its
 * name (none, *skip: stored but not protected, ignored). */
static ckpt_status destination(struct ckpt_ctx *ctx, const struct ckpt_mitem *mi,
                               const char *dir, struct ckpt_dest *d, int *skip, char *err)
{
    struct ckpt_item *it;
    *skip = 0;
    if (dir) {
        char final[4096];
        ckpt_status st;
        if (!ckpt__name_valid(mi->name)) {
            ckpt__seterr(err, "item name '%s' would escape %s", mi->name, dir);
            return CKPT_E_UNSAFE;
        }
        if ((size_t)snprintf(final, sizeof final, "%s/%s", dir, mi->name) >= sizeof final) {
            ckpt__seterr(err, "%s/%s: path too long", dir, mi->name);
            return CKPT_E_INVAL;
        }
        d->kind = CKPT_ITEM_FILE;
        st = safe_parents(dir, mi->name, err);
        return st ? st : ckpt__dest_file(d, final, mi->size, err);
    }
    it = protected_item(ctx, mi->name);
    if (!it) {
        *skip = 1;
        return CKPT_OK;
    }
    d->kind = it->kind;
    if (it->kind == CKPT_ITEM_MEM)
        d->ptr = it->ptr;
    else if (it->kind == CKPT_ITEM_DEVICE)
        d->dev = it->ptr;
    else
        return ckpt__dest_file(d, it->path, mi->size, err);
    return CKPT_OK;
}

/* Restore manifest m into dir, or (dir NULL) into the protected items. */
static ckpt_status restore_one(struct ckpt_ctx *ctx, const struct ckpt_manifest *m,
                               const char *dir, struct ckpt_idset *bad, char *err)
{
    struct ckpt_dests ds;
    struct ckpt_batch b;
    ckpt_status st = CKPT_OK;
    struct ckpt_fetch *fs = NULL;
    size_t i, total = 0, n = 0;
    for (i = 0; i < m->nitems; i++)
        total += m->items[i].nchunks;
    fs = calloc(total ? total : 1, sizeof *fs);
    if (!fs || ckpt__dests_init(&ds, m)) {
        free(fs);
        return CKPT_E_NOMEM;
    }
    st = room(ctx, m, dir, err);
    ckpt__batch_init(&b);
    b.bad = bad;
    pthread_mutex_lock(&b.mu);
    b.pending = 1; /* our token: jobs may finish while we submit */
    pthread_mutex_unlock(&b.mu);
    for (i = 0; i < m->nitems && !st; i++) {
        const struct ckpt_mitem *mi = &m->items[i];
        uint64_t off = 0;
        int skip;
        if (mi->kind == CKPT_ITEM_LINK)
            continue; /* made last (make_links), and never into a region */
        if (!dir && ctx->into) {
            /* where ckpt_restore_alloc's caller said (NULL: not taken) */
            ds.d[i].kind = CKPT_ITEM_MEM;
            ds.d[i].ptr = ctx->into->dest(ctx->into, i);
            skip = !ds.d[i].ptr;
        } else {
            st = destination(ctx, mi, dir, &ds.d[i], &skip, err);
        }
        for (size_t c = 0; c < mi->nchunks && !st && !skip; c++) {
            fs[n].c = &mi->chunks[c];
            fs[n].d = &ds.d[i];
            fs[n].off = off;
            fs[n].item = mi->name;
            fs[n].idx = c;
            off += mi->chunks[c].raw_len;
            n++;
        }
    }
    if (!st)
        st = ckpt__fetch_plan(ctx, &b, m, fs, n, NULL);
    ckpt__batch_done(&b, CKPT_OK, NULL);
    {
        ckpt_status bst = ckpt__batch_wait(&b);
        if (!st && bst) {
            st = bst;
            ckpt__seterr(err, "%s", b.err);
        }
    }
    ckpt__batch_destroy(&b);
    ckpt__dests_finish(&ds, ctx->restore_sync, &st, err);
    if (st == CKPT_OK && dir)
        st = make_links(m, dir, err);
    free(fs);
    return st;
}

/* Check sizes and names before anything is written. */
static ckpt_status check_shape(struct ckpt_ctx *ctx, const struct ckpt_manifest *m)
{
    for (struct ckpt_item *it = ctx->items; it; it = it->next) {
        const struct ckpt_mitem *mi = NULL;
        if (it->kind == CKPT_ITEM_LINK)
            continue; /* nothing to restore into */
        for (size_t i = 0; i < m->nitems; i++)
            if (!strcmp(m->items[i].name, it->name))
                mi = &m->items[i];
        if (!mi || mi->kind == CKPT_ITEM_LINK) {
            ckpt__set_ctx_err(ctx, "item '%s' is %s checkpoint step %" PRIu64
                                   ": nothing restored", it->name,
                              mi ? "a link in" : "not in", m->step);
            return CKPT_E_MISMATCH;
        }
        if (it->kind != CKPT_ITEM_FILE && (uint64_t)it->size != mi->size) {
            ckpt__set_ctx_err(ctx, "item '%s' is %zu bytes, checkpoint step %" PRIu64
                                   " holds %" PRIu64 ": nothing restored",
                              it->name, it->size, m->step, mi->size);
            return CKPT_E_SIZE;
        }
    }
    return CKPT_OK;
}

/* Whether every protected item (links aside) is replicated: such a
 * program resumes from a checkpoint of any world size. */
static int all_replicated(const struct ckpt_ctx *ctx)
{
    int any = 0;
    for (const struct ckpt_item *it = ctx->items; it; it = it->next) {
        if (it->kind == CKPT_ITEM_LINK)
            continue;
        if (!it->replicated)
            return 0;
        any = 1;
    }
    return any;
}

/* The manifest of e as rank `view` sees it, into *m: one part of a
 * multi-rank checkpoint named without its commit record is
 * CKPT_E_UNSUPPORTED, a missing one CKPT_E_CORRUPT. */
static ckpt_status read_view(struct ckpt_ctx *ctx, const struct ckpt_head_entry *e, unsigned view,
                             struct ckpt_manifest *m)
{
    ckpt_status st = ckpt__read_manifest_view(ctx, e->manifest, view, m);
    if (st == CKPT_OK && m->world_size != 1 && !m->nparts) {
        ckpt__set_ctx_err(ctx,
                          "step %" PRIu64 " is one part of a %u-rank checkpoint, named "
                          "without its commit record: this version cannot restore it",
                          m->step, m->world_size);
        ckpt__manifest_free(m);
        st = CKPT_E_UNSUPPORTED;
    }
    if (st == CKPT_E_NOENT) {
        ckpt__set_ctx_err(ctx, "checkpoint step %" PRIu64 " is damaged: %s", e->step,
                          ckpt__errmsg(ctx));
        st = CKPT_E_CORRUPT;
    }
    return st;
}

ckpt_status ckpt__restore_check(struct ckpt_ctx *ctx, const struct ckpt_head_entry *e,
                                unsigned view, bool any_world, const char *dir,
                                struct ckpt_manifest *m, enum ckpt__misfit *why)
{
    ckpt_status st;
    unsigned world;

    *why = CKPT__FIT;
    st = read_view(ctx, e, view, m);
    if (st)
        return st;
    world = m->world_size ? m->world_size : 1;
    if (!any_world && !dir && ctx->into && ctx->into->other_part >= 0 &&
        world != ctx->world_size) {
        /* another world size, read as the part the caller asked for */
        unsigned part = (unsigned)ctx->into->other_part;
        if (part >= world) {
            ckpt__set_ctx_err(ctx,
                              "checkpoint step %" PRIu64 " was written by %u rank%s: it has "
                              "no part %u (this job has %u rank%s)",
                              m->step, world, world == 1 ? "" : "s", part, ctx->world_size,
                              ctx->world_size == 1 ? "" : "s");
            ckpt__manifest_free(m);
            return CKPT_E_WORLD;
        }
        if (m->rank != part) {
            ckpt__manifest_free(m);
            st = read_view(ctx, e, part, m);
            if (st)
                return st;
        }
    }
    if (any_world && view >= world) {
        ckpt__set_ctx_err(ctx, "checkpoint step %" PRIu64 " has %u part%s: no part %u", m->step,
                          world, world == 1 ? "" : "s", view);
        st = CKPT_E_NOENT;
    } else if (!dir && ctx->into) {
        st = ctx->into->prepare(ctx, m, world, why); /* the caller's memory */
    } else if (!any_world && world != ctx->world_size && (dir || !all_replicated(ctx))) {
        ckpt__set_ctx_err(ctx,
                          "checkpoint step %" PRIu64 " was written by %u rank%s; this "
                          "job has %u: resume it with %u ranks, protect only replicated "
                          "items, or read parts with ckpt_restore_part()",
                          m->step, world, world == 1 ? "" : "s", ctx->world_size, world);
        st = CKPT_E_WORLD;
    }
    if (st == CKPT_OK && !dir && !ctx->into) {
        st = check_shape(ctx, m);
        if (st)
            *why = CKPT__SHAPE; /* the program's shape is wrong, not the data */
    }
    if (st)
        ckpt__manifest_free(m);
    return st;
}

ckpt_status ckpt__restore_write(struct ckpt_ctx *ctx, const struct ckpt_manifest *m,
                                const char *dir, struct ckpt_idset *bad)
{
    char err[CKPT_ERR_MAX] = "";
    ckpt_status st = restore_one(ctx, m, dir, bad, err);
    if (st == CKPT_E_CORRUPT)
        ckpt__set_ctx_err(ctx, "checkpoint step %" PRIu64 " is damaged: %s", m->step, err);
    else if (st)
        ckpt__set_ctx_err(ctx, "restoring checkpoint step %" PRIu64 " %s%s: %s (%s)", m->step,
                          dir ? "into " : "into the protected items", dir ? dir : "", err,
                          ckpt_strerror(st));
    return st;
}

ckpt_status ckpt__restore_try(struct ckpt_ctx *ctx, const struct ckpt_head_entry *e, unsigned view,
                              bool any_world, const char *dir, struct ckpt_idset *bad,
                              enum ckpt__misfit *why)
{
    struct ckpt_manifest m;
    ckpt_status st = ckpt__restore_check(ctx, e, view, any_world, dir, &m, why);
    if (st)
        return st;
    st = ckpt__restore_write(ctx, &m, dir, bad);
    ckpt__manifest_free(&m);
    return st;
}

/* Restore checkpoint `want` (or, CKPT_STEP_LATEST, the first of the resume
 * order that restores whole), as rank `view` (any_world: a part, whatever
 * the job's world size). Any missing or damaged part (manifest,
 * chunk, pack) sends a latest-restore to the next older checkpoint, as
 * does one this version cannot read (newer format); a local
 * error (the target disk full, read-only, out of file descriptors), a
 * store error or a world size of another job stops it: an older
 * checkpoint would not fare better, and
 * nothing is reported damaged that is not. A context holding a lease epoch
 * (ckptrun run/recover, a trainer under it) then marks the checkpoints it
 * found damaged in HEAD (ckpt__mark_damaged).
 *
 * What is missing may only be gone: another writer's retention removes
 * checkpoints after HEAD was read. One HEAD (read again) no longer names
 * is skipped as gone, not reported or marked as damaged.
 *
 * The program's protected items that do not fit a checkpoint (sizes,
 * names: CKPT_E_SIZE, CKPT_E_MISMATCH) are told apart by the older
 * checkpoints: when every one disagrees, the program changed and nothing
 * is restored (the newest one's reason); when an older one fits, the
 * newer ones lie about their items (a manifest damaged consistently with
 * its own chunk list: a hostile or broken store) and the restore falls
 * back to it, saying so. Those are not marked damaged: another build of
 * the program may fit them, and retention pushes them out as the run goes
 * on. A damaged HEAD is replaced by what the manifests show (headscan.h).
 * Checkpoints not of the kind ckpt_restore_alloc's caller restores
 * (CKPT__SKIP) are passed over as if HEAD did not name them. */
static ckpt_status restore_common(struct ckpt_ctx *ctx, uint64_t want, const char *dir,
                                  uint64_t *restored, unsigned view, bool any_world)
{
    struct ckpt_head h;
    bool exists;
    unsigned scanned;
    ckpt_status st, last = CKPT_E_NOENT, shape_st = CKPT_OK;
    size_t start = 0, nbad = 0, ngone = 0, nshape = 0;
    char **bad_keys = NULL, shape_msg[CKPT_ERR_MAX] = "";
    struct ckpt_idset bad_ids;
    int tried_all = 1;

    ckpt__flight_wait(&ctx->flight);
    ckpt__idset_init(&bad_ids);
    ckpt__progress_begin(&ctx->progress, CKPT_PROGRESS_RESTORE, want);
    st = ckpt__read_head_or_scan(ctx, &h, NULL, &exists, &scanned, NULL);
    if (st)
        return st;
    if (!exists || h.n == 0) {
        ckpt__set_ctx_err(ctx, "run %s has no committed checkpoint in %s%s", ctx->run,
                          ctx->store_url,
                          scanned & CKPT_HEAD_SCANNED ? " (its HEAD is damaged, and no "
                                                        "manifest holds one)"
                                                      : "");
        ckpt__head_free(&h);
        return CKPT_E_NOENT;
    }
    if (want != CKPT_STEP_LATEST) {
        for (start = 0; start < h.n && h.entries[start].step != want; start++)
            ;
        if (start == h.n) {
            ckpt__set_ctx_err(ctx, "run %s has no committed checkpoint at step %" PRIu64,
                              ctx->run, want);
            ckpt__head_free(&h);
            return CKPT_E_NOENT;
        }
    }
    bad_keys = calloc(h.n, sizeof *bad_keys);
    if (!bad_keys) {
        ckpt__head_free(&h);
        return CKPT_E_NOMEM;
    }
    for (size_t i = start; i < h.n; i++) {
        const struct ckpt_head_entry *e = &h.entries[i];
        enum ckpt__misfit why;
        st = ckpt__restore_try(ctx, e, view, any_world, dir, &bad_ids, &why);
        if (st == CKPT_OK) {
            if (restored)
                *restored = e->step;
            if (i != start)
                ckpt__restore_fell_back(
                    ctx,
                    "restored step %" PRIu64 " instead of the newer step %" PRIu64 ", which %s",
                    e->step, h.entries[start].step,
                    nshape  ? "holds items of other sizes or names than this program's "
                              "while this older one fits: its manifest is taken as damaged"
                    : nbad  ? "is damaged"
                    : ngone ? "was removed (retention) while the restore read it"
                            : "this version cannot read");
            break;
        }
        if (why == CKPT__SKIP) {
            if (want != CKPT_STEP_LATEST) {
                tried_all = 0;
                break;
            }
            if (i == start)
                start++; /* "instead of the newer step": the newest not passed over */
            continue;
        }
        if (why == CKPT__SHAPE) {
            /* the program changed, or this manifest lies: older ones say */
            if (!nshape++) {
                shape_st = st;
                snprintf(shape_msg, sizeof shape_msg, "%s", ckpt__errmsg(ctx));
            }
            ckpt__log(&ctx->log, CKPT_LOG_WARN, "restore", "%s", ckpt__errmsg(ctx));
            if (want != CKPT_STEP_LATEST) {
                tried_all = 0;
                break;
            }
            continue;
        }
        if (st == CKPT_E_CORRUPT && !ckpt__head_retains(ctx, e->manifest)) {
            ckpt__log(&ctx->log, CKPT_LOG_INFO, "restore",
                      "step %" PRIu64 " was removed from "
                      "the run (retention after a newer commit) while the restore read it: "
                      "gone, not damaged",
                      e->step);
            ngone++;
            if (want != CKPT_STEP_LATEST) {
                ckpt__set_ctx_err(ctx,
                                  "checkpoint step %" PRIu64 " of run %s was removed (by "
                                  "retention after a newer commit) while it was read",
                                  e->step, ctx->run);
                st = CKPT_E_NOENT;
                tried_all = 0;
                break;
            }
            continue;
        }
        last = st;
        ckpt__log(&ctx->log, st == CKPT_E_CORRUPT || st == CKPT_E_UNSUPPORTED ? CKPT_LOG_WARN
                                                                             : CKPT_LOG_ERROR,
                  "restore", "%s", ckpt__errmsg(ctx));
        if (st == CKPT_E_CORRUPT)
            bad_keys[nbad++] = e->manifest;
        if ((st != CKPT_E_CORRUPT && st != CKPT_E_UNSUPPORTED) || want != CKPT_STEP_LATEST) {
            tried_all = 0;
            break; /* store down, disk full...: trying older data will not help */
        }
        if (i + 1 < h.n)
            ckpt__log(&ctx->log, CKPT_LOG_WARN, "restore", "falling back to step %" PRIu64,
                      h.entries[i + 1].step);
    }
    if (st != CKPT_OK && tried_all) {
        if (nshape) {
            /* no checkpoint fits: the program's items changed */
            st = shape_st;
            ckpt__set_ctx_err(ctx, "%s", shape_msg);
        } else if (last != CKPT_E_NOENT) {
            st = last;
        } else if (ngone) {
            ckpt__set_ctx_err(ctx,
                              "the checkpoints of run %s were removed (by retention "
                              "after newer commits) while the restore read them",
                              ctx->run);
            st = CKPT_E_NOENT;
        }
    }
    /* what was found damaged is never used again: not for dedup, and (by
     * the lease holder) not for resuming */
    if (bad_ids.n)
        ckpt__run_forget_bad(&ctx->rs, &bad_ids);
    if (nbad && atomic_load(&ctx->epoch) && (st == CKPT_OK || tried_all))
        ckpt__restore_mark(ctx, (const char **)bad_keys, nbad);
    free(bad_keys);
    ckpt__idset_free(&bad_ids);
    ckpt__head_free(&h);
    return st;
}

void ckpt__restore_fell_back(struct ckpt_ctx *ctx, const char *fmt, ...)
{
    char msg[CKPT_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ckpt__log(&ctx->log, CKPT_LOG_WARN, "restore", "%s", msg);
    ckpt__set_ctx_err(ctx, "%s", msg);
    if (ctx->into)
        ctx->into->fell_back(ctx->into);
}

void ckpt__restore_mark(struct ckpt_ctx *ctx, const char **keys, size_t n)
{
    char saved[CKPT_ERR_MAX];
    ckpt_status mst;
    snprintf(saved, sizeof saved, "%s", ckpt__errmsg(ctx));
    mst = ckpt__mark_damaged(ctx, (char **)keys, n);
    if (mst)
        ckpt__log(&ctx->log, CKPT_LOG_WARN, "restore", "cannot mark the damaged "
                  "checkpoints in HEAD: %s (%s)", ckpt_strerror(mst), ckpt__errmsg(ctx));
    ckpt__set_ctx_err(ctx, "%s", saved);
}

ckpt_status ckpt__restore_latest(struct ckpt_ctx *ctx, uint64_t *step)
{
    return restore_common(ctx, CKPT_STEP_LATEST, NULL, step, ctx->rank, false);
}

ckpt_status ckpt__restore_step(struct ckpt_ctx *ctx, uint64_t step, uint64_t *restored)
{
    return restore_common(ctx, step, NULL, restored, ctx->rank, false);
}

ckpt_status ckpt_restore_part(struct ckpt_ctx *ctx, uint64_t step, unsigned part,
                              uint64_t *restored)
{
    if (!ctx)
        return CKPT_E_INVAL;
    if (!ctx->items) {
        ckpt__set_ctx_err(ctx, "nothing is protected: call ckpt_protect() before restoring");
        return CKPT_E_INVAL;
    }
    return restore_common(ctx, step, NULL, restored, part, true);
}

ckpt_status ckpt_restore_dir(struct ckpt_ctx *ctx, uint64_t step, const char *dir,
                             uint64_t *restored)
{
    struct stat sb;
    if (!ctx || !dir || dir[0] == '\0')
        return CKPT_E_INVAL;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        ckpt__set_ctx_err(ctx, "cannot create %s: %s", dir, strerror(errno));
        return ckpt__errno_status(errno);
    }
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        ckpt__set_ctx_err(ctx, "%s is not a directory", dir);
        return CKPT_E_IO;
    }
    return restore_common(ctx, step, dir, restored, ctx->rank, false);
}
