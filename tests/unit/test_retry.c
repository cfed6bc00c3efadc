/*
 * test_retry.c -- the failure classification table, the backoff limits,
 * failing fast before any store answered, the stop deadline and the retry
 * notices.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

#include "retry.h"
#include "retryctl.h"

static void expect(long http, int cc, const char *code, ckpt_status want_st,
                   ckpt_retry_kind want_kind)
{
    ckpt_retry_kind k;
    ckpt_status st = ckpt__retry_classify(http, cc, code, &k);

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
    expect(0, CURLE_COULDNT_CONNECT, NULL, CKPT_E_UNREACHABLE, CKPT_RETRY_CONNECT);
    expect(0, CURLE_COULDNT_RESOLVE_HOST, NULL, CKPT_E_UNREACHABLE, CKPT_RETRY_CONNECT);
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
    ckpt__retry_policy_init(&p);
    assert_true(p.min_attempts >= 6);
    ckpt__retry_begin(&r, &p, NULL);
    while (ckpt__retry_again(&r, CKPT_RETRY_AGAIN))
        n++;
    /* Budget 0: exactly the minimum number of attempts. */
    assert_int_equal(n + 1, p.min_attempts);
    ckpt__retry_begin(&r, &p, NULL);
    assert_int_equal(ckpt__retry_again(&r, CKPT_RETRY_NEVER), 0);
    ckpt__retry_begin(&r, &p, NULL);
    assert_int_equal(ckpt__retry_again(&r, CKPT_RETRY_SKEW), 1);
    n = 1;
    while (ckpt__retry_again(&r, CKPT_RETRY_SKEW))
        n++;
    assert_int_equal(n + 1, p.max_attempts);   /* bounded all the same */
}

/* Count the attempts one request makes against failures of `kind`. */
static unsigned attempts(const struct ckpt_retry_policy *p, ckpt_retry_kind kind,
                         int64_t *ms)
{
    struct ckpt_retry r;
    unsigned n = 1;
    int64_t t0 = ckpt__mono_ms();
    ckpt__retry_begin(&r, p, NULL);
    while (ckpt__retry_again(&r, kind))
        n++;
    if (ms)
        *ms = ckpt__mono_ms() - t0;
    return n;
}

static void policy(struct ckpt_retry_policy *p, const char *base, const char *cap,
                   const char *budget)
{
    setenv("CKPT_RETRY_BASE_MS", base, 1);
    setenv("CKPT_RETRY_CAP_MS", cap, 1);
    setenv("CKPT_RETRY_BUDGET_MS", budget, 1);
    unsetenv("CKPT_RETRY_ATTEMPTS");
    unsetenv("CKPT_RETRY_FAST_MS");
    unsetenv("CKPT_RETRY_FAST_ATTEMPTS");
    ckpt__retry_policy_init(p);
}

/* A refused endpoint that never answered is reported in seconds; once any
 * store has answered, the same failure gets the whole budget. */
static void test_fast_until_answered(void **state)
{
    struct ckpt_retry_policy p;
    ckpt_retry_kind k;
    int64_t ms;
    unsigned n;

    (void)state;
    /* the defaults of a real run: 120 s budget, 20 s cap, base 200 ms */
    policy(&p, "200", "20000", "120000");
    ckpt__retry_reset_answered();
    n = attempts(&p, CKPT_RETRY_CONNECT, &ms);
    assert_int_equal(n, 3);
    assert_true(ms < 3000);
    /* other failures are not cut short (base 1 ms to keep the test quick) */
    policy(&p, "1", "4", "0");
    ckpt__retry_reset_answered();
    assert_int_equal(attempts(&p, CKPT_RETRY_AGAIN, NULL), p.min_attempts);
    assert_int_equal(attempts(&p, CKPT_RETRY_CONNECT, NULL), 3);
    /* any HTTP reply, even an error status, proves the endpoint */
    assert_int_equal(ckpt__retry_answered(), 0);
    ckpt__retry_classify(404, 0, "NoSuchKey", &k);
    assert_int_equal(ckpt__retry_answered(), 1);
    assert_int_equal(attempts(&p, CKPT_RETRY_CONNECT, NULL), p.min_attempts);
    policy(&p, "1", "4", "200");
    n = attempts(&p, CKPT_RETRY_CONNECT, &ms);
    assert_true(n >= p.min_attempts);
    assert_true(n == p.max_attempts || ms >= 200);
    /* a transport failure does not prove anything */
    ckpt__retry_reset_answered();
    ckpt__retry_classify(0, CURLE_COULDNT_CONNECT, NULL, &k);
    assert_int_equal(ckpt__retry_answered(), 0);
    /* the fast limits can be set (doctor, tests) */
    setenv("CKPT_RETRY_FAST_ATTEMPTS", "2", 1);
    assert_int_equal(attempts(&p, CKPT_RETRY_CONNECT, NULL), 2);
    unsetenv("CKPT_RETRY_FAST_ATTEMPTS");
}

