/*
 * notice_parse.c -- strict parsers for metadata replies and their times.
 *
 * Everything here is pure (no I/O, no globals) so the unit tests and the fuzz
 * target can drive it directly. Bodies are (pointer, length) and need not be
 * NUL-terminated. Replies are hostile input: JSON goes through cJSON with an
 * explicit length, strings are bounded, and times must match one exact shape.
 * A reply that cannot be understood is never turned into a notice.
 */
#include "notice.h"
#include "notice_int.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define STALE_MS 120000       /* a time further in the past is a lingering document */
#define GCP_WINDOW_MS 30000   /* ACPI soft-off to hard power-off (docs/notices.md, GCP) */
#define GCP_MAINT_MS 60000    /* maintenance-event changes 60 s before the event */
#define AZURE_BLANK_MS 30000  /* Preempt's documented minimum when NotBefore is blank */
#define MAX_TEXT 256          /* plain-text replies longer than this are not times */

/* ---- names ------------------------------------------------------------------ */

const char *notice_provider_name(const char *name)
{
    static const char *const known[] = { "aws", "gcp", "azure", "aliyun", "tencent", "none",
                                         NULL };
    for (int i = 0; name && known[i]; i++)
        if (strcmp(name, known[i]) == 0)
            return known[i];
    return NULL;
}

int notice_mode_valid(const char *mode)
{
    return mode && (strcmp(mode, "auto") == 0 || notice_provider_name(mode) != NULL);
}

/* ---- times ---------------------------------------------------------------- */

/* Days since 1970-01-01 of a proleptic Gregorian date (era-based arithmetic:
 * exact for every year we accept, no libc time zone state involved). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    int64_t era, yoe, doy, doe;
    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int days_in_month(int y, int m)
{
    static const int dm[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : dm[m - 1];
}

/* Reads exactly n decimal digits at s[*i]. */
static int digits(const char *s, size_t len, size_t *i, int n, int *out)
{
    int v = 0, k;
    if (*i + (size_t)n > len)
        return -1;
    for (k = 0; k < n; k++) {
        char c = s[*i + k];
        if (c < '0' || c > '9')
            return -1;
        v = v * 10 + (c - '0');
    }
    *i += n;
    *out = v;
    return 0;
}

static int lit(const char *s, size_t len, size_t *i, char c)
{
    if (*i >= len || s[*i] != c)
        return -1;
    (*i)++;
    return 0;
}

