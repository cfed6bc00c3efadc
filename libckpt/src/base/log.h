/* log.h -- the library logs only through the program's callback, or to
 * stderr when CKPT_LOG asks for it. */
#ifndef CKPT_LOG_H
#define CKPT_LOG_H

#include "ckpt.h"

struct ckpt_logger {
    ckpt_log_fn fn;
    void *user;
    ckpt_log_level level;
};

void ckpt__logger_init(struct ckpt_logger *lg, ckpt_log_fn fn, void *user,
                       ckpt_log_level level);
void ckpt__log(const struct ckpt_logger *lg, ckpt_log_level level, const char *subject,
               const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
