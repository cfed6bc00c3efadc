/* Unit tests of the supervisor's parts that stand on their own: the notice
 * queue (ckptrun/sup/notice_queue.c), the lease renewer (ckptrun/sup/renewer.c, on
 * the file store, with a test clock for the lease), the child's environment
 * (ckptrun/sup/child.c) and the directories ckptrun makes and removes
 * (ckptrun/base/fsutil.c). No test waits on the wall clock: the renewer is asked
 * to renew at once, and its loss is awaited through its wake-up (bounded,
 * so that a lost request fails the test instead of hanging it). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include "test_util.h"
#include "sup/child.h"
#include "base/fsutil.h"
#include "record/lease.h"
#include "sup/notice_queue.h"
#include "sup/renewer.h"
#include "ckpt_store.h"

static char *g_dir;

static int setup(void **s) { (void)s; g_dir = test_tmpdir(); return 0; }
static int teardown(void **s) { (void)s; test_rmrf(g_dir); free(g_dir); return 0; }

/* ---- notice queue ------------------------------------------------------------ */

static int g_acked;
static void ack(void *user, int committed, uint64_t step)
{
    (void)committed;
    (void)step;
    g_acked += *(int *)user;
}

static void test_notice_queue(void **state)
{
    struct queued_notice *list, *n;
    struct pollfd pf;
    int one = 1;
    (void)state;
    assert_int_equal(notice_queue_open(), 0);
    pf.fd = notice_queue_fd();
    pf.events = POLLIN;
    assert_true(pf.fd >= 0);
    assert_int_equal(poll(&pf, 1, 0), 0);           /* nothing posted */
    assert_null(notice_queue_take());
    ckptrun_notice_post(CKPTRUN_NOTICE_PREEMPT, 1234, "aws", ack, &one);
    ckptrun_notice_post(CKPTRUN_NOTICE_REBALANCE, 0, NULL, NULL, NULL);
    assert_int_equal(poll(&pf, 1, 0), 1);           /* the loop is woken */
    list = notice_queue_take();
    assert_int_equal(poll(&pf, 1, 0), 0);           /* and the wake-up cleared */
    /* the latest posted first */
    assert_non_null(list);
    assert_int_equal(list->kind, CKPTRUN_NOTICE_REBALANCE);
    assert_string_equal(list->provider, "");
    n = list->next;
    assert_non_null(n);
    assert_int_equal(n->kind, CKPTRUN_NOTICE_PREEMPT);
    assert_int_equal(n->deadline_ms, 1234);
    assert_string_equal(n->provider, "aws");
    assert_null(n->next);
    n->ack(n->ack_user, 1, 7);
    assert_int_equal(g_acked, 1);
    free(n);
    free(list);
    notice_queue_wake();                            /* news that is no notice */
    assert_int_equal(poll(&pf, 1, 0), 1);
    assert_null(notice_queue_take());
    ckptrun_notice_post(CKPTRUN_NOTICE_MAINTENANCE, 0, "gcp", NULL, NULL);
    notice_queue_close();                           /* frees what was never taken */
    assert_int_equal(notice_queue_fd(), -1);
}

/* ---- renewer ----------------------------------------------------------------- */

struct fake_clock {
    int64_t now;
};
static int64_t fake_now(void *user) { return ((struct fake_clock *)user)->now; }
static void fake_sleep(void *user, int64_t ms) { ((struct fake_clock *)user)->now += ms; }

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_woken;

static void wake(void)
{
    pthread_mutex_lock(&g_mu);
    g_woken++;
    pthread_cond_signal(&g_cv);
    pthread_mutex_unlock(&g_mu);
}

/* Wait for the renewer's wake-up. A renewer that lost the request never
 * wakes anyone: the wait is bounded (10 s of the real clock, where the
 * renewal itself takes a millisecond) so the test fails instead of
 * hanging. @return 1 woken. */
static int woken_within_10s(void)
{
    struct timespec ts;
    int rc = 0;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 10;
    pthread_mutex_lock(&g_mu);
    while (!g_woken && rc == 0)
        rc = pthread_cond_timedwait(&g_cv, &g_mu, &ts);
    rc = g_woken > 0;
    g_woken = 0;
    pthread_mutex_unlock(&g_mu);
    return rc;
}

/* Two runners of one run on the file store under one fake clock: a holds
 * the lease (a long TTL: its renewer renews only when asked); b takes the
 * run over when takeover() moves the clock past a's expiry. */
