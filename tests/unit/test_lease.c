/* test_lease.c -- the run lease on the file store: create, live holder,
 * takeover after expiry with a new epoch, renew refused after takeover,
 * release, races between processes, damaged LEASE; and HEAD fencing.
 * Expiry is reached on a test clock (struct lease_clock): time moves by
 * the test's word, never by waiting. */
#include <sys/wait.h>
#include <time.h>
#include "test_util.h"
#include "ckpt_store.h"
#include "core/ctx.h"
#include "record/lease.h"
#include "core/runstate.h"

static char *g_dir;
static char g_url[700];

static int setup(void **s) { (void)s; g_dir = test_tmpdir(); snprintf(g_url, sizeof g_url, "file://%s", g_dir); return 0; }
static int teardown(void **s) { (void)s; test_rmrf(g_dir); free(g_dir); return 0; }

/* A clock that starts at the real time and moves only when told, or when
 * the lease sleeps (the settle delay of weak stores). */
struct fake_clock {
    int64_t now;
};

static int64_t fake_now(void *user)
{
    return ((struct fake_clock *)user)->now;
}

static void fake_sleep(void *user, int64_t ms)
{
    ((struct fake_clock *)user)->now += ms;
}

static struct lease_clock fake_clock(struct fake_clock *c)
{
    struct lease_clock lc = { fake_now, fake_sleep, c };
    c->now = (int64_t)time(NULL) * 1000;
    return lc;
}

static struct ckpt_store *store(void)
{
    struct ckpt_store *st;
    char err[CKPT_ERR_MAX];
    assert_int_equal(ckpt_store_open(g_url, NULL, &st, err), CKPT_OK);
    return st;
}

static void test_lifecycle(void **state)
{
    struct ckpt_store *st = store();
    struct lease *a, *b;
    struct lease_info other, li;
    struct fake_clock fc;
    struct lease_clock clock = fake_clock(&fc);
    char err[CKPT_ERR_MAX];
    (void)state;
    assert_int_equal(lease_open(st, "r", 300, &clock, &a), CKPT_OK);
    assert_int_equal(lease_open(st, "r", 300, &clock, &b), CKPT_OK);
    assert_int_equal(lease_acquire(a, &other, err), CKPT_OK);
    assert_int_equal(lease_epoch(a), 1);
    /* live: b is told who holds it */
    assert_int_equal(lease_acquire(b, &other, err), CKPT_E_EXISTS);
    assert_string_equal(other.holder, lease_holder(a));
    assert_int_equal(lease_renew(a, err), CKPT_OK);
    assert_false(lease_expired(a));
    /* expired past the skew margin: b takes over with a new epoch */
    fc.now += 300 + LEASE_SKEW_MS + 200;
    assert_true(lease_expired(a));
    assert_int_equal(lease_acquire(b, &other, err), CKPT_OK);
    assert_int_equal(lease_epoch(b), 2);
    /* a wakes up: its renewal is refused */
    assert_int_equal(lease_renew(a, err), CKPT_E_FENCED);
    /* graceful release keeps the epoch; the next holder gets epoch 3 at once */
    assert_int_equal(lease_release(b, err), CKPT_OK);
    assert_int_equal(lease_read(st, "r", &li, NULL, err), CKPT_OK);
    assert_true(li.released);
    assert_false(lease_is_live(&li, li.heartbeat_ms));
    assert_int_equal(lease_acquire(a, &other, err), CKPT_OK);
    assert_int_equal(lease_epoch(a), 3);
    lease_close(a);
    lease_close(b);
    ckpt_store_close(st);
}

/* A job of several nodes: the generation is written into LEASE, survives
 * renewals and the checksum, and a new holder of another generation takes
 * an expired lease with a new epoch and its own generation. */
