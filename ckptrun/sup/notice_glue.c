/*
 * notice_glue.c -- connects the notice poller (notice.h) to the supervisor
 * (notice_glue.h): each notice goes to the supervisor's queue
 * (notice_queue.h).
 *
 * Azure acknowledgement: the supervisor calls our ack function exactly once
 * per posted notice, on its own thread, after the final checkpoint committed
 * (or failed). notice_ack() is a network call of up to ~5 s, which must not
 * stall the supervisor's stop sequence, so each acknowledgement runs on a
 * short-lived thread that ckptrun_notice_stop() joins before returning.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/runlog.h"
#include "notice/notice.h"
#include "sup/notice_glue.h"
#include "sup/notice_queue.h"

#define MAX_ACKS 8 /* terminate is delivered once; maintenance a few times at most */

struct ack_ctx {
    char id[128];
    int used;       /* slot handed to the supervisor */
    int thread;     /* an ack thread was started (join it) */
    pthread_t th;
    struct notice_poller *p; /* captured at start: valid until joined */
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* guards everything below */
static struct notice_poller *g_poller;
static struct ack_ctx g_acks[MAX_ACKS];

static void glue_log(void *user, ckpt_log_level level, const char *subject, const char *msg)
{
    int lv = level == CKPT_LOG_DEBUG  ? LOG_DEBUG
             : level == CKPT_LOG_INFO ? LOG_INFO
             : level == CKPT_LOG_WARN ? LOG_WARN
                                      : LOG_ERROR;
    (void)user;
    (void)subject;
    /* The supervisor logs the notice itself as event "notice" with kind,
     * provider and deadline fields; the poller's own lines get another name
     * so --log-json consumers can tell them apart. */
    log_msg(lv, "notice-poll", "%s", msg);
}

static void *ack_thread(void *arg)
{
    struct ack_ctx *a = arg;
    /* ckptrun_notice_stop() joins this thread before freeing the poller. */
    notice_ack(a->p, a->id);
    return NULL;
}

static void on_ack(void *user, int committed, uint64_t step)
{
    struct ack_ctx *a = user;
    (void)step;
    pthread_mutex_lock(&g_mu);
    /* Acknowledging lets the platform act early: only after a commit. */
    if (committed && a->id[0] && g_poller && !a->thread) {
        a->p = g_poller;
        if (pthread_create(&a->th, NULL, ack_thread, a) == 0)
            a->thread = 1;
    }
    pthread_mutex_unlock(&g_mu);
}

static void on_event(void *user, const struct notice_event *ev)
{
    enum ckptrun_notice_kind kind = ev->kind == NOTICE_REBALANCE     ? CKPTRUN_NOTICE_REBALANCE
                                    : ev->kind == NOTICE_MAINTENANCE ? CKPTRUN_NOTICE_MAINTENANCE
                                                                     : CKPTRUN_NOTICE_PREEMPT;
    struct ack_ctx *a = NULL;
    int i;
    (void)user;
    if (ev->id[0]) {
        pthread_mutex_lock(&g_mu);
        for (i = 0; i < MAX_ACKS && !a; i++)
            if (!g_acks[i].used)
                a = &g_acks[i];
        if (a) {
            a->used = 1;
            snprintf(a->id, sizeof a->id, "%s", ev->id);
        }
        pthread_mutex_unlock(&g_mu);
    }
    ckptrun_notice_post(kind, ev->deadline_ms, ev->provider, a ? on_ack : NULL, a);
}

int ckptrun_notice_start(const struct ckptrun_notice_cfg *cfg)
{
    struct notice_config nc = NOTICE_CONFIG_INIT;
    struct notice_poller *p = NULL;
    int ret;

    nc.provider = cfg && cfg->mode ? cfg->mode : "auto";
    nc.metadata_url = cfg ? cfg->metadata_url : NULL;
    /* Test hook: a fake DMI directory lets tests exercise --notice auto
     * without depending on the machine they run on. */
    nc.dmi_dir = getenv("CKPT_DMI_DIR");
    nc.cb = on_event;
    nc.log_fn = glue_log; /* ckptrun's log filters by its own verbosity */
    ret = notice_start(&nc, &p);
    if (ret == 0) {
        pthread_mutex_lock(&g_mu);
        g_poller = p;
        pthread_mutex_unlock(&g_mu);
    }
    return ret;
}

void ckptrun_notice_stop(void)
{
    struct notice_poller *p;
    pthread_t th[MAX_ACKS];
    int i, n = 0;
    /* No new acknowledgement threads after this; then join the running ones
     * (they use the poller) before freeing the poller. */
    pthread_mutex_lock(&g_mu);
    p = g_poller;
    g_poller = NULL;
    for (i = 0; i < MAX_ACKS; i++)
        if (g_acks[i].thread)
            th[n++] = g_acks[i].th;
    pthread_mutex_unlock(&g_mu);
    for (i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    notice_stop(p);
    pthread_mutex_lock(&g_mu);
    memset(g_acks, 0, sizeof g_acks);
    pthread_mutex_unlock(&g_mu);
}
