/* doctor/notice.c -- provider, metadata, imds-token and window: where the notice comes from
 * and how long it gives (doctor/notice.h); what is said of each provider is its table entry's
 * hints (notice.h). */
#include "doctor/notice.h"
#include "doctor/report.h"
#include "base/runlog.h"
#include "notice/notice.h"
#include "opts.h"
#include "base/parse.h"
#include "notice/probe.h"
#include "notice/table.h"
#include "notice/net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The provider, its metadata service and its token, as the poller would
 * find them. */
static void probe_provider(struct doctor *d, const char *forced)
{
    struct opts *o = d->o;
    struct notice_config nc = NOTICE_CONFIG_INIT;
    struct notice_probe_result r;
    const struct notice_hints *h;
    long tmo = doctor_left_ms(d) / 10;

    nc.provider = o->notice ? o->notice : "auto";
    nc.metadata_url = o->metadata_url;
    nc.dmi_dir = getenv("CKPT_DMI_DIR"); /* the same test hook as the poller */
    /* IMDS and its peers answer in milliseconds; a slow one is a failure. */
    if (tmo > 2000)
        tmo = 2000;
    if (tmo < 300)
        tmo = 300;
    if (notice_probe(&nc, tmo, &r) != 0) {
        doctor_add(d, "provider", V_FAIL, "use --notice with one of: " NOTICE_MODES,
            "unknown provider '%s'", nc.provider);
        d->provider = "none";
        doctor_skip(d, "metadata", "provider");
        return;
    }
    d->provider = r.provider;
    if (!(h = notice_hints(r.provider))) {
        if (forced)
            doctor_add(d, "provider", V_OK, NULL, "none (%s): no metadata notice is polled", r.how);
        else
            doctor_add(d, "provider", V_WARN,
                "on a cloud VM whose DMI is hidden (some containers), force the provider with "
                "--notice (one of" NOTICE_PROVIDER_NAMES ")",
                "none detected (%s): no metadata notice will arrive", r.how);
        doctor_add(d, "metadata", V_SKIP, NULL, "not contacted: no provider");
        return;
    }
    doctor_add(d, "provider", V_OK, NULL, "%s (%s)", r.provider, r.how);
    if (!r.reachable) {
        /* a service that starts on first use answers its first call late */
        int slow = h->slow_start && strstr(r.detail, "imed out");
        doctor_add(d, "metadata", slow ? V_WARN : V_FAIL,
            slow ? h->slow_start
            : h->unreachable ? h->unreachable
                : "no notice will arrive: check the metadata service is reachable from here "
                  "(network namespace, firewall), or point --metadata-url at it",
            "%s unreachable: %s", r.base[0] ? r.base : "metadata service", r.detail);
    } else if (r.pending) {
        doctor_add(d, "metadata", V_WARN,
            "this instance is about to be reclaimed: do not start a long run on it",
            "%s: a notice is pending NOW (%s)", r.base, r.detail);
    } else if (r.status == 200 || r.status == 404) {
        doctor_add(d, "metadata", V_OK, NULL, "%s answered HTTP %ld in %ld ms (no notice pending)",
            r.base, r.status, r.latency_ms);
    } else {
        doctor_add(d, "metadata", V_FAIL,
            "the notice path refuses ckptrun's requests: check --metadata-url and any "
            "metadata proxy in between",
            "%s answered HTTP %ld to the notice path", r.base, r.status);
    }
    if (h->token_what) {
        if (!r.reachable && r.token != 1)
            doctor_add(d, "imds-token", V_SKIP, NULL, "not judged: the endpoint is unreachable");
        else if (r.token == 1)
            doctor_add(d, "imds-token", V_OK, NULL, "%s token obtained", h->token_what);
        else if (r.token == 0)
            doctor_add(d, "imds-token", V_WARN, h->token_refused,
                "token PUT refused (HTTP %ld): using token-less requests", r.token_status);
        else
            doctor_add(d, "imds-token", h->token_required ? V_FAIL : V_WARN, h->token_failed,
                "token PUT failed (%s)",
                r.token_status ? "bad reply" : r.detail[0] ? r.detail : "no reply");
    }
}

/* The window that applies: the provider's, or the scheduler's, the tighter
 * when both are present. */
static void check_window(struct doctor *d)
{
    struct opts *o = d->o;
    const char *k8s = getenv("KUBERNETES_SERVICE_HOST");
    const char *slurm = getenv("SLURM_JOB_ID");
    const struct notice_hints *h = notice_hints(d->provider);
    char b1[32], b2[32];
    int64_t w = 0;

    d->window_src[0] = '\0';
    if (h) {
        w = h->window_ms;
        d->poll_ms = h->detect_ms;
        snprintf(d->window_src, sizeof d->window_src, "%s", h->window_src);
    }
    if (k8s && *k8s && (w == 0 || (int64_t)o->grace_ms < w)) {
        w = (int64_t)o->grace_ms, d->poll_ms = 0;
        snprintf(d->window_src, sizeof d->window_src, "Kubernetes grace (--grace)");
    }
    if (slurm && *slurm && (w == 0 || (int64_t)o->lead_ms < w)) {
        w = (int64_t)o->lead_ms, d->poll_ms = 0;
        snprintf(d->window_src, sizeof d->window_src, "SLURM signal lead (--lead)");
    }
    d->window_ms = w;
    ckpt__fmt_duration((uint64_t)w, b1, sizeof b1);
    if (w == 0) {
        if (o->interval_ms)
            doctor_add(d, "window", V_OK, NULL,
                       "no notice window: periodic checkpoint requests every %s bound the work "
                       "lost, " DOCTOR_REACH,
                       ckpt__fmt_duration(o->interval_ms, b2, sizeof b2));
        else
            doctor_add(d, "window", V_WARN,
                "set --interval (e.g. 30m) " DOCTOR_REACH ": the work lost in a stop is then at "
                "most one interval",
                "no notice window and no --interval: a stop loses everything since the last "
                "checkpoint the trainer wrote itself");
    } else if (strstr(d->window_src, "Kubernetes")) {
        doctor_add(d, "window", V_OK, NULL,
            "%s: SIGTERM, then SIGKILL after terminationGracePeriodSeconds; ckptrun assumes %s "
            "(set --grace to the pod's grace period minus a few seconds)", d->window_src, b1);
    } else if (strstr(d->window_src, "SLURM")) {
        doctor_add(d, "window", V_OK, NULL,
            "%s: %s between the scheduler's signal and the kill (match sbatch "
            "--signal=B:USR1@SECONDS)", d->window_src, b1);
    } else {
        doctor_add(d, "window", V_OK, NULL, "%s: %s; estimates below use %s", d->window_src,
                   h ? h->window_note : "", b1);
    }
}

void check_notice(struct doctor *d)
{
    const char *forced = d->o->notice && *d->o->notice && strcmp(d->o->notice, "auto") != 0
                             ? d->o->notice : NULL;

    if (notice_available()) {
        probe_provider(d, forced);
    } else {
        d->provider = "none";
        doctor_add(d, "provider", forced && strcmp(forced, "none") != 0 ? V_FAIL : V_WARN,
                   "rebuild with libcurl for cloud notices, and rely on --interval meanwhile, "
                   DOCTOR_REACH,
                   "this build has no cloud-notice support (no libcurl)");
        doctor_skip(d, "metadata", "provider");
    }
    check_window(d);
}
