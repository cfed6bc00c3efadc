/*
 * store_conformance.c -- the same checks on any object store URL.
 *
 *   store_conformance URL [--big BYTES] [--many N] [--rate]
 *
 * put/get/head byte-exact, missing objects, listing across pages (> 1000
 * keys by default), batch delete, conditional puts where the store enforces
 * them (CKPT_STORE_CONDITIONAL), a big object (multipart / block list when the
 * backend's threshold is below --big), and concurrent puts/gets from several
 * threads on one handle, and with --rate the upload cap of a second handle.
 * Exit 0 when every check passed; each failure is
 * printed with the backend's error detail. Keys go under a fresh random
 * sub-prefix, removed at the end.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "ckpt_store.h"

static int failures;
static char run[64];

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            failures++;                                                       \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);              \
            fprintf(stderr, __VA_ARGS__);                                     \
            fprintf(stderr, "\n");                                            \
        }                                                                     \
    } while (0)

/* Every log line of the backend (at debug level) is checked for the secret
 * named by CKPT_TEST_SECRET: credentials must never be logged. */
static const char *secret;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned log_lines, leaks;

static void log_cb(void *user, ckpt_log_level level, const char *subject,
                   const char *msg)
{
    (void)user;
    (void)level;
    (void)subject;
    pthread_mutex_lock(&log_mu);
    log_lines++;
    if (secret && *secret && strstr(msg, secret)) {
        leaks++;
        fprintf(stderr, "FAIL: a log line holds the secret\n");
    }
    if (getenv("CONF_VERBOSE"))
        fprintf(stderr, "log: %s\n", msg);
    pthread_mutex_unlock(&log_mu);
}

static ckpt_status open_url(const char *url, struct ckpt_store **st, char *err)
{
    struct ckpt_store_config cfg;

    memset(&cfg, 0, sizeof(cfg));
    cfg.log_fn = log_cb;
    cfg.log_level = CKPT_LOG_DEBUG;
    cfg.connections = 8;
    /* the public entry point: it also reads the CKPT_* store settings */
    return ckpt_store_open(url, &cfg, st, err);
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    size_t i;
    uint32_t x = seed * 2654435761u + 1;

    for (i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (unsigned char)x;
    }
}

static void key_of(char *out, size_t n, const char *sub, unsigned i)
{
    snprintf(out, n, "%s/%s/k%05u", run, sub, i);
}

