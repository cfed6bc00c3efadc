/*
 * doctor/doctor.c -- `ckptrun doctor`: will a checkpoint taken on this instance
 * reach the store before the instance goes away? (docs/doctor.md documents
 * each line and the estimate's formula.)
 *
 * Checks run in order, each in its own file, each printing one line (ok /
 * warn / fail, what was found and, when it is not ok, what to do):
 *   provider, metadata, imds-token, window      doctor/notice.c: where the
 *                                               notice comes from
 *   state                                       doctor/state.c
 *   disk, disk-survival                         doctor/disk.c
 *   store, store-rw, conditional                doctor/store.c: credentials
 *                                               and lease guarantee
 *   changed                                     doctor/changed.c: how much of
 *                                               the state a final save sends
 *                                               (--changed, the run's own
 *                                               checkpoints, else all of it)
 *   codec                                       doctor/codec.c
 *   upload, download                            doctor/throughput.c
 *   estimate-full, estimate-incremental,        doctor/estimate.c: notice ->
 *   lost-work                                   committed, vs window; training
 *                                               lost per preemption
 * doctor.c runs them and prints the summary; doctor/report.c records lines.
 *
 * Bounds. Time: every phase gets a share of --budget (default 30 s); the
 * store's retry budget and stall timeout are lowered to fit (environment
 * variables of this process only), and the throughput probe is sized from a
 * first small transfer so that it ends inside its share. Bytes: at most
 * PROBE_MAX (32 MiB) of throughput objects plus a few small probe objects
 * are written, and at most as much read back, all under RUN/.doctor/ and
 * deleted afterwards. Metadata: two small requests, and none at all when
 * no provider is detected.
 *
 * Credentials are never printed: only where they came from (the store
 * backends fill `cred_source` for that, see store.h).
 *
 * This file: the checks in order, the summary (a line a person reads, or
 * one JSON document), and the clean-up of what the checks wrote.
 */
