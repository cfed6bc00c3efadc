/* doctor/estimate.c -- estimate-full, estimate-incremental and lost-work: from notice to commit,
 * against the window (doctor/estimate.h). */
#include "doctor/estimate.h"
#include "doctor/codec.h"
#include "doctor/report.h"
#include "base/runlog.h"
#include "opts.h"
#include "base/parse.h"
#include "ckpt_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct est {
    double total_s, cpu_s, net_s;
};

/* What the probes cannot know, when the user knows it (docs/doctor.md, "The
 * estimate"): the trainer's step, for which a notice waits (half of one on
 * average), and the upload rate this link sustains, measured otherwise
 * (32 MiB of probe objects in four requests underestimate a fast link:
 * each request's fixed cost weighs on 8 MiB what a save spreads over a
 * 32 MiB pack). Read once; 0 when unset or not a duration / size. */
static double env_step_s(void)
{
    const char *v = getenv("CKPT_DOCTOR_STEP");
    uint64_t ms = 0;
    return v && *v && ckpt__parse_duration_ms(v, &ms) == 0 ? (double)ms / 1000.0 : 0;
}

static double env_upload_bps(void)
{
    const char *v = getenv("CKPT_DOCTOR_UPLOAD_RATE");
    uint64_t b = 0;
    return v && *v && ckpt__parse_size(v, &b, NULL) == 0 ? (double)b : 0;
}

/* Raw bytes the workers compress at once before the first upload can
 * leave: 8 workers x 8 MiB chunks on an object store (the first pack is
 * sealed when its chunks are in, and the workers' first chunks end
 * together), two 4 MiB chunks on a local store; and the raw bytes whose
 * upload follows the last compression: one chunk (the last packs are
 * sealed small and leave together). */
#define FILL_PACKS (64.0 * 1048576)
#define FILL_LOCAL (8.0 * 1048576)
#define LAST_PACKS (8.0 * 1048576)
#define LAST_LOCAL (4.0 * 1048576)

static void estimate(const struct doctor *d, const struct meas *m, double changed,
                     struct est *e)
{
    double scale = (double)d->state_bytes / (double)d->sample_bytes;
    double bytes = changed * (double)d->state_bytes, first, last, body;
    int packs = d->st && ckpt_store_can(d->st, CKPT_STORE_PACKS);
    /* CPU: snapshot + hash of everything, compression of what changed. */
    e->cpu_s = scale * (m->t_same_s + changed * (m->t_full_s - m->t_same_s));
    e->net_s = bytes * m->ratio / d->up_bps;
    /* Compression and upload overlap: the slower one sets the pace, plus
     * the other's share that cannot overlap -- the first chunks, before
     * any upload can start, or the last chunk's upload, after the last
     * compression. */
    first = packs ? FILL_PACKS : FILL_LOCAL;
    last = packs ? LAST_PACKS : LAST_LOCAL;
    if (bytes <= 0)
        body = e->cpu_s;
    else if (e->cpu_s >= e->net_s)
        body = e->cpu_s + e->net_s * (last < bytes ? last : bytes) / bytes;
    else
        body = e->net_s + e->cpu_s * (first < bytes ? first : bytes) / bytes;
    /* Detection, the step in progress, then manifest, HEAD and the run
     * record: a few requests in a row. */
    e->total_s = (double)d->poll_ms / 1000.0 + env_step_s() / 2.0 + body + 4.0 * d->rtt_ms / 1000.0;
}

static void advise(const struct doctor *d, const struct est *e, char *out, size_t cap)
{
    char b[32];
    /* A shorter --interval does not make a final save smaller when the whole
     * state changes between checkpoints (full training): it only bounds
     * what a failed final save loses. */
    if (e->net_s >= e->cpu_s)
        snprintf(out, cap,
                 "upload-bound at %s/s: use a bucket in this instance's region or a faster "
                 "link; keep --interval short " DOCTOR_REACH ", since a final save that does "
                 "not commit falls back to the last periodic one",
                 doctor_mb(d->up_bps, b, sizeof b));
    else
        snprintf(out, cap,
                 "compression-bound on this CPU: try --codec lz4 (or zstd:1) or more cores; "
                 "keep --interval short " DOCTOR_REACH ", since a final save that does not "
                 "commit falls back to the last periodic one");
}

static enum verdict fit(double t, double win)
{
    return win <= 0 ? V_OK : t <= FIT_MARGIN * win ? V_OK : t <= win ? V_WARN : V_FAIL;
}

/* What a preemption costs in training time, given whether the final save
 * fits (final_ok) and how long a periodic save takes to commit (commit_s). */