static void check_basic(struct ckpt_store *st)
{
    char err[CKPT_ERR_MAX] = "", etag[CKPT_ETAG_MAX] = "", etag2[CKPT_ETAG_MAX] = "";
    char key[256];
    unsigned char data[3000];
    void *buf = NULL;
    size_t len = 0;
    uint64_t size = 0;
    ckpt_status s;

    fill(data, sizeof(data), 1);
    key_of(key, sizeof(key), "basic", 1);
    s = ckpt_store_put(st, key, data, sizeof(data), NULL, etag, err);
    CHECK(s == CKPT_OK, "put: %s (%s)", ckpt_strerror(s), err);
    CHECK(etag[0], "put returned no etag");
    s = ckpt_store_get(st, key, 1 << 20, &buf, &len, etag2, err);
    CHECK(s == CKPT_OK, "get: %s (%s)", ckpt_strerror(s), err);
    CHECK(len == sizeof(data) && buf && !memcmp(buf, data, len), "get: bytes differ");
    CHECK(!strcmp(etag, etag2), "get etag %s != put etag %s", etag2, etag);
    free(buf);
    buf = NULL;
    s = st->ops->head(st, key, &size, etag2, err);
    CHECK(s == CKPT_OK && size == sizeof(data), "head: %s size %llu (%s)",
          ckpt_strerror(s), (unsigned long long)size, err);
    CHECK(!strcmp(etag, etag2), "head etag %s != put etag %s", etag2, etag);
    /* Ranges: the middle, the first and the last bytes; past the end and
     * missing objects are refused. (Not "bytes=0-0": s3rver answers it with
     * the whole object; ckpt never asks for less than a chunk header.) */
    {
        static const struct { uint64_t off; size_t len; } r[] = {
            { 1000, 1500 }, { 0, 2 }, { 2999, 1 }, { 0, 3000 } };
        unsigned char rb[3001];
        for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
            memset(rb, 0, sizeof(rb));
            s = st->ops->get_range(st, key, r[i].off, r[i].len, 0, rb, NULL, err);
            CHECK(s == CKPT_OK && !memcmp(rb, data + r[i].off, r[i].len),
                  "range %llu+%zu: %s (%s)", (unsigned long long)r[i].off, r[i].len,
                  ckpt_strerror(s), err);
        }
        s = st->ops->get_range(st, key, 2500, 1000, 0, rb, NULL, err);
        CHECK(s != CKPT_OK, "range past the end accepted: %s", ckpt_strerror(s));
        s = st->ops->get_range(st, key, 4000, 10, 0, rb, NULL, err);
        CHECK(s != CKPT_OK, "range after the end accepted: %s", ckpt_strerror(s));
        key_of(key, sizeof(key), "basic", 98);
        s = st->ops->get_range(st, key, 0, 10, 0, rb, NULL, err);
        CHECK(s == CKPT_E_NOENT, "range of a missing object: %s (%s)", ckpt_strerror(s), err);
        key_of(key, sizeof(key), "basic", 1);
    }
    /* Too small a max_len is refused. */
    s = ckpt_store_get(st, key, 100, &buf, &len, NULL, err);
    CHECK(s == CKPT_E_CORRUPT, "get with small max_len: %s", ckpt_strerror(s));
    free(buf);
    buf = NULL;
    /* Empty object. */
    key_of(key, sizeof(key), "basic", 2);
    s = ckpt_store_put(st, key, "", 0, NULL, NULL, err);
    CHECK(s == CKPT_OK, "put empty: %s (%s)", ckpt_strerror(s), err);
    s = ckpt_store_get(st, key, 10, &buf, &len, NULL, err);
    CHECK(s == CKPT_OK && len == 0 && buf, "get empty: %s len %zu", ckpt_strerror(s), len);
    free(buf);
    buf = NULL;
    /* Missing objects. */
    key_of(key, sizeof(key), "basic", 99);
    s = ckpt_store_get(st, key, 10, &buf, &len, NULL, err);
    CHECK(s == CKPT_E_NOENT, "get missing: %s (%s)", ckpt_strerror(s), err);
    s = st->ops->head(st, key, &size, NULL, err);
    CHECK(s == CKPT_E_NOENT, "head missing: %s (%s)", ckpt_strerror(s), err);
    /* Overwrite. */
    key_of(key, sizeof(key), "basic", 1);
    s = ckpt_store_put(st, key, "new", 3, NULL, NULL, err);
    CHECK(s == CKPT_OK, "overwrite: %s (%s)", ckpt_strerror(s), err);
    s = ckpt_store_get(st, key, 10, &buf, &len, NULL, err);
    CHECK(s == CKPT_OK && len == 3 && !memcmp(buf, "new", 3), "overwrite read back");
    free(buf);
    /* Invalid keys never reach the wire. */
    s = ckpt_store_put(st, "../escape", "x", 1, NULL, NULL, err);
    CHECK(s == CKPT_E_INVAL, "bad key accepted: %s", ckpt_strerror(s));
}

static void check_conditional(struct ckpt_store *st)
{
    char err[CKPT_ERR_MAX] = "", etag[CKPT_ETAG_MAX] = "", etag2[CKPT_ETAG_MAX] = "";
    char key[256];
    struct ckpt_put_opts o = { CKPT_PUT_IF_NONE_MATCH, NULL, 0 };
    ckpt_status s;

    if (!ckpt_store_can(st, CKPT_STORE_CONDITIONAL)) {
        printf("conditional puts not enforced by this store: skipped\n");
        return;
    }
    key_of(key, sizeof(key), "cond", 1);
    s = ckpt_store_put(st, key, "v1", 2, &o, etag, err);
    CHECK(s == CKPT_OK, "create-only on new key: %s (%s)", ckpt_strerror(s), err);
    s = ckpt_store_put(st, key, "v2", 2, &o, NULL, err);
    CHECK(s == CKPT_E_PRECONDITION, "create-only on existing key: %s (%s)",
          ckpt_strerror(s), err);
    o.cond = CKPT_PUT_IF_MATCH;
    o.if_match = etag;
    s = ckpt_store_put(st, key, "v3", 2, &o, etag2, err);
    CHECK(s == CKPT_OK, "if-match with current etag: %s (%s)", ckpt_strerror(s), err);
    s = ckpt_store_put(st, key, "v4", 2, &o, NULL, err);
    CHECK(s == CKPT_E_PRECONDITION, "if-match with stale etag: %s (%s)",
          ckpt_strerror(s), err);
    key_of(key, sizeof(key), "cond", 2);
    s = ckpt_store_put(st, key, "v5", 2, &o, NULL, err);
    CHECK(s == CKPT_E_NOENT || s == CKPT_E_PRECONDITION,
          "if-match on missing key: %s (%s)", ckpt_strerror(s), err);
}

