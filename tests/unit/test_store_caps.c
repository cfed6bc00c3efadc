/*
 * test_store_caps.c -- what each backend declares when it opens
 * (struct ckpt_store_caps), and the retry budget of the store
 * configuration. Opening an object store sends no request (unless asked to
 * create a container), so closed loopback ports serve as endpoints.
 */
#include "test_util.h"
#include "ckpt_store.h"
#if defined(CKPT_WITH_S3) || defined(CKPT_WITH_AZURE)
#include "objstore.h"
#endif

#define OBJECT_CAPS (CKPT_STORE_RANGES | CKPT_STORE_PACKS | CKPT_STORE_LATENCY_BOUND)

static struct ckpt_store *open_ok(const char *url, const struct ckpt_store_config *cfg)
{
    struct ckpt_store *st = NULL;
    char err[CKPT_ERR_MAX] = "";
    ckpt_status s = ckpt_store_open(url, cfg, &st, err);
    if (s != CKPT_OK)
        fail_msg("open %s: %s (%s)", url, ckpt_strerror(s), err);
    return st;
}

static void test_file(void **state)
{
    char *dir = test_tmpdir(), url[600];
    struct ckpt_store *st;

    (void)state;
    snprintf(url, sizeof url, "file://%s", dir);
    st = open_ok(url, NULL);
    /* conditions hold; a local disk is CPU-bound and gains nothing from
     * packs */
    assert_int_equal(st->caps.flags, CKPT_STORE_CONDITIONAL | CKPT_STORE_RANGES);
    assert_true(ckpt_store_can(st, CKPT_STORE_CONDITIONAL | CKPT_STORE_RANGES));
    assert_false(ckpt_store_can(st, CKPT_STORE_PACKS));
    assert_false(ckpt_store_can(st, CKPT_STORE_LATENCY_BOUND));
    assert_int_equal(st->caps.chunk_bytes, 4u << 20);
    ckpt_store_close(st);
    test_rmrf(dir);
    free(dir);
}

#ifdef CKPT_WITH_S3
static void s3_env(void)
{
    setenv("AWS_ACCESS_KEY_ID", "AKTEST", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "SKTEST", 1);
    setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent", 1);
    setenv("AWS_CONFIG_FILE", "/nonexistent", 1);
    setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
    unsetenv("CKPT_S3_CONDITIONAL");
}

static void test_s3(void **state)
{
    struct ckpt_store *st;

    (void)state;
    s3_env();
    /* a loopback peer (s3rver ignores conditions): not enforced ... */
    setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9", 1);
    st = open_ok("s3://bucket/p", NULL);
    assert_int_equal(st->caps.flags, OBJECT_CAPS);
    assert_int_equal(st->caps.chunk_bytes, 8u << 20);
    assert_string_equal(st->ops->scheme, "s3");
    assert_string_equal(st->cred_source, "environment (AWS_ACCESS_KEY_ID)");
    ckpt_store_close(st);
    /* ... unless the user says it is */
    setenv("CKPT_S3_CONDITIONAL", "1", 1);
    st = open_ok("s3://bucket/p", NULL);
    assert_int_equal(st->caps.flags, OBJECT_CAPS | CKPT_STORE_CONDITIONAL);
    ckpt_store_close(st);
    unsetenv("CKPT_S3_CONDITIONAL");
    /* a real service enforces them */
    setenv("AWS_ENDPOINT_URL", "https://s3.example.com", 1);
    st = open_ok("s3://bucket/p", NULL);
    assert_int_equal(st->caps.flags, OBJECT_CAPS | CKPT_STORE_CONDITIONAL);
    ckpt_store_close(st);
    setenv("CKPT_S3_CONDITIONAL", "0", 1);
    st = open_ok("s3://bucket/p", NULL);
    assert_false(ckpt_store_can(st, CKPT_STORE_CONDITIONAL));
    ckpt_store_close(st);
    unsetenv("CKPT_S3_CONDITIONAL");
    unsetenv("AWS_ENDPOINT_URL");

    setenv("GOOGLE_ACCESS_KEY_ID", "GOOG", 1);
    setenv("GOOGLE_SECRET_ACCESS_KEY", "GSK", 1);
    setenv("CKPT_GS_ENDPOINT", "https://storage.example.com", 1);
    st = open_ok("gs://bucket", NULL);
    assert_string_equal(st->ops->scheme, "gs");
    assert_int_equal(st->caps.flags, OBJECT_CAPS | CKPT_STORE_CONDITIONAL);
    ckpt_store_close(st);
    unsetenv("CKPT_GS_ENDPOINT");
}

/* retry_budget_ms: the configuration first, then CKPT_RETRY_BUDGET_MS, then
 * two minutes. */
static void test_retry_budget(void **state)
{
    struct ckpt_store_config cfg;
    struct ckpt_store *st;

    (void)state;
    s3_env();
    setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9", 1);
    unsetenv("CKPT_RETRY_BUDGET_MS");
    memset(&cfg, 0, sizeof cfg);
    st = open_ok("s3://bucket", &cfg);
    assert_int_equal(((struct ckpt_obj *)st)->pol.budget_ms, 120000);
    ckpt_store_close(st);
    setenv("CKPT_RETRY_BUDGET_MS", "4000", 1);
    st = open_ok("s3://bucket", &cfg);
    assert_int_equal(((struct ckpt_obj *)st)->pol.budget_ms, 4000);
    ckpt_store_close(st);
    cfg.retry_budget_ms = 2500;
    st = open_ok("s3://bucket", &cfg);
    assert_int_equal(((struct ckpt_obj *)st)->pol.budget_ms, 2500);
    ckpt_store_close(st);
    unsetenv("CKPT_RETRY_BUDGET_MS");
    unsetenv("AWS_ENDPOINT_URL");
}
#endif

#ifdef CKPT_WITH_AZURE
static void test_azure(void **state)
{
    struct ckpt_store *st;

    (void)state;
    unsetenv("CKPT_AZ_CREATE_CONTAINER");
    setenv("AZURE_STORAGE_CONNECTION_STRING",
           "AccountName=devstoreaccount1;AccountKey=a2V5;"
           "BlobEndpoint=http://127.0.0.1:9/devstoreaccount1", 1);
    st = open_ok("az://container/prefix", NULL);
    /* Azure (and Azurite) enforce conditions, loopback or not */
    assert_int_equal(st->caps.flags, OBJECT_CAPS | CKPT_STORE_CONDITIONAL);
    assert_int_equal(st->caps.chunk_bytes, 8u << 20);
    assert_string_equal(st->ops->scheme, "az");
    assert_string_equal(st->endpoint, "http://127.0.0.1:9/devstoreaccount1");
    ckpt_store_close(st);
    unsetenv("AZURE_STORAGE_CONNECTION_STRING");
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file),
#ifdef CKPT_WITH_S3
        cmocka_unit_test(test_s3),
        cmocka_unit_test(test_retry_budget),
#endif
#ifdef CKPT_WITH_AZURE
        cmocka_unit_test(test_azure),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
