/* Unit tests of ckptrun's directory watch (ckptrun/watch/) on a real
 * directory, inotify and a file:// store: when an entry is complete and at
 * which step it is committed (docs/ckptrun.md, "Watched directory"). The
 * settle time is 10 s and the marker's quiet time 2 s, longer than any of
 * these tests runs: whatever completes here completes by the rules that do
 * not wait -- a marker with the files of the last complete checkpoint, a
 * newer checkpoint's marker, a rename, the trainer's saved(). Nothing sleeps
 * to order events: each step is looked at by one tick, and commits are
 * awaited on the watch's result pipe. Also the control socket's `file`
 * message and its step (ckptrun/sup/ctlserver.c). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include "test_util.h"
#include "sup/ctlserver.h"
#include "base/runlog.h"
#include "watch/int.h"
#include "watch/entry.h"
#include "watch/watch.h"

#define MARKER "trainer_state.json"

static char *g_root;
static char g_dir[600];
static struct watch *g_w;

static void open_watch(const char *marker)
{
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *ctx = NULL;
    char url[700];

    snprintf(url, sizeof url, "file://%s/store", g_root);
    cfg.store = url;
    cfg.run = "t";
    cfg.no_control = 1;
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_OK);
    assert_int_equal(watch_open(&g_w, g_dir, marker, 10000, ctx, NULL), 0);
    watch_set_pgid(g_w, getpgrp());
}

static int setup(void **state)
{
    (void)state;
    g_root = test_tmpdir();
    snprintf(g_dir, sizeof g_dir, "%s/ck", g_root);
    assert_int_equal(mkdir(g_dir, 0700), 0);
    log_setup(0, -1); /* warnings and errors only */
    open_watch(MARKER);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    watch_close(g_w, 1);
    g_w = NULL;
    test_rmrf(g_root);
    free(g_root);
    return 0;
}

static void put(const char *rel, const char *text)
{
    char p[1024];
    FILE *f;
    assert_true((size_t)snprintf(p, sizeof p, "%s/%s", g_dir, rel) < sizeof p);
    assert_non_null(f = fopen(p, "w"));
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static void sub(const char *rel)
{
    char p[1024];
    assert_true((size_t)snprintf(p, sizeof p, "%s/%s", g_dir, rel) < sizeof p);
    assert_int_equal(mkdir(p, 0700), 0);
}

/* A file renamed into place (what a careful writer does). */
static void put_renamed(const char *rel, const char *text)
{
    char tmp[1024], p[1024];
    snprintf(tmp, sizeof tmp, "%s.tmp", rel);
    put(tmp, text);
    snprintf(tmp, sizeof tmp, "%s/%s.tmp", g_dir, rel);
    assert_true((size_t)snprintf(p, sizeof p, "%s/%s", g_dir, rel) < sizeof p);
    assert_int_equal(rename(tmp, p), 0);
}

/* One look: the events so far, then a tick. */
static void pump(void)
{
    watch_handle_inotify(g_w);
    watch_tick(g_w);
}

static int complete(const char *name)
{
    struct entry *e = find_entry(g_w, name);
    assert_non_null(e);
    return e->ok;
}

/* The next commit the watch hands over (pumped while waiting: it queues a
 * snapshot once its entries have been complete 300 ms). */
static struct watch_result *next_commit(void)
{
    int64_t end = ckpt__mono_ms() + 20000;
    while (ckpt__mono_ms() < end) {
        struct pollfd pf = { .fd = watch_result_fd(g_w), .events = POLLIN };
        int64_t due;
        struct watch_result *r;
        watch_handle_inotify(g_w);
        due = watch_tick(g_w);
        if (poll(&pf, 1,
                 due < 0 ? 100 : (int)(due - ckpt__mono_ms() > 0 ? due - ckpt__mono_ms() : 0)) >
                0 &&
            (r = watch_take_result(g_w)) != NULL)
            return r;
    }
    fail_msg("no commit within 20 s");
    return NULL;
}

/* Commits until the one of `step` (older steps may go first on a slow
 * machine: each must have committed, none may be newer). */
static struct watch_result *commit_of(uint64_t step)
{
    for (;;) {
        struct watch_result *r = next_commit();
        assert_int_equal(r->res.st, CKPT_OK);
        assert_true(r->res.step <= step);
        if (r->res.step == step)
            return r;
        watch_result_free(r);
    }
}

/* A process other than this one (the watch never counts itself) holding
 * `rel` open for writing until told; @return its pid, *ctl the pipe that
 * ends it. */
static pid_t hold_open(const char *rel, int *ctl)
{
    char p[1024];
    int fds[2], ready[2];
    char c;
    pid_t pid;

    assert_true((size_t)snprintf(p, sizeof p, "%s/%s", g_dir, rel) < sizeof p);
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(pipe(ready), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || write(fd, "shard", 5) != 5)
            _exit(1);
        if (write(ready[1], "r", 1) != 1 || read(fds[0], &c, 1) < 0)
            _exit(1);
        _exit(close(fd) == 0 ? 0 : 1);
    }
    close(fds[0]);
    close(ready[1]);
    assert_int_equal(read(ready[0], &c, 1), 1);
    close(ready[0]);
    *ctl = fds[1];
    return pid;
}

