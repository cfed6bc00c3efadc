/* notice_providers.c -- one polling loop per provider (notice_int.h; what
 * each provider serves: notice.h, docs/notices.md). Each runs on its
 * watch's thread until the poller stops. */
#include "notice_int.h"
#include "ckpt_http.h"
#include "runlog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AWS_TIMEOUT_MS 1500   /* IMDS is local: a slow answer is a failure */
#define GCP_WAIT_S 60         /* long-poll timeout_sec */
#define AZURE_TIMEOUT_MS 120000 /* the first call can take up to 2 minutes */
#define PLAIN_TIMEOUT_MS 3000
#define ALIYUN_TTL_S 21600
#define ERROR_BACKOFF_MS 5000 /* after a 4xx that retrying quickly cannot fix */

/* ---- AWS ------------------------------------------------------------------ */

static const struct {
    const char *path;
    notice_parser parse;
} aws_paths[3] = {
    {"/latest/meta-data/spot/instance-action", notice_parse_aws_action},
    {"/latest/meta-data/spot/termination-time", notice_parse_aws_termtime},
    {"/latest/meta-data/events/recommendations/rebalance", notice_parse_aws_rebalance},
};

void notice_run_aws(struct nwatch *w)
{
    struct notice_poller *p = w->p;
    do {
        int i;
        for (i = 0; i < 3 && !atomic_load(&p->stop); i++) {
            char err[512] = "", *body = NULL;
            size_t len = 0;
            long code = 0;
            ckpt_status st = ckpt_imds_get(p->imds, aws_paths[i].path, AWS_TIMEOUT_MS,
                                           BODY_MAX_SMALL, &body, &len, &code, err);
            if (st != CKPT_OK) {
                notice_cond_fail(w, i, "%s: %s", aws_paths[i].path, err[0] ? err : "request failed");
                free(body);
                if (st == CKPT_E_UNREACHABLE)
                    break; /* the other paths would time out the same way */
                continue;
            }
            if (code == 200)
                notice_handle(w, i, aws_paths[i].parse, body, len);
            else if (code == 404)
                notice_cond_ok(w, i); /* no notice */
            else
                notice_cond_fail(w, i, "%s: HTTP %ld", aws_paths[i].path, code);
            free(body);
        }
    } while (!notice_nap(p, notice_poll_interval(p, 2000)));
}

/* ---- GCP ------------------------------------------------------------------ */

void notice_run_gcp(struct nwatch *w)
{
    struct notice_poller *p = w->p;
    static const char *const hdrs[] = {"Metadata-Flavor: Google", NULL};
    notice_parser parse =
        strstr(w->path, "preempted") ? notice_parse_gcp_preempted : notice_parse_gcp_maintenance;
    char etag[80] = "0";
    char url[BASE_MAX + 256];

    while (!atomic_load(&p->stop)) {
        struct notice_reply r;
        long pause = 0;
        int64_t t0 = ckpt_mono_ms();
        snprintf(url, sizeof url,
                 "%s/computeMetadata/v1/%s?wait_for_change=true&timeout_sec=%d&last_etag=%s",
                 p->base, w->path, GCP_WAIT_S, etag);
        if (notice_http(p->http, "GET", url, hdrs, NULL, (GCP_WAIT_S + 5) * 1000L, BODY_MAX_SMALL, &r)) {
            if (atomic_load(&p->stop))
                break;
            notice_cond_fail(w, 0, "%s: %s", w->path, r.err);
            pause = notice_poll_interval(p, 1000);
        } else if (r.status == 200) {
            /* An unchanged or missing ETag would make the next call return at
             * once: then pace the loop instead of spinning. */
            if (!r.etag[0] || strcmp(r.etag, etag) == 0)
                pause = notice_poll_interval(p, 1000);
            snprintf(etag, sizeof etag, "%s", r.etag[0] ? r.etag : "0");
            notice_handle(w, 0, parse, r.body, r.len);
        } else if (r.status == 503) {
            pause = 1000; /* during maintenance (docs/notices.md, GCP) */
        } else {
            notice_cond_fail(w, 0, "%s: HTTP %ld%s", w->path, r.status,
                      r.status >= 400 && r.status < 500 ? " (misconfiguration?)" : "");
            pause = r.status >= 400 && r.status < 500 ? ERROR_BACKOFF_MS : notice_poll_interval(p, 1000);
        }
        free(r.body);
        /* Never faster than 4 requests a second, whatever the server does. */
        if (!pause && ckpt_mono_ms() - t0 < 250)
            pause = 250;
        if (pause && notice_nap(p, pause))
            break;
    }
}

/* ---- Azure ---------------------------------------------------------------- */

static const char *const azure_hdrs[] = {"Metadata: true", NULL};

static void azure_vm_name(struct nwatch *w)
{
    struct notice_poller *p = w->p;
    char url[BASE_MAX + 128];
    struct notice_reply r;
    size_t i;

    if (p->azure_vm[0] || ckpt_mono_ms() < p->azure_vm_retry_ms)
        return;
    p->azure_vm_retry_ms = ckpt_mono_ms() + 60000;
    snprintf(url, sizeof url, "%s/metadata/instance/compute/name?api-version=2021-02-01&format=text",
             p->base);
    if (notice_http(p->http, "GET", url, azure_hdrs, NULL, PLAIN_TIMEOUT_MS, 256, &r))
        return;
    if (r.status == 200 && r.len > 0 && r.len < sizeof p->azure_vm) {
        for (i = 0; i < r.len; i++)
            if ((unsigned char)r.body[i] <= 0x20 || (unsigned char)r.body[i] >= 0x7f)
                break;
        if (i == r.len) {
            memcpy(p->azure_vm, r.body, r.len + 1);
            notice_log(p, CKPT_LOG_DEBUG, "azure: VM name %s", p->azure_vm);
        }
    }
    free(r.body);
}

