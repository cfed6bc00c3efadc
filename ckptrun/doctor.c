/*
 * doctor.c -- `ckptrun doctor`: will a checkpoint taken on this instance
 * reach the store before the instance goes away?
 *
 * Checks run in order, each printing one line (ok / warn / fail, what was
 * found and, when it is not ok, what to do):
 *   provider, metadata, imds-token, window      where the notice comes from
 *   state, disk, disk-survival                  the local side
 *   store, store-rw, conditional                credentials and lease guarantee
 *   changed                                     how much of the state a final save
 *                                               sends (--changed, the run's own
 *                                               checkpoints, else all of it)
 *   codec, upload, download                     measured on this CPU and link
 *   estimate-full, estimate-incremental         notice -> committed, vs window
 *   lost-work                                   training lost per preemption
 * docs/doctor.md documents each line and the estimate's formula.
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
 */
#include "ckptrun.h"
#include "log.h"
#include "parse.h"
#include "ckpt_store.h"

#if defined(CKPT_WITH_S3) || defined(CKPT_WITH_AZURE)
#include "notice.h"
#define HAVE_NOTICE 1 /* the notice module is linked only with libcurl */
#endif

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define MIB (1024.0 * 1024.0)
#define PROBE_MAX (32u << 20)       /* throughput probe bound, each way */
#define PROBE_OBJ (4u << 20)        /* one chunk, as real commits write: file:// */
#define PROBE_OBJ_REMOTE (8u << 20) /* stores with packs: a chunk (a save sends 32 MiB
                                       packs, 4 at once; 4 x 8 MiB keeps the
                                       probe within PROBE_MAX) */
#define SAMPLE_MAX (64u << 20)      /* codec sample */
#define SAMPLE_MIN (4u << 20)
#define DEFAULT_BUDGET_MS 30000
#define DEFAULT_STATE (1ull << 30)  /* when nothing says how big the state is */
#define CHANGED_SMALL 0.5           /* "mostly unchanged": under half changes */
#define FIT_MARGIN 0.75             /* "fits" = under 75% of the window */
#define MAX_CHECKS 24
#define MAX_THREADS 8
#define EXIT_FAIL_DOCTOR 1          /* something will not work */

enum verdict { V_OK = 0, V_WARN = 1, V_FAIL = 2, V_SKIP = 3 };
static const char *const verdict_name[] = { "ok", "warn", "fail", "skip" };

struct check {
    char name[24];
    enum verdict v;
    char msg[600];
    char advice[600];
};

struct doctor {
    struct opts *o;
    int64_t t0, deadline;           /* monotonic ms */
    struct check c[MAX_CHECKS];
    int n;

    /* notice side */
    const char *provider;           /* "aws".. or "none" */
    int64_t window_ms;              /* 0 = no notice window applies */
    char window_src[80];
    int64_t poll_ms;                /* notice detection latency */

    /* state */
    uint64_t state_bytes;
    char state_src[300];
    char sample_dir[PATH_MAX];      /* newest entry of --dir to sample, or "" */

    /* codec (measured on the sample) */
    int codec_ok;
    char scratch[PATH_MAX];         /* scratch file:// store, removed at the end */
    uint8_t *sample;
    size_t sample_bytes, bf16_bytes;
    double ratio;                   /* stored / raw */
    double t_full_s, t_same_s;      /* sample: all new; nothing changed */

    /* what a final save sends: the share of the state that changes
     * between checkpoints (1 = all of it, as in full training) */
    double changed;
    int changed_known;              /* given (--changed) or measured */
    char changed_src[300];

    /* store */
    struct ckpt_store *st;
    char prefix[400];               /* RUN/.doctor/HOST-PID/ */
    int store_ok;
    double rtt_ms;
    double up_bps, down_bps;
    uint64_t sent, received;
};

static int64_t mono(void)
{
    return mono_ms();
}

static int64_t left_ms(const struct doctor *d)
{
    int64_t l = d->deadline - mono();
    return l > 0 ? l : 0;
}

/* One decimal, for JSON. */
static double rnd1(double x)
{
    return (double)(long long)(x * 10 + 0.5) / 10;
}

static const char *mb(double bytes, char *buf, size_t n)
{
    return fmt_bytes(bytes > 0 ? (uint64_t)bytes : 0, buf, n);
}

/* Records a check; human mode prints it at once so a slow phase shows
 * what was already found. */
