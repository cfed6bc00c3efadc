/* doctor_notice.c -- provider, metadata, imds-token and window: where the notice comes from and how long it gives (doctor.h). */
#include "doctor.h"
#include "runlog.h"
#include "notice.h"
#include "opts.h"
#include "parse.h"

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
        doctor_add(d, "provider", V_FAIL, "use --notice auto|aws|gcp|azure|aliyun|tencent|none",
            "unknown provider '%s'", nc.provider);
        d->provider = "none";
        doctor_skip(d, "metadata", "provider");
        return;
    }
    d->provider = r.provider;
    if (strcmp(r.provider, "none") == 0) {
        if (forced)
            doctor_add(d, "provider", V_OK, NULL, "none (%s): no metadata notice is polled", r.how);
        else
            doctor_add(d, "provider", V_WARN,
                "on a cloud VM whose DMI is hidden (some containers), force the provider with "
                "--notice aws|gcp|azure|aliyun|tencent",
                "none detected (%s): no metadata notice will arrive", r.how);
        doctor_add(d, "metadata", V_SKIP, NULL, "not contacted: no provider");
        return;
    }
    doctor_add(d, "provider", V_OK, NULL, "%s (%s)", r.provider, r.how);
    if (!r.reachable) {
        int azure_slow = strcmp(r.provider, "azure") == 0 && strstr(r.detail, "imed out");
        doctor_add(d, "metadata", azure_slow ? V_WARN : V_FAIL,
            azure_slow ? "Azure's first Scheduled Events call can take up to 2 minutes while "
                         "the service starts; ckptrun keeps polling: run doctor again in a minute"
            : strcmp(r.provider, "aws") == 0
                ? "no notice will arrive: check that instance metadata is enabled; in a "
                  "container the IMDSv2 PUT needs a hop limit of 2 (modify-instance-metadata-"
                  "options --http-put-response-hop-limit 2); or point --metadata-url at it"
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
    if (strcmp(r.provider, "aws") == 0 || strcmp(r.provider, "aliyun") == 0) {
        int aws = r.provider[1] == 'w';
        if (!r.reachable && r.token != 1)
            doctor_add(d, "imds-token", V_SKIP, NULL, "not judged: the endpoint is unreachable");
        else if (r.token == 1)
            doctor_add(d, "imds-token", V_OK, NULL, "%s token obtained",
                aws ? "IMDSv2 session" : "hardened-mode metadata");
        else if (r.token == 0)
            doctor_add(d, "imds-token", V_WARN,
                aws ? "IMDSv2 is off here: ckptrun falls back to IMDSv1, which works; enable "
                      "IMDSv2 (http-tokens required) when you can"
                    : "ckptrun uses plain requests, which work in normal mode",
                "token PUT refused (HTTP %ld): using token-less requests", r.token_status);
        else
            doctor_add(d, "imds-token", aws ? V_FAIL : V_WARN,
                aws ? "without a token the notice cannot be read where IMDSv2 is required; in "
                      "a container raise the PUT hop limit to 2"
                    : "only needed in hardened mode",
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
    char b1[32], b2[32];
    int64_t w = 0;

    d->window_src[0] = '\0';
    if (strcmp(d->provider, "aws") == 0)
        w = 120000, d->poll_ms = 2000,
        snprintf(d->window_src, sizeof d->window_src, "AWS spot notice");
    else if (strcmp(d->provider, "gcp") == 0)
        w = 30000, d->poll_ms = 500, /* long-poll: the notice arrives at once */
        snprintf(d->window_src, sizeof d->window_src, "GCP preemption");
    else if (strcmp(d->provider, "azure") == 0)
        w = 30000, d->poll_ms = 1000,
        snprintf(d->window_src, sizeof d->window_src, "Azure Preempt event");
    else if (strcmp(d->provider, "aliyun") == 0)
        w = 300000, d->poll_ms = 5000,
        snprintf(d->window_src, sizeof d->window_src, "Alibaba spot notice");
    else if (strcmp(d->provider, "tencent") == 0)
        w = 120000, d->poll_ms = 5000,
        snprintf(d->window_src, sizeof d->window_src, "Tencent spot notice");
    if (k8s && *k8s && (w == 0 || (int64_t)o->grace_ms < w)) {
        w = (int64_t)o->grace_ms, d->poll_ms = 0;
        snprintf(d->window_src, sizeof d->window_src, "Kubernetes grace (--grace)");
    }
    if (slurm && *slurm && (w == 0 || (int64_t)o->lead_ms < w)) {
        w = (int64_t)o->lead_ms, d->poll_ms = 0;
        snprintf(d->window_src, sizeof d->window_src, "SLURM signal lead (--lead)");
    }
    d->window_ms = w;
    ckpt_fmt_duration((uint64_t)w, b1, sizeof b1);
    if (w == 0) {
        if (o->interval_ms)
            doctor_add(d, "window", V_OK, NULL,
                "no notice window: periodic checkpoint requests every %s bound the work lost, "
                DOCTOR_REACH, ckpt_fmt_duration(o->interval_ms, b2, sizeof b2));
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
        const char *note = strcmp(d->provider, "aws") == 0
                               ? "2 minutes, best effort (as little as 39 s has been seen)"
                           : strcmp(d->provider, "gcp") == 0 ? "30 s from notice to power-off"
                           : strcmp(d->provider, "azure") == 0
                               ? "at least 30 s (NotBefore of the event)"
                           : strcmp(d->provider, "aliyun") == 0 ? "about 5 minutes"
                                                                : "about 2 minutes (unconfirmed)";
        doctor_add(d, "window", V_OK, NULL, "%s: %s; estimates below use %s", d->window_src, note, b1);
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
    }
    check_window(d);
}
