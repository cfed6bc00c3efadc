/* watch.c -- see watch.h. */
#include "watch.h"
#include "log.h"
#include "parse.h"

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

enum kind { K_FILE, K_DIR, K_LINK };
enum state { S_PENDING, S_QUEUED, S_DONE };
enum trigger { T_NONE, T_RENAMED, T_MARKER, T_EXIT };

/* What an entry looks like on disk; equal signatures = nothing changed. */
struct sig {
    uint64_t files, bytes, ino_sum;
    int64_t mtime_max_ns;
    uint64_t link_hash;       /* symbolic links: where they point */
    int has_marker;
};

struct entry {
    char name[256];
    enum kind kind;
    enum state state;
    enum trigger trigger;
    int64_t changed;          /* mono ms of the last change seen */
    int64_t completed;        /* mono ms when found complete */
    struct sig sig;           /* last computed */
    struct sig done_sig;      /* at its last commit */
    int in_use;
};

struct wmap {
    int wd;
    char entry[256];          /* top-level entry name; "" = the root */
};

struct job {
    struct job *next;
    uint64_t step;
    int64_t completed;
    int64_t changed;
    char entry[256];
    size_t n;
    struct commit_src *src;   /* paths/names malloc'd */
};

struct watch {
    char dir[PATH_MAX];
    char marker[256];
    uint64_t settle_ms;
    int ifd;
    int pipe_r, pipe_w;
    pid_t pgid;
    uint64_t counter;         /* next step for names without a number */
    int dirty;                /* something to look at before the next due time */
    int paused;               /* the child commits the run itself: hands off */
    struct entry *ent;
    size_t nent;
    struct wmap *wm;
    size_t nwm;

    /* Shared with the worker: guarded by mu. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct job *head, *tail;
    int busy;                 /* queued + in flight */
    int stop;

    /* Worker only (and ckpt_request, which is thread-safe). */
    struct ckpt_ctx *ctx;
    pthread_t thr;
    int thr_started;
};

/* ---- entries and inotify watches ------------------------------------------ */

static struct entry *find_entry(struct watch *w, const char *name)
{
    for (size_t i = 0; i < w->nent; i++)
        if (w->ent[i].in_use && strcmp(w->ent[i].name, name) == 0)
            return &w->ent[i];
    return NULL;
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

static struct entry *add_entry(struct watch *w, const char *name)
{
    struct entry *e = find_entry(w, name), *out = e;
    char p[PATH_MAX];
    struct stat sb;

    if (e || name_is_temporary(name) || strlen(name) >= sizeof e->name)
        goto out; /* known already, or never an entry */
    if ((size_t)snprintf(p, sizeof p, "%s/%s", w->dir, name) >= sizeof p || lstat(p, &sb) != 0)
        goto out;
    if (!S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode) && !S_ISLNK(sb.st_mode))
        goto out;
    for (size_t i = 0; i < w->nent && !e; i++)
        if (!w->ent[i].in_use)
            e = &w->ent[i];
    if (!e) {
        if (w->nent >= MAX_ENTRIES)
            goto out;
        e = &w->ent[w->nent++];
    }
    memset(e, 0, sizeof *e);
    e->in_use = 1;
    snprintf(e->name, sizeof e->name, "%s", name);
    e->kind = S_ISLNK(sb.st_mode) ? K_LINK : S_ISDIR(sb.st_mode) ? K_DIR : K_FILE;
    e->state = S_PENDING;
    e->changed = mono_ms();
    w->dirty = 1;
    if (e->kind == K_DIR)
        watch_tree(w, p, name, 0);
    out = e;
out:
    return out;
}

static void remove_entry(struct watch *w, const char *name)
{
    struct entry *e = find_entry(w, name);
    if (!e)
        return;
    /* Its inotify watches go away by themselves (IN_IGNORED). */
    e->in_use = 0;
}

/* ---- signatures, markers, writers ------------------------------------------- */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static void sig_add_file(struct watch *w, struct sig *s, const char *name, const struct stat *sb)
{
    int64_t mt = (int64_t)sb->st_mtim.tv_sec * 1000000000LL + sb->st_mtim.tv_nsec;
    s->files++;
    s->bytes += (uint64_t)sb->st_size;
    s->ino_sum += (uint64_t)sb->st_ino;
    if (mt > s->mtime_max_ns)
        s->mtime_max_ns = mt;
    if (w->marker[0] && fnmatch(w->marker, name, 0) == 0)
        s->has_marker = 1;
}