static void test_job_generation(void **state)
{
    struct ckpt_store *st = store();
    struct lease *a, *b;
    struct lease_info other, li;
    struct fake_clock fc;
    struct lease_clock clock = fake_clock(&fc);
    char err[CKPT_ERR_MAX];
    (void)state;
    assert_int_equal(lease_open(st, "j", 300, &clock, &a), CKPT_OK);
    assert_int_equal(lease_open(st, "j", 300, &clock, &b), CKPT_OK);
    lease_set_job(a, "1234.0");
    lease_set_job(b, "1234.1");
    assert_int_equal(lease_acquire(a, &other, err), CKPT_OK);
    assert_int_equal(lease_read(st, "j", &li, NULL, err), CKPT_OK);
    assert_string_equal(li.job, "1234.0");
    assert_int_equal(lease_renew(a, err), CKPT_OK);
    assert_int_equal(lease_read(st, "j", &li, NULL, err), CKPT_OK);
    assert_string_equal(li.job, "1234.0");
    assert_int_equal(lease_state(&li, fc.now), LEASE_LIVE);
    /* another generation is refused while it is live ... */
    assert_int_equal(lease_acquire(b, &other, err), CKPT_E_EXISTS);
    assert_string_equal(other.job, "1234.0");
    /* ... and takes it over once expired */
    fc.now += 300 + LEASE_SKEW_MS + 200;
    assert_int_equal(lease_acquire(b, &other, err), CKPT_OK);
    assert_int_equal(lease_epoch(b), 2);
    assert_int_equal(lease_read(st, "j", &li, NULL, err), CKPT_OK);
    assert_string_equal(li.job, "1234.1");
    assert_int_equal(li.epoch, 2);
    /* a single runner's LEASE has none */
    lease_set_job(b, NULL);
    assert_int_equal(lease_renew(b, err), CKPT_OK);
    assert_int_equal(lease_read(st, "j", &li, NULL, err), CKPT_OK);
    assert_string_equal(li.job, "");
    lease_close(a);
    lease_close(b);
    ckpt_store_close(st);
}

static void test_damaged_lease(void **state)
{
    struct ckpt_store *st = store();
    struct lease *a;
    struct lease_info other;
    char err[CKPT_ERR_MAX];
    (void)state;
    assert_int_equal(ckpt_store_put(st, "d/LEASE", "{\"format\":1,\"holder\":", 21, NULL, NULL, err), CKPT_OK);
    assert_int_equal(lease_open(st, "d", 1000, NULL, &a), CKPT_OK);
    assert_int_equal(lease_acquire(a, &other, err), CKPT_OK);
    assert_true(lease_epoch(a) > 1000); /* larger than any plausible earlier epoch */
    lease_close(a);
    ckpt_store_close(st);
}

/* A LEASE checks itself: ours ends with "sum"; one written without (by an
 * older ckptrun) is read as before; a changed digit or a torn body (two
 * writers' bytes mixed) is damaged, not believed. */
static void test_lease_checksum(void **state)
{
    struct ckpt_store *st = store();
    struct lease *a;
    struct lease_info other, li;
    char err[CKPT_ERR_MAX], *body;
    void *buf;
    size_t len;
    const char *old = "{\"format\":1,\"holder\":\"h:1:n\",\"epoch\":7,\"expires_ms\":1,"
                      "\"heartbeat_ms\":1,\"released\":true}\n";
    (void)state;
    assert_int_equal(lease_open(st, "c", 60000, NULL, &a), CKPT_OK);
    assert_int_equal(lease_acquire(a, &other, err), CKPT_OK);
    assert_int_equal(ckpt_store_get(st, "c/LEASE", 4096, &buf, &len, NULL, err), CKPT_OK);
    body = buf;
    assert_non_null(strstr(body, ",\"sum\":\""));
    assert_int_equal(lease_read(st, "c", &li, NULL, err), CKPT_OK);
    assert_string_equal(li.holder, lease_holder(a));
    /* a changed digit in the expiry */
    char *x = strstr(body, "\"expires_ms\":") + 14;
    *x = *x == '9' ? '8' : (char)(*x + 1);
    assert_int_equal(ckpt_store_put(st, "c/LEASE", body, len, NULL, NULL, err), CKPT_OK);
    assert_int_equal(lease_read(st, "c", &li, NULL, err), CKPT_E_CORRUPT);
    /* torn: a shorter body over a longer one's tail */
    *x = *x == '0' ? '9' : (char)(*x - 1);
    char torn[600];
    snprintf(torn, sizeof torn, "%.*sxx\"}\n", (int)len, body);
    assert_int_equal(ckpt_store_put(st, "c/LEASE", torn, strlen(torn), NULL, NULL, err), CKPT_OK);
    assert_int_equal(lease_read(st, "c", &li, NULL, err), CKPT_E_CORRUPT);
    free(buf);
    /* an older writer's LEASE (no sum) */
    assert_int_equal(ckpt_store_put(st, "c/LEASE", old, strlen(old), NULL, NULL, err), CKPT_OK);
    assert_int_equal(lease_read(st, "c", &li, NULL, err), CKPT_OK);
    assert_int_equal(li.epoch, 7);
    assert_true(li.released);
    lease_close(a);
    ckpt_store_close(st);
}

