/* notice/azure.h -- Azure's reply parsers (notice/azure.c), exposed for the unit tests
 * and the fuzz target; the provider itself is reached through the table. */
#ifndef CKPTRUN_NOTICE_AZURE_H
#define CKPTRUN_NOTICE_AZURE_H

#include <stddef.h>
#include <stdint.h>

#include "notice/types.h"

/* Each reply parser looks at one HTTP 200 body and fills *ev (kind, deadline,
 * id, detail; not provider).
 * @return 1 notice, 0 no notice, -1 malformed/stale (a reason is in *ev->detail). */
int notice_parse_azure(const char *body, size_t len, int64_t now_ms, struct notice_event *ev);
/* As notice_parse_azure, ignoring events whose Resources do not name `vm`
 * (NULL: accept every event; an availability set shows its peers' events). */
int notice_parse_azure_for(const char *body, size_t len, int64_t now_ms, const char *vm,
                           struct notice_event *ev);

#endif