static void sig_tree(struct watch *w, const char *path, struct sig *s, int depth)
{
    DIR *d;
    struct dirent *de;
    char p[PATH_MAX];
    struct stat sb;

    if (depth > MAX_DEPTH || !(d = opendir(path)))
        return;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if ((size_t)snprintf(p, sizeof p, "%s/%s", path, de->d_name) >= sizeof p)
            continue;
        if (stat(p, &sb) != 0)
            continue;
        if (S_ISDIR(sb.st_mode)) {
            s->files++; /* a new empty sub-directory is a change too */
            sig_tree(w, p, s, depth + 1);
        } else if (S_ISREG(sb.st_mode)) {
            sig_add_file(w, s, de->d_name, &sb);
        }
    }
    closedir(d);
}

static void entry_sig(struct watch *w, const struct entry *e, struct sig *s)
{
    char p[PBUF], t[PATH_MAX];
    struct stat sb;
    ssize_t n;

    memset(s, 0, sizeof *s);
    snprintf(p, sizeof p, "%s/%s", w->dir, e->name);
    if (e->kind == K_LINK) {
        n = readlink(p, t, sizeof t - 1);
        if (n >= 0) {
            t[n] = '\0';
            s->link_hash = hash_str(t);
        }
    }
    if (stat(p, &sb) != 0)
        return;
    if (S_ISDIR(sb.st_mode))
        sig_tree(w, p, s, 0);
    else if (S_ISREG(sb.st_mode))
        sig_add_file(w, s, e->name, &sb);
}

static int sig_eq(const struct sig *a, const struct sig *b)
{
    return a->files == b->files && a->bytes == b->bytes && a->ino_sum == b->ino_sum &&
           a->mtime_max_ns == b->mtime_max_ns && a->link_hash == b->link_hash;
}

/* Does a process of the child's group hold a file at or under `path` open
 * for writing? Reads /proc/PID/stat for the group and /proc/PID/fdinfo for
 * the access mode. Processes we cannot inspect count as not writing. */
static int writer_under(pid_t pgid, const char *path)
{
    DIR *proc = NULL, *fdd = NULL;
    struct dirent *de, *fe;
    char p[PATH_MAX], target[PATH_MAX], buf[512];
    size_t plen = strlen(path);
    int found = 0;

    if (pgid <= 0 || !(proc = opendir("/proc")))
        goto out;
    while (!found && (de = readdir(proc)) != NULL) {
        FILE *f;
        char *rp;
        long grp = -1;
        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        snprintf(p, sizeof p, "/proc/%s/stat", de->d_name);
        if (!(f = fopen(p, "r")))
            continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        /* comm may hold spaces and parentheses: parse after the last ')'. */
        if (!(rp = strrchr(buf, ')')) || sscanf(rp + 1, " %*c %*d %ld", &grp) != 1 ||
            grp != (long)pgid)
            continue;
        snprintf(p, sizeof p, "/proc/%s/fd", de->d_name);
        if (!(fdd = opendir(p)))
            continue;
        while (!found && (fe = readdir(fdd)) != NULL) {
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
                found = 1;
        }
        closedir(fdd);
        fdd = NULL;
    }
out:
    if (proc)
        closedir(proc);
    return found;
}

/* ---- jobs ------------------------------------------------------------------ */

static void job_free(struct job *j)
{
    if (!j)
        return;
    for (size_t i = 0; i < j->n; i++) {
        free((char *)j->src[i].path);
        free((char *)j->src[i].name);
    }
    free(j->src);
    free(j);
}

static int job_add_src(struct watch *w, struct job *j, const char *name)
{
    char p[PBUF];
    struct commit_src *v;
    int rc = -1;

    if (strlen(name) > 255 || !(v = realloc(j->src, (j->n + 1) * sizeof *v)))
        goto out;
    j->src = v;
    snprintf(p, sizeof p, "%s/%s", w->dir, name);
    v[j->n].path = strdup(p);
    v[j->n].name = strdup(name);
    if (!v[j->n].path || !v[j->n].name) {
        free((char *)v[j->n].path);
        free((char *)v[j->n].name);
        goto out;
    }
    j->n++;
    rc = 0;
out:
    return rc;
}