struct lister {
    unsigned n;
    uint64_t bytes;
    int stray;
    const char *want_prefix;
};

static int count_cb(void *u, const struct ckpt_obj_info *oi)
{
    struct lister *l = u;

    l->n++;
    l->bytes += oi->size;
    if (strncmp(oi->key, l->want_prefix, strlen(l->want_prefix)))
        l->stray++;
    return 0;
}

struct worker {
    struct ckpt_store *st;
    unsigned from, to;
    const char *sub;
    int bad;
    char err[CKPT_ERR_MAX];
};

static void *put_many(void *arg)
{
    struct worker *w = arg;
    char key[256], body[64];
    unsigned i;

    for (i = w->from; i < w->to && !w->bad; i++) {
        int n = snprintf(body, sizeof(body), "object %u", i);
        key_of(key, sizeof(key), w->sub, i);
        if (ckpt_store_put(w->st, key, body, (size_t)n, NULL, NULL, w->err) != CKPT_OK)
            w->bad = 1;
    }
    return NULL;
}

static void *get_many(void *arg)
{
    struct worker *w = arg;
    char key[256], body[64];
    unsigned i;

    for (i = w->from; i < w->to && !w->bad; i++) {
        void *buf = NULL;
        size_t len = 0;
        int n = snprintf(body, sizeof(body), "object %u", i);
        key_of(key, sizeof(key), w->sub, i);
        if (ckpt_store_get(w->st, key, 64, &buf, &len, NULL, w->err) != CKPT_OK ||
            len != (size_t)n || memcmp(buf, body, len))
            w->bad = 1;
        free(buf);
    }
    return NULL;
}

static int run_workers(struct ckpt_store *st, const char *sub, unsigned n,
                       unsigned nthreads, void *(*fn)(void *))
{
    pthread_t t[16];
    struct worker w[16];
    unsigned i;
    int bad = 0;

    for (i = 0; i < nthreads; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].st = st;
        w[i].sub = sub;
        w[i].from = n * i / nthreads;
        w[i].to = n * (i + 1) / nthreads;
        pthread_create(&t[i], NULL, fn, &w[i]);
    }
    for (i = 0; i < nthreads; i++) {
        pthread_join(t[i], NULL);
        if (w[i].bad) {
            fprintf(stderr, "worker %u: %s\n", i, w[i].err);
            bad = 1;
        }
    }
    return bad;
}

