/*
 * notice/aws.c -- Amazon EC2 spot (notice/provider.h): instance-action and
 * the legacy termination-time (terminate, ~2 minutes ahead, best effort),
 * the rebalance recommendation (an early warning, no deadline). Requests go
 * through the process's shared IMDSv2 client, which the S3 credential chain
 * also uses (one session token for both, renewed and dropped there).
 */
#include "notice/int.h"
#include "notice/report.h"
#include "notice/net.h"
#include "notice/parse.h"
#include "notice/aws.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define AWS_WINDOW_MS 120000 /* the documented warning; seen as short as 39 s */
#define AWS_POLL_MS 2000
#define AWS_TIMEOUT_MS 1500 /* IMDS is local: a slow answer is a failure */

/* ---- replies ---------------------------------------------------------------- */

int notice_parse_aws_action(const char *body, size_t len, int64_t now_ms, struct notice_event *ev)
{
    int ret = -1;
    cJSON *j = NULL;
    const char *action, *tm;
    int64_t t;

    notice_ev_reset(ev);
    if (!body || !len) {
        ret = notice_ev_bad(ev, "instance-action: empty reply");
        goto out;
    }
    j = cJSON_ParseWithLength(body, len);
    if (!cJSON_IsObject(j)) {
        ret = notice_ev_bad(ev, "instance-action: not a JSON object");
        goto out;
    }
    action = notice_json_str(j, "action", 32);
    tm = notice_json_str(j, "time", 64);
    if (!action || !tm) {
        ret = notice_ev_bad(ev, "instance-action: missing action or time");
        goto out;
    }
    if (strcmp(action, "hibernate") == 0) {
        /* Hibernation keeps the process's memory: stopping the child would
         * lose work the platform is about to preserve. */
        snprintf(ev->detail, sizeof ev->detail, "instance-action hibernate (no action needed)");
        ret = 0;
        goto out;
    }
    if (strcmp(action, "terminate") != 0 && strcmp(action, "stop") != 0) {
        snprintf(ev->detail, sizeof ev->detail, "instance-action: unknown action \"%s\"", action);
        goto out;
    }
    if (notice_parse_iso8601(tm, strlen(tm), &t)) {
        snprintf(ev->detail, sizeof ev->detail, "instance-action: not a time: \"%s\"", tm);
        goto out;
    }
    if (notice_stale(t, now_ms)) {
        snprintf(ev->detail, sizeof ev->detail, "instance-action: stale time %s ignored", tm);
        goto out;
    }
    ev->kind = NOTICE_TERMINATE;
    ev->deadline_ms = t;
    snprintf(ev->detail, sizeof ev->detail, "spot/instance-action %s at %s", action, tm);
    ret = 1;
out:
    cJSON_Delete(j);
    return ret;
}

int notice_parse_aws_termtime(const char *body, size_t len, int64_t now_ms, struct notice_event *ev)
{
    return notice_parse_termination_time(body, len, now_ms, ev, "spot/termination-time",
                                         notice_parse_iso8601);
}

int notice_parse_aws_rebalance(const char *body, size_t len, int64_t now_ms,
                               struct notice_event *ev)
{
    int ret = -1;
    cJSON *j = NULL;
    const char *tm;
    int64_t t;

    (void)now_ms; /* noticeTime is when AWS issued it: its age does not matter */
    notice_ev_reset(ev);
    if (!body || !len) {
        ret = notice_ev_bad(ev, "rebalance: empty reply");
        goto out;
    }
    j = cJSON_ParseWithLength(body, len);
    if (!cJSON_IsObject(j)) {
        ret = notice_ev_bad(ev, "rebalance: not a JSON object");
        goto out;
    }
    tm = notice_json_str(j, "noticeTime", 64);
    if (!tm || notice_parse_iso8601(tm, strlen(tm), &t)) {
        ret = notice_ev_bad(ev, "rebalance: missing or malformed noticeTime");
        goto out;
    }
    ev->kind = NOTICE_REBALANCE;
    ev->deadline_ms = 0;
    snprintf(ev->detail, sizeof ev->detail, "events/recommendations/rebalance noticeTime %s", tm);
    ret = 1;
out:
    cJSON_Delete(j);
    return ret;
}

