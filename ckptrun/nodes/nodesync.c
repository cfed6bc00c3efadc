/* nodesync.c -- keeping step with the other nodes through the store (nodesync.h). */
#include "nodes/nodesync.h"
#include "record/lease.h"
#include "base/runlog.h"
#include "ckpt_common.h"
#include "ckpt_store.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLOW_MS 1000
#define FAST_MS 250
#define LEASE_EVERY_MS 2000
#define STOP_MAX_BYTES 4096

struct nodesync {
    struct nodesync_cfg c;    /* c.ctx and c.st: the thread's */
    char run[256], job[128];
    pthread_t thr;
    int started;

    pthread_mutex_t mu;       /* guards everything below */
    pthread_cond_t cv;
    int quit;
    int fast;
    int stop_post;            /* a stop to write */
    int stop_posted;
    char stop_reason[96];
    int64_t stop_deadline;
    int stop_user;
    uint64_t empty_want[NODESYNC_MAX_PENDING];
    int nempty_want;
    struct nodesync_view v;
};

void nodesync_stop_key(char *buf, size_t n, const char *run, const char *job, uint64_t epoch)
{
    snprintf(buf, n, "%s/stops/%s.e%" PRIu64 ".json", run, job, epoch);
}

/* ---- the store -------------------------------------------------------------- */

static void write_stop(struct nodesync *ns, const char *reason, int64_t deadline, int user)
{
    char key[512], err[CKPT_ERR_MAX] = "";
    struct ckpt_put_opts po = { CKPT_PUT_IF_NONE_MATCH, NULL, 0 };
    cJSON *j = cJSON_CreateObject();
    char *body = NULL;
    ckpt_status st;

    if (!j)
        return;
    nodesync_stop_key(key, sizeof key, ns->run, ns->job, ns->c.epoch);
    cJSON_AddNumberToObject(j, "format", 1);
    cJSON_AddStringToObject(j, "job", ns->job);
    cJSON_AddNumberToObject(j, "epoch", (double)ns->c.epoch);
    cJSON_AddNumberToObject(j, "node", ns->c.rank);
    cJSON_AddStringToObject(j, "reason", reason);
    cJSON_AddNumberToObject(j, "deadline_ms", (double)deadline);
    cJSON_AddBoolToObject(j, "user", user);
    cJSON_AddNumberToObject(j, "time_ms", (double)ckpt__now_ms());
    body = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!body)
        return;
    /* Create-only: the first node's stop is the job's; a later one (the
     * same preemption reaching another node) finds it and adds nothing. */
    st = ckpt_store_put(ns->c.st, key, body, strlen(body), &po, NULL, err);
    if (st != CKPT_OK && st != CKPT_E_PRECONDITION && st != CKPT_E_EXISTS)
        log_msg(LOG_WARN, "nodes", "cannot write the job's stop %s: %s %s", key,
                ckpt_strerror(st), err);
    free(body);
}

/* Read the stop object into v. @return 1 when there is one. */
static int read_stop(struct nodesync *ns, struct nodesync_view *v)
{
    char key[512], err[CKPT_ERR_MAX] = "";
    void *buf = NULL;
    size_t len = 0;
    cJSON *j;
    const cJSON *n, *r, *d;
    int got = 0;

    nodesync_stop_key(key, sizeof key, ns->run, ns->job, ns->c.epoch);
    if (ckpt_store_get(ns->c.st, key, STOP_MAX_BYTES, &buf, &len, NULL, err) != CKPT_OK)
        return 0;
    j = cJSON_ParseWithLength(buf, len);
    n = cJSON_GetObjectItemCaseSensitive(j, "node");
    r = cJSON_GetObjectItemCaseSensitive(j, "reason");
    d = cJSON_GetObjectItemCaseSensitive(j, "deadline_ms");
    {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "time_ms");
        if (cJSON_IsNumber(t) && t->valuedouble > 0 && t->valuedouble < 9e15)
            v->stop_time_ms = (int64_t)t->valuedouble;
        v->stop_user = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "user"));
    }
    if (cJSON_IsNumber(n) && n->valuedouble >= 0 && n->valuedouble < 65536 && cJSON_IsString(r) &&
        cJSON_IsNumber(d)) {
        v->stop_node = (unsigned)n->valuedouble;
        snprintf(v->stop_reason, sizeof v->stop_reason, "%s", r->valuestring);
        v->stop_deadline_ms = d->valuedouble > 0 && d->valuedouble < 9e15 ? (int64_t)d->valuedouble
                                                                          : 0;
        got = 1;
    } else {
        /* Not ours to judge further: a stop all the same (someone wrote it). */
        snprintf(v->stop_reason, sizeof v->stop_reason, "stop object malformed");
        v->stop_node = 0;
        got = 1;
    }
    cJSON_Delete(j);
    free(buf);
    return got;
}

