/* notice/tencent.h -- Tencent Cloud's time format and reply parser (notice/tencent.c),
 * exposed for the unit tests and the fuzz target. */
#ifndef CKPTRUN_NOTICE_TENCENT_H
#define CKPTRUN_NOTICE_TENCENT_H

#include <stddef.h>
#include <stdint.h>

#include "notice/types.h"

/* 2018-08-18 12:05:33, in UTC+8. @return 0 and *ms (Unix ms), or -1. */
int notice_parse_tencent(const char *s, size_t len, int64_t *ms);
/* Each reply parser looks at one HTTP 200 body and fills *ev (kind, deadline,
 * id, detail; not provider).
 * @return 1 notice, 0 no notice, -1 malformed/stale (a reason is in *ev->detail). */
int notice_parse_tencent_reply(const char *body, size_t len, int64_t now_ms,
                               struct notice_event *ev);

#endif
