/* runs.c -- the runs of a store (runs.h). */
#include "record/runs.h"
#include "record/lease.h"
#include "record/record.h"
#include "ckpt_common.h"
#include "ckpt_store.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEAD_MAX_BYTES (16u << 20) /* libckpt's own bound on a HEAD */

struct walk {
    struct runs *r;
    size_t last; /* the run of the previous key: keys of one run come together */
    uint64_t keys, max_keys;
    int oom;
};

static struct run_sum *run_of(struct walk *w, const char *name, size_t len)
{
    struct runs *r = w->r;
    struct run_sum *s;

    if (w->last < r->n && strlen(r->v[w->last].name) == len &&
        memcmp(r->v[w->last].name, name, len) == 0)
        return &r->v[w->last];
    /* A store lists a run's keys together (S3 in key order, file:// one
     * directory tree at a time), so this search runs once per run. */
    for (size_t i = 0; i < r->n; i++)
        if (strlen(r->v[i].name) == len && memcmp(r->v[i].name, name, len) == 0)
            return &r->v[w->last = i];
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 16;
        struct run_sum *v = realloc(r->v, cap * sizeof *v);
        if (!v)
            return NULL;
        r->v = v;
        r->cap = cap;
    }
    s = &r->v[r->n];
    memset(s, 0, sizeof *s);
    if (!(s->name = strndup(name, len)))
        return NULL;
    w->last = r->n++;
    return s;
}

static int walk_cb(void *user, const struct ckpt_obj_info *obj)
{
    struct walk *w = user;
    const char *slash = strchr(obj->key, '/');
    struct run_sum *s;

    if (w->max_keys && w->keys >= w->max_keys) {
        w->r->truncated = 1;
        return 1;
    }
    w->keys++;
    if (!slash || slash == obj->key)
        return 0; /* not under a run */
    if (!(s = run_of(w, obj->key, (size_t)(slash - obj->key)))) {
        w->oom = 1;
        return 1;
    }
    s->objects++;
    s->bytes += obj->size;
    if (obj->mtime_ms > s->newest_ms)
        s->newest_ms = obj->mtime_ms;
    s->has_head |= strcmp(slash, "/HEAD") == 0;
    s->has_run |= strcmp(slash, "/RUN") == 0;
    return 0;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const struct run_sum *)a)->name, ((const struct run_sum *)b)->name);
}

ckpt_status runs_walk(struct ckpt_store *st, uint64_t max_keys, struct runs *out, char *err)
{
    struct walk w = { out, (size_t)-1, 0, max_keys, 0 };
    ckpt_status s;
    size_t k = 0;

    memset(out, 0, sizeof *out);
    s = st->ops->list(st, "", walk_cb, &w, err);
    if (s == CKPT_OK && w.oom)
        s = CKPT_E_NOMEM;
    /* prefixes holding neither HEAD nor RUN are not runs (a doctor's
     * probe objects, something else sharing the bucket) */
    for (size_t i = 0; i < out->n; i++) {
        if (out->v[i].has_head || out->v[i].has_run)
            out->v[k++] = out->v[i];
        else
            free(out->v[i].name);
    }
    out->n = k;
    if (out->n)
        qsort(out->v, out->n, sizeof *out->v, cmp_name);
    return s;
}

/* ---- what each run says of itself ------------------------------------------------ */

static void set_error(struct run_sum *s, ckpt_status st, const char *what, const char *err)
{
    if (s->error != CKPT_OK)
        return; /* the first one says most */
    s->error = st;
    snprintf(s->detail, sizeof s->detail, "%s: %s%s%s", what, ckpt_strerror(st),
             err && *err ? ": " : "", err ? err : "");
}

/* ---- a run whose HEAD is damaged: what its manifests show ---------------------------- */

struct scan {
    struct run_sum *s;
    char said[CKPT_ERR_MAX]; /* libckpt's warning: the damage, and what it read instead */
};

/* The library tells a damaged HEAD once a context (subject "head"), after
 * the manifests it left out: the last such line is that summary. Called
 * by one thread at a time (the one that scanned first). */
static void scan_log(void *user, ckpt_log_level level, const char *subject, const char *msg)
{
    struct scan *sc = user;
    if (level == CKPT_LOG_WARN && strcmp(subject, "head") == 0)
        snprintf(sc->said, sizeof sc->said, "%s", msg);
}

static int scan_row(void *user, const struct ckpt_info *i)
{
    struct run_sum *s = user;
    if (s->checkpoints++ == 0)
        s->step = i->step; /* the resume order: newest first */
    return 0;
}

/* Read the run as every reader of libckpt does when HEAD is damaged (the
 * manifests' view, its rules: leftovers of a fenced runner and superseded
 * steps left out), through a context of the store's URL and ckpt_list:
 * `ls --run` shows the same checkpoints. */
