/* watch/plan.c -- the next snapshot to commit, and its hand-off to the
 * commit thread (watch/int.h). */
#include "watch/int.h"
#include "base/runlog.h"
#include "watch/entry.h"
#include "watch/links.h"
#include "watch/plan.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void job_free(struct watch_job *j)
{
    if (!j)
        return;
    for (size_t i = 0; i < j->n; i++) {
        free((char *)j->src[i].path);
        free((char *)j->src[i].name);
        free((char *)j->src[i].link);
    }
    free(j->src);
    free(j->m);
    free(j);
}

/* A snapshot being planned: members by entry. */
struct plan {
    struct entry *e[MAX_ENTRIES];
    int link_item[MAX_ENTRIES];
    size_t n;
};

static int plan_has(const struct plan *pl, const struct entry *e)
{
    for (size_t i = 0; i < pl->n; i++)
        if (pl->e[i] == e)
            return 1;
    return 0;
}

static void plan_add(struct plan *pl, struct entry *e, int link_item)
{
    if (pl->n < MAX_ENTRIES && !plan_has(pl, e)) {
        pl->e[pl->n] = e;
        pl->link_item[pl->n] = link_item;
        pl->n++;
    }
}

/* Links of the directory that belong to a snapshot: those pointing into one
 * of its entries (all of them when `all`, which also takes links to any other
 * complete entry, adding that entry), and, when `all`, links to outside. */
static void plan_links(struct watch *w, struct plan *pl, int all, int64_t now)
{
    for (size_t i = 0; i < w->nent; i++) {
        struct entry *l = &w->ent[i], *t;
        int copy;
        if (!l->in_use || l->kind != K_LINK)
            continue;
        switch (link_member(w, l, now, &t, &copy)) {
        case L_INSIDE:
            if (!all && !plan_has(pl, t))
                break;
            plan_add(pl, t, 0);
            plan_add(pl, l, !copy); /* restored as a link, made last */
            break;
        case L_OUTSIDE:
            if (all)
                plan_add(pl, l, 0);
            break;
        case L_NONE:
            break;
        }
    }
}

static int job_add_src(struct watch *w, struct watch_job *j, struct entry *e, int link_item)
{
    char p[PBUF];
    struct commit_src *v;
    struct member *m;
    int rc = -1;

    if (!(v = realloc(j->src, (j->n + 1) * sizeof *v)))
        goto out;
    j->src = v;
    if (!(m = realloc(j->m, (j->n + 1) * sizeof *m)))
        goto out;
    j->m = m;
    entry_path(w, e, p, sizeof p);
    memset(&v[j->n], 0, sizeof v[j->n]);
    memset(&m[j->n], 0, sizeof m[j->n]);
    v[j->n].path = strdup(p);
    v[j->n].name = strdup(e->name);
    if (link_item)
        v[j->n].link = e->link ? strdup(e->link) : NULL;
    if (!v[j->n].path || !v[j->n].name || (link_item && !v[j->n].link)) {
        free((char *)v[j->n].path);
        free((char *)v[j->n].name);
        free((char *)v[j->n].link);
        goto out;
    }
    snprintf(m[j->n].name, sizeof m[j->n].name, "%s", e->name);
    m[j->n].gen = e->gen;
    m[j->n].link_item = link_item;
    m[j->n].is_link = e->kind == K_LINK;
    m[j->n].sig = e->kind == K_LINK ? e->sig : e->ok_sig;
    if (!link_item)
        commit_print_add(&j->expect, &m[j->n].sig.p);
    j->n++;
    rc = 0;
out:
    return rc;
}

/* Queue the commit of a planned snapshot. */
static void queue_plan(struct watch *w, struct plan *pl, int head, int64_t now)
{
    struct watch_job *j = calloc(1, sizeof *j);
    int64_t newest = -1;
    int have_step = 0, have_num = 0;

    if (!j)
        goto fail;
    j->head = head;
    j->completed = now;
    for (size_t i = 0; i < pl->n; i++) {
        struct entry *e = pl->e[i];
        if (job_add_src(w, j, e, pl->link_item[i]) != 0)
            goto fail;
        if (e->kind == K_LINK)
            continue;
        /* The snapshot takes the trainer's step of its entries (they are
         * all of the newest one), else the highest counter value. */
        if (e->numbered && (!have_num || e->step > j->step)) {
            j->step = e->step;
            j->step_from = e->step_from;
            have_num = 1;
        } else if (!have_num && (!have_step || e->step > j->step)) {
            j->step = e->step;
            j->step_from = e->step_from;
        }
        have_step = 1;
        if (e->changed > j->changed)
            j->changed = e->changed;
        if (needs_commit(e) && e->ok_at > newest) {
            newest = e->ok_at;
            snprintf(j->entry, sizeof j->entry, "%s", e->name);
        }
    }
    if (!have_step) {
        job_free(j); /* links to outside only: nothing to anchor a step */
        return;
    }
    if (!j->entry[0])
        snprintf(j->entry, sizeof j->entry, "%s", j->m[0].name);
    counter_note(w, j->step);
    w->jobs_out++;
    w->stuck_since = 0;
    w->wait_since = 0;
    pthread_mutex_lock(&w->mu);
    if (w->qtail)
        w->qtail->next = j;
    else
        w->qhead = j;
    w->qtail = j;
    w->busy++;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return;
fail:
    log_msg(LOG_ERROR, "watch", "out of memory queueing a commit of %s", w->dir);
    job_free(j);
}