#include "ckptrun.h"
#include "doctor/changed.h"
#include "doctor/codec.h"
#include "doctor/disk.h"
#include "doctor/estimate.h"
#include "doctor/notice.h"
#include "doctor/report.h"
#include "doctor/state.h"
#include "doctor/store.h"
#include "doctor/throughput.h"
#include "base/fsutil.h"
#include "base/runlog.h"
#include "base/parse.h"
#include "ckpt_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cmd_doctor(struct opts *o)
{
    struct doctor *d = calloc(1, sizeof *d);
    cJSON *root = NULL, *arr, *ej;
    int rc = 0, nv[4] = { 0, 0, 0, 0 };
    char b1[32], b2[32];
    uint64_t budget;

    if (!d) {
        log_error("out of memory");
        rc = EXIT_FAIL_DOCTOR;
        goto out;
    }
    d->o = o;
    /* sizes follow the one convention (rules.h): 7GiB = 7G = 7 x 2^30 */
    if (o->state_bytes && (ckpt__parse_size(o->state_bytes, &d->state_bytes, NULL) != 0 ||
                           d->state_bytes > (uint64_t)1e15)) {
        log_error("--state-bytes '%s' is not a size (e.g. 7GiB, 1.5G, 512M)", o->state_bytes);
        rc = EXIT_USAGE;
        goto out;
    }
    if (o->changed) {
        /* the share of the state a checkpoint changes */
        if (parse_fraction(o->changed, &d->changed) != 0) {
            log_error("--changed '%s' is not a share of the state in (0, 1] (e.g. 2%% or 0.02)",
                      o->changed);
            rc = EXIT_USAGE;
            goto out;
        }
        d->changed_known = 1;
        snprintf(d->changed_src, sizeof d->changed_src, "--changed %s", o->changed);
    }
    if (o->nargs > 0) {
        log_error("doctor takes no arguments (see ckptrun doctor --help)");
        rc = EXIT_USAGE;
        goto out;
    }
    budget = o->budget_ms ? o->budget_ms : DEFAULT_BUDGET_MS;
    d->t0 = ckpt__mono_ms();
    /* Keep a little of the budget for the summary and clean-up. */
    d->deadline = d->t0 + (int64_t)budget - (int64_t)(budget / 20);
    root = cJSON_CreateObject();
    ej = cJSON_CreateObject();
    if (!root || !ej) {
        cJSON_Delete(ej);
        log_error("out of memory");
        rc = EXIT_FAIL_DOCTOR;
        goto out;
    }
    if (!o->json)
        printf("ckptrun doctor: run '%s' in %s, budget %s\n", o->run, o->store,
               ckpt__fmt_duration(budget, b1, sizeof b1));

    check_notice(d);
    check_state(d);
    check_disk(d);
    check_store(d);
    check_changed(d);
    check_codec(d);
    check_throughput(d);
    check_estimate(d, ej);

    /* only where something was written: a store that refused the first
     * write would spend the rest of the budget refusing the listing too */
    if (d->st && d->prefix[0] && d->sent) {
        clean_prefix(d, d->prefix);
        if (strncmp(o->store, "file://", 7) == 0) {
            /* The file backend deletes files, not the directories their
             * keys made; without this the run would show up in `ls`. rmdir
             * removes only what is empty. */
            char p[PATH_MAX];
            snprintf(p, sizeof p, "%s/%s", o->store + 7, d->prefix);
            rmdir(p);
            snprintf(p, sizeof p, "%s/%s/.doctor", o->store + 7, o->run);
            rmdir(p);
            snprintf(p, sizeof p, "%s/%s", o->store + 7, o->run);
            rmdir(p);
        }
    }
    for (int i = 0; i < d->n; i++)
        nv[d->c[i].v]++;
    rc = nv[V_FAIL] ? EXIT_FAIL_DOCTOR : 0;

    cJSON_AddNumberToObject(ej, "state_bytes", (double)d->state_bytes);
    cJSON_AddStringToObject(ej, "state_source", d->state_src);
    cJSON_AddNumberToObject(ej, "window_s", (double)d->window_ms / 1000.0);
    cJSON_AddStringToObject(ej, "window_source", d->window_src);
    cJSON_AddNumberToObject(ej, "notice_poll_s", (double)d->poll_ms / 1000.0);
    if (d->codec_ok) {
        cJSON_AddStringToObject(ej, "codec", o->codec_str ? o->codec_str : "zstd:1");
        cJSON_AddNumberToObject(ej, "ratio", (double)(long long)(d->ratio * 1000 + 0.5) / 1000);
        cJSON_AddNumberToObject(ej, "compress_bps",
                                (double)(long long)((double)d->sample_bytes / d->t_full_s));
    }
    if (d->up_bps > 0)
        cJSON_AddNumberToObject(ej, "upload_bps", (double)(long long)d->up_bps);
    if (d->down_bps > 0)
        cJSON_AddNumberToObject(ej, "download_bps", (double)(long long)d->down_bps);
    if (d->store_ok)
        cJSON_AddNumberToObject(ej, "request_ms", (double)(long long)d->rtt_ms);

    if (o->json) {
        char *s;
        cJSON_AddBoolToObject(root, "ok", rc == 0);
        cJSON_AddStringToObject(root, "provider", d->provider ? d->provider : "none");
        cJSON_AddStringToObject(root, "store", o->store);
        cJSON_AddStringToObject(root, "run", o->run);
        arr = cJSON_AddArrayToObject(root, "checks");
        for (int i = 0; arr && i < d->n; i++) {
            cJSON *c = cJSON_CreateObject();
            if (!c)
                break;
            cJSON_AddStringToObject(c, "name", d->c[i].name);
            cJSON_AddStringToObject(c, "status", doctor_verdict_name(d->c[i].v));
            cJSON_AddStringToObject(c, "message", d->c[i].msg);
            if (d->c[i].advice[0])
                cJSON_AddStringToObject(c, "advice", d->c[i].advice);
            if (d->c[i].prereq[0])
                cJSON_AddStringToObject(c, "prerequisite", d->c[i].prereq);
            cJSON_AddItemToArray(arr, c);
        }
        cJSON_AddItemToObject(root, "estimate", ej);
        ej = NULL;
        cJSON_AddNumberToObject(root, "elapsed_ms", (double)(ckpt__mono_ms() - d->t0));
        cJSON_AddNumberToObject(root, "bytes_sent", (double)d->sent);
        cJSON_AddNumberToObject(root, "bytes_received", (double)d->received);
        s = cJSON_PrintUnformatted(root);
        if (s)
            printf("%s\n", s);
        cJSON_free(s);
    } else {
        printf("doctor: %d ok, %d warn, %d fail, %d skipped in %s; sent %s to the store. %s\n",
               nv[V_OK], nv[V_WARN], nv[V_FAIL], nv[V_SKIP],
               ckpt__fmt_duration((uint64_t)(ckpt__mono_ms() - d->t0), b1, sizeof b1),
               ckpt__fmt_bytes(d->sent, b2, sizeof b2),
               nv[V_FAIL]   ? "Something will not work: fix the fail lines first."
               : nv[V_WARN] ? "Should work; read the warn lines."
                            : "Everything fits.");
    }
    cJSON_Delete(ej);
out:
    if (d) {
        ckpt_store_close(d->st);
        free(d->sample);
        if (d->scratch[0])
            rm_rf(d->scratch);
    }
    cJSON_Delete(root);
    free(d);
    return rc;
}
