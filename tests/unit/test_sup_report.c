/* Unit tests of what `ckptrun run` says so that nothing is lost in silence
 * (ckptrun/sup/sup_report.h):
 *   - watch_uncommitted() (watch.h), the watcher's query behind the last
 *     attempt, on a real watcher whose store is the fault seam
 *     (tests/unit/fault_store.h): a commit refused, seen as uncommitted,
 *     retried once the store heals; superseded older steps do not count;
 *   - history_summarize() (history.h): failed commits, the last error, the
 *     newest session's step that is not in the store, ends in state
 *     uncommitted, and event records of earlier builds;
 *   - the RUN record's added fields (record.h) and a RUN of an earlier build;
 *   - resume_command() (resume_cmd.h): every word comes back through
 *     /bin/sh exactly, on one line, newlines included.
 * No test waits on the wall clock but for the watcher's own result pipe. */
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "test_util.h"
#include "core/ctx.h"
#include "fault_store.h"
#include "record/history.h"
#include "opts.h"
#include "record/record.h"
#include "sup/resume_cmd.h"
#include "base/runlog.h"
#include "watch/watch.h"

static char *g_dir;

static int setup(void **s)
{
    (void)s;
    g_dir = test_tmpdir();
    log_setup(0, -1); /* the watcher's warnings only */
    return 0;
}

static int teardown(void **s)
{
    (void)s;
    test_rmrf(g_dir);
    free(g_dir);
    return 0;
}

/* ---- the watcher's query, through the fault seam ------------------------------ */

static void put_entry(const char *dir, const char *name, int seed)
{
    char tmp[1024], path[1100], fin[1100];
    unsigned char buf[4096];
    FILE *f;

    snprintf(tmp, sizeof tmp, "%s/tmp-%s", dir, name);
    assert_int_equal(mkdir(tmp, 0700), 0);
    snprintf(path, sizeof path, "%s/model.bin", tmp);
    memset(buf, seed, sizeof buf);
    assert_non_null(f = fopen(path, "wb"));
    assert_int_equal(fwrite(buf, 1, sizeof buf, f), sizeof buf);
    fclose(f);
    snprintf(fin, sizeof fin, "%s/%s", dir, name);
    assert_int_equal(rename(tmp, fin), 0); /* complete: renamed into place */
}

/* Tick the watcher until one commit result comes back. @return its status. */
static ckpt_status one_result(struct watch *w)
{
    int64_t end = ckpt__mono_ms() + 30000;
    ckpt_status st = CKPT_E_INTERNAL;

    while (ckpt__mono_ms() < end) {
        struct pollfd pf[2] = { { watch_inotify_fd(w), POLLIN, 0 },
                                { watch_result_fd(w), POLLIN, 0 } };
        int64_t due = watch_tick(w);
        int wait = due < 0 ? 200 : (int)(due - ckpt__mono_ms());
        struct watch_result *r;
        if (poll(pf, 2, wait < 1 ? 1 : wait > 200 ? 200 : wait) < 0)
            break;
        if (pf[0].revents)
            watch_handle_inotify(w);
        if (pf[1].revents && (r = watch_take_result(w)) != NULL) {
            st = r->res.st;
            watch_result_free(r);
            return st;
        }
    }
    fail_msg("no commit result in 30 s");
    return st;
}

struct seen {
    int n;
    uint64_t step;
    char name[64];
    uint64_t files, bytes;
};

static void seen_cb(void *user, const char *name, uint64_t step, const struct commit_print *p)
{
    struct seen *s = user;
    s->n++;
    s->step = step;
    snprintf(s->name, sizeof s->name, "%s", name);
    s->files = p->files;
    s->bytes = p->bytes;
}

static struct ckpt_ctx *open_run(const char *run)
{
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *ctx = NULL;
    char url[1100];

    snprintf(url, sizeof url, "file://%s/store", g_dir);
    cfg.store = url;
    cfg.run = run;
    cfg.codec = CKPT_CODEC_NONE;
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_OK);
    ckpt__run_wait_loaded(&ctx->rs); /* the load reads ->store: wrap after it */
    return ctx;
}