/* The top-level entry a symbolic link points into, or NULL (outside). */
static struct entry *link_target_entry(struct watch *w, const struct entry *l)
{
    char p[PBUF], real[PATH_MAX], rdir[PATH_MAX], *name, *slash;
    struct entry *t = NULL;
    size_t n;

    snprintf(p, sizeof p, "%s/%s", w->dir, l->name);
    if (!realpath(p, real) || !realpath(w->dir, rdir))
        goto out;
    n = strlen(rdir);
    if (strncmp(real, rdir, n) != 0 || real[n] != '/')
        goto out; /* points outside the directory */
    name = real + n + 1;
    if ((slash = strchr(name, '/')))
        *slash = '\0';
    t = find_entry(w, name);
    if (t == l)
        t = NULL;
out:
    return t;
}

static uint64_t step_for(struct watch *w, const struct entry *e)
{
    uint64_t step;
    char p[PBUF], real[PATH_MAX];
    const char *b;

    if (e->kind == K_LINK) {
        /* A link is named after what it points to when that has a step
         * ("last.ckpt" -> "epoch=1-step=300.ckpt"). */
        snprintf(p, sizeof p, "%s/%s", w->dir, e->name);
        if (realpath(p, real)) {
            b = strrchr(real, '/');
            if (parse_step_from_name(b ? b + 1 : real, &step))
                goto out;
        }
    }
    if (!parse_step_from_name(e->name, &step))
        step = w->counter;
out:
    return step;
}

/* Queue the commit of `e` (plus links pointing into it). */
static void queue_entry(struct watch *w, struct entry *e)
{
    struct job *j = calloc(1, sizeof *j);
    struct entry *target = NULL;
    cJSON *f;

    if (!j)
        goto fail;
    snprintf(j->entry, sizeof j->entry, "%s", e->name);
    j->completed = e->completed = mono_ms();
    j->changed = e->changed;
    if (e->kind == K_LINK && (target = link_target_entry(w, e)) != NULL) {
        /* A link to an entry is committed with it, at its step. */
        if (job_add_src(w, j, target->name) != 0)
            goto fail;
        j->step = step_for(w, target);
        snprintf(j->entry, sizeof j->entry, "%s", target->name);
    } else {
        j->step = step_for(w, e);
    }
    if (job_add_src(w, j, e->name) != 0)
        goto fail;
    e->state = S_QUEUED;
    e->done_sig = e->sig;
    /* Links that point into this entry travel with it. */
    for (size_t i = 0; e->kind != K_LINK && i < w->nent; i++) {
        struct entry *l = &w->ent[i];
        if (!l->in_use || l->kind != K_LINK || link_target_entry(w, l) != e)
            continue;
        if (job_add_src(w, j, l->name) != 0)
            goto fail;
        entry_sig(w, l, &l->sig);
        l->done_sig = l->sig;
        l->state = S_QUEUED;
    }
    watch_note_step(w, j->step);
    if ((f = cJSON_CreateObject())) {
        cJSON_AddStringToObject(f, "entry", e->name);
        cJSON_AddNumberToObject(f, "step", (double)j->step);
        cJSON_AddStringToObject(f, "by", e->trigger == T_RENAMED ? "rename"
                                       : e->trigger == T_MARKER ? "marker"
                                       : e->trigger == T_EXIT ? "exit" : "settle");
        log_event(LOG_INFO, "complete", f);
        cJSON_Delete(f);
    }
    pthread_mutex_lock(&w->mu);
    if (w->tail)
        w->tail->next = j;
    else
        w->head = j;
    w->tail = j;
    w->busy++;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return;
fail:
    log_msg(LOG_ERROR, "watch", "out of memory queueing %s", e->name);
    job_free(j);
}

/* ---- worker ------------------------------------------------------------------ */

