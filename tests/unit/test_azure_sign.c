/*
 * test_azure_sign.c -- SharedKey string to sign and signature, known answers.
 *
 * The expected strings follow SPEC.md part B ("Azure Blob") literally; the
 * expected signatures were computed independently with Python's hmac,
 * hashlib and base64 modules over those strings with the public Azurite
 * development key. The integration test (azurite verifies SharedKey) checks
 * the same code end to end.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "azure_sign.h"

#define DEV_KEY "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
#define DATE "Fri, 24 May 2013 00:00:00 GMT"

static void test_put_blob_conditional(void **state)
{
    /* Header order and case as a caller might give them: the canonical
     * form must not depend on either. */
    struct ckpt_az_header h[] = {
        { "x-ms-version", "2021-08-06" },
        { "If-None-Match", "*" },
        { "Content-MD5", "XrY7u+Ae7tCTyyK7j1rNww==" },
        { "X-MS-Date", DATE },
        { "Content-Length", "11" },
        { "x-ms-blob-type", "BlockBlob" },
    };
    const char *want =
        "PUT\n\n\n11\nXrY7u+Ae7tCTyyK7j1rNww==\n\n\n\n\n*\n\n\n"
        "x-ms-blob-type:BlockBlob\nx-ms-date:" DATE "\nx-ms-version:2021-08-06\n"
        "/devstoreaccount1/devstoreaccount1/ckpt/run/HEAD";
    char *sts, auth[256];

    (void)state;
    sts = ckpt__az_string_to_sign("devstoreaccount1", "PUT", "/devstoreaccount1/ckpt/run/HEAD",
                                  NULL, h, 6);
    assert_non_null(sts);
    assert_string_equal(sts, want);
    assert_int_equal(ckpt__az_authorization("devstoreaccount1", DEV_KEY, sts, auth, sizeof(auth)),
                     CKPT_OK);
    assert_string_equal(auth, "SharedKey devstoreaccount1:"
                              "cIKC3g5phaQg7/Q9yv38ocmro6ybuep9w6V/cpNVvtM=");
    free(sts);
}

static void test_list_query_and_empty_length(void **state)
{
    struct ckpt_az_header h[] = {
        { "x-ms-date", DATE },
        { "x-ms-version", "2021-08-06" },
        { "Content-Length", "0" },   /* written as an empty line */
    };
    const char *want =
        "GET\n\n\n\n\n\n\n\n\n\n\n\n"
        "x-ms-date:" DATE "\nx-ms-version:2021-08-06\n"
        "/devstoreaccount1/devstoreaccount1/ckpt\n"
        "comp:list\nmarker:2!a b\nprefix:run/\nrestype:container";
    char *sts, auth[256];

    (void)state;
    /* Query in wire form, unsorted, encoded: names sorted, values decoded. */
    sts =
        ckpt__az_string_to_sign("devstoreaccount1", "GET", "/devstoreaccount1/ckpt",
                                "restype=container&comp=list&prefix=run%2F&marker=2%21a%20b", h, 3);
    assert_non_null(sts);
    assert_string_equal(sts, want);
    assert_int_equal(ckpt__az_authorization("devstoreaccount1", DEV_KEY, sts, auth, sizeof(auth)),
                     CKPT_OK);
    assert_string_equal(auth, "SharedKey devstoreaccount1:"
                              "NrkG+TBG+s18tyA+gINqUxQ/+Lfy2HkkS2qqxJ+m3Zg=");
    free(sts);
}

static void test_bad_key(void **state)
{
    char auth[256];

    (void)state;
    assert_int_equal(ckpt__az_authorization("a", "not-base64!", "x", auth, sizeof(auth)),
                     CKPT_E_CONFIG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_blob_conditional),
        cmocka_unit_test(test_list_query_and_empty_length),
        cmocka_unit_test(test_bad_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
