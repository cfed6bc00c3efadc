/*
 * test_creds.c -- uploaders/creds_aws.c and creds_azure.c: the AWS profile
 * files as the AWS CLI reads them, the order of the credential chain, the
 * region and endpoint, AWS times; Azure connection strings and variables.
 * Files live in a private directory; the environment is set per test.
 */
#include "test_util.h"
#include "creds_aws.h"
#include "creds_azure.h"

static char *g_dir;
static char g_cred[600], g_conf[600];

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void clear_env(void)
{
    static const char *const vars[] = {
        "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
        "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3",
        "GOOGLE_ACCESS_KEY_ID", "GOOGLE_SECRET_ACCESS_KEY", "AZURE_STORAGE_CONNECTION_STRING",
        "AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN",
    };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    setenv("AWS_SHARED_CREDENTIALS_FILE", g_cred, 1);
    setenv("AWS_CONFIG_FILE", g_conf, 1);
}

static int setup(void **state)
{
    (void)state;
    g_dir = test_tmpdir();
    snprintf(g_cred, sizeof g_cred, "%s/credentials", g_dir);
    snprintf(g_conf, sizeof g_conf, "%s/config", g_dir);
    write_file(g_cred,
               "# comment\n"
               "[default]\n"
               "aws_access_key_id = AKDEFAULT\n"
               "aws_secret_access_key = SKDEFAULT\n"
               "\n"
               "[work]\n"
               "aws_access_key_id=AKWORK\n"
               "aws_secret_access_key = SK/WORK+x=\n"
               "aws_session_token = TOKEN\n"
               "aws_access_key_id = SECOND\n");
    write_file(g_conf,
               "[default]\n"
               "region = eu-west-1\n"
               "[profile work]\n"
               "region = ap-south-1\n"
               "endpoint_url = https://any.example.com\n"
               "s3 =\n"
               "    addressing_style = path\n"
               "    endpoint_url = http://127.0.0.1:9000\n"
               "; comment\n");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_rmrf(g_dir);
    free(g_dir);
    return 0;
}

static void test_profile_files(void **state)
{
    struct ckpt_aws_profile p;

    (void)state;
    clear_env();
    setenv("AWS_PROFILE", "work", 1);
    memset(&p, 0, sizeof p);
    ckpt__aws_profile_load(&p);
    assert_string_equal(p.name, "work");
    assert_string_equal(p.ak, "AKWORK");        /* the first value wins */
    assert_string_equal(p.sk, "SK/WORK+x=");
    assert_string_equal(p.token, "TOKEN");
    assert_string_equal(p.ak_file, g_cred);
    assert_string_equal(p.region, "ap-south-1"); /* "[profile work]" in config */
    assert_string_equal(p.endpoint, "https://any.example.com");
    assert_string_equal(p.s3_endpoint, "http://127.0.0.1:9000");
    assert_int_equal(p.path_style, 1);
    ckpt__aws_profile_free(&p);

    unsetenv("AWS_PROFILE");                      /* "default" in both files */
    ckpt__aws_profile_load(&p);
    assert_string_equal(p.name, "default");
    assert_string_equal(p.ak, "AKDEFAULT");
    assert_string_equal(p.region, "eu-west-1");
    assert_null(p.token);
    assert_int_equal(p.path_style, 0);
    ckpt__aws_profile_free(&p);

    /* a missing file is no error */
    ckpt__aws_profile_read("/nonexistent/credentials", "default", &p);
    assert_null(p.ak);
}