static void test_uncommitted_after_a_refused_commit_and_the_retry(void **state)
{
    char dir[1100];
    struct ckpt_ctx *ctx;
    struct fault_store *fs;
    struct watch *w;
    struct seen s = { 0 };

    (void)state;
    snprintf(dir, sizeof dir, "%s/ck1", g_dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    ctx = open_run("fail");
    fs = fault_wrap(&ctx->store);
    /* every chunk write refused, as a full store does */
    fault_add(fs, &(struct fault_rule){ .op = FAULT_PUT,
                                        .key_has = "/chunks/",
                                        .count = ~0u,
                                        .act = FAULT_FAIL,
                                        .status = CKPT_E_NOSPACE });
    assert_int_equal(watch_open(&w, dir, NULL, 10000, ctx, NULL), 0);
    watch_set_pgid(w, getpgrp());
    assert_int_equal(watch_uncommitted(w, 0, NULL, NULL), 0); /* nothing yet */

    put_entry(dir, "checkpoint-10", 1);
    assert_int_equal(one_result(w), CKPT_E_NOSPACE);
    assert_int_equal(watch_uncommitted(w, 0, seen_cb, &s), 1);
    assert_string_equal(s.name, "checkpoint-10");
    assert_int_equal(s.step, 10);
    assert_int_equal(s.files, 1);
    assert_int_equal(s.bytes, 4096);
    /* a failed version is not tried again by itself: the child ends */
    watch_child_exit(w, 0);
    assert_int_equal(watch_busy(w), 0);
    assert_int_equal(watch_uncommitted(w, 0, NULL, NULL), 1);

    /* the store heals; the last attempt commits it */
    fault_clear(fs);
    assert_int_equal(watch_uncommitted(w, 1, NULL, NULL), 1);
    assert_true(watch_dirty(w));
    assert_int_equal(one_result(w), CKPT_OK);
    assert_int_equal(watch_uncommitted(w, 0, NULL, NULL), 0);
    watch_close(w, 1);
}

static void test_a_newer_commit_supersedes_a_failed_older_one(void **state)
{
    char dir[1100];
    struct ckpt_ctx *ctx;
    struct fault_store *fs;
    struct watch *w;
    struct seen s = { 0 };
    int rule;

    (void)state;
    snprintf(dir, sizeof dir, "%s/ck2", g_dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    ctx = open_run("supersede");
    fs = fault_wrap(&ctx->store);
    rule = fault_add(fs, &(struct fault_rule){ .op = FAULT_PUT,
                                               .key_has = "/chunks/",
                                               .count = ~0u,
                                               .act = FAULT_FAIL,
                                               .status = CKPT_E_IO });
    assert_int_equal(watch_open(&w, dir, NULL, 10000, ctx, NULL), 0);
    watch_set_pgid(w, getpgrp());
    put_entry(dir, "checkpoint-10", 1);
    assert_int_equal(one_result(w), CKPT_E_IO);
    assert_true(fault_hits(fs, rule) >= 1);
    fault_clear(fs);
    put_entry(dir, "checkpoint-20", 2);
    assert_int_equal(one_result(w), CKPT_OK);
    /* step 10 never made it, but the store holds the newer step 20 */
    assert_int_equal(watch_uncommitted(w, 0, seen_cb, &s), 0);
    assert_int_equal(s.n, 0);
    watch_close(w, 1);
}

/* ---- the event history ---------------------------------------------------------- */

static cJSON *ev(const char *json)
{
    cJSON *j = cJSON_Parse(json);
    assert_non_null(j);
    return j;
}

static void test_history_counts_failed_commits(void **state)
{
    cJSON *a = cJSON_CreateArray();
    struct history h;

    (void)state;
    /* a session of an earlier build: no failure fields anywhere */
    cJSON_AddItemToArray(a, ev("{\"type\":\"start\",\"time_ms\":1000,\"host\":\"a\",\"pid\":1}"));
    cJSON_AddItemToArray(a, ev("{\"type\":\"commit-failed\",\"time_ms\":1500,\"host\":\"a\","
                               "\"pid\":1,\"step\":90,\"error\":\"old\",\"detail\":\"d\"}"));
    cJSON_AddItemToArray(a, ev("{\"type\":\"commit\",\"time_ms\":2000,\"host\":\"a\",\"pid\":1,"
                               "\"step\":10,\"bytes\":100,\"stored\":50,\"seconds\":1}"));
    cJSON_AddItemToArray(a, ev("{\"type\":\"exit\",\"time_ms\":3000,\"host\":\"a\",\"pid\":1,"
                               "\"state\":\"completed\",\"code\":0}"));
    history_summarize(a, 0, &h);
    assert_int_equal(h.commit_failures, 1);
    assert_int_equal((int)h.local_step, 90);
    assert_int_equal(h.uncommitted_ends, 0);
    assert_int_equal(h.lost_ms, 0);

    /* a later session whose store filled up: its own failures and end */
    cJSON_AddItemToArray(a, ev("{\"type\":\"start\",\"time_ms\":5000,\"host\":\"b\",\"pid\":2}"));
    cJSON_AddItemToArray(a, ev("{\"type\":\"commit\",\"time_ms\":6000,\"host\":\"b\",\"pid\":2,"
                               "\"step\":20,\"bytes\":100,\"stored\":50,\"seconds\":1}"));
    cJSON_AddItemToArray(a, ev("{\"type\":\"commit-failed\",\"time_ms\":7000,\"host\":\"b\","
                               "\"pid\":2,\"step\":30,\"entry\":\"checkpoint-30\","
                               "\"error\":\"no space left\",\"detail\":\"ENOSPC\"}"));
    cJSON_AddItemToArray(a, ev("{\"type\":\"commit-failed\",\"time_ms\":8000,\"host\":\"b\","
                               "\"pid\":2,\"step\":40,\"entry\":\"checkpoint-40\","
                               "\"error\":\"no space left\",\"detail\":\"ENOSPC 2\","
                               "\"in_row\":2}"));
    cJSON_AddItemToArray(a, ev("{\"type\":\"exit\",\"time_ms\":9000,\"host\":\"b\",\"pid\":2,"
                               "\"state\":\"uncommitted\",\"code\":74}"));
    history_summarize(a, 0, &h);
    assert_int_equal(h.commit_failures, 3);
    assert_int_equal(h.have_error, 1);
    assert_int_equal((int)h.error_step, 40);
    assert_int_equal(h.error_ms, 8000);
    assert_string_equal(h.error, "no space left");
    assert_string_equal(h.detail, "ENOSPC 2");
    assert_string_equal(h.error_entry, "checkpoint-40");
    /* step 90 was the first session's: only the newest session's count */
    assert_int_equal((int)h.local_step, 40);
    assert_string_equal(h.local_host, "b");
    assert_int_equal(h.uncommitted_ends, 1);
    assert_int_equal(h.failures, 0);
    assert_int_equal(h.lost_ms, 3000); /* from the commit at 6000 to the end at 9000 */
    assert_int_equal(h.sessions, 2);
    assert_int_equal(h.crashes, 0);
    cJSON_Delete(a);
}

/* ---- the RUN record --------------------------------------------------------------- */

static void test_run_record_fields_and_an_earlier_run(void **state)
{
    struct record *rec;
    char url[1100], err[CKPT_ERR_MAX] = "", path[1200];
    cJSON *extra = cJSON_Parse("{\"commit_failures\":8,\"state\":\"forged\","
                               "\"uncommitted\":{\"step\":80,\"entries\":[{\"name\":\"c-80\","
                               "\"files\":1,\"bytes\":10}]}}");
    cJSON *run = NULL;
    FILE *f;

    (void)state;
    snprintf(url, sizeof url, "file://%s/rec", g_dir);
    assert_int_equal(record_open(url, "r", &rec, err), CKPT_OK);
    assert_int_equal(record_set_state(rec, "uncommitted", 10, 0, 1, extra), CKPT_OK);
    assert_int_equal(record_read_run(rec, &run), CKPT_OK);
    /* the fixed fields win over extra's */
    assert_string_equal(cJSON_GetObjectItem(run, "state")->valuestring, "uncommitted");
    assert_int_equal(cJSON_GetObjectItem(run, "format")->valueint, 1);
    assert_int_equal(cJSON_GetObjectItem(run, "commit_failures")->valueint, 8);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(run, "uncommitted"), "step")->valueint,
                     80);
    cJSON_Delete(run);
    /* a RUN written by an earlier build reads the same, without them */
    snprintf(path, sizeof path, "%s/rec/r/RUN", g_dir);
    assert_non_null(f = fopen(path, "w"));
    fputs("{\"format\":1,\"state\":\"completed\",\"updated_ms\":5,\"started_ms\":1,\"host\":"
          "\"h\",\"pid\":3,\"epoch\":1,\"last_step\":4,\"preemptions\":0}",
          f);
    fclose(f);
    assert_int_equal(record_read_run(rec, &run), CKPT_OK);
    assert_null(cJSON_GetObjectItem(run, "commit_failures"));
    assert_string_equal(cJSON_GetObjectItem(run, "state")->valuestring, "completed");
    cJSON_Delete(run);
    cJSON_Delete(extra);
    record_close(rec);
}

