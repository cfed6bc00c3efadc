/* notice/aws.h -- AWS's reply parsers (notice/aws.c), exposed for the unit tests and
 * the fuzz target; the provider itself is reached through the table. */
#ifndef CKPTRUN_NOTICE_AWS_H
#define CKPTRUN_NOTICE_AWS_H

#include <stddef.h>
#include <stdint.h>

#include "notice/types.h"

/* Each reply parser looks at one HTTP 200 body and fills *ev (kind, deadline,
 * id, detail; not provider).
 * @return 1 notice, 0 no notice, -1 malformed/stale (a reason is in *ev->detail). */
int notice_parse_aws_action(const char *body, size_t len, int64_t now_ms, struct notice_event *ev);
int notice_parse_aws_termtime(const char *body, size_t len, int64_t now_ms,
                              struct notice_event *ev);
int notice_parse_aws_rebalance(const char *body, size_t len, int64_t now_ms,
                               struct notice_event *ev);

#endif
