/*
 * log.h -- ckptrun owns stderr: one line per event,
 *   ckptrun: <ISO-8601 UTC time> <event> key=value ...
 * or, with --log-json, one JSON object per line:
 *   {"time":"...","event":"...","key":value,...}
 * Single-threaded callers and the commit worker both log; a mutex keeps
 * lines whole.
 */
#ifndef CKPTRUN_LOG_H
#define CKPTRUN_LOG_H

#include <stdint.h>
#include <cjson/cJSON.h>
#include "ckpt.h"

enum { LOG_DEBUG = 0, LOG_INFO = 1, LOG_WARN = 2, LOG_ERROR = 3 };

/* verbosity: -1 quiet (warnings and errors only), 0 normal, 1 verbose. */
void log_setup(int json, int verbosity);
int log_json_enabled(void);

/* Log `event` with the members of `fields` (may be NULL; not consumed). */
void log_event(int level, const char *event, const cJSON *fields);
/* Convenience: an event with a single "msg" string. */
void log_msg(int level, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A fatal usage/configuration error: always one line, even with -q:
 *   ckptrun: <message>          (text)
 *   {"time":..,"event":"error","msg":..}   (--log-json) */
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* libckpt log callback (cfg.log_fn): forwards as event "lib". */
void log_lib(void *user, ckpt_log_level level, const char *subject, const char *msg);
ckpt_log_level log_lib_level(void);

/* Wall clock in Unix ms and a monotonic clock in ms. */
int64_t now_ms(void);
int64_t mono_ms(void);
/* ISO-8601 UTC with milliseconds into buf (>= 32 bytes). */
char *iso_time(int64_t unix_ms, char *buf, size_t n);

#endif
