/* record.c -- see record.h. */
#include "record/record.h"
#include "base/runlog.h"
#include "base/parse.h"
#include "ckpt_store.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A write waiting for the writer thread. */
struct pending {
    struct pending *next;
    char *key;
    char *body;
};

struct record {
    struct ckpt_store *st;
    char run[160];
    char host[72];
    pid_t pid;
    uint64_t seq;     /* event sequence of this process: keys stay unique
                         even for two events in the same millisecond */
    uint64_t epoch;   /* lease epoch of this runner, written into RUN */
    unsigned node, nnodes; /* record_set_node: files marks of one node's part */

    /* Asynchronous writes (record_start_writer): the supervisor's loop must
     * never wait on an object store's latency or retries during a stop.
     * One thread, FIFO, so RUN and events land in the order made. */
    int async;
    pthread_t thr;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct pending *head, *tail;
    int stop;
};

ckpt_status record_open(const char *url, const char *run, struct record **out, char *err)
{
    struct record *r = calloc(1, sizeof *r);
    char hn[256] = "";
    ckpt_status st = CKPT_E_NOMEM;

    *out = NULL;
    if (!r)
        goto out;
    snprintf(r->run, sizeof r->run, "%s", run);
    /* Host names go into keys: sanitize to the key alphabet. */
    if (gethostname(hn, sizeof hn - 1) != 0 ||
        ckpt__name_sanitize(hn, r->host, sizeof r->host) != 0)
        snprintf(r->host, sizeof r->host, "host");
    r->pid = getpid();
    st = ckpt_store_open(url, NULL, &r->st, err);
    if (st != CKPT_OK)
        goto out;
    *out = r;
    r = NULL;
out:
    free(r);
    return st;
}

static void put_now(struct record *r, const char *key, const char *body)
{
    char err[CKPT_ERR_MAX] = "";
    ckpt_status st = ckpt_store_put(r->st, key, body, strlen(body), NULL, NULL, err);
    if (st != CKPT_OK)
        log_msg(LOG_WARN, "record", "cannot write %s: %s %s", key, ckpt_strerror(st), err);
}

static void *writer(void *arg)
{
    struct record *r = arg;

    pthread_mutex_lock(&r->mu);
    for (;;) {
        struct pending *p;
        while (!r->head && !r->stop)
            pthread_cond_wait(&r->cv, &r->mu);
        if (!r->head)
            break; /* stopping and drained */
        p = r->head;
        r->head = p->next;
        if (!r->head)
            r->tail = NULL;
        pthread_mutex_unlock(&r->mu);
        put_now(r, p->key, p->body);
        free(p->key);
        free(p->body);
        free(p);
        pthread_mutex_lock(&r->mu);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

int record_start_writer(struct record *r)
{
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    if (pthread_create(&r->thr, NULL, writer, r) != 0) {
        pthread_mutex_destroy(&r->mu);
        pthread_cond_destroy(&r->cv);
        return -1;
    }
    r->async = 1;
    return 0;
}

void record_drain(struct record *r)
{
    if (!r || !r->async)
        return;
    /* The final RUN state and exit event must land. */
    pthread_mutex_lock(&r->mu);
    r->stop = 1;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->thr, NULL);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    r->async = 0;
    r->stop = 0;
}

void record_close(struct record *r)
{
    if (!r)
        return;
    record_drain(r);
    ckpt_store_close(r->st);
    free(r);
}

struct ckpt_store *record_store(struct record *r) { return r->st; }
const char *record_host(struct record *r) { return r->host; }

/* Read a small JSON object at key. */
static ckpt_status get_json(struct record *r, const char *key, cJSON **out)
{
    void *buf = NULL;
    size_t len = 0;
    char err[CKPT_ERR_MAX] = "";
    cJSON *j = NULL;
    ckpt_status st;

    *out = NULL;
    st = ckpt_store_get(r->st, key, RECORD_MAX_BYTES, &buf, &len, NULL, err);
    if (st != CKPT_OK)
        goto out;
    /* Store content is untrusted: bounded above, parsed with a length. */
    j = cJSON_ParseWithLength(buf, len);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        st = CKPT_E_CORRUPT;
        goto out;
    }
    *out = j;
out:
    free(buf);
    return st;
}

