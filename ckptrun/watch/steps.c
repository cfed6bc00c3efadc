/* watch/steps.c -- whose step an entry has (watch/int.h): the trainer's
 * wherever it gives one -- its saved() report, HF's trainer_state.json, the
 * number in the entry's name -- else the watcher's counter (docs/ckptrun.md,
 * "Step"); and which steps the directory holds (watch.h). */
#include "watch/int.h"
#include "base/runlog.h"
#include "watch/entry.h"
#include "watch/events.h"
#include "watch/steps.h"
#include "watch/writers.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STATE_FILE "trainer_state.json"
#define HF_PREFIX "checkpoint-"

int watch_has_step(const struct watch *w, uint64_t step)
{
    for (size_t i = 0; i < w->nent; i++) {
        const struct entry *e = &w->ent[i];
        if (e->in_use && e->numbered && e->step == step)
            return 1;
    }
    return 0;
}

struct claim *claim_of(struct watch *w, const struct entry *e)
{
    for (int i = 0; i < MAX_CLAIMS; i++) {
        struct claim *c = &w->claims[i];
        if (c->in_use && strcmp(c->name, e->name) == 0 &&
            (sig_eq(&c->sig, &e->sig) || (c->waiting && c->gen == e->gen)))
            return c;
    }
    return NULL;
}

/* `global_step` of a trainer_state.json: a whole number, at most 2^53 (a
 * JSON number is a double). The file is the trainer's, read as untrusted:
 * bounded, parsed by cJSON. @return 1 with *step, or 0. */
static int state_step(const char *path, uint64_t *step)
{
    char *buf = NULL;
    cJSON *j = NULL;
    const cJSON *v;
    struct stat sb;
    ssize_t got = 0;
    int fd = -1, ok = 0;

    if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
        goto out;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size <= 0 ||
        sb.st_size > STATE_MAX_BYTES || !(buf = malloc((size_t)sb.st_size)))
        goto out;
    while (got < sb.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)(sb.st_size - got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            goto out;
        got += r;
    }
    j = cJSON_ParseWithLength(buf, (size_t)got);
    v = cJSON_GetObjectItemCaseSensitive(j, "global_step");
    if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= 9007199254740992.0 &&
        floor(v->valuedouble) == v->valuedouble) {
        *step = (uint64_t)v->valuedouble;
        ok = 1;
    }
out:
    cJSON_Delete(j);
    free(buf);
    if (fd >= 0)
        close(fd);
    return ok;
}

/* HF's step of a directory entry: trainer_state.json at its top (the entry
 * is a checkpoint-N/, or a model saved with its state), else in its
 * checkpoint-N/ with the highest N (the entry is an HF output directory).
 * @return 1 with *step, or 0. */
static int hf_step(const struct watch *w, const struct entry *e, uint64_t *step)
{
    char p[PBUF + 300], best[256] = "";
    uint64_t bestn = 0;
    DIR *d;
    struct dirent *de;

    snprintf(p, sizeof p, "%s/%s/" STATE_FILE, w->dir, e->name);
    if (state_step(p, step))
        return 1;
    snprintf(p, sizeof p, "%s/%s", w->dir, e->name);
    if (!(d = opendir(p)))
        return 0;
    while ((de = readdir(d)) != NULL) {
        const char *s = de->d_name + strlen(HF_PREFIX);
        char *end;
        unsigned long long n;
        if (strncmp(de->d_name, HF_PREFIX, strlen(HF_PREFIX)) != 0 || *s < '0' || *s > '9')
            continue;
        errno = 0;
        n = strtoull(s, &end, 10);
        if (*end || errno || (best[0] && n <= bestn))
            continue;
        bestn = n;
        snprintf(best, sizeof best, "%s", de->d_name);
    }
    closedir(d);
    if (!best[0])
        return 0;
    snprintf(p, sizeof p, "%s/%s/%s/" STATE_FILE, w->dir, e->name, best);
    return state_step(p, step);
}

/* A trainer's step below what the run holds (a restart from an older
 * checkpoint) keeps its number: steps order checkpoints, so what resumes
 * stays the higher one (DESIGN.md §1). Said once. */
static void step_back(struct watch *w, const struct entry *e)
{
    if (!e->numbered || e->done || !w->have_top || e->step >= w->top || w->back_told)
        return;
    w->back_told = 1;
    log_msg(LOG_WARN, "watch",
            "%s is step %" PRIu64 " (%s), below step %" PRIu64 " that the "
            "run already holds: committed at its own step, so a resume still restores step "
            "%" PRIu64 " (the highest); for a new training start a new --run",
            e->name, e->step,
            e->step_from == SF_SAVED   ? "saved()"
            : e->step_from == SF_STATE ? STATE_FILE
                                       : "its name",
            w->top, w->top);
}