static void release(pid_t pid, int ctl)
{
    int st;
    assert_int_equal(write(ctl, "x", 1), 1);
    close(ctl);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* HF's order: the marker first, then each rank's shard in place; the two
 * newest kept. Each checkpoint is complete as soon as its last shard is
 * closed (same files as the last complete one) or the next one's marker is
 * there -- never later, whatever the pace. */
static void test_fast_writer(void **state)
{
    struct watch_result *r;
    int ctl;
    pid_t pid;
    (void)state;

    sub("checkpoint-10");
    put("checkpoint-10/" MARKER, "{\"global_step\": 10}");
    pump();
    put("checkpoint-10/rank-0.pt", "a");
    put("checkpoint-10/rank-1.pt", "b");
    pump();
    /* the first one: nothing says more shards are not to come yet */
    assert_false(complete("checkpoint-10"));

    sub("checkpoint-20");
    put("checkpoint-20/" MARKER, "{\"global_step\": 20}");
    pump();
    assert_true(complete("checkpoint-10"));  /* its writer moved on */
    assert_false(complete("checkpoint-20")); /* the shards are still to come */
    put("checkpoint-20/rank-0.pt", "a");
    pump();
    assert_false(complete("checkpoint-20")); /* rank 1's is missing */
    pid = hold_open("checkpoint-20/rank-1.pt", &ctl);
    pump();
    assert_false(complete("checkpoint-20")); /* rank 1 still writes it */
    release(pid, ctl);
    pump();
    assert_true(complete("checkpoint-20"));
    r = commit_of(20);
    assert_int_equal(r->res.files, 3);
    assert_string_equal(r->step_from, "state");
    watch_result_free(r);
}

/* ckptrun's stop looks once more before it signals the child: what is
 * complete then counts, however the child dies afterwards. */
static void test_complete_before_the_stop(void **state)
{
    struct watch_result *r;
    const char *names[] = { "checkpoint-10", "checkpoint-20", "checkpoint-30" };
    (void)state;

    for (int i = 0; i < 3; i++) {
        char p[256];
        sub(names[i]);
        snprintf(p, sizeof p, "%s/" MARKER, names[i]);
        put(p, "{}");
        snprintf(p, sizeof p, "%s/rank-0.pt", names[i]);
        put(p, "a");
        if (i < 2)
            pump(); /* 30 is written just before the stop, not looked at */
    }
    watch_stopping(g_w);
    watch_child_exit(g_w, 143);
    pump();
    assert_true(complete("checkpoint-30"));
    r = commit_of(30);
    watch_result_free(r);
}

/* The first checkpoint of a session (nothing learnt yet of what one holds)
 * at the stop's last look: kept once marked and unchanged a moment (300
 * ms), not while its marker is fresh (other ranks' shards may be about to
 * come). The moment is made to have passed by dating the entry's last
 * change back: the watch has no clock of its own to move. */
static void test_first_checkpoint_at_the_stop(void **state)
{
    struct watch_result *r;
    int64_t t0;
    (void)state;

    sub("checkpoint-10");
    put("checkpoint-10/" MARKER, "{}");
    put("checkpoint-10/rank-0.pt", "a");
    pump();
    assert_false(complete("checkpoint-10"));
    find_entry(g_w, "checkpoint-10")->changed -= 1000;
    t0 = ckpt__mono_ms();
    sub("checkpoint-5"); /* older, just marked: another writer's */
    put("checkpoint-5/" MARKER, "{}");
    pump();
    watch_stopping(g_w);
    assert_true(complete("checkpoint-10"));
    if (ckpt__mono_ms() - t0 < 250) /* not a machine stalled that long */
        assert_false(complete("checkpoint-5"));
    watch_child_exit(g_w, 143);
    r = commit_of(10);
    watch_result_free(r);
}

/* After the stop's signal, what changes (a shard closed as its writer is
 * killed) is not a completion. */
static void test_changed_after_the_stop(void **state)
{
    (void)state;
    sub("checkpoint-10");
    put("checkpoint-10/" MARKER, "{}");
    put("checkpoint-10/rank-0.pt", "a");
    pump();
    sub("checkpoint-20");
    put("checkpoint-20/" MARKER, "{}");
    pump();
    assert_true(complete("checkpoint-10"));
    watch_stopping(g_w);
    put("checkpoint-20/rank-0.pt", "torn");
    pump();
    watch_child_exit(g_w, 143);
    pump();
    assert_false(complete("checkpoint-20"));
}

/* saved(path, step): the trainer's step, also for a name without one; from
 * then on what the trainer does not report waits for --settle. */
static void test_saved_step(void **state)
{
    struct watch_result *r;
    char p[1024];
    (void)state;

    snprintf(p, sizeof p, "%s/last.pt", g_dir);
    put_renamed("last.pt", "step 146");
    pump(); /* complete by its rename, at a counter value, not queued yet */
    assert_true(complete("last.pt"));
    watch_saved(g_w, p, "renamed", 1, 146); /* the report follows the rename */
    r = next_commit();
    assert_int_equal(r->res.st, CKPT_OK);
    assert_int_equal(r->res.step, 146);
    assert_string_equal(r->step_from, "saved");
    watch_result_free(r);

    put_renamed("last.pt", "step 166, not reported");
    pump();
    assert_false(complete("last.pt")); /* saved() is the rule now: --settle */
    put_renamed("last.pt", "step 186");
    watch_saved(g_w, p, "renamed", 1, 186);
    pump();
    assert_true(complete("last.pt"));
    r = next_commit();
    assert_int_equal(r->res.step, 186);
    watch_result_free(r);

    /* a report without a step is the preload shim's: no saved() mode */
    watch_saved(g_w, "/elsewhere/x", "renamed", 1, 5); /* outside: ignored */
    assert_null(find_entry(g_w, "x"));
}

/* Reported by rank 0 while another rank still writes its shard in it (HF's
 * on_save callback runs on each rank as it finishes): complete, at that
 * step, once that writer is done -- not --settle later because the entry
 * changed after the report. */
static void test_saved_while_a_rank_writes(void **state)
{
    struct watch_result *r;
    char p[1024];
    int ctl;
    pid_t pid;
    (void)state;

    sub("final");
    put("final/model.bin", "w");
    pid = hold_open("final/rng_state_1.pth", &ctl);
    pump();
    snprintf(p, sizeof p, "%s/final", g_dir);
    watch_saved(g_w, p, "renamed", 1, 300);
    pump();
    assert_false(complete("final"));
    release(pid, ctl); /* its close changes the entry after the report */
    pump();
    assert_true(complete("final"));
    r = commit_of(300);
    assert_int_equal(r->res.files, 2);
    assert_string_equal(r->step_from, "saved");
    watch_result_free(r);
}

/* A report made before inotify showed the rename still names that version. */
static void test_saved_before_the_event(void **state)
{
    struct watch_result *r;
    char p[1024];
    (void)state;

    snprintf(p, sizeof p, "%s/model.bin", g_dir);
    put_renamed("model.bin", "v1");
    watch_saved(g_w, p, "renamed", 1, 40);
    pump();
    r = next_commit();
    assert_int_equal(r->res.step, 40);
    watch_result_free(r);
}

/* HF's trainer_state.json: global_step of an entry without a number (a
 * final model saved with its state, an output directory holding
 * checkpoint-N/), over the counter. */
static void test_trainer_state_step(void **state)
{
    struct watch_result *r;
    char tmp[1024], p[1024];
    (void)state;

    sub(".stage");
    sub(".stage/checkpoint-600");
    sub(".stage/checkpoint-700");
    put(".stage/checkpoint-600/" MARKER, "{\"global_step\": 600}");
    put(".stage/checkpoint-700/" MARKER, "{\"log_history\": [], \"global_step\": 700}");
    put(".stage/checkpoint-700/model.bin", "w");
    snprintf(tmp, sizeof tmp, "%s/.stage", g_dir);
    snprintf(p, sizeof p, "%s/output", g_dir);
    assert_int_equal(rename(tmp, p), 0);
    pump();
    r = next_commit();
    assert_int_equal(r->res.step, 700);
    assert_string_equal(r->step_from, "state");
    watch_result_free(r);
}

/* Nothing gives a step: the counter, above every step seen, and said so. */
static void test_counter_step(void **state)
{
    struct watch_result *r;
    (void)state;

    watch_note_step(g_w, 146);
    put_renamed("state.bin", "x");
    pump();
    r = next_commit();
    assert_int_equal(r->res.step, 147);
    assert_string_equal(r->step_from, "counter");
    watch_result_free(r);
}

/* The same files of another step: numbers equal to the entry's own step
 * are one name (DeepSpeed's global_stepN/ inside checkpoint-N/). */
static void test_shape_names(void **state)
{
    struct entry *a, *b;
    (void)state;

    sub("checkpoint-100");
    sub("checkpoint-100/global_step100");
    put("checkpoint-100/global_step100/mp_rank_00.pt", "a");
    put("checkpoint-100/" MARKER, "{}");
    sub("checkpoint-200");
    sub("checkpoint-200/global_step200");
    put("checkpoint-200/global_step200/mp_rank_00.pt", "a");
    put("checkpoint-200/" MARKER, "{}");
    pump();
    a = find_entry(g_w, "checkpoint-100");
    b = find_entry(g_w, "checkpoint-200");
    assert_non_null(a);
    assert_non_null(b);
    assert_true(a->sig.shape == b->sig.shape);
    put("checkpoint-200/global_step200/mp_rank_01.pt", "b");
    pump();
    assert_true(a->sig.shape != b->sig.shape);
}

/* ---- the control socket's `file` message ------------------------------------ */

struct got {
    int n, has_step;
    uint64_t step;
    char path[256];
};

static void on_ctl(void *user, const struct ctl_event *ev)
{
    struct got *g = user;
    if (ev->type != CTL_FILE)
        return;
    g->n++;
    g->has_step = ev->has_step;
    g->step = ev->step;
    snprintf(g->path, sizeof g->path, "%s", ev->path);
}

static void send_and_read(struct ctl *c, int fd, const char *line, struct got *g)
{
    int64_t end = ckpt__mono_ms() + 10000;
    int before = g->n;
    assert_int_equal(send(fd, line, strlen(line), 0), (ssize_t)strlen(line));
    while (g->n == before && ckpt__mono_ms() < end) {
        struct pollfd pf[CTL_MAX_CLIENTS + 1];
        int n = 0;
        ctl_pollfds(c, pf, &n, CTL_MAX_CLIENTS + 1);
        assert_true(poll(pf, (nfds_t)n, 1000) >= 0);
        ctl_handle(c, pf, n, on_ctl, g);
    }
}

static void test_ctl_file_step(void **state)
{
    struct ctl *c;
    char path[300], line[512];
    struct sockaddr_un sa;
    struct got g = { 0 };
    int fd;
    (void)state;

    assert_int_equal(ctl_open(&c, path, sizeof path), 0);
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    assert_true(strlen(path) < sizeof sa.sun_path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    /* a process of our own is no descendant: it presents the key */
    snprintf(line, sizeof line,
             "{\"type\":\"file\",\"path\":\"/a\",\"event\":\"renamed\","
             "\"step\":146,\"key\":\"%s\"}\n",
             ctl_key(c));
    send_and_read(c, fd, line, &g);
    assert_int_equal(g.n, 1);
    assert_true(g.has_step);
    assert_int_equal(g.step, 146);
    assert_string_equal(g.path, "/a");
    send_and_read(c, fd, "{\"type\":\"file\",\"path\":\"/b\",\"event\":\"closed\"}\n", &g);
    assert_int_equal(g.n, 2);
    assert_false(g.has_step); /* the shim's: no step */
    send_and_read(c, fd,
                  "{\"type\":\"file\",\"path\":\"/c\",\"event\":\"renamed\","
                  "\"step\":0}\n",
                  &g);
    assert_true(g.has_step); /* step 0 is a step */
    assert_int_equal(g.step, 0);
    send_and_read(c, fd, "{\"type\":\"file\",\"path\":\"/d\",\"step\":-3}\n", &g);
    assert_false(g.has_step);
    send_and_read(c, fd, "{\"type\":\"file\",\"path\":\"/e\",\"step\":1.5}\n", &g);
    assert_false(g.has_step);
    send_and_read(c, fd, "{\"type\":\"file\",\"path\":\"/f\",\"step\":\"12\"}\n", &g);
    assert_false(g.has_step);
    assert_int_equal(g.n, 6);
    close(fd);
    ctl_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fast_writer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_complete_before_the_stop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_first_checkpoint_at_the_stop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_changed_after_the_stop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_saved_step, setup, teardown),
        cmocka_unit_test_setup_teardown(test_saved_before_the_event, setup, teardown),
        cmocka_unit_test_setup_teardown(test_saved_while_a_rank_writes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trainer_state_step, setup, teardown),
        cmocka_unit_test_setup_teardown(test_counter_step, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shape_names, setup, teardown),
        cmocka_unit_test(test_ctl_file_step),
    };
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
