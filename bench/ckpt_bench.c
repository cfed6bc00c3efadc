/*
 * ckpt_bench -- libckpt against the tools people would otherwise use, on the
 * same inputs, in the same run, printed as one table.
 *
 *   ckpt_bench [--mb N] [--dir DIR] [--workers N] [--rounds N]
 *
 * Inputs (N MiB in all, default 1280): weight-like bf16 (40%) and fp32 (40%)
 * arrays drawn from a normal distribution (the exponent spread of trained
 * weights), and a compressible text-like file (20%). The peers run on the
 * same bytes written to one file in DIR (page cache warm):
 *   save:    ckpt_save + ckpt_wait (zstd -1, 2 workers, durable)  vs  zstd -T2 -1
 *            and with lz4                                         vs  lz4 -1 (and + sync)
 *   restore: ckpt_restore (verified)                              vs  zstd -d
 *   size:    bf16/fp32 with and without byte grouping             vs  zstd -1
 *   stall:   ckpt_save() return time                              vs  one memcpy
 *   incremental: bytes written after a 1% change                  vs  a full save
 *   memory:  a save's peak RSS above the inputs                   vs  the inputs + the pool
 * Notes: ckpt's save figures include making the checkpoint durable (syncfs)
 * and hashing every chunk; zstd is timed both as is (page cache only) and
 * followed by an fsync of its output. The saves run in rounds (default 3),
 * ckpt and its peers alternating inside each; each figure is the median of
 * its rounds, CPU (user+sys) included.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rng = 0x243F6A8885A308D3ull;
static inline uint64_t xs(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Approximately normal (sum of 4 uniforms), std ~0.02, like trained weights */
static inline float weight(void)
{
    uint64_t r = xs();
    float s = (float)(r & 0xffff) + (float)(r >> 16 & 0xffff) + (float)(r >> 32 & 0xffff) +
              (float)(r >> 48);
    return (s / 65536.0f - 2.0f) * 0.035f;
}

static void gen_fp32(float *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        w[i] = weight();
}

static void gen_bf16(uint16_t *h, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float f = weight();
        uint32_t u;
        memcpy(&u, &f, 4);
        h[i] = (uint16_t)((u + 0x8000) >> 16); /* round to bf16 */
    }
}

static void gen_text(char *t, size_t n)
{
    static const char *words[] = { "the", "loss", "step", "epoch", "learning_rate", "0.001",
                                   "gradient", "norm", "batch", "token", "attention", "layer",
                                   "checkpoint", "saved", "model", "optimizer", "warmup",
                                   "1e-4", "eval", "accuracy", "\n", "{", "}", ":", "," };
    size_t o = 0;
    while (o < n) {
        const char *w = words[xs() % (sizeof words / sizeof *words)];
        size_t l = strlen(w);
        if (o + l + 1 > n)
            break;
        memcpy(t + o, w, l);
        o += l;
        t[o++] = ' ';
    }
    memset(t + o, ' ', n - o);
}

static int write_file(const char *path, const void *a, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(a, 1, n, f) != n) {
        if (f)
            fclose(f);
        return -1;
    }
    return fclose(f);
}

/* CPU seconds of this process (self) or of its waited-for children. */
static double cpu_s(int who)
{
    struct rusage ru;
    getrusage(who, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* Run a shell command: its wall time (and its CPU time in *cpu). */
static double run_cmd(const char *cmd, double *cpu)
{
    double t = now(), c = cpu_s(RUSAGE_CHILDREN);
    if (system(cmd) != 0) {
        fprintf(stderr, "bench: '%s' failed\n", cmd);
        exit(1);
    }
    if (cpu)
        *cpu = cpu_s(RUSAGE_CHILDREN) - c;
    return now() - t;
}

/* The process's resident memory now, or its peak since the last reset
 * (`VmHWM`), in bytes. */
static uint64_t rss_bytes(const char *field)
{
    char line[256];
    uint64_t kb = 0;
    size_t n = strlen(field);
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, n) && line[n] == ':')
            kb = strtoull(line + n + 1, NULL, 10);
    if (f)
        fclose(f);
    return kb * 1024;
}

/* Restart the peak (VmHWM) from the resident size now (Linux >= 4.0). */
static void rss_reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f);
        fclose(f);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