struct pend_acc {
    struct nodesync *ns;
    struct nodesync_view *v;
    uint64_t seen[NODESYNC_MAX_PENDING][8]; /* rank bitmaps of the first 512 ranks */
};

static int on_part(void *user, const struct ckpt_part_info *p)
{
    struct pend_acc *a = user;
    struct nodesync_view *v = a->v;
    int i;

    if (p->epoch != a->ns->c.epoch || p->world_size != a->ns->c.nnodes)
        return 0; /* another generation's leftover: never committed by us */
    for (i = 0; i < v->npending; i++)
        if (v->pending[i].step == p->step)
            break;
    if (i == v->npending) {
        if (v->npending == NODESYNC_MAX_PENDING)
            return 0;
        memset(&v->pending[i], 0, sizeof v->pending[i]);
        memset(a->seen[i], 0, sizeof a->seen[i]);
        v->pending[i].step = p->step;
        v->pending[i].first_ms = p->time_ms;
        v->npending++;
    }
    if (p->rank < 512) {
        uint64_t bit = 1ull << (p->rank % 64);
        if (a->seen[i][p->rank / 64] & bit)
            return 0; /* a rank's second part of the step */
        a->seen[i][p->rank / 64] |= bit;
    }
    v->pending[i].have++;
    if (p->rank == a->ns->c.rank)
        v->pending[i].mine = 1;
    if (p->time_ms > 0 && p->time_ms < v->pending[i].first_ms)
        v->pending[i].first_ms = p->time_ms;
    return 0;
}

static int newest_cb(void *user, const struct ckpt_info *info)
{
    *(int64_t *)user = (int64_t)info->step;
    return 1;
}

static void poll_once(struct nodesync *ns, struct nodesync_view *v, int64_t *next_lease)
{
    struct pend_acc acc;
    ckpt_status st;
    int64_t newest = -1;

    if (!v->stop_seen)
        v->stop_seen = read_stop(ns, v);
    v->npending = 0;
    memset(&acc, 0, sizeof acc);
    acc.ns = ns;
    acc.v = v;
    st = ckpt_pending(ns->c.ctx, on_part, &acc);
    if (st != CKPT_OK)
        log_msg(LOG_DEBUG, "nodes", "cannot list pending parts: %s %s", ckpt_strerror(st),
                ckpt_errmsg(ns->c.ctx));
    if (ns->c.rank == 0) {
        /* The newest complete step: committing it makes every older pending
         * step moot (readers see the newest). */
        for (int i = v->npending - 1; i >= 0; i--) {
            if (v->pending[i].have < ns->c.nnodes)
                continue;
            st = ckpt_commit_parts(ns->c.ctx, v->pending[i].step, ns->c.nnodes);
            if (st == CKPT_OK) {
                v->commit_error[0] = '\0';
                v->npending = 0;
                /* the rest is re-read at the next poll */
            } else {
                snprintf(v->commit_error, sizeof v->commit_error, "step %" PRIu64 ": %s %s",
                         v->pending[i].step, ckpt_strerror(st), ckpt_errmsg(ns->c.ctx));
            }
            break;
        }
    }
    if (ckpt_list(ns->c.ctx, newest_cb, &newest) == CKPT_OK)
        v->global_step = newest;
    if (ns->c.rank != 0 && ckpt__mono_ms() >= *next_lease) {
        struct lease_info li;
        char err[CKPT_ERR_MAX] = "";
        *next_lease = ckpt__mono_ms() + LEASE_EVERY_MS;
        st = lease_read(ns->c.st, ns->run, &li, NULL, err);
        if (st == CKPT_OK && (li.epoch != ns->c.epoch || strcmp(li.job, ns->job) != 0)) {
            v->lost = 1;
            snprintf(v->lost_why, sizeof v->lost_why, "the run's lease is now job %s epoch "
                     "%" PRIu64 " (held by %s)", li.job[0] ? li.job : "(single runner)",
                     li.epoch, li.holder);
        }
    }
}

static void write_empty(struct nodesync *ns, uint64_t step, struct nodesync_view *v)
{
    ckpt_status st = ckpt_save(ns->c.ctx, step);

    if (st == CKPT_OK)
        st = ckpt_wait(ns->c.ctx);
    if (st == CKPT_OK) {
        if (step > v->empty_done)
            v->empty_done = step;
        cJSON *f = cJSON_CreateObject();
        if (f) {
            cJSON_AddNumberToObject(f, "step", (double)step);
            cJSON_AddNumberToObject(f, "node", ns->c.rank);
            cJSON_AddBoolToObject(f, "empty", 1);
        }
        log_event(LOG_INFO, "part", f); /* as the supervisor's own part events */
        cJSON_Delete(f);
    } else {
        log_msg(LOG_WARN, "part", "cannot write node %u's empty part of step %" PRIu64 ": %s %s",
                ns->c.rank, step, ckpt_strerror(st), ckpt_errmsg(ns->c.ctx));
    }
}

