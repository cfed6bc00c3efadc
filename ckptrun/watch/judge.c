/* watch/judge.c -- when an entry is complete (watch.h; docs/ckptrun.md,
 * "Watched directory"), and a warning when nothing ever is
 * (watch/int.h). */
#include "watch/int.h"
#include "base/runlog.h"
#include "watch/entry.h"
#include "watch/judge.h"
#include "watch/steps.h"
#include "watch/writers.h"

#include <stdio.h>
#include <string.h>

void mark_ok(struct watch *w, struct entry *e, const char *by, int64_t now)
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
    if (e->kind == K_DIR && e->sig.has_marker) {
        /* What a complete checkpoint of this writer holds: an entry with
         * the same files is complete without waiting (judge). */
        w->shape = e->sig.shape;
        w->have_shape = 1;
    }
    if ((e->done && sig_eq(&e->sig, &e->done_sig)) ||
        (e->failed && sig_eq(&e->sig, &e->failed_sig)))
        return; /* touched, not changed: that version is settled already */
    resolve_step(w, e);
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

/* A directory with its marker whose writer has gone on to a newer one: a
 * newer entry (seen after it, with a higher step) has its marker. A trainer
 * that saves step by step has finished the older one then (its ranks took
 * the steps in between together), whatever its pace. */
static int superseded(const struct watch *w, const struct entry *e)
{
    for (size_t i = 0; i < w->nent; i++) {
        const struct entry *f = &w->ent[i];
        if (f->in_use && f != e && f->kind == K_DIR && f->gen > e->gen && f->name_numbered &&
            e->name_numbered && f->name_step > e->name_step && f->sig.has_marker &&
            !f->removing)
            return 1;
    }
    return 0;
}

/* A marker is there and nothing more is to come: the entry holds the same
 * files as the last complete one (rank shards written after the marker
 * included), or its writer has moved on to a newer entry. Either way its
 * writers must be done too (judge). */
static int marker_done(const struct watch *w, const struct entry *e)
{
    return (w->have_shape && e->sig.shape == w->shape) || superseded(w, e);
}

void judge(struct watch *w, struct entry *e, int64_t now, int64_t *next)
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
    if (claim_of(w, e)) {
        /* The trainer reported this version saved (saved()). A process
         * still writing in it (another rank) finishes first. */
        if (writer_under(w, e)) {
            due = now + WRITER_POLL_MS;
            goto later;
        }
        by = "saved";
        goto complete;
    }
    if (w->saved_mode)
        goto settle; /* the watch's own judgement: for what saved() never names */
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
        /* No quiet time: a writer that saves faster than it would never
         * see its newest entry committed (older ones deleted by its
         * rotation meanwhile). And at the stop's last look, whatever is
         * still to learn: the child is about to be signalled and a
         * checkpoint marked and left alone for a moment is better kept
         * than lost (ranks write their shards right after the marker). */
        if (marker_done(w, e) || (w->last_look && now - e->changed >= CLOSE_MS)) {
            if (writer_under(w, e)) {
                due = now + WRITER_POLL_MS;
                goto later;
            }
            by = "marker";
            goto complete;
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

void stuck_check(struct watch *w, int64_t now, int64_t *next)
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