/* Eight processes race for one lease, ten times: exactly one wins each time.
 * Each stays alive until all have tried: a winner that had already exited
 * would leave a stale lease on this host, which the others rightly take. */
static void test_race(void **state)
{
    (void)state;
    for (int round = 0; round < 10; round++) {
        char run[32], r;
        pid_t pids[8];
        int wins = 0, res[2], hold[2];
        snprintf(run, sizeof run, "race%d", round);
        assert_int_equal(pipe(res), 0);
        assert_int_equal(pipe(hold), 0);
        for (int i = 0; i < 8; i++) {
            pids[i] = fork();
            if (pids[i] == 0) {
                struct ckpt_store *st;
                struct lease *l;
                struct lease_info other;
                char err[CKPT_ERR_MAX], c = '2';
                close(res[0]);
                close(hold[1]);
                if (ckpt_store_open(g_url, NULL, &st, err) == 0 &&
                    lease_open(st, run, 60000, NULL, &l) == 0)
                    c = lease_acquire(l, &other, err) == CKPT_OK ? '0' : '1';
                if (write(res[1], &c, 1) != 1 || read(hold[0], &c, 1) < 0)
                    _exit(3);
                _exit(0);
            }
        }
        close(res[1]);
        close(hold[0]);
        for (int i = 0; i < 8; i++) {
            assert_int_equal(read(res[0], &r, 1), 1);
            assert_true(r == '0' || r == '1');
            wins += r == '0';
        }
        close(hold[1]); /* everyone may exit now */
        close(res[0]);
        for (int i = 0; i < 8; i++)
            waitpid(pids[i], NULL, 0);
        assert_int_equal(wins, 1);
    }
}

/* A LEASE whose holder ran on this host, in this PID namespace, but whose
 * process is gone (no such PID, or the PID now names a process that started
 * at another time) is stale: taken over at once, not after its expiry. A
 * live holder, a holder in another PID namespace or on another host, and a
 * LEASE without the identity fields keep the expiry rule. */
static void put_lease(struct ckpt_store *st, const char *ident)
{
    char body[900], err[CKPT_ERR_MAX];
    int64_t t = (int64_t)time(NULL) * 1000;
    snprintf(body, sizeof body, "{\"format\":1,\"holder\":\"somehost:1:abcd\",\"epoch\":4,"
             "\"expires_ms\":%lld,\"heartbeat_ms\":%lld,\"released\":false%s}\n",
             (long long)(t + 600000), (long long)t, ident);
    assert_int_equal(ckpt_store_put(st, "x/LEASE", body, strlen(body), NULL, NULL, err), CKPT_OK);
}