static void add(struct doctor *d, const char *name, enum verdict v, const char *advice,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void add(struct doctor *d, const char *name, enum verdict v, const char *advice,
                const char *fmt, ...)
{
    struct check *c;
    va_list ap;

    if (d->n >= MAX_CHECKS)
        return;
    c = &d->c[d->n++];
    snprintf(c->name, sizeof c->name, "%s", name);
    c->v = v;
    va_start(ap, fmt);
    vsnprintf(c->msg, sizeof c->msg, fmt, ap);
    va_end(ap);
    snprintf(c->advice, sizeof c->advice, "%s", advice && v != V_OK ? advice : "");
    if (!d->o->json) {
        printf("%-4s  %-20s %s\n", verdict_name[v], c->name, c->msg);
        if (c->advice[0])
            printf("      %-20s -> %s\n", "", c->advice);
        fflush(stdout);
    }
}

/* ---- notice --------------------------------------------------------------- */

static void check_notice(struct doctor *d)
{
    struct opts *o = d->o;
    const char *forced = o->notice && *o->notice && strcmp(o->notice, "auto") != 0 ? o->notice
                                                                                    : NULL;
    const char *k8s = getenv("KUBERNETES_SERVICE_HOST");
    const char *slurm = getenv("SLURM_JOB_ID");
    char b1[32], b2[32];
    int64_t w = 0;
#ifdef HAVE_NOTICE
    struct notice_config nc = NOTICE_CONFIG_INIT;
    struct notice_probe_result r;
    long tmo = left_ms(d) / 10;

    nc.provider = o->notice ? o->notice : "auto";
    nc.metadata_url = o->metadata_url;
    nc.dmi_dir = getenv("CKPT_DMI_DIR"); /* the same test hook as the poller */
    /* IMDS and its peers answer in milliseconds; a slow one is a failure. */
    if (tmo > 2000)
        tmo = 2000;
    if (tmo < 300)
        tmo = 300;
    if (notice_probe(&nc, tmo, &r) != 0) {
        add(d, "provider", V_FAIL, "use --notice auto|aws|gcp|azure|aliyun|tencent|none",
            "unknown provider '%s'", nc.provider);
        d->provider = "none";
        goto window;
    }
    d->provider = r.provider;
    if (strcmp(r.provider, "none") == 0) {
        if (forced)
            add(d, "provider", V_OK, NULL, "none (%s): no metadata notice is polled", r.how);
        else
            add(d, "provider", V_WARN,
                "on a cloud VM whose DMI is hidden (some containers), force the provider with "
                "--notice aws|gcp|azure|aliyun|tencent",
                "none detected (%s): no metadata notice will arrive", r.how);
        add(d, "metadata", V_SKIP, NULL, "not contacted: no provider");
        goto window;
    }
    add(d, "provider", V_OK, NULL, "%s (%s)", r.provider, r.how);
    if (!r.reachable) {
        int azure_slow = strcmp(r.provider, "azure") == 0 && strstr(r.detail, "imed out");
        add(d, "metadata", azure_slow ? V_WARN : V_FAIL,
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
        add(d, "metadata", V_WARN,
            "this instance is about to be reclaimed: do not start a long run on it",
            "%s: a notice is pending NOW (%s)", r.base, r.detail);
    } else if (r.status == 200 || r.status == 404) {
        add(d, "metadata", V_OK, NULL, "%s answered HTTP %ld in %ld ms (no notice pending)",
            r.base, r.status, r.latency_ms);
    } else {
        add(d, "metadata", V_FAIL,
            "the notice path refuses ckptrun's requests: check --metadata-url and any "
            "metadata proxy in between",
            "%s answered HTTP %ld to the notice path", r.base, r.status);
    }
    if (strcmp(r.provider, "aws") == 0 || strcmp(r.provider, "aliyun") == 0) {
        int aws = r.provider[1] == 'w';
        if (!r.reachable && r.token != 1)
            add(d, "imds-token", V_SKIP, NULL, "not judged: the endpoint is unreachable");
        else if (r.token == 1)
            add(d, "imds-token", V_OK, NULL, "%s token obtained",
                aws ? "IMDSv2 session" : "hardened-mode metadata");
        else if (r.token == 0)
            add(d, "imds-token", V_WARN,
                aws ? "IMDSv2 is off here: ckptrun falls back to IMDSv1, which works; enable "
                      "IMDSv2 (http-tokens required) when you can"
                    : "ckptrun uses plain requests, which work in normal mode",
                "token PUT refused (HTTP %ld): using token-less requests", r.token_status);
        else
            add(d, "imds-token", aws ? V_FAIL : V_WARN,
                aws ? "without a token the notice cannot be read where IMDSv2 is required; in "
                      "a container raise the PUT hop limit to 2"
                    : "only needed in hardened mode",
                "token PUT failed (%s)",
                r.token_status ? "bad reply" : r.detail[0] ? r.detail : "no reply");
    }
#else
    d->provider = "none";
    add(d, "provider", forced && strcmp(forced, "none") != 0 ? V_FAIL : V_WARN,
        "rebuild with libcurl for cloud notices, and rely on --interval meanwhile",
        "this build has no cloud-notice support (no libcurl)");
#endif
#ifdef HAVE_NOTICE
window:
#endif
    /* The window that applies: the provider's, or the scheduler's, the
     * tighter when both are present. */
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
    fmt_duration((uint64_t)w, b1, sizeof b1);
    if (w == 0) {
        if (o->interval_ms)
            add(d, "window", V_OK, NULL,
                "no notice window: periodic checkpoints every %s bound the work lost",
                fmt_duration(o->interval_ms, b2, sizeof b2));
        else
            add(d, "window", V_WARN,
                "set --interval (e.g. 30m): the work lost in a stop is then at most one interval",
                "no notice window and no --interval: a stop loses everything since the last "
                "checkpoint the trainer wrote itself");
    } else if (strstr(d->window_src, "Kubernetes")) {
        add(d, "window", V_OK, NULL,
            "%s: SIGTERM, then SIGKILL after terminationGracePeriodSeconds; ckptrun assumes %s "
            "(set --grace to the pod's grace period minus a few seconds)", d->window_src, b1);
    } else if (strstr(d->window_src, "SLURM")) {
        add(d, "window", V_OK, NULL,
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
        add(d, "window", V_OK, NULL, "%s: %s; estimates below use %s", d->window_src, note, b1);
    }
}

/* ---- state size and local disk ---------------------------------------------- */

/* Sum of regular files under path (bounded walk). */
static uint64_t tree_bytes(const char *path, int depth, unsigned *files)
{
    struct stat sb;
    uint64_t sum = 0;
    DIR *dir;
    struct dirent *e;
    char p[PATH_MAX];

    if (stat(path, &sb) != 0)
        return 0;
    if (S_ISREG(sb.st_mode)) {
        (*files)++;
        return (uint64_t)sb.st_size;
    }
    if (!S_ISDIR(sb.st_mode) || depth > 16 || *files > 100000)
        return 0;
    dir = opendir(path);
    if (!dir)
        return 0;
    while ((e = readdir(dir))) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
            continue;
        if ((size_t)snprintf(p, sizeof p, "%s/%s", path, e->d_name) >= sizeof p)
            continue;
        sum += tree_bytes(p, depth + 1, files);
    }
    closedir(dir);
    return sum;
}

static void check_state(struct doctor *d)
{
    struct opts *o = d->o;
    DIR *dir = NULL;
    struct dirent *e;
    struct stat sb;
    time_t newest = 0;
    char best[PATH_MAX] = "", p[PATH_MAX], b1[32];
    unsigned files = 0;

    if (o->state_bytes) {
        /* parsed in cmd_doctor */
        snprintf(d->state_src, sizeof d->state_src, "--state-bytes, synthetic fp32/bf16 weights");
        add(d, "state", V_OK, NULL, "%s (%s)", fmt_bytes(d->state_bytes, b1, sizeof b1),
            d->state_src);
        goto out;
    }
    dir = opendir(o->dir);
    while (dir && (e = readdir(dir))) {
        if (e->d_name[0] == '.' || name_is_temporary(e->d_name))
            continue;
        if ((size_t)snprintf(p, sizeof p, "%s/%s", o->dir, e->d_name) >= sizeof p)
            continue;
        if (stat(p, &sb) == 0 && sb.st_mtime >= newest) {
            newest = sb.st_mtime;
            snprintf(best, sizeof best, "%s", p);
        }
    }
    if (dir)
        closedir(dir);
    if (best[0])
        d->state_bytes = tree_bytes(best, 0, &files);
    if (d->state_bytes) {
        snprintf(d->sample_dir, sizeof d->sample_dir, "%s", best);
        snprintf(d->state_src, sizeof d->state_src, "newest entry %.200s, %u files", best, files);
        add(d, "state", V_OK, NULL, "%s (%s)", fmt_bytes(d->state_bytes, b1, sizeof b1),
            d->state_src);
    } else {
        d->state_bytes = DEFAULT_STATE;
        snprintf(d->state_src, sizeof d->state_src, "assumed, synthetic fp32/bf16 weights");
        add(d, "state", V_WARN,
            "pass --state-bytes SIZE (e.g. 14GiB: parameters x 2 for bf16 weights, + x 12 "
            "with fp32 Adam state) or --dir with a checkpoint in it",
            "no checkpoint in %s: assuming %s", o->dir,
            fmt_bytes(d->state_bytes, b1, sizeof b1));
    }
out:
    return;
}

/* The mount holding `path` from /proc/self/mountinfo: mount point, type and
 * source. @return 0 or -1. */
static int mount_of(const char *path, char *mnt, size_t mcap, char *type, size_t tcap,
                    char *src, size_t scap)
{
    FILE *f = fopen("/proc/self/mountinfo", "r");
    char line[4096], m[PATH_MAX], t[64], s[PATH_MAX];
    size_t best = 0;
    int rc = -1;

    if (!f)
        return -1;
    while (fgets(line, sizeof line, f)) {
        char *dash = strstr(line, " - ");
        size_t n;
        /* fields: id parent maj:min root mountpoint ... - type source opts */
        if (!dash || sscanf(line, "%*s %*s %*s %*s %4095s", m) != 1 ||
            sscanf(dash + 3, "%63s %4095s", t, s) != 2)
            continue;
        n = strlen(m);
        if (strncmp(path, m, n) != 0 || (n > 1 && path[n] != '/' && path[n] != '\0'))
            continue;
        if (n >= best) { /* later mounts over the same point win */
            best = n;
            snprintf(mnt, mcap, "%s", m);
            snprintf(type, tcap, "%s", t);
            snprintf(src, scap, "%s", s);
            rc = 0;
        }
    }
    fclose(f);
    return rc;
}

/* "nvme1n1p2" -> model of nvme1n1 from sysfs, "" if unknown. */
static void nvme_model(const char *src, char *model, size_t cap)
{
    char dev[64], p[160];
    const char *b = strrchr(src, '/');
    size_t n;
    int fd;
    ssize_t r;

    model[0] = '\0';
    b = b ? b + 1 : src;
    if (strncmp(b, "nvme", 4) != 0)
        return;
    snprintf(dev, sizeof dev, "%.60s", b);
    n = strlen(dev);
    /* strip a partition suffix "pN" after "nvmeXnY" */
    while (n > 0 && dev[n - 1] >= '0' && dev[n - 1] <= '9')
        n--;
    if (n > 0 && dev[n - 1] == 'p' && strchr(dev, 'n') != &dev[n - 1])
        dev[n - 1] = '\0';
    snprintf(p, sizeof p, "/sys/class/block/%s/device/model", dev);
    fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    r = read(fd, model, cap - 1);
    close(fd);
    while (r > 0 && (model[r - 1] == '\n' || model[r - 1] == ' '))
        r--;
    model[r > 0 ? r : 0] = '\0';
}

static void check_disk(struct doctor *d)
{
    char path[PATH_MAX], real[PATH_MAX], mnt[PATH_MAX] = "?", type[64] = "?", src[PATH_MAX] = "";
    char b1[32], b2[32], model[128];
    struct statvfs vs;
    uint64_t avail, need = d->state_bytes;
    const char *ov = getenv("CKPT_DOCTOR_DISK_FREE");
    char *slash;

    /* CKPT_DIR may not exist yet (ckptrun creates it): use its nearest
     * existing ancestor, which is where it will be created. */
    snprintf(path, sizeof path, "%s", d->o->dir);
    while (access(path, F_OK) != 0) {
        slash = strrchr(path, '/');
        if (!slash) {
            snprintf(path, sizeof path, ".");
            break;
        }
        if (slash == path) {
            path[1] = '\0';
            break;
        }
        *slash = '\0';
    }
    if (!realpath(path, real))
        snprintf(real, sizeof real, "%s", path);
    if (statvfs(real, &vs) != 0) {
        add(d, "disk", V_FAIL, "check --dir / CKPT_DIR", "cannot stat %s: %s", real,
            strerror(errno));
        goto out;
    }
    avail = (uint64_t)vs.f_bavail * vs.f_frsize;
    /* Test hook (docs/doctor.md): pretend the filesystem has this much free. */
    if (ov && *ov)
        parse_size(ov, &avail, NULL);
    mount_of(real, mnt, sizeof mnt, type, sizeof type, src, sizeof src);
    fmt_bytes(avail, b1, sizeof b1);
    fmt_bytes(need, b2, sizeof b2);
    if (avail < need)
        add(d, "disk", V_FAIL,
            "free space there, or point --dir (CKPT_DIR) at a larger filesystem: the trainer "
            "cannot write its checkpoint, and restore needs the same room",
            "%s free on %s (%s) for %s, a checkpoint needs %s", b1, mnt, type, d->o->dir, b2);
    else if (avail < 2 * need)
        add(d, "disk", V_WARN,
            "trainers that write the next checkpoint before deleting the previous need twice "
            "the size: free space or keep fewer local checkpoints",
            "%s free on %s (%s): room for one checkpoint of %s, not two", b1, mnt, type, b2);
    else
        add(d, "disk", V_OK, NULL, "%s free on %s (%s), checkpoint %s", b1, mnt, type, b2);

    nvme_model(src, model, sizeof model);
    if (strcmp(type, "tmpfs") == 0 || strcmp(type, "ramfs") == 0)
        add(d, "disk-survival", V_OK, NULL,
            "%s is in memory (%s): lost at reboot and with the instance, and it uses RAM; only "
            "the store survives", mnt, type);
    else if (strcmp(type, "overlay") == 0)
        add(d, "disk-survival", V_OK, NULL,
            "%s is a container's overlay filesystem: lost with the container unless it is a "
            "volume; only the store survives", mnt);
    else if (strstr(model, "Instance Storage"))
        add(d, "disk-survival", V_OK, NULL,
            "%s is instance-store NVMe (%s): lost when the instance stops; only the store "
            "survives", mnt, model);
    else if (strcmp(d->provider, "azure") == 0 &&
             (strcmp(mnt, "/mnt") == 0 || strcmp(mnt, "/mnt/resource") == 0))
        add(d, "disk-survival", V_OK, NULL,
            "%s is Azure's temporary resource disk: lost when the VM is deallocated; only the "
            "store survives", mnt);
    else
        add(d, "disk-survival", V_OK, NULL,
            "cannot tell whether %s (%s%s%s) outlives the instance: count on the store only",
            mnt, type, src[0] ? " on " : "", src);
out:
    return;
}

/* ---- codec -------------------------------------------------------------------- */

/* Weight-like values: roughly normal, sd 0.02 (sum of 4 uniforms). */
static float weightish(uint64_t *s)
{
    float sum = 0;
    for (int i = 0; i < 4; i++) {
        *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
        sum += (float)(*s >> 40) / (float)(1ull << 24) - 0.5f;
    }
    return sum * 0.035f;
}

/* Fills the sample: from the newest --dir entry, else synthetic (a quarter
 * bf16 weights, the rest fp32 master weights and optimizer state, the usual
 * mixed-precision layout). *nf32 = bytes at the end that are fp32. */
static size_t fill_sample(struct doctor *d, uint8_t *buf, size_t cap, size_t *bf16_bytes)
{
    size_t got = 0;
    uint64_t seed = 0x9e3779b97f4a7c15ull;

    *bf16_bytes = 0;
    if (d->sample_dir[0]) {
        /* Read evenly from the entry's files: a piece of each, in order. */
        char *stack[64];
        int sp = 0;
        stack[sp++] = strdup(d->sample_dir);
        while (sp > 0 && got < cap) {
            char *p = stack[--sp];
            struct stat sb;
            if (p && stat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) {
                DIR *dir = opendir(p);
                struct dirent *e;
                while (dir && (e = readdir(dir)) && sp < 64) {
                    char *q;
                    if (e->d_name[0] == '.')
                        continue;
                    if (asprintf(&q, "%s/%s", p, e->d_name) >= 0)
                        stack[sp++] = q;
                }
                if (dir)
                    closedir(dir);
            } else if (p) {
                int fd = open(p, O_RDONLY | O_CLOEXEC);
                size_t want = cap - got;
                ssize_t r;
                if (want > cap / 4 && cap >= SAMPLE_MIN)
                    want = cap / 4; /* leave room for other files */
                while (fd >= 0 && want > 0 && (r = read(fd, buf + got, want)) > 0)
                    got += (size_t)r, want -= (size_t)r;
                if (fd >= 0)
                    close(fd);
            }
            free(p);
        }
        while (sp > 0)
            free(stack[--sp]);
        if (got > 0)
            return got;
    }
    *bf16_bytes = (cap / 4) & ~(size_t)7;
    for (size_t i = 0; i + 2 <= *bf16_bytes; i += 2) {
        float f = weightish(&seed);
        uint32_t u;
        memcpy(&u, &f, 4);
        u >>= 16;
        buf[i] = (uint8_t)u, buf[i + 1] = (uint8_t)(u >> 8);
    }
    for (size_t i = *bf16_bytes; i + 4 <= cap; i += 4) {
        float f = weightish(&seed);
        memcpy(buf + i, &f, 4);
    }
    return cap & ~(size_t)3;
}

static int newest_info(void *user, const struct ckpt_info *info)
{
    *(struct ckpt_info *)user = *info;
    return 1;
}

/* Up to 8 checkpoints, newest first (check_changed). */
static int newest_rows(void *user, const struct ckpt_info *info)
{
    struct { struct ckpt_info *v; unsigned n; } *c = user;
    c->v[c->n++] = *info;
    return c->n >= 8;
}

static void rm_tree(const char *path)
{
    DIR *dir = opendir(path);
    struct dirent *e;
    char p[PATH_MAX];
    while (dir && (e = readdir(dir))) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
            continue;
        if ((size_t)snprintf(p, sizeof p, "%s/%s", path, e->d_name) < sizeof p &&
            unlink(p) != 0)
            rm_tree(p);
    }
    if (dir)
        closedir(dir);
    rmdir(path);
}

struct meas {
    double t_full_s, t_same_s, ratio;
};

/* Two small saves of the sample through the public API to a scratch
 * file:// store (run RUN_NAME): everything new, then nothing changed.
 * @return CKPT_OK and *m, or the failing status (*what says which step). */
static ckpt_status measure(struct doctor *d, const char *run_name, ckpt_codec codec, int level,
                           struct meas *m, const char **what)
{
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *ctx = NULL;
    struct ckpt_info info;
    char url[PATH_MAX + 16];
    ckpt_status st;
    int64_t t;

    snprintf(url, sizeof url, "file://%s", d->scratch);
    cfg.store = url;
    cfg.run = run_name;
    cfg.codec = codec;
    cfg.codec_level = level;
    cfg.no_control = 1;
    cfg.keep = 2;
    cfg.log_fn = log_lib;
    cfg.log_level = log_lib_level();
    *what = "set-up";
    if ((st = ckpt_open(&cfg, &ctx)) != CKPT_OK ||
        (d->bf16_bytes &&
         (st = ckpt_protect_ex(ctx, "bf16", d->sample, d->bf16_bytes, CKPT_ELEM_F16)) != CKPT_OK) ||
        (st = ckpt_protect_ex(ctx, "data", d->sample + d->bf16_bytes,
                              d->sample_bytes - d->bf16_bytes,
                              d->bf16_bytes ? CKPT_ELEM_F32 : CKPT_ELEM_BYTES)) != CKPT_OK)
        goto out;
    *what = "scratch save";
    t = mono();
    if ((st = ckpt_save(ctx, 1)) != CKPT_OK || (st = ckpt_wait(ctx)) != CKPT_OK)
        goto out;
    m->t_full_s = (double)(mono() - t) / 1000.0;
    t = mono();
    if ((st = ckpt_save(ctx, 2)) != CKPT_OK || (st = ckpt_wait(ctx)) != CKPT_OK)
        goto out;
    m->t_same_s = (double)(mono() - t) / 1000.0;
    *what = "read-back";
    memset(&info, 0, sizeof info);
    if ((st = ckpt_list(ctx, newest_info, &info)) != CKPT_OK)
        goto out;
    if (info.step != 2 || !info.raw_bytes) {
        st = CKPT_E_CORRUPT;
        goto out;
    }
    m->ratio = (double)info.stored_bytes / (double)info.raw_bytes;
    if (m->t_full_s < 0.001)
        m->t_full_s = 0.001;
    if (m->t_same_s > m->t_full_s)
        m->t_same_s = m->t_full_s;
out:
    ckpt_close(ctx);
    return st;
}

/* The sample lives in memory (/dev/shm when writable) until the end, so the
 * estimate can measure another codec on the same bytes. */
static void check_codec(struct doctor *d)
{
    char b1[32], b2[32], b3[32];
    const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
    size_t cap;
    ckpt_status st;
    const char *codec = d->o->codec_str ? d->o->codec_str : "zstd:1", *what = "";
    struct meas m;

    cap = d->state_bytes < SAMPLE_MAX ? (size_t)d->state_bytes : SAMPLE_MAX;
    if (cap < SAMPLE_MIN)
        cap = SAMPLE_MIN;
    if (left_ms(d) < 8000)
        cap = SAMPLE_MIN; /* little budget left: a small sample still says something */
    snprintf(d->scratch, sizeof d->scratch, "%s/ckpt-doctor-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(d->scratch)) {
        d->scratch[0] = '\0';
        add(d, "codec", V_WARN, "set TMPDIR to a writable directory",
            "cannot create a scratch directory: %s", strerror(errno));
        goto out;
    }
    d->sample = malloc(cap);
    if (!d->sample) {
        add(d, "codec", V_WARN, NULL, "out of memory for a %zu-byte sample", cap);
        goto out;
    }
    d->sample_bytes = fill_sample(d, d->sample, cap, &d->bf16_bytes);
    st = measure(d, "doctor", d->o->codec, d->o->codec_level, &m, &what);
    if (st != CKPT_OK) {
        add(d, "codec", V_WARN, NULL, "codec measurement failed (%s): %s", what,
            ckpt_strerror(st));
        goto out;
    }
    d->t_full_s = m.t_full_s;
    d->t_same_s = m.t_same_s;
    d->ratio = m.ratio;
    d->codec_ok = 1;
    add(d, "codec", V_OK, NULL,
        "%s on this CPU: %s/s, stored %.0f%% of the raw bytes (%s sample, %s); unchanged "
        "data %s/s", codec, mb((double)d->sample_bytes / d->t_full_s, b1, sizeof b1),
        d->ratio * 100.0, fmt_bytes(d->sample_bytes, b2, sizeof b2),
        d->sample_dir[0] ? "from --dir" : "synthetic fp32/bf16",
        mb((double)d->sample_bytes / (d->t_same_s > 0.0005 ? d->t_same_s : 0.0005), b3,
           sizeof b3));
out:
    return;
}

/* ---- store ---------------------------------------------------------------------- */

static const char *store_advice(ckpt_status st)
{
    switch (st) {
    case CKPT_E_AUTH:
        return "fix the credentials: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE or "
               "the instance role (s3://, gs://), AZURE_STORAGE_CONNECTION_STRING or "
               "AZURE_STORAGE_ACCOUNT + KEY/SAS (az://); see docs/stores.md";
    case CKPT_E_CONFIG:
        return "check the store URL, bucket/container name, region and endpoint";
    case CKPT_E_UNREACHABLE:
    case CKPT_E_TRANSIENT:
    case CKPT_E_THROTTLED:
        return "the store does not answer: check the endpoint, DNS, proxy (HTTPS_PROXY) and "
               "the network path from this instance";
    case CKPT_E_NOSPACE:
        return "the store (or its disk) is full";
    default:
        return "see docs/stores.md";
    }
}

/* Lower the store's retry budget and stall timeout so one operation cannot
 * eat the whole --budget (this process's environment only). */
static void cap_env_ms(const char *var, int64_t cap)
{
    const char *v = getenv(var);
    char buf[32];
    if (v && *v && atoll(v) > 0 && atoll(v) <= cap)
        return;
    snprintf(buf, sizeof buf, "%lld", (long long)cap);
    setenv(var, buf, 1);
}

static void fill_random(uint8_t *b, size_t n, uint64_t seed)
{
    uint64_t s = seed | 1;
    for (size_t i = 0; i + 8 <= n; i += 8) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        memcpy(b + i, &s, 8);
    }
}

