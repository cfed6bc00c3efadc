/* watch.c -- see watch.h; the rules are documented in docs/ckptrun.md,
 * "Watched directory". */
#include "watch.h"
#include "log.h"
#include "parse.h"
#include "record.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_ENTRIES 4096
#define MAX_WATCHES 8192
#define MAX_DEPTH 16
/* Paths built from the directory (< PATH_MAX) and a name (< 256). */
#define PBUF (PATH_MAX + 512)

#define CLOSE_MS 300        /* a close is judged this long after it happened */
#define LINK_QUIET_MS 300   /* links are read once unchanged this long */
#define LINK_WAIT_MAX_MS 1000 /* ... or after this long, if they never stop */
#define QUIET_MAX_MS 2000   /* after a marker: min(settle, this) with no change */
#define WSCAN_MS 100        /* while a file entry is written: look for its writers */
#define WRITER_POLL_MS 250  /* someone holds it open for writing: look again */
#define MAX_WRITERS 4
#define MAX_MOVES 64
#define MAX_MARKS 64        /* files/ marks read at start */
#define STUCK_MIN_MS 1000

enum kind { K_FILE, K_DIR, K_LINK };
enum trigger { T_NONE, T_RENAMED, T_MARKER, T_CLOSE };

/* What an entry looks like on disk; equal signatures = nothing changed. */
struct sig {
    struct commit_print p;    /* files as a commit reads them */
    uint64_t link_hash;       /* symbolic links: where they point */
    int has_marker;
};

struct wpid {
    pid_t pid;
    unsigned long long start; /* /proc/PID/stat starttime: PIDs are reused */
};

/* What became of a writer, as far as /proc tells. */
enum fate { F_ALIVE, F_EXITED, F_KILLED, F_GONE };

struct entry {
    char name[256];
    enum kind kind;
    int in_use;
    uint64_t gen;             /* instance: a name deleted and made again is new */
    int64_t changed;          /* mono ms of the last change seen */
    int64_t sig_at;           /* when sig was computed */
    int touched;              /* an event since then */
    struct sig sig;           /* as last computed */
    int sig_ok;               /* the last walk saw everything (nothing vanished) */
    enum trigger trigger;     /* completion evidence waiting to be judged */
    int64_t trig_at;
    int fresh;                /* never complete: events may have been missed, a
                                 marker already there counts */
    int removing;             /* lost a file or directory: never complete again
                                 unless its marker is written again */
    int torn;                 /* its last close was its writer dying or being
                                 stopped: settling never completes it */
    int ok;                   /* ok_sig is a complete version (while sig == ok_sig) */
    struct sig ok_sig;
    int64_t ok_at;
    int done;                 /* done_sig was committed */
    struct sig done_sig;
    int failed;               /* failed_sig failed to commit: retried once changed */
    struct sig failed_sig;
    uint64_t step;            /* from the name, or the counter at completion */
    int numbered;
    struct wpid wp[MAX_WRITERS]; /* writers seen while it was written (files) */
    int nwp;
    int writing;              /* modified since its last close */
    int close_killed;         /* a writer of it was seen killed at its close */
    int64_t wscan;
    char *link;               /* K_LINK: readlink text */
};

struct wmap {
    int wd;
    char entry[256];          /* top-level entry name; "" = the root */
};

/* One part of a snapshot: an entry, or a link. */
struct member {
    char name[256];
    uint64_t gen;
    int link_item;            /* committed as a link (ckpt_protect_link) */
    int is_link;              /* a symbolic link of the directory */
    struct sig sig;
};

struct watch_job {
    struct watch_job *next;
    uint64_t step;
    int head;                 /* the newest state, not an older step's fix-up */
    int64_t completed;
    int64_t changed;
    char entry[256];
    size_t n;
    struct commit_src *src;   /* paths/names/link malloc'd */
    struct member *m;         /* n, parallel to src */
    struct commit_print expect;
};

struct head_item {
    char name[256];
    int is_link;
    struct sig sig;
};

struct move {
    uint32_t cookie;
    char entry[256];
    uint64_t gen;
};

struct watch {
    char dir[PATH_MAX];
    char marker[256];
    uint64_t settle_ms;
    int ifd;
    int pipe_r, pipe_w;
    pid_t pgid;
    pid_t self;
    uint64_t counter;         /* next step for names without a number */
    uint64_t gen_next;
    int dirty;                /* something to look at before the next due time */
    int paused;               /* the child commits the run itself: hands off */
    int child_alive, child_clean;
    int64_t stop_at;          /* ckptrun signals the child's group from then on */
    int64_t links_changed;    /* a symbolic link was made, removed or re-pointed */
    int jobs_out;             /* queued or in flight, not yet taken (main thread) */
    int64_t links_failed;     /* links_changed when a snapshot for it failed */
    int64_t wait_since;       /* a snapshot has been waiting for quiet links since */
    int64_t stuck_since;      /* pending entries and no commit since */
    int stuck_told;
    struct entry *ent;
    size_t nent;
    struct wmap *wm;
    size_t nwm;
    struct move mv[MAX_MOVES];
    size_t nmv;
    struct head_item *head;   /* the newest snapshot committed */
    size_t nhead;
    int have_head;

    /* Shared with the worker: guarded by mu. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct watch_job *qhead, *qtail;
    int busy;                 /* queued + in flight */
    int stop;

    /* Worker only (and ckpt_request, which is thread-safe). */
    struct ckpt_ctx *ctx;
    pthread_t thr;
    int thr_started;
};

static uint64_t quiet_ms(const struct watch *w)
{
    return w->settle_ms < QUIET_MAX_MS ? w->settle_ms : QUIET_MAX_MS;
}

static void entry_path(const struct watch *w, const struct entry *e, char *p, size_t n)
{
    snprintf(p, n, "%s/%s", w->dir, e->name);
}

/* ---- entries and inotify watches ------------------------------------------ */

static struct entry *find_entry(struct watch *w, const char *name)
{
    for (size_t i = 0; i < w->nent; i++)
        if (w->ent[i].in_use && strcmp(w->ent[i].name, name) == 0)
            return &w->ent[i];
    return NULL;
}

static struct entry *find_gen(struct watch *w, const char *name, uint64_t gen)
{
    struct entry *e = find_entry(w, name);
    return e && e->gen == gen ? e : NULL;
}

static void add_wd(struct watch *w, int wd, const char *entry)
{
    for (size_t i = 0; i < w->nwm; i++)
        if (w->wm[i].wd == wd) {
            snprintf(w->wm[i].entry, sizeof w->wm[i].entry, "%s", entry);
            return;
        }
    if (w->nwm >= MAX_WATCHES)
        return;
    w->wm[w->nwm].wd = wd;
    snprintf(w->wm[w->nwm].entry, sizeof w->wm[w->nwm].entry, "%s", entry);
    w->nwm++;
}

static const char *wd_entry(struct watch *w, int wd)
{
    for (size_t i = 0; i < w->nwm; i++)
        if (w->wm[i].wd == wd)
            return w->wm[i].entry;
    return NULL;
}

static void drop_wd(struct watch *w, int wd)
{
    for (size_t i = 0; i < w->nwm; i++)
        if (w->wm[i].wd == wd) {
            w->wm[i] = w->wm[--w->nwm];
            return;
        }
}

#define SUB_MASK (IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | \
                  IN_DELETE | IN_ATTRIB | IN_ONLYDIR)