static void from_manifests(struct ckpt_store *st, struct run_sum *s)
{
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct scan sc = { s, "" };
    struct ckpt_ctx *ctx = NULL;
    int first = s->error == CKPT_OK; /* else the detail already says most */
    ckpt_status c;

    cfg.store = st->url;
    cfg.run = s->name;
    cfg.no_control = 1;
    cfg.workers = 1;
    cfg.log_fn = scan_log;
    cfg.log_user = &sc;
    cfg.log_level = CKPT_LOG_WARN;
    s->checkpoints = 0;
    c = ckpt_open(&cfg, &ctx);
    if (c == CKPT_OK)
        c = ckpt_list(ctx, scan_row, s);
    if (c != CKPT_OK) {
        s->checkpoints = 0;
        if (first)
            snprintf(s->detail, sizeof s->detail,
                     "HEAD is damaged, and its manifests could not be read instead: %s: %s",
                     ckpt_strerror(c), ckpt_errmsg(ctx));
        ckpt_close(ctx);
        return;
    }
    ckpt_close(ctx); /* after its load too: whichever read told the damage */
    s->have_step = s->checkpoints > 0;
    if (!sc.said[0]) {
        /* HEAD read whole this time: a commit rewrote it meanwhile */
        s->head_bad = s->head_damaged = 0;
        return;
    }
    if (first)
        snprintf(s->detail, sizeof s->detail,
                 "%s; '!' marks the newest step they show (`ckptrun ls --run %s` lists them)",
                 sc.said, s->name);
}

static void describe(struct ckpt_store *st, struct run_sum *s)
{
    char key[512], err[CKPT_ERR_MAX] = "";
    cJSON *run = NULL;
    void *buf = NULL;
    size_t len;
    ckpt_status c;

    s->state = "unknown";
    if (s->has_run) {
        c = record_read_run_of(st, s->name, &run);
        if (c == CKPT_OK) {
            const cJSON *state = cJSON_GetObjectItemCaseSensitive(run, "state");
            /* the state names ckptrun writes (record.h); anything else is
             * not ours to print */
            static const char *const known[] = { "running", "preempted", "stopped", "completed",
                                                 "failed" };
            s->state = "?";
            for (size_t i = 0; cJSON_IsString(state) && i < sizeof known / sizeof known[0]; i++)
                if (strcmp(state->valuestring, known[i]) == 0)
                    s->state = known[i];
        } else if (c != CKPT_E_NOENT) {
            s->state = "?";
            set_error(s, c, "RUN", NULL);
        }
    }
    if (strcmp(s->state, "running") == 0) {
        /* status's rule: running with no live runner holding the lease is stale */
        struct lease_info li;
        c = lease_read(st, s->name, &li, NULL, err);
        if (c == CKPT_OK && lease_state(&li, ckpt__now_ms()) != LEASE_LIVE)
            s->state = "stale";
        else if (c != CKPT_OK && c != CKPT_E_NOENT)
            set_error(s, c, "LEASE", err);
    }
    if (s->has_head) {
        struct ckpt_head_info h;
        snprintf(key, sizeof key, "%s/HEAD", s->name);
        err[0] = '\0';
        int damaged = 0;
        c = ckpt_store_get(st, key, HEAD_MAX_BYTES, &buf, &len, NULL, err);
        if (c == CKPT_OK)
            damaged = (c = ckpt_head_parse(buf, len, &h)) == CKPT_E_CORRUPT;
        if (c == CKPT_OK) {
            s->have_step = h.checkpoints > 0;
            s->step = h.step;
            s->checkpoints = h.checkpoints;
        } else if (damaged) {
            /* there, but not a HEAD: the manifests say what it said */
            s->head_bad = s->head_damaged = 1;
            from_manifests(st, s);
            if (s->head_damaged && s->error == CKPT_OK)
                s->error = c;
        } else if (c != CKPT_E_NOENT) {
            s->head_bad = 1;
            set_error(s, c, "HEAD", err);
        }
    }
    free(buf);
    cJSON_Delete(run);
}

struct pool {
    struct ckpt_store *st;
    struct runs *r;
    atomic_size_t next;
};

static void *worker(void *arg)
{
    struct pool *p = arg;
    size_t i;
    while ((i = atomic_fetch_add(&p->next, 1)) < p->r->n)
        describe(p->st, &p->r->v[i]);
    return NULL;
}

void runs_describe(struct ckpt_store *st, struct runs *r, unsigned parallel)
{
    struct pool p = { st, r, 0 };
    pthread_t thr[64];
    unsigned n = 0;

    if (parallel > sizeof thr / sizeof thr[0])
        parallel = sizeof thr / sizeof thr[0];
    /* a store's requests wait on the network: several runs at a time (the
     * store handle is thread-safe); this thread takes part too */
    while (n + 1 < parallel && n + 1 < r->n && pthread_create(&thr[n], NULL, worker, &p) == 0)
        n++;
    worker(&p);
    for (unsigned i = 0; i < n; i++)
        pthread_join(thr[i], NULL);
}

void runs_free(struct runs *r)
{
    for (size_t i = 0; i < r->n; i++)
        free(r->v[i].name);
    free(r->v);
    memset(r, 0, sizeof *r);
}
