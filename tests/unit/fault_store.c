/* fault_store.c -- see fault_store.h. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fault_store.h"

#define MAX_RULES 32

struct rule_state {
    struct fault_rule r;
    unsigned seen;    /* matching calls so far */
    unsigned hits;    /* calls acted on */
    unsigned paused;  /* calls blocked now */
    int released;
};

struct fault_store {
    struct ckpt_store base;
    struct ckpt_store *inner;
    struct ckpt_store_ops ops; /* fault_ops, with the inner store's scheme */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned calls[FAULT_NOPS];
    struct rule_state rules[MAX_RULES];
    int nrules;
};

static int key_matches(const struct fault_rule *r, const char *const *keys, size_t n)
{
    if (!r->key_has)
        return 1;
    for (size_t i = 0; i < n; i++)
        if (keys[i] && strstr(keys[i], r->key_has))
            return 1;
    return 0;
}

/* The rule acting on this call, if any (its counters updated). -1: none. */
static int pick(struct fault_store *fs, enum fault_op op, const char *const *keys, size_t n)
{
    int found = -1;
    pthread_mutex_lock(&fs->mu);
    fs->calls[op]++;
    for (int i = 0; i < fs->nrules && found < 0; i++) {
        struct rule_state *s = &fs->rules[i];
        unsigned nth = s->r.nth ? s->r.nth : 1, count = s->r.count ? s->r.count : 1;
        if (s->r.op != op || !key_matches(&s->r, keys, n))
            continue;
        s->seen++;
        if (s->seen >= nth && (count == ~0u || s->seen < nth + count)) {
            s->hits++;
            found = i;
        }
    }
    pthread_mutex_unlock(&fs->mu);
    return found;
}

static void do_pause(struct fault_store *fs, int i)
{
    struct rule_state *s = &fs->rules[i];
    pthread_mutex_lock(&fs->mu);
    s->paused++;
    pthread_cond_broadcast(&fs->cv);
    while (!s->released)
        pthread_cond_wait(&fs->cv, &fs->mu);
    s->paused--;
    pthread_mutex_unlock(&fs->mu);
}

/* Before the real call: 1 to skip it and return *st. */
static int before(struct fault_store *fs, int i, const char *key, ckpt_status *st, char *err)
{
    const struct fault_rule *r;
    if (i < 0)
        return 0;
    r = &fs->rules[i].r;
    switch (r->act) {
    case FAULT_FAIL:
        if (err)
            snprintf(err, CKPT_ERR_MAX, "injected fault (%s)", ckpt_strerror(r->status));
        *st = r->status;
        return 1;
    case FAULT_DELAY: {
        struct timespec ts = { r->delay_ms / 1000, (long)(r->delay_ms % 1000) * 1000000L };
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
        return 0;
    }
    case FAULT_PAUSE:
        if (!r->after)
            do_pause(fs, i);
        return 0;
    case FAULT_HOOK:
        if (!r->after && r->hook)
            r->hook(r->user, key);
        return 0;
    }
    return 0;
}

static void after(struct fault_store *fs, int i, const char *key)
{
    const struct fault_rule *r;
    if (i < 0)
        return;
    r = &fs->rules[i].r;
    if (r->act == FAULT_HOOK && r->after && r->hook)
        r->hook(r->user, key);
    else if (r->act == FAULT_PAUSE && r->after)
        do_pause(fs, i);
}

#define FS(s) ((struct fault_store *)(s))

static ckpt_status f_put(struct ckpt_store *s, const char *key, const void *buf, size_t len,
                         const struct ckpt_put_opts *o, char *etag, char *err)
{
    ckpt_status st;
    int i = pick(FS(s), FAULT_PUT, &key, 1);
    if (before(FS(s), i, key, &st, err))
        return st;
    st = FS(s)->inner->ops->put(FS(s)->inner, key, buf, len, o, etag, err);
    after(FS(s), i, key);
    return st;
}

static ckpt_status f_get(struct ckpt_store *s, const char *key, size_t max, unsigned flags,
                         void **buf, size_t *len, char *etag, char *err)
{
    ckpt_status st;
    int i = pick(FS(s), FAULT_GET, &key, 1);
    if (before(FS(s), i, key, &st, err))
        return st;
    st = FS(s)->inner->ops->get(FS(s)->inner, key, max, flags, buf, len, etag, err);
    after(FS(s), i, key);
    return st;
}

static ckpt_status f_get_range(struct ckpt_store *s, const char *key, uint64_t off, size_t len,
                               unsigned flags, void *dst, const struct ckpt_range_watch *w,
                               char *err)
{
    ckpt_status st;
    int i = pick(FS(s), FAULT_GET_RANGE, &key, 1);
    if (before(FS(s), i, key, &st, err))
        return st;
    st = FS(s)->inner->ops->get_range(FS(s)->inner, key, off, len, flags, dst, w, err);
    after(FS(s), i, key);
    return st;
}

static ckpt_status f_head(struct ckpt_store *s, const char *key, uint64_t *size, char *etag,
                          char *err)
{
    ckpt_status st;
    int i = pick(FS(s), FAULT_HEAD, &key, 1);
    if (before(FS(s), i, key, &st, err))
        return st;
    st = FS(s)->inner->ops->head(FS(s)->inner, key, size, etag, err);
    after(FS(s), i, key);
    return st;
}

