/*
 * notice.c -- the poller's life: provider detection, threads, the
 * acknowledgement of Azure events (notice.h; its insides: notice_int.h).
 *
 * Never blocking the caller: notice_start() reads DMI files and starts
 * threads; all network work is on those threads, and long requests are
 * aborted on stop (ckpt_http_cancel).
 */
#include "notice_int.h"
#include "ckpt_http.h"
#include "ckpt_http.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ACK_TIMEOUT_MS 5000

static void *thread_main(void *arg)
{
    struct nwatch *w = arg;
    w->run(w);
    return NULL;
}

int notice_available(void)
{
    return 1;
}

/* The provider's watches (none for "none"). @return 0, or -1 (logged). */
static int plan_watches(struct notice_poller *p, const struct notice_config *cfg)
{
    const char *prov = p->provider;

    if (strcmp(prov, "aws") == 0) {
        p->imds = ckpt_imds_shared(cfg->metadata_url ? p->base : NULL);
        if (!p->imds) {
            notice_log(p, CKPT_LOG_INFO, "aws: instance metadata disabled: not polling");
            p->provider = "none";
            return 0;
        }
        p->w[p->nw++].run = notice_run_aws;
        return 0;
    }
    if (!(p->http = notice_http_new()))
        return -1;
    if (!p->base[0])
        snprintf(p->base, sizeof p->base, "%s", notice_default_base(prov));
    if (strcmp(prov, "gcp") == 0) {
        p->w[p->nw].run = notice_run_gcp;
        p->w[p->nw++].path = "instance/preempted";
        p->w[p->nw].run = notice_run_gcp;
        p->w[p->nw++].path = "instance/maintenance-event";
    } else if (strcmp(prov, "azure") == 0) {
        p->w[p->nw++].run = notice_run_azure;
    } else {
        p->w[p->nw++].run = notice_run_plain;
    }
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
    if (strcmp(prov, "auto") == 0)
        prov = notice_detect(cfg->dmi_dir ? cfg->dmi_dir : "/sys/class/dmi/id", cfg->log_fn,
                             cfg->log_user, NULL, 0);
    if (!(prov = notice_provider_name(prov)))
        return -1;

    p = calloc(1, sizeof *p);
    if (!p)
        return -1;
    p->provider = prov;
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

    if (strcmp(prov, "none") == 0) {
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
        notice_log(p, CKPT_LOG_INFO, "%s: polling %s for preemption notices", prov,
             p->base[0] ? p->base : "instance metadata");
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
    int ret = -1;
    cJSON *root = NULL, *arr, *obj;
    char *body = NULL, url[BASE_MAX + 128];
    static const char *const hdrs[] = {"Metadata: true", "Content-Type: application/json", NULL};
    struct notice_reply r = {0};

    if (!p || strcmp(p->provider, "azure") != 0)
        return p ? 0 : -1;
    if (!event_id || !*event_id)
        return -1;
    /* Built with cJSON so any character in the id is escaped properly. */
    root = cJSON_CreateObject();
    arr = root ? cJSON_AddArrayToObject(root, "StartRequests") : NULL;
    obj = arr ? cJSON_CreateObject() : NULL;
    if (!obj)
        goto out;
    cJSON_AddItemToArray(arr, obj);
    if (!cJSON_AddStringToObject(obj, "EventId", event_id))
        goto out;
    body = cJSON_PrintUnformatted(root);
    if (!body)
        goto out;
    snprintf(url, sizeof url, "%s/metadata/scheduledevents?api-version=2020-07-01", p->base);
    if (notice_http(p->http, "POST", url, hdrs, body, ACK_TIMEOUT_MS, BODY_MAX_SMALL, &r)) {
        notice_log(p, CKPT_LOG_WARN, "azure: acknowledging %s failed: %s", event_id, r.err);
        goto out;
    }
    if (r.status < 200 || r.status > 299) {
        notice_log(p, CKPT_LOG_WARN, "azure: acknowledging %s: HTTP %ld", event_id, r.status);
        goto out;
    }
    notice_log(p, CKPT_LOG_INFO, "azure: acknowledged event %s", event_id);
    ret = 0;
out:
    free(r.body);
    cJSON_free(body);
    cJSON_Delete(root);
    return ret;
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
    ckpt_http_cancel(p->http); /* a long poll in flight ends now */
    for (i = 0; i < p->nw; i++)
        if (p->w[i].started)
            pthread_join(p->w[i].th, NULL);
    ckpt_http_free(p->http);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->deliver_mu);
    free(p);
}
