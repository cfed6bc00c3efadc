/*
 * preload_bench.c -- what libckpt_preload.so costs a program's ordinary I/O.
 *
 * Times an open/write/close loop on files *outside* CKPT_DIR (the case the
 * shim must not slow down: logs, datasets, caches), in this process without
 * the shim and in a re-executed copy of itself with LD_PRELOAD set, and
 * prints a table. The shim is configured as under ckptrun (CKPT_DIR and
 * CKPT_SOCKET set) so its checks really run. Target: <= 5% slower.
 *
 *   preload_bench [--so PATH] [--iters N] [--reps N] [--dir DIR]
 *
 * Each cell is the best of --reps runs (the least disturbed by the rest of
 * the machine), in CPU nanoseconds per open+write+close; runs with and without
 * the shim alternate, so drift hits both alike. Files go to DIR (default
 * /dev/shm when present, else /tmp): on a disk file system the truncation's
 * journal work is most of the time and its noise hides what is measured.
 * Exits 0 when every run worked: a bench reports, it does not judge (the
 * ratio is in the table).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef CKPT_PRELOAD_SO
#define CKPT_PRELOAD_SO "libckpt_preload.so"
#endif

/* The last two isolate the wrappers: a failing open and a close(-1) do
 * almost no kernel work, so the shim's own cost shows as absolute ns. */
enum { CASE_ABS, CASE_REL, CASE_STDIO, CASE_ENOENT, CASE_EBADF, NCASES };
static const char *const case_names[NCASES] = {
    "open(abs)+write+close", "open(rel)+write+close", "fopen+fwrite+fclose",
    "open(missing) ENOENT", "close(-1) EBADF"
};

/* CPU time of this process (user + system), not wall time: on a shared
 * machine the time spent waiting for a CPU would otherwise swamp the few
 * nanoseconds being measured. */
static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* @return ns per iteration of one case, or -1 on an I/O error. */
static double run_case(int c, const char *dir, long iters)
{
    char path[4096];
    static const char data[64] = "ckpt preload bench payload";
    if (c == CASE_REL)
        snprintf(path, sizeof path, "bench-rel.bin");
    else
        snprintf(path, sizeof path, "%s/bench-%d.bin", dir, c);
    double t0 = now_ns();
    if (c == CASE_ENOENT)
        snprintf(path, sizeof path, "%s/no-such-dir/x", dir);
    for (long i = 0; i < iters; i++) {
        if (c == CASE_ENOENT) {
            if (open(path, O_WRONLY | O_CREAT, 0600) >= 0)
                return -1;
        } else if (c == CASE_EBADF) {
            if (close(-1) == 0)
                return -1;
        } else if (c == CASE_STDIO) {
            FILE *f = fopen(path, "w");
            if (!f || fwrite(data, 1, sizeof data, f) != sizeof data ||
                fclose(f) != 0)
                return -1;
        } else {
            int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
            if (fd < 0 || write(fd, data, sizeof data) != (ssize_t)sizeof data ||
                close(fd) != 0)
                return -1;
        }
    }
    return (now_ns() - t0) / (double)iters;
}

/* Child mode: run every case once after a warm-up, print "case ns" lines
 * on stdout. */
static int child(const char *dir, long iters)
{
    if (chdir(dir) != 0)
        return 1;
    for (int c = 0; c < NCASES; c++) {
        if (run_case(c, dir, iters / 10 + 1) < 0)
            return 1;
        double ns = run_case(c, dir, iters);
        if (ns < 0)
            return 1;
        printf("%d %.1f\n", c, ns);
    }
    return 0;
}

static int measure(const char *self, const char *so, const char *dir,
                   const char *ckdir, const char *sock, long iters,
                   double best[NCASES])
{
    char cmd[8192];
    /* Fresh process for both variants, so neither inherits warm state. */
    snprintf(cmd, sizeof cmd,
             "%s%s%s CKPT_DIR='%s' CKPT_SOCKET='%s' '%s' --child '%s' %ld",
             so ? "LD_PRELOAD='" : "env -u LD_PRELOAD", so ? so : "",
             so ? "'" : "", ckdir, sock, self, dir, iters);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    int c;
    double ns;
    int n = 0;
    while (fscanf(p, "%d %lf", &c, &ns) == 2)
        if (c >= 0 && c < NCASES) {
            if (best[c] < 0 || ns < best[c])
                best[c] = ns;
            n++;
        }
    int st = pclose(p);
    return (st == 0 && n == NCASES) ? 0 : -1;
}

int main(int argc, char **argv)
{
    const char *so = CKPT_PRELOAD_SO;
    long iters = 20000;
    int reps = 5;

    const char *root = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";

    if (argc == 4 && strcmp(argv[1], "--child") == 0)
        return child(argv[2], atol(argv[3]));
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--so") == 0 && i + 1 < argc)
            so = argv[++i];
        else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
            iters = atol(argv[++i]);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
            root = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--so PATH] [--iters N] [--reps N] [--dir DIR]\n",
                    argv[0]);
            return 64;
        }
    }
    if (iters < 1 || reps < 1)
        return 64;

    char dir[4096], ckdir[4200], sock[4200], self[4096];
    if ((size_t)snprintf(dir, sizeof dir, "%s/ckpt-preload-bench-XXXXXX",
                         root) >= sizeof dir || !mkdtemp(dir))
        return 1;
    snprintf(ckdir, sizeof ckdir, "%s/checkpoints", dir);
    snprintf(sock, sizeof sock, "%s/ctl.sock", dir); /* nobody listens */
    mkdir(ckdir, 0700);
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 1;
    self[n] = '\0';

    double base[NCASES], shim[NCASES];
    int ok = 1;
    for (int c = 0; c < NCASES; c++)
        base[c] = shim[c] = -1;
    for (int r = 0; r < reps && ok; r++) {
        /* Alternate which goes first: the second of a pair finds the files
         * and caches warm. */
        const char *first = (r & 1) ? so : NULL;
        const char *second = (r & 1) ? NULL : so;
        ok = measure(self, first, dir, ckdir, sock, iters,
                     first ? shim : base) == 0 &&
             measure(self, second, dir, ckdir, sock, iters,
                     second ? shim : base) == 0;
    }
    if (ok) {
        printf("preload shim overhead, files outside CKPT_DIR "
               "(CPU time, %ld iterations, best of %d)\n", iters, reps);
        printf("%-24s %12s %12s %9s\n", "case", "plain ns/op", "shim ns/op",
               "overhead");
        for (int c = 0; c < NCASES; c++)
            printf("%-24s %12.1f %12.1f %8.1f%%\n", case_names[c], base[c],
                   shim[c], 100.0 * (shim[c] - base[c]) / base[c]);
    } else {
        fprintf(stderr, "preload_bench: a run failed (shim: %s)\n", so);
    }
    char rm[4200];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    if (system(rm) != 0)
        ok = 0;
    return ok ? 0 : 1;
}