/* ---- the resume command ------------------------------------------------------------ */

/* Run `line` (a resume command whose ckptrun is replaced by printf) in
 * /bin/sh and collect the words it passes, one per NUL. */
static size_t run_words(const char *line, char *out, size_t n)
{
    int pfd[2];
    pid_t pid;
    size_t got = 0;
    ssize_t r;
    int st;

    assert_int_equal(pipe(pfd), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(pfd[1], 1);
        close(pfd[0]);
        execl("/bin/sh", "sh", "-c", line, (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    while ((r = read(pfd[0], out + got, n - got)) > 0)
        got += (size_t)r;
    close(pfd[0]);
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    return got;
}

static void test_resume_command_words_come_back_exactly(void **state)
{
    char *args[] = { "python3", "-c", "import sys\nprint('it''s', sys.argv)\n\tx = \"$HOME\" \\ `",
                     "a b",     "",   "*",
                     "%s%b",    "ü",  NULL };
    struct opts o;
    char *cmd, out[4096], want[4096], buf[64], self[1100];
    size_t n = 0, got;
    FILE *f;

    (void)state;
    /* `self` stands for ckptrun: a script printing every word it gets */
    snprintf(self, sizeof self, "%s/words.sh", g_dir);
    assert_non_null(f = fopen(self, "w"));
    fputs("printf '%s\\0' \"$@\"\n", f);
    fclose(f);
    assert_int_equal(chmod(self, 0700), 0);
    memset(&o, 0, sizeof o);
    o.store = "file:///data/my store";
    o.run = "job";
    o.keep = 3;
    o.settle_ms = 10000;
    o.grace_ms = 30000;
    o.lead_ms = 60000;
    o.interval_ms = 90 * 60000;
    o.sig = SIGUSR1;
    o.on_preempt = "shutdown -h now";
    o.args = args;
    o.nargs = 8;
    cmd = resume_command(&o, self, "/work dir", "/work dir/ck", 1);
    assert_non_null(cmd);
    assert_null(strchr(cmd, '\n')); /* one line */
    assert_non_null(strstr(cmd, "cd '/work dir' && "));
    assert_non_null(strstr(cmd, " --interval 90m --signal SIGUSR1 "));
    assert_non_null(strstr(cmd, " --on-preempt 'shutdown -h now' --resume-stopped -- "));
    got = run_words(strstr(cmd, "&& ") + 3, out, sizeof out);
    {
        const char *words[] = { "recover",
                                "--store",
                                "file:///data/my store",
                                "--run",
                                "job",
                                "--dir",
                                "/work dir/ck",
                                "--interval",
                                "90m",
                                "--signal",
                                "SIGUSR1",
                                "--on-preempt",
                                "shutdown -h now",
                                "--resume-stopped",
                                "--" };
        for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
            memcpy(want + n, words[i], strlen(words[i]) + 1);
            n += strlen(words[i]) + 1;
        }
        for (int i = 0; i < o.nargs; i++) {
            memcpy(want + n, args[i], strlen(args[i]) + 1);
            n += strlen(args[i]) + 1;
        }
    }
    assert_int_equal(got, n);
    assert_memory_equal(out, want, n);
    free(cmd);
    /* durations that parse back to the same value */
    assert_string_equal(resume_duration(1500, buf, sizeof buf), "1500ms");
    assert_string_equal(resume_duration(90000, buf, sizeof buf), "90s");
    assert_string_equal(resume_duration(7200000, buf, sizeof buf), "2h");
    assert_string_equal(resume_duration(0, buf, sizeof buf), "0s");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uncommitted_after_a_refused_commit_and_the_retry),
        cmocka_unit_test(test_a_newer_commit_supersedes_a_failed_older_one),
        cmocka_unit_test(test_history_counts_failed_commits),
        cmocka_unit_test(test_run_record_fields_and_an_earlier_run),
        cmocka_unit_test(test_resume_command_words_come_back_exactly),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
