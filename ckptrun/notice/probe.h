/* notice/probe.h -- the one-shot probe of `ckptrun doctor` (notice/probe.c). */
#ifndef CKPTRUN_NOTICE_PROBE_H
#define CKPTRUN_NOTICE_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "notice/types.h"

/* Detects the provider as notice_start() would (DMI only for "auto") and,
 * unless it resolves to "none", sends the provider's token PUT (when it has
 * a session token) and one GET of its first path, each with `timeout_ms`.
 * Touches no network when the provider is "none". Blocking; no thread, no
 * callback.
 * @return 0 (see *r, also for an unreachable endpoint), -1 on bad arguments. */
int notice_probe(const struct notice_config *cfg, long timeout_ms, struct notice_probe_result *r);

#endif
