/* watch/events.c -- what inotify (and the preload shim) say about CKPT_DIR:
 * entries made, replaced, renamed into place, closed after writing,
 * marked, or losing files (watch/int.h). */
#include "watch/int.h"
#include "watch/events.h"
#include "base/runlog.h"
#include "base/parse.h"
#include "watch/entry.h"
#include "watch/writers.h"

#include <dirent.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

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
    int64_t now = ckpt__mono_ms();

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
    int64_t now = ckpt__mono_ms();

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