/* Watch a directory inside an entry and every directory below it. */
static void watch_tree(struct watch *w, const char *path, const char *entry, int depth)
{
    DIR *d;
    struct dirent *de;
    char p[PATH_MAX];
    int wd;

    if (depth > MAX_DEPTH)
        return;
    wd = inotify_add_watch(w->ifd, path, SUB_MASK);
    if (wd < 0) {
        log_msg(LOG_DEBUG, "watch", "cannot watch %s: %s", path, strerror(errno));
        return;
    }
    add_wd(w, wd, entry);
    if (!(d = opendir(path)))
        return;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
            continue;
        if ((size_t)snprintf(p, sizeof p, "%s/%s", path, de->d_name) >= sizeof p)
            continue;
        struct stat sb;
        if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
            watch_tree(w, p, entry, depth + 1);
    }
    closedir(d);
}

static void read_link(struct watch *w, struct entry *e)
{
    char p[PBUF], t[PATH_MAX];
    ssize_t n;

    free(e->link);
    e->link = NULL;
    entry_path(w, e, p, sizeof p);
    n = readlink(p, t, sizeof t - 1);
    if (n >= 0) {
        t[n] = '\0';
        e->link = strdup(t);
    }
}

/* (Re)initialize `e` as a new instance of what `name` is on disk now. */
static int init_entry(struct watch *w, struct entry *e, const char *name, int64_t now)
{
    char p[PBUF];
    struct stat sb;

    free(e->link);
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    entry_path(w, e, p, sizeof p);
    if (lstat(p, &sb) != 0 ||
        (!S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode) && !S_ISLNK(sb.st_mode)))
        return -1;
    e->in_use = 1;
    e->gen = ++w->gen_next;
    e->kind = S_ISLNK(sb.st_mode) ? K_LINK : S_ISDIR(sb.st_mode) ? K_DIR : K_FILE;
    e->changed = now;
    e->fresh = 1;
    e->numbered = e->kind != K_LINK && parse_step_from_name(name, &e->step);
    if (e->numbered)
        watch_note_step(w, e->step);
    if (e->kind == K_LINK) {
        read_link(w, e);
        w->links_changed = now;
    }
    if (e->kind == K_DIR)
        watch_tree(w, p, name, 0);
    w->dirty = 1;
    return 0;
}

static struct entry *add_entry(struct watch *w, const char *name, int64_t now)
{
    struct entry *e = find_entry(w, name), *out = e;

    if (e || name_is_temporary(name) || strlen(name) >= sizeof e->name)
        goto out; /* known already, or never an entry */
    for (size_t i = 0; i < w->nent && !e; i++)
        if (!w->ent[i].in_use)
            e = &w->ent[i];
    if (!e) {
        if (w->nent >= MAX_ENTRIES)
            goto out;
        e = &w->ent[w->nent++];
    }
    out = init_entry(w, e, name, now) == 0 ? e : NULL;
out:
    return out;
}

static void remove_entry(struct watch *w, struct entry *e, int64_t now)
{
    /* Its inotify watches go away by themselves (IN_IGNORED). */
    if (e->kind == K_LINK)
        w->links_changed = now;
    free(e->link);
    e->link = NULL;
    e->in_use = 0;
    w->dirty = 1;
}

/* The entry lost a file or directory: it is being removed (HF Trainer's
 * rotation deletes an old checkpoint-N/ file by file) or taken apart, and
 * what is left is not that checkpoint any more. */
static void entry_lost(struct watch *w, struct entry *e, const char *what)
{
    if (e->removing)
        return;
    e->removing = 1;
    e->ok = 0;
    e->trigger = T_NONE;
    w->dirty = 1;
    log_msg(LOG_DEBUG, "watch", "%s lost %s: being removed, not committed again", e->name,
            what);
}

/* ---- signatures, markers, writers ------------------------------------------- */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

struct marker_user {
    const char *glob;
    int *found;
};

static void marker_cb(void *user, const char *name)
{
    struct marker_user *u = user;
    if (u->glob[0] && fnmatch(u->glob, name, 0) == 0)
        *u->found = 1;
}

/* @return 0, or -1 when something vanished during the walk (the entry is
 * changing; *s holds what was seen). A link's signature is its target text
 * plus what it points to (nothing when dangling). */
static int entry_sig(struct watch *w, const struct entry *e, struct sig *s)
{
    char p[PBUF];
    struct marker_user mu = { w->marker, &s->has_marker };

    memset(s, 0, sizeof *s);
    entry_path(w, e, p, sizeof p);
    if (e->kind == K_LINK) {
        s->link_hash = e->link ? hash_str(e->link) : 1;
        if (commit_print_path(p, &s->p, NULL, NULL) != 0)
            memset(&s->p, 0, sizeof s->p);
        return 0;
    }
    return commit_print_path(p, &s->p, e->kind == K_DIR ? marker_cb : NULL, &mu);
}

static int sig_eq(const struct sig *a, const struct sig *b)
{
    return commit_print_eq(&a->p, &b->p) && a->link_hash == b->link_hash;
}

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
static enum fate writer_fate(const struct wpid *wp)
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
static int writers_of(struct watch *w, const char *path, struct wpid *out, int max)
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

static int writer_under(struct watch *w, const struct entry *e)
{
    char p[PBUF];
    entry_path(w, e, p, sizeof p);
    return writers_of(w, p, NULL, 0) > 0;
}

/* ---- links ------------------------------------------------------------------- */

enum link_class { L_NONE, L_INSIDE, L_OUTSIDE };

/* A target text libckpt stores as is: relative, no empty, "." or ".."
 * component (so it names the path it resolves to, lexically). */
static int link_text_clean(const char *t)
{
    if (!*t || *t == '/')
        return 0;
    for (const char *s = t;;) {
        size_t n = strcspn(s, "/");
        if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
            return 0;
        s += n;
        if (!*s)
            return 1;
        s++;
    }
}

/* Where a link of the directory points. L_INSIDE: into a file or
 * directory entry `*target` (or something inside one); *copy says whether it
 * is committed as what it points to rather than as a link item (a link item
 * needs a clean relative text naming the real path, landing on a file or on
 * a directory holding files). L_OUTSIDE: anywhere else that exists,
 * committed as what it points to. L_NONE: dangling. */
static enum link_class link_class(struct watch *w, const struct entry *l, struct entry **target,
                                  int *copy)
{
    char p[PBUF], real[PATH_MAX], first[256];
    const char *rel;
    size_t n = strlen(w->dir);
    struct entry *t;
    struct stat sb;

    *target = NULL;
    *copy = 1;
    entry_path(w, l, p, sizeof p);
    if (!l->link || !realpath(p, real) || stat(real, &sb) != 0)
        return L_NONE;
    if (strncmp(real, w->dir, n) != 0 || real[n] != '/')
        return L_OUTSIDE;
    rel = real + n + 1;
    snprintf(first, sizeof first, "%.*s", (int)strcspn(rel, "/"), rel);
    t = find_entry(w, first);
    if (!t || t->kind == K_LINK || t == l)
        return L_OUTSIDE; /* a temporary name, or not seen yet */
    *target = t;
    if (link_text_clean(l->link) && strcmp(l->link, rel) == 0) {
        struct commit_print cp = { 0 };
        *copy = !(S_ISREG(sb.st_mode) ||
                  (S_ISDIR(sb.st_mode) && commit_print_path(real, &cp, NULL, NULL) == 0 &&
                   cp.files > 0));
    }
    return L_INSIDE;
}