static int collect_key(void *user, const struct ckpt_obj_info *obj)
{
    cJSON *arr = user;
    if (cJSON_GetArraySize(arr) >= 1000)
        return 1;
    cJSON_AddItemToArray(arr, cJSON_CreateString(obj->key));
    return 0;
}

/* Deletes every object under `prefix` (leftovers of an interrupted doctor). */
static void clean_prefix(struct doctor *d, const char *prefix)
{
    cJSON *arr = cJSON_CreateArray();
    const char *keys[1000];
    size_t n = 0;
    char err[CKPT_ERR_MAX];

    if (!arr)
        return;
    if (d->st->ops->list(d->st, prefix, collect_key, arr, err) == CKPT_OK) {
        cJSON *it;
        cJSON_ArrayForEach(it, arr)
            if (n < 1000)
                keys[n++] = it->valuestring;
        if (n)
            d->st->ops->del(d->st, keys, n, err);
    }
    cJSON_Delete(arr);
}

static void check_store(struct doctor *d)
{
    struct ckpt_store_config cfg;
    char err[CKPT_ERR_MAX] = "", key[512], host[128], hs[128], etag[CKPT_ETAG_MAX];
    uint8_t small[4096];
    void *back = NULL;
    size_t blen = 0;
    ckpt_status st;
    int64_t t;
    const char *src;
    struct ckpt_put_opts cond = { CKPT_PUT_IF_NONE_MATCH, NULL, 0 };
    const char *del1[1];

    cap_env_ms("CKPT_RETRY_BUDGET_MS", left_ms(d) / 4 > 2000 ? left_ms(d) / 4 : 2000);
    cap_env_ms("CKPT_HTTP_STALL_MS", left_ms(d) / 4 > 2000 ? left_ms(d) / 4 : 2000);
    /* The retry budget is only checked after the minimum number of
     * attempts, whose backoff alone could outlast ours: fewer attempts and
     * shorter sleeps (a diagnosis needs to know, not to ride it out). */
    cap_env_ms("CKPT_RETRY_ATTEMPTS", 5);
    cap_env_ms("CKPT_RETRY_CAP_MS", 2000);
    memset(&cfg, 0, sizeof cfg);
    cfg.connections = 16;
    cfg.log_fn = log_lib;
    cfg.log_level = log_lib_level();
    st = ckpt_store_open(d->o->store, &cfg, &d->st, err);
    if (st != CKPT_OK) {
        add(d, "store", V_FAIL, store_advice(st), "cannot open %s: %s (%s)", d->o->store,
            err[0] ? err : ckpt_strerror(st), ckpt_strerror(st));
        d->st = NULL;
        goto out;
    }
    src = d->st->cred_source[0] ? d->st->cred_source : "none needed";
    add(d, "store", V_OK, NULL, "%s%s%s, credentials: %s", d->o->store,
        d->st->endpoint[0] ? " via " : "", d->st->endpoint, src);

    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "host");
    host[sizeof host - 1] = '\0';
    if (name_sanitize(host, hs, sizeof hs) != 0)
        snprintf(hs, sizeof hs, "host");
    snprintf(d->prefix, sizeof d->prefix, "%s/.doctor/%.60s-%ld/", d->o->run, hs, (long)getpid());

    /* Write, read back, delete, and check it is gone. */
    fill_random(small, sizeof small, (uint64_t)getpid());
    snprintf(key, sizeof key, "%sprobe", d->prefix);
    t = mono();
    st = ckpt_store_put(d->st, key, small, sizeof small, NULL, NULL, err);
    d->rtt_ms = (double)(mono() - t);
    if (st == CKPT_OK) {
        d->sent += sizeof small;
        st = ckpt_store_get(d->st, key, sizeof small, &back, &blen, NULL, err);
        if (st == CKPT_OK && (blen != sizeof small || memcmp(back, small, blen) != 0)) {
            st = CKPT_E_CORRUPT;
            snprintf(err, sizeof err, "read back %zu bytes that differ from those written", blen);
        }
        d->received += blen;
    }
    if (st == CKPT_OK) {
        del1[0] = key;
        st = d->st->ops->del(d->st, del1, 1, err);
    }
    if (st == CKPT_OK) {
        uint64_t sz;
        ckpt_status h = d->st->ops->head(d->st, key, &sz, NULL, err);
        if (h != CKPT_E_NOENT) {
            st = h == CKPT_OK ? CKPT_E_INTERNAL : h;
            if (h == CKPT_OK)
                snprintf(err, sizeof err, "the probe object is still there after its delete");
        }
    }
    free(back);
    back = NULL;
    if (st != CKPT_OK) {
        if (st == CKPT_E_AUTH)
            add(d, "store-rw", V_FAIL, store_advice(st),
                "the store refused the credentials from %s: %s", src, err);
        else
            add(d, "store-rw", V_FAIL, store_advice(st), "write/read/delete of %s failed: %s (%s)",
                key, err[0] ? err : "-", ckpt_strerror(st));
        goto out;
    }
    d->store_ok = 1;
    add(d, "store-rw", V_OK, NULL, "wrote, read back and deleted %sprobe (put %.0f ms)",
        d->prefix, d->rtt_ms);
    /* Only now that the store answers (a dead one would spend the budget
     * twice): remove what an interrupted doctor left under RUN/.doctor/. */
    snprintf(key, sizeof key, "%s/.doctor/", d->o->run);
    clean_prefix(d, key);

    /* Conditional writes: what the backend says, then checked. */
    if (!ckpt_store_can(d->st, CKPT_STORE_CONDITIONAL)) {
        add(d, "conditional", V_WARN,
            "run one instance per run (the cron `recover` line checks the lease, but cannot "
            "exclude a race); for MinIO and other enforcing services set CKPT_S3_CONDITIONAL=1",
            "not enforced by this store: the lease is best effort and HEAD fencing cannot stop "
            "a runner that lost its lease");
        goto out;
    }
    snprintf(key, sizeof key, "%scond", d->prefix);
    st = ckpt_store_put(d->st, key, small, 16, &cond, etag, err);
    if (st == CKPT_OK) {
        d->sent += 32;
        st = ckpt_store_put(d->st, key, small + 16, 16, &cond, etag, err);
        del1[0] = key;
        d->st->ops->del(d->st, del1, 1, err);
        if (st == CKPT_E_PRECONDITION)
            add(d, "conditional", V_OK, NULL,
                "enforced (a second create-only write was refused): one live runner per run, "
                "HEAD fenced against a runner that lost its lease");
        else if (st == CKPT_OK)
            add(d, "conditional", V_WARN,
                "this store ignores If-None-Match: set CKPT_S3_CONDITIONAL=0 so ckpt does not "
                "rely on it, and run one instance per run",
                "the store claims conditional writes but accepted a second create-only write");
        else
            add(d, "conditional", V_WARN, store_advice(st),
                "second conditional write failed: %s", ckpt_strerror(st));
    } else {
        add(d, "conditional", V_WARN, store_advice(st), "conditional write failed: %s (%s)",
            err, ckpt_strerror(st));
    }
