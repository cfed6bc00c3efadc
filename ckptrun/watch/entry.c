/* watch/entry.c -- the entries of CKPT_DIR and their inotify watches, what
 * each looks like on disk (its signature), and the step counter
 * (watch/int.h). */
#include "watch/int.h"
#include "base/runlog.h"
#include "base/parse.h"
#include "watch/entry.h"

#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

uint64_t quiet_ms(const struct watch *w)
{
    return w->settle_ms < QUIET_MAX_MS ? w->settle_ms : QUIET_MAX_MS;
}

void entry_path(const struct watch *w, const struct entry *e, char *p, size_t n)
{
    snprintf(p, n, "%s/%s", w->dir, e->name);
}

struct entry *find_entry(struct watch *w, const char *name)
{
    for (size_t i = 0; i < w->nent; i++)
        if (w->ent[i].in_use && strcmp(w->ent[i].name, name) == 0)
            return &w->ent[i];
    return NULL;
}

struct entry *find_gen(struct watch *w, const char *name, uint64_t gen)
{
    struct entry *e = find_entry(w, name);
    return e && e->gen == gen ? e : NULL;
}

void add_wd(struct watch *w, int wd, const char *entry)
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

const char *wd_entry(struct watch *w, int wd)
{
    for (size_t i = 0; i < w->nwm; i++)
        if (w->wm[i].wd == wd)
            return w->wm[i].entry;
    return NULL;
}

void drop_wd(struct watch *w, int wd)
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
void watch_tree(struct watch *w, const char *path, const char *entry, int depth)
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

void read_link(struct watch *w, struct entry *e)
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
int init_entry(struct watch *w, struct entry *e, const char *name, int64_t now)
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
    e->name_numbered = e->kind != K_LINK && parse_step_from_name(name, &e->name_step);
    e->numbered = e->name_numbered;
    e->step = e->name_step;
    e->step_from = e->numbered ? SF_NAME : SF_COUNTER;
    if (e->numbered)
        counter_note(w, e->step);
    if (e->kind == K_LINK) {
        read_link(w, e);
        w->links_changed = now;
    }
    if (e->kind == K_DIR)
        watch_tree(w, p, name, 0);
    w->dirty = 1;
    return 0;
}

struct entry *add_entry(struct watch *w, const char *name, int64_t now)
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

void remove_entry(struct watch *w, struct entry *e, int64_t now)
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
void entry_lost(struct watch *w, struct entry *e, const char *what)
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

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

struct marker_user {
    const char *glob;
    struct sig *s;
    uint64_t step;            /* the entry's number, made '#' in its files' names */
    int numbered;
};

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33; /* splitmix64's finalizer: sums of mixed values rarely collide */
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* Each file: the marker? And its name (below the entry), with every number
 * equal to the entry's step written '#' (DeepSpeed's global_step500/ in
 * checkpoint-500/), added to the shape: the same files in the next
 * checkpoint give the same shape. */
static void marker_cb(void *user, const char *name, const char *base)
{
    struct marker_user *u = user;
    const char *rel = strchr(name, '/');
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */

    if (u->glob[0] && fnmatch(u->glob, base, 0) == 0)
        u->s->has_marker = 1;
    for (const char *c = rel ? rel + 1 : name; *c;) {
        if (u->numbered && *c >= '0' && *c <= '9') {
            const char *d = c;
            uint64_t v = 0;
            int big = 0;
            while (*d >= '0' && *d <= '9') {
                big |= v > (UINT64_MAX - 9) / 10;
                v = v * 10 + (uint64_t)(*d - '0');
                d++;
            }
            if (!big && v == u->step && (c[0] != '0' || d - c == 1)) {
                h = (h ^ (unsigned char)'#') * 1099511628211ULL;
                c = d;
                continue;
            }
            for (; c < d; c++)
                h = (h ^ (unsigned char)*c) * 1099511628211ULL;
            continue;
        }
        h = (h ^ (unsigned char)*c) * 1099511628211ULL;
        c++;
    }
    u->s->shape += mix64(h);
}

/* @return 0, or -1 when something vanished during the walk (the entry is
 * changing; *s holds what was seen). A link's signature is its target text
 * plus what it points to (nothing when dangling). */
int entry_sig(struct watch *w, const struct entry *e, struct sig *s)
{
    char p[PBUF];
    struct marker_user mu = { w->marker, s, e->name_step, e->name_numbered };

    memset(s, 0, sizeof *s);
    entry_path(w, e, p, sizeof p);
    if (e->kind == K_LINK) {
        s->link_hash = e->link ? hash_str(e->link) : 1;
        if (commit_print_path(p, &s->p, NULL, NULL) != 0)
            memset(&s->p, 0, sizeof s->p);
        return 0;
    }
    return commit_print_walk(p, &s->p, e->kind == K_DIR ? marker_cb : NULL, &mu);
}

int sig_eq(const struct sig *a, const struct sig *b)
{
    return commit_print_eq(&a->p, &b->p) && a->link_hash == b->link_hash;
}

int includable(const struct entry *e)
{
    return e->in_use && e->kind != K_LINK && e->ok && !e->removing && e->sig_ok &&
           e->sig.p.files > 0 && sig_eq(&e->sig, &e->ok_sig);
}

int needs_commit(const struct entry *e)
{
    /* A version committed at another step than the trainer's (its saved()
     * came after the commit began) goes again, at the trainer's. */
    return includable(e) && (!e->done || !sig_eq(&e->ok_sig, &e->done_sig) || e->restep) &&
           !(e->failed && sig_eq(&e->ok_sig, &e->failed_sig));
}

void touch(struct entry *e, int64_t now)
{
    e->changed = now;
    e->touched = 1;
}

void due_min(int64_t *next, int64_t due)
{
    if (due >= 0 && (*next < 0 || due < *next))
        *next = due;
}

void counter_note(struct watch *w, uint64_t step)
{
    if (step < UINT64_MAX - 2 && step + 1 > w->counter)
        w->counter = step + 1;
}
