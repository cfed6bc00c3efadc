/* lease.c -- the run's lease on the store (lease.h). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckpt_common.h"
#include "record/lease.h"
#include "ckpt_store.h"

#define LEASE_MAX_BYTES 4096
#define WEAK_SETTLE_MS 1500

struct lease {
    struct ckpt_store *st;
    char run[256];
    char key[512];
    char holder[256];
    char etag[CKPT_ETAG_MAX];
    uint64_t ttl_ms;
    uint64_t epoch;
    int64_t expires_ms;
    int held;
    int took_stale;
    struct lease_info me;     /* our own identity fields (has_ident 0: unknown) */
    char job[128];            /* job generation, "" none (lease_set_job) */
    struct lease_clock clock;
};

/* ---- the system's clock ------------------------------------------------------ */

static int64_t sys_now_ms(void *user)
{
    (void)user;
    return ckpt__now_ms();
}

static void sys_sleep_ms(void *user, int64_t ms)
{
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
    (void)user;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static int64_t now_ms(const struct lease *l)
{
    return l->clock.now_ms(l->clock.user);
}

static void sleep_ms(const struct lease *l, int64_t ms)
{
    l->clock.sleep_ms(l->clock.user, ms);
}

int lease_is_live(const struct lease_info *li, int64_t t)
{
    return !li->released && li->holder[0] && li->expires_ms + LEASE_SKEW_MS > t;
}

/* ---- who we are on this machine ------------------------------------------ */

/* Read a small file whole (a /proc entry). @return bytes read or -1. */
static ssize_t read_small(const char *path, char *buf, size_t n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t r, got = 0;
    if (fd < 0)
        return -1;
    while ((size_t)got < n - 1 && (r = read(fd, buf + got, n - 1 - (size_t)got)) != 0) {
        if (r < 0) {
            if (errno == EINTR)
                continue;
            got = -1;
            break;
        }
        got += r;
    }
    close(fd);
    if (got >= 0)
        buf[got] = '\0';
    return got;
}

/* State letter and start time (clock ticks after boot, field 22) of `pid`
 * from /proc/PID/stat. The command name (field 2) may hold spaces and
 * parentheses: the fields after it start after the last ')'.
 * @return 0, or -1 when there is no such process (or it cannot be read). */
static int proc_start(int pid, char *state, uint64_t *start)
{
    char path[64], buf[1024], *p, *end;
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    if (read_small(path, buf, sizeof buf) <= 0 || !(p = strrchr(buf, ')')))
        return -1;
    p++;
    while (*p == ' ')
        p++;
    *state = *p;
    /* fields 3 (state) .. 22 (starttime): skip 19 separators */
    for (int f = 3; f < 22; f++) {
        p = strchr(p, ' ');
        if (!p)
            return -1;
        p++;
    }
    errno = 0;
    *start = strtoull(p, &end, 10);
    return errno || end == p ? -1 : 0;
}

/* Host names go into JSON unescaped: keep a plain alphabet. */
static void plain_copy(char *dst, size_t n, const char *src)
{
    size_t i = 0;
    for (; src[i] && i + 1 < n; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[i] = (c >= 0x21 && c < 0x7f && c != '"' && c != '\\') ? (char)c : '_';
    }
    dst[i] = '\0';
}

static void self_ident(struct lease_info *me)
{
    char buf[128], *nl, link[64], host[128] = "";
    ssize_t n;
    char state;

    memset(me, 0, sizeof *me);
    if (read_small("/proc/sys/kernel/random/boot_id", buf, sizeof buf) <= 0)
        return;
    if ((nl = strchr(buf, '\n')))
        *nl = '\0';
    plain_copy(me->boot_id, sizeof me->boot_id, buf);
    /* "pid:[4026531836]": the namespace's inode number */
    n = readlink("/proc/self/ns/pid", link, sizeof link - 1);
    if (n <= 0)
        return;
    link[n] = '\0';
    if (sscanf(link, "pid:[%" SCNu64 "]", &me->pid_ns) != 1 || !me->pid_ns)
        return;
    gethostname(host, sizeof host - 1);
    plain_copy(me->hostname, sizeof me->hostname, host);
    me->pid = (int)getpid();
    if (!me->boot_id[0] || proc_start(me->pid, &state, &me->start_ticks) != 0)
        return;
    me->has_ident = 1;
}

int lease_holder_gone(const struct lease_info *li)
{
    struct lease_info me;
    char state;
    uint64_t start;

    if (!li->has_ident || li->pid <= 0)
        return 0;
    self_ident(&me);
    /* Another boot, PID namespace or host: its PIDs mean nothing here
     * (containers on one host share the boot id, not the namespace). */
    if (!me.has_ident || strcmp(me.boot_id, li->boot_id) != 0 || me.pid_ns != li->pid_ns ||
        strcmp(me.hostname, li->hostname) != 0)
        return 0;
    if (proc_start(li->pid, &state, &start) != 0)
        return kill(li->pid, 0) != 0 && errno == ESRCH; /* no such process */
    /* A zombie has ended; another start time is another process (PIDs are
     * reused). */
    return state == 'Z' || state == 'X' || start != li->start_ticks;
}

enum lease_state lease_state(const struct lease_info *li, int64_t t)
{
    if (li->released)
        return LEASE_RELEASED;
    if (!lease_is_live(li, t))
        return LEASE_EXPIRED;
    return lease_holder_gone(li) ? LEASE_STALE : LEASE_LIVE;
}

const char *lease_state_name(enum lease_state st)
{
    return st == LEASE_LIVE ? "live" : st == LEASE_STALE ? "stale"
           : st == LEASE_EXPIRED ? "expired" : "released";
}

static ckpt_status parse(const char *buf, size_t len, struct lease_info *out, char *err)
{
    cJSON *o = cJSON_ParseWithLength(buf, len);
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, "format");
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(o, "holder");
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "epoch");
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, "expires_ms");
    const cJSON *hb = cJSON_GetObjectItemCaseSensitive(o, "heartbeat_ms");
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(o, "released");
    ckpt_status st = CKPT_E_CORRUPT;
    memset(out, 0, sizeof *out);
    if (!cJSON_IsObject(o) || !cJSON_IsNumber(f) || f->valuedouble != 1 || !cJSON_IsString(h) ||
        strlen(h->valuestring) >= sizeof out->holder || !cJSON_IsNumber(e) ||
        e->valuedouble < 0 || e->valuedouble > 9007199254740992.0 || !cJSON_IsNumber(x) ||
        !cJSON_IsNumber(hb) || !cJSON_IsBool(r)) {
        if (err)
            snprintf(err, CKPT_ERR_MAX, "LEASE object is malformed");
        goto out;
    }
    snprintf(out->holder, sizeof out->holder, "%s", h->valuestring);
    out->epoch = (uint64_t)e->valuedouble;
    out->expires_ms = (int64_t)x->valuedouble;
    out->heartbeat_ms = (int64_t)hb->valuedouble;
    out->released = cJSON_IsTrue(r);
    {
        /* The holder's identity (optional: older writers have none). */
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, "boot_id");
        const cJSON *ns = cJSON_GetObjectItemCaseSensitive(o, "pid_ns");
        const cJSON *hn = cJSON_GetObjectItemCaseSensitive(o, "hostname");
        const cJSON *pd = cJSON_GetObjectItemCaseSensitive(o, "pid");
        const cJSON *sl = cJSON_GetObjectItemCaseSensitive(o, "start_ticks");
        if (cJSON_IsString(b) && strlen(b->valuestring) < sizeof out->boot_id &&
            cJSON_IsNumber(ns) && ns->valuedouble >= 1 && ns->valuedouble < 9007199254740992.0 &&
            cJSON_IsString(hn) && strlen(hn->valuestring) < sizeof out->hostname &&
            cJSON_IsNumber(pd) && pd->valuedouble >= 1 && pd->valuedouble <= 4194304 &&
            cJSON_IsNumber(sl) && sl->valuedouble >= 0 && sl->valuedouble < 9007199254740992.0) {
            snprintf(out->boot_id, sizeof out->boot_id, "%s", b->valuestring);
            out->pid_ns = (uint64_t)ns->valuedouble;
            snprintf(out->hostname, sizeof out->hostname, "%s", hn->valuestring);
            out->pid = (int)pd->valuedouble;
            out->start_ticks = (uint64_t)sl->valuedouble;
            out->has_ident = out->boot_id[0] != '\0';
        }
    }
    {
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, "job");
        if (cJSON_IsString(j) && strlen(j->valuestring) < sizeof out->job)
            snprintf(out->job, sizeof out->job, "%s", j->valuestring);
    }
    st = CKPT_OK;
