/*
 * notice/volcengine.c -- Volcano Engine ECS preemptible instances
 * (notice/provider.h). The instance is reclaimed about 5 minutes after
 * latest/spot_instance_termination_time starts answering the release time
 * in UTC (its ECS docs, "抢占式实例"). What it answers while no release is
 * near, and the exact form of the time, are not documented: a 404 or an
 * empty reply is "no notice", and any time that parses is accepted (ISO
 * 8601 with or without a zone or fraction, "YYYY-MM-DD HH:MM:SS", Unix
 * seconds or milliseconds); a time without a zone is UTC. Chosen by
 * --notice volcengine only: its DMI vendor string is not known yet, so
 * `auto` never picks it.
 */
#include "notice/int.h"
#include "notice/parse.h"

#include <string.h>

#define VOLC_WINDOW_MS 300000
#define VOLC_POLL_MS 5000
#define VOLC_TIMEOUT_MS 3000
#define MAX_UNIX_S 253402300799LL /* 9999-12-31T23:59:59Z, the calendar parsers' limit too */

/* A run of 1..max decimal digits at s[*i] into *v. @return its length, 0 when none. */
static int number(const char *s, size_t len, size_t *i, int max, int64_t *v)
{
    int n = 0;
    *v = 0;
    while (*i < len && n < max && s[*i] >= '0' && s[*i] <= '9') {
        *v = *v * 10 + (s[*i] - '0');
        (*i)++;
        n++;
    }
    return n;
}

/* Unix time: seconds with an optional fraction, or 13 digits of
 * milliseconds (too many digits for seconds before year 10000). */
static int unix_time(const char *s, size_t len, int64_t *ms)
{
    size_t i = 0;
    int64_t v, frac;
    int n = number(s, len, &i, 13, &v), k;

    if (n == 13 && i == len) {
        *ms = v;
        return v / 1000 <= MAX_UNIX_S ? 0 : -1;
    }
    if (n == 0 || n > 12 || v > MAX_UNIX_S)
        return -1;
    *ms = v * 1000;
    if (i < len && s[i] == '.') {
        i++;
        if ((k = number(s, len, &i, 9, &frac)) == 0)
            return -1;
        while (k > 3) {
            frac /= 10;
            k--;
        }
        while (k < 3) {
            frac *= 10;
            k++;
        }
        *ms += frac;
    }
    return i == len ? 0 : -1;
}

/* The zone after a time: nothing (UTC), Z, UTC or GMT (after an optional
 * space), or an offset +hh:mm, +hhmm, +hh. @return 0 and *off_ms (to
 * subtract), or -1. */
static int zone(const char *s, size_t len, size_t i, int64_t *off_ms)
{
    int sign, oh = 0, om = 0;

    *off_ms = 0;
    if (i == len)
        return 0;
    if ((s[i] == 'Z' || s[i] == 'z') && i + 1 == len)
        return 0;
    if (s[i] == ' ')
        i++;
    if (len - i == 3 && (memcmp(s + i, "UTC", 3) == 0 || memcmp(s + i, "GMT", 3) == 0))
        return 0;
    if (i >= len || (s[i] != '+' && s[i] != '-'))
        return -1;
    sign = s[i++] == '+' ? 1 : -1;
    if (notice_digits(s, len, &i, 2, &oh))
        return -1;
    if (i < len && s[i] == ':' && ++i == len)
        return -1; /* "+08:" */
    if (i < len && notice_digits(s, len, &i, 2, &om))
        return -1;
    if (i != len || oh > 23 || om > 59)
        return -1;
    *off_ms = (int64_t)sign * (oh * 60 + om) * 60000;
    return 0;
}

/* Any time that parses, UTC unless it says otherwise (file comment).
 * @return 0 and *ms, or -1. */
static int volc_time(const char *s, size_t len, int64_t *ms)
{
    size_t i = 0;
    int y, mo, d, h, mi, sec = 0, frac_ms = 0;
    int64_t t, off;

    if (len >= 2 && s[0] == '"' && s[len - 1] == '"') { /* a JSON string */
        s++;
        len -= 2;
    }
    if (len > 0 && s[0] >= '0' && s[0] <= '9' && unix_time(s, len, ms) == 0)
        return 0;
    if (notice_digits(s, len, &i, 4, &y) || notice_lit(s, len, &i, '-') ||
        notice_digits(s, len, &i, 2, &mo) || notice_lit(s, len, &i, '-') ||
        notice_digits(s, len, &i, 2, &d))
        return -1;
    if (i >= len || (s[i] != 'T' && s[i] != 't' && s[i] != ' '))
        return -1;
    i++;
    if (notice_digits(s, len, &i, 2, &h) || notice_lit(s, len, &i, ':') ||
        notice_digits(s, len, &i, 2, &mi))
        return -1;
    if (i < len && s[i] == ':') { /* seconds may be left out */
        i++;
        if (notice_digits(s, len, &i, 2, &sec))
            return -1;
    }
    if (i < len && (s[i] == '.' || s[i] == ',')) {
        /* 1..9 fraction digits; milliseconds kept */
        int n = 0, scale = 100;
        for (i++; i < len && s[i] >= '0' && s[i] <= '9' && n < 9; i++, n++) {
            frac_ms += (s[i] - '0') * scale;
            scale /= 10;
        }
        if (n == 0)
            return -1;
    }
    if (zone(s, len, i, &off) || notice_civil_to_ms(y, mo, d, h, mi, sec, &t))
        return -1;
    *ms = t + frac_ms - off;
    return 0;
}

/* The release time: a terminate notice at that time. 404 (the loop) or an
 * empty body: no notice. */
static int volc_reply(const char *body, size_t len, int64_t now_ms, struct notice_event *ev)
{
    const char *b = body;
    size_t n = len;

    notice_ev_reset(ev);
    if (b)
        notice_trim(&b, &n);
    if (!b || n == 0)
        return 0;
    return notice_parse_termination_time(body, len, now_ms, ev, "spot_instance_termination_time",
                                         volc_time);
}

static const struct notice_path volc_paths[] = {
    { "/latest/spot_instance_termination_time", "spot_instance_termination_time", volc_reply },
};

const struct notice_provider notice_volcengine = {
    .name = "volcengine",
    .title = "Volcano Engine ECS preemptible instances",
    .dmi_match = NULL, /* its DMI vendor string is not known yet */
    .base = "http://100.96.0.96",
    .paths = volc_paths,
    .npaths = 1,
    .poll_ms = VOLC_POLL_MS,
    .timeout_ms = VOLC_TIMEOUT_MS,
    .body_max = BODY_MAX_SMALL,
    .quiet_404 = 1,
    .hints = {
        .window_ms = VOLC_WINDOW_MS,
        .detect_ms = VOLC_POLL_MS,
        .window_src = "Volcano Engine spot notice",
        .window_note = "about 5 minutes",
    },
};