/* ---- the thread ------------------------------------------------------------------ */

static void *run_thread(void *arg)
{
    struct nodesync *ns = arg;
    struct nodesync_view v;
    int64_t next_lease = 0;

    pthread_mutex_lock(&ns->mu);
    v = ns->v;
    pthread_mutex_unlock(&ns->mu);
    for (;;) {
        char reason[96];
        int64_t deadline = 0;
        int post = 0, nwant, user = 0;
        uint64_t want[NODESYNC_MAX_PENDING];
        struct timespec ts;

        pthread_mutex_lock(&ns->mu);
        if (ns->quit) {
            pthread_mutex_unlock(&ns->mu);
            break;
        }
        if (ns->stop_post) {
            ns->stop_post = 0;
            post = 1;
            snprintf(reason, sizeof reason, "%s", ns->stop_reason);
            deadline = ns->stop_deadline;
            user = ns->stop_user;
        }
        nwant = ns->nempty_want;
        memcpy(want, ns->empty_want, sizeof want);
        ns->nempty_want = 0;
        pthread_mutex_unlock(&ns->mu);

        if (post)
            write_stop(ns, reason, deadline, user);
        for (int i = 0; i < nwant; i++)
            write_empty(ns, want[i], &v);
        poll_once(ns, &v, &next_lease);
        v.seq++;

        pthread_mutex_lock(&ns->mu);
        ns->v = v;
        pthread_mutex_unlock(&ns->mu);
        if (ns->c.wake)
            ns->c.wake();

        pthread_mutex_lock(&ns->mu);
        if (!ns->quit && !ns->stop_post && !ns->nempty_want) {
            int64_t ms = ns->fast || v.npending ? FAST_MS : SLOW_MS;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += (time_t)(ms / 1000);
            ts.tv_nsec += (long)(ms % 1000) * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&ns->cv, &ns->mu, &ts);
        }
        pthread_mutex_unlock(&ns->mu);
    }
    return NULL;
}

int nodesync_start(struct nodesync **out, const struct nodesync_cfg *cfg)
{
    struct nodesync *ns = calloc(1, sizeof *ns);

    *out = NULL;
    if (!ns) {
        ckpt_close(cfg->ctx);
        return -1;
    }
    ns->c = *cfg;
    snprintf(ns->run, sizeof ns->run, "%s", cfg->run);
    snprintf(ns->job, sizeof ns->job, "%s", cfg->job);
    ns->v.global_step = -1;
    pthread_mutex_init(&ns->mu, NULL);
    pthread_cond_init(&ns->cv, NULL);
    if (pthread_create(&ns->thr, NULL, run_thread, ns) != 0) {
        nodesync_close(ns);
        return -1;
    }
    ns->started = 1;
    *out = ns;
    return 0;
}

void nodesync_close(struct nodesync *ns)
{
    if (!ns)
        return;
    if (ns->started) {
        pthread_mutex_lock(&ns->mu);
        ns->quit = 1;
        pthread_cond_signal(&ns->cv);
        pthread_mutex_unlock(&ns->mu);
        pthread_join(ns->thr, NULL);
    }
    ckpt_close(ns->c.ctx);
    pthread_cond_destroy(&ns->cv);
    pthread_mutex_destroy(&ns->mu);
    free(ns);
}

void nodesync_view(struct nodesync *ns, struct nodesync_view *v)
{
    pthread_mutex_lock(&ns->mu);
    *v = ns->v;
    pthread_mutex_unlock(&ns->mu);
}

void nodesync_post_stop(struct nodesync *ns, const char *reason, int64_t deadline_ms,
                        int user)
{
    pthread_mutex_lock(&ns->mu);
    if (!ns->stop_posted) {
        ns->stop_posted = 1;
        ns->stop_post = 1;
        snprintf(ns->stop_reason, sizeof ns->stop_reason, "%s", reason);
        ns->stop_deadline = deadline_ms;
        ns->stop_user = user;
        ns->fast = 1;
        pthread_cond_signal(&ns->cv);
    }
    pthread_mutex_unlock(&ns->mu);
}

void nodesync_write_empty(struct nodesync *ns, uint64_t step)
{
    pthread_mutex_lock(&ns->mu);
    if (ns->nempty_want < NODESYNC_MAX_PENDING) {
        ns->empty_want[ns->nempty_want++] = step;
        pthread_cond_signal(&ns->cv);
    }
    pthread_mutex_unlock(&ns->mu);
}

void nodesync_fast(struct nodesync *ns, int on)
{
    pthread_mutex_lock(&ns->mu);
    ns->fast = on;
    pthread_cond_signal(&ns->cv);
    pthread_mutex_unlock(&ns->mu);
}