static ckpt_status put_json(struct record *r, const char *key, const cJSON *j)
{
    char *s = cJSON_PrintUnformatted(j);
    struct pending *p = NULL;
    ckpt_status st = CKPT_E_NOMEM;

    if (!s)
        goto out;
    if (!r->async) {
        put_now(r, key, s);
        st = CKPT_OK;
        goto out;
    }
    if (!(p = calloc(1, sizeof *p)) || !(p->key = strdup(key)))
        goto out;
    p->body = s;
    s = NULL;
    pthread_mutex_lock(&r->mu);
    if (r->tail)
        r->tail->next = p;
    else
        r->head = p;
    r->tail = p;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    p = NULL;
    st = CKPT_OK;
out:
    if (p)
        free(p->key);
    free(p);
    free(s);
    return st;
}

ckpt_status record_read_run(struct record *r, cJSON **out)
{
    char key[256];
    ckpt_status st;
    const cJSON *fmt;

    snprintf(key, sizeof key, "%s/RUN", r->run);
    st = get_json(r, key, out);
    if (st != CKPT_OK)
        goto out;
    fmt = cJSON_GetObjectItemCaseSensitive(*out, "format");
    /* A newer major format is not ours to interpret. */
    if (!cJSON_IsNumber(fmt) || fmt->valuedouble < 1 || fmt->valuedouble > RECORD_FORMAT) {
        cJSON_Delete(*out);
        *out = NULL;
        st = CKPT_E_CORRUPT;
    }
out:
    return st;
}

void record_set_epoch(struct record *r, uint64_t epoch)
{
    r->epoch = epoch;
}

ckpt_status record_set_state(struct record *r, const char *state, int64_t last_step,
                             uint64_t preemptions, int64_t started_ms, const cJSON *extra)
{
    char key[256];
    cJSON *j = cJSON_CreateObject();
    ckpt_status st = CKPT_E_NOMEM;

    if (!j)
        goto out;
    snprintf(key, sizeof key, "%s/RUN", r->run);
    cJSON_AddNumberToObject(j, "format", RECORD_FORMAT);
    cJSON_AddStringToObject(j, "state", state);
    cJSON_AddNumberToObject(j, "updated_ms", (double)ckpt__now_ms());
    cJSON_AddNumberToObject(j, "started_ms", (double)started_ms);
    cJSON_AddStringToObject(j, "host", r->host);
    cJSON_AddNumberToObject(j, "pid", (double)r->pid);
    cJSON_AddNumberToObject(j, "epoch", (double)r->epoch);
    if (last_step >= 0)
        cJSON_AddNumberToObject(j, "last_step", (double)last_step);
    else
        cJSON_AddNullToObject(j, "last_step");
    cJSON_AddNumberToObject(j, "preemptions", (double)preemptions);
    /* Fields are only added (format 1 stays): older readers ignore them. */
    for (const cJSON *it = extra ? extra->child : NULL; it; it = it->next)
        if (it->string && !cJSON_GetObjectItemCaseSensitive(j, it->string))
            cJSON_AddItemToObject(j, it->string, cJSON_Duplicate(it, 1));
    st = put_json(r, key, j);
out:
    cJSON_Delete(j);
    return st;
}