static void *worker(void *arg)
{
    struct watch *w = arg;

    for (;;) {
        struct job *j;
        struct watch_result *r;

        pthread_mutex_lock(&w->mu);
        while (!w->head && !w->stop)
            pthread_cond_wait(&w->cv, &w->mu);
        if (!w->head) {
            pthread_mutex_unlock(&w->mu);
            break;
        }
        j = w->head;
        w->head = j->next;
        if (!w->head)
            w->tail = NULL;
        pthread_mutex_unlock(&w->mu);

        r = calloc(1, sizeof *r);
        if (r) {
            snprintf(r->entry, sizeof r->entry, "%s", j->entry);
            r->completed_mono = j->completed;
            r->changed_mono = j->changed;
            commit_paths(w->ctx, j->src, j->n, j->step, &r->res);
            r->entries = calloc(j->n, sizeof *r->entries);
            for (size_t i = 0; r->entries && i < j->n; i++)
                if ((r->entries[i] = strdup(j->src[i].name)))
                    r->nentries++;
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

/* ---- public ------------------------------------------------------------------- */

int watch_open(struct watch **out, const char *dir, const char *marker, uint64_t settle_ms,
               struct ckpt_ctx *ctx)
{
    struct watch *w = calloc(1, sizeof *w);
    int pfd[2] = { -1, -1 };
    DIR *d = NULL;
    struct dirent *de;
    int rc = -1;

    *out = NULL;
    if (!w)
        goto out;
    w->ifd = w->pipe_r = w->pipe_w = -1;
    w->ctx = ctx;
    w->counter = 1;
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
    if (!w->ent || !w->wm)
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
    /* What is there now was restored or left by an earlier run: taken as
     * committed; a later change makes it pending again. */
    if ((d = opendir(w->dir))) {
        while ((de = readdir(d)) != NULL) {
            struct entry *e;
            uint64_t step;
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                continue;
            if (!(e = add_entry(w, de->d_name)))
                continue;
            entry_sig(w, e, &e->sig);
            e->done_sig = e->sig;
            e->state = S_DONE;
            if (parse_step_from_name(e->name, &step))
                watch_note_step(w, step);
        }
        closedir(d);
    }
    if (pthread_create(&w->thr, NULL, worker, w) != 0) {
        log_msg(LOG_ERROR, "watch", "cannot start the commit thread");
        goto out;
    }
    w->thr_started = 1;
    *out = w;
    w = NULL;
    rc = 0;
out:
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
    while (w->head) {
        struct job *j = w->head;
        w->head = j->next;
        job_free(j);
        w->busy--;
    }
    w->tail = NULL;
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
    for (struct watch_result *r; w->pipe_r >= 0 && (r = watch_take_result(w)) != NULL;)
        watch_result_free(r);
    if (w->ifd >= 0)
        close(w->ifd);
    if (w->pipe_r >= 0)
        close(w->pipe_r);
    if (w->pipe_w >= 0)
        close(w->pipe_w);
    free(w->ent);
    free(w->wm);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}

int watch_inotify_fd(const struct watch *w) { return w->ifd; }
int watch_result_fd(const struct watch *w) { return w->pipe_r; }
void watch_set_pgid(struct watch *w, pid_t pgid) { w->pgid = pgid; }
void watch_set_settle(struct watch *w, uint64_t settle_ms)
{
    w->settle_ms = settle_ms;
    w->dirty = 1; /* due times change */
}
int watch_dirty(const struct watch *w) { return w->dirty; }
void watch_pause(struct watch *w) { w->paused = 1; }

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
    int b;
    pthread_mutex_lock(&w->mu);
    b = w->busy;
    pthread_mutex_unlock(&w->mu);
    return b;
}

static void touch(struct watch *w, struct entry *e)
{
    e->changed = mono_ms();
    if (e->state == S_DONE) {
        e->state = S_PENDING; /* changed after its commit: a new version */
        w->dirty = 1;
    }
}

static void on_marker(struct watch *w, struct entry *e, const char *name)
{
    if (w->marker[0] && fnmatch(w->marker, name, 0) == 0 && e->trigger == T_NONE) {
        e->trigger = T_MARKER;
        w->dirty = 1;
    }
}

void watch_handle_inotify(struct watch *w)
{
    char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t n;

    while ((n = read(w->ifd, buf, sizeof buf)) > 0) {
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            const char *ename = wd_entry(w, ev->wd);
            p += sizeof *ev + ev->len;
            if (ev->mask & IN_Q_OVERFLOW) {
                /* Lost events: every entry might have changed, and new ones
                 * may have appeared unseen. */
                DIR *d = opendir(w->dir);
                struct dirent *de;
                while (d && (de = readdir(d)) != NULL)
                    if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                        add_entry(w, de->d_name);
                if (d)
                    closedir(d);
                for (size_t i = 0; i < w->nent; i++)
                    if (w->ent[i].in_use && w->ent[i].state != S_QUEUED)
                        touch(w, &w->ent[i]);
                w->dirty = 1;
                log_msg(LOG_WARN, "watch", "inotify queue overflowed; rescanned %s", w->dir);
                continue;
            }
            if (ev->mask & IN_IGNORED) {
                drop_wd(w, ev->wd);
                continue;
            }
            if (!ename)
                continue;
            if (ename[0] == '\0') {
                /* The watched directory itself. */
                struct entry *e;
                if (!ev->len)
                    continue;
                if (ev->mask & (IN_DELETE | IN_MOVED_FROM)) {
                    remove_entry(w, ev->name);
                    continue;
                }
                if (!(e = add_entry(w, ev->name)))
                    continue;
                if (e->state == S_QUEUED)
                    continue;
                touch(w, e);
                if (ev->mask & (IN_CREATE | IN_MOVED_TO)) {
                    /* A known name may now be something else (replaced by a
                     * rename): look again, and watch a new directory. */
                    char p2[PBUF];
                    struct stat sb;
                    snprintf(p2, sizeof p2, "%s/%s", w->dir, e->name);
                    if (lstat(p2, &sb) == 0) {
                        e->kind = S_ISLNK(sb.st_mode) ? K_LINK : S_ISDIR(sb.st_mode) ? K_DIR : K_FILE;
                        if (e->kind == K_DIR)
                            watch_tree(w, p2, e->name, 0);
                    }
                }
                if (ev->mask & IN_MOVED_TO) {
                    e->trigger = T_RENAMED;
                    w->dirty = 1;
                }
                if (ev->mask & IN_CLOSE_WRITE)
                    on_marker(w, e, ev->name);
                continue;
            }
            /* Inside an entry's directory tree. */
            struct entry *e = find_entry(w, ename);
            if (!e || e->state == S_QUEUED)
                continue;
            touch(w, e);
            if ((ev->mask & (IN_CREATE | IN_MOVED_TO)) && (ev->mask & IN_ISDIR)) {
                char p2[PBUF];
                /* Find the directory's path from the watch: re-scan the
                 * entry tree (watches already present are kept). */
                snprintf(p2, sizeof p2, "%s/%s", w->dir, e->name);
                watch_tree(w, p2, e->name, 0);
            }
            if (ev->len && (ev->mask & (IN_CLOSE_WRITE | IN_MOVED_TO)))
                on_marker(w, e, ev->name);
        }
    }
}

void watch_file_event(struct watch *w, const char *path, const char *event)
{
    size_t n = strlen(w->dir);
    char name[256];
    const char *rel, *slash;
    struct entry *e;

    if (strncmp(path, w->dir, n) != 0 || path[n] != '/')
        return;
    rel = path + n + 1;
    slash = strchr(rel, '/');
    snprintf(name, sizeof name, "%.*s", slash ? (int)(slash - rel) : (int)strlen(rel), rel);
    if (!(e = add_entry(w, name)) || e->state == S_QUEUED)
        return;
    touch(w, e);
    if (strcmp(event, "renamed") == 0 && !slash) {
        e->trigger = T_RENAMED;
        w->dirty = 1;
    }
    const char *base = strrchr(path, '/');
    if (strcmp(event, "closed") == 0 || strcmp(event, "renamed") == 0)
        on_marker(w, e, base ? base + 1 : path);
}

int64_t watch_tick(struct watch *w)
{
    int64_t now = mono_ms(), next = -1;
    char p[PBUF];

    w->dirty = 0;
    if (w->paused)
        return -1;

    for (size_t i = 0; i < w->nent; i++) {
        struct entry *e = &w->ent[i];
        struct sig s;
        int complete = 0;

        if (!e->in_use || e->state != S_PENDING)
            continue;
        entry_sig(w, e, &s);
        if (!sig_eq(&s, &e->sig)) {
            e->sig = s;
            if (e->trigger == T_NONE)
                e->changed = now;
        }
        if (s.files == 0)
            goto later; /* nothing to commit yet: look again */
        snprintf(p, sizeof p, "%s/%s", w->dir, e->name);
        if (e->kind == K_LINK) {
            struct entry *t = link_target_entry(w, e);
            if (t && t->state != S_DONE)
                goto later; /* committed together with its target */
            /* Making a link is atomic: complete once what it points to is. */
            if (!t && (now - e->changed < (int64_t)w->settle_ms))
                goto later;
            complete = 1;
        } else if (e->trigger != T_NONE) {
            complete = 1;
        } else if (s.has_marker && w->marker[0] && !writer_under(w->pgid, p)) {
            /* Marker present when first seen (e.g. after an overflow). */
            e->trigger = T_MARKER;
            complete = 1;
        } else if (now - e->changed >= (int64_t)w->settle_ms) {
            if (!writer_under(w->pgid, p))
                complete = 1;
            else
                e->changed = now; /* still open for writing: wait a settle more */
        }
        if (complete) {
            /* The writer check ran after the signature: if anything moved in
             * between, what we would commit is not what we judged. */
            struct sig s2;
            entry_sig(w, e, &s2);
            if (!sig_eq(&s2, &e->sig)) {
                e->sig = s2;
                if (e->trigger == T_NONE)
                    e->changed = now;
                goto later;
            }
            if (sig_eq(&e->sig, &e->done_sig) && e->done_sig.files) {
                e->state = S_DONE; /* touched but unchanged: already committed */
                e->trigger = T_NONE;
                continue;
            }
            queue_entry(w, e);
            e->trigger = T_NONE;
            continue;
        }
    later:
        /* Check again at the settle deadline, and at least every second to
         * notice changes inotify cannot see (writes through mmap). */
        {
            int64_t due = e->changed + (int64_t)w->settle_ms;
            if (due > now + 1000)
                due = now + 1000;
            if (due < now + 50)
                due = now + 50;
            if (next < 0 || due < next)
                next = due;
        }
    }
    return next;
}

void watch_flush_pending(struct watch *w)
{
    for (size_t i = 0; !w->paused && i < w->nent; i++) {
        struct entry *e = &w->ent[i];
        if (!e->in_use || e->state != S_PENDING)
            continue;
        entry_sig(w, e, &e->sig);
        if (e->sig.files == 0 || (sig_eq(&e->sig, &e->done_sig) && e->done_sig.files)) {
            e->state = S_DONE;
            continue;
        }
        if (e->kind == K_LINK) {
            struct entry *t = link_target_entry(w, e);
            if (t && t->state == S_PENDING)
                continue; /* goes with its target below */
        }
        e->trigger = T_EXIT;
        queue_entry(w, e);
        e->trigger = T_NONE;
    }
}

struct watch_result *watch_take_result(struct watch *w)
{
    struct watch_result *r = NULL;
    if (read(w->pipe_r, &r, sizeof r) != (ssize_t)sizeof r)
        return NULL;
    /* Its entries are committed (or failed): back to done either way, so a
     * failure is retried only when the entry changes again. */
    for (size_t k = 0; k < r->nentries; k++) {
        struct entry *e = find_entry(w, r->entries[k]);
        if (e && e->state == S_QUEUED)
            e->state = S_DONE;
        /* Changes seen while queued were ignored: compare now. */
        if (e) {
            struct sig s;
            entry_sig(w, e, &s);
            if (!sig_eq(&s, &e->done_sig)) {
                e->sig = s;
                e->state = S_PENDING;
                e->changed = mono_ms();
                w->dirty = 1;
            }
        }
    }
    return r;
}

void watch_result_free(struct watch_result *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->nentries; i++)
        free(r->entries[i]);
    free(r->entries);
    free(r);
}