out:
    cJSON_Delete(o);
    return st;
}

/* A LEASE body ends with its own checksum: ...,"sum":"<XXH64 of the bytes
 * before the comma, 16 hex digits>"}\n. @return 1 it matches, 0 there is
 * none (an older writer), -1 it does not match (torn or damaged). */
#define SUM_TAG ",\"sum\":\""
static int sum_check(const char *buf, size_t len)
{
    const size_t tail = sizeof SUM_TAG - 1 + 16 + 3; /* tag, digits, "}\n */
    char want[17];
    const char *t;
    if (len < tail)
        return 0;
    t = buf + len - tail;
    if (memcmp(t, SUM_TAG, sizeof SUM_TAG - 1) != 0)
        return memmem(buf, len, SUM_TAG, sizeof SUM_TAG - 1) ? -1 : 0;
    snprintf(want, sizeof want, "%016llx", (unsigned long long)XXH64(buf, (size_t)(t - buf), 0));
    return memcmp(t + sizeof SUM_TAG - 1, want, 16) == 0 &&
           memcmp(buf + len - 3, "\"}\n", 3) == 0 ? 1 : -1;
}

ckpt_status lease_read(struct ckpt_store *st, const char *run, struct lease_info *out,
                       char *etag, char *err)
{
    char key[512];
    void *buf = NULL;
    size_t len;
    ckpt_status s;
    int sum;
    snprintf(key, sizeof key, "%s/LEASE", run);
    /* The body checks itself: the store's digest is not needed, and a store
     * whose digest and body disagree (s3rver, after simultaneous writes of
     * one key) does not keep the run from being taken. */
    s = st->ops->get(st, key, LEASE_MAX_BYTES, CKPT_GET_SELF_CHECKED, &buf, &len, etag, err);
    if (s != CKPT_OK)
        return s;
    sum = sum_check(buf, len);
    if (sum == 0) { /* written by an older ckptrun: the store checks it */
        free(buf);
        buf = NULL;
        s = st->ops->get(st, key, LEASE_MAX_BYTES, 0, &buf, &len, etag, err);
        if (s != CKPT_OK)
            return s;
    }
    if (sum < 0) {
        if (err)
            snprintf(err, CKPT_ERR_MAX, "LEASE object fails its checksum (torn or damaged)");
        s = CKPT_E_CORRUPT;
    } else {
        s = parse(buf, len, out, err);
    }
    free(buf);
    return s;
}

