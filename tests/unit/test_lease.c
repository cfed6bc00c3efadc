/* test_lease.c -- the run lease on the file store: create, live holder,
 * takeover after expiry with a new epoch, renew refused after takeover,
 * release, races between processes, damaged LEASE; and HEAD fencing. */
#include <sys/wait.h>
#include "test_util.h"
#include "internal.h"
#include "lease.h"

static char *g_dir;
static char g_url[700];

static int setup(void **s) { (void)s; g_dir = test_tmpdir(); snprintf(g_url, sizeof g_url, "file://%s", g_dir); return 0; }
static int teardown(void **s) { (void)s; test_rmrf(g_dir); free(g_dir); return 0; }

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
    char err[CKPT_ERR_MAX];
    (void)state;
    assert_int_equal(lease_open(st, "r", 300, &a), CKPT_OK);
    assert_int_equal(lease_open(st, "r", 300, &b), CKPT_OK);
    assert_int_equal(lease_acquire(a, &other, err), CKPT_OK);
    assert_int_equal(lease_epoch(a), 1);
    /* live: b is told who holds it */
    assert_int_equal(lease_acquire(b, &other, err), CKPT_E_EXISTS);
    assert_string_equal(other.holder, lease_holder(a));
    assert_int_equal(lease_renew(a, err), CKPT_OK);
    /* expired past the skew margin: b takes over with a new epoch */
    usleep((300 + LEASE_SKEW_MS + 200) * 1000);
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

static void test_damaged_lease(void **state)
{
    struct ckpt_store *st = store();
    struct lease *a;
    struct lease_info other;
    char err[CKPT_ERR_MAX];
    (void)state;
    assert_int_equal(ckpt_store_put(st, "d/LEASE", "{\"format\":1,\"holder\":", 21, NULL, NULL, err), CKPT_OK);
    assert_int_equal(lease_open(st, "d", 1000, &a), CKPT_OK);
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
    assert_int_equal(lease_open(st, "c", 60000, &a), CKPT_OK);
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

/* Eight processes race for one lease, ten times: exactly one wins each time. */
static void test_race(void **state)
{
    (void)state;
    for (int round = 0; round < 10; round++) {
        char run[32];
        pid_t pids[8];
        int wins = 0;
        snprintf(run, sizeof run, "race%d", round);
        for (int i = 0; i < 8; i++) {
            pids[i] = fork();
            if (pids[i] == 0) {
                struct ckpt_store *st;
                struct lease *l;
                struct lease_info other;
                char err[CKPT_ERR_MAX];
                if (ckpt_store_open(g_url, NULL, &st, err) || lease_open(st, run, 60000, &l))
                    _exit(2);
                _exit(lease_acquire(l, &other, err) == CKPT_OK ? 0 : 1);
            }
        }
        for (int i = 0; i < 8; i++) {
            int status;
            waitpid(pids[i], &status, 0);
            wins += WIFEXITED(status) && WEXITSTATUS(status) == 0;
        }
        assert_int_equal(wins, 1);
    }
}

/* A store without conditional writes (s3rver): the file store with its
 * conditions switched off. */
static struct ckpt_store_ops g_weak_ops;
static int no_conditional(struct ckpt_store *st) { (void)st; return 0; }

static struct ckpt_store *weak_store(void)
{
    struct ckpt_store *st = store();
    g_weak_ops = *st->ops;
    g_weak_ops.has_conditional = no_conditional;
    st->ops = &g_weak_ops;
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
    char err[CKPT_ERR_MAX];
    (void)state;
    assert_int_equal(lease_open(st, "w", 300, &a), CKPT_OK);
    assert_int_equal(lease_open(st, "w", 300, &b), CKPT_OK);
    assert_int_equal(lease_acquire(a, &other, err), CKPT_OK);
    assert_int_equal(lease_acquire(b, &other, err), CKPT_E_EXISTS);
    usleep((300 + LEASE_SKEW_MS + 200) * 1000);
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
    usleep(100000);
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
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lifecycle),
        cmocka_unit_test(test_damaged_lease),
        cmocka_unit_test(test_lease_checksum),
        cmocka_unit_test(test_race),
        cmocka_unit_test(test_fence),
        cmocka_unit_test(test_weak_takeover),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
