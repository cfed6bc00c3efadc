/* test_signals.c -- libckpt under ckptrun takes SIGTERM/SIGINT that reach
 * the process directly as stops (libckpt/src/control/signals.c, control.c): a fake
 * ckptrun on a Unix socket; each case runs in a forked child, since the
 * signal's default action ends it. Alone (no ckptrun), SIGTERM to a
 * trainer that asks saves, commits and then ends it. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include "test_util.h"
#include "ckpt.h"
#include "control/signals.h"
#include "ckpt_common.h"

static char *g_dir;
static char g_url[700], g_sock[700];

/* The handler's clock in a trainer started with a test clock: frozen until
 * the test moves it, shared with the forked trainer, counting its reads
 * (the handler reads it once per signal it takes). */
struct test_clock {
    _Atomic int64_t now_ms;
    atomic_int reads;
};
static struct test_clock *g_clock;

static int64_t test_clock_now(void)
{
    atomic_fetch_add(&g_clock->reads, 1);
    return atomic_load(&g_clock->now_ms);
}

static int setup(void **s)
{
    (void)s;
    g_dir = test_tmpdir();
    snprintf(g_url, sizeof g_url, "file://%s/store", g_dir);
    snprintf(g_sock, sizeof g_sock, "%s/ctl", g_dir);
    g_clock =
        mmap(NULL, sizeof *g_clock, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(g_clock != MAP_FAILED);
    return 0;
}

static int teardown(void **s)
{
    (void)s;
    munmap(g_clock, sizeof *g_clock);
    test_rmrf(g_dir);
    free(g_dir);
    return 0;
}

static int listen_on(const char *path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    unlink(path);
    assert_true(strlen(path) < sizeof sa.sun_path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(fd, 4), 0);
    return fd;
}

/* Read one line (up to 4 KiB) within 10 s. */
static void read_line(int fd, char *buf, size_t n)
{
    size_t at = 0;
    while (at + 1 < n) {
        struct pollfd p = { fd, POLLIN, 0 };
        ssize_t r;
        assert_true(poll(&p, 1, 10000) == 1);
        r = read(fd, buf + at, 1);
        assert_true(r == 1);
        if (buf[at] == '\n')
            break;
        at++;
    }
    buf[at] = '\0';
}

/* A program that handles SIGINT itself, as Python does, and asks
 * ckpt_signal() what it means (the Python package's handler). */
static struct ckpt_ctx *volatile g_tctx;
static volatile sig_atomic_t g_answers[3];

static void own_sigint(int sig)
{
    int r = g_tctx ? ckpt_signal(g_tctx, sig) : CKPT_SIGNAL_DEFAULT;
    g_answers[r]++;
    if (r == CKPT_SIGNAL_DEFAULT) { /* Python would raise KeyboardInterrupt */
        signal(sig, SIG_DFL);
        raise(sig);
    }
}

/* The trainer: opens a context under "ckptrun" and saves when asked; its
 * signal handler reads g_clock when `test_clock`. own_handler: 1 the
 * program ignores SIGTERM; 2 it handles SIGINT itself (own_sigint); 3
 * both. */
static pid_t trainer(int own_handler, int test_clock)
{
    pid_t pid = fork();
    if (pid == 0) {
        struct ckpt_config cfg = CKPT_CONFIG_INIT;
        struct ckpt_ctx *ctx;
        uint32_t x = 1;
        setenv("CKPT_SOCKET", g_sock, 1);
        setenv("CKPT_SOCKET_KEY", "0123456789abcdef0123456789abcdef", 1);
        cfg.store = g_url;
        cfg.run = "sig";
        if (own_handler & 1)
            signal(SIGTERM, SIG_IGN); /* the program decides: ignores it */
        if (own_handler & 2)
            signal(SIGINT, own_sigint);
        if (test_clock)
            ckpt__signals_test_clock(test_clock_now);
        if (ckpt_open(&cfg, &ctx) != CKPT_OK)
            _exit(2);
        g_tctx = ctx;
        ckpt_protect(ctx, "x", &x, sizeof x);
        /* stand in for a training loop: save when asked */
        for (int i = 0; i < 2000; i++) {
            if (ckpt_should_save(ctx)) {
                ckpt_save(ctx, (uint64_t)i);
                ckpt_wait(ctx);
            }
            usleep(5000);
        }
        ckpt_close(ctx);
        _exit(0);
    }
    return pid;
}

static int wait_exit(pid_t pid)
{
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return st;
}

/* First SIGTERM: a save request, reported (`signal`) before the save's
 * `saving`; ckptrun's `stopping` is acknowledged; the next SIGTERM ends
 * the process at once. */
static void test_sigterm_is_a_stop(void **state)
{
    int lfd = listen_on(g_sock), cfd, st;
    char line[4096];
    pid_t pid;
    (void)state;
    pid = trainer(0, 0);
    cfd = accept(lfd, NULL, NULL);
    assert_true(cfd >= 0);
    read_line(cfd, line, sizeof line);
    assert_non_null(strstr(line, "\"type\":\"hello\""));
    assert_non_null(strstr(line, "\"signals\":true"));
    assert_non_null(strstr(line, "\"key\":\"0123456789abcdef0123456789abcdef\""));
    assert_int_equal(kill(pid, SIGTERM), 0);
    read_line(cfd, line, sizeof line);
    assert_non_null(strstr(line, "\"type\":\"signal\",\"signal\":\"SIGTERM\""));
    read_line(cfd, line, sizeof line);
    assert_non_null(strstr(line, "\"type\":\"saving\"")); /* the save it asked for */
    read_line(cfd, line, sizeof line);
    assert_non_null(strstr(line, "\"type\":\"committed\""));
    assert_int_equal(waitpid(pid, &st, WNOHANG), 0); /* still alive */
    assert_int_equal(write(cfd, "{\"type\":\"stopping\",\"signal\":\"SIGTERM\"}\n", 39), 39);
    read_line(cfd, line, sizeof line);
    assert_non_null(strstr(line, "\"type\":\"stopping\""));
    assert_int_equal(kill(pid, SIGTERM), 0);
    st = wait_exit(pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    close(cfd);
    close(lfd);
}

/* ckptrun's stop request first (it got the job-wide SIGTERM before the
 * trainer did), then the trainer's own copy of it: reported, and the same
 * stop -- no second save. */
static void test_sigterm_after_stop_request(void **state)
{
    int lfd = listen_on(g_sock), cfd, st;
    char line[4096];
    const char req[] = "{\"type\":\"request\",\"reason\":\"stop\",\"deadline_ms\":0,\"id\":1}\n";
    pid_t pid;
    (void)state;
    pid = trainer(0, 0);
    cfd = accept(lfd, NULL, NULL);
    assert_true(cfd >= 0);
    read_line(cfd, line, sizeof line); /* hello */
    assert_int_equal(write(cfd, req, sizeof req - 1), (ssize_t)(sizeof req - 1));
    read_line(cfd, line, sizeof line);
    assert_non_null(strstr(line, "\"type\":\"saving\""));
    read_line(cfd, line, sizeof line);
    assert_non_null(strstr(line, "\"type\":\"committed\""));
    assert_int_equal(kill(pid, SIGTERM), 0);
    read_line(cfd, line, sizeof line);
    assert_non_null(strstr(line, "\"type\":\"signal\",\"signal\":\"SIGTERM\""));
    {
        /* nothing more within 300 ms: no second `saving` */
        struct pollfd p = { cfd, POLLIN, 0 };
        assert_int_equal(poll(&p, 1, 300), 0);
    }
    assert_int_equal(waitpid(pid, &st, WNOHANG), 0); /* absorbed */
    kill(pid, SIGKILL);
    wait_exit(pid);
    close(cfd);
    close(lfd);
}

/* Wait until the trainer's handler has taken `n` signals in all. */
static void wait_handled(int n)
{
    for (int i = 0; atomic_load(&g_clock->reads) < n; i++) {
        if (i == 10000)
            fail_msg("the handler took %d signal(s) in 10 s, want %d", atomic_load(&g_clock->reads),
                     n);
        usleep(1000);
    }
}

/* Without `stopping`: a repeat within 0.5 s is the same stop, a second
 * one later ends the process; SIGINT likewise. The handler's clock is the
 * test's: the repeat comes at the same instant as the first signal, the
 * third 0.7 s later, whatever the load. */
static void test_second_signal_ends(void **state)
{
    static const int sigs[] = { SIGTERM, SIGINT };
    static const char req[] = "{\"type\":\"request\",\"reason\":\"periodic\",\"deadline_ms\":0,"
                              "\"id\":2}\n";
    (void)state;
    for (int k = 0; k < 2; k++) {
        int lfd = listen_on(g_sock), cfd, st;
        char line[4096];
        pid_t pid;
        atomic_store(&g_clock->now_ms, 1000);
        atomic_store(&g_clock->reads, 0);
        pid = trainer(0, 1);
        cfd = accept(lfd, NULL, NULL);
        assert_true(cfd >= 0);
        read_line(cfd, line, sizeof line); /* hello */
        kill(pid, sigs[k]);
        read_line(cfd, line, sizeof line);
        assert_non_null(strstr(line, "\"type\":\"signal\""));
        assert_non_null(strstr(line, "\"mono_ms\":1000")); /* taken at the test's time */
        read_line(cfd, line, sizeof line);
        assert_non_null(strstr(line, "\"type\":\"saving\"")); /* the save it asked for */
        read_line(cfd, line, sizeof line);
        assert_non_null(strstr(line, "\"type\":\"committed\""));
        kill(pid, sigs[k]); /* a launcher forwarding the same stop */
        wait_handled(2);
        /* absorbed: the trainer lives on and saves on request */
        assert_int_equal(write(cfd, req, sizeof req - 1), (ssize_t)(sizeof req - 1));
        read_line(cfd, line, sizeof line);
        assert_non_null(strstr(line, "\"type\":\"saving\""));
        read_line(cfd, line, sizeof line);
        assert_non_null(strstr(line, "\"type\":\"committed\""));
        assert_int_equal(waitpid(pid, &st, WNOHANG), 0);
        atomic_fetch_add(&g_clock->now_ms, 700); /* past the 0.5 s window */
        kill(pid, sigs[k]);
        st = wait_exit(pid);
        assert_true(WIFSIGNALED(st) && WTERMSIG(st) == sigs[k]);
        assert_int_equal(atomic_load(&g_clock->reads), 3);
        close(cfd);
        close(lfd);
    }
}

/* A program's own disposition is kept: no handler installed, and hello
 * says so for SIGTERM (SIGINT is still taken). */
static void test_program_disposition_kept(void **state)
{
    int lfd = listen_on(g_sock), cfd, st;
    char line[4096];
    pid_t pid;
    (void)state;
    pid = trainer(1, 0);
    cfd = accept(lfd, NULL, NULL);
    read_line(cfd, line, sizeof line);
    assert_non_null(strstr(line, "\"signals\":true")); /* SIGINT */
    kill(pid, SIGTERM); /* ignored by the program: nothing happens */
    usleep(300000);
    assert_int_equal(waitpid(pid, &st, WNOHANG), 0);
    {
        struct pollfd p = { cfd, POLLIN, 0 };
        assert_int_equal(poll(&p, 1, 200), 0); /* no report */
    }
    kill(pid, SIGKILL);
    wait_exit(pid);
    close(cfd);
    close(lfd);
}

/* A program's own SIGINT handler asks ckpt_signal(): the first one is a
 * stop (reported, saved), a repeat within 0.5 s is absorbed, and after
 * `stopping` the next one takes its default effect. The test's clock
 * makes the repeat exact. */
static void test_own_handler_asks(void **state)
{
    int lfd = listen_on(g_sock), cfd, st;
    char line[4096];
    pid_t pid;
    (void)state;
    atomic_store(&g_clock->now_ms, 5000);
    atomic_store(&g_clock->reads, 0);
    pid = trainer(2, 1);
    cfd = accept(lfd, NULL, NULL);
    assert_true(cfd >= 0);
    read_line(cfd, line, sizeof line);
    assert_non_null(strstr(line, "\"signals\":true")); /* SIGTERM is libckpt's */
    {
        /* a save on request: the trainer is in its loop, g_tctx set */
        static const char req[] = "{\"type\":\"request\",\"reason\":\"periodic\","
                                  "\"deadline_ms\":0,\"id\":1}\n";
        assert_int_equal(write(cfd, req, sizeof req - 1), (ssize_t)(sizeof req - 1));
        read_line(cfd, line, sizeof line);
        assert_non_null(strstr(line, "\"type\":\"saving\""));
        read_line(cfd, line, sizeof line);
        assert_non_null(strstr(line, "\"type\":\"committed\""));
    }
    kill(pid, SIGINT);
    read_line(cfd, line, sizeof line);
    assert_non_null(strstr(line, "\"type\":\"signal\",\"signal\":\"SIGINT\""));
    assert_non_null(strstr(line, "\"mono_ms\":5000"));
    read_line(cfd, line, sizeof line);
    assert_non_null(strstr(line, "\"type\":\"saving\""));
    read_line(cfd, line, sizeof line);
    assert_non_null(strstr(line, "\"type\":\"committed\""));
    kill(pid, SIGINT); /* forwarded by a launcher: the same stop */
    wait_handled(2);
    {
        struct pollfd p = { cfd, POLLIN, 0 };
        assert_int_equal(poll(&p, 1, 200), 0); /* no second report, no save */
    }
    assert_int_equal(waitpid(pid, &st, WNOHANG), 0);
    assert_int_equal(write(cfd, "{\"type\":\"stopping\",\"signal\":\"SIGINT\"}\n", 38), 38);
    read_line(cfd, line, sizeof line);
    assert_non_null(strstr(line, "\"type\":\"stopping\""));
    kill(pid, SIGINT);
    st = wait_exit(pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGINT);
    close(cfd);
    close(lfd);
}

/* libckpt took neither signal (the program ignores SIGTERM and handles
 * SIGINT): ckpt_signal() says DEFAULT at once. */
static void test_own_handler_not_owner(void **state)
{
    int lfd = listen_on(g_sock), cfd, st;
    char line[4096];
    pid_t pid;
    (void)state;
    pid = trainer(3, 0);
    cfd = accept(lfd, NULL, NULL);
    read_line(cfd, line, sizeof line);
    assert_non_null(strstr(line, "\"signals\":false"));
    usleep(100000); /* past ckpt_open: the handler asks (a race would end it the same way) */
    kill(pid, SIGINT);
    st = wait_exit(pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGINT);
    close(cfd);
    close(lfd);
}

/* Alone (no CKPT_SOCKET): mode 0 saves when asked (every step asks), 1
 * never asks (saves every 20 steps by itself), 2 asks once and then sleeps.
 * It writes each step it saved to `fd` as a line once committed. */
static pid_t alone_trainer(int mode, int fd, const char *grace)
{
    pid_t pid = fork();
    if (pid == 0) {
        struct ckpt_config cfg = CKPT_CONFIG_INIT;
        struct ckpt_ctx *ctx;
        uint32_t x = 1;
        char line[64];
        unsetenv("CKPT_SOCKET");
        if (grace)
            setenv("CKPT_STOP_GRACE", grace, 1);
        else
            unsetenv("CKPT_STOP_GRACE");
        cfg.store = g_url;
        cfg.run = mode == 0 ? "alone-asks" : mode == 1 ? "alone-never" : "alone-stuck";
        if (ckpt_open(&cfg, &ctx) != CKPT_OK)
            _exit(2);
        ckpt_protect(ctx, "x", &x, sizeof x);
        if (mode == 2) {
            ckpt_should_save(ctx);
            if (write(fd, "up\n", 3) != 3)
                _exit(3);
            for (int k = 0; k < 600; k++)
                usleep(100000); /* stuck (a signal's handler cuts one sleep short) */
            _exit(4);
        }
        for (int i = 0; i < 4000; i++) {
            x = (uint32_t)i;
            if ((mode == 0 && ckpt_should_save(ctx)) || i % 20 == 0) {
                ckpt_save(ctx, (uint64_t)i); /* a stop's save ends the process */
                ckpt_wait(ctx);
                snprintf(line, sizeof line, "%d\n", i);
                if (write(fd, line, strlen(line)) < 0)
                    _exit(3);
            }
            usleep(2000);
        }
        ckpt_close(ctx);
        _exit(0);
    }
    return pid;
}

static uint64_t newest(const char *run)
{
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *ctx;
    uint32_t x = 0;
    uint64_t step = 0;
    cfg.store = g_url;
    cfg.run = run;
    cfg.no_control = 1;
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_OK);
    assert_int_equal(ckpt_protect(ctx, "x", &x, sizeof x), CKPT_OK);
    assert_int_equal(ckpt_restore(ctx, &step), CKPT_OK);
    assert_int_equal(x, (uint32_t)step);
    ckpt_close(ctx);
    return step;
}

/* An alone_trainer of `mode` whose lines were read up to `want`; *rfd:
 * the read end of its pipe (the caller closes it). */
static pid_t alone_until(int mode, const char *grace, const char *want, int *rfd)
{
    int fds[2];
    char line[64] = "";
    pid_t pid;
    assert_int_equal(pipe(fds), 0);
    pid = alone_trainer(mode, fds[1], grace);
    close(fds[1]);
    while (strcmp(line, want) != 0)
        read_line(fds[0], line, sizeof line);
    *rfd = fds[0];
    return pid;
}

/* Alone, a trainer that asks: the SIGTERM is a stop; its save is committed
 * and then the process dies of the SIGTERM; the store's newest is that
 * step, past the periodic saves. A repeat within 0.5 s is absorbed. */
static void test_alone_sigterm_saves_then_ends(void **state)
{
    int rfd, st;
    pid_t pid;
    (void)state;
    /* step 0 saved: it is past ckpt_open and asks */
    pid = alone_until(0, NULL, "0", &rfd);
    kill(pid, SIGTERM);
    kill(pid, SIGTERM); /* a launcher forwarding the same one */
    st = wait_exit(pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    /* the stop's save never came back to the loop: nothing after step 0 was
     * reported, yet the store holds a later step */
    assert_true(newest("alone-asks") > 0);
    close(rfd);
}

/* Alone, a program that never asks: the SIGTERM takes its default effect
 * at once, nothing saved for it. */
static void test_alone_never_asks_dies(void **state)
{
    int rfd, st;
    pid_t pid;
    (void)state;
    pid = alone_until(1, NULL, "20", &rfd);
    kill(pid, SIGTERM);
    st = wait_exit(pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    assert_true(newest("alone-never") % 20 == 0);
    close(rfd);
}

/* Alone, asked once and stuck: no save within CKPT_STOP_GRACE -> exit 143;
 * CKPT_STOP_GRACE=0: SIGTERM keeps its default. */
static void test_alone_stuck_exits_after_grace(void **state)
{
    int rfd, st;
    pid_t pid;
    int64_t t0;
    (void)state;
    pid = alone_until(2, "300ms", "up", &rfd);
    t0 = ckpt__mono_ms();
    kill(pid, SIGTERM);
    st = wait_exit(pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 143);
    assert_true(ckpt__mono_ms() - t0 >= 250);
    close(rfd);
    pid = alone_until(2, "0", "up", &rfd);
    kill(pid, SIGTERM);
    st = wait_exit(pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    close(rfd);
}

/* ---- ckpt_child_signals: a data-loader worker's SIGTERM ---------------- */

/* A worker: ckpt_child_signals(), then waits to be signalled. */
static pid_t start_worker(void)
{
    pid_t w = fork();
    assert_true(w >= 0);
    if (w == 0) {
        if (ckpt_child_signals() != CKPT_OK)
            _exit(3);
        for (;;)
            pause();
    }
    usleep(100 * 1000); /* its handler is in place */
    return w;
}

/* SIGTERM to `pid` from a process that is not its parent (as systemd's
 * kill of the whole job): a helper forked for it. */
static void term_from_elsewhere(pid_t pid)
{
    pid_t k = fork();
    int st;
    assert_true(k >= 0);
    if (k == 0)
        _exit(kill(pid, SIGTERM) == 0 ? 0 : 1);
    assert_int_equal(waitpid(k, &st, 0), k);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void test_child_signals(void **state)
{
    pid_t w;
    int st;
    (void)state;
    /* the stop's SIGTERM, and its repeat, are the trainer's: the worker lives */
    w = start_worker();
    term_from_elsewhere(w);
    term_from_elsewhere(w);
    usleep(200 * 1000);
    assert_int_equal(waitpid(w, &st, WNOHANG), 0);
    /* a later one ends it with its default effect */
    usleep(500 * 1000);
    term_from_elsewhere(w);
    assert_int_equal(waitpid(w, &st, 0), w);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    /* its parent's SIGTERM (a DataLoader ending its worker): exit 0 at once,
     * also after the stop's */
    w = start_worker();
    assert_int_equal(kill(w, SIGTERM), 0);
    assert_int_equal(waitpid(w, &st, 0), w);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    w = start_worker();
    term_from_elsewhere(w);
    usleep(100 * 1000);
    assert_int_equal(kill(w, SIGTERM), 0);
    assert_int_equal(waitpid(w, &st, 0), w);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigterm_is_a_stop),
        cmocka_unit_test(test_second_signal_ends),
        cmocka_unit_test(test_sigterm_after_stop_request),
        cmocka_unit_test(test_program_disposition_kept),
        cmocka_unit_test(test_own_handler_asks),
        cmocka_unit_test(test_own_handler_not_owner),
        cmocka_unit_test(test_alone_sigterm_saves_then_ends),
        cmocka_unit_test(test_alone_never_asks_dies),
        cmocka_unit_test(test_alone_stuck_exits_after_grace),
        cmocka_unit_test(test_child_signals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