ckpt_status lease_open(struct ckpt_store *st, const char *run, uint64_t ttl_ms,
                       const struct lease_clock *clock, struct lease **out)
{
    static const struct lease_clock sys = { sys_now_ms, sys_sleep_ms, NULL };
    struct lease *l = calloc(1, sizeof *l);
    char host[128] = "host";
    unsigned char nonce[4] = { 0 };
    int fd;
    if (!l)
        return CKPT_E_NOMEM;
    l->st = st;
    l->clock = clock ? *clock : sys;
    l->ttl_ms = ttl_ms ? ttl_ms : LEASE_DEFAULT_TTL_MS;
    snprintf(l->run, sizeof l->run, "%s", run);
    snprintf(l->key, sizeof l->key, "%s/LEASE", run);
    gethostname(host, sizeof host - 1);
    fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, nonce, sizeof nonce) != (ssize_t)sizeof nonce)
            memset(nonce, 0, sizeof nonce);
        close(fd);
    }
    /* host and pid say who; the nonce tells two runs of one pid apart */
    snprintf(l->holder, sizeof l->holder, "%s:%d:%02x%02x%02x%02x", host, (int)getpid(), nonce[0],
             nonce[1], nonce[2], nonce[3]);
    self_ident(&l->me);
    *out = l;
    return CKPT_OK;
}

