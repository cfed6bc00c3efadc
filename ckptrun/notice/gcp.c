/*
 * notice/gcp.c -- Google Compute Engine preemption (notice/provider.h):
 * instance/preempted (30 s from the notice to power-off) and
 * instance/maintenance-event (60 s ahead), each long-polled on its own
 * watch with wait_for_change and the reply's ETag.
 */
#include "notice/int.h"
#include "notice/report.h"
#include "notice/net.h"
#include "notice/parse.h"
#include "notice/gcp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define GCP_WINDOW_MS 30000   /* ACPI soft-off to hard power-off (docs/notices.md, GCP) */
#define GCP_MAINT_MS 60000    /* maintenance-event changes 60 s before the event */
#define GCP_WAIT_S 60         /* long-poll timeout_sec */
#define ERROR_BACKOFF_MS 5000 /* after a 4xx that retrying quickly cannot fix */

/* ---- replies ---------------------------------------------------------------- */

int notice_parse_gcp_preempted(const char *body, size_t len, int64_t now_ms,
                               struct notice_event *ev)
{
    notice_ev_reset(ev);
    if (!body)
        return notice_ev_bad(ev, "preempted: no body");
    notice_trim(&body, &len);
    if (notice_text_is(body, len, "FALSE"))
        return 0;
    if (!notice_text_is(body, len, "TRUE"))
        return notice_ev_bad(ev, "preempted: neither TRUE nor FALSE");
    ev->kind = NOTICE_TERMINATE;
    ev->deadline_ms = now_ms + GCP_WINDOW_MS;
    snprintf(ev->detail, sizeof ev->detail, "instance/preempted TRUE");
    return 1;
}

int notice_parse_gcp_maintenance(const char *body, size_t len, int64_t now_ms,
                                 struct notice_event *ev)
{
    notice_ev_reset(ev);
    if (!body)
        return notice_ev_bad(ev, "maintenance-event: no body");
    notice_trim(&body, &len);
    /* Live migration keeps the VM (and the process) running. */
    if (notice_text_is(body, len, "NONE") ||
        notice_text_is(body, len, "MIGRATE_ON_HOST_MAINTENANCE"))
        return 0;
    if (!notice_text_is(body, len, "TERMINATE_ON_HOST_MAINTENANCE"))
        return notice_ev_bad(ev, "maintenance-event: unknown value");
    ev->kind = NOTICE_MAINTENANCE;
    ev->deadline_ms = now_ms + GCP_MAINT_MS;
    snprintf(ev->detail, sizeof ev->detail,
             "instance/maintenance-event TERMINATE_ON_HOST_MAINTENANCE");
    return 1;
}

/* ---- polling ---------------------------------------------------------------- */

static const char *const gcp_hdrs[] = { "Metadata-Flavor: Google", NULL };

static int gcp_dmi(const struct notice_dmi *d)
{
    return strcasestr(d->vendor, "Google") || strcasestr(d->product, "Google");
}

/* One path, long-polled: the reply comes when the value changes (or after
 * GCP_WAIT_S), and its ETag goes into the next request. */
static void gcp_run(struct nwatch *w)
{
    struct notice_poller *p = w->p;
    const struct notice_path *path = &p->prov->paths[w->path];
    char etag[80] = "0";
    char url[BASE_MAX + 256];

    while (!atomic_load(&p->stop)) {
        struct notice_reply r;
        long pause = 0;
        int64_t t0 = ckpt__mono_ms();
        snprintf(url, sizeof url, "%s%s?wait_for_change=true&timeout_sec=%d&last_etag=%s", p->base,
                 path->path, GCP_WAIT_S, etag);
        if (notice_http(p->http, "GET", url, gcp_hdrs, NULL, (GCP_WAIT_S + 5) * 1000L,
                        BODY_MAX_SMALL, &r)) {
            if (atomic_load(&p->stop))
                break;
            notice_cond_fail(w, 0, "%s: %s", path->label, r.err);
            pause = notice_poll_interval(p, 1000);
        } else if (r.status == 200) {
            /* An unchanged or missing ETag would make the next call return at
             * once: then pace the loop instead of spinning. */
            if (!r.etag[0] || strcmp(r.etag, etag) == 0)
                pause = notice_poll_interval(p, 1000);
            snprintf(etag, sizeof etag, "%s", r.etag[0] ? r.etag : "0");
            notice_handle(w, 0, path->parse, r.body, r.len);
        } else if (r.status == 503) {
            pause = 1000; /* during maintenance (docs/notices.md, GCP) */
        } else {
            notice_cond_fail(w, 0, "%s: HTTP %ld%s", path->label, r.status,
                             r.status >= 400 && r.status < 500 ? " (misconfiguration?)" : "");
            pause = r.status >= 400 && r.status < 500 ? ERROR_BACKOFF_MS
                                                      : notice_poll_interval(p, 1000);
        }
        free(r.body);
        /* Never faster than 4 requests a second, whatever the server does. */
        if (!pause && ckpt__mono_ms() - t0 < 250)
            pause = 250;
        if (pause && notice_nap(p, pause))
            break;
    }
}

static const struct notice_path gcp_paths[] = {
    { "/computeMetadata/v1/instance/preempted", "instance/preempted", notice_parse_gcp_preempted },
    { "/computeMetadata/v1/instance/maintenance-event", "instance/maintenance-event",
      notice_parse_gcp_maintenance },
};

const struct notice_provider notice_gcp = {
    .name = "gcp",
    .title = "Google Compute Engine preemptible and spot VMs",
    .dmi_match = gcp_dmi,
    .base = "http://metadata.google.internal",
    .headers = gcp_hdrs,
    .paths = gcp_paths,
    .npaths = sizeof gcp_paths / sizeof gcp_paths[0],
    .poll_ms = 1000, /* paces retries only: the long poll waits for a change */
    .timeout_ms = (GCP_WAIT_S + 5) * 1000L,
    .body_max = BODY_MAX_SMALL,
    .hints = {
        .window_ms = GCP_WINDOW_MS,
        .detect_ms = 500, /* long-poll: the notice arrives at once */
        .window_src = "GCP preemption",
        .window_note = "30 s from notice to power-off",
    },
    .watch_per_path = 1,
    .run = gcp_run,
};
