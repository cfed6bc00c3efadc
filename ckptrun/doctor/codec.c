/* doctor/codec.c -- codec: the codec measured on this CPU, on a sample of the state
 * (doctor/codec.h). */
#include "doctor/codec.h"
#include "doctor/report.h"
#include "base/runlog.h"
#include "opts.h"
#include "base/parse.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

ckpt_status measure(struct doctor *d, const char *run_name, ckpt_codec codec, int level,
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
    t = ckpt__mono_ms();
    if ((st = ckpt_save(ctx, 1)) != CKPT_OK || (st = ckpt_wait(ctx)) != CKPT_OK)
        goto out;
    m->t_full_s = (double)(ckpt__mono_ms() - t) / 1000.0;
    t = ckpt__mono_ms();
    if ((st = ckpt_save(ctx, 2)) != CKPT_OK || (st = ckpt_wait(ctx)) != CKPT_OK)
        goto out;
    m->t_same_s = (double)(ckpt__mono_ms() - t) / 1000.0;
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
void check_codec(struct doctor *d)
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
    if (doctor_left_ms(d) < 8000)
        cap = SAMPLE_MIN; /* little budget left: a small sample still says something */
    snprintf(d->scratch, sizeof d->scratch, "%s/ckpt-doctor-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(d->scratch)) {
        d->scratch[0] = '\0';
        doctor_add(d, "codec", V_WARN, "set TMPDIR to a writable directory",
            "cannot create a scratch directory: %s", strerror(errno));
        goto out;
    }
    d->sample = malloc(cap);
    if (!d->sample) {
        doctor_add(d, "codec", V_WARN, NULL, "out of memory for a %zu-byte sample", cap);
        goto out;
    }
    d->sample_bytes = fill_sample(d, d->sample, cap, &d->bf16_bytes);
    st = measure(d, "doctor", d->o->codec, d->o->codec_level, &m, &what);
    if (st != CKPT_OK) {
        doctor_add(d, "codec", V_WARN, NULL, "codec measurement failed (%s): %s", what,
            ckpt_strerror(st));
        goto out;
    }
    d->t_full_s = m.t_full_s;
    d->t_same_s = m.t_same_s;
    d->ratio = m.ratio;
    d->codec_ok = 1;
    doctor_add(d, "codec", V_OK, NULL,
               "%s on this CPU: %s/s, stored %.0f%% of the raw bytes (%s sample, %s); unchanged "
               "data %s/s",
               codec, doctor_mb((double)d->sample_bytes / d->t_full_s, b1, sizeof b1),
               d->ratio * 100.0, ckpt__fmt_bytes(d->sample_bytes, b2, sizeof b2),
               d->sample_dir[0] ? "from --dir" : "synthetic fp32/bf16",
               doctor_mb((double)d->sample_bytes / (d->t_same_s > 0.0005 ? d->t_same_s : 0.0005),
                         b3, sizeof b3));
out:
    return;
}