static ckpt_status write_lease(struct lease *l, uint64_t epoch, int released,
                               ckpt_put_cond cond, const char *if_match, char *err)
{
    char body[1200], etag[CKPT_ETAG_MAX];
    int64_t t = now_ms(l);
    int64_t exp = released ? 0 : t + (int64_t)l->ttl_ms;
    struct ckpt_put_opts po = { cond, if_match, 0 };
    ckpt_status st;
    int n = snprintf(body, sizeof body,
                     "{\"format\":1,\"holder\":\"%s\",\"epoch\":%llu,\"expires_ms\":%lld,"
                     "\"heartbeat_ms\":%lld,\"released\":%s",
                     l->holder, (unsigned long long)epoch, (long long)exp, (long long)t,
                     released ? "true" : "false");
    if (l->me.has_ident)
        n += snprintf(body + n, sizeof body - (size_t)n,
                      ",\"boot_id\":\"%s\",\"pid_ns\":%" PRIu64 ",\"hostname\":\"%s\","
                      "\"pid\":%d,\"start_ticks\":%" PRIu64,
                      l->me.boot_id, l->me.pid_ns, l->me.hostname, l->me.pid, l->me.start_ticks);
    if (l->job[0])
        n += snprintf(body + n, sizeof body - (size_t)n, ",\"job\":\"%s\"", l->job);
    n += snprintf(body + n, sizeof body - (size_t)n, SUM_TAG "%016llx\"}\n",
                  (unsigned long long)XXH64(body, (size_t)n, 0));
    if (!ckpt_store_can(l->st, CKPT_STORE_CONDITIONAL))
        po.cond = CKPT_PUT_PLAIN;
    st = l->st->ops->put(l->st, l->key, body, (size_t)n, &po, etag, err);
    if (st == CKPT_OK) {
        snprintf(l->etag, sizeof l->etag, "%s", etag);
        l->epoch = epoch;
        l->expires_ms = exp;
    }
    return st;
}

static ckpt_status acquire_once(struct lease *l, struct lease_info *other, int *contended,
                                char *err)
{
    struct lease_info cur, prev;
    char etag[CKPT_ETAG_MAX] = "";
    ckpt_status st;
    int stale = 0;
    memset(other, 0, sizeof *other);
    memset(&prev, 0, sizeof prev);
    l->took_stale = 0;
    st = lease_read(l->st, l->run, &cur, etag, err);
    if (st == CKPT_E_NOENT) {
        st = write_lease(l, 1, 0, CKPT_PUT_IF_NONE_MATCH, NULL, err);
    } else if (st == CKPT_OK) {
        if (lease_is_live(&cur, now_ms(l)) && strcmp(cur.holder, l->holder)) {
            if (!lease_holder_gone(&cur)) {
                *other = cur;
                return CKPT_E_EXISTS;
            }
            stale = 1; /* its holder died on this machine: no need to wait */
            prev = cur;
        }
        st = write_lease(l, cur.epoch + 1, 0, CKPT_PUT_IF_MATCH, etag, err);
    } else if (st == CKPT_E_CORRUPT) {
        /* a damaged LEASE must not wedge the run forever: take it over, with
         * an epoch no earlier holder can have had */
        st = write_lease(l, (uint64_t)now_ms(l), 0, CKPT_PUT_IF_MATCH, etag, err);
    }
    if (st == CKPT_E_PRECONDITION || st == CKPT_E_NOENT) {
        if (lease_read(l->st, l->run, &cur, NULL, NULL) == CKPT_OK)
            *other = cur;
        return CKPT_E_PRECONDITION;
    }
    if (st)
        return st;
    if (!ckpt_store_can(l->st, CKPT_STORE_CONDITIONAL)) {
        /* No conditional writes: wait, then check that we are still the
         * holder (last writer wins; losers see the winner here). */
        sleep_ms(l, WEAK_SETTLE_MS);
        st = lease_read(l->st, l->run, &cur, etag, err);
        if (st == CKPT_E_CORRUPT)
            *contended = 1; /* writes of several runners mixed (s3rver) */
        if (st)
            return st;
        if (strcmp(cur.holder, l->holder)) {
            *other = cur;
            return CKPT_E_PRECONDITION;
        }
    }
    l->held = 1;
    if (stale) {
        l->took_stale = 1;
        *other = prev;
    }
    return CKPT_OK;
}