static void test_chain_order(void **state)
{
    struct ckpt_aws_profile p;
    struct ckpt_aws_keys k;
    char src[256];

    (void)state;
    clear_env();
    memset(&p, 0, sizeof p);
    memset(&k, 0, sizeof k);
    /* the profile when nothing is in the environment: its keys move */
    ckpt__aws_profile_load(&p);
    assert_int_equal(ckpt__aws_keys_static(0, &p, &k, src, sizeof src), 1);
    assert_string_equal(k.ak, "AKDEFAULT");
    assert_null(p.ak);
    assert_non_null(strstr(src, "profile 'default' in "));
    assert_non_null(strstr(src, g_cred));
    assert_int_equal(k.expiry, 0);
    ckpt__aws_keys_free(&k);
    ckpt__aws_profile_free(&p);

    /* the environment before the profile, with its session token */
    setenv("AWS_ACCESS_KEY_ID", "AKENV", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "SKENV", 1);
    setenv("AWS_SESSION_TOKEN", "TOKENV", 1);
    ckpt__aws_profile_load(&p);
    assert_int_equal(ckpt__aws_keys_static(0, &p, &k, src, sizeof src), 1);
    assert_string_equal(k.ak, "AKENV");
    assert_string_equal(k.token, "TOKENV");
    assert_string_equal(src, "environment (AWS_ACCESS_KEY_ID, AWS_SESSION_TOKEN)");
    ckpt__aws_keys_free(&k);

    /* gs:// takes the GOOGLE_* pair first; s3:// never does */
    setenv("GOOGLE_ACCESS_KEY_ID", "GOOG", 1);
    setenv("GOOGLE_SECRET_ACCESS_KEY", "GSK", 1);
    assert_int_equal(ckpt__aws_keys_static(1, &p, &k, src, sizeof src), 1);
    assert_string_equal(k.ak, "GOOG");
    assert_null(k.token);
    assert_string_equal(src, "environment (GOOGLE_ACCESS_KEY_ID)");
    ckpt__aws_keys_free(&k);
    assert_int_equal(ckpt__aws_keys_static(0, &p, &k, src, sizeof src), 1);
    assert_string_equal(k.ak, "AKENV");
    ckpt__aws_keys_free(&k);
    ckpt__aws_profile_free(&p);

    /* nothing anywhere */
    clear_env();
    setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent", 1);
    ckpt__aws_profile_load(&p);
    assert_int_equal(ckpt__aws_keys_static(0, &p, &k, src, sizeof src), 0);
    assert_null(k.ak);
    ckpt__aws_profile_free(&p);
}

static void test_region_endpoint_time(void **state)
{
    struct ckpt_aws_profile p;

    (void)state;
    clear_env();
    setenv("AWS_PROFILE", "work", 1);
    memset(&p, 0, sizeof p);
    ckpt__aws_profile_load(&p);
    assert_string_equal(ckpt__aws_region(&p), "ap-south-1");
    setenv("AWS_DEFAULT_REGION", "us-west-2", 1);
    assert_string_equal(ckpt__aws_region(&p), "us-west-2");
    setenv("AWS_REGION", "eu-north-1", 1);
    assert_string_equal(ckpt__aws_region(&p), "eu-north-1");
    assert_string_equal(ckpt__aws_endpoint(&p), "http://127.0.0.1:9000");
    setenv("AWS_ENDPOINT_URL", "http://generic", 1);
    assert_string_equal(ckpt__aws_endpoint(&p), "http://generic");
    setenv("AWS_ENDPOINT_URL_S3", "http://s3-only", 1);
    assert_string_equal(ckpt__aws_endpoint(&p), "http://s3-only");
    ckpt__aws_profile_free(&p);
    clear_env();
    setenv("AWS_CONFIG_FILE", "/nonexistent", 1);
    ckpt__aws_profile_load(&p);
    assert_string_equal(ckpt__aws_region(&p), "us-east-1");
    assert_null(ckpt__aws_endpoint(&p));
    ckpt__aws_profile_free(&p);

    assert_int_equal(ckpt__aws_time("2024-05-01T12:00:00Z"), 1714564800);
    assert_int_equal(ckpt__aws_time("2024-05-01T12:00:00.000Z"), 1714564800);
    assert_int_equal(ckpt__aws_time("yesterday"), 0);
    assert_int_equal(ckpt__aws_time(NULL), 0);
}

