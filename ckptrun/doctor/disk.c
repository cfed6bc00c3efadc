/* doctor/disk.c -- disk and disk-survival: room for a checkpoint in CKPT_DIR, and whether it
 * outlives the instance (doctor/disk.h). */
#include "doctor/disk.h"
#include "doctor/report.h"
#include "base/runlog.h"
#include "notice/notice.h"
#include "opts.h"
#include "base/parse.h"
#include "notice/table.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

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

/* What `mnt` is when the provider names it a disk lost with the VM (its
 * table entry's hints), else NULL. */
static const char *temp_mount(const char *provider, const char *mnt)
{
    const struct notice_hints *h = notice_hints(provider);
    for (size_t i = 0; h && h->temp_mounts && h->temp_mounts[i]; i++)
        if (strcmp(mnt, h->temp_mounts[i]) == 0)
            return h->temp_what;
    return NULL;
}

void check_disk(struct doctor *d)
{
    char path[PATH_MAX], real[PATH_MAX], mnt[PATH_MAX] = "?", type[64] = "?", src[PATH_MAX] = "";
    char b1[32], b2[32], model[128];
    struct statvfs vs;
    uint64_t avail, need = d->state_bytes;
    const char *ov = getenv("CKPT_DOCTOR_DISK_FREE"), *temp;
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
        doctor_add(d, "disk", V_FAIL, "check --dir / CKPT_DIR", "cannot stat %s: %s", real,
            strerror(errno));
        doctor_skip(d, "disk-survival", "disk");
        goto out;
    }
    avail = (uint64_t)vs.f_bavail * vs.f_frsize;
    /* Test hook (docs/doctor.md): pretend the filesystem has this much free. */
    if (ov && *ov)
        ckpt__parse_size(ov, &avail, NULL);
    mount_of(real, mnt, sizeof mnt, type, sizeof type, src, sizeof src);
    ckpt__fmt_bytes(avail, b1, sizeof b1);
    ckpt__fmt_bytes(need, b2, sizeof b2);
    if (avail < need)
        doctor_add(d, "disk", V_FAIL,
            "free space there, or point --dir (CKPT_DIR) at a larger filesystem: the trainer "
            "cannot write its checkpoint, and restore needs the same room",
            "%s free on %s (%s) for %s, a checkpoint needs %s", b1, mnt, type, d->o->dir, b2);
    else if (avail < 2 * need)
        doctor_add(d, "disk", V_WARN,
            "trainers that write the next checkpoint before deleting the previous need twice "
            "the size: free space or keep fewer local checkpoints",
            "%s free on %s (%s): room for one checkpoint of %s, not two", b1, mnt, type, b2);
    else
        doctor_add(d, "disk", V_OK, NULL, "%s free on %s (%s), checkpoint %s", b1, mnt, type, b2);

    nvme_model(src, model, sizeof model);
    if (strcmp(type, "tmpfs") == 0 || strcmp(type, "ramfs") == 0)
        doctor_add(d, "disk-survival", V_OK, NULL,
            "%s is in memory (%s): lost at reboot and with the instance, and it uses RAM; only "
            "the store survives", mnt, type);
    else if (strcmp(type, "overlay") == 0)
        doctor_add(d, "disk-survival", V_OK, NULL,
            "%s is a container's overlay filesystem: lost with the container unless it is a "
            "volume; only the store survives", mnt);
    else if (strstr(model, "Instance Storage"))
        doctor_add(d, "disk-survival", V_OK, NULL,
            "%s is instance-store NVMe (%s): lost when the instance stops; only the store "
            "survives", mnt, model);
    else if ((temp = temp_mount(d->provider, mnt)))
        doctor_add(d, "disk-survival", V_OK, NULL, "%s is %s; only the store survives", mnt,
            temp);
    else
        doctor_add(d, "disk-survival", V_OK, NULL,
            "cannot tell whether %s (%s%s%s) outlives the instance: count on the store only",
            mnt, type, src[0] ? " on " : "", src);
out:
    return;
}