/* Without conditional writes, runners starting at the same instant may
 * leave a LEASE mixed from their writes (a store that does not make a PUT
 * atomic for its readers): each tries again after its own random pause,
 * so one of them ends up writing alone and the others see its lease. */
ckpt_status lease_acquire(struct lease *l, struct lease_info *other, char *err)
{
    for (int attempt = 1;; attempt++) {
        int contended = 0;
        unsigned r = 0;
        ckpt_status st = acquire_once(l, other, &contended, err);
        if (!contended || attempt == 6)
            return st;
        if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
            r = (unsigned)getpid() * 2654435761u;
        sleep_ms(l, 200 + (int64_t)(r % 1500));
    }
}

/* Without conditional writes a renewal or release would overwrite whatever
 * is there, a new holder's lease included: read first, and give way when it
 * is no longer ours. (A takeover between this read and the write still goes
 * unnoticed until the next renewal: the weak guarantee, docs/recover.md.)
 * @return CKPT_OK, CKPT_E_PRECONDITION (not ours), store errors. */
static ckpt_status weak_still_ours(struct lease *l, char *err)
{
    struct lease_info cur;
    ckpt_status st;
    if (ckpt_store_can(l->st, CKPT_STORE_CONDITIONAL))
        return CKPT_OK;
    st = lease_read(l->st, l->run, &cur, NULL, err);
    if (st == CKPT_E_NOENT || st == CKPT_E_CORRUPT ||
        (st == CKPT_OK && (strcmp(cur.holder, l->holder) != 0 || cur.epoch != l->epoch)))
        st = CKPT_E_PRECONDITION;
    return st;
}

ckpt_status lease_renew(struct lease *l, char *err)
{
    ckpt_status st;
    if (!l->held)
        return CKPT_E_FENCED;
    st = weak_still_ours(l, err);
    if (st == CKPT_OK)
        st = write_lease(l, l->epoch, 0, CKPT_PUT_IF_MATCH, l->etag, err);
    if (st == CKPT_E_PRECONDITION || st == CKPT_E_NOENT) {
        l->held = 0;
        if (err)
            snprintf(err, CKPT_ERR_MAX, "the lease was taken over by another runner");
        return CKPT_E_FENCED;
    }
    return st;
}

ckpt_status lease_release(struct lease *l, char *err)
{
    ckpt_status st;
    if (!l->held)
        return CKPT_OK;
    st = weak_still_ours(l, err);
    if (st == CKPT_OK)
        st = write_lease(l, l->epoch, 1, CKPT_PUT_IF_MATCH, l->etag, err);
    if (st == CKPT_OK || st == CKPT_E_PRECONDITION)
        l->held = 0;
    return st == CKPT_E_PRECONDITION ? CKPT_OK : st;
}

int lease_took_stale(const struct lease *l) { return l->took_stale; }
uint64_t lease_epoch(const struct lease *l) { return l->epoch; }

void lease_set_job(struct lease *l, const char *job)
{
    /* JSON-safe by construction: nodes_resolve admits [A-Za-z0-9._:-] only */
    snprintf(l->job, sizeof l->job, "%s", job ? job : "");
}
const char *lease_holder(const struct lease *l) { return l->holder; }
int64_t lease_expires_ms(const struct lease *l) { return l->expires_ms; }
int lease_expired(const struct lease *l) { return now_ms(l) >= l->expires_ms; }
uint64_t lease_ttl_ms(const struct lease *l) { return l->ttl_ms; }

void lease_close(struct lease *l)
{
    free(l);
}