/* ---- jobs ------------------------------------------------------------------ */

static void job_free(struct watch_job *j)
{
    if (!j)
        return;
    for (size_t i = 0; i < j->n; i++) {
        free((char *)j->src[i].path);
        free((char *)j->src[i].name);
        free((char *)j->src[i].link);
    }
    free(j->src);
    free(j->m);
    free(j);
}

static int includable(const struct entry *e)
{
    return e->in_use && e->kind != K_LINK && e->ok && !e->removing && e->sig_ok &&
           e->sig.p.files > 0 && sig_eq(&e->sig, &e->ok_sig);
}

static int needs_commit(const struct entry *e)
{
    return includable(e) && (!e->done || !sig_eq(&e->ok_sig, &e->done_sig)) &&
           !(e->failed && sig_eq(&e->ok_sig, &e->failed_sig));
}

/* A snapshot being planned: members by entry. */
struct plan {
    struct entry *e[MAX_ENTRIES];
    int link_item[MAX_ENTRIES];
    size_t n;
};

static int plan_has(const struct plan *pl, const struct entry *e)
{
    for (size_t i = 0; i < pl->n; i++)
        if (pl->e[i] == e)
            return 1;
    return 0;
}

static void plan_add(struct plan *pl, struct entry *e, int link_item)
{
    if (pl->n < MAX_ENTRIES && !plan_has(pl, e)) {
        pl->e[pl->n] = e;
        pl->link_item[pl->n] = link_item;
        pl->n++;
    }
}

/* Can link `l` be part of a snapshot now? A link into the directory goes
 * with its target entry once that is complete (*target); a link to outside
 * once what it points to has not changed for the quiet time (a log growing
 * behind a link never holds a commit back); a dangling one never. */
static enum link_class link_member(struct watch *w, const struct entry *l, int64_t now,
                                   struct entry **target, int *copy)
{
    enum link_class c = link_class(w, l, target, copy);
    if (c == L_INSIDE && !includable(*target))
        c = L_NONE;
    if (c == L_OUTSIDE && (l->sig.p.files == 0 || now - l->changed < (int64_t)quiet_ms(w)))
        c = L_NONE;
    return c;
}

/* Links of the directory that belong to a snapshot: those pointing into one
 * of its entries (all of them when `all`, which also takes links to any other
 * complete entry, adding that entry), and, when `all`, links to outside. */
static void plan_links(struct watch *w, struct plan *pl, int all, int64_t now)
{
    for (size_t i = 0; i < w->nent; i++) {
        struct entry *l = &w->ent[i], *t;
        int copy;
        if (!l->in_use || l->kind != K_LINK)
            continue;
        switch (link_member(w, l, now, &t, &copy)) {
        case L_INSIDE:
            if (!all && !plan_has(pl, t))
                break;
            plan_add(pl, t, 0);
            plan_add(pl, l, !copy); /* restored as a link, made last */
            break;
        case L_OUTSIDE:
            if (all)
                plan_add(pl, l, 0);
            break;
        case L_NONE:
            break;
        }
    }
}

/* Have the links changed since the newest snapshot committed? Only a link
 * made, removed or re-pointed counts (its target changing does not), and a
 * link that cannot be part of a snapshot yet waits. */
static int links_changed_vs_head(struct watch *w, int64_t now)
{
    for (size_t i = 0; i < w->nent; i++) {
        struct entry *l = &w->ent[i], *t;
        int found = 0, copy;
        if (!l->in_use || l->kind != K_LINK || link_member(w, l, now, &t, &copy) == L_NONE)
            continue;
        for (size_t k = 0; k < w->nhead && !found; k++)
            if (w->head[k].is_link && strcmp(w->head[k].name, l->name) == 0) {
                if (w->head[k].sig.link_hash != l->sig.link_hash)
                    return 1;
                found = 1;
            }
        if (!found)
            return 1;
    }
    for (size_t k = 0; k < w->nhead; k++) {
        struct entry *l;
        if (!w->head[k].is_link)
            continue;
        l = find_entry(w, w->head[k].name);
        if (!l || l->kind != K_LINK)
            return 1; /* removed (and not made again) */
    }
    return 0;
}

static int job_add_src(struct watch *w, struct watch_job *j, struct entry *e, int link_item)
{
    char p[PBUF];
    struct commit_src *v;
    struct member *m;
    int rc = -1;

    if (!(v = realloc(j->src, (j->n + 1) * sizeof *v)))
        goto out;
    j->src = v;
    if (!(m = realloc(j->m, (j->n + 1) * sizeof *m)))
        goto out;
    j->m = m;
    entry_path(w, e, p, sizeof p);
    memset(&v[j->n], 0, sizeof v[j->n]);
    memset(&m[j->n], 0, sizeof m[j->n]);
    v[j->n].path = strdup(p);
    v[j->n].name = strdup(e->name);
    if (link_item)
        v[j->n].link = e->link ? strdup(e->link) : NULL;
    if (!v[j->n].path || !v[j->n].name || (link_item && !v[j->n].link)) {
        free((char *)v[j->n].path);
        free((char *)v[j->n].name);
        free((char *)v[j->n].link);
        goto out;
    }
    snprintf(m[j->n].name, sizeof m[j->n].name, "%s", e->name);
    m[j->n].gen = e->gen;
    m[j->n].link_item = link_item;
    m[j->n].is_link = e->kind == K_LINK;
    m[j->n].sig = e->kind == K_LINK ? e->sig : e->ok_sig;
    if (!link_item)
        commit_print_add(&j->expect, &m[j->n].sig.p);
    j->n++;
    rc = 0;
out:
    return rc;
}

/* Queue the commit of a planned snapshot. */
static void queue_plan(struct watch *w, struct plan *pl, int head, int64_t now)
{
    struct watch_job *j = calloc(1, sizeof *j);
    int64_t newest = -1;
    int have_step = 0;

    if (!j)
        goto fail;
    j->head = head;
    j->completed = now;
    for (size_t i = 0; i < pl->n; i++) {
        struct entry *e = pl->e[i];
        if (job_add_src(w, j, e, pl->link_item[i]) != 0)
            goto fail;
        if (e->kind == K_LINK)
            continue;
        /* The snapshot takes its highest entry's step. */
        if (!have_step || e->step > j->step)
            j->step = e->step;
        have_step = 1;
        if (e->changed > j->changed)
            j->changed = e->changed;
        if (needs_commit(e) && e->ok_at > newest) {
            newest = e->ok_at;
            snprintf(j->entry, sizeof j->entry, "%s", e->name);
        }
    }
    if (!have_step) {
        job_free(j); /* links to outside only: nothing to anchor a step */
        return;
    }
    if (!j->entry[0])
        snprintf(j->entry, sizeof j->entry, "%s", j->m[0].name);
    watch_note_step(w, j->step);
    w->jobs_out++;
    w->stuck_since = 0;
    w->wait_since = 0;
    pthread_mutex_lock(&w->mu);
    if (w->qtail)
        w->qtail->next = j;
    else
        w->qhead = j;
    w->qtail = j;
    w->busy++;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return;
fail:
    log_msg(LOG_ERROR, "watch", "out of memory queueing a commit of %s", w->dir);
    job_free(j);
}

/* Ready once the links have not changed for a moment and its new entries
 * have been complete for as long (Lightning remakes last.ckpt just after the
 * rename); at once when the child is gone; and at the latest a second after
 * a snapshot began to wait (links remade faster than that never settle).
 * @return 1, or 0 with *due. */
