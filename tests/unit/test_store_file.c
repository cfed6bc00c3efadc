/* test_store_file.c -- the file:// backend against the store contract. */
#include <sys/stat.h>
#include <sys/wait.h>
#include "test_util.h"
#include "ckpt_store.h"

struct lst { int n; int has_a, has_b; };
static int count(void *u, const struct ckpt_obj_info *o)
{
    struct lst *l = u;
    l->n++;
    if (!strcmp(o->key, "run/x/a"))
        l->has_a = 1;
    if (!strcmp(o->key, "run/x/b") && o->size == 3 && o->mtime_ms > 0)
        l->has_b = 1;
    return 0;
}

static void test_basic(void **state)
{
    char *dir = test_tmpdir(), url[600], err[CKPT_ERR_MAX], etag[CKPT_ETAG_MAX], etag2[CKPT_ETAG_MAX];
    struct ckpt_store *st;
    void *buf;
    size_t len;
    uint64_t size;
    struct lst l = { 0 };
    struct stat sb;
    (void)state;
    snprintf(url, sizeof url, "file://%s/store", dir);
    assert_int_equal(ckpt_store_open(url, NULL, &st, err), CKPT_OK);
    assert_int_equal(ckpt_store_put(st, "run/x/a", "hello", 5, NULL, etag, err), CKPT_OK);
    assert_int_equal(ckpt_store_put(st, "run/x/b", "abc", 3, NULL, NULL, err), CKPT_OK);
    assert_int_equal(ckpt_store_get(st, "run/x/a", 100, &buf, &len, etag2, err), CKPT_OK);
    assert_int_equal(len, 5);
    assert_memory_equal(buf, "hello", 5);
    assert_string_equal(etag, etag2);
    free(buf);
    /* bounded reads */
    assert_int_equal(ckpt_store_get(st, "run/x/a", 4, &buf, &len, NULL, err), CKPT_E_CORRUPT);
    assert_int_equal(st->ops->head(st, "run/x/b", &size, NULL, err), CKPT_OK);
    assert_int_equal(size, 3);
    assert_int_equal(ckpt_store_get(st, "run/x/zz", 100, &buf, &len, NULL, err), CKPT_E_NOENT);
    assert_int_equal(st->ops->list(st, "run/x/", count, &l, err), CKPT_OK);
    assert_int_equal(l.n, 2);
    assert_true(l.has_a && l.has_b);
    /* owner-only permissions */
    char p[700];
    snprintf(p, sizeof p, "%s/store/run/x/a", dir);
    assert_int_equal(stat(p, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    snprintf(p, sizeof p, "%s/store/run/x", dir);
    assert_int_equal(stat(p, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0700);
    /* delete, including a missing key */
    const char *keys[] = { "run/x/a", "run/x/nope" };
    assert_int_equal(st->ops->del(st, keys, 2, err), CKPT_OK);
    assert_int_equal(ckpt_store_get(st, "run/x/a", 100, &buf, &len, NULL, err), CKPT_E_NOENT);
    /* invalid keys */
    assert_int_equal(ckpt_store_put(st, "../evil", "x", 1, NULL, NULL, err), CKPT_E_INVAL);
    assert_int_equal(ckpt_store_put(st, "/abs", "x", 1, NULL, NULL, err), CKPT_E_INVAL);
    assert_int_equal(st->ops->barrier(st, err), CKPT_OK);
    ckpt_store_close(st);
    test_rmrf(dir);
    free(dir);
}

static void test_conditional(void **state)
{
    char *dir = test_tmpdir(), url[600], err[CKPT_ERR_MAX], e1[CKPT_ETAG_MAX], e2[CKPT_ETAG_MAX];
    struct ckpt_store *st;
    struct ckpt_put_opts create = { CKPT_PUT_IF_NONE_MATCH, NULL, 0 };
    struct ckpt_put_opts match = { CKPT_PUT_IF_MATCH, NULL, 0 };
    (void)state;
    snprintf(url, sizeof url, "file://%s", dir);
    assert_int_equal(ckpt_store_open(url, NULL, &st, err), CKPT_OK);
    assert_int_equal(ckpt_store_can(st, CKPT_STORE_CONDITIONAL), 1);
    assert_int_equal(ckpt_store_put(st, "r/HEAD", "v1", 2, &create, e1, err), CKPT_OK);
    assert_int_equal(ckpt_store_put(st, "r/HEAD", "v2", 2, &create, NULL, err), CKPT_E_PRECONDITION);
    match.if_match = e1;
    assert_int_equal(ckpt_store_put(st, "r/HEAD", "v2", 2, &match, e2, err), CKPT_OK);
    /* the old etag no longer matches: a stale writer is refused */
    assert_int_equal(ckpt_store_put(st, "r/HEAD", "v3", 2, &match, NULL, err), CKPT_E_PRECONDITION);
    match.if_match = e2;
    assert_int_equal(ckpt_store_put(st, "r/missing", "v3", 2, &match, NULL, err), CKPT_E_NOENT);
    void *buf;
    size_t len;
    assert_int_equal(ckpt_store_get(st, "r/HEAD", 10, &buf, &len, NULL, err), CKPT_OK);
    assert_memory_equal(buf, "v2", 2);
    free(buf);
    ckpt_store_close(st);
    test_rmrf(dir);
    free(dir);
}

/* Many processes race If-None-Match on one key: exactly one wins. */
static void test_create_race(void **state)
{
    char *dir = test_tmpdir(), url[600], err[CKPT_ERR_MAX];
    int wins = 0;
    (void)state;
    snprintf(url, sizeof url, "file://%s", dir);
    for (int round = 0; round < 10; round++) {
        char key[64];
        pid_t pids[8];
        snprintf(key, sizeof key, "r/LEASE%d", round);
        for (int i = 0; i < 8; i++) {
            pids[i] = fork();
            if (pids[i] == 0) {
                struct ckpt_store *st;
                struct ckpt_put_opts create = { CKPT_PUT_IF_NONE_MATCH, NULL, 0 };
                if (ckpt_store_open(url, NULL, &st, err))
                    _exit(2);
                _exit(ckpt_store_put(st, key, "me", 2, &create, NULL, err) == CKPT_OK ? 0 : 1);
            }
        }
        int round_wins = 0;
        for (int i = 0; i < 8; i++) {
            int status;
            waitpid(pids[i], &status, 0);
            if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                round_wins++;
        }
        assert_int_equal(round_wins, 1);
        wins += round_wins;
    }
    assert_int_equal(wins, 10);
    test_rmrf(dir);
    free(dir);
}

static void test_bad_urls(void **state)
{
    struct ckpt_store *st;
    char err[CKPT_ERR_MAX];
    (void)state;
    assert_int_equal(ckpt_store_open("file://relative/path", NULL, &st, err), CKPT_E_CONFIG);
    assert_int_equal(ckpt_store_open("ftp://x/y", NULL, &st, err), CKPT_E_CONFIG);
    assert_non_null(strstr(err, "unknown store URL"));
    if (getuid() != 0) {
        assert_int_not_equal(ckpt_store_open("file:///proc/forbidden/x", NULL, &st, err), CKPT_OK);
    }
}

/* The scheme table: every row of CKPT_STORE_SCHEME_MAP, in order, and the
 * forms ckptrun validates and prints with it. */
static void test_schemes(void **state)
{
    static const char *const rows[][2] = {
#define ROW_(name, form, backend, what) { #name, form },
        CKPT_STORE_SCHEME_MAP(ROW_)
#undef ROW_
    };
    const struct ckpt_store_scheme *s;
    char forms[256], err[CKPT_ERR_MAX];
    struct ckpt_store *st;
    size_t i, n = sizeof rows / sizeof rows[0];
    (void)state;
    for (i = 0; (s = ckpt_store_scheme_at(i)); i++) {
        assert_true(i < n);
        assert_string_equal(s->name, rows[i][0]);
        assert_string_equal(s->form, rows[i][1]);
        assert_non_null(s->description);
        /* each form names its own scheme and is itself a valid URL */
        assert_ptr_equal(ckpt_store_scheme_known(s->form), s);
        assert_non_null(strstr(ckpt_store_url_forms(forms, sizeof forms), s->form));
    }
    assert_int_equal(i, n);
    assert_true(n >= 4);
    assert_string_equal(ckpt_store_url_forms(forms, sizeof forms),
                        "file:///abs/path, s3://bucket/prefix, gs://bucket/prefix or "
                        "az://container/prefix");
    /* the file backend is always built and reads no S3 settings; s3 and gs
     * share them */
    assert_true(ckpt_store_scheme_known("file:///x")->flags & CKPT_SCHEME_BUILT);
    assert_false(ckpt_store_scheme_known("file:///x")->flags & CKPT_SCHEME_S3_SETTINGS);
    assert_true(ckpt_store_scheme_known("s3://b/p")->flags & CKPT_SCHEME_S3_SETTINGS);
    assert_true(ckpt_store_scheme_known("gs://b")->flags & CKPT_SCHEME_S3_SETTINGS);
    assert_false(ckpt_store_scheme_known("az://c/p")->flags & CKPT_SCHEME_S3_SETTINGS);
    assert_string_equal(ckpt_store_scheme_known("az://c/p")->name, "az");
    /* the form alone: what ckptrun refuses before contacting anything */
    assert_null(ckpt_store_scheme_known(NULL));
    assert_null(ckpt_store_scheme_known(""));
    assert_null(ckpt_store_scheme_known("file://relative"));
    assert_null(ckpt_store_scheme_known("file://"));
    assert_null(ckpt_store_scheme_known("s3://"));
    assert_null(ckpt_store_scheme_known("s3:///bucket"));
    assert_null(ckpt_store_scheme_known("s3:/bucket"));
    assert_null(ckpt_store_scheme_known("S3://bucket"));
    assert_null(ckpt_store_scheme_known("s3x://bucket"));
    assert_null(ckpt_store_scheme_known("ftp://host/x"));
    assert_null(ckpt_store_scheme_known("/abs/path"));
    /* the open's own message lists the same forms */
    assert_int_equal(ckpt_store_open("nope://x", NULL, &st, err), CKPT_E_CONFIG);
    assert_non_null(strstr(err, forms));
    /* truncation keeps a terminated string */
    assert_string_equal(ckpt_store_url_forms(forms, 8), "file://");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_conditional),
        cmocka_unit_test(test_create_race),
        cmocka_unit_test(test_bad_urls),
        cmocka_unit_test(test_schemes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
