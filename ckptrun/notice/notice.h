/*
 * notice.h -- preemption-notice pollers for cloud metadata services.
 *
 * ckptrun starts one poller per process. The poller detects (or is told) the
 * cloud provider, polls that provider's metadata endpoint from its own
 * thread(s) and calls back once per notice. It never blocks the caller on the
 * network: notice_start() only reads DMI files and starts threads.
 *
 * Providers are a table (NOTICE_PROVIDER_LIST in notice/types.h; one file each,
 * ckptrun/notice/<name>.c, implementing notice/provider.h). What each one
 * polls, how its replies map to notices (NOTICE_TERMINATE: the instance goes
 * away; NOTICE_REBALANCE: an early warning without a deadline;
 * NOTICE_MAINTENANCE: host maintenance) and their deadlines, and how to add
 * one: docs/notices.md.
 *
 * Guarantees: NOTICE_TERMINATE is delivered at most once per poller, from
 * whichever path or event reports it first, however long it keeps being
 * served; NOTICE_REBALANCE and NOTICE_MAINTENANCE once per distinct notice
 * (AWS noticeTime, Azure EventId). Errors (timeouts, 5xx, refused connections, oversized or
 * malformed replies, unparseable or stale times) are logged once per change
 * of condition and never produce a notice. Times more than 120 s in the past
 * are stale (a lingering document) and ignored.
 *
 * Threading: the callback runs on a poller thread, serialized (never two at
 * once); it should return quickly and must not call notice_stop() or
 * notice_ack() (an acknowledgement is a network call). notice_provider() and
 * notice_ack() may be called from any other thread while the poller runs.
 *
 * Builds: the poller's requests go through one transport file: notice/net.c
 * over the shared HTTP transport (http.h) with libcurl; without it
 * notice/none.c, whose transport has nothing to poll with (notice_available()
 * says 0; a forced provider is warned about and nothing is polled). The
 * table, the reply parsers and the probe's answers exist in both. In
 * ckptrun, notice_glue.c hands notices to the supervisor's queue
 * (notice_queue.h); this header does not depend on the supervisor.
 */
#ifndef CKPT_NOTICE_H
#define CKPT_NOTICE_H

#include <stddef.h>
#include <stdint.h>
#include "ckpt.h"
#include "notice/types.h"

/* Detects the provider (for "auto": DMI only, no network) and starts polling.
 * Strings in `cfg` are copied. With provider "none" (or "auto" finding no
 * known vendor, or AWS_EC2_METADATA_DISABLED=true for aws) no thread is
 * started and *out is still a valid poller whose provider is "none".
 * @return 0, or -1 on bad arguments (unknown provider name, missing cb,
 *         malformed metadata_url) or when threads cannot be started. */
int notice_start(const struct notice_config *cfg, struct notice_poller **out);

/* @return the provider being polled ("aws", ..., or "none"); static string. */
const char *notice_provider(const struct notice_poller *p);

/* Acknowledges an event so the platform may proceed early. Only Azure has an
 * acknowledgement (POST StartRequests with `event_id`); other providers: no-op
 * returning 0. Call only after the final checkpoint committed. Blocks for at
 * most ~5 s on the network. @return 0 on an HTTP 2xx reply, else -1. */
int notice_ack(struct notice_poller *p, const char *event_id);

/* Stops polling, joins the threads and frees p. NULL-safe. In-flight
 * requests are aborted; returns within about 2 s (aws: the IMDS timeout). */
void notice_stop(struct notice_poller *p);

/* The probe is notice/probe.h. The reply parsers are each provider's own
 * (notice/<name>.h, for the unit tests and the fuzz target); a provider
 * added later reaches its tests through the table:
 * notice_provider_find(name)->paths[i].parse, notice/provider.h. */

#endif