static int plan_ready(struct watch *w, const struct plan *pl, int64_t now, int64_t *due)
{
    int64_t at = w->links_changed + LINK_QUIET_MS;

    if (!w->child_alive)
        return 1;
    for (size_t i = 0; i < pl->n; i++)
        if (pl->e[i]->kind != K_LINK && needs_commit(pl->e[i]) &&
            pl->e[i]->ok_at + LINK_QUIET_MS > at)
            at = pl->e[i]->ok_at + LINK_QUIET_MS;
    if (!w->wait_since)
        w->wait_since = now;
    if (at > w->wait_since + LINK_WAIT_MAX_MS)
        at = w->wait_since + LINK_WAIT_MAX_MS;
    if (now >= at)
        return 1;
    *due = at;
    return 0;
}

static void due_min(int64_t *next, int64_t due)
{
    if (due >= 0 && (*next < 0 || due < *next))
        *next = due;
}

/* Decide the next commit (one at a time: what completes meanwhile joins the
 * next snapshot). An older step committed before whose entries changed since
 * (a late file in checkpoint-10 once checkpoint-20 exists) is committed again
 * first, outside stops; then the newest state: every complete entry of the
 * newest step, every complete entry without a number, and the links. Older
 * steps never committed are superseded by the newest: when checkpoints come
 * faster than they upload, each commit takes the newest. */
static void plan(struct watch *w, int64_t now, int64_t *next)
{
    static struct plan pl; /* main thread only; too big for the stack */
    uint64_t nstar = 0, low = UINT64_MAX;
    int have_num = 0, head_needed = 0;
    int64_t due = -1;

    if (w->paused || w->jobs_out)
        return;
    for (size_t i = 0; i < w->nent; i++) {
        struct entry *e = &w->ent[i];
        if (includable(e) && e->numbered && (!have_num || e->step > nstar)) {
            nstar = e->step;
            have_num = 1;
        }
    }
    for (size_t i = 0; i < w->nent; i++) {
        struct entry *e = &w->ent[i];
        if (!needs_commit(e))
            continue;
        if (e->numbered && e->step < nstar) {
            if (e->done && e->step < low)
                low = e->step;
        } else {
            head_needed = 1;
        }
    }
    if (low != UINT64_MAX && !w->stop_at) {
        pl.n = 0;
        for (size_t i = 0; i < w->nent; i++)
            if (includable(&w->ent[i]) && w->ent[i].numbered && w->ent[i].step == low)
                plan_add(&pl, &w->ent[i], 0);
        plan_links(w, &pl, 0, now);
        if (plan_ready(w, &pl, now, &due)) {
            queue_plan(w, &pl, 0, now);
            return;
        }
        due_min(next, due);
    }
    /* A failed snapshot for a link change is tried again at the next change,
     * not in a loop. */
    if (!head_needed && (w->links_changed == w->links_failed || !links_changed_vs_head(w, now))) {
        w->wait_since = 0;
        return;
    }
    pl.n = 0;
    for (size_t i = 0; i < w->nent; i++) {
        struct entry *e = &w->ent[i];
        if (includable(e) && (!e->numbered || (have_num && e->step == nstar)))
            plan_add(&pl, e, 0);
    }
    plan_links(w, &pl, 1, now);
    if (!pl.n)
        return;
    if (plan_ready(w, &pl, now, &due))
        queue_plan(w, &pl, 1, now);
    else
        due_min(next, due);
}

/* ---- completeness ------------------------------------------------------------ */

static void mark_ok(struct watch *w, struct entry *e, const char *by, int64_t now)
{
    cJSON *f;

    e->ok = 1;
    e->ok_sig = e->sig;
    e->ok_at = now;
    e->trigger = T_NONE;
    e->fresh = 0;
    e->torn = 0;
    e->nwp = 0;
    w->dirty = 1;
    if ((e->done && sig_eq(&e->sig, &e->done_sig)) ||
        (e->failed && sig_eq(&e->sig, &e->failed_sig)))
        return; /* touched, not changed: that version is settled already */
    if (!e->numbered) {
        /* A new version of a name without a number: above every step. */
        e->step = w->counter;
        watch_note_step(w, e->step);
    }
    if ((f = cJSON_CreateObject())) {
        cJSON_AddStringToObject(f, "entry", e->name);
        cJSON_AddNumberToObject(f, "step", (double)e->step);
        cJSON_AddStringToObject(f, "by", by);
        log_event(LOG_INFO, "complete", f);
        cJSON_Delete(f);
    }
}

/* Was this close the writer finishing, a moment later? Not when a writer
 * seen writing it was killed (or failed), the child died, or ckptrun began
 * stopping the child within that moment: a process killed mid-write closes
 * its files too. @return why not (torn), or NULL; *gone when a writer is gone
 * without ckptrun seeing how (reaped already): then the close proves nothing
 * and --settle decides. */
static const char *close_torn(struct watch *w, const struct entry *e, int *gone)
{
    *gone = 0;
    if (e->close_killed)
        return "its writer was killed";
    for (int i = 0; i < e->nwp; i++)
        switch (writer_fate(&e->wp[i])) {
        case F_KILLED:
            return "its writer was killed";
        case F_GONE:
            *gone = 1;
            break;
        case F_ALIVE:
        case F_EXITED:
            break;
        }
    if (!w->child_alive && !w->child_clean)
        return "the child died";
    if (w->stop_at && w->stop_at <= e->trig_at + CLOSE_MS)
        return "the child is being stopped";
    return NULL;
}

static void judge(struct watch *w, struct entry *e, int64_t now, int64_t *next)
{
    const char *by = NULL, *why;
    int64_t due = -1;
    int gone;
    int after_stop = w->stop_at && e->changed >= w->stop_at;
    struct sig s2;

    if (!e->sig_ok) {
        due = now + 100; /* something vanished during the walk: changing */
        goto later;
    }
    if (e->sig.p.files == 0) {
        due = now + 1000; /* nothing to commit yet */
        goto later;
    }
    if (e->trigger == T_RENAMED) {
        by = "rename"; /* atomic: what was renamed is what its writer made */
        goto complete;
    }
    if (!w->child_alive && !w->child_clean)
        goto stay; /* after a crash or a kill: what was left may be torn */
    if (e->kind == K_FILE && e->trigger == T_CLOSE) {
        if (now < e->trig_at + CLOSE_MS) {
            due = e->trig_at + CLOSE_MS;
            goto later;
        }
        if (writer_under(w, e)) {
            due = now + WRITER_POLL_MS; /* someone writes it: their close decides */
            goto later;
        }
        if ((why = close_torn(w, e, &gone)) != NULL) {
            e->torn = 1;
            e->trigger = T_NONE;
            log_msg(LOG_INFO, "watch", "%s was closed, but %s: not complete (may be torn)",
                    e->name, why);
            goto stay;
        }
        if (gone) {
            e->trigger = T_NONE;
            log_msg(LOG_DEBUG, "watch", "%s was closed by a process now gone: complete once "
                    "unchanged for --settle", e->name);
            goto settle;
        }
        by = "close";
        goto complete;
    }
    if (e->kind == K_DIR && w->marker[0] &&
        (e->trigger == T_MARKER || (e->fresh && e->sig.has_marker))) {
        if (after_stop) {
            e->trigger = T_NONE; /* written while being killed: may be torn */
            goto stay;
        }
        if (now - e->changed < (int64_t)quiet_ms(w)) {
            due = e->changed + (int64_t)quiet_ms(w); /* other processes' files after it */
            goto later;
        }
        if (writer_under(w, e)) {
            due = now + WRITER_POLL_MS;
            goto later;
        }
        by = "marker";
        goto complete;
    }
settle:
    if (e->torn || after_stop)
        goto stay;
    if (now - e->changed >= (int64_t)w->settle_ms) {
        if (!writer_under(w, e)) {
            by = "settle";
            goto complete;
        }
        e->changed = now; /* still open for writing: a settle more */
    }
    due = e->changed + (int64_t)w->settle_ms;
later:
    /* At least every second: writes through mmap are invisible to inotify. */
    if (due > now + 1000)
        due = now + 1000;
    if (due < now + 50)
        due = now + 50;
    due_min(next, due);
    return;
stay:
    due_min(next, now + 1000);
    return;
complete:
    /* The writer check ran after the signature: if anything moved in
     * between, what we would commit is not what we judged. */
    if (entry_sig(w, e, &s2) != 0 || !sig_eq(&s2, &e->sig)) {
        e->sig = s2;
        e->changed = now;
        due_min(next, now + 50);
        return;
    }
    mark_ok(w, e, by, now);
}

