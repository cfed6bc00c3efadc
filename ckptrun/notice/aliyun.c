/*
 * notice/aliyun.c -- Alibaba Cloud ECS spot instances (notice/provider.h):
 * instance/spot/termination-time answers the release time in UTC about 5
 * minutes ahead, 404 until then. Hardened mode wants a session token; a
 * normal-mode server takes one too, and the poller goes without one when
 * the token PUT is refused (notice/poll.c).
 */
#include "notice/int.h"
#include "notice/parse.h"
#include "notice/aliyun.h"

#include <string.h>
#include <strings.h>

#define ALIYUN_WINDOW_MS 300000
#define ALIYUN_POLL_MS 5000 /* the docs suggest a minute: poll faster */

int notice_parse_aliyun(const char *body, size_t len, int64_t now_ms, struct notice_event *ev)
{
    return notice_parse_termination_time(body, len, now_ms, ev, "instance/spot/termination-time",
                                         notice_parse_iso8601);
}

static int aliyun_dmi(const struct notice_dmi *d)
{
    return strcasestr(d->vendor, "Alibaba") || strcasestr(d->product, "Alibaba Cloud");
}

static const struct notice_path aliyun_paths[] = {
    { "/latest/meta-data/instance/spot/termination-time", "termination-time", notice_parse_aliyun },
};

static const struct notice_token aliyun_token = {
    "/latest/api/token",
    "X-aliyun-ecs-metadata-token-ttl-seconds",
    "X-aliyun-ecs-metadata-token",
    21600,
};

const struct notice_provider notice_aliyun = {
    .name = "aliyun",
    .title = "Alibaba Cloud ECS spot instances",
    .dmi_match = aliyun_dmi,
    .base = "http://100.100.100.200",
    .token = &aliyun_token,
    .paths = aliyun_paths,
    .npaths = 1,
    .poll_ms = ALIYUN_POLL_MS,
    .timeout_ms = 3000,
    .body_max = BODY_MAX_SMALL,
    .quiet_404 = 1,
    .hints = {
        .window_ms = ALIYUN_WINDOW_MS,
        .detect_ms = ALIYUN_POLL_MS,
        .window_src = "Alibaba spot notice",
        .window_note = "about 5 minutes",
        .token_what = "hardened-mode metadata",
        .token_refused = "ckptrun uses plain requests, which work in normal mode",
        .token_failed = "only needed in hardened mode",
    },
};