static ckpt_status f_list(struct ckpt_store *s, const char *prefix, ckpt_list_cb cb, void *user,
                          char *err)
{
    ckpt_status st;
    int i = pick(FS(s), FAULT_LIST, &prefix, 1);
    if (before(FS(s), i, prefix, &st, err))
        return st;
    st = FS(s)->inner->ops->list(FS(s)->inner, prefix, cb, user, err);
    after(FS(s), i, prefix);
    return st;
}

static ckpt_status f_del(struct ckpt_store *s, const char *const *keys, size_t n, char *err)
{
    ckpt_status st;
    int i = pick(FS(s), FAULT_DEL, keys, n);
    if (before(FS(s), i, n ? keys[0] : "", &st, err))
        return st;
    st = FS(s)->inner->ops->del(FS(s)->inner, keys, n, err);
    after(FS(s), i, n ? keys[0] : "");
    return st;
}

static ckpt_status f_barrier(struct ckpt_store *s, char *err)
{
    ckpt_status st;
    const char *none = "";
    int i = pick(FS(s), FAULT_BARRIER, &none, 1);
    if (before(FS(s), i, none, &st, err))
        return st;
    st = FS(s)->inner->ops->barrier(FS(s)->inner, err);
    after(FS(s), i, none);
    return st;
}

static void f_close(struct ckpt_store *s)
{
    struct fault_store *fs = FS(s);
    fault_clear(fs);
    ckpt_store_close(fs->inner);
    pthread_mutex_destroy(&fs->mu);
    pthread_cond_destroy(&fs->cv);
    free(fs);
}

/* The inner store's count: the wrapper sends nothing of its own (a failed
 * or held call is the inner store's to count, or not). */
static uint64_t f_sent(struct ckpt_store *s)
{
    return FS(s)->inner->ops->sent(FS(s)->inner);
}

static const struct ckpt_store_ops fault_ops = {
    NULL, f_put, f_get, f_get_range, f_head, f_list, f_del, f_barrier, f_close, f_sent,
};

struct fault_store *fault_wrap(struct ckpt_store **slot)
{
    struct fault_store *fs = calloc(1, sizeof *fs);
    if (!fs)
        abort();
    fs->inner = *slot;
    fs->base = *fs->inner; /* url, capabilities, credential source, endpoint */
    fs->ops = fault_ops;
    fs->ops.scheme = fs->inner->ops->scheme;
    if (!fs->inner->ops->sent) /* as blind as the store it wraps */
        fs->ops.sent = NULL;
    fs->base.ops = &fs->ops;
    pthread_mutex_init(&fs->mu, NULL);
    pthread_cond_init(&fs->cv, NULL);
    *slot = &fs->base;
    return fs;
}

void fault_hide_sent(struct fault_store *fs)
{
    fs->ops.sent = NULL;
}

int fault_add(struct fault_store *fs, const struct fault_rule *r)
{
    int i;
    pthread_mutex_lock(&fs->mu);
    i = fs->nrules < MAX_RULES ? fs->nrules++ : -1;
    if (i >= 0) {
        memset(&fs->rules[i], 0, sizeof fs->rules[i]);
        fs->rules[i].r = *r;
    }
    pthread_mutex_unlock(&fs->mu);
    if (i < 0)
        abort();
    return i;
}

void fault_clear(struct fault_store *fs)
{
    pthread_mutex_lock(&fs->mu);
    for (int i = 0; i < fs->nrules; i++)
        fs->rules[i].released = 1;
    pthread_cond_broadcast(&fs->cv);
    /* wait for paused calls to leave before their rules go */
    for (;;) {
        int busy = 0;
        for (int i = 0; i < fs->nrules; i++)
            busy |= fs->rules[i].paused != 0;
        if (!busy)
            break;
        pthread_cond_wait(&fs->cv, &fs->mu);
    }
    fs->nrules = 0;
    pthread_mutex_unlock(&fs->mu);
}

unsigned fault_calls(struct fault_store *fs, enum fault_op op)
{
    unsigned n;
    pthread_mutex_lock(&fs->mu);
    n = fs->calls[op];
    pthread_mutex_unlock(&fs->mu);
    return n;
}

unsigned fault_hits(struct fault_store *fs, int rule)
{
    unsigned n;
    pthread_mutex_lock(&fs->mu);
    n = fs->rules[rule].hits;
    pthread_mutex_unlock(&fs->mu);
    return n;
}

int fault_wait_paused(struct fault_store *fs, int rule, unsigned timeout_ms)
{
    struct timespec until;
    int rc = 0;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&fs->mu);
    while (fs->rules[rule].paused == 0 && rc == 0)
        if (pthread_cond_timedwait(&fs->cv, &fs->mu, &until) == ETIMEDOUT)
            rc = -1;
    pthread_mutex_unlock(&fs->mu);
    return rc;
}

void fault_release(struct fault_store *fs, int rule)
{
    pthread_mutex_lock(&fs->mu);
    fs->rules[rule].released = 1;
    pthread_cond_broadcast(&fs->cv);
    pthread_mutex_unlock(&fs->mu);
}