/* Writers of file entries being written, learnt while they write: their
 * close is only a completion if they are still alive after it. */
static void scan_writers(struct watch *w, int64_t now, int64_t *next)
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

static void stuck_check(struct watch *w, int64_t now, int64_t *next)
{
    uint64_t stuck_ms = 6 * w->settle_ms > STUCK_MIN_MS ? 6 * w->settle_ms : STUCK_MIN_MS;
    char list[600] = "";
    size_t used = 0;
    int pending = 0;

    for (size_t i = 0; i < w->nent; i++) {
        struct entry *e = &w->ent[i];
        if (e->in_use && e->kind != K_LINK && !e->ok && !e->removing && e->sig.p.files > 0)
            pending++;
    }
    if (!pending || w->paused) {
        w->stuck_since = 0;
        return;
    }
    if (!w->stuck_since)
        w->stuck_since = now;
    if (w->stuck_told)
        return;
    if (now - w->stuck_since < (int64_t)stuck_ms) {
        due_min(next, w->stuck_since + (int64_t)stuck_ms);
        return;
    }
    w->stuck_told = 1;
    for (size_t i = 0; i < w->nent; i++) {
        struct entry *e = &w->ent[i];
        if (!e->in_use || e->kind == K_LINK || e->ok || e->removing || e->sig.p.files == 0)
            continue;
        if (used < sizeof list - 80) {
            char p[PBUF];
            struct wpid wp;
            const char *why = e->torn ? "its last writer was killed or stopped mid-write" : NULL;
            char tmp[64] = "";
            entry_path(w, e, p, sizeof p);
            if (!why && writers_of(w, p, &wp, 1) == 1) {
                snprintf(tmp, sizeof tmp, "open for writing by pid %d", (int)wp.pid);
                why = tmp;
            }
            if (!why)
                why = "changing";
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%.60s (%s)",
                                     used ? ", " : "", e->name, why);
        }
    }
    log_msg(LOG_WARN, "watch", "nothing in %s has been complete for %.1fs while entries keep "
            "changing: %s; an entry is committed once renamed into place, closed by a writer "
            "that stays alive, marked (--complete-marker), or unchanged for --settle with no "
            "writer", w->dir, (double)stuck_ms / 1000.0, list);
}

/* ---- worker ------------------------------------------------------------------ */

static int check_print(void *user, const struct commit_print *print)
{
    const struct watch_job *j = user;
    return !commit_print_eq(print, &j->expect);
}

static void *worker(void *arg)
{
    struct watch *w = arg;

    for (;;) {
        struct watch_job *j;
        struct watch_result *r;

        pthread_mutex_lock(&w->mu);
        while (!w->qhead && !w->stop)
            pthread_cond_wait(&w->cv, &w->mu);
        if (!w->qhead) {
            pthread_mutex_unlock(&w->mu);
            break;
        }
        j = w->qhead;
        w->qhead = j->next;
        if (!w->qhead)
            w->qtail = NULL;
        pthread_mutex_unlock(&w->mu);

        r = calloc(1, sizeof *r);
        if (r) {
            snprintf(r->entry, sizeof r->entry, "%s", j->entry);
            r->completed_mono = j->completed;
            r->changed_mono = j->changed;
            commit_paths_checked(w->ctx, j->src, j->n, j->step, check_print, j, &r->res);
            r->entries = calloc(j->n, sizeof *r->entries);
            for (size_t i = 0; r->entries && i < j->n; i++)
                if ((r->entries[i] = strdup(j->src[i].name)))
                    r->nentries++;
            r->job = j;
            j = NULL;
            /* A pointer is written whole to a pipe (< PIPE_BUF). */
            if (write(w->pipe_w, &r, sizeof r) != (ssize_t)sizeof r)
                watch_result_free(r);
        }
        job_free(j);
        pthread_mutex_lock(&w->mu);
        w->busy--;
        pthread_mutex_unlock(&w->mu);
    }
    return NULL;
}

/* ---- start: what the store holds ----------------------------------------------- */

struct listed {
    uint64_t steps[MAX_MARKS];
    int n;
    uint64_t max;
    int any;
};

static int list_cb(void *user, const struct ckpt_info *info)
{
    struct listed *l = user;
    if (!l->any || info->step > l->max)
        l->max = info->step;
    l->any = 1;
    if (l->n < MAX_MARKS)
        l->steps[l->n++] = info->step;
    return 0;
}

/* Names the store's checkpoints of files hold (their files/ marks), with
 * the highest step holding each; the highest marked step's names are the
 * newest snapshot. */
struct stored {
    cJSON *names;             /* object: name -> step */
    cJSON *head;              /* array of the highest marked step's names */
    uint64_t head_step;
};

static void read_stored(struct watch *w, struct record *rec, struct stored *sd)
{
    struct listed l = { .n = 0 };
    ckpt_status st;

    memset(sd, 0, sizeof *sd);
    sd->names = cJSON_CreateObject();
    st = ckpt_list(w->ctx, list_cb, &l);
    if (st != CKPT_OK) {
        log_msg(LOG_WARN, "watch", "cannot list the run's checkpoints (%s: %s): entries "
                "already in %s are taken as committed", ckpt_strerror(st), ckpt_errmsg(w->ctx),
                w->dir);
        cJSON_Delete(sd->names);
        sd->names = NULL;
        return;
    }
    if (l.any)
        watch_note_step(w, l.max);
    for (int i = 0; rec && sd->names && i < l.n; i++) {
        cJSON *arr = NULL;
        const cJSON *e;
        st = record_files_entries(rec, l.steps[i], &arr);
        if (st != CKPT_OK) {
            if (st != CKPT_E_NOENT) /* NOENT: a checkpoint of memory regions */
                log_msg(LOG_WARN, "watch", "cannot read the files mark of step %" PRIu64
                        ": %s", l.steps[i], ckpt_strerror(st));
            continue;
        }
        cJSON_ArrayForEach(e, arr) {
            cJSON *have = cJSON_GetObjectItemCaseSensitive(sd->names, e->valuestring);
            if (!have)
                cJSON_AddNumberToObject(sd->names, e->valuestring, (double)l.steps[i]);
            else if (cJSON_GetNumberValue(have) < (double)l.steps[i])
                cJSON_SetNumberValue(have, (double)l.steps[i]);
        }
        if (!sd->head || l.steps[i] > sd->head_step) {
            cJSON_Delete(sd->head);
            sd->head = arr;
            sd->head_step = l.steps[i];
            arr = NULL;
        }
        cJSON_Delete(arr);
    }
}