ckpt_status record_event(struct record *r, const char *type, const cJSON *fields)
{
    char key[320];
    int64_t t = ckpt__now_ms();
    cJSON *j = cJSON_CreateObject();
    ckpt_status st = CKPT_E_NOMEM;

    if (!j)
        goto out;
    /* 13 digits of Unix ms sort lexically until the year 2286. */
    snprintf(key, sizeof key, "%s/events/%013" PRId64 "-%s-%d-%06" PRIu64 ".json", r->run, t,
             r->host, (int)r->pid, r->seq++);
    cJSON_AddStringToObject(j, "type", type);
    cJSON_AddNumberToObject(j, "time_ms", (double)t);
    cJSON_AddStringToObject(j, "host", r->host);
    cJSON_AddNumberToObject(j, "pid", (double)r->pid);
    for (const cJSON *it = fields ? fields->child : NULL; it; it = it->next)
        if (it->string && !cJSON_GetObjectItemCaseSensitive(j, it->string))
            cJSON_AddItemToObject(j, it->string, cJSON_Duplicate(it, 1));
    st = put_json(r, key, j);
out:
    cJSON_Delete(j);
    return st;
}

/* ---- listing helpers ------------------------------------------------------ */

/* A store's keys under a prefix, sorted; `oom`: the list ran out of memory. */
struct keys {
    struct ckpt_strv l;
    int oom;
};

static int keys_cb(void *user, const struct ckpt_obj_info *obj)
{
    struct keys *k = user;
    if (ckpt__strv_push(&k->l, obj->key) != 0) {
        k->oom = 1;
        return 1;
    }
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static ckpt_status list_keys(struct record *r, const char *prefix, struct keys *k)
{
    char err[CKPT_ERR_MAX] = "";
    ckpt_status st = r->st->ops->list(r->st, prefix, keys_cb, k, err);
    if (st == CKPT_OK && k->oom)
        st = CKPT_E_NOMEM;
    if (st == CKPT_OK && k->l.n) /* qsort's base must not be NULL, even for 0 */
        qsort(k->l.v, k->l.n, sizeof *k->l.v, cmp_str);
    return st;
}

ckpt_status record_read_events(struct record *r, size_t max, cJSON **out, size_t *skipped)
{
    char prefix[256];
    struct keys k = { 0 };
    cJSON *arr = cJSON_CreateArray();
    ckpt_status st = CKPT_E_NOMEM;
    size_t first;

    *out = NULL;
    *skipped = 0;
    if (!arr)
        goto out;
    snprintf(prefix, sizeof prefix, "%s/events/", r->run);
    st = list_keys(r, prefix, &k);
    if (st != CKPT_OK)
        goto out;
    first = k.l.n > max ? k.l.n - max : 0;
    for (size_t i = first; i < k.l.n; i++) {
        cJSON *ev = NULL;
        if (get_json(r, k.l.v[i], &ev) != CKPT_OK) {
            (*skipped)++;
            continue;
        }
        cJSON_AddItemToArray(arr, ev);
    }
    *out = arr;
    arr = NULL;
out:
    ckpt__strv_free(&k.l);
    cJSON_Delete(arr);
    return st;
}

/* The files mark of `step`: one per checkpoint, or, in a job of several
 * nodes, one per node's part ("<step>.n<K>.json"). */
static void mark_key(const struct record *r, uint64_t step, char *key, size_t n)
{
    if (r->nnodes > 1)
        snprintf(key, n, "%s/files/%020" PRIu64 ".n%u.json", r->run, step, r->node);
    else
        snprintf(key, n, "%s/files/%020" PRIu64 ".json", r->run, step);
}

void record_set_node(struct record *r, unsigned node, unsigned nnodes)
{
    r->node = node;
    r->nnodes = nnodes;
}

ckpt_status record_mark_files(struct record *r, uint64_t step, const char *const *entries,
                              size_t n)
{
    return record_mark_files_from(r, step, entries, n, NULL);
}

ckpt_status record_mark_files_from(struct record *r, uint64_t step, const char *const *entries,
                                   size_t n, const char *step_from)
{
    char key[256];
    cJSON *j = cJSON_CreateObject(), *a;
    ckpt_status st = CKPT_E_NOMEM;

    if (!j || !(a = cJSON_AddArrayToObject(j, "entries")))
        goto out;
    mark_key(r, step, key, sizeof key);
    cJSON_AddNumberToObject(j, "format", RECORD_FORMAT);
    cJSON_AddNumberToObject(j, "step", (double)step);
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(entries[i]));
    /* added after 0.3.0; readers of format 1 ignore fields they do not know */
    if (step_from)
        cJSON_AddStringToObject(j, "step_from", step_from);
    st = put_json(r, key, j);
out:
    cJSON_Delete(j);
    return st;
}

