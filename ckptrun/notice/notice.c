/*
 * notice.c -- the poller's life: the provider (by name or DMI), its base
 * URL and watches from its table entry, threads, stop, and the
 * acknowledgement its entry may define (notice.h; insides: notice/int.h).
 *
 * Never blocking the caller: notice_start() reads DMI files and starts
 * threads; all network work is on those threads, and long requests are
 * aborted on stop (notice_http_cancel).
 */
#include "notice/int.h"
#include "notice/table.h"
#include "notice/report.h"
#include "notice/poll.h"
#include "notice/net.h"
#include "notice/notice.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static void *thread_main(void *arg)
{
    struct nwatch *w = arg;
    const struct notice_provider *pv = w->p->prov;
    (pv->run ? pv->run : notice_poll_paths)(w);
    return NULL;
}

int notice_base_of(const char *url, char *out, size_t cap)
{
    const char *a;
    size_t n;
    if (strncmp(url, "http://", 7) == 0)
        a = url + 7;
    else if (strncmp(url, "https://", 8) == 0)
        a = url + 8;
    else
        return -1;
    n = strcspn(a, "/?#");
    if (n == 0 || (size_t)(a - url) + n >= cap || memchr(a, '@', n) || a[n - 1] == ':')
        return -1; /* no host, no credentials in a metadata URL, no empty port */
    {
        /* Only host[:port] characters: the result is pasted into URLs. */
        size_t i;
        for (i = 0; i < n; i++)
            if (!((a[i] >= '0' && a[i] <= '9') || (a[i] >= 'a' && a[i] <= 'z') ||
                  (a[i] >= 'A' && a[i] <= 'Z') || strchr(".-:[]", a[i])))
                return -1;
    }
    memcpy(out, url, (size_t)(a - url) + n);
    out[(a - url) + n] = '\0';
    return 0;
}

/* The provider's own base, or the one its variable names (when valid). */
static void default_base(const struct notice_provider *pv, char *out, size_t cap)
{
    const char *e = pv->base_env ? getenv(pv->base_env) : NULL;
    if (!e || !*e || notice_base_of(e, out, cap))
        snprintf(out, cap, "%s", pv->base);
}

/* The provider's watches. @return 0, or -1 (logged). */
static int plan_watches(struct notice_poller *p, const struct notice_config *cfg)
{
    const struct notice_provider *pv = p->prov;
    int r;

    if (!p->base[0])
        default_base(pv, p->base, sizeof p->base);
    if (pv->state_size && !(p->state = calloc(1, pv->state_size)))
        return -1;
    if (pv->start && (r = pv->start(p, cfg)) != 0) {
        if (r < 0)
            return -1;
        p->provider = "none"; /* it says there is nothing to poll here */
        p->prov = NULL;
        return 0;
    }
    /* HTTP for the shared fetch and for any hook that may use it; a
     * provider that fetches through its own client (AWS: the IMDS client)
     * needs none, and none is started (a client has a thread). */
    if ((!pv->fetch || pv->run || pv->before_round || pv->ack) && !(p->http = notice_http_new()))
        return -1;
    p->nw = pv->watch_per_path ? (int)pv->npaths : 1;
    for (int i = 0; i < p->nw; i++)
        p->w[i].path = (unsigned)i;
    return 0;
}

int notice_start(const struct notice_config *cfg, struct notice_poller **out)
{
    int ret = -1, i;
    struct notice_poller *p = NULL;
    const char *prov;
    pthread_condattr_t ca;

    if (!cfg || !out)
        return -1;
    *out = NULL;
    prov = cfg->provider && *cfg->provider ? cfg->provider : "auto";
    if (!notice_mode_valid(prov))
        return -1;
    if (!notice_available()) {
        /* Nothing to poll with: as on a machine with no known vendor. */
        if (strcmp(prov, "auto") != 0 && strcmp(prov, "none") != 0 && cfg->log_fn) {
            char msg[200];
            snprintf(msg, sizeof msg,
                     "%s: cloud notices need libcurl, which this build lacks: "
                     "not polling (rely on --interval and signals)",
                     prov);
            cfg->log_fn(cfg->log_user, CKPT_LOG_WARN, "notice", msg);
        }
        prov = "none";
    } else if (strcmp(prov, "auto") == 0) {
        prov = notice_detect(cfg->dmi_dir ? cfg->dmi_dir : "/sys/class/dmi/id", cfg->log_fn,
                             cfg->log_user, NULL, 0);
    }
    prov = notice_provider_name(prov);

    p = calloc(1, sizeof *p);
    if (!p)
        return -1;
    p->provider = prov;
    p->prov = notice_provider_find(prov);
    p->cb = cfg->cb;
    p->user = cfg->user;
    p->log_fn = cfg->log_fn;
    p->log_user = cfg->log_user;
    p->interval_ms = cfg->poll_interval_ms;
    atomic_init(&p->stop, 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_mutex_init(&p->deliver_mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* naps immune to clock steps */
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);

    if (!p->prov) { /* "none" */
        ret = 0;
        goto out;
    }
    if (!cfg->cb)
        goto out;
    if (cfg->metadata_url && notice_base_of(cfg->metadata_url, p->base, sizeof p->base))
        goto out;
    if (plan_watches(p, cfg) != 0)
        goto out;
    if (p->nw)
        notice_log(p, CKPT_LOG_INFO, "%s: polling %s for preemption notices", p->provider, p->base);
    for (i = 0; i < p->nw; i++) {
        p->w[i].p = p;
        if (pthread_create(&p->w[i].th, NULL, thread_main, &p->w[i]) != 0)
            goto out;
        p->w[i].started = 1;
    }
    ret = 0;
out:
    if (ret) {
        notice_stop(p);
        p = NULL;
    }
    *out = p;
    return ret;
}

const char *notice_provider(const struct notice_poller *p)
{
    return p ? p->provider : "none";
}

int notice_ack(struct notice_poller *p, const char *event_id)
{
    if (!p)
        return -1;
    if (!p->prov || !p->prov->ack)
        return 0; /* nothing to acknowledge there */
    if (!event_id || !*event_id)
        return -1;
    return p->prov->ack(p, event_id);
}

void notice_stop(struct notice_poller *p)
{
    int i;
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    notice_http_cancel(p->http); /* a long poll in flight ends now */
    for (i = 0; i < p->nw; i++)
        if (p->w[i].started)
            pthread_join(p->w[i].th, NULL);
    notice_http_free(p->http);
    free(p->state);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->deliver_mu);
    free(p);
}
