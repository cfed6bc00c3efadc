/*
 * notice/tencent.c -- Tencent Cloud CVM spot instances (notice/provider.h):
 * spot/termination-time answers the release time as China Standard Time
 * without a zone ("2018-08-18 12:05:33"), 404 until then.
 */
#include "notice/int.h"
#include "notice/parse.h"
#include "notice/tencent.h"

#include <string.h>
#include <strings.h>

#define TENCENT_WINDOW_MS 120000 /* about 2 minutes (unconfirmed) */
#define TENCENT_POLL_MS 5000

int notice_parse_tencent(const char *s, size_t len, int64_t *ms)
{
    size_t i = 0;
    int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
    int64_t t;

    if (!s || !ms)
        return -1;
    if (notice_digits(s, len, &i, 4, &y) || notice_lit(s, len, &i, '-') ||
        notice_digits(s, len, &i, 2, &mo) || notice_lit(s, len, &i, '-') ||
        notice_digits(s, len, &i, 2, &d) || notice_lit(s, len, &i, ' ') ||
        notice_digits(s, len, &i, 2, &h) || notice_lit(s, len, &i, ':') ||
        notice_digits(s, len, &i, 2, &mi) || notice_lit(s, len, &i, ':') ||
        notice_digits(s, len, &i, 2, &sec) || i != len ||
        notice_civil_to_ms(y, mo, d, h, mi, sec, &t))
        return -1;
    *ms = t - 8 * 3600000LL; /* China Standard Time, no daylight saving */
    return 0;
}

static int tencent_or_iso(const char *s, size_t len, int64_t *ms)
{
    /* The documented form is local UTC+8; an ISO time with a zone is just
     * as unambiguous, so it is accepted too. */
    return notice_parse_tencent(s, len, ms) == 0 ? 0 : notice_parse_iso8601(s, len, ms);
}

int notice_parse_tencent_reply(const char *body, size_t len, int64_t now_ms,
                               struct notice_event *ev)
{
    return notice_parse_termination_time(body, len, now_ms, ev, "spot/termination-time",
                                         tencent_or_iso);
}

static int tencent_dmi(const struct notice_dmi *d)
{
    return strcasestr(d->vendor, "Tencent") || strcasestr(d->product, "Tencent");
}

static const struct notice_path tencent_paths[] = {
    { "/latest/meta-data/spot/termination-time", "termination-time", notice_parse_tencent_reply },
};

const struct notice_provider notice_tencent = {
    .name = "tencent",
    .title = "Tencent Cloud CVM spot instances",
    .dmi_match = tencent_dmi,
    .base = "http://metadata.tencentyun.com",
    .paths = tencent_paths,
    .npaths = 1,
    .poll_ms = TENCENT_POLL_MS,
    .timeout_ms = 3000,
    .body_max = BODY_MAX_SMALL,
    .quiet_404 = 1,
    .hints = {
        .window_ms = TENCENT_WINDOW_MS,
        .detect_ms = TENCENT_POLL_MS,
        .window_src = "Tencent spot notice",
        .window_note = "about 2 minutes (unconfirmed)",
    },
};
