/* notice/parse.h -- what the providers' reply parsers share (notice/parse.c):
 * strict time parsers, scanning helpers, the shape of a notice. Pure: no
 * I/O, no globals. Bodies are (pointer, length), not NUL-terminated. */
#ifndef CKPTRUN_NOTICE_PARSE_H
#define CKPTRUN_NOTICE_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "notice/types.h"

struct cJSON;

/* Strict time parsers. @return 0 and *ms (Unix ms), or -1. */
/* 2017-09-18T08:22:00Z, optional .fff, Z or +hh:mm */
int notice_parse_iso8601(const char *s, size_t len, int64_t *ms);
/* Mon, 19 Sep 2016 18:29:47 GMT */
int notice_parse_rfc1123(const char *s, size_t len, int64_t *ms);

#define NOTICE_STALE_MS 120000 /* a time further in the past is a lingering document */
#define NOTICE_MAX_TEXT 256    /* plain-text replies longer than this are not times */

/* Reads exactly n decimal digits at s[*i]. @return 0 (advanced), or -1. */
int notice_digits(const char *s, size_t len, size_t *i, int n, int *out);
/* The character c at s[*i]. @return 0 (advanced), or -1. */
int notice_lit(const char *s, size_t len, size_t *i, char c);
/* A calendar time in UTC, each field range-checked (a leap second counts
 * as the next second). @return 0 and *ms, or -1. */
int notice_civil_to_ms(int y, int mo, int d, int h, int mi, int sec, int64_t *ms);
/* Trims ASCII whitespace on both ends. */
void notice_trim(const char **s, size_t *len);
/* A short token for a log line, anything unprintable replaced by '?'. */
void notice_printable(char *dst, size_t cap, const char *s, size_t len);
/* 1 when a deadline `t` lies more than NOTICE_STALE_MS in the past. */
int notice_stale(int64_t t, int64_t now_ms);
/* 1 when the (trimmed) body is exactly `word`. */
int notice_text_is(const char *s, size_t len, const char *word);
/* Clears *ev (the poller fills in the provider). */
void notice_ev_reset(struct notice_event *ev);
/* A reason in ev->detail. @return -1. */
int notice_ev_bad(struct notice_event *ev, const char *why);
/* A JSON member that is a string of at most `max` printable characters,
 * else NULL. */
const char *notice_json_str(const struct cJSON *o, const char *key, size_t max);
/* A plain-text reply holding one time, parsed by `parse`, as a terminate
 * notice at that time; `what` names the path in details. Empty, overlong,
 * unparseable or stale: -1 with the reason. */
int notice_parse_termination_time(const char *body, size_t len, int64_t now_ms,
                                  struct notice_event *ev, const char *what,
                                  int (*parse)(const char *, size_t, int64_t *));

#endif