static void check_lost(struct doctor *d, cJSON *ej, int final_ok, double commit_s)
{
    double iv = (double)d->o->interval_ms / 1000.0;
    char b1[32], b2[32], w[32];
    double avg = iv / 2.0 + commit_s, worst = iv + commit_s;

    ckpt__fmt_duration((uint64_t)d->window_ms, w, sizeof w);
    if (iv > 0) {
        /* preempted at a uniform moment of an interval: the last periodic
         * checkpoint is I/2 old on average, one interval when its
         * successor had not committed yet (probability commit/I) */
        cJSON_AddNumberToObject(ej, "interval_s", iv);
        cJSON_AddNumberToObject(ej, "lost_if_final_fails_s", doctor_rnd1(avg));
        cJSON_AddNumberToObject(ej, "lost_if_final_fails_max_s", doctor_rnd1(worst));
    }
    ckpt__fmt_duration((uint64_t)(avg * 1000), b1, sizeof b1);
    ckpt__fmt_duration((uint64_t)(worst * 1000), b2, sizeof b2);
    if (d->window_ms > 0 && final_ok) {
        cJSON_AddNumberToObject(ej, "lost_per_preemption_s", 0);
        if (iv > 0)
            doctor_add(d, "lost-work", V_OK, NULL, "a preemption loses almost nothing: the final "
                "checkpoint commits inside the %s window; if it fails, the run resumes from the "
                "last periodic one (every %.0f s): %s lost on average, at most %s", w, iv, b1, b2);
        else
            doctor_add(d, "lost-work", V_OK, "set --interval (e.g. 30m) " DOCTOR_REACH " to "
                "bound what a failed final save loses", "a preemption loses almost nothing: the final checkpoint commits "
                "inside the %s window; if it fails, everything since the trainer's own last "
                "save is lost (no --interval)", w);
    } else if (iv > 0) {
        cJSON_AddNumberToObject(ej, "lost_per_preemption_s", doctor_rnd1(avg));
        doctor_add(d, "lost-work",
            d->window_ms > 0 ? V_WARN : V_OK,
            "shorten --interval (it works " DOCTOR_REACH ") to lose less, or make the final "
            "save fit (see estimate-full)",
            "each %s loses %s of training on average, at most %s: %s, so the run resumes "
            "from the last periodic checkpoint (every %.0f s, ~%.1f s to commit)",
            d->window_ms > 0 ? "preemption" : "stop or crash", b1, b2,
            d->window_ms > 0 ? "the final checkpoint does not fit the window"
                             : "no notice arrives before the end", iv, commit_s);
    } else {
        doctor_add(d, "lost-work", d->window_ms > 0 ? V_FAIL : V_WARN,
            "set --interval (e.g. 30m) " DOCTOR_REACH ": a preemption then loses at most one "
            "interval plus a commit", "each %s loses everything since the trainer's own last save: %s, and no "
            "--interval", d->window_ms > 0 ? "preemption" : "stop or crash",
            d->window_ms > 0 ? "the final checkpoint does not fit the window"
                             : "no notice arrives before the end");
    }
}