out:
    return;
}

/* ---- throughput ----------------------------------------------------------------- */

struct xfer {
    struct doctor *d;
    const uint8_t *buf;
    size_t obj;
    unsigned nobj;
    int download;
    atomic_uint next;
    atomic_uint done;
    atomic_int failed;
    ckpt_status first_err;
    int64_t deadline;
};

static void *xfer_worker(void *arg)
{
    struct xfer *x = arg;
    char key[512], err[CKPT_ERR_MAX];
    unsigned i;

    while ((i = atomic_fetch_add(&x->next, 1)) < x->nobj && mono() < x->deadline &&
           !atomic_load(&x->failed)) {
        ckpt_status st;
        snprintf(key, sizeof key, "%schunk-%03u", x->d->prefix, i);
        if (x->download) {
            void *b = NULL;
            size_t l = 0;
            st = ckpt_store_get(x->d->st, key, x->obj, &b, &l, NULL, err);
            free(b);
        } else {
            st = ckpt_store_put(x->d->st, key, x->buf, x->obj, NULL, NULL, err);
        }
        if (st != CKPT_OK) {
            if (atomic_exchange(&x->failed, 1) == 0)
                x->first_err = st;
            break;
        }
        atomic_fetch_add(&x->done, 1);
    }
    return NULL;
}

