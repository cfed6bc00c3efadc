/* log.c -- the library logs only through a callback, or to stderr when
 * CKPT_LOG asks for it. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"

static void stderr_log(void *user, ckpt_log_level level, const char *subject,
                       const char *msg)
{
    static const char *names[] = { "debug", "info", "warn", "error" };
    (void)user;
    fprintf(stderr, "libckpt: %s %s: %s\n", names[level < 4 ? level : 3], subject, msg);
}

void ckpt__logger_init(struct ckpt_logger *lg, ckpt_log_fn fn, void *user,
                       ckpt_log_level level)
{
    const char *env = getenv("CKPT_LOG");
    lg->fn = fn;
    lg->user = user;
    lg->level = level;
    if (fn)
        return;
    lg->level = CKPT_LOG_OFF;
    if (!env)
        return;
    if (!strcmp(env, "debug"))
        lg->level = CKPT_LOG_DEBUG;
    else if (!strcmp(env, "info"))
        lg->level = CKPT_LOG_INFO;
    else if (!strcmp(env, "warn"))
        lg->level = CKPT_LOG_WARN;
    else if (!strcmp(env, "error"))
        lg->level = CKPT_LOG_ERROR;
    if (lg->level != CKPT_LOG_OFF)
        lg->fn = stderr_log;
}

void ckpt__log(const struct ckpt_logger *lg, ckpt_log_level level, const char *subject,
               const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    if (!lg || !lg->fn || level < lg->level || lg->level == CKPT_LOG_OFF)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    lg->fn(lg->user, level, subject, msg);
}