static void check_many(struct ckpt_store *st, unsigned n)
{
    char err[CKPT_ERR_MAX] = "", prefix[128];
    char **keys;
    struct lister l;
    ckpt_status s;
    unsigned i;

    CHECK(!run_workers(st, "many", n, 8, put_many), "parallel puts failed");
    CHECK(!run_workers(st, "many", n, 8, get_many), "parallel gets failed");
    snprintf(prefix, sizeof(prefix), "%s/many/", run);
    memset(&l, 0, sizeof(l));
    l.want_prefix = prefix;
    s = st->ops->list(st, prefix, count_cb, &l, err);
    CHECK(s == CKPT_OK, "list: %s (%s)", ckpt_strerror(s), err);
    CHECK(l.n == n && !l.stray, "list found %u keys (%d stray), want %u", l.n,
          l.stray, n);
    /* A prefix that matches nothing. */
    memset(&l, 0, sizeof(l));
    snprintf(prefix, sizeof(prefix), "%s/nothing-here/", run);
    l.want_prefix = prefix;
    s = st->ops->list(st, prefix, count_cb, &l, err);
    CHECK(s == CKPT_OK && l.n == 0, "empty list: %s, %u keys", ckpt_strerror(s), l.n);

    keys = calloc(n + 1, sizeof(*keys));
    for (i = 0; i < n; i++) {
        keys[i] = malloc(256);
        key_of(keys[i], 256, "many", i);
    }
    keys[n] = malloc(256);
    key_of(keys[n], 256, "many", n + 5000);   /* missing: not an error */
    s = st->ops->del(st, (const char *const *)keys, n + 1, err);
    CHECK(s == CKPT_OK, "delete batch: %s (%s)", ckpt_strerror(s), err);
    for (i = 0; i <= n; i++)
        free(keys[i]);
    free(keys);
    memset(&l, 0, sizeof(l));
    snprintf(prefix, sizeof(prefix), "%s/many/", run);
    l.want_prefix = prefix;
    s = st->ops->list(st, prefix, count_cb, &l, err);
    CHECK(s == CKPT_OK && l.n == 0, "after delete: %s, %u keys left", ckpt_strerror(s),
          l.n);
}

/* A range handed over while it arrives: at every call the bytes said to be
 * in place are the object's, and calls come in order. Counted per transfer
 * (have == 0 starts one): a range has no digest of its own, so behind the
 * fault proxy a transfer may bring a flipped byte, and it is read again.
 * The watch is slower than the transfer (a restore's worker hashing and
 * writing): bytes that arrived with the transfer's end are still handed
 * over, up to the last one asked for (left to the caller's pass after the
 * transfer, a chunk streamed but for its end was hashed and written
 * twice). */
struct watch_check {
    const unsigned char *want;
    const unsigned char *dst;
    size_t big, last, calls, bad;
};

static size_t watch_fn(void *arg, size_t have)
{
    struct watch_check *w = arg;
    size_t next = have + 512 * 1024;
    if (!have)
        w->bad = 0;
    if (have && (have < w->last || memcmp(w->dst, w->want, have) != 0))
        w->bad++;
    w->last = have;
    w->calls += have != 0;
    if (have >= w->big)
        return 0; /* all of it */
    if (have)
        usleep(3000);
    return next < w->big ? next : w->big;
}

static void check_big(struct ckpt_store *st, size_t big)
{
    char err[CKPT_ERR_MAX] = "", key[256], etag[CKPT_ETAG_MAX] = "";
    unsigned char *data = malloc(big);
    void *buf = NULL;
    size_t len = 0;
    uint64_t size = 0;
    ckpt_status s;
    struct ckpt_put_opts o = { CKPT_PUT_IF_NONE_MATCH, NULL, 0 };

    fill(data, big, 7);
    key_of(key, sizeof(key), "big", 1);
    s = ckpt_store_put(st, key, data, big, NULL, etag, err);
    CHECK(s == CKPT_OK, "big put: %s (%s)", ckpt_strerror(s), err);
    s = ckpt_store_get(st, key, big, &buf, &len, NULL, err);
    CHECK(s == CKPT_OK && len == big && !memcmp(buf, data, big),
          "big get: %s len %zu (%s)", ckpt_strerror(s), len, err);
    free(buf);
    buf = malloc(big + 1);
    if (buf) {
        struct watch_check wc = { data, buf, big, 0, 0, 0 };
        struct ckpt_range_watch w = { watch_fn, &wc };
        int tries = 0, same = 0;
        while (!same && tries++ < 5) {
            s = st->ops->get_range(st, key, 0, big, 0, buf, &w, err);
            same = s == CKPT_OK && !memcmp(buf, data, big);
        }
        CHECK(same, "big range: %s after %d reads (%s)", ckpt_strerror(s), tries, err);
        CHECK(!wc.bad, "big range: %zu progress calls saw wrong bytes in a transfer that "
              "ended right", wc.bad);
        CHECK(!wc.calls || wc.last == big, "big range: the watch was last handed %zu of %zu "
              "bytes: the rest came with the transfer's end and was not handed over",
              wc.last, big);
        printf("big range: %zu progress calls, %d read(s)\n", wc.calls, tries);
        free(buf);
    }
    s = st->ops->head(st, key, &size, NULL, err);
    CHECK(s == CKPT_OK && size == big, "big head: %s size %llu", ckpt_strerror(s),
          (unsigned long long)size);
    if (ckpt_store_can(st, CKPT_STORE_CONDITIONAL)) {
        s = ckpt_store_put(st, key, data, big, &o, NULL, err);
        CHECK(s == CKPT_E_PRECONDITION, "big create-only on existing: %s (%s)",
              ckpt_strerror(s), err);
    }
    free(data);
}

