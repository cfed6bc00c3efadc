/* notice_probe.c -- the one-shot probe of `ckptrun doctor` (notice.h):
 * the provider as the poller would find it, its token and one request to
 * its notice path; no thread, no callback. */
#include "notice_int.h"
#include "ckpt_http.h"
#include "runlog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int notice_probe(const struct notice_config *cfg, long timeout_ms,
                 struct notice_probe_result *r)
{
    struct ckpt_http *http = NULL;
    struct notice_reply rep;
    char url[BASE_MAX + 160], tokh[600];
    const char *prov, *hdrs[3] = {NULL, NULL, NULL}, *path = NULL;
    const char *tok_hdr = NULL, *tok_ttl = NULL;
    int64_t t0;
    int ret = -1;

    if (!cfg || !r)
        return -1;
    memset(r, 0, sizeof *r);
    r->token = -2;
    prov = cfg->provider && *cfg->provider ? cfg->provider : "auto";
    if (strcmp(prov, "auto") == 0) {
        prov = notice_detect(cfg->dmi_dir ? cfg->dmi_dir : "/sys/class/dmi/id", NULL, NULL,
                             r->how, sizeof r->how);
    } else {
        snprintf(r->how, sizeof r->how, "forced by --notice %s", prov);
    }
    if (!(prov = notice_provider_name(prov)))
        goto out;
    r->provider = prov;
    ret = 0;
    if (strcmp(prov, "none") == 0)
        goto out; /* never touch the network without a provider */
    if (strcmp(prov, "aws") == 0 && getenv("AWS_EC2_METADATA_DISABLED") &&
        strcasecmp(getenv("AWS_EC2_METADATA_DISABLED"), "true") == 0) {
        /* notice_start() polls nothing then, whatever the URL: say so. */
        snprintf(r->detail, sizeof r->detail, "AWS_EC2_METADATA_DISABLED=true: not polled");
        goto out;
    }
    if (cfg->metadata_url) {
        if (notice_base_of(cfg->metadata_url, r->base, sizeof r->base)) {
            snprintf(r->detail, sizeof r->detail, "--metadata-url is not http(s)://host[:port]");
            goto out;
        }
    } else if (strcmp(prov, "aws") == 0) {
        const char *e = getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT");
        if (!e || !*e || notice_base_of(e, r->base, sizeof r->base))
            snprintf(r->base, sizeof r->base, "http://169.254.169.254");
    } else {
        snprintf(r->base, sizeof r->base, "%s", notice_default_base(prov));
    }
    if (!(http = notice_http_new())) {
        snprintf(r->detail, sizeof r->detail, "libcurl could not be initialised");
        goto out;
    }
    if (strcmp(prov, "aws") == 0) {
        tok_hdr = "X-aws-ec2-metadata-token";
        tok_ttl = "X-aws-ec2-metadata-token-ttl-seconds: 60";
        path = "/latest/meta-data/spot/instance-action";
    } else if (strcmp(prov, "aliyun") == 0) {
        tok_hdr = "X-aliyun-ecs-metadata-token";
        tok_ttl = "X-aliyun-ecs-metadata-token-ttl-seconds: 60";
        path = "/latest/meta-data/instance/spot/termination-time";
    } else if (strcmp(prov, "gcp") == 0) {
        hdrs[0] = "Metadata-Flavor: Google";
        path = "/computeMetadata/v1/instance/preempted";
    } else if (strcmp(prov, "azure") == 0) {
        hdrs[0] = "Metadata: true";
        path = "/metadata/scheduledevents?api-version=2020-07-01";
    } else {
        path = "/latest/meta-data/spot/termination-time";
    }
    if (tok_hdr) {
        const char *th[2] = {tok_ttl, NULL};
        /* A short-lived token: the probe needs it for one GET. */
        snprintf(url, sizeof url, "%s/latest/api/token", r->base);
        if (notice_http(http, "PUT", url, th, NULL, timeout_ms, 1024, &rep)) {
            r->token = -1;
            snprintf(r->detail, sizeof r->detail, "token PUT: %.200s", rep.err);
        } else {
            size_t n = rep.len;
            r->token_status = rep.status;
            while (n > 0 && (rep.body[n - 1] == '\n' || rep.body[n - 1] == '\r'))
                n--;
            if (rep.status == 200 && n > 0 && n < 512 && !memchr(rep.body, '\n', n) &&
                !memchr(rep.body, '\r', n)) {
                r->token = 1;
                snprintf(tokh, sizeof tokh, "%s: %.*s", tok_hdr, (int)n, rep.body);
                hdrs[0] = tokh;
            } else if (rep.status == 403 || rep.status == 404 || rep.status == 405) {
                r->token = 0;
            } else {
                r->token = -1;
            }
            free(rep.body);
        }
    }
    snprintf(url, sizeof url, "%s%s", r->base, path);
    t0 = ckpt_mono_ms();
    if (notice_http(http, "GET", url, hdrs, NULL, timeout_ms, BODY_MAX_AZURE, &rep)) {
        r->latency_ms = (long)(ckpt_mono_ms() - t0);
        snprintf(r->detail, sizeof r->detail, "%.60s: %.180s", path, rep.err);
        goto out;
    }
    r->latency_ms = (long)(ckpt_mono_ms() - t0);
    r->reachable = 1;
    r->status = rep.status;
    if (rep.status == 200) {
        struct notice_event ev;
        int64_t now = ckpt_now_ms();
        int k = strcmp(prov, "aws") == 0      ? notice_parse_aws_action(rep.body, rep.len, now, &ev)
                : strcmp(prov, "gcp") == 0    ? notice_parse_gcp_preempted(rep.body, rep.len, now, &ev)
                : strcmp(prov, "azure") == 0  ? notice_parse_azure(rep.body, rep.len, now, &ev)
                : strcmp(prov, "aliyun") == 0 ? notice_parse_aliyun(rep.body, rep.len, now, &ev)
                                              : notice_parse_tencent_reply(rep.body, rep.len, now, &ev);
        r->pending = k > 0;
        if (k != 0)
            snprintf(r->detail, sizeof r->detail, "%s", ev.detail);
    }
    free(rep.body);
out:
    ckpt_http_free(http);
    return ret;
}