static int in_array(const cJSON *arr, const char *name)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, arr)
        if (cJSON_IsString(e) && strcmp(e->valuestring, name) == 0)
            return 1;
    return 0;
}

/* ---- public ------------------------------------------------------------------- */

int watch_open(struct watch **out, const char *dir, const char *marker, uint64_t settle_ms,
               struct ckpt_ctx *ctx, struct record *rec)
{
    struct watch *w = calloc(1, sizeof *w);
    int pfd[2] = { -1, -1 };
    DIR *d = NULL;
    struct dirent *de;
    struct stored sd = { 0 };
    int64_t now = mono_ms();
    int rc = -1, adopted = 0, fresh = 0;

    *out = NULL;
    if (!w)
        goto out;
    w->ifd = w->pipe_r = w->pipe_w = -1;
    w->ctx = ctx;
    w->counter = 1;
    w->self = getpid();
    w->child_alive = 1;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (!realpath(dir, w->dir)) {
        log_msg(LOG_ERROR, "watch", "%s: %s", dir, strerror(errno));
        goto out;
    }
    snprintf(w->marker, sizeof w->marker, "%s", marker ? marker : "");
    w->settle_ms = settle_ms;
    w->ent = calloc(MAX_ENTRIES, sizeof *w->ent);
    w->wm = calloc(MAX_WATCHES, sizeof *w->wm);
    w->head = calloc(MAX_ENTRIES, sizeof *w->head);
    if (!w->ent || !w->wm || !w->head)
        goto out;
    if ((w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0 ||
        pipe2(pfd, O_CLOEXEC | O_NONBLOCK) != 0) {
        log_msg(LOG_ERROR, "watch", "inotify/pipe: %s", strerror(errno));
        goto out;
    }
    w->pipe_r = pfd[0];
    w->pipe_w = pfd[1];
    int wd = inotify_add_watch(w->ifd, w->dir,
                               IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE |
                               IN_CLOSE_WRITE | IN_MODIFY | IN_ATTRIB | IN_ONLYDIR);
    if (wd < 0) {
        log_msg(LOG_ERROR, "watch", "cannot watch %s: %s", w->dir, strerror(errno));
        goto out;
    }
    add_wd(w, wd, "");
    /* What is there now was restored, or left by an earlier run on this
     * machine. What the store holds is committed; the rest (written after
     * the last upload, before a hard kill) is new and committed once
     * complete. The worker is not started yet: the context is ours. */
    read_stored(w, rec, &sd);
    if ((d = opendir(w->dir))) {
        while ((de = readdir(d)) != NULL) {
            struct entry *e;
            const cJSON *have;
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                continue;
            if (!(e = add_entry(w, de->d_name, now)))
                continue;
            e->sig_ok = entry_sig(w, e, &e->sig) == 0;
            e->sig_at = now;
            have = sd.names ? cJSON_GetObjectItemCaseSensitive(sd.names, e->name) : NULL;
            if (!sd.names || have) {
                e->ok = e->done = 1;
                e->ok_sig = e->done_sig = e->sig;
                e->ok_at = now;
                e->fresh = 0;
                if (!e->numbered && have)
                    e->step = (uint64_t)cJSON_GetNumberValue(have);
                if (sd.head && in_array(sd.head, e->name) && w->nhead < MAX_ENTRIES) {
                    struct head_item *h = &w->head[w->nhead++];
                    snprintf(h->name, sizeof h->name, "%s", e->name);
                    h->is_link = e->kind == K_LINK;
                    h->sig = e->sig;
                    w->have_head = 1;
                }
                adopted++;
            } else if (e->kind != K_LINK) {
                fresh++;
            }
        }
        closedir(d);
    }
    if (!sd.names) {
        /* Unknown: the links as found count as committed too. */
        for (size_t i = 0; i < w->nent && w->nhead < MAX_ENTRIES; i++)
            if (w->ent[i].in_use && w->ent[i].kind == K_LINK) {
                struct head_item *h = &w->head[w->nhead++];
                snprintf(h->name, sizeof h->name, "%s", w->ent[i].name);
                h->is_link = 1;
                h->sig = w->ent[i].sig;
            }
        w->have_head = 1;
    }
    if (fresh)
        log_msg(LOG_INFO, "watch", "%d entr%s of %s not in the store: committed once complete",
                fresh, fresh == 1 ? "y" : "ies", w->dir);
    log_msg(LOG_DEBUG, "watch", "%d entr%s of %s already in the store", adopted,
            adopted == 1 ? "y" : "ies", w->dir);
    if (pthread_create(&w->thr, NULL, worker, w) != 0) {
        log_msg(LOG_ERROR, "watch", "cannot start the commit thread");
        goto out;
    }
    w->thr_started = 1;
    *out = w;
    w = NULL;
    rc = 0;
out:
    cJSON_Delete(sd.names);
    cJSON_Delete(sd.head);
    if (w) {
        w->ctx = NULL; /* the caller still owns it on failure */
        watch_close(w, 1);
    }
    return rc;
}

void watch_close(struct watch *w, int wait)
{
    int busy;

    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    busy = w->busy;
    /* Drop what was not started: nobody will wait for it. */
    while (w->qhead) {
        struct watch_job *j = w->qhead;
        w->qhead = j->next;
        job_free(j);
        w->busy--;
    }
    w->qtail = NULL;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    if (w->thr_started && !wait && busy) {
        /* A commit is in flight and the process is about to exit: leave the
         * thread, its context and this struct alone; exit() ends them. */
        pthread_detach(w->thr);
        return;
    }
    if (w->thr_started)
        pthread_join(w->thr, NULL);
    ckpt_close(w->ctx);
    for (struct watch_result *r; w->pipe_r >= 0 &&
         read(w->pipe_r, &r, sizeof r) == (ssize_t)sizeof r;)
        watch_result_free(r);
    if (w->ifd >= 0)
        close(w->ifd);
    if (w->pipe_r >= 0)
        close(w->pipe_r);
    if (w->pipe_w >= 0)
        close(w->pipe_w);
    for (size_t i = 0; w->ent && i < w->nent; i++)
        free(w->ent[i].link);
    free(w->ent);
    free(w->wm);
    free(w->head);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}

int watch_inotify_fd(const struct watch *w) { return w->ifd; }
int watch_result_fd(const struct watch *w) { return w->pipe_r; }
void watch_set_pgid(struct watch *w, pid_t pgid)
{
    w->pgid = pgid;
    if (pgid > 0)
        w->child_alive = 1;
}
void watch_set_settle(struct watch *w, uint64_t settle_ms)
{
    w->settle_ms = settle_ms;
    w->dirty = 1; /* due times change */
}
int watch_dirty(const struct watch *w) { return w->dirty; }
void watch_pause(struct watch *w) { w->paused = 1; }

void watch_stopping(struct watch *w)
{
    if (!w->stop_at)
        w->stop_at = mono_ms();
    w->dirty = 1;
}

void watch_next_codec(struct watch *w, ckpt_codec codec)
{
    /* ckpt_request is documented thread-safe: the worker may be mid-save. */
    ckpt_request(w->ctx, codec);
}

void watch_note_step(struct watch *w, uint64_t step)
{
    if (step < UINT64_MAX - 2 && step + 1 > w->counter)
        w->counter = step + 1;
}

int watch_busy(struct watch *w)
{
    return w->jobs_out;
}

static void touch(struct entry *e, int64_t now)
{
    e->changed = now;
    e->touched = 1;
}

static void on_marker(struct watch *w, struct entry *e, const char *name, int64_t now)
{
    if (e->kind == K_DIR && w->marker[0] && fnmatch(w->marker, name, 0) == 0) {
        /* The writer says it is done: a new version, even after losing
         * files (it rewrote the entry). */
        e->trigger = T_MARKER;
        e->trig_at = now;
        e->removing = 0;
        w->dirty = 1;
    }
}

static void on_close(struct watch *w, struct entry *e, int64_t now)
{
    if (e->kind != K_FILE || e->trigger == T_RENAMED)
        return;
    e->trigger = T_CLOSE;
    e->trig_at = now;
    e->writing = 0;
    e->close_killed = 0;
    /* A writer that died with this close may be reaped before the moment
     * is over: look now too. */
    for (int i = 0; i < e->nwp; i++)
        if (writer_fate(&e->wp[i]) == F_KILLED)
            e->close_killed = 1;
    w->dirty = 1;
}

static void on_modify(struct watch *w, struct entry *e, int64_t now)
{
    if (e->kind != K_FILE)
        return;
    if (e->trigger == T_CLOSE)
        e->trigger = T_NONE; /* written again: its next close decides */
    if (!e->writing) {
        e->writing = 1;
        e->nwp = 0;
        e->close_killed = 0;
        e->wscan = 0;
        w->dirty = 1; /* learn its writers while they write */
    }
    (void)now;
}

static void rescan(struct watch *w, int64_t now)
{
    DIR *d = opendir(w->dir);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            add_entry(w, de->d_name, now);
    if (d)
        closedir(d);
    for (size_t i = 0; i < w->nent; i++)
        if (w->ent[i].in_use) {
            touch(&w->ent[i], now);
            if (w->ent[i].kind == K_LINK)
                read_link(w, &w->ent[i]);
        }
    w->links_changed = now;
    w->dirty = 1;
}

static void root_event(struct watch *w, const struct inotify_event *ev, int64_t now)
{
    struct entry *e;

    if (!ev->len)
        return;
    if (ev->mask & (IN_DELETE | IN_MOVED_FROM)) {
        if ((e = find_entry(w, ev->name)))
            remove_entry(w, e, now);
        return;
    }
    if (!(e = find_entry(w, ev->name))) {
        if (!(e = add_entry(w, ev->name, now)))
            return;
    } else if (ev->mask & (IN_CREATE | IN_MOVED_TO)) {
        /* Replaced by a rename (or made again): a new instance. */
        if (init_entry(w, e, ev->name, now) != 0) {
            remove_entry(w, e, now);
            return;
        }
    }
    touch(e, now);
    if (ev->mask & IN_MOVED_TO) {
        e->trigger = T_RENAMED;
        e->trig_at = now;
        w->dirty = 1;
    }
    if (ev->mask & IN_CLOSE_WRITE)
        on_close(w, e, now);
    if (ev->mask & IN_MODIFY)
        on_modify(w, e, now);
    if (ev->mask & IN_ATTRIB && e->kind == K_LINK)
        w->dirty = 1;
}

static void sub_event(struct watch *w, const struct inotify_event *ev, const char *ename,
                      int64_t now)
{
    struct entry *e = find_entry(w, ename);

    if (!e)
        return;
    touch(e, now);
    if (ev->len && (ev->mask & (IN_DELETE | IN_MOVED_FROM)) && !name_is_temporary(ev->name)) {
        if (ev->mask & IN_MOVED_FROM) {
            /* Lost unless it lands in the same entry (a rename inside it). */
            if (w->nmv < MAX_MOVES) {
                w->mv[w->nmv].cookie = ev->cookie;
                w->mv[w->nmv].gen = e->gen;
                snprintf(w->mv[w->nmv].entry, sizeof w->mv[w->nmv].entry, "%s", e->name);
                w->nmv++;
            } else {
                entry_lost(w, e, ev->name);
            }
        } else {
            entry_lost(w, e, ev->name);
        }
    }
    if (ev->mask & IN_MOVED_TO)
        for (size_t i = 0; i < w->nmv; i++)
            if (w->mv[i].cookie == ev->cookie && w->mv[i].gen == e->gen) {
                w->mv[i] = w->mv[--w->nmv];
                break;
            }
    if ((ev->mask & (IN_CREATE | IN_MOVED_TO)) && (ev->mask & IN_ISDIR)) {
        char p2[PBUF];
        /* Watches already present are kept; new directories get theirs. */
        entry_path(w, e, p2, sizeof p2);
        watch_tree(w, p2, e->name, 0);
    }
    if (ev->len && (ev->mask & (IN_CLOSE_WRITE | IN_MOVED_TO)))
        on_marker(w, e, ev->name, now);
}

void watch_handle_inotify(struct watch *w)
{
    char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t n;
    int64_t now = mono_ms();

    while ((n = read(w->ifd, buf, sizeof buf)) > 0) {
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            const char *ename = wd_entry(w, ev->wd);
            p += sizeof *ev + ev->len;
            if (ev->mask & IN_Q_OVERFLOW) {
                /* Lost events: every entry might have changed, and new ones
                 * may have appeared unseen. */
                rescan(w, now);
                log_msg(LOG_WARN, "watch", "inotify queue overflowed; rescanned %s", w->dir);
                continue;
            }
            if (ev->mask & IN_IGNORED) {
                drop_wd(w, ev->wd);
                continue;
            }
            if (!ename)
                continue;
            if (ename[0] == '\0')
                root_event(w, ev, now);
            else
                sub_event(w, ev, ename, now);
        }
    }
    /* A move out of an entry whose other half did not follow: lost. */
    for (size_t i = 0; i < w->nmv; i++) {
        struct entry *e = find_gen(w, w->mv[i].entry, w->mv[i].gen);
        if (e)
            entry_lost(w, e, "a file moved away");
    }
    w->nmv = 0;
}