static void test_stale_same_host(void **state)
{
    struct ckpt_store *st = store();
    struct lease *a, *b;
    struct lease_info other, li, me;
    char err[CKPT_ERR_MAX], ident[600];
    pid_t dead;
    (void)state;
    /* our own identity, as a lease we hold records it */
    assert_int_equal(lease_open(st, "me", 60000, NULL, &a), CKPT_OK);
    assert_int_equal(lease_acquire(a, &other, err), CKPT_OK);
    assert_int_equal(lease_read(st, "me", &me, NULL, err), CKPT_OK);
    assert_true(me.has_ident);
    assert_int_equal(me.pid, getpid());
    assert_false(lease_holder_gone(&me));
    assert_int_equal(lease_state(&me, me.heartbeat_ms), LEASE_LIVE);
    lease_close(a);
    /* a PID that is gone: a reaped child */
    dead = fork();
    if (dead == 0)
        _exit(0);
    waitpid(dead, NULL, 0);
#define IDENT(pid, start, ns, host)                                                        \
    snprintf(ident, sizeof ident, ",\"boot_id\":\"%s\",\"pid_ns\":%llu,\"hostname\":\"%s\","  \
             "\"pid\":%d,\"start_ticks\":%llu", me.boot_id, (unsigned long long)(ns), host,     \
             (int)(pid), (unsigned long long)(start))
    IDENT(dead, me.start_ticks, me.pid_ns, me.hostname);
    put_lease(st, ident);
    assert_int_equal(lease_read(st, "x", &li, NULL, err), CKPT_OK);
    assert_true(lease_holder_gone(&li));
    assert_int_equal(lease_state(&li, li.heartbeat_ms), LEASE_STALE);
    assert_string_equal(lease_state_name(LEASE_STALE), "stale");
    assert_int_equal(lease_open(st, "x", 60000, NULL, &b), CKPT_OK);
    assert_int_equal(lease_acquire(b, &other, err), CKPT_OK);
    assert_true(lease_took_stale(b));
    assert_int_equal(other.pid, dead);
    assert_int_equal(lease_epoch(b), 5);
    lease_close(b);
    /* a live PID (ours) with another start time: PID reuse, also gone */
    IDENT(getpid(), me.start_ticks + 1, me.pid_ns, me.hostname);
    put_lease(st, ident);
    assert_int_equal(lease_open(st, "x", 60000, NULL, &b), CKPT_OK);
    assert_int_equal(lease_acquire(b, &other, err), CKPT_OK);
    assert_true(lease_took_stale(b));
    lease_close(b);
    /* a live holder (this process, under another holder name) */
    IDENT(getpid(), me.start_ticks, me.pid_ns, me.hostname);
    put_lease(st, ident);
    assert_int_equal(lease_open(st, "x", 60000, NULL, &b), CKPT_OK);
    assert_int_equal(lease_acquire(b, &other, err), CKPT_E_EXISTS);
    assert_false(lease_took_stale(b));
    lease_close(b);
    /* another PID namespace (another container on this host): never judged */
    IDENT(dead, me.start_ticks, me.pid_ns + 1, me.hostname);
    put_lease(st, ident);
    assert_int_equal(lease_open(st, "x", 60000, NULL, &b), CKPT_OK);
    assert_int_equal(lease_acquire(b, &other, err), CKPT_E_EXISTS);
    lease_close(b);
    /* another host name */
    IDENT(dead, me.start_ticks, me.pid_ns, "elsewhere");
    put_lease(st, ident);
    assert_int_equal(lease_open(st, "x", 60000, NULL, &b), CKPT_OK);
    assert_int_equal(lease_acquire(b, &other, err), CKPT_E_EXISTS);
    lease_close(b);
    /* no identity fields (an older ckptrun): expiry only */
    put_lease(st, "");
    assert_int_equal(lease_read(st, "x", &li, NULL, err), CKPT_OK);
    assert_false(li.has_ident);
    assert_int_equal(lease_state(&li, li.heartbeat_ms), LEASE_LIVE);
    assert_int_equal(lease_open(st, "x", 60000, NULL, &b), CKPT_OK);
    assert_int_equal(lease_acquire(b, &other, err), CKPT_E_EXISTS);
    lease_close(b);
#undef IDENT
    ckpt_store_close(st);
}

/* A store without conditional writes (s3rver): the file store with its
 * conditions switched off. */
static struct ckpt_store *weak_store(void)
{
    struct ckpt_store *st = store();
    st->caps.flags &= ~(unsigned)CKPT_STORE_CONDITIONAL;
    return st;
}

/* Weak mode: a runner whose lease was taken over notices at its next
 * renewal instead of overwriting the new holder's lease, and its release
 * leaves the new holder's lease alone. */
static void test_weak_takeover(void **state)
{
    struct ckpt_store *st = weak_store();
    struct lease *a, *b;
    struct lease_info other, li;
    struct fake_clock fc;
    struct lease_clock clock = fake_clock(&fc);
    char err[CKPT_ERR_MAX];
    (void)state;
    assert_int_equal(lease_open(st, "w", 300, &clock, &a), CKPT_OK);
    assert_int_equal(lease_open(st, "w", 300, &clock, &b), CKPT_OK);
    assert_int_equal(lease_acquire(a, &other, err), CKPT_OK);
    assert_int_equal(lease_acquire(b, &other, err), CKPT_E_EXISTS);
    fc.now += 300 + LEASE_SKEW_MS + 200;
    assert_int_equal(lease_acquire(b, &other, err), CKPT_OK);
    assert_int_equal(lease_epoch(b), 2);
    assert_int_equal(lease_renew(a, err), CKPT_E_FENCED);
    assert_int_equal(lease_release(a, err), CKPT_OK);
    assert_int_equal(lease_read(st, "w", &li, NULL, err), CKPT_OK);
    assert_string_equal(li.holder, lease_holder(b));
    assert_false(li.released);
    assert_int_equal(lease_renew(b, err), CKPT_OK);
    assert_int_equal(lease_release(b, err), CKPT_OK);
    assert_int_equal(lease_read(st, "w", &li, NULL, err), CKPT_OK);
    assert_true(li.released);
    lease_close(a);
    lease_close(b);
    ckpt_store_close(st);
}