void check_estimate(struct doctor *d, cJSON *ej)
{
    struct est full, fin, periodic;
    struct meas m;
    char b1[32], adv[600], w[32], fits_why[400] = "";
    double win = (double)d->window_ms / 1000.0;
    enum verdict vf, vi;
    int small = d->changed_known && d->changed <= CHANGED_SMALL, final_ok;

    if (env_upload_bps() > 0) {
        /* the rate this link sustains, measured otherwise, over the probe's */
        d->up_bps = env_upload_bps();
        cJSON_AddStringToObject(ej, "upload_source", "CKPT_DOCTOR_UPLOAD_RATE");
    }
    if (env_step_s() > 0)
        cJSON_AddNumberToObject(ej, "step_s", env_step_s());
    if (!d->codec_ok || d->up_bps <= 0 || !d->sample_bytes) {
        const struct doctor_check *up = doctor_find(d, "upload");
        if (d->codec_ok && up && (up->v == V_FAIL || (up->v == V_SKIP && up->prereq[0]))) {
            /* the store failed: that line says what to do; an estimate
             * needs the upload rate */
            doctor_skip(d, "estimate-full", "upload");
        } else {
            doctor_add(d, "estimate-full", V_FAIL,
                       d->store_ok ? "rerun with a larger --budget" : "make the store work first",
                       "no estimate: %s",
                       !d->codec_ok ? "the codec was not measured" : "the upload was not measured");
        }
        doctor_skip(d, "estimate-incremental", "estimate-full");
        doctor_skip(d, "lost-work", "estimate-full");
        goto out;
    }
    m.t_full_s = d->t_full_s;
    m.t_same_s = d->t_same_s;
    m.ratio = d->ratio;
    estimate(d, &m, 1.0, &full);
    estimate(d, &m, d->changed, &fin);
    ckpt__fmt_duration((uint64_t)d->window_ms, w, sizeof w);
    vf = fit(full.total_s, win);
    vi = fit(fin.total_s, win);
    /* The final save of a stop sends what changed since the last commit.
     * In full training that is everything, however often the trainer saved
     * before: a full checkpoint that does not fit fails. Only a state known
     * to be mostly unchanged between checkpoints (frozen layers, LoRA:
     * --changed, or measured on the run) makes the smaller save the one
     * that counts; the full one is then a warning. */
    if (vf == V_FAIL && small && vi != V_FAIL) {
        vf = V_WARN;
        snprintf(fits_why, sizeof fits_why, "; the final save still fits: only %.1f%% changes "
                 "between checkpoints (%s)", d->changed * 100.0, d->changed_src);
    }
    final_ok = small ? vi != V_FAIL : fit(full.total_s, win) != V_FAIL;
    advise(d, &full, adv, sizeof adv);
    if (vf != V_OK && full.cpu_s > full.net_s && d->o->codec != CKPT_CODEC_LZ4 &&
        d->sample && doctor_left_ms(d) > 2000) {
        /* Compression-bound: measure the faster codec on the same sample
         * rather than guess. */
        struct meas l;
        struct est le;
        const char *what;
        size_t n = strlen(adv);
        if (measure(d, "doctor-lz4", CKPT_CODEC_LZ4, 0, &l, &what) == CKPT_OK) {
            estimate(d, &l, 1.0, &le);
            snprintf(adv + n, sizeof adv - n, " (measured here: --codec lz4 takes ~%.1f s, "
                     "%.0f%% stored)", le.total_s, l.ratio * 100.0);
            cJSON_AddNumberToObject(ej, "full_lz4_s", doctor_rnd1(le.total_s));
        }
    }
    doctor_add(
        d, "estimate-full", vf, adv,
        "full checkpoint of %s: ~%.1f s from notice to commit (compress %.1f s, upload %.1f s "
        "of %.0f%% stored, overlapped)%s%s%s%s",
        ckpt__fmt_bytes(d->state_bytes, b1, sizeof b1), full.total_s, full.cpu_s, full.net_s,
        d->ratio * 100.0, win > 0 ? "; window " : "; no notice window", win > 0 ? w : "",
        vf == V_OK           ? ""
        : full.total_s > win ? ": does NOT fit"
                             : ": tight",
        fits_why);
    if (!small) {
        doctor_add(d, "estimate-incremental", V_SKIP, NULL, "not counted on: %s, so the final save "
            "is a full one", d->changed_src);
    } else {
        advise(d, &fin, adv, sizeof adv);
        doctor_add(d, "estimate-incremental", vi, adv,
            "final save with %.1f%% changed: ~%.1f s (snapshot+hash %.1f s, upload %.1f s)%s%s%s",
            d->changed * 100.0, fin.total_s, fin.cpu_s, fin.net_s,
            win > 0 ? "; window " : "", win > 0 ? w : "",
            vi == V_OK ? "" : vi == V_WARN ? ": tight" : ": does NOT fit");
    }
    /* a periodic save of the same size, without the notice latency */
    periodic = small ? fin : full;
    periodic.total_s -= (double)d->poll_ms / 1000.0;
    check_lost(d, ej, final_ok, periodic.total_s);
    cJSON_AddNumberToObject(ej, "full_s", doctor_rnd1(full.total_s));
    cJSON_AddNumberToObject(ej, "full_compress_s", doctor_rnd1(full.cpu_s));
    cJSON_AddNumberToObject(ej, "full_upload_s", doctor_rnd1(full.net_s));
    cJSON_AddNumberToObject(ej, "changed", (double)(int64_t)(d->changed * 10000) / 10000);
    cJSON_AddStringToObject(ej, "changed_source", d->changed_src);
    cJSON_AddNumberToObject(ej, "incremental_s", doctor_rnd1(fin.total_s));
    cJSON_AddNumberToObject(ej, "incremental_changed", (double)(int64_t)(d->changed * 10000) / 10000);
    cJSON_AddNumberToObject(ej, "final_s", doctor_rnd1(small ? fin.total_s : full.total_s));
    cJSON_AddBoolToObject(ej, "fits_full", win <= 0 || full.total_s <= win);
    cJSON_AddBoolToObject(ej, "fits_incremental", win <= 0 || fin.total_s <= win);
    cJSON_AddBoolToObject(ej, "fits_final", win <= 0 || final_ok);
    if (d->down_bps > 0)
        cJSON_AddNumberToObject(ej, "restore_download_s",
                                doctor_rnd1((double)d->state_bytes * d->ratio / d->down_bps));
out:
    return;
}
