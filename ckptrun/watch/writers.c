/* watch/writers.c -- who writes an entry, from /proc: processes holding it
 * open for writing, and what became of them (watch/int.h). A close is only
 * a completion if its writer is still alive after it. */
#include "watch/int.h"
#include "watch/entry.h"
#include "watch/writers.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* State, start time and (zombies) exit status of a process, from
 * /proc/PID/stat (fields 3, 22 and 52). @return 0, -1 when it does not exist. */
static int proc_stat(pid_t pid, char *state, unsigned long long *start, int *exit_code)
{
    char p[64], buf[2048], *rp, *tok, *save = NULL;
    FILE *f;
    size_t n;
    int field = 2;

    snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
    if (!(f = fopen(p, "r")))
        return -1;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    *exit_code = 0;
    /* comm may hold spaces and parentheses: fields start after the last ')'. */
    if (!(rp = strrchr(buf, ')')))
        return -1;
    for (tok = strtok_r(rp + 1, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
        field++;
        if (field == 3)
            *state = tok[0];
        else if (field == 22)
            *start = strtoull(tok, NULL, 10);
        else if (field == 52)
            *exit_code = atoi(tok);
    }
    return field >= 22 ? 0 : -1;
}

/* A zombie's exit status is its own (a live process shows 0 there). */
enum fate writer_fate(const struct wpid *wp)
{
    char state;
    unsigned long long start;
    int code;

    if (proc_stat(wp->pid, &state, &start, &code) != 0 || start != wp->start || state == 'X')
        return F_GONE;
    if (state != 'Z')
        return F_ALIVE;
    return code == 0 ? F_EXITED : F_KILLED; /* a signal, or a failing exit */
}

/* Processes (other than ckptrun) holding `path` or a file under it open for
 * writing, from /proc/PID/fd and fdinfo: any process, not only the child's
 * (a launcher's ranks, a helper). Up to `max` of them into out (out may be
 * NULL: then the first one ends the search). Processes we cannot inspect
 * count as not writing. @return how many were found (at most max, or 1). */
int writers_of(struct watch *w, const char *path, struct wpid *out, int max)
{
    DIR *proc = NULL, *fdd = NULL;
    struct dirent *de, *fe;
    char p[PATH_MAX], target[PATH_MAX], buf[512];
    size_t plen = strlen(path);
    int found = 0, limit = out ? max : 1;

    if (!(proc = opendir("/proc")))
        goto out;
    while (found < limit && (de = readdir(proc)) != NULL) {
        FILE *f;
        pid_t pid;
        int writes = 0;
        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        pid = (pid_t)atol(de->d_name);
        if (pid == w->self)
            continue;
        snprintf(p, sizeof p, "/proc/%s/fd", de->d_name);
        if (!(fdd = opendir(p)))
            continue;
        while (!writes && (fe = readdir(fdd)) != NULL) {
            char lp[PATH_MAX];
            ssize_t tl;
            unsigned long flags = 0;
            if (fe->d_name[0] == '.')
                continue;
            snprintf(lp, sizeof lp, "/proc/%s/fd/%s", de->d_name, fe->d_name);
            tl = readlink(lp, target, sizeof target - 1);
            if (tl < 0)
                continue;
            target[tl] = '\0';
            if (strncmp(target, path, plen) != 0 || (target[plen] != '\0' && target[plen] != '/'))
                continue;
            snprintf(lp, sizeof lp, "/proc/%s/fdinfo/%s", de->d_name, fe->d_name);
            if (!(f = fopen(lp, "r")))
                continue;
            while (fgets(buf, sizeof buf, f))
                if (sscanf(buf, "flags: %lo", &flags) == 1)
                    break;
            fclose(f);
            if ((flags & O_ACCMODE) != O_RDONLY)
                writes = 1;
        }
        closedir(fdd);
        fdd = NULL;
        if (writes) {
            char state;
            int code;
            if (out && proc_stat(pid, &state, &out[found].start, &code) == 0)
                out[found].pid = pid;
            else if (out)
                continue; /* gone meanwhile */
            found++;
        }
    }
out:
    if (proc)
        closedir(proc);
    return found;
}

int writer_under(struct watch *w, const struct entry *e)
{
    char p[PBUF];
    entry_path(w, e, p, sizeof p);
    return writers_of(w, p, NULL, 0) > 0;
}

/* Writers of file entries being written, learnt while they write: their
 * close is only a completion if they are still alive after it. */
void scan_writers(struct watch *w, int64_t now, int64_t *next)
{
    char p[PBUF];
    for (size_t i = 0; i < w->nent; i++) {
        struct entry *e = &w->ent[i];
        if (!e->in_use || e->kind != K_FILE || !e->writing || e->nwp > 0)
            continue;
        if (now - e->wscan >= WSCAN_MS) {
            struct wpid got[MAX_WRITERS];
            int n;
            entry_path(w, e, p, sizeof p);
            n = writers_of(w, p, got, MAX_WRITERS);
            for (int k = 0; k < n && e->nwp < MAX_WRITERS; k++) {
                int dup = 0;
                for (int q = 0; q < e->nwp; q++)
                    dup |= e->wp[q].pid == got[k].pid && e->wp[q].start == got[k].start;
                if (!dup)
                    e->wp[e->nwp++] = got[k];
            }
            e->wscan = now;
        }
        if (now - e->changed < 2 * WSCAN_MS)
            due_min(next, e->wscan + WSCAN_MS);
    }
}
