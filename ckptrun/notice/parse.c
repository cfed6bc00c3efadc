/*
 * notice/parse.c -- the strict time parsers of metadata replies and the
 * helpers every provider's reply parser shares (notice/provider.h); the
 * reply parsers themselves are in their providers' files.
 *
 * Everything here is pure (no I/O, no globals) so the unit tests and the fuzz
 * target can drive it directly. Bodies are (pointer, length) and need not be
 * NUL-terminated. Replies are hostile input: JSON goes through cJSON with an
 * explicit length, strings are bounded, and times must match one exact shape.
 * A reply that cannot be understood is never turned into a notice.
 */
#include "notice/provider.h"
#include "notice/parse.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

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
    static const int dm[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : dm[m - 1];
}

int notice_digits(const char *s, size_t len, size_t *i, int n, int *out)
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

int notice_lit(const char *s, size_t len, size_t *i, char c)
{
    if (*i >= len || s[*i] != c)
        return -1;
    (*i)++;
    return 0;
}

int notice_civil_to_ms(int y, int mo, int d, int h, int mi, int sec, int64_t *ms)
{
    if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 ||
        mi > 59 || sec > 60)
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
    if (notice_digits(s, len, &i, 4, &y) || notice_lit(s, len, &i, '-') ||
        notice_digits(s, len, &i, 2, &mo) || notice_lit(s, len, &i, '-') ||
        notice_digits(s, len, &i, 2, &d) || notice_lit(s, len, &i, 'T') ||
        notice_digits(s, len, &i, 2, &h) || notice_lit(s, len, &i, ':') ||
        notice_digits(s, len, &i, 2, &mi) || notice_lit(s, len, &i, ':') ||
        notice_digits(s, len, &i, 2, &sec))
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
        if (notice_digits(s, len, &i, 2, &oh) || notice_lit(s, len, &i, ':') ||
            notice_digits(s, len, &i, 2, &om) || oh > 23 || om > 59)
            return -1;
    } else {
        return -1; /* a time without a zone is ambiguous: refuse it */
    }
    if (i != len || notice_civil_to_ms(y, mo, d, h, mi, sec, &t))
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
    static const char *const wd[7] = { "Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun" };
    static const char *const mon[12] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                         "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
    size_t i = 0;
    int d, mo, y, h, mi, sec;

    if (!s || !ms)
        return -1;
    if (match_word(s, len, &i, wd, 7) < 0 || notice_lit(s, len, &i, ',') ||
        notice_lit(s, len, &i, ' '))
        return -1;
    /* RFC 1123 wants two day digits; one is tolerated (seen from some servers). */
    if (notice_digits(s, len, &i, 2, &d)) {
        if (notice_digits(s, len, &i, 1, &d))
            return -1;
    }
    if (notice_lit(s, len, &i, ' ') || (mo = match_word(s, len, &i, mon, 12)) < 0 ||
        notice_lit(s, len, &i, ' ') || notice_digits(s, len, &i, 4, &y) ||
        notice_lit(s, len, &i, ' ') || notice_digits(s, len, &i, 2, &h) ||
        notice_lit(s, len, &i, ':') || notice_digits(s, len, &i, 2, &mi) ||
        notice_lit(s, len, &i, ':') || notice_digits(s, len, &i, 2, &sec) ||
        notice_lit(s, len, &i, ' ') || i + 3 != len || memcmp(s + i, "GMT", 3) != 0)
        return -1;
    return notice_civil_to_ms(y, mo + 1, d, h, mi, sec, ms);
}

/* ---- helpers -------------------------------------------------------------- */

void notice_ev_reset(struct notice_event *ev)
{
    memset(ev, 0, sizeof *ev); /* the poller fills in the provider */
}

int notice_ev_bad(struct notice_event *ev, const char *why)
{
    snprintf(ev->detail, sizeof ev->detail, "%s", why);
    return -1;
}

/* Trims ASCII whitespace (plain-text replies often end in a newline). */
void notice_trim(const char **s, size_t *len)
{
    while (*len && (**s == ' ' || **s == '\t' || **s == '\r' || **s == '\n')) {
        (*s)++;
        (*len)--;
    }
    while (*len && ((*s)[*len - 1] == ' ' || (*s)[*len - 1] == '\t' || (*s)[*len - 1] == '\r' ||
                    (*s)[*len - 1] == '\n'))
        (*len)--;
}

/* Copies a short token for a log line, replacing anything unprintable. */
void notice_printable(char *dst, size_t cap, const char *s, size_t len)
{
    size_t i, n = len < cap - 1 ? len : cap - 1;
    for (i = 0; i < n; i++)
        dst[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
    dst[n] = '\0';
}

/* A deadline in the past by more than NOTICE_STALE_MS is a document left behind:
 * a notice path may linger with a past or non-time value (docs/notices.md). */
int notice_stale(int64_t t, int64_t now_ms)
{
    return t < now_ms - NOTICE_STALE_MS;
}

int notice_parse_termination_time(const char *body, size_t len, int64_t now_ms,
                                  struct notice_event *ev, const char *what,
                                  int (*parse)(const char *, size_t, int64_t *))
{
    int64_t t;
    char shown[64];

    notice_ev_reset(ev);
    if (!body)
        return notice_ev_bad(ev, "no body");
    notice_trim(&body, &len);
    if (len == 0)
        return notice_ev_bad(ev, "empty termination-time");
    if (len > NOTICE_MAX_TEXT)
        return notice_ev_bad(ev, "termination-time is too long to be a time");
    notice_printable(shown, sizeof shown, body, len);
    if (parse(body, len, &t)) {
        snprintf(ev->detail, sizeof ev->detail, "%s: not a time: \"%s\"", what, shown);
        return -1;
    }
    if (notice_stale(t, now_ms)) {
        snprintf(ev->detail, sizeof ev->detail, "%s: stale time %s ignored", what, shown);
        return -1;
    }
    ev->kind = NOTICE_TERMINATE;
    ev->deadline_ms = t;
    snprintf(ev->detail, sizeof ev->detail, "%s %s", what, shown);
    return 1;
}

/* Strings in JSON replies must be bounded and printable to reach a log. */
const char *notice_json_str(const struct cJSON *o, const char *key, size_t max)
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

int notice_text_is(const char *s, size_t len, const char *word)
{
    return len == strlen(word) && memcmp(s, word, len) == 0;
}