/* A context reads what its run holds in the background after ckpt_open;
 * a test that fences "after the writer looked" waits for that read. */
static void wait_run_loaded(struct ckpt_ctx *ctx)
{
    ckpt__run_wait_loaded(&ctx->rs);
}

/* After a fence, a writer that read HEAD before cannot commit. */
static void test_fence(void **state)
{
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *stale, *fresh;
    uint32_t x = 1;
    uint64_t step;
    (void)state;
    cfg.store = g_url;
    cfg.run = "f";
    cfg.no_control = 1;
    assert_int_equal(ckpt_open(&cfg, &stale), CKPT_OK);
    ckpt_protect(stale, "x", &x, 4);
    assert_int_equal(ckpt_save(stale, 1), CKPT_OK);
    assert_int_equal(ckpt_wait(stale), CKPT_OK);
    /* a new runner takes over and fences */
    assert_int_equal(ckpt_open(&cfg, &fresh), CKPT_OK);
    assert_int_equal(ckpt_fence(fresh, 7), CKPT_OK);
    x = 2;
    assert_int_equal(ckpt_save(stale, 2), CKPT_OK);
    assert_int_equal(ckpt_wait(stale), CKPT_E_FENCED);
    ckpt_protect(fresh, "x", &x, 4);
    assert_int_equal(ckpt_restore(fresh, &step), CKPT_OK);
    assert_int_equal(step, 1);
    assert_int_equal(x, 1);
    x = 3;
    assert_int_equal(ckpt_save(fresh, 3), CKPT_OK);
    assert_int_equal(ckpt_wait(fresh), CKPT_OK);
    ckpt_close(stale);
    ckpt_close(fresh);
    /* fencing a run without HEAD creates an empty one: nothing to restore,
     * and a writer that saw no HEAD cannot create it any more */
    cfg.run = "g";
    assert_int_equal(ckpt_open(&cfg, &stale), CKPT_OK);
    ckpt_protect(stale, "x", &x, 4);
    wait_run_loaded(stale); /* it saw no HEAD */
    assert_int_equal(ckpt_open(&cfg, &fresh), CKPT_OK);
    assert_int_equal(ckpt_fence(fresh, 1), CKPT_OK);
    ckpt_protect(fresh, "x", &x, 4);
    assert_int_equal(ckpt_restore(fresh, &step), CKPT_E_NOENT);
    assert_int_equal(ckpt_save(stale, 1), CKPT_OK);
    assert_int_equal(ckpt_wait(stale), CKPT_E_FENCED);
    assert_int_equal(ckpt_save(fresh, 1), CKPT_OK);
    assert_int_equal(ckpt_wait(fresh), CKPT_OK);
    ckpt_close(stale);
    ckpt_close(fresh);
    /* a writer of the lease's own epoch that read HEAD before its runner
     * fenced it (ckptrun opens its contexts as it takes the lease): the
     * fence is its own, its commit goes through (seen under load: the
     * save after a restart was refused as if another runner committed) */
    cfg.run = "h";
    assert_int_equal(ckpt_open(&cfg, &fresh), CKPT_OK);
    ckpt_protect(fresh, "x", &x, 4);
    assert_int_equal(ckpt_save(fresh, 1), CKPT_OK);
    assert_int_equal(ckpt_wait(fresh), CKPT_OK);
    ckpt_close(fresh);
    cfg.epoch = 8;
    assert_int_equal(ckpt_open(&cfg, &stale), CKPT_OK); /* the runner's writer */
    ckpt_protect(stale, "x", &x, 4);
    wait_run_loaded(stale); /* it read HEAD at epoch 0 */
    assert_int_equal(ckpt_open(&cfg, &fresh), CKPT_OK);
    assert_int_equal(ckpt_fence(fresh, 8), CKPT_OK); /* the runner's fence */
    x = 5;
    assert_int_equal(ckpt_save(stale, 2), CKPT_OK);
    assert_int_equal(ckpt_wait(stale), CKPT_OK);
    ckpt_close(fresh);
    ckpt_close(stale);
    cfg.epoch = 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lifecycle),
        cmocka_unit_test(test_job_generation),
        cmocka_unit_test(test_damaged_lease),
        cmocka_unit_test(test_lease_checksum),
        cmocka_unit_test(test_race),
        cmocka_unit_test(test_stale_same_host),
        cmocka_unit_test(test_fence),
        cmocka_unit_test(test_weak_takeover),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