/* Moves nobj objects of obj bytes in parallel. @return the seconds taken
 * (objects done in x->done). */
static double run_xfer(struct xfer *x)
{
    pthread_t th[MAX_THREADS];
    unsigned n = x->nobj < MAX_THREADS ? x->nobj : MAX_THREADS, started = 0;
    int64_t t = mono();

    for (unsigned i = 0; i < n; i++)
        if (pthread_create(&th[i], NULL, xfer_worker, x) == 0)
            started++;
    if (!started)
        xfer_worker(x);
    for (unsigned i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    return (double)(mono() - t) / 1000.0;
}

static void check_throughput(struct doctor *d)
{
    uint8_t *buf = NULL;
    size_t obj = ckpt_store_can(d->st, CKPT_STORE_PACKS) ? PROBE_OBJ_REMOTE : PROBE_OBJ;
    uint64_t cap = PROBE_MAX;
    const char *ov = getenv("CKPT_DOCTOR_PROBE_BYTES");
    char key[512], err[CKPT_ERR_MAX], b1[32], b2[32];
    const char **keys = NULL;
    double secs, first_bps;
    int64_t share, t;
    struct xfer x;
    unsigned nobj;
    ckpt_status st;

    if (!d->store_ok) {
        add(d, "upload", V_SKIP, NULL, "not measured: the store does not work");
        goto out;
    }
    /* A smaller bound may be asked for (tests, metered links); never more. */
    if (ov && *ov && parse_size(ov, &cap, NULL) == 0 && cap > PROBE_MAX)
        cap = PROBE_MAX;
    if (cap < 64 * 1024)
        cap = 64 * 1024;
    if (obj > cap)
        obj = (size_t)cap;
    buf = malloc(obj);
    if (!buf) {
        add(d, "upload", V_WARN, NULL, "out of memory for the probe");
        goto out;
    }
    fill_random(buf, obj, 0x5eed ^ (uint64_t)getpid()); /* incompressible, like chunks */

    /* First a 256 KiB object alone: a rough rate that sizes the parallel
     * probe so it ends inside its share of the budget. */
    snprintf(key, sizeof key, "%sfirst", d->prefix);
    t = mono();
    st = ckpt_store_put(d->st, key, buf, obj < (256u << 10) ? obj : (256u << 10), NULL, NULL, err);
    secs = (double)(mono() - t) / 1000.0;
    if (st != CKPT_OK) {
        add(d, "upload", V_FAIL, store_advice(st), "probe upload failed: %s (%s)", err,
            ckpt_strerror(st));
        goto out;
    }
    d->sent += obj < (256u << 10) ? obj : (256u << 10);
    first_bps = (double)(obj < (256u << 10) ? obj : (256u << 10)) / (secs > 0.001 ? secs : 0.001);
    share = left_ms(d) * 2 / 5;
    nobj = (unsigned)(cap / obj);
    {
        /* Sized as if parallel uploads were no faster than one (a shared
         * uplink): the probe then ends inside its share, or early. */
        double fit = first_bps * ((double)share / 1000.0) / (double)obj;
        if (fit < nobj)
            nobj = fit < 1 ? 1 : (unsigned)fit;
    }
    if (first_bps * ((double)share / 1000.0) < (double)obj) {
        /* Even one chunk would not fit in the share: measure with what does. */
        obj = (size_t)(first_bps * ((double)share / 1000.0) / 2);
        if (obj < 64 * 1024)
            obj = 64 * 1024;
        nobj = 1;
    }
    memset(&x, 0, sizeof x);
    x.d = d;
    x.buf = buf;
    x.obj = obj;
    x.nobj = nobj;
    x.deadline = mono() + share;
    secs = run_xfer(&x);
    d->sent += (uint64_t)atomic_load(&x.done) * obj;
    if (atomic_load(&x.failed)) {
        add(d, "upload", V_FAIL, store_advice(x.first_err), "parallel upload failed: %s",
            ckpt_strerror(x.first_err));
        goto cleanup;
    }
    if (atomic_load(&x.done) == 0) {
        add(d, "upload", V_WARN, "rerun with a larger --budget",
            "not measured: the budget was spent");
        goto cleanup;
    }
    d->up_bps = (double)atomic_load(&x.done) * (double)obj / (secs > 0.001 ? secs : 0.001);
    add(d, "upload", V_OK, NULL, "%s/s (%u x %s objects, %u in parallel, %.1f s)",
        mb(d->up_bps, b1, sizeof b1), atomic_load(&x.done), fmt_bytes(obj, b2, sizeof b2),
        nobj < MAX_THREADS ? nobj : MAX_THREADS, secs);

    /* Download what was uploaded, the way a restore reads chunks. */
    x.nobj = atomic_load(&x.done);
    atomic_store(&x.next, 0);
    atomic_store(&x.done, 0);
    x.download = 1;
    x.deadline = mono() + left_ms(d) * 2 / 3;
    secs = run_xfer(&x);
    d->received += (uint64_t)atomic_load(&x.done) * obj;
    if (atomic_load(&x.failed))
        add(d, "download", V_WARN, store_advice(x.first_err), "download failed: %s",
            ckpt_strerror(x.first_err));
    else if (atomic_load(&x.done) == 0)
        add(d, "download", V_WARN, "rerun with a larger --budget",
            "not measured: the budget was spent");
    else {
        d->down_bps = (double)atomic_load(&x.done) * (double)obj / (secs > 0.001 ? secs : 0.001);
        add(d, "download", V_OK, NULL, "%s/s (%u objects, %.1f s)", mb(d->down_bps, b1, sizeof b1),
            atomic_load(&x.done), secs);
    }
cleanup:
    keys = calloc(nobj + 1, sizeof *keys);
    if (keys) {
        char (*names)[512] = calloc(nobj + 1, sizeof *names);
        if (names) {
            for (unsigned i = 0; i < nobj; i++) {
                snprintf(names[i], sizeof names[i], "%schunk-%03u", d->prefix, i);
                keys[i] = names[i];
            }
            snprintf(names[nobj], sizeof names[nobj], "%sfirst", d->prefix);
            keys[nobj] = names[nobj];
            d->st->ops->del(d->st, keys, nobj + 1, err);
            free(names);
        }
    }
out:
    free(keys);
    free(buf);
}

/* ---- estimate --------------------------------------------------------------------- */

struct est {
    double total_s, cpu_s, net_s;
};

static void estimate(const struct doctor *d, const struct meas *m, double changed,
                     struct est *e)
{
    double scale = (double)d->state_bytes / (double)d->sample_bytes;
    /* CPU: snapshot + hash of everything, compression of what changed. */
    e->cpu_s = scale * (m->t_same_s + changed * (m->t_full_s - m->t_same_s));
    e->net_s = changed * (double)d->state_bytes * m->ratio / d->up_bps;
    /* Compression and upload overlap (bounded queue between them); then
     * manifest, HEAD and the run record: a few requests in a row. */
    e->total_s = (double)d->poll_ms / 1000.0 + (e->cpu_s > e->net_s ? e->cpu_s : e->net_s) +
                 4.0 * d->rtt_ms / 1000.0;
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
                 "link; keep --interval short, since a final save that does not commit falls "
                 "back to the last periodic one", mb(d->up_bps, b, sizeof b));
    else
        snprintf(out, cap,
                 "compression-bound on this CPU: try --codec lz4 (or zstd:1) or more cores; "
                 "keep --interval short, since a final save that does not commit falls back to "
                 "the last periodic one");
}