struct two_runners {
    struct ckpt_store *st;
    struct lease *a, *b;
    struct fake_clock fc;
    struct lease_clock clock;
};

static void two_runners_open(struct two_runners *t, const char *run)
{
    struct lease_info other;
    char url[700], err[CKPT_ERR_MAX];
    t->fc.now = (int64_t)time(NULL) * 1000;
    t->clock = (struct lease_clock){ fake_now, fake_sleep, &t->fc };
    snprintf(url, sizeof url, "file://%s", g_dir);
    assert_int_equal(ckpt_store_open(url, NULL, &t->st, err), CKPT_OK);
    assert_int_equal(lease_open(t->st, run, 600000, &t->clock, &t->a), CKPT_OK);
    assert_int_equal(lease_open(t->st, run, 600000, &t->clock, &t->b), CKPT_OK);
    assert_int_equal(lease_acquire(t->a, &other, err), CKPT_OK);
}

static void takeover(struct two_runners *t)
{
    struct lease_info other;
    char err[CKPT_ERR_MAX];
    t->fc.now += 600000 + LEASE_SKEW_MS + 1;
    assert_int_equal(lease_acquire(t->b, &other, err), CKPT_OK);
}

static void two_runners_close(struct two_runners *t)
{
    lease_close(t->a);
    lease_close(t->b);
    ckpt_store_close(t->st);
}

static void test_renewer_loses_a_taken_lease(void **state)
{
    struct two_runners t;
    struct renewer rn;
    char why[800];
    (void)state;
    two_runners_open(&t, "r");
    memset(&rn, 0, sizeof rn);
    assert_int_equal(renewer_start(&rn, t.a, wake), 0);
    assert_false(renewer_lost(&rn, why, sizeof why));
    /* another runner takes the run over once a's lease has expired */
    takeover(&t);
    /* a commit refused as fenced asks for a renewal now: it is refused */
    renewer_kick(&rn);
    assert_true(woken_within_10s());
    assert_true(renewer_lost(&rn, why, sizeof why));
    assert_non_null(strstr(why, "taken over"));
    renewer_stop(&rn);
    assert_false(renewer_lost(&rn, why, sizeof why)); /* stopped: the caller's again */
    two_runners_close(&t);
}

/* A request to renew made as soon as the renewer is started -- before its
 * thread has run (the supervisor starts it, then a commit comes back
 * fenced) -- is not lost: the thread's first schedule must not overwrite
 * it. The process is pinned to one CPU so that the new thread does not run
 * before the request is made. */
static void test_renewer_kicked_at_start(void **state)
{
    struct two_runners t;
    struct renewer rn;
    char why[800];
    cpu_set_t all, one;
    (void)state;
    two_runners_open(&t, "k");
    takeover(&t);
    assert_int_equal(sched_getaffinity(0, sizeof all, &all), 0);
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &all)) {
            CPU_SET(c, &one);
            break;
        }
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    memset(&rn, 0, sizeof rn);
    assert_int_equal(renewer_start(&rn, t.a, wake), 0);
    renewer_kick(&rn);
    assert_int_equal(sched_setaffinity(0, sizeof all, &all), 0);
    assert_true(woken_within_10s());
    assert_true(renewer_lost(&rn, why, sizeof why));
    renewer_stop(&rn);
    two_runners_close(&t);
}

/* ---- the child's environment -------------------------------------------------- */