ckpt_status record_files_from(struct record *r, uint64_t step, char *out, size_t n)
{
    char key[256];
    cJSON *j = NULL;
    const cJSON *v;
    ckpt_status st;

    out[0] = '\0';
    mark_key(r, step, key, sizeof key);
    st = get_json(r, key, &j);
    if (st == CKPT_OK && cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(j, "step_from")))
        snprintf(out, n, "%s", v->valuestring);
    cJSON_Delete(j);
    return st;
}

int record_has_files(struct record *r, uint64_t step)
{
    char key[256], err[CKPT_ERR_MAX] = "";
    uint64_t size = 0;
    ckpt_status st;

    mark_key(r, step, key, sizeof key);
    st = r->st->ops->head(r->st, key, &size, NULL, err);
    return st == CKPT_OK ? 1 : st == CKPT_E_NOENT ? 0 : -1;
}

ckpt_status record_files_entries(struct record *r, uint64_t step, cJSON **out)
{
    char key[256];
    cJSON *j = NULL, *arr = NULL;
    const cJSON *e, *v;
    ckpt_status st;

    *out = NULL;
    mark_key(r, step, key, sizeof key);
    st = get_json(r, key, &j);
    if (st != CKPT_OK)
        goto out;
    v = cJSON_GetObjectItemCaseSensitive(j, "entries");
    if (!cJSON_IsArray(v) || !(arr = cJSON_CreateArray())) {
        st = cJSON_IsArray(v) ? CKPT_E_NOMEM : CKPT_E_CORRUPT;
        goto out;
    }
    cJSON_ArrayForEach(e, v)
        if (cJSON_IsString(e))
            cJSON_AddItemToArray(arr, cJSON_CreateString(e->valuestring));
    *out = arr;
out:
    cJSON_Delete(j);
    return st;
}

ckpt_status record_prune_files(struct record *r, int (*keep)(void *user, uint64_t step),
                               void *user, uint64_t *deleted)
{
    char prefix[256], err[CKPT_ERR_MAX] = "";
    struct keys k = { 0 };
    ckpt_status st;
    size_t plen;

    *deleted = 0;
    plen = (size_t)snprintf(prefix, sizeof prefix, "%s/files/", r->run);
    st = list_keys(r, prefix, &k);
    if (st != CKPT_OK)
        goto out;
    for (size_t i = 0; i < k.l.n; i++) {
        uint64_t step;
        char digits[24];
        const char *name = k.l.v[i] + plen;
        /* Only keys of our own shape ("<step>.json", a node's part's
         * "<step>.n<K>.json"); anything else is left alone. */
        if (strlen(name) < 25 || name[20] != '.' || strcmp(name + strlen(name) - 5, ".json") != 0 ||
            (strlen(name) != 25 && (name[21] != 'n' || strspn(name + 22, "0123456789") !=
                                                           strlen(name) - 27 ||
                                    strlen(name) == 27)))
            continue;
        memcpy(digits, name, 20);
        digits[20] = '\0';
        if (parse_u64(digits, &step) != 0 || keep(user, step))
            continue;
        const char *one[1] = { k.l.v[i] };
        st = r->st->ops->del(r->st, one, 1, err);
        if (st != CKPT_OK)
            goto out;
        (*deleted)++;
    }
out:
    ckpt__strv_free(&k.l);
    return st;
}

ckpt_status record_read_run_of(struct ckpt_store *st, const char *run, cJSON **out)
{
    struct record r;
    memset(&r, 0, sizeof r);
    r.st = st;
    snprintf(r.run, sizeof r.run, "%s", run);
    return record_read_run(&r, out);
}