/* How much of the state changes between checkpoints: what a final save
 * has to compress and send. --changed says it; else the run's own
 * checkpoints show it (new bytes / stored bytes of each but the oldest
 * retained, the largest share); else all of it, as in full training, where
 * every weight and optimizer moment moves every step. */
static void check_changed(struct doctor *d)
{
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *ctx = NULL;
    struct ckpt_info rows[8];
    struct { struct ckpt_info *v; unsigned n; } c = { rows, 0 };
    double worst = 0;

    if (d->changed_known) {
        add(d, "changed", V_OK, NULL, "%.1f%% of the state changes between checkpoints (%s)",
            d->changed * 100.0, d->changed_src);
        return;
    }
    d->changed = 1.0;
    if (d->store_ok) {
        cfg.store = d->o->store;
        cfg.run = d->o->run;
        cfg.no_control = 1;
        cfg.log_fn = log_lib;
        cfg.log_level = CKPT_LOG_ERROR;
        if (ckpt_open(&cfg, &ctx) == CKPT_OK)
            ckpt_list(ctx, newest_rows, &c); /* newest first, at most 8 */
        ckpt_close(ctx);
    }
    for (unsigned i = 0; i + 1 < c.n; i++) /* the oldest listed was all new */
        if (rows[i].stored_bytes) {
            double f = (double)rows[i].new_bytes / (double)rows[i].stored_bytes;
            worst = f > worst ? f : worst;
        }
    if (c.n >= 2) {
        d->changed = worst > 0.001 ? worst : 0.001;
        d->changed_known = 1;
        snprintf(d->changed_src, sizeof d->changed_src,
                 "measured on run %.100s: the most new data any of its last %u checkpoints "
                 "stored", d->o->run, c.n - 1);
        add(d, "changed", V_OK, NULL, "%.1f%% of the state changes between checkpoints (%s)",
            d->changed * 100.0, d->changed_src);
    } else {
        snprintf(d->changed_src, sizeof d->changed_src, "assumed: full training changes every "
                 "weight and optimizer state between checkpoints");
        add(d, "changed", V_OK, NULL, "all of the state changes between checkpoints (%s; pass "
            "--changed for a frozen-backbone or LoRA run, or run doctor once the run has two "
            "checkpoints)", d->changed_src);
    }
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

    fmt_duration((uint64_t)d->window_ms, w, sizeof w);
    if (iv > 0) {
        /* preempted at a uniform moment of an interval: the last periodic
         * checkpoint is I/2 old on average, one interval when its
         * successor had not committed yet (probability commit/I) */
        cJSON_AddNumberToObject(ej, "interval_s", iv);
        cJSON_AddNumberToObject(ej, "lost_if_final_fails_s", rnd1(avg));
        cJSON_AddNumberToObject(ej, "lost_if_final_fails_max_s", rnd1(worst));
    }
    fmt_duration((uint64_t)(avg * 1000), b1, sizeof b1);
    fmt_duration((uint64_t)(worst * 1000), b2, sizeof b2);
    if (d->window_ms > 0 && final_ok) {
        cJSON_AddNumberToObject(ej, "lost_per_preemption_s", 0);
        if (iv > 0)
            add(d, "lost-work", V_OK, NULL, "a preemption loses almost nothing: the final "
                "checkpoint commits inside the %s window; if it fails, the run resumes from the "
                "last periodic one (every %.0f s): %s lost on average, at most %s", w, iv, b1, b2);
        else
            add(d, "lost-work", V_OK, "set --interval (e.g. 30m) to bound what a failed final "
                "save loses", "a preemption loses almost nothing: the final checkpoint commits "
                "inside the %s window; if it fails, everything since the trainer's own last "
                "save is lost (no --interval)", w);
    } else if (iv > 0) {
        cJSON_AddNumberToObject(ej, "lost_per_preemption_s", rnd1(avg));
        add(d, "lost-work",
            d->window_ms > 0 ? V_WARN : V_OK,
            "shorten --interval to lose less, or make the final save fit (see estimate-full)",
            "each %s loses %s of training on average, at most %s: %s, so the run resumes "
            "from the last periodic checkpoint (every %.0f s, ~%.1f s to commit)",
            d->window_ms > 0 ? "preemption" : "stop or crash", b1, b2,
            d->window_ms > 0 ? "the final checkpoint does not fit the window"
                             : "no notice arrives before the end", iv, commit_s);
    } else {
        add(d, "lost-work", d->window_ms > 0 ? V_FAIL : V_WARN,
            "set --interval (e.g. 30m): a preemption then loses at most one interval plus a "
            "commit", "each %s loses everything since the trainer's own last save: %s, and no "
            "--interval", d->window_ms > 0 ? "preemption" : "stop or crash",
            d->window_ms > 0 ? "the final checkpoint does not fit the window"
                             : "no notice arrives before the end");
    }
}

