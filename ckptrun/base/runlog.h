/*
 * runlog.h -- ckptrun owns stderr. Every line is one of:
 *   ckptrun: <ISO-8601 UTC time> <event> [level=warn|error] key=value ...
 *                                  an event (supervisor, warnings)
 *   ckptrun: error: <message>       the error that ends a command (one line)
 *   ckptrun: <sentence>             the result of an administration command
 * or, with --log-json, one JSON object per line:
 *   {"time":"...","event":"...","level":"warn",...}
 * (errors: "event":"error","level":"error","msg":...; results:
 * "event":"result","command":...,"msg":... plus the figures).
 *
 * On a terminal (stderr is a tty) and only there: the level words are in
 * colour unless NO_COLOR is set (or TERM=dumb), and a transient status line
 * (progress) may be drawn below the log with \r; log lines clear it and it
 * is drawn again after them. Every function is thread-safe (one mutex keeps
 * lines whole).
 */
#ifndef CKPTRUN_RUNLOG_H
#define CKPTRUN_RUNLOG_H

#include <stdint.h>
#include <cjson/cJSON.h>
#include "ckpt.h"
#include "ckpt_common.h"

enum { LOG_DEBUG = 0, LOG_INFO = 1, LOG_WARN = 2, LOG_ERROR = 3 };

/* verbosity: -1 quiet (warnings and errors only), 0 normal, 1 verbose. */
void log_setup(int json, int verbosity);
int log_json_enabled(void);
int log_quiet(void);
/* 1 when stderr is a terminal and progress may be drawn (not -q, not
 * --log-json). */
int log_interactive(void);

/* Log `event` with the members of `fields` (may be NULL; not consumed). */
void log_event(int level, const char *event, const cJSON *fields);
/* Convenience: an event with a single "msg" string. */
void log_msg(int level, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The error that ends a command: always one line, even with -q. Held
 * library errors (log_lib_hold) are released first, those it quotes
 * dropped. */
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The result of an administration command, one line a person reads
 * ("ckptrun: verify: 3 checkpoints intact, ..."); with --log-json an object
 * with `fields` (may be NULL; not consumed) and "msg". Hidden by -q. */
void log_result(const char *command, const cJSON *fields, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The transient status line (terminal only; ignored elsewhere): draw
 * `text` in place of the previous one, or clear it (NULL). */
void log_status(const char *text);

/* libckpt log callback (cfg.log_fn): forwards as event "lib". */
void log_lib(void *user, ckpt_log_level level, const char *subject, const char *msg);
ckpt_log_level log_lib_level(void);
/* Administration commands report a failure once, in their own error line,
 * which quotes the library's detail. While held, the library's warnings and
 * errors are kept instead of printed; log_lib_release() prints, as
 * warnings, the kept ones that are not about what the final message (may
 * be NULL) says: contained in it, or ending in the same detail (its last
 * ": " segment). A verify that found several damaged chunks names each. */
void log_lib_hold(void);
void log_lib_release(const char *final_msg);

/* ISO-8601 UTC with milliseconds into buf (>= 32 bytes). */
char *iso_time(int64_t unix_ms, char *buf, size_t n);
/* "3 min ago", "in 40 s", "just now": `t_ms` relative to `now`. */
char *ago(int64_t t_ms, int64_t now, char *buf, size_t n);

#endif
