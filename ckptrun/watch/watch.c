/*
 * watch.c -- the watcher's life and its tick (watch.h; the rules are
 * documented in docs/ckptrun.md, "Watched directory"). Its parts
 * (watch/int.h): watch/events.c reads inotify, watch/judge.c decides when
 * an entry is complete, watch/plan.c what the next snapshot holds,
 * watch/commit.c commits it on its own thread, over watch/entry.c (entries
 * and their signatures), watch/links.c and watch/writers.c.
 */
#include "watch/int.h"
#include "watch/watch.h"
#include "base/runlog.h"
#include "record/record.h"
#include "watch/commit.h"
#include "watch/entry.h"
#include "watch/judge.h"
#include "watch/plan.h"
#include "watch/writers.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

struct listed {
    uint64_t steps[MAX_MARKS];
    int n;
    uint64_t max;
    int any;
};

static int list_cb(void *user, const struct ckpt_info *info)
{
    struct listed *l = user;
    if (!l->any || info->step > l->max)
        l->max = info->step;
    l->any = 1;
    if (l->n < MAX_MARKS)
        l->steps[l->n++] = info->step;
    return 0;
}

/* Names the store's checkpoints of files hold (their files/ marks), with
 * the highest step holding each; the highest marked step's names are the
 * newest snapshot. */
struct stored {
    cJSON *names;             /* object: name -> step */
    cJSON *head;              /* array of the highest marked step's names */
    uint64_t head_step;
};

static void read_stored(struct watch *w, struct record *rec, struct stored *sd)
{
    struct listed l = { .n = 0 };
    ckpt_status st;

    memset(sd, 0, sizeof *sd);
    sd->names = cJSON_CreateObject();
    st = ckpt_list(w->ctx, list_cb, &l);
    if (st != CKPT_OK) {
        log_msg(LOG_WARN, "watch", "cannot list the run's checkpoints (%s: %s): entries "
                "already in %s are taken as committed", ckpt_strerror(st), ckpt_errmsg(w->ctx),
                w->dir);
        cJSON_Delete(sd->names);
        sd->names = NULL;
        return;
    }
    if (l.any) {
        watch_note_step(w, l.max);
        w->top = l.max;
        w->have_top = 1;
    }
    for (int i = 0; rec && sd->names && i < l.n; i++) {
        cJSON *arr = NULL;
        const cJSON *e;
        st = record_files_entries(rec, l.steps[i], &arr);
        if (st != CKPT_OK) {
            if (st != CKPT_E_NOENT) /* NOENT: a checkpoint of memory regions */
                log_msg(LOG_WARN, "watch", "cannot read the files mark of step %" PRIu64
                        ": %s", l.steps[i], ckpt_strerror(st));
            continue;
        }
        cJSON_ArrayForEach(e, arr) {
            cJSON *have = cJSON_GetObjectItemCaseSensitive(sd->names, e->valuestring);
            if (!have)
                cJSON_AddNumberToObject(sd->names, e->valuestring, (double)l.steps[i]);
            else if (cJSON_GetNumberValue(have) < (double)l.steps[i])
                cJSON_SetNumberValue(have, (double)l.steps[i]);
        }
        if (!sd->head || l.steps[i] > sd->head_step) {
            cJSON_Delete(sd->head);
            sd->head = arr;
            sd->head_step = l.steps[i];
            arr = NULL;
        }
        cJSON_Delete(arr);
    }
}

static int in_array(const cJSON *arr, const char *name)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, arr)
        if (cJSON_IsString(e) && strcmp(e->valuestring, name) == 0)
            return 1;
    return 0;
}

int watch_open(struct watch **out, const char *dir, const char *marker, uint64_t settle_ms,
               struct ckpt_ctx *ctx, struct record *rec)
{
    struct watch *w = calloc(1, sizeof *w);
    int pfd[2] = { -1, -1 };
    DIR *d = NULL;
    struct dirent *de;
    struct stored sd = { 0 };
    int64_t now = ckpt__mono_ms();
    int rc = -1, adopted = 0, fresh = 0;