static void check_estimate(struct doctor *d, cJSON *ej)
{
    struct est full, fin, periodic;
    struct meas m;
    char b1[32], adv[600], w[32], fits_why[400] = "";
    double win = (double)d->window_ms / 1000.0;
    enum verdict vf, vi;
    int small = d->changed_known && d->changed <= CHANGED_SMALL, final_ok;

    if (!d->codec_ok || d->up_bps <= 0 || !d->sample_bytes) {
        add(d, "estimate-full", V_FAIL,
            d->store_ok ? "rerun with a larger --budget" : "make the store work first",
            "no estimate: %s", !d->codec_ok ? "the codec was not measured"
                                            : "the upload was not measured");
        goto out;
    }
    m.t_full_s = d->t_full_s;
    m.t_same_s = d->t_same_s;
    m.ratio = d->ratio;
    estimate(d, &m, 1.0, &full);
    estimate(d, &m, d->changed, &fin);
    fmt_duration((uint64_t)d->window_ms, w, sizeof w);
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
        d->sample && left_ms(d) > 2000) {
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
            cJSON_AddNumberToObject(ej, "full_lz4_s", rnd1(le.total_s));
        }
    }
    add(d, "estimate-full", vf, adv,
        "full checkpoint of %s: ~%.1f s from notice to commit (compress %.1f s, upload %.1f s "
        "of %.0f%% stored, overlapped)%s%s%s%s", fmt_bytes(d->state_bytes, b1, sizeof b1),
        full.total_s, full.cpu_s, full.net_s, d->ratio * 100.0,
        win > 0 ? "; window " : "; no notice window", win > 0 ? w : "",
        vf == V_OK ? "" : full.total_s > win ? ": does NOT fit" : ": tight", fits_why);
    if (!small) {
        add(d, "estimate-incremental", V_SKIP, NULL, "not counted on: %s, so the final save "
            "is a full one", d->changed_src);
    } else {
        advise(d, &fin, adv, sizeof adv);
        add(d, "estimate-incremental", vi, adv,
            "final save with %.1f%% changed: ~%.1f s (snapshot+hash %.1f s, upload %.1f s)%s%s%s",
            d->changed * 100.0, fin.total_s, fin.cpu_s, fin.net_s,
            win > 0 ? "; window " : "", win > 0 ? w : "",
            vi == V_OK ? "" : vi == V_WARN ? ": tight" : ": does NOT fit");
    }
    /* a periodic save of the same size, without the notice latency */
    periodic = small ? fin : full;
    periodic.total_s -= (double)d->poll_ms / 1000.0;
    check_lost(d, ej, final_ok, periodic.total_s);
    cJSON_AddNumberToObject(ej, "full_s", rnd1(full.total_s));
    cJSON_AddNumberToObject(ej, "full_compress_s", rnd1(full.cpu_s));
    cJSON_AddNumberToObject(ej, "full_upload_s", rnd1(full.net_s));
    cJSON_AddNumberToObject(ej, "changed", (double)(int64_t)(d->changed * 10000) / 10000);
    cJSON_AddStringToObject(ej, "changed_source", d->changed_src);
    cJSON_AddNumberToObject(ej, "incremental_s", rnd1(fin.total_s));
    cJSON_AddNumberToObject(ej, "incremental_changed", (double)(int64_t)(d->changed * 10000) / 10000);
    cJSON_AddNumberToObject(ej, "final_s", rnd1(small ? fin.total_s : full.total_s));
    cJSON_AddBoolToObject(ej, "fits_full", win <= 0 || full.total_s <= win);
    cJSON_AddBoolToObject(ej, "fits_incremental", win <= 0 || fin.total_s <= win);
    cJSON_AddBoolToObject(ej, "fits_final", win <= 0 || final_ok);
    if (d->down_bps > 0)
        cJSON_AddNumberToObject(ej, "restore_download_s",
                                rnd1((double)d->state_bytes * d->ratio / d->down_bps));