static long fsize(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 ? (long)sb.st_size : -1;
}

struct sizes {
    uint64_t newest_new, newest_raw, prev_new;
    int n;
};
static int list_cb(void *u, const struct ckpt_info *i)
{
    struct sizes *s = u;
    if (s->n == 0) {
        s->newest_new = i->new_bytes;
        s->newest_raw = i->raw_bytes;
    } else if (s->n == 1) {
        s->prev_new = i->new_bytes;
    }
    s->n++;
    return 0;
}

static struct ckpt_ctx *open_ctx(const char *url, const char *run, ckpt_codec codec,
                                 unsigned workers)
{
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *ctx;
    cfg.store = url;
    cfg.run = run;
    cfg.codec = codec;
    cfg.workers = workers;
    cfg.no_control = 1;
    if (ckpt_open(&cfg, &ctx)) {
        fprintf(stderr, "bench: ckpt_open: %s\n", ckpt_errmsg(NULL));
        exit(1);
    }
    return ctx;
}

/* Stored size of one array saved alone, with or without byte grouping. */
static uint64_t stored_size(const char *url, const char *run, void *p, size_t n, ckpt_elem e)
{
    struct ckpt_ctx *ctx = open_ctx(url, run, CKPT_CODEC_ZSTD, 2);
    struct sizes s = { 0 };
    ckpt_protect_ex(ctx, "x", p, n, e);
    if (ckpt_save(ctx, 1) || ckpt_wait(ctx)) {
        fprintf(stderr, "bench: save failed: %s\n", ckpt_errmsg(ctx));
        exit(1);
    }
    ckpt_list(ctx, list_cb, &s);
    ckpt_close(ctx);
    return s.newest_new;
}

static void row(const char *what, double mine, double peer, const char *unit, const char *peer_name,
                double ratio, const char *target)
{
    printf("| %-34s | %10.1f %-5s | %10.1f %-5s %-14s | %6.3fx | %-10s |\n", what, mine, unit, peer,
           unit, peer_name, ratio, target);
}

/* One full save of the three inputs, timed from ckpt_save to durable, in a
 * fresh context (its staging reserved and touched first, as a trainer's is
 * at ckpt_protect): seconds, CPU seconds in *cpu, and the process's peak
 * resident memory above `base` while it ran (protect, save, commit) in
 * *peak. */
static double full_save(const char *url, const char *run, ckpt_codec codec, unsigned workers,
                        uint16_t *bf, size_t n_bf, float *fp, size_t n_fp, char *tx, size_t n_tx,
                        double *cpu, uint64_t *peak)
{
    uint64_t base;
    double t, c;
    struct ckpt_ctx *ctx;
    rss_reset_peak();
    base = rss_bytes("VmRSS");
    ctx = open_ctx(url, run, codec, workers);
    ckpt_protect_ex(ctx, "bf16", bf, n_bf, CKPT_ELEM_F16);
    ckpt_protect_ex(ctx, "fp32", fp, n_fp, CKPT_ELEM_F32);
    ckpt_protect(ctx, "text", tx, n_tx);
    sleep(1); /* let the background run-state load finish: it is not a save */
    sync();   /* start every timed section with nothing dirty (fair to both) */
    c = cpu_s(RUSAGE_SELF);
    t = now();
    if (ckpt_save(ctx, 1) || ckpt_wait(ctx)) {
        fprintf(stderr, "bench: save failed: %s\n", ckpt_errmsg(ctx));
        exit(1);
    }
    t = now() - t;
    if (cpu)
        *cpu = cpu_s(RUSAGE_SELF) - c;
    if (peak)
        *peak = rss_bytes("VmHWM") - base;
    ckpt_close(ctx);
    return t;
}

