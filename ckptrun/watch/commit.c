/* watch/commit.c -- the commit thread and what its results do to the
 * entries (watch/int.h): each snapshot is committed on the thread's own
 * libckpt context, and comes back through a pipe the supervisor polls. */
#include "watch/int.h"
#include "base/runlog.h"
#include "watch/commit.h"
#include "watch/entry.h"
#include "watch/plan.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int check_print(void *user, const struct commit_print *print)
{
    const struct watch_job *j = user;
    return !commit_print_eq(print, &j->expect);
}

void *watch_worker(void *arg)
{
    struct watch *w = arg;

    for (;;) {
        struct watch_job *j;
        struct watch_result *r;

        pthread_mutex_lock(&w->mu);
        while (!w->qhead && !w->stop)
            pthread_cond_wait(&w->cv, &w->mu);
        if (!w->qhead) {
            pthread_mutex_unlock(&w->mu);
            break;
        }
        j = w->qhead;
        w->qhead = j->next;
        if (!w->qhead)
            w->qtail = NULL;
        pthread_mutex_unlock(&w->mu);

        r = calloc(1, sizeof *r);
        if (r) {
            snprintf(r->entry, sizeof r->entry, "%s", j->entry);
            r->completed_mono = j->completed;
            r->step_from = j->step_from == SF_SAVED ? "saved"
                         : j->step_from == SF_STATE ? "state"
                         : j->step_from == SF_NAME ? "name" : "counter";
            r->changed_mono = j->changed;
            commit_paths_checked(w->ctx, j->src, j->n, j->step, check_print, j, &r->res);
            r->entries = calloc(j->n, sizeof *r->entries);
            for (size_t i = 0; r->entries && i < j->n; i++)
                if ((r->entries[i] = strdup(j->src[i].name)))
                    r->nentries++;
            r->job = j;
            j = NULL;
            /* A pointer is written whole to a pipe (< PIPE_BUF). */
            if (write(w->pipe_w, &r, sizeof r) != (ssize_t)sizeof r)
                watch_result_free(r);
        }
        job_free(j);
        pthread_mutex_lock(&w->mu);
        w->busy--;
        pthread_mutex_unlock(&w->mu);
    }
    return NULL;
}

/* A finished commit: @return 1 to hand it to the caller, 0 when handled
 * here (dropped, or to be read again). */
int watch_settle(struct watch *w, struct watch_result *r)
{
    struct watch_job *j = r->job;
    int gone = 0, changed = r->res.aborted;
    const char *what = NULL;
    cJSON *f;

    if (r->res.st == CKPT_OK) {
        if (!w->have_top || j->step > w->top)
            w->top = j->step;
        w->have_top = 1;
        for (size_t k = 0; k < j->n; k++) {
            struct entry *e = find_gen(w, j->m[k].name, j->m[k].gen);
            if (!e)
                continue;
            e->done = 1;
            e->done_sig = j->m[k].sig;
            if (e->restep && j->step == e->step)
                e->restep = 0;
            e->failed = 0;
            if (r->res.changed)
                e->done = 0; /* may be torn: committed again once complete */
        }
        if (j->head) {
            w->nhead = 0;
            for (size_t k = 0; k < j->n && w->nhead < MAX_ENTRIES; k++) {
                struct head_item *h = &w->head[w->nhead++];
                snprintf(h->name, sizeof h->name, "%s", j->m[k].name);
                h->is_link = j->m[k].is_link;
                h->sig = j->m[k].sig;
            }
            w->have_head = 1;
        }
        if (r->res.changed)
            log_msg(LOG_WARN, "watch", "the files of step %" PRIu64 " (%s) changed while they "
                    "were read: committed again at that step once complete", j->step, j->entry);
        return 1;
    }
    for (size_t k = 0; k < j->n; k++) {
        struct entry *e = find_gen(w, j->m[k].name, j->m[k].gen);
        struct sig s;
        if (!e || e->removing) {
            gone = 1;
            what = j->m[k].name;
            break;
        }
        if (e->kind == K_LINK)
            continue;
        if (entry_sig(w, e, &s) != 0 || !sig_eq(&s, &j->m[k].sig)) {
            changed = 1;
            what = j->m[k].name;
        }
    }
    if (gone || changed) {
        /* Not a failure of the store: the snapshot no longer exists. Planned
         * again from what is there now. */
        if ((f = cJSON_CreateObject())) {
            cJSON_AddStringToObject(f, "entry", what ? what : j->entry);
            cJSON_AddNumberToObject(f, "step", (double)j->step);
            cJSON_AddStringToObject(f, "why", gone ? "removed while being read"
                                                   : "changed while being read");
            cJSON_AddStringToObject(f, "detail", r->res.detail);
            log_event(gone ? LOG_INFO : LOG_DEBUG, "drop", f);
            cJSON_Delete(f);
        }
        return 0;
    }
    for (size_t k = 0; k < j->n; k++) {
        struct entry *e = find_gen(w, j->m[k].name, j->m[k].gen);
        if (e && e->kind != K_LINK) {
            e->failed = 1; /* retried once it changes again */
            e->failed_sig = j->m[k].sig;
        }
    }
    if (j->head)
        w->links_failed = w->links_changed;
    return 1;
}

void watch_result_free(struct watch_result *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->nentries; i++)
        free(r->entries[i]);
    free(r->entries);
    job_free(r->job);
    free(r);
}