static int parse_azure_self(const char *b, size_t n, int64_t now, struct notice_event *ev,
                            const char *vm)
{
    return notice_parse_azure_for(b, n, now, vm[0] ? vm : NULL, ev);
}

void notice_run_azure(struct nwatch *w)
{
    struct notice_poller *p = w->p;
    char url[BASE_MAX + 128];
    snprintf(url, sizeof url, "%s/metadata/scheduledevents?api-version=2020-07-01", p->base);
    do {
        struct notice_reply r;
        azure_vm_name(w);
        if (notice_http(p->http, "GET", url, azure_hdrs, NULL, AZURE_TIMEOUT_MS, BODY_MAX_AZURE, &r)) {
            if (!atomic_load(&p->stop))
                notice_cond_fail(w, 0, "scheduledevents: %s", r.err);
        } else if (r.status == 200) {
            struct notice_event ev;
            int rc = parse_azure_self(r.body, r.len, ckpt_now_ms(), &ev, p->azure_vm);
            if (rc < 0) {
                notice_cond_fail(w, 0, "%s", ev.detail);
            } else {
                notice_cond_ok(w, 0);
                if (rc > 0)
                    notice_deliver(p, &ev);
            }
        } else {
            notice_cond_fail(w, 0, "scheduledevents: HTTP %ld", r.status);
        }
        free(r.body);
    } while (!notice_nap(p, notice_poll_interval(p, 1000)));
}

/* ---- Alibaba, Tencent ----------------------------------------------------- */

/* Hardened mode wants a token; normal mode accepts one. Tries to hold one and
 * goes without when the PUT is refused (older or unusual metadata servers). */
static void aliyun_token(struct nwatch *w)
{
    struct notice_poller *p = w->p;
    char url[BASE_MAX + 64], ttl[80];
    const char *hdrs[2] = {ttl, NULL};
    struct notice_reply r;
    size_t n;

    if (p->aliyun_token[0] && ckpt_mono_ms() < p->aliyun_renew_ms)
        return;
    if (!p->aliyun_token[0] && ckpt_mono_ms() < p->aliyun_renew_ms)
        return; /* recently refused: wait before asking again */
    p->aliyun_token[0] = '\0';
    p->aliyun_renew_ms = ckpt_mono_ms() + 60000;
    snprintf(url, sizeof url, "%s/latest/api/token", p->base);
    snprintf(ttl, sizeof ttl, "X-aliyun-ecs-metadata-token-ttl-seconds: %d", ALIYUN_TTL_S);
    if (notice_http(p->http, "PUT", url, hdrs, "", PLAIN_TIMEOUT_MS, 1024, &r))
        return;
    n = r.len;
    while (n && (r.body[n - 1] == '\n' || r.body[n - 1] == '\r' || r.body[n - 1] == ' '))
        n--;
    if (r.status == 200 && n > 0 && n < sizeof p->aliyun_token && !memchr(r.body, '\n', n) &&
        !memchr(r.body, '\r', n)) {
        memcpy(p->aliyun_token, r.body, n);
        p->aliyun_token[n] = '\0';
        p->aliyun_renew_ms = ckpt_mono_ms() + (ALIYUN_TTL_S - 60) * 1000LL;
    }
    free(r.body);
}

void notice_run_plain(struct nwatch *w)
{
    struct notice_poller *p = w->p;
    int aliyun = strcmp(p->provider, "aliyun") == 0;
    char url[BASE_MAX + 128], tokh[600];
    notice_parser parse =
        aliyun ? notice_parse_aliyun : notice_parse_tencent_reply;

    snprintf(url, sizeof url, "%s%s", p->base,
             aliyun ? "/latest/meta-data/instance/spot/termination-time"
                    : "/latest/meta-data/spot/termination-time");
    do {
        struct notice_reply r;
        const char *hdrs[2] = {NULL, NULL};
        if (aliyun) {
            aliyun_token(w);
            if (p->aliyun_token[0]) {
                snprintf(tokh, sizeof tokh, "X-aliyun-ecs-metadata-token: %s", p->aliyun_token);
                hdrs[0] = tokh;
            }
        }
        if (notice_http(p->http, "GET", url, hdrs, NULL, PLAIN_TIMEOUT_MS, BODY_MAX_SMALL, &r)) {
            if (!atomic_load(&p->stop))
                notice_cond_fail(w, 0, "termination-time: %s", r.err);
        } else if (r.status == 200) {
            notice_handle(w, 0, parse, r.body, r.len);
        } else if (r.status == 404) {
            notice_cond_ok(w, 0);
        } else {
            if (aliyun && (r.status == 401 || r.status == 403)) {
                /* Token expired, revoked or newly required: get one now. */
                p->aliyun_token[0] = '\0';
                p->aliyun_renew_ms = 0;
            }
            notice_cond_fail(w, 0, "termination-time: HTTP %ld", r.status);
        }
        free(r.body);
    } while (!notice_nap(p, notice_poll_interval(p, 5000)));
}