int main(int argc, char **argv)
{
    size_t mb = 1280;
    unsigned workers = 2;
    int rounds = 3;
    const char *dir = NULL;
    char tmpl[] = "/tmp/ckpt-bench-XXXXXX", url[600], cmd[2048], path[600], run[64];
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--mb"))
            mb = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--dir"))
            dir = argv[i + 1];
        else if (!strcmp(argv[i], "--workers"))
            workers = (unsigned)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rounds"))
            rounds = atoi(argv[i + 1]);
    }
    if (rounds < 1 || rounds > 15)
        rounds = 3;
    if (!dir && !(dir = mkdtemp(tmpl))) {
        perror("mkdtemp");
        return 1;
    }
    size_t n_bf = (mb << 20) * 2 / 5, n_fp = (mb << 20) * 2 / 5;
    size_t n_tx = (mb << 20) - n_bf - n_fp;
    size_t total = n_bf + n_fp + n_tx;
    uint8_t *all = malloc(total);
    uint16_t *bf = (uint16_t *)all;
    float *fp = (float *)(all + n_bf);
    char *tx = (char *)(all + n_bf + n_fp);
    if (!all) {
        fprintf(stderr, "bench: cannot allocate %zu MiB\n", mb);
        return 1;
    }
    fprintf(stderr, "bench: generating %zu MiB of inputs in memory and in %s ...\n", mb, dir);
    gen_bf16(bf, n_bf / 2);
    gen_fp32(fp, n_fp / 4);
    gen_text(tx, n_tx);
    snprintf(path, sizeof path, "%s/all.bin", dir);
    write_file(path, all, total);
    snprintf(cmd, sizeof cmd, "%s/bf16.bin", dir);
    write_file(cmd, bf, n_bf);
    snprintf(cmd, sizeof cmd, "%s/fp32.bin", dir);
    write_file(cmd, fp, n_fp);
    snprintf(url, sizeof url, "file://%s/store", dir);
    double mbytes = (double)total / 1e6;

    /* Saves, rounds of: zstd, ckpt (zstd), zstd + fsync, lz4, lz4 + fsync,
     * ckpt (lz4);
     * each figure the median of its rounds (this VM's CPU steal and other
     * tenants move single runs by +-30%). */
    double z[15], zc[15], zs[15], l4[15], l4c[15], l4s[15], sv[15], svc[15], sl[15], slc[15];
    uint64_t peak_max = 0;
    for (int r = 0; r < rounds; r++) {
        uint64_t peak = 0;
        sync();
        snprintf(cmd, sizeof cmd, "zstd -q -f -T2 -1 '%s/all.bin' -o '%s/all.zst'", dir, dir);
        z[r] = run_cmd(cmd, &zc[r]);
        snprintf(run, sizeof run, "full%d", r);
        sv[r] = full_save(url, run, CKPT_CODEC_ZSTD, workers, bf, n_bf, fp, n_fp, tx, n_tx, &svc[r],
                          &peak);
        peak_max = peak > peak_max ? peak : peak_max;
        /* the same, made durable as a checkpoint is (fsync of the output) */
        sync();
        snprintf(cmd, sizeof cmd,
                 "zstd -q -f -T2 -1 '%s/all.bin' -o '%s/all.zst' && sync '%s/all.zst'", dir, dir,
                 dir);
        zs[r] = run_cmd(cmd, NULL);
        sync();
        snprintf(cmd, sizeof cmd, "lz4 -q -f -1 '%s/all.bin' '%s/all.lz4'", dir, dir);
        l4[r] = run_cmd(cmd, &l4c[r]);
        /* and made durable, as ckpt's lz4 save is */
        sync();
        snprintf(cmd, sizeof cmd, "lz4 -q -f -1 '%s/all.bin' '%s/all.lz4' && sync '%s/all.lz4'",
                 dir, dir, dir);
        l4s[r] = run_cmd(cmd, NULL);
        snprintf(run, sizeof run, "lz4-%d", r);
        sl[r] = full_save(url, run, CKPT_CODEC_LZ4, workers, bf, n_bf, fp, n_fp, tx, n_tx, &slc[r],
                          NULL);
    }
    fprintf(stderr, "bench: save rounds (s): ckpt");
    for (int r = 0; r < rounds; r++)
        fprintf(stderr, " %.2f", sv[r]);
    fprintf(stderr, "; zstd -T2 -1");
    for (int r = 0; r < rounds; r++)
        fprintf(stderr, " %.2f", z[r]);
    fprintf(stderr, "; ckpt lz4");
    for (int r = 0; r < rounds; r++)
        fprintf(stderr, " %.2f", sl[r]);
    fprintf(stderr, "; lz4 -1");
    for (int r = 0; r < rounds; r++)
        fprintf(stderr, " %.2f", l4[r]);
    fprintf(stderr, "\n");
    double t_zstd = median(z, rounds), c_zstd = median(zc, rounds);
    double t_zstd_sync = median(zs, rounds), t_lz4 = median(l4, rounds);
    double t_lz4_sync = median(l4s, rounds);
    double c_lz4 = median(l4c, rounds), t_save = median(sv, rounds), c_save = median(svc, rounds);
    double t_save_lz4 = median(sl, rounds), c_save_lz4 = median(slc, rounds);
    sync();
    snprintf(cmd, sizeof cmd, "zstd -q -f -d '%s/all.zst' -o '%s/all.out'", dir, dir);
    double t_unzstd = run_cmd(cmd, NULL);
    snprintf(cmd, sizeof cmd, "zstd -q -f -1 '%s/bf16.bin' -o '%s/bf16.zst' && zstd -q -f -1 "
                              "'%s/fp32.bin' -o '%s/fp32.zst'", dir, dir, dir, dir);
    run_cmd(cmd, NULL);
    snprintf(cmd, sizeof cmd, "%s/bf16.zst", dir);
    long z_bf = fsize(cmd);
    snprintf(cmd, sizeof cmd, "%s/fp32.zst", dir);
    long z_fp = fsize(cmd);

    /* 1% contiguous change, then an incremental save: stall + bytes; the
     * stall is the best of three saves, as memcpy's is the best of three */
    struct ckpt_ctx *ctx = open_ctx(url, "full0", CKPT_CODEC_ZSTD, workers);
    ckpt_protect_ex(ctx, "bf16", bf, n_bf, CKPT_ELEM_F16);
    ckpt_protect_ex(ctx, "fp32", fp, n_fp, CKPT_ELEM_F32);
    ckpt_protect(ctx, "text", tx, n_tx);
    sleep(1);
    double t, t_stall = 1e9, t_memcpy = 1e9;
    struct sizes s = { 0 };
    for (int k = 0; k < 3; k++) {
        gen_fp32(fp + n_fp / 8 + (size_t)k * 4096, total / 100 / 4);
        sync();
        t = now();
        ckpt_save(ctx, 2 + (uint64_t)k);
        t = now() - t;
        t_stall = t < t_stall ? t : t_stall;
        ckpt_wait(ctx);
        if (k == 0)
            ckpt_list(ctx, list_cb, &s);
    }
    ckpt_close(ctx);
    /* one memcpy of the same bytes into a warm buffer */
    uint8_t *dst = malloc(total);
    memset(dst, 1, total);
    for (int k = 0; k < 3; k++) {
        t = now();
        memcpy(dst, all, total);
        t = now() - t;
        t_memcpy = t < t_memcpy ? t : t_memcpy;
    }
    /* use the copy, or the compiler may drop it */
    if (dst[total / 2] != all[total / 2])
        return 1;
    free(dst);

    /* restore, verified, in a fresh context */
    ctx = open_ctx(url, "full0", CKPT_CODEC_ZSTD, workers);
    ckpt_protect(ctx, "bf16", bf, n_bf);
    ckpt_protect(ctx, "fp32", fp, n_fp);
    ckpt_protect(ctx, "text", tx, n_tx);
    uint64_t step;
    sync();
    t = now();
    if (ckpt_restore(ctx, &step)) {
        fprintf(stderr, "bench: restore failed: %s\n", ckpt_errmsg(ctx));
        return 1;
    }
    double t_restore = now() - t;
    ckpt_close(ctx);

    /* sizes with and without grouping */
    uint64_t bf_g = stored_size(url, "bf16g", bf, n_bf, CKPT_ELEM_F16);
    uint64_t bf_p = stored_size(url, "bf16p", bf, n_bf, CKPT_ELEM_BYTES);
    uint64_t fp_g = stored_size(url, "fp32g", fp, n_fp, CKPT_ELEM_F32);
    uint64_t fp_p = stored_size(url, "fp32p", fp, n_fp, CKPT_ELEM_BYTES);
    /* the pool (ckpt.h, "Memory"): per worker a read, a filter and an output
     * buffer of a chunk (4 MiB on file://), no packs on file:// */
    double pool = (double)workers * 3 * (4u << 20);

    printf("\nckpt bench: %.0f MB of inputs (bf16 %.0f MB, fp32 %.0f MB, text %.0f MB), "
           "%u workers, %ld CPUs, median of %d rounds; load: ",
           mbytes, n_bf / 1e6, n_fp / 1e6, n_tx / 1e6, workers, sysconf(_SC_NPROCESSORS_ONLN),
           rounds);
    {
        FILE *la = fopen("/proc/loadavg", "r");
        char l[128] = "?";
        if (la && fgets(l, sizeof l, la))
            l[strcspn(l, "\n")] = '\0';
        if (la)
            fclose(la);
        printf("%s\n\n", l);
    }
    printf("| %-34s | %-16s | %-31s | %-7s | %-10s |\n", "measure", "ckpt", "peer", "ratio",
           "target");
    printf("|------------------------------------|------------------|---------------------------------|---------|------------|\n");
    row("save throughput (zstd -1)", mbytes / t_save, mbytes / t_zstd, "MB/s", "zstd -T2 -1",
        t_zstd / t_save, ">= 1.00x");
    row("save CPU (zstd -1)", c_save, c_zstd, "s", "zstd -T2 -1", c_save / c_zstd, "-");
    row("save throughput (zstd -1), durable", mbytes / t_save, mbytes / t_zstd_sync, "MB/s",
        "zstd -T2 -1;sync", t_zstd_sync / t_save, ">= 0.90x");
    row("save throughput (lz4)", mbytes / t_save_lz4, mbytes / t_lz4, "MB/s", "lz4 -1",
        t_lz4 / t_save_lz4, "-");
    row("save throughput (lz4), durable", mbytes / t_save_lz4, mbytes / t_lz4_sync, "MB/s",
        "lz4 -1;sync", t_lz4_sync / t_save_lz4, "-");
    row("save CPU (lz4)", c_save_lz4, c_lz4, "s", "lz4 -1", c_save_lz4 / c_lz4, "-");
    row("restore throughput (verified)", mbytes / t_restore, mbytes / t_unzstd, "MB/s",
        "zstd -d", t_unzstd / t_restore, ">= 1.00x");
    row("bf16 size, byte-grouped", bf_g / 1e6, z_bf / 1e6, "MB", "zstd -1", (double)bf_g / z_bf,
        "<= 0.878x");
    row("bf16 size, not grouped", bf_p / 1e6, z_bf / 1e6, "MB", "zstd -1", (double)bf_p / z_bf,
        "-");
    row("fp32 size, byte-grouped", fp_g / 1e6, z_fp / 1e6, "MB", "zstd -1", (double)fp_g / z_fp,
        "<= 0.840x");
    row("fp32 size, not grouped", fp_p / 1e6, z_fp / 1e6, "MB", "zstd -1", (double)fp_p / z_fp,
        "-");
    row("ckpt_save stall (warm)", t_stall * 1e3, t_memcpy * 1e3, "ms", "memcpy",
        t_stall / t_memcpy, "<= 1.25x");
    row("bytes after a 1% change", s.newest_new / 1e6, s.prev_new / 1e6, "MB", "full save",
        (double)s.newest_new / (double)s.prev_new, "<= 0.03x");
    row("save's peak RSS less the state", (double)peak_max / 1e6, mbytes + pool / 1e6, "MB",
        "state + pool", (double)peak_max / ((double)total + pool), "<= 1.00x");
    printf("\nratio: for throughput peer time / ckpt time (higher is better); for sizes, "
           "stall, bytes, CPU and memory ckpt / peer (lower is better). CPU: user+sys seconds "
           "of the whole save (ckpt: hashing, compression, writes, commit). Peak RSS: the "
           "process's high-water mark while a fresh context protects the inputs, saves and "
           "commits, above what it held before (the inputs themselves); the pool is %u "
           "workers x 3 chunk buffers of 4 MiB.\n",
           workers);
    if (!getenv("CKPT_BENCH_KEEP")) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "bench: cleanup of %s failed\n", dir);
    }
    free(all);
    return 0;
}