static int civil_to_ms(int y, int mo, int d, int h, int mi, int sec, int64_t *ms)
{
    if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) ||
        h > 23 || mi > 59 || sec > 60)
        return -1;
    /* A leap second (:60) counts as the next second, like POSIX time. */
    *ms = ((days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60000 + (int64_t)sec * 1000;
    return 0;
}

int notice_parse_iso8601(const char *s, size_t len, int64_t *ms)
{
    size_t i = 0;
    int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0, frac_ms = 0, oh = 0, om = 0, sign = 0;
    int64_t t;

    if (!s || !ms)
        return -1;
    if (digits(s, len, &i, 4, &y) || lit(s, len, &i, '-') || digits(s, len, &i, 2, &mo) ||
        lit(s, len, &i, '-') || digits(s, len, &i, 2, &d) || lit(s, len, &i, 'T') ||
        digits(s, len, &i, 2, &h) || lit(s, len, &i, ':') || digits(s, len, &i, 2, &mi) ||
        lit(s, len, &i, ':') || digits(s, len, &i, 2, &sec))
        return -1;
    if (i < len && s[i] == '.') {
        /* 1..9 fraction digits; milliseconds kept, the rest dropped. */
        int n = 0, scale = 100;
        i++;
        while (i < len && s[i] >= '0' && s[i] <= '9' && n < 9) {
            frac_ms += (s[i] - '0') * scale;
            scale /= 10;
            i++;
            n++;
        }
        if (n == 0)
            return -1;
    }
    if (i < len && s[i] == 'Z') {
        i++;
    } else if (i < len && (s[i] == '+' || s[i] == '-')) {
        sign = s[i] == '+' ? 1 : -1;
        i++;
        if (digits(s, len, &i, 2, &oh) || lit(s, len, &i, ':') || digits(s, len, &i, 2, &om) ||
            oh > 23 || om > 59)
            return -1;
    } else {
        return -1; /* a time without a zone is ambiguous: refuse it */
    }
    if (i != len || civil_to_ms(y, mo, d, h, mi, sec, &t))
        return -1;
    *ms = t + frac_ms - (int64_t)sign * (oh * 60 + om) * 60000;
    return 0;
}

static int match_word(const char *s, size_t len, size_t *i, const char *const *words, int n)
{
    int k;
    for (k = 0; k < n; k++) {
        size_t wl = strlen(words[k]);
        if (*i + wl <= len && memcmp(s + *i, words[k], wl) == 0) {
            *i += wl;
            return k;
        }
    }
    return -1;
}

int notice_parse_rfc1123(const char *s, size_t len, int64_t *ms)
{
    static const char *const wd[7] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
    static const char *const mon[12] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                        "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    size_t i = 0;
    int d, mo, y, h, mi, sec;

    if (!s || !ms)
        return -1;
    if (match_word(s, len, &i, wd, 7) < 0 || lit(s, len, &i, ',') || lit(s, len, &i, ' '))
        return -1;
    /* RFC 1123 wants two day digits; one is tolerated (seen from some servers). */
    if (digits(s, len, &i, 2, &d)) {
        if (digits(s, len, &i, 1, &d))
            return -1;
    }
    if (lit(s, len, &i, ' ') || (mo = match_word(s, len, &i, mon, 12)) < 0 ||
        lit(s, len, &i, ' ') || digits(s, len, &i, 4, &y) || lit(s, len, &i, ' ') ||
        digits(s, len, &i, 2, &h) || lit(s, len, &i, ':') || digits(s, len, &i, 2, &mi) ||
        lit(s, len, &i, ':') || digits(s, len, &i, 2, &sec) || lit(s, len, &i, ' ') ||
        i + 3 != len || memcmp(s + i, "GMT", 3) != 0)
        return -1;
    return civil_to_ms(y, mo + 1, d, h, mi, sec, ms);
}

int notice_parse_tencent(const char *s, size_t len, int64_t *ms)
{
    size_t i = 0;
    int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
    int64_t t;

    if (!s || !ms)
        return -1;
    if (digits(s, len, &i, 4, &y) || lit(s, len, &i, '-') || digits(s, len, &i, 2, &mo) ||
        lit(s, len, &i, '-') || digits(s, len, &i, 2, &d) || lit(s, len, &i, ' ') ||
        digits(s, len, &i, 2, &h) || lit(s, len, &i, ':') || digits(s, len, &i, 2, &mi) ||
        lit(s, len, &i, ':') || digits(s, len, &i, 2, &sec) || i != len ||
        civil_to_ms(y, mo, d, h, mi, sec, &t))
        return -1;
    *ms = t - 8 * 3600000LL; /* China Standard Time, no daylight saving */
    return 0;
}

/* ---- helpers -------------------------------------------------------------- */

static void reset(struct notice_event *ev)
{
    memset(ev, 0, sizeof *ev); /* the poller fills in the provider */
}

static int bad(struct notice_event *ev, const char *why)
{
    snprintf(ev->detail, sizeof ev->detail, "%s", why);
    return -1;
}

/* Trims ASCII whitespace (plain-text replies often end in a newline). */
static void trim(const char **s, size_t *len)
{
    while (*len && (**s == ' ' || **s == '\t' || **s == '\r' || **s == '\n')) {
        (*s)++;
        (*len)--;
    }
    while (*len && ((*s)[*len - 1] == ' ' || (*s)[*len - 1] == '\t' ||
                    (*s)[*len - 1] == '\r' || (*s)[*len - 1] == '\n'))
        (*len)--;
}

/* Copies a short token for a log line, replacing anything unprintable. */
static void printable(char *dst, size_t cap, const char *s, size_t len)
{
    size_t i, n = len < cap - 1 ? len : cap - 1;
    for (i = 0; i < n; i++)
        dst[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
    dst[n] = '\0';
}

/* A deadline in the past by more than STALE_MS is a document left behind:
 * a notice path may linger with a past or non-time value (docs/notices.md). */
static int stale(int64_t t, int64_t now_ms)
{
    return t < now_ms - STALE_MS;
}

static int parse_termination_time(const char *body, size_t len, int64_t now_ms,
                                  struct notice_event *ev, const char *what,
                                  int (*parse)(const char *, size_t, int64_t *))
{
    int64_t t;
    char shown[64];

    reset(ev);
    if (!body)
        return bad(ev, "no body");
    trim(&body, &len);
    if (len == 0)
        return bad(ev, "empty termination-time");
    if (len > MAX_TEXT)
        return bad(ev, "termination-time is too long to be a time");
    printable(shown, sizeof shown, body, len);
    if (parse(body, len, &t)) {
        snprintf(ev->detail, sizeof ev->detail, "%s: not a time: \"%s\"", what, shown);
        return -1;
    }
    if (stale(t, now_ms)) {
        snprintf(ev->detail, sizeof ev->detail, "%s: stale time %s ignored", what, shown);
        return -1;
    }
    ev->kind = NOTICE_TERMINATE;
    ev->deadline_ms = t;
    snprintf(ev->detail, sizeof ev->detail, "%s %s", what, shown);
    return 1;
}

/* Strings in JSON replies must be bounded and printable to reach a log. */
static const char *json_str(const cJSON *o, const char *key, size_t max)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    const char *s = cJSON_IsString(v) ? v->valuestring : NULL;
    size_t i;
    if (!s || strlen(s) > max)
        return NULL;
    for (i = 0; s[i]; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] == 0x7f)
            return NULL;
    return s;
}