static void test_azure_connection_string(void **state)
{
    const char *cs = "DefaultEndpointsProtocol=http; AccountName=devstoreaccount1;"
                     "AccountKey=a2V5a2V5==;BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;";
    struct ckpt_az_creds c;
    char err[512] = "";
    char *v;

    (void)state;
    v = ckpt__az_cs_get(cs, "accountname"); /* names are case-insensitive */
    assert_string_equal(v, "devstoreaccount1");
    free(v);
    v = ckpt__az_cs_get(cs, "AccountKey"); /* values keep their '=' */
    assert_string_equal(v, "a2V5a2V5==");
    free(v);
    assert_null(ckpt__az_cs_get(cs, "SharedAccessSignature"));

    clear_env();
    setenv("AZURE_STORAGE_CONNECTION_STRING", cs, 1);
    memset(&c, 0, sizeof c);
    assert_int_equal(ckpt__az_creds_load(&c, err), CKPT_OK);
    assert_string_equal(c.account, "devstoreaccount1");
    assert_string_equal(c.key_b64, "a2V5a2V5==");
    assert_null(c.sas);
    assert_string_equal(c.endpoint, "http://127.0.0.1:10000/devstoreaccount1");
    assert_string_equal(c.source, "connection string (AZURE_STORAGE_CONNECTION_STRING), "
                                  "account 'devstoreaccount1', shared key");
    assert_null(strstr(c.source, "a2V5"));
    ckpt__az_creds_free(&c);

    /* no BlobEndpoint: built from the protocol, account and suffix */
    setenv("AZURE_STORAGE_CONNECTION_STRING",
           "AccountName=acct;AccountKey=a2V5;EndpointSuffix=core.chinacloudapi.cn", 1);
    assert_int_equal(ckpt__az_creds_load(&c, err), CKPT_OK);
    assert_string_equal(c.endpoint, "https://acct.blob.core.chinacloudapi.cn");
    ckpt__az_creds_free(&c);

    /* a SAS-only connection string may omit the account */
    setenv("AZURE_STORAGE_CONNECTION_STRING",
           "BlobEndpoint=https://x.blob.core.windows.net;SharedAccessSignature=?sv=1&sig=2", 1);
    assert_int_equal(ckpt__az_creds_load(&c, err), CKPT_OK);
    assert_string_equal(c.account, "");
    assert_string_equal(c.sas, "sv=1&sig=2");
    ckpt__az_creds_free(&c);

    /* a key needs an account */
    setenv("AZURE_STORAGE_CONNECTION_STRING",
           "BlobEndpoint=https://x.blob.core.windows.net;AccountKey=a2V5", 1);
    assert_int_equal(ckpt__az_creds_load(&c, err), CKPT_E_CONFIG);
    ckpt__az_creds_free(&c);
}

static void test_azure_variables(void **state)
{
    struct ckpt_az_creds c;
    char err[512] = "";

    (void)state;
    clear_env();
    memset(&c, 0, sizeof c);
    assert_int_equal(ckpt__az_creds_load(&c, err), CKPT_E_AUTH);
    assert_non_null(strstr(err, "AZURE_STORAGE_CONNECTION_STRING"));
    ckpt__az_creds_free(&c);

    setenv("AZURE_STORAGE_ACCOUNT", "acct", 1);
    setenv("AZURE_STORAGE_SAS_TOKEN", "?sv=2021&sig=abc", 1);
    assert_int_equal(ckpt__az_creds_load(&c, err), CKPT_OK);
    assert_string_equal(c.sas, "sv=2021&sig=abc");
    assert_null(c.key_b64);
    assert_string_equal(c.endpoint, "https://acct.blob.core.windows.net");
    assert_string_equal(c.source, "environment (AZURE_STORAGE_ACCOUNT, "
                                  "AZURE_STORAGE_SAS_TOKEN), account 'acct', SAS token");
    ckpt__az_creds_free(&c);

    /* both a key and a SAS: the key signs */
    setenv("AZURE_STORAGE_KEY", "a2V5", 1);
    assert_int_equal(ckpt__az_creds_load(&c, err), CKPT_OK);
    assert_string_equal(c.key_b64, "a2V5");
    assert_null(c.sas);
    ckpt__az_creds_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_profile_files),
        cmocka_unit_test(test_chain_order),
        cmocka_unit_test(test_region_endpoint_time),
        cmocka_unit_test(test_azure_connection_string),
        cmocka_unit_test(test_azure_variables),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