    *out = NULL;
    if (!w)
        goto out;
    w->ifd = w->pipe_r = w->pipe_w = -1;
    w->ctx = ctx;
    w->counter = 1;
    w->self = getpid();
    w->child_alive = 1;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (!realpath(dir, w->dir)) {
        log_msg(LOG_ERROR, "watch", "%s: %s", dir, strerror(errno));
        goto out;
    }
    snprintf(w->marker, sizeof w->marker, "%s", marker ? marker : "");
    w->settle_ms = settle_ms;
    w->ent = calloc(MAX_ENTRIES, sizeof *w->ent);
    w->wm = calloc(MAX_WATCHES, sizeof *w->wm);
    w->head = calloc(MAX_ENTRIES, sizeof *w->head);
    if (!w->ent || !w->wm || !w->head)
        goto out;
    if ((w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0 ||
        pipe2(pfd, O_CLOEXEC | O_NONBLOCK) != 0) {
        log_msg(LOG_ERROR, "watch", "inotify/pipe: %s", strerror(errno));
        goto out;
    }
    w->pipe_r = pfd[0];
    w->pipe_w = pfd[1];
    int wd = inotify_add_watch(w->ifd, w->dir,
                               IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE |
                               IN_CLOSE_WRITE | IN_MODIFY | IN_ATTRIB | IN_ONLYDIR);
    if (wd < 0) {
        log_msg(LOG_ERROR, "watch", "cannot watch %s: %s", w->dir, strerror(errno));
        goto out;
    }
    add_wd(w, wd, "");
    /* What is there now was restored, or left by an earlier run on this
     * machine. What the store holds is committed; the rest (written after
     * the last upload, before a hard kill) is new and committed once
     * complete. The worker is not started yet: the context is ours. */
    read_stored(w, rec, &sd);
    if ((d = opendir(w->dir))) {
        while ((de = readdir(d)) != NULL) {
            struct entry *e;
            const cJSON *have;
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                continue;
            if (!(e = add_entry(w, de->d_name, now)))
                continue;
            e->sig_ok = entry_sig(w, e, &e->sig) == 0;
            e->sig_at = now;
            have = sd.names ? cJSON_GetObjectItemCaseSensitive(sd.names, e->name) : NULL;
            if (!sd.names || have) {
                e->ok = e->done = 1;
                e->ok_sig = e->done_sig = e->sig;
                e->ok_at = now;
                e->fresh = 0;
                if (!e->numbered && have)
                    e->step = (uint64_t)cJSON_GetNumberValue(have);
                if (e->kind == K_DIR && e->sig.has_marker) {
                    w->shape = e->sig.shape; /* a complete checkpoint of this writer */
                    w->have_shape = 1;
                }
                if (sd.head && in_array(sd.head, e->name) && w->nhead < MAX_ENTRIES) {
                    struct head_item *h = &w->head[w->nhead++];
                    snprintf(h->name, sizeof h->name, "%s", e->name);
                    h->is_link = e->kind == K_LINK;
                    h->sig = e->sig;
                    w->have_head = 1;
                }
                adopted++;
            } else if (e->kind != K_LINK) {
                fresh++;
            }
        }
        closedir(d);
    }
    if (!sd.names) {
        /* Unknown: the links as found count as committed too. */
        for (size_t i = 0; i < w->nent && w->nhead < MAX_ENTRIES; i++)
            if (w->ent[i].in_use && w->ent[i].kind == K_LINK) {
                struct head_item *h = &w->head[w->nhead++];
                snprintf(h->name, sizeof h->name, "%s", w->ent[i].name);
                h->is_link = 1;
                h->sig = w->ent[i].sig;
            }
        w->have_head = 1;
    }
    if (fresh)
        log_msg(LOG_INFO, "watch", "%d entr%s of %s not in the store: committed once complete",
                fresh, fresh == 1 ? "y" : "ies", w->dir);
    log_msg(LOG_DEBUG, "watch", "%d entr%s of %s already in the store", adopted,
            adopted == 1 ? "y" : "ies", w->dir);
    if (pthread_create(&w->thr, NULL, watch_worker, w) != 0) {
        log_msg(LOG_ERROR, "watch", "cannot start the commit thread");
        goto out;
    }
    w->thr_started = 1;
    *out = w;
    w = NULL;
    rc = 0;
out:
    cJSON_Delete(sd.names);
    cJSON_Delete(sd.head);
    if (w) {
        w->ctx = NULL; /* the caller still owns it on failure */
        watch_close(w, 1);
    }
    return rc;
}

void watch_close(struct watch *w, int wait)
{
    int busy;

    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    busy = w->busy;
    /* Drop what was not started: nobody will wait for it. */
    while (w->qhead) {
        struct watch_job *j = w->qhead;
        w->qhead = j->next;
        job_free(j);
        w->busy--;
    }
    w->qtail = NULL;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    if (w->thr_started && !wait && busy) {
        /* A commit is in flight and the process is about to exit: leave the
         * thread, its context and this struct alone; exit() ends them. */
        pthread_detach(w->thr);
        return;
    }
    if (w->thr_started)
        pthread_join(w->thr, NULL);
    ckpt_close(w->ctx);
    for (struct watch_result *r; w->pipe_r >= 0 &&
         read(w->pipe_r, &r, sizeof r) == (ssize_t)sizeof r;)
        watch_result_free(r);
    if (w->ifd >= 0)
        close(w->ifd);
    if (w->pipe_r >= 0)
        close(w->pipe_r);
    if (w->pipe_w >= 0)
        close(w->pipe_w);
    for (size_t i = 0; w->ent && i < w->nent; i++)
        free(w->ent[i].link);
    free(w->ent);
    free(w->wm);
    free(w->head);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}

int watch_inotify_fd(const struct watch *w) { return w->ifd; }
int watch_result_fd(const struct watch *w) { return w->pipe_r; }
void watch_set_pgid(struct watch *w, pid_t pgid)
{
    w->pgid = pgid;
    if (pgid > 0)
        w->child_alive = 1;
}
void watch_set_settle(struct watch *w, uint64_t settle_ms)
{
    w->settle_ms = settle_ms;
    w->dirty = 1; /* due times change */
}
int watch_dirty(const struct watch *w) { return w->dirty; }
void watch_pause(struct watch *w) { w->paused = 1; }

void watch_stopping(struct watch *w)
{
    if (!w->stop_at) {
        /* The last look before the signal: an entry complete now (its
         * marker, its files, no writer left in it) is complete before the
         * stop, whatever its writer dies of next. */
        watch_handle_inotify(w);
        w->last_look = 1;
        watch_tick(w);
        w->last_look = 0;
        w->stop_at = ckpt__mono_ms();
    }
    w->dirty = 1;
}

void watch_next_codec(struct watch *w, ckpt_codec codec)
{
    /* ckpt_request is documented thread-safe: the worker may be mid-save. */
    ckpt_request(w->ctx, codec);
}

int watch_busy(struct watch *w)
{
    return w->jobs_out;
}

int64_t watch_tick(struct watch *w)
{
    int64_t now = ckpt__mono_ms(), next = -1;

    w->dirty = 0;
    if (w->paused)
        return -1;
    scan_writers(w, now, &next);
    for (size_t i = 0; i < w->nent; i++) {
        struct entry *e = &w->ent[i];
        struct sig s;
        int walk_ok;

        if (!e->in_use)
            continue;
        if (e->kind == K_LINK) {
            char *old = e->link ? strdup(e->link) : NULL;
            read_link(w, e);
            if ((old == NULL) != (e->link == NULL) || (old && strcmp(old, e->link) != 0))
                w->links_changed = now;
            free(old);
        }
        /* Complete or removed, and no event since it was last looked at:
         * nothing to walk (a tree of many files is walked only on change). */
        if (e->kind != K_LINK && (e->ok || e->removing) && e->sig_ok && !e->touched)
            continue;
        e->touched = 0;
        walk_ok = entry_sig(w, e, &s) == 0;
        if (!walk_ok || !sig_eq(&s, &e->sig)) {
            /* Changed: when its events said, or else now, when it was seen
             * (a change after a stop began must not be dated before it). */
            if (e->changed <= e->sig_at)
                e->changed = now;
            if (e->kind == K_LINK && s.link_hash != e->sig.link_hash)
                w->links_changed = now;
        }
        e->sig = s;
        e->sig_at = now;
        e->sig_ok = walk_ok;
        if (e->kind == K_LINK)
            continue;
        if (e->ok && (!walk_ok || !sig_eq(&s, &e->ok_sig)))
            e->ok = 0; /* changed after it was complete: a new version */
        /* Fewer files than its last complete version, even unseen by inotify
         * (an overflow, a file system without events): being removed -- unless
         * its writer says it made a new version (a marker, a rename). */
        if (walk_ok && e->ok_sig.p.files && s.p.files < e->ok_sig.p.files &&
            e->trigger == T_NONE)
            entry_lost(w, e, "files");
    }
    /* Judged once every entry was looked at: a newer entry's marker tells
     * about the older ones (watch/judge.c). */
    for (size_t i = 0; i < w->nent; i++) {
        struct entry *e = &w->ent[i];
        if (e->in_use && e->kind != K_LINK && !e->ok && !e->removing)
            judge(w, e, now, &next);
    }
    watch_plan(w, now, &next);
    stuck_check(w, now, &next);
    if (w->links_changed + LINK_QUIET_MS > now && w->child_alive)
        due_min(&next, w->links_changed + LINK_QUIET_MS);
    return next;
}

void watch_child_exit(struct watch *w, int code)
{
    int64_t now = ckpt__mono_ms();

    w->child_alive = 0;
    w->pgid = 0;
    w->child_clean = code == 0 && !w->stop_at;
    w->dirty = 1;
    if (w->paused)
        return;
    for (size_t i = 0; i < w->nent; i++) {
        struct entry *e = &w->ent[i];
        const char *by;
        if (!e->in_use || e->kind == K_LINK || e->ok || e->removing)
            continue;
        e->sig_ok = entry_sig(w, e, &e->sig) == 0;
        if (!e->sig_ok || e->sig.p.files == 0)
            continue;
        if (e->kind == K_FILE && e->trigger == T_CLOSE && !w->child_clean) {
            /* Its close came with the child's death: not a completion. */
            e->torn = 1;
            e->trigger = T_NONE;
            log_msg(LOG_INFO, "watch", "%s was closed as the child died: not complete "
                    "(may be torn)", e->name);
            continue;
        }
        if (e->trigger == T_RENAMED) {
            mark_ok(w, e, "rename", now);
            continue;
        }
        /* A clean exit leaves no writer: what is still settling is done.
         * After a crash it is not (it may be torn). */
        if (!w->child_clean || e->torn)
            continue;
        by = e->trigger == T_MARKER || (e->kind == K_DIR && w->marker[0] && e->fresh &&
                                        e->sig.has_marker) ? "marker"
           : e->trigger == T_CLOSE ? "close" : "exit";
        mark_ok(w, e, by, now);
    }
    /* Queue now: with the child gone the supervisor ends once nothing is
     * busy, before it would tick again. */
    watch_tick(w);
    w->dirty = 1;
}

struct watch_result *watch_take_result(struct watch *w)
{
    struct watch_result *r = NULL;