void resolve_step(struct watch *w, struct entry *e)
{
    struct claim *c = claim_of(w, e);
    uint64_t st;

    if (c) {
        e->step = c->step;
        e->step_from = SF_SAVED;
        c->sig = e->sig; /* this version, its writers done: the one reported */
        c->waiting = 0;
    } else if (e->kind == K_DIR && hf_step(w, e, &st)) {
        e->step = st;
        e->step_from = SF_STATE;
    } else if (e->name_numbered) {
        e->step = e->name_step;
        e->step_from = SF_NAME;
    } else {
        /* Nothing gives one: above every step seen. */
        e->step = w->counter;
        e->step_from = SF_COUNTER;
    }
    e->numbered = e->step_from != SF_COUNTER;
    e->restep = 0;
    counter_note(w, e->step);
    step_back(w, e);
}

/* ---- saved() ------------------------------------------------------------------- */

/* The entry a reported path names, from an absolute path under the
 * directory; a path through a symbolic link to it (CKPT_DIR given through
 * one) is resolved by its parent. @return 0 with name, or -1. */
static int entry_name(const struct watch *w, const char *path, char *name, size_t n)
{
    char parent[PATH_MAX], real[PATH_MAX], full[PATH_MAX * 2];
    const char *rel, *slash, *base;
    size_t dl = strlen(w->dir);

    if (strncmp(path, w->dir, dl) != 0 || path[dl] != '/') {
        base = strrchr(path, '/');
        if (!base || base == path || (size_t)(base - path) >= sizeof parent)
            return -1;
        snprintf(parent, sizeof parent, "%.*s", (int)(base - path), path);
        if (!realpath(parent, real))
            return -1;
        snprintf(full, sizeof full, "%s%s", real, base);
        path = full;
        if (strncmp(path, w->dir, dl) != 0 || path[dl] != '/')
            return -1;
    }
    rel = path + dl + 1;
    slash = strchr(rel, '/');
    if ((slash ? (size_t)(slash - rel) : strlen(rel)) >= n || rel[0] == '\0')
        return -1;
    snprintf(name, n, "%.*s", slash ? (int)(slash - rel) : (int)strlen(rel), rel);
    return 0;
}

static void claim_add(struct watch *w, const struct entry *e, uint64_t step, const struct sig *s,
                      int waiting)
{
    const char *name = e->name;
    struct claim *c = NULL;
    int oldest = 0;

    for (int i = 0; i < MAX_CLAIMS && !c; i++)
        if (w->claims[i].in_use && strcmp(w->claims[i].name, name) == 0)
            c = &w->claims[i]; /* the name's newer report replaces it */
    for (int i = 0; i < MAX_CLAIMS && !c; i++)
        if (!w->claims[i].in_use)
            c = &w->claims[i];
    if (!c) {
        /* Full: the slot after the newest one written is the oldest. */
        oldest = (int)(w->claims_next % MAX_CLAIMS);
        c = &w->claims[oldest];
    }
    w->claims_next = (uint64_t)(c - w->claims) + 1;
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    c->step = step;
    c->sig = *s;
    c->gen = e->gen;
    c->waiting = waiting;
    c->in_use = 1;
}

void watch_saved(struct watch *w, const char *path, const char *event, int has_step, uint64_t step)
{
    char name[256];
    struct entry *e;
    struct sig s;
    int64_t now = ckpt__mono_ms();

    if (!has_step) {
        watch_file_event(w, path, event);
        return;
    }
    if (entry_name(w, path, name, sizeof name) != 0) {
        log_msg(LOG_WARN, "watch",
                "saved(%s, %" PRIu64 ") is not in %s: ignored (save into "
                "CKPT_DIR)",
                path, step, w->dir);
        return;
    }
    if (!w->saved_mode) {
        w->saved_mode = 1;
        log_msg(LOG_INFO, "watch",
                "the trainer reports its saves (saved()): entries are "
                "committed when it reports them, at its step; entries it never reports once "
                "unchanged for --settle");
    }
    if (!(e = add_entry(w, name, now)) || e->kind == K_LINK) {
        log_msg(LOG_DEBUG, "watch", "saved(%s): no such entry in %s", path, w->dir);
        return;
    }
    if (entry_sig(w, e, &s) != 0 || s.p.files == 0) {
        log_msg(LOG_WARN, "watch",
                "saved(%s, %" PRIu64 "): %s is changing or empty as it is "
                "reported: committed once unchanged for --settle",
                path, step, name);
        touch(e, now);
        return;
    }
    /* Reported while another process still writes in it (a rank's shard
     * after rank 0's report): that instance once they are done. */
    claim_add(w, e, step, &s, writer_under(w, e));
    counter_note(w, step);
    touch(e, now);
    w->dirty = 1;
    if (e->ok && sig_eq(&e->ok_sig, &s) && (!e->numbered || e->step != step)) {
        /* Complete already (its rename came first), at another step: the
         * trainer's wins. Committed again at it if it went out already. */
        e->step = step;
        e->numbered = 1;
        e->step_from = SF_SAVED;
        e->restep = 1;
        log_msg(LOG_INFO, "watch", "%s is step %" PRIu64 " (saved())", e->name, step);
        step_back(w, e);
    }
}