/* ---- polling ---------------------------------------------------------------- */

struct aws_state {
    struct ckpt_imds *imds;
};

static int aws_dmi(const struct notice_dmi *d)
{
    /* older Xen instances say Xen, with bios "Amazon" or version "x.amazon" */
    return strcasestr(d->vendor, "Amazon") || strcasestr(d->bios_vendor, "Amazon") ||
           strcasestr(d->bios_version, "amazon");
}

static int aws_start(struct notice_poller *p, const struct notice_config *cfg)
{
    struct aws_state *st = p->state;
    /* NULL without --metadata-url: the client's own address, or
     * AWS_EC2_METADATA_SERVICE_ENDPOINT; it also honours
     * AWS_EC2_METADATA_DISABLED. */
    st->imds = notice_imds(cfg->metadata_url ? p->base : NULL);
    if (!st->imds) {
        notice_log(p, CKPT_LOG_INFO, "aws: instance metadata disabled: not polling");
        return 1;
    }
    return 0;
}

static int aws_fetch(struct nwatch *w, const char *path, struct notice_reply *r)
{
    struct aws_state *st = w->p->state;
    return notice_imds_get(st->imds, path, AWS_TIMEOUT_MS, BODY_MAX_SMALL, r);
}

static const struct notice_path aws_paths[] = {
    { "/latest/meta-data/spot/instance-action", "/latest/meta-data/spot/instance-action",
      notice_parse_aws_action },
    { "/latest/meta-data/spot/termination-time", "/latest/meta-data/spot/termination-time",
      notice_parse_aws_termtime },
    { "/latest/meta-data/events/recommendations/rebalance",
      "/latest/meta-data/events/recommendations/rebalance", notice_parse_aws_rebalance },
};

static const struct notice_token aws_token = {
    "/latest/api/token",
    "X-aws-ec2-metadata-token-ttl-seconds",
    "X-aws-ec2-metadata-token",
    21600,
};

const struct notice_provider notice_aws = {
    .name = "aws",
    .title = "Amazon EC2 spot",
    .dmi_match = aws_dmi,
    .base = "http://169.254.169.254",
    .base_env = "AWS_EC2_METADATA_SERVICE_ENDPOINT",
    .off_env = "AWS_EC2_METADATA_DISABLED",
    .token = &aws_token,
    .paths = aws_paths,
    .npaths = sizeof aws_paths / sizeof aws_paths[0],
    .poll_ms = AWS_POLL_MS,
    .timeout_ms = AWS_TIMEOUT_MS,
    .body_max = BODY_MAX_SMALL,
    .quiet_404 = 1,
    .hints = {
        .window_ms = AWS_WINDOW_MS,
        .detect_ms = AWS_POLL_MS,
        .window_src = "AWS spot notice",
        .window_note = "2 minutes, best effort (as little as 39 s has been seen)",
        .unreachable = "no notice will arrive: check that instance metadata is enabled; in a "
                       "container the IMDSv2 PUT needs a hop limit of 2 (modify-instance-"
                       "metadata-options --http-put-response-hop-limit 2); or point "
                       "--metadata-url at it",
        .token_what = "IMDSv2 session",
        .token_refused = "IMDSv2 is off here: ckptrun falls back to IMDSv1, which works; "
                         "enable IMDSv2 (http-tokens required) when you can",
        .token_failed = "without a token the notice cannot be read where IMDSv2 is "
                        "required; in a container raise the PUT hop limit to 2",
        .token_required = 1,
    },
    .state_size = sizeof(struct aws_state),
    .start = aws_start,
    .fetch = aws_fetch,
};