    while (read(w->pipe_r, &r, sizeof r) == (ssize_t)sizeof r) {
        int pass;
        w->jobs_out--;
        pass = watch_settle(w, r);
        /* The next commit is planned at once: once the child is gone the
         * supervisor ends as soon as nothing is busy. */
        if (!w->jobs_out)
            watch_tick(w);
        w->dirty = 1;
        if (pass)
            return r;
        watch_result_free(r);
        r = NULL;
    }
    return NULL;
}

int watch_uncommitted(struct watch *w, int retry,
                      void (*fn)(void *user, const char *name, uint64_t step,
                                 const struct commit_print *print),
                      void *user)
{
    uint64_t nstar = 0;
    int have_num = 0, n = 0;

    if (!w || w->paused)
        return 0;
    /* The snapshot watch_plan would make of the newest state (older steps
     * never committed are superseded by it, not lost). */
    for (size_t i = 0; i < w->nent; i++) {
        const struct entry *e = &w->ent[i];
        if (includable(e) && e->numbered && (!have_num || e->step > nstar)) {
            nstar = e->step;
            have_num = 1;
        }
    }
    for (size_t i = 0; i < w->nent; i++) {
        struct entry *e = &w->ent[i];
        if (!includable(e) || (e->numbered && e->step != nstar))
            continue;
        if (e->done && sig_eq(&e->ok_sig, &e->done_sig) && !e->restep)
            continue;
        n++;
        if (fn)
            fn(user, e->name, e->step, &e->ok_sig.p);
        if (retry && e->failed) {
            e->failed = 0;
            w->dirty = 1;
        }
    }
    return n;
}

void watch_note_step(struct watch *w, uint64_t step)
{
    counter_note(w, step);
}