out:
    return;
}

/* ---- entry ---------------------------------------------------------------------- */

int cmd_doctor(struct opts *o)
{
    struct doctor *d = calloc(1, sizeof *d);
    cJSON *root = NULL, *arr, *ej;
    int rc = 0, nv[4] = {0, 0, 0, 0};
    char b1[32], b2[32];
    uint64_t budget;

    if (!d) {
        log_error("out of memory");
        rc = EXIT_FAIL_DOCTOR;
        goto out;
    }
    d->o = o;
    /* sizes follow the one convention (rules.h): 7GiB = 7G = 7 x 2^30 */
    if (o->state_bytes && (parse_size(o->state_bytes, &d->state_bytes, NULL) != 0 ||
                           d->state_bytes > (uint64_t)1e15)) {
        log_error("--state-bytes '%s' is not a size (e.g. 7GiB, 1.5G, 512M)", o->state_bytes);
        rc = EXIT_USAGE;
        goto out;
    }
    if (o->changed) {
        /* "2%" or "0.02": the share of the state a checkpoint changes */
        char *end;
        double v = strtod(o->changed, &end);
        if (end != o->changed && *end == '%')
            v /= 100.0, end++;
        if (end == o->changed || *end || !(v > 0 && v <= 1)) {
            log_error("--changed '%s' is not a share of the state in (0, 1] (e.g. 2%% or 0.02)",
                      o->changed);
            rc = EXIT_USAGE;
            goto out;
        }
        d->changed = v;
        d->changed_known = 1;
        snprintf(d->changed_src, sizeof d->changed_src, "--changed %s", o->changed);
    }
    if (o->nargs > 0) {
        log_error("doctor takes no arguments (see ckptrun doctor --help)");
        rc = EXIT_USAGE;
        goto out;
    }
    budget = o->budget_ms ? o->budget_ms : DEFAULT_BUDGET_MS;
    d->t0 = mono();
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
               fmt_duration(budget, b1, sizeof b1));

    check_notice(d);
    check_state(d);
    check_disk(d);
    check_store(d);
    check_changed(d);
    check_codec(d);
    if (left_ms(d) > 1000)
        check_throughput(d);
    else if (d->store_ok)
        add(d, "upload", V_WARN, "rerun with a larger --budget", "not measured: budget spent");
    check_estimate(d, ej);

    if (d->st && d->prefix[0]) {
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
            cJSON_AddStringToObject(c, "status", verdict_name[d->c[i].v]);
            cJSON_AddStringToObject(c, "message", d->c[i].msg);
            if (d->c[i].advice[0])
                cJSON_AddStringToObject(c, "advice", d->c[i].advice);
            cJSON_AddItemToArray(arr, c);
        }
        cJSON_AddItemToObject(root, "estimate", ej);
        ej = NULL;
        cJSON_AddNumberToObject(root, "elapsed_ms", (double)(mono() - d->t0));
        cJSON_AddNumberToObject(root, "bytes_sent", (double)d->sent);
        cJSON_AddNumberToObject(root, "bytes_received", (double)d->received);
        s = cJSON_PrintUnformatted(root);
        if (s)
            printf("%s\n", s);
        cJSON_free(s);
    } else {
        printf("doctor: %d ok, %d warn, %d fail in %s; sent %s to the store. %s\n", nv[V_OK],
               nv[V_WARN], nv[V_FAIL], fmt_duration((uint64_t)(mono() - d->t0), b1, sizeof b1),
               fmt_bytes(d->sent, b2, sizeof b2),
               nv[V_FAIL] ? "Something will not work: fix the fail lines first."
               : nv[V_WARN] ? "Should work; read the warn lines."
                            : "Everything fits.");
    }
    cJSON_Delete(ej);
out:
    if (d) {
        ckpt_store_close(d->st);
        free(d->sample);
        if (d->scratch[0])
            rm_tree(d->scratch);
    }
    cJSON_Delete(root);
    free(d);
    return rc;
}