static const char *env_get(char **env, const char *name)
{
    size_t n = strlen(name);
    for (char **e = env; *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

static void test_child_env(void **state)
{
    struct child_vars v = { "/tmp/sock", "k3y", "/data/ckpt", "file:///s", "r1", SIGUSR1, 1, 42,
                            "lz4", 3, 9, "/lib/libckpt_preload.so" };
    char **env;
    int n = 0;
    (void)state;
    setenv("CKPT_STEP", "999", 1);        /* inherited: replaced */
    setenv("CKPT_TEST_KEEP", "yes", 1);   /* not ours: kept */
    setenv("LD_PRELOAD", "/lib/other.so", 1);
    env = child_env(&v);
    unsetenv("LD_PRELOAD");
    assert_non_null(env);
    assert_string_equal(env_get(env, "CKPT_SOCKET"), "/tmp/sock");
    assert_string_equal(env_get(env, "CKPT_SOCKET_KEY"), "k3y");
    assert_string_equal(env_get(env, "CKPT_DIR"), "/data/ckpt");
    assert_string_equal(env_get(env, "CKPT_STORE"), "file:///s");
    assert_string_equal(env_get(env, "CKPT_RUN"), "r1");
    assert_string_equal(env_get(env, "CKPT_SIGNAL"), "SIGUSR1");
    assert_string_equal(env_get(env, "CKPT_RESUMED"), "1");
    assert_string_equal(env_get(env, "CKPT_STEP"), "42");
    assert_string_equal(env_get(env, "CKPT_CODEC"), "lz4");
    assert_string_equal(env_get(env, "CKPT_KEEP"), "3");
    assert_string_equal(env_get(env, "CKPT_EPOCH"), "9");
    assert_string_equal(env_get(env, "LD_PRELOAD"), "/lib/libckpt_preload.so:/lib/other.so");
    assert_string_equal(env_get(env, "CKPT_TEST_KEEP"), "yes");
    for (char **e = env; *e; e++)
        n += strncmp(*e, "CKPT_STEP=", 10) == 0;
    assert_int_equal(n, 1);
    child_env_free(env);
    {
        /* the Python package next to this binary (<build>/python) goes first
         * on PYTHONPATH, the program's own after it */
        char exe[PATH_MAX], want[PATH_MAX * 2 + 16], pkg[PATH_MAX + 32];
        ssize_t l = readlink("/proc/self/exe", exe, sizeof exe - 1);
        assert_true(l > 0);
        exe[l] = '\0';
        *strrchr(exe, '/') = '\0';
        snprintf(pkg, sizeof pkg, "%s/../python/ckpt/__init__.py", exe);
        assert_int_equal(access(pkg, R_OK), 0); /* built with the test (ckpt_python) */
        strcat(exe, "/../python");
        assert_non_null(realpath(exe, pkg));
        setenv("PYTHONPATH", "/my/path", 1);
        env = child_env(&v);
        snprintf(want, sizeof want, "%s:/my/path", pkg);
        assert_string_equal(env_get(env, "PYTHONPATH"), want);
        child_env_free(env);
        unsetenv("PYTHONPATH");
        env = child_env(&v);
        assert_string_equal(env_get(env, "PYTHONPATH"), pkg);
        child_env_free(env);
    }
    /* not resumed, no socket, no signal: no CKPT_STEP, CKPT_SOCKET, CKPT_CODEC */
    v.sock = "";
    v.resumed = 0;
    v.sig = 0;
    v.codec = NULL;
    v.epoch = 0;
    v.preload = NULL;
    env = child_env(&v);
    assert_non_null(env);
    assert_null(env_get(env, "CKPT_SOCKET"));
    assert_null(env_get(env, "CKPT_STEP"));
    assert_null(env_get(env, "CKPT_CODEC"));
    assert_null(env_get(env, "CKPT_EPOCH"));
    assert_string_equal(env_get(env, "CKPT_SIGNAL"), "none");
    assert_string_equal(env_get(env, "CKPT_RESUMED"), "0");
    child_env_free(env);
    unsetenv("CKPT_STEP");
    unsetenv("CKPT_TEST_KEEP");
}

/* ---- directories -------------------------------------------------------------- */

static void test_fsutil(void **state)
{
    char p[1024], f[1100];
    struct stat sb;
    FILE *fp;
    (void)state;
    snprintf(p, sizeof p, "%s/a/b/c", g_dir);
    assert_int_equal(mkdir_owner(p), 0);
    assert_int_equal(stat(p, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));
    assert_int_equal(sb.st_mode & 0777, 0700);       /* owner only */
    assert_int_equal(mkdir_owner(p), 0);             /* there already: fine */
    snprintf(f, sizeof f, "%s/file", p);
    assert_non_null(fp = fopen(f, "w"));
    fclose(fp);
    assert_int_equal(mkdir_owner(f), -1);            /* a file in the way */
    assert_int_equal(errno, ENOTDIR);
    snprintf(p, sizeof p, "%s/a", g_dir);
    assert_int_equal(rm_rf(p), 0);
    assert_int_not_equal(stat(p, &sb), 0);
    assert_int_equal(rm_rf(p), 0);                   /* gone already: fine */
    assert_int_equal(rm_rf(f), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_notice_queue),
        cmocka_unit_test(test_renewer_loses_a_taken_lease),
        cmocka_unit_test(test_renewer_kicked_at_start),
        cmocka_unit_test(test_child_env),
        cmocka_unit_test(test_fsutil),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