/* Ready once the links have not changed for a moment and its new entries
 * have been complete for as long (Lightning remakes last.ckpt just after the
 * rename); at once when the child is gone; and at the latest a second after
 * a snapshot began to wait (links remade faster than that never settle).
 * @return 1, or 0 with *due. */
static int plan_ready(struct watch *w, const struct plan *pl, int64_t now, int64_t *due)
{
    int64_t at = w->links_changed + LINK_QUIET_MS;

    if (!w->child_alive)
        return 1;
    for (size_t i = 0; i < pl->n; i++)
        if (pl->e[i]->kind != K_LINK && needs_commit(pl->e[i]) &&
            pl->e[i]->ok_at + LINK_QUIET_MS > at)
            at = pl->e[i]->ok_at + LINK_QUIET_MS;
    if (!w->wait_since)
        w->wait_since = now;
    if (at > w->wait_since + LINK_WAIT_MAX_MS)
        at = w->wait_since + LINK_WAIT_MAX_MS;
    if (now >= at)
        return 1;
    *due = at;
    return 0;
}

/* Decide the next commit (one at a time: what completes meanwhile joins the
 * next snapshot). An older step committed before whose entries changed since
 * (a late file in checkpoint-10 once checkpoint-20 exists) is committed again
 * first, outside stops; then the newest state: every complete entry of the
 * newest step, every complete entry without a number, and the links. Older
 * steps never committed are superseded by the newest: when checkpoints come
 * faster than they upload, each commit takes the newest. */
void watch_plan(struct watch *w, int64_t now, int64_t *next)
{
    static struct plan pl; /* main thread only; too big for the stack */
    uint64_t nstar = 0, low = UINT64_MAX;
    int have_num = 0, head_needed = 0;
    int64_t due = -1;

    if (w->paused || w->jobs_out)
        return;
    for (size_t i = 0; i < w->nent; i++) {
        struct entry *e = &w->ent[i];
        if (includable(e) && e->numbered && (!have_num || e->step > nstar)) {
            nstar = e->step;
            have_num = 1;
        }
    }
    for (size_t i = 0; i < w->nent; i++) {
        struct entry *e = &w->ent[i];
        if (!needs_commit(e))
            continue;
        if (e->numbered && e->step < nstar) {
            if (e->done && e->step < low)
                low = e->step;
        } else {
            head_needed = 1;
        }
    }
    if (low != UINT64_MAX && !w->stop_at) {
        pl.n = 0;
        for (size_t i = 0; i < w->nent; i++)
            if (includable(&w->ent[i]) && w->ent[i].numbered && w->ent[i].step == low)
                plan_add(&pl, &w->ent[i], 0);
        plan_links(w, &pl, 0, now);
        if (plan_ready(w, &pl, now, &due)) {
            queue_plan(w, &pl, 0, now);
            return;
        }
        due_min(next, due);
    }
    /* A failed snapshot for a link change is tried again at the next change,
     * not in a loop. */
    if (!head_needed && (w->links_changed == w->links_failed || !links_changed_vs_head(w, now))) {
        /* Nothing to commit: the next snapshot waits afresh -- unless this
         * is a moment between two versions of a writer faster than the
         * wait (a new last.pt every 200 ms, reported by saved() a moment
         * after its rename), which would start it again every time. */
        if (w->wait_since && now - w->wait_since >= 2 * LINK_WAIT_MAX_MS)
            w->wait_since = 0;
        return;
    }
    pl.n = 0;
    for (size_t i = 0; i < w->nent; i++) {
        struct entry *e = &w->ent[i];
        if (includable(e) && (!e->numbered || (have_num && e->step == nstar)))
            plan_add(&pl, e, 0);
    }
    plan_links(w, &pl, 1, now);
    if (!pl.n)
        return;
    if (plan_ready(w, &pl, now, &due))
        queue_plan(w, &pl, 1, now);
    else
        due_min(next, due);
}