/* The handle's count of bytes sent (ops->sent, optional): a small put adds
 * its body exactly; a big one (multipart on an object store) adds its body
 * and at most a little XML of its completion; a put refused by its
 * condition adds nothing in the end (its body was not taken); reads add
 * nothing. */
static void check_sent(struct ckpt_store *st, size_t big)
{
    char err[CKPT_ERR_MAX] = "", key[256];
    struct ckpt_put_opts o = { CKPT_PUT_IF_NONE_MATCH, NULL, 0 };
    unsigned char small[5000], *data;
    uint64_t a, b;
    void *buf = NULL;
    size_t len = 0;
    ckpt_status s;

    if (!ckpt_store_sent(st, &a)) {
        printf("sent: the backend cannot tell\n");
        return;
    }
    fill(small, sizeof small, 11);
    key_of(key, sizeof key, "sent", 1);
    s = ckpt_store_put(st, key, small, sizeof small, NULL, NULL, err);
    CHECK(s == CKPT_OK, "sent put: %s (%s)", ckpt_strerror(s), err);
    ckpt_store_sent(st, &b);
    CHECK(b - a == sizeof small, "sent: a put of %zu bytes counted %llu", sizeof small,
          (unsigned long long)(b - a));
    s = ckpt_store_get(st, key, 1 << 20, &buf, &len, NULL, err);
    free(buf);
    ckpt_store_sent(st, &a);
    CHECK(a == b, "sent: a get counted %lld bytes", (long long)(a - b));
    if (ckpt_store_can(st, CKPT_STORE_CONDITIONAL)) {
        /* other bytes: a retried create-only put that finds its own bytes
         * there (its first reply lost) is a success, not a refusal */
        fill(small, sizeof small, 13);
        s = ckpt_store_put(st, key, small, sizeof small, &o, NULL, err);
        CHECK(s == CKPT_E_PRECONDITION, "sent create-only: %s (%s)", ckpt_strerror(s), err);
        ckpt_store_sent(st, &b);
        CHECK(a == b, "sent: a refused put counted %lld bytes", (long long)(b - a));
    }
    data = big ? malloc(big) : NULL;
    if (!data)
        return;
    fill(data, big, 12);
    key_of(key, sizeof key, "sent", 2);
    ckpt_store_sent(st, &a);
    s = ckpt_store_put(st, key, data, big, NULL, NULL, err);
    CHECK(s == CKPT_OK, "sent big put: %s (%s)", ckpt_strerror(s), err);
    ckpt_store_sent(st, &b);
    CHECK(b - a >= big && b - a <= big + 64 * 1024, "sent: a put of %zu bytes counted %llu",
          big, (unsigned long long)(b - a));
    printf("sent: %zu + %zu bytes put, counted %llu + %llu\n", sizeof small, big,
           (unsigned long long)sizeof small, (unsigned long long)(b - a));
    free(data);
}

/* The upload cap holds for the whole handle: 1.5 MiB at 1 MiB/s, put from
 * two threads at once, takes about 1.4 s (100 ms of burst allowed). */
static void *rate_put(void *arg)
{
    struct worker *w = arg;
    char key[256];
    void *buf = calloc(1, 768 * 1024);

    key_of(key, sizeof(key), "rate", w->from);
    if (!buf || ckpt_store_put(w->st, key, buf, 768 * 1024, NULL, NULL, w->err) != CKPT_OK)
        w->bad = 1;
    free(buf);
    return NULL;
}

