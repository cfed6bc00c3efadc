/* proctree.c -- see proctree.h. Async-signal-safe throughout: no stdio, no
 * allocation, no locks. */
#include "sup/proctree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

/* Read a /proc file into buf (NUL-terminated). @return length or -1. */
static int read_file(const char *path, char *buf, int n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC), got = 0;
    ssize_t r;
    if (fd < 0)
        return -1;
    while (got < n - 1 && (r = read(fd, buf + got, (size_t)(n - 1 - got))) != 0) {
        if (r < 0) {
            if (errno == EINTR)
                continue;
            got = -1;
            break;
        }
        got += (int)r;
    }
    close(fd);
    if (got >= 0)
        buf[got] = '\0';
    return got;
}

/* "/proc/<pid>/<leaf>" without snprintf (not async-signal-safe). */
static void proc_path(char *out, int pid, const char *leaf)
{
    char digits[16];
    int k = 0;
    static const char pre[] = "/proc/";
    memcpy(out, pre, sizeof pre - 1);
    out += sizeof pre - 1;
    do {
        digits[k++] = (char)('0' + pid % 10);
        pid /= 10;
    } while (pid > 0 && k < 15);
    while (k)
        *out++ = digits[--k];
    *out++ = '/';
    while (*leaf)
        *out++ = *leaf++;
    *out = '\0';
}

static const char *skip_field(const char *p)
{
    while (*p && *p != ' ')
        p++;
    while (*p == ' ')
        p++;
    return p;
}

static uint64_t parse_u(const char *p, int *ok)
{
    uint64_t v = 0;
    *ok = *p >= '0' && *p <= '9';
    while (*p >= '0' && *p <= '9')
        v = v * 10 + (uint64_t)(*p++ - '0');
    return v;
}

int pt_stat(int pid, struct pt_proc *out)
{
    char path[48], buf[1024];
    const char *p;
    int ok, len;

    if (pid <= 0)
        return -1;
    proc_path(path, pid, "stat");
    len = read_file(path, buf, (int)sizeof buf);
    if (len <= 0)
        return -1;
    /* The command name (field 2) may hold spaces and ')': fields 3.. begin
     * after the last ')'. */
    p = NULL;
    for (int i = len - 1; i >= 0; i--)
        if (buf[i] == ')') {
            p = buf + i + 1;
            break;
        }
    if (!p)
        return -1;
    while (*p == ' ')
        p++;
    out->pid = pid;
    out->state = *p;
    p = skip_field(p);            /* field 4: ppid */
    out->ppid = (int)parse_u(p, &ok);
    if (!ok)
        return -1;
    for (int f = 4; f < 22; f++)  /* to field 22: starttime */
        p = skip_field(p);
    out->start = parse_u(p, &ok);
    return ok ? 0 : -1;
}

int pt_scan(struct pt_proc *v, int max)
{
    char buf[4096];
    int fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC), n = 0;
    long r;

    if (fd < 0)
        return -1;
    while (n < max && (r = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
        for (long off = 0; off < r && n < max;) {
            struct dirent64 *de = (struct dirent64 *)(buf + off);
            const char *name = de->d_name;
            int pid = 0, digits = 1;
            off += de->d_reclen;
            for (const char *c = name; *c; c++) {
                if (*c < '0' || *c > '9') {
                    digits = 0;
                    break;
                }
                pid = pid * 10 + (*c - '0');
            }
            if (digits && pid > 0 && pt_stat(pid, &v[n]) == 0)
                n++;
        }
    }
    close(fd);
    return n;
}

int pt_find(const struct pt_proc *v, int n, int pid)
{
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (v[mid].pid == pid)
            return mid;
        if (v[mid].pid < pid)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    for (int i = 0; i < n; i++) /* not sorted after all: slow path */
        if (v[i].pid == pid)
            return i;
    return -1;
}

int pt_mark_descendants(const struct pt_proc *v, int n, int root, unsigned char *mark)
{
    int total = 0, changed = 1;

    for (int i = 0; i < n; i++)
        mark[i] = 0;
    /* One pass per level of the tree: a pass marks every process whose
     * parent is root or already marked. */
    while (changed) {
        changed = 0;
        for (int i = 0; i < n; i++) {
            int j;
            if (mark[i] || v[i].pid == root)
                continue;
            if (v[i].ppid == root || ((j = pt_find(v, n, v[i].ppid)) >= 0 && mark[j])) {
                mark[i] = 1;
                total++;
                changed = 1;
            }
        }
    }
    return total;
}

int pt_descends(int pid, int anc)
{
    struct pt_proc p;
    for (int depth = 0; depth < 64 && pid > 1; depth++) {
        if (pid == anc)
            return 1;
        if (pt_stat(pid, &p) != 0)
            return 0;
        pid = p.ppid;
    }
    return pid == anc;
}

int pt_catches(int pid, int sig)
{
    char path[48], buf[4096];
    const char *p;
    uint64_t mask = 0;

    proc_path(path, pid, "status");
    if (read_file(path, buf, (int)sizeof buf) <= 0 || !(p = strstr(buf, "SigCgt:")))
        return -1;
    p += 7;
    while (*p == ' ' || *p == '\t')
        p++;
    for (; *p; p++) {
        int d = *p >= '0' && *p <= '9' ? *p - '0'
                : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
                : *p >= 'A' && *p <= 'F' ? *p - 'A' + 10 : -1;
        if (d < 0)
            break;
        mask = mask << 4 | (uint64_t)d;
    }
    return sig >= 1 && sig <= 64 ? (int)((mask >> (sig - 1)) & 1) : -1;
}

int pt_signal(int pid, uint64_t start, int sig)
{
    struct pt_proc p;
    int rc = -1;
    long fd = syscall(SYS_pidfd_open, pid, 0);

    if (fd < 0) {
        /* No pidfds (kernel before 5.3): check, then kill -- a narrow
         * window for reuse remains there. */
        if (errno == ENOSYS && pt_stat(pid, &p) == 0 && p.start == start)
            rc = kill(pid, sig);
        return rc == 0 ? 0 : -1;
    }
    /* The pidfd pins the process that had this PID when it was opened; if
     * /proc now shows the start time we expect, that is the one. */
    if (pt_stat(pid, &p) == 0 && p.start == start &&
        syscall(SYS_pidfd_send_signal, (int)fd, sig, NULL, 0) == 0)
        rc = 0;
    close((int)fd);
    return rc;
}
