/* doctor/state.c -- state: how big a checkpoint is (doctor/state.h). */
#include "doctor/state.h"
#include "doctor/report.h"
#include "base/runlog.h"
#include "opts.h"
#include "base/parse.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

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

void check_state(struct doctor *d)
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
        doctor_add(d, "state", V_OK, NULL, "%s (%s)",
                   ckpt__fmt_bytes(d->state_bytes, b1, sizeof b1), d->state_src);
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
        doctor_add(d, "state", V_OK, NULL, "%s (%s)",
                   ckpt__fmt_bytes(d->state_bytes, b1, sizeof b1), d->state_src);
    } else {
        d->state_bytes = DEFAULT_STATE;
        snprintf(d->state_src, sizeof d->state_src, "assumed, synthetic fp32/bf16 weights");
        doctor_add(d, "state", V_WARN,
                   "pass --state-bytes SIZE (e.g. 14GiB: parameters x 2 for bf16 weights, + x 12 "
                   "with fp32 Adam state) or --dir with a checkpoint in it",
                   "no checkpoint in %s: assuming %s", o->dir,
                   ckpt__fmt_bytes(d->state_bytes, b1, sizeof b1));
    }
out:
    return;
}