/* A stop's deadline bounds every retry of the process. */
static void test_deadline(void **state)
{
    struct ckpt_retry_policy p;
    int64_t ms;
    unsigned n;

    (void)state;
    /* backoff sleeps of 0..100 ms (550 ms expected for 11 of them) against
     * a deadline 100 ms away: no sleep may cross it */
    policy(&p, "100", "100", "60000");
    ckpt_retry_set_deadline(ckpt__mono_ms() + 100);
    n = attempts(&p, CKPT_RETRY_AGAIN, &ms);
    assert_true(ms < 300);
    assert_true(n < p.max_attempts);
    /* a farther deadline does not replace a nearer one */
    ckpt_retry_set_deadline(ckpt__mono_ms() - 1);
    ckpt_retry_set_deadline(ckpt__mono_ms() + 100000);
    assert_int_equal(attempts(&p, CKPT_RETRY_AGAIN, NULL), 1);
    ckpt_retry_set_deadline(0);
    policy(&p, "1", "1", "0");
    assert_int_equal(attempts(&p, CKPT_RETRY_AGAIN, NULL), p.min_attempts);
}

static struct ckpt_retry_notice seen[16];
static char seen_reason[16][300];
static unsigned nseen;

static void observer(const struct ckpt_retry_notice *n)
{
    if (nseen < 16) {
        seen[nseen] = *n;
        snprintf(seen_reason[nseen], sizeof seen_reason[0], "%s", n->reason);
        nseen++;
    }
}

/* Each retry is announced with its number, the limit and why. */
static void test_notices(void **state)
{
    struct ckpt_retry_policy p;
    struct ckpt_retry r;
    ckpt_retry_kind k;

    (void)state;
    policy(&p, "1", "2", "0");
    ckpt_retry_set_observer(observer);
    ckpt__retry_reset_answered();
    nseen = 0;
    ckpt__retry_begin(&r, &p, NULL);
    for (;;) {
        ckpt__retry_note_transport("Failed to connect to 127.0.0.1 port 9: Connection refused");
        ckpt__retry_classify(0, CURLE_COULDNT_CONNECT, NULL, &k);
        if (!ckpt__retry_again(&r, k))
            break;
    }
    assert_int_equal(nseen, 2); /* 3 attempts: 2 retries announced */
    assert_int_equal(seen[0].attempt, 2);
    assert_int_equal(seen[0].max, 3);
    assert_int_equal(seen[1].attempt, 3);
    assert_non_null(strstr(seen_reason[0], "Connection refused"));
    nseen = 0;
    ckpt__retry_begin(&r, &p, NULL);
    ckpt__retry_note_transport("");
    ckpt__retry_classify(503, 0, "SlowDown", &k);
    assert_int_equal(ckpt__retry_again(&r, k), 1);
    assert_int_equal(nseen, 1);
    assert_string_equal(seen_reason[0], "HTTP 503 SlowDown");
    assert_int_equal(seen[0].max, p.max_attempts);
    ckpt_retry_set_observer(NULL);
}

static void test_skew(void **state)
{
    int64_t off = 0;

    (void)state;
    assert_int_equal(ckpt__retry_skew_from_date("Wed, 21 Oct 2015 07:28:00 GMT", &off), 1);
    assert_true(off < -300L * 24 * 3600);
    assert_int_equal(ckpt__retry_skew_from_date("garbage", &off), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_backoff_limits),
        cmocka_unit_test(test_skew),
        cmocka_unit_test(test_fast_until_answered),
        cmocka_unit_test(test_deadline),
        cmocka_unit_test(test_notices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
