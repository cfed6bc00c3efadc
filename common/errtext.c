/* errtext.c -- error details into a caller's buffer (ckpt_common.h). */
#include <stdarg.h>
#include <stdio.h>

#include "ckpt_common.h"

void ckpt__errf(char *err, size_t n, const char *fmt, ...)
{
    va_list ap;

    if (!err || n == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
}