void watch_file_event(struct watch *w, const char *path, const char *event)
{
    size_t n = strlen(w->dir);
    char name[256];
    const char *rel, *slash, *base;
    struct entry *e;
    int64_t now = mono_ms();

    if (strncmp(path, w->dir, n) != 0 || path[n] != '/')
        return;
    rel = path + n + 1;
    slash = strchr(rel, '/');
    snprintf(name, sizeof name, "%.*s", slash ? (int)(slash - rel) : (int)strlen(rel), rel);
    if (!(e = add_entry(w, name, now)))
        return;
    touch(e, now);
    base = strrchr(path, '/');
    if (!slash) {
        if (strcmp(event, "renamed") == 0) {
            e->trigger = T_RENAMED;
            e->trig_at = now;
            w->dirty = 1;
        } else if (strcmp(event, "closed") == 0) {
            on_close(w, e, now);
        }
    } else if (strcmp(event, "closed") == 0 || strcmp(event, "renamed") == 0) {
        on_marker(w, e, base ? base + 1 : path, now);
    }
}

int64_t watch_tick(struct watch *w)
{
    int64_t now = mono_ms(), next = -1;

    w->dirty = 0;
    if (w->paused)
        return -1;
    scan_writers(w, now, &next);
    for (size_t i = 0; i < w->nent; i++) {
        struct entry *e = &w->ent[i];
        struct sig s;
        int walk_ok;

        if (!e->in_use)
            continue;
        if (e->kind == K_LINK) {
            char *old = e->link ? strdup(e->link) : NULL;
            read_link(w, e);
            if ((old == NULL) != (e->link == NULL) || (old && strcmp(old, e->link) != 0))
                w->links_changed = now;
            free(old);
        }
        /* Complete or removed, and no event since it was last looked at:
         * nothing to walk (a tree of many files is walked only on change). */
        if (e->kind != K_LINK && (e->ok || e->removing) && e->sig_ok && !e->touched)
            continue;
        e->touched = 0;
        walk_ok = entry_sig(w, e, &s) == 0;
        if (!walk_ok || !sig_eq(&s, &e->sig)) {
            /* Changed: when its events said, or else now, when it was seen
             * (a change after a stop began must not be dated before it). */
            if (e->changed <= e->sig_at)
                e->changed = now;
            if (e->kind == K_LINK && s.link_hash != e->sig.link_hash)
                w->links_changed = now;
        }
        e->sig = s;
        e->sig_at = now;
        e->sig_ok = walk_ok;
        if (e->kind == K_LINK)
            continue;
        if (e->ok && (!walk_ok || !sig_eq(&s, &e->ok_sig)))
            e->ok = 0; /* changed after it was complete: a new version */
        /* Fewer files than its last complete version, even unseen by inotify
         * (an overflow, a file system without events): being removed -- unless
         * its writer says it made a new version (a marker, a rename). */
        if (walk_ok && e->ok_sig.p.files && s.p.files < e->ok_sig.p.files &&
            e->trigger == T_NONE)
            entry_lost(w, e, "files");
        if (!e->ok && !e->removing)
            judge(w, e, now, &next);
    }
    plan(w, now, &next);
    stuck_check(w, now, &next);
    if (w->links_changed + LINK_QUIET_MS > now && w->child_alive)
        due_min(&next, w->links_changed + LINK_QUIET_MS);
    return next;
}

