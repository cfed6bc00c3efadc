/* notice/gcp.h -- GCP's reply parsers (notice/gcp.c), exposed for the unit tests and
 * the fuzz target; the provider itself is reached through the table. */
#ifndef CKPTRUN_NOTICE_GCP_H
#define CKPTRUN_NOTICE_GCP_H

#include <stddef.h>
#include <stdint.h>

#include "notice/types.h"

/* Each reply parser looks at one HTTP 200 body and fills *ev (kind, deadline,
 * id, detail; not provider).
 * @return 1 notice, 0 no notice, -1 malformed/stale (a reason is in *ev->detail). */
int notice_parse_gcp_preempted(const char *body, size_t len, int64_t now_ms,
                               struct notice_event *ev);
int notice_parse_gcp_maintenance(const char *body, size_t len, int64_t now_ms,
                                 struct notice_event *ev);

#endif