static void check_rate(const char *url)
{
    struct ckpt_store_config cfg;
    struct ckpt_store *st = NULL;
    struct timespec a, z;
    char err[CKPT_ERR_MAX] = "", key[256];
    double secs;
    ckpt_status s;

    memset(&cfg, 0, sizeof(cfg));
    cfg.max_rate_bps = 1 << 20;
    cfg.connections = 4;
#ifdef CKPT_WITH_S3
    if (!strncmp(url, "s3://", 5) || !strncmp(url, "gs://", 5))
        s = ckpt__store_s3_open(url, &cfg, &st, err);
    else
#endif
        s = ckpt_store_open(url, &cfg, &st, err);
    CHECK(s == CKPT_OK, "open with a rate cap: %s (%s)", ckpt_strerror(s), err);
    if (s != CKPT_OK)
        return;
    /* Settle region and clock discovery first (a rejected attempt spends
     * its body's share of the budget too). */
    key_of(key, sizeof(key), "rate", 999);
    s = ckpt_store_put(st, key, "", 0, NULL, NULL, err);
    CHECK(s == CKPT_OK, "warm-up put: %s (%s)", ckpt_strerror(s), err);
    clock_gettime(CLOCK_MONOTONIC, &a);
    CHECK(!run_workers(st, "rate", 2, 2, rate_put), "capped puts failed");
    clock_gettime(CLOCK_MONOTONIC, &z);
    secs = (double)(z.tv_sec - a.tv_sec) + (double)(z.tv_nsec - a.tv_nsec) / 1e9;
    printf("1.5 MiB at a 1 MiB/s cap: %.2f s\n", secs);
    CHECK(secs > 1.2 && secs < 4, "rate cap not applied: %.2f s", secs);
    st->ops->close(st);
}

static int drop_cb(void *u, const struct ckpt_obj_info *oi)
{
    char ***v = u;
    size_t n = 0;

    while ((*v)[n])
        n++;
    *v = realloc(*v, (n + 2) * sizeof(char *));
    (*v)[n] = strdup(oi->key);
    (*v)[n + 1] = NULL;
    return 0;
}

static void cleanup(struct ckpt_store *st)
{
    char err[CKPT_ERR_MAX] = "", prefix[128];
    char **v = calloc(1, sizeof(char *));
    size_t n = 0;
    ckpt_status s;

    snprintf(prefix, sizeof(prefix), "%s/", run);
    s = st->ops->list(st, prefix, drop_cb, &v, err);
    CHECK(s == CKPT_OK, "cleanup list: %s (%s)", ckpt_strerror(s), err);
    while (v[n])
        n++;
    if (n) {
        s = st->ops->del(st, (const char *const *)v, n, err);
        CHECK(s == CKPT_OK, "cleanup delete: %s (%s)", ckpt_strerror(s), err);
    }
    for (n = 0; v[n]; n++)
        free(v[n]);
    free(v);
}

int main(int argc, char **argv)
{
    struct ckpt_store *st = NULL;
    char err[CKPT_ERR_MAX] = "";
    size_t big = 12u << 20;
    unsigned many = 1100;
    int rate = 0;
    ckpt_status s;
    int i;

    if (argc < 2) {
        fprintf(stderr, "usage: %s URL [--big BYTES] [--many N]\n", argv[0]);
        return 64;
    }
    for (i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--big") && i + 1 < argc)
            big = (size_t)strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--many") && i + 1 < argc)
            many = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--rate"))
            rate = 1;
    }
    snprintf(run, sizeof(run), "conf-%ld-%d", (long)time(NULL), (int)getpid());
    secret = getenv("CKPT_TEST_SECRET");
    s = open_url(argv[1], &st, err);
    if (s != CKPT_OK) {
        fprintf(stderr, "open %s: %s (%s)\n", argv[1], ckpt_strerror(s), err);
        return 1;
    }
    printf("store %s: conditional=%d\n", argv[1], ckpt_store_can(st, CKPT_STORE_CONDITIONAL));
    check_basic(st);
    check_conditional(st);
    if (many)
        check_many(st, many);
    if (big)
        check_big(st, big);
    check_sent(st, big);
    if (rate)
        check_rate(argv[1]);
    cleanup(st);
    st->ops->close(st);
    CHECK(!leaks, "%u log lines held the secret", leaks);
    printf("%s: %u log lines, %d failure(s)\n", argv[1], log_lines, failures);
    return failures ? 1 : 0;
}