void watch_child_exit(struct watch *w, int code)
{
    int64_t now = mono_ms();

    w->child_alive = 0;
    w->pgid = 0;
    w->child_clean = code == 0 && !w->stop_at;
    w->dirty = 1;
    if (w->paused)
        return;
    for (size_t i = 0; i < w->nent; i++) {
        struct entry *e = &w->ent[i];
        const char *by;
        if (!e->in_use || e->kind == K_LINK || e->ok || e->removing)
            continue;
        e->sig_ok = entry_sig(w, e, &e->sig) == 0;
        if (!e->sig_ok || e->sig.p.files == 0)
            continue;
        if (e->kind == K_FILE && e->trigger == T_CLOSE && !w->child_clean) {
            /* Its close came with the child's death: not a completion. */
            e->torn = 1;
            e->trigger = T_NONE;
            log_msg(LOG_INFO, "watch", "%s was closed as the child died: not complete "
                    "(may be torn)", e->name);
            continue;
        }
        if (e->trigger == T_RENAMED) {
            mark_ok(w, e, "rename", now);
            continue;
        }
        /* A clean exit leaves no writer: what is still settling is done.
         * After a crash it is not (it may be torn). */
        if (!w->child_clean || e->torn)
            continue;
        by = e->trigger == T_MARKER || (e->kind == K_DIR && w->marker[0] && e->fresh &&
                                        e->sig.has_marker) ? "marker"
           : e->trigger == T_CLOSE ? "close" : "exit";
        mark_ok(w, e, by, now);
    }
    /* Queue now: with the child gone the supervisor ends once nothing is
     * busy, before it would tick again. */
    watch_tick(w);
    w->dirty = 1;
}

/* A finished commit: @return 1 to hand it to the caller, 0 when handled
 * here (dropped, or to be read again). */
static int settle_result(struct watch *w, struct watch_result *r)
{
    struct watch_job *j = r->job;
    int gone = 0, changed = r->res.aborted;
    const char *what = NULL;
    cJSON *f;

    if (r->res.st == CKPT_OK) {
        for (size_t k = 0; k < j->n; k++) {
            struct entry *e = find_gen(w, j->m[k].name, j->m[k].gen);
            if (!e)
                continue;
            e->done = 1;
            e->done_sig = j->m[k].sig;
            e->failed = 0;
            if (r->res.changed)
                e->done = 0; /* may be torn: committed again once complete */
        }
        if (j->head) {
            w->nhead = 0;
            for (size_t k = 0; k < j->n && w->nhead < MAX_ENTRIES; k++) {
                struct head_item *h = &w->head[w->nhead++];
                snprintf(h->name, sizeof h->name, "%s", j->m[k].name);
                h->is_link = j->m[k].is_link;
                h->sig = j->m[k].sig;
            }
            w->have_head = 1;
        }
        if (r->res.changed)
            log_msg(LOG_WARN, "watch", "the files of step %" PRIu64 " (%s) changed while they "
                    "were read: committed again at that step once complete", j->step, j->entry);
        return 1;
    }
    for (size_t k = 0; k < j->n; k++) {
        struct entry *e = find_gen(w, j->m[k].name, j->m[k].gen);
        struct sig s;
        if (!e || e->removing) {
            gone = 1;
            what = j->m[k].name;
            break;
        }
        if (e->kind == K_LINK)
            continue;
        if (entry_sig(w, e, &s) != 0 || !sig_eq(&s, &j->m[k].sig)) {
            changed = 1;
            what = j->m[k].name;
        }
    }
    if (gone || changed) {
        /* Not a failure of the store: the snapshot no longer exists. Planned
         * again from what is there now. */
        if ((f = cJSON_CreateObject())) {
            cJSON_AddStringToObject(f, "entry", what ? what : j->entry);
            cJSON_AddNumberToObject(f, "step", (double)j->step);
            cJSON_AddStringToObject(f, "why", gone ? "removed while being read"
                                                   : "changed while being read");
            cJSON_AddStringToObject(f, "detail", r->res.detail);
            log_event(gone ? LOG_INFO : LOG_DEBUG, "drop", f);
            cJSON_Delete(f);
        }
        return 0;
    }
    for (size_t k = 0; k < j->n; k++) {
        struct entry *e = find_gen(w, j->m[k].name, j->m[k].gen);
        if (e && e->kind != K_LINK) {
            e->failed = 1; /* retried once it changes again */
            e->failed_sig = j->m[k].sig;
        }
    }
    if (j->head)
        w->links_failed = w->links_changed;
    return 1;
}

struct watch_result *watch_take_result(struct watch *w)
{
    struct watch_result *r = NULL;

    while (read(w->pipe_r, &r, sizeof r) == (ssize_t)sizeof r) {
        int pass;
        w->jobs_out--;
        pass = settle_result(w, r);
        /* The next commit is planned at once: once the child is gone the
         * supervisor ends as soon as nothing is busy. */
        if (!w->jobs_out)
            watch_tick(w);
        w->dirty = 1;
        if (pass)
            return r;
        watch_result_free(r);
        r = NULL;
    }
    return NULL;
}

void watch_result_free(struct watch_result *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->nentries; i++)
        free(r->entries[i]);
    free(r->entries);
    job_free(r->job);
    free(r);
}
