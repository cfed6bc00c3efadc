/*
 * test_retry.c -- the failure classification table and the backoff limits.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <stdlib.h>

#include "retry.h"

static void expect(long http, int cc, const char *code, ckpt_status want_st,
                   ckpt_retry_kind want_kind)
{
    ckpt_retry_kind k;
    ckpt_status st = ckpt_retry_classify(http, cc, code, &k);

    if (st != want_st || k != want_kind)
        print_message("HTTP %ld curl %d code %s -> status %d kind %d\n", http, cc,
                      code ? code : "-", (int)st, (int)k);
    assert_int_equal(st, want_st);
    assert_int_equal(k, want_kind);
}

static void test_table(void **state)
{
    (void)state;
    expect(200, 0, NULL, CKPT_OK, CKPT_RETRY_NEVER);
    expect(204, 0, NULL, CKPT_OK, CKPT_RETRY_NEVER);
    expect(500, 0, "InternalError", CKPT_E_TRANSIENT, CKPT_RETRY_AGAIN);
    expect(503, 0, "SlowDown", CKPT_E_THROTTLED, CKPT_RETRY_THROTTLE);
    expect(503, 0, "ServerBusy", CKPT_E_THROTTLED, CKPT_RETRY_THROTTLE);
    expect(503, 0, "ServiceUnavailable", CKPT_E_TRANSIENT, CKPT_RETRY_AGAIN);
    expect(429, 0, NULL, CKPT_E_THROTTLED, CKPT_RETRY_THROTTLE);
    expect(400, 0, "RequestTimeout", CKPT_E_TRANSIENT, CKPT_RETRY_AGAIN);
    expect(400, 0, "InvalidArgument", CKPT_E_CONFIG, CKPT_RETRY_NEVER);
    expect(409, 0, "ConditionalRequestConflict", CKPT_E_TRANSIENT, CKPT_RETRY_AGAIN);
    expect(409, 0, "BlobAlreadyExists", CKPT_E_PRECONDITION, CKPT_RETRY_NEVER);
    expect(412, 0, "PreconditionFailed", CKPT_E_PRECONDITION, CKPT_RETRY_NEVER);
    expect(401, 0, NULL, CKPT_E_AUTH, CKPT_RETRY_NEVER);
    expect(403, 0, "AccessDenied", CKPT_E_AUTH, CKPT_RETRY_NEVER);
    expect(403, 0, "RequestTimeTooSkewed", CKPT_E_AUTH, CKPT_RETRY_SKEW);
    expect(404, 0, "NoSuchKey", CKPT_E_NOENT, CKPT_RETRY_NEVER);
    expect(404, 0, NULL, CKPT_E_NOENT, CKPT_RETRY_NEVER);
    expect(404, 0, "NoSuchBucket", CKPT_E_CONFIG, CKPT_RETRY_NEVER);
    expect(0, CURLE_COULDNT_CONNECT, NULL, CKPT_E_UNREACHABLE, CKPT_RETRY_AGAIN);
    expect(0, CURLE_RECV_ERROR, NULL, CKPT_E_TRANSIENT, CKPT_RETRY_AGAIN);
    expect(0, CURLE_OPERATION_TIMEDOUT, NULL, CKPT_E_TRANSIENT, CKPT_RETRY_AGAIN);
    expect(0, CURLE_PARTIAL_FILE, NULL, CKPT_E_TRANSIENT, CKPT_RETRY_AGAIN);
    expect(0, CURLE_PEER_FAILED_VERIFICATION, NULL, CKPT_E_CONFIG, CKPT_RETRY_NEVER);
}

static void test_backoff_limits(void **state)
{
    struct ckpt_retry_policy p;
    struct ckpt_retry r;
    unsigned n = 0;

    (void)state;
    setenv("CKPT_RETRY_BASE_MS", "1", 1);
    setenv("CKPT_RETRY_CAP_MS", "4", 1);
    setenv("CKPT_RETRY_BUDGET_MS", "0", 1);
    unsetenv("CKPT_RETRY_ATTEMPTS");
    ckpt_retry_policy_init(&p);
    assert_true(p.min_attempts >= 6);
    ckpt_retry_begin(&r, &p, NULL);
    while (ckpt_retry_again(&r, CKPT_RETRY_AGAIN))
        n++;
    /* Budget 0: exactly the minimum number of attempts. */
    assert_int_equal(n + 1, p.min_attempts);
    ckpt_retry_begin(&r, &p, NULL);
    assert_int_equal(ckpt_retry_again(&r, CKPT_RETRY_NEVER), 0);
    ckpt_retry_begin(&r, &p, NULL);
    assert_int_equal(ckpt_retry_again(&r, CKPT_RETRY_SKEW), 1);
    n = 1;
    while (ckpt_retry_again(&r, CKPT_RETRY_SKEW))
        n++;
    assert_int_equal(n + 1, p.max_attempts);   /* bounded all the same */
}

static void test_skew(void **state)
{
    int64_t off = 0;

    (void)state;
    assert_int_equal(ckpt_retry_skew_from_date("Wed, 21 Oct 2015 07:28:00 GMT", &off), 1);
    assert_true(off < -300L * 24 * 3600);
    assert_int_equal(ckpt_retry_skew_from_date("garbage", &off), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_backoff_limits),
        cmocka_unit_test(test_skew),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