/* ---- AWS ------------------------------------------------------------------ */

int notice_parse_aws_action(const char *body, size_t len, int64_t now_ms, struct notice_event *ev)
{
    int ret = -1;
    cJSON *j = NULL;
    const char *action, *tm;
    int64_t t;

    reset(ev);
    if (!body || !len) {
        ret = bad(ev, "instance-action: empty reply");
        goto out;
    }
    j = cJSON_ParseWithLength(body, len);
    if (!cJSON_IsObject(j)) {
        ret = bad(ev, "instance-action: not a JSON object");
        goto out;
    }
    action = json_str(j, "action", 32);
    tm = json_str(j, "time", 64);
    if (!action || !tm) {
        ret = bad(ev, "instance-action: missing action or time");
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
    if (stale(t, now_ms)) {
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
    return parse_termination_time(body, len, now_ms, ev, "spot/termination-time",
                                  notice_parse_iso8601);
}

int notice_parse_aws_rebalance(const char *body, size_t len, int64_t now_ms, struct notice_event *ev)
{
    int ret = -1;
    cJSON *j = NULL;
    const char *tm;
    int64_t t;

    (void)now_ms; /* noticeTime is when AWS issued it: its age does not matter */
    reset(ev);
    if (!body || !len) {
        ret = bad(ev, "rebalance: empty reply");
        goto out;
    }
    j = cJSON_ParseWithLength(body, len);
    if (!cJSON_IsObject(j)) {
        ret = bad(ev, "rebalance: not a JSON object");
        goto out;
    }
    tm = json_str(j, "noticeTime", 64);
    if (!tm || notice_parse_iso8601(tm, strlen(tm), &t)) {
        ret = bad(ev, "rebalance: missing or malformed noticeTime");
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

/* ---- GCP ------------------------------------------------------------------ */

static int text_is(const char *s, size_t len, const char *word)
{
    return len == strlen(word) && memcmp(s, word, len) == 0;
}

int notice_parse_gcp_preempted(const char *body, size_t len, int64_t now_ms, struct notice_event *ev)
{
    reset(ev);
    if (!body)
        return bad(ev, "preempted: no body");
    trim(&body, &len);
    if (text_is(body, len, "FALSE"))
        return 0;
    if (!text_is(body, len, "TRUE"))
        return bad(ev, "preempted: neither TRUE nor FALSE");
    ev->kind = NOTICE_TERMINATE;
    ev->deadline_ms = now_ms + GCP_WINDOW_MS;
    snprintf(ev->detail, sizeof ev->detail, "instance/preempted TRUE");
    return 1;
}

int notice_parse_gcp_maintenance(const char *body, size_t len, int64_t now_ms,
                                 struct notice_event *ev)
{
    reset(ev);
    if (!body)
        return bad(ev, "maintenance-event: no body");
    trim(&body, &len);
    /* Live migration keeps the VM (and the process) running. */
    if (text_is(body, len, "NONE") || text_is(body, len, "MIGRATE_ON_HOST_MAINTENANCE"))
        return 0;
    if (!text_is(body, len, "TERMINATE_ON_HOST_MAINTENANCE"))
        return bad(ev, "maintenance-event: unknown value");
    ev->kind = NOTICE_MAINTENANCE;
    ev->deadline_ms = now_ms + GCP_MAINT_MS;
    snprintf(ev->detail, sizeof ev->detail, "instance/maintenance-event TERMINATE_ON_HOST_MAINTENANCE");
    return 1;
}

/* ---- Azure ---------------------------------------------------------------- */

static int names_vm(const cJSON *e, const char *vm)
{
    const cJSON *r, *res = cJSON_GetObjectItemCaseSensitive(e, "Resources");
    if (!vm)
        return 1;
    if (!cJSON_IsArray(res))
        return 1; /* no list: the event is for this VM */
    cJSON_ArrayForEach(r, res)
        if (cJSON_IsString(r) && strcasecmp(r->valuestring, vm) == 0)
            return 1;
    return 0;
}

int notice_parse_azure_for(const char *body, size_t len, int64_t now_ms, const char *vm,
                           struct notice_event *ev)
{
    int ret = -1, malformed = 0, n = 0;
    cJSON *j = NULL;
    const cJSON *events, *e;
    struct notice_event best;
    char why[192] = "";

    reset(ev);
    best = *ev;
    if (!body || !len) {
        ret = bad(ev, "scheduledevents: empty reply");
        goto out;
    }
    j = cJSON_ParseWithLength(body, len);
    events = cJSON_IsObject(j) ? cJSON_GetObjectItemCaseSensitive(j, "Events") : NULL;
    if (!cJSON_IsArray(events)) {
        ret = bad(ev, "scheduledevents: no Events array");
        goto out;
    }
    cJSON_ArrayForEach(e, events) {
        const char *type = json_str(e, "EventType", 32);
        const char *id = json_str(e, "EventId", sizeof ev->id - 1);
        const char *nb = json_str(e, "NotBefore", 64);
        const char *status = json_str(e, "EventStatus", 32);
        enum notice_kind kind;
        int64_t t;

        if (!cJSON_IsObject(e) || !type) {
            malformed = 1;
            snprintf(why, sizeof why, "event without EventType");
            continue;
        }
        if (strcmp(type, "Preempt") == 0 || strcmp(type, "Terminate") == 0)
            kind = NOTICE_TERMINATE;
        else if (strcmp(type, "Reboot") == 0 || strcmp(type, "Redeploy") == 0)
            kind = NOTICE_MAINTENANCE;
        else
            continue; /* Freeze: a pause of seconds, the process survives */
        if (!names_vm(e, vm))
            continue;
        if (!id || !id[0] || !nb) {
            malformed = 1;
            snprintf(why, sizeof why, "%s event without EventId or NotBefore", type);
            continue;
        }
        if (status && strcmp(status, "Scheduled") != 0 && strcmp(status, "Started") != 0)
            continue; /* e.g. "Canceled" (u): nothing to do */
        if (!nb[0]) {
            /* Blank once started: act now, assuming the documented minimum. */
            t = now_ms + AZURE_BLANK_MS;
        } else if (notice_parse_rfc1123(nb, strlen(nb), &t)) {
            malformed = 1;
            snprintf(why, sizeof why, "%s event %s: NotBefore not a time", type, id);
            continue;
        } else if (stale(t, now_ms)) {
            malformed = 1;
            snprintf(why, sizeof why, "%s event %s: stale NotBefore %s ignored", type, id, nb);
            continue;
        }
        /* Prefer a terminating event, then the earliest deadline. */
        if (n == 0 || (kind == NOTICE_TERMINATE && best.kind != NOTICE_TERMINATE) ||
            (kind == best.kind && t < best.deadline_ms)) {
            best.kind = kind;
            best.deadline_ms = t;
            snprintf(best.id, sizeof best.id, "%s", id);
            snprintf(best.detail, sizeof best.detail, "scheduledevents %s %s NotBefore \"%s\"",
                     type, id, nb);
        }
        n++;
    }
    if (n > 0) {
        *ev = best;
        ret = 1;
    } else if (malformed) {
        snprintf(ev->detail, sizeof ev->detail, "scheduledevents: %s", why);
        ret = -1;
    } else {
        ret = 0;
    }
out:
    cJSON_Delete(j);
    return ret;
}

int notice_parse_azure(const char *body, size_t len, int64_t now_ms, struct notice_event *ev)
{
    return notice_parse_azure_for(body, len, now_ms, NULL, ev);
}

/* ---- Alibaba, Tencent ----------------------------------------------------- */

int notice_parse_aliyun(const char *body, size_t len, int64_t now_ms, struct notice_event *ev)
{
    return parse_termination_time(body, len, now_ms, ev, "instance/spot/termination-time",
                                  notice_parse_iso8601);
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
    return parse_termination_time(body, len, now_ms, ev, "spot/termination-time", tencent_or_iso);
}
