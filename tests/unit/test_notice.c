/*
 * test_notice.c -- unit tests for the notice module: strict time parsers,
 * every provider's reply parser (including hostile replies), DMI detection
 * and lifecycle edge cases. No network: detection tests point metadata_url
 * at a closed loopback port and stop at once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "notice/notice.h"
#include "notice/int.h"
#include "notice/parse.h"
#include "notice/aws.h"
#include "notice/gcp.h"
#include "notice/azure.h"
#include "notice/aliyun.h"
#include "notice/tencent.h"
#include "notice/table.h"
#include "notice/report.h"

#define T0 1505722920000LL /* 2017-09-18T08:22:00Z */
#define S(x) x, strlen(x)

/* ---- times ---------------------------------------------------------------- */

static void iso_ok(void **state)
{
    int64_t ms;
    (void)state;
    assert_int_equal(notice_parse_iso8601(S("2017-09-18T08:22:00Z"), &ms), 0);
    assert_int_equal(ms, T0);
    assert_int_equal(notice_parse_iso8601(S("1970-01-01T00:00:00Z"), &ms), 0);
    assert_int_equal(ms, 0);
    assert_int_equal(notice_parse_iso8601(S("2017-09-18T08:22:00.250Z"), &ms), 0);
    assert_int_equal(ms, T0 + 250);
    assert_int_equal(notice_parse_iso8601(S("2017-09-18T08:22:00.123456789Z"), &ms), 0);
    assert_int_equal(ms, T0 + 123);
    assert_int_equal(notice_parse_iso8601(S("2017-09-18T10:22:00+02:00"), &ms), 0);
    assert_int_equal(ms, T0);
    assert_int_equal(notice_parse_iso8601(S("2017-09-18T03:22:00-05:00"), &ms), 0);
    assert_int_equal(ms, T0);
    assert_int_equal(notice_parse_iso8601(S("2024-02-29T00:00:00Z"), &ms), 0);
    assert_int_equal(ms, 1709164800000LL);
    assert_int_equal(notice_parse_iso8601(S("2000-02-29T12:00:00Z"), &ms), 0);
    assert_int_equal(ms, 951825600000LL);
    assert_int_equal(notice_parse_iso8601(S("2016-12-31T23:59:60Z"), &ms), 0); /* leap second */
    assert_int_equal(ms, 1483228800000LL);
}

static void iso_bad(void **state)
{
    static const char *const bad[] = {
        "", "Z", "2017-09-18", "2017-09-18T08:22:00", "2017-09-18 08:22:00Z",
        "2017-09-18T08:22Z", "2017-9-18T08:22:00Z", "2017-13-18T08:22:00Z",
        "2017-00-18T08:22:00Z", "2017-02-29T08:22:00Z", "1900-02-29T00:00:00Z",
        "2017-04-31T08:22:00Z", "2017-09-18T24:00:00Z", "2017-09-18T08:60:00Z",
        "2017-09-18T08:22:61Z", "2017-09-18T08:22:00ZZ", "2017-09-18T08:22:00Z ",
        " 2017-09-18T08:22:00Z", "2017-09-18T08:22:00.Z", "2017-09-18T08:22:00+0200",
        "2017-09-18T08:22:00+24:00", "+2017-09-18T08:22:00Z", "1969-12-31T23:59:59Z",
        "2017-09-18t08:22:00z", "２017-09-18T08:22:00Z", "2017-09-18T08:22:00.1234567890Z",
        "-017-09-18T08:22:00Z", "2017-09-18T08:22:0aZ",
    };
    size_t i;
    int64_t ms = 42;
    (void)state;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (notice_parse_iso8601(S(bad[i]), &ms) == 0)
            fail_msg("accepted \"%s\"", bad[i]);
    }
    /* Embedded NUL and short lengths: only `len` bytes count. */
    assert_int_equal(notice_parse_iso8601("2017-09-18T08:22:00Z", 19, &ms), -1);
    assert_int_equal(notice_parse_iso8601("2017-09-18T08:22:00\0Z", 21, &ms), -1);
    assert_int_equal(notice_parse_iso8601(NULL, 0, &ms), -1);
}

static void rfc1123_cases(void **state)
{
    int64_t ms;
    (void)state;
    assert_int_equal(notice_parse_rfc1123(S("Mon, 18 Sep 2017 08:22:00 GMT"), &ms), 0);
    assert_int_equal(ms, T0);
    assert_int_equal(notice_parse_rfc1123(S("Mon, 19 Sep 2016 18:29:47 GMT"), &ms), 0);
    assert_int_equal(ms, 1474309787000LL);
    assert_int_equal(notice_parse_rfc1123(S("Mon, 4 Sep 2017 08:22:00 GMT"), &ms), 0);
    assert_int_equal(notice_parse_rfc1123(S("Mon, 18 Sep 2017 08:22:00 UTC"), &ms), -1);
    assert_int_equal(notice_parse_rfc1123(S("Mon, 18 Sep 2017 08:22:00"), &ms), -1);
    assert_int_equal(notice_parse_rfc1123(S("Mon 18 Sep 2017 08:22:00 GMT"), &ms), -1);
    assert_int_equal(notice_parse_rfc1123(S("Xyz, 18 Sep 2017 08:22:00 GMT"), &ms), -1);
    assert_int_equal(notice_parse_rfc1123(S("Mon, 18 Sept 2017 08:22:00 GMT"), &ms), -1);
    assert_int_equal(notice_parse_rfc1123(S("Mon, 31 Sep 2017 08:22:00 GMT"), &ms), -1);
    assert_int_equal(notice_parse_rfc1123(S("Mon, 18 Sep 2017 08:22:00 GMTX"), &ms), -1);
    assert_int_equal(notice_parse_rfc1123(S("Monday, 18-Sep-17 08:22:00 GMT"), &ms), -1);
    assert_int_equal(notice_parse_rfc1123(S(""), &ms), -1);
}

static void tencent_cases(void **state)
{
    int64_t ms;
    (void)state;
    /* 2017-09-18 16:22:00 in UTC+8 is 08:22:00Z */
    assert_int_equal(notice_parse_tencent(S("2017-09-18 16:22:00"), &ms), 0);
    assert_int_equal(ms, T0);
    assert_int_equal(notice_parse_tencent(S("2017-09-19 00:22:00"), &ms), 0);
    assert_int_equal(ms, T0 + 8 * 3600000LL);
    assert_int_equal(notice_parse_tencent(S("2017-09-18T16:22:00"), &ms), -1);
    assert_int_equal(notice_parse_tencent(S("2017-09-18 16:22:00Z"), &ms), -1);
    assert_int_equal(notice_parse_tencent(S("2017-09-18 16:22"), &ms), -1);
}

/* ---- replies --------------------------------------------------------------- */

static void aws_action(void **state)
{
    struct notice_event ev;
    int64_t now = T0 - 120000;
    (void)state;
    assert_int_equal(notice_parse_aws_action(S("{\"action\": \"terminate\", \"time\": "
                                               "\"2017-09-18T08:22:00Z\"}"), now, &ev), 1);
    assert_int_equal(ev.kind, NOTICE_TERMINATE);
    assert_int_equal(ev.deadline_ms, T0);
    assert_int_equal(notice_parse_aws_action(S("{\n    \"action\" : \"stop\",\n    \"time\" : "
                                               "\"2017-09-18T08:22:00Z\"\n}\n"), now, &ev), 1);
    assert_int_equal(notice_parse_aws_action(S("{\"action\":\"hibernate\",\"time\":"
                                               "\"2017-09-18T08:22:00Z\"}"), now, &ev), 0);
    /* stale (lingering), bad time, unknown action, wrong types, bad JSON */
    assert_int_equal(notice_parse_aws_action(S("{\"action\":\"terminate\",\"time\":"
                                               "\"2017-09-18T08:22:00Z\"}"), T0 + 121000, &ev), -1);
    assert_int_equal(notice_parse_aws_action(S("{\"action\":\"terminate\",\"time\":"
                                               "\"2017-09-18T08:22:00Z\"}"), T0 + 60000, &ev), 1);
    assert_int_equal(notice_parse_aws_action(S("{\"action\":\"terminate\",\"time\":\"soon\"}"),
                                             now, &ev), -1);
    assert_int_equal(notice_parse_aws_action(S("{\"action\":\"explode\",\"time\":"
                                               "\"2017-09-18T08:22:00Z\"}"), now, &ev), -1);
    assert_int_equal(notice_parse_aws_action(S("{\"action\":1,\"time\":2}"), now, &ev), -1);
    assert_int_equal(notice_parse_aws_action(S("{\"action\":\"terminate\""), now, &ev), -1);
    assert_int_equal(notice_parse_aws_action(S("[\"terminate\"]"), now, &ev), -1);
    assert_int_equal(notice_parse_aws_action(S(""), now, &ev), -1);
    assert_int_equal(notice_parse_aws_action(S("null"), now, &ev), -1);
    assert_int_equal(notice_parse_aws_action(NULL, 0, now, &ev), -1);
    assert_true(ev.detail[0] != '\0'); /* a reason for the log */
}

static void aws_termtime(void **state)
{
    struct notice_event ev;
    (void)state;
    assert_int_equal(notice_parse_aws_termtime(S("2017-09-18T08:22:00Z\n"), T0 - 1000, &ev), 1);
    assert_int_equal(ev.deadline_ms, T0);
    assert_int_equal(notice_parse_aws_termtime(S("2017-09-18T08:22:00Z"), T0 + 3600000, &ev), -1);
    assert_int_equal(notice_parse_aws_termtime(S("not-a-time"), T0, &ev), -1);
    assert_int_equal(notice_parse_aws_termtime(S("\n\n"), T0, &ev), -1);
    assert_int_equal(notice_parse_aws_termtime(S("2017-09-18T08:22:00Z trailing"), T0, &ev), -1);
}

static void aws_rebalance(void **state)
{
    struct notice_event ev;
    (void)state;
    /* The notice time is when AWS issued it: old ones still count. */
    assert_int_equal(notice_parse_aws_rebalance(S("{\"noticeTime\": \"2017-09-18T08:22:00Z\"}"),
                                                T0 + 86400000, &ev), 1);
    assert_int_equal(ev.kind, NOTICE_REBALANCE);
    assert_int_equal(ev.deadline_ms, 0);
    assert_int_equal(notice_parse_aws_rebalance(S("{\"noticeTime\": \"yesterday\"}"), T0, &ev), -1);
    assert_int_equal(notice_parse_aws_rebalance(S("{}"), T0, &ev), -1);
    assert_int_equal(notice_parse_aws_rebalance(S("{\"noticeTime\": 5}"), T0, &ev), -1);
}

static void gcp(void **state)
{
    struct notice_event ev;
    (void)state;
    assert_int_equal(notice_parse_gcp_preempted(S("FALSE"), T0, &ev), 0);
    assert_int_equal(notice_parse_gcp_preempted(S("TRUE"), T0, &ev), 1);
    assert_int_equal(ev.kind, NOTICE_TERMINATE);
    assert_int_equal(ev.deadline_ms, T0 + 30000);
    assert_int_equal(notice_parse_gcp_preempted(S("TRUE\n"), T0, &ev), 1);
    assert_int_equal(notice_parse_gcp_preempted(S("true"), T0, &ev), -1);
    assert_int_equal(notice_parse_gcp_preempted(S("TRUEISH"), T0, &ev), -1);
    assert_int_equal(notice_parse_gcp_preempted(S(""), T0, &ev), -1);
    assert_int_equal(notice_parse_gcp_maintenance(S("NONE"), T0, &ev), 0);
    assert_int_equal(notice_parse_gcp_maintenance(S("MIGRATE_ON_HOST_MAINTENANCE"), T0, &ev), 0);
    assert_int_equal(notice_parse_gcp_maintenance(S("TERMINATE_ON_HOST_MAINTENANCE"), T0, &ev), 1);
    assert_int_equal(ev.kind, NOTICE_MAINTENANCE);
    assert_int_equal(ev.deadline_ms, T0 + 60000);
    assert_int_equal(notice_parse_gcp_maintenance(S("<html>"), T0, &ev), -1);
}

#define AZ_EV(type, nb, res)                                                              \
    "{\"EventId\":\"602d9444-d2cd-49c7-8624-8643e7171297\",\"EventType\":\"" type "\","     \
    "\"ResourceType\":\"VirtualMachine\",\"Resources\":[\"" res "\"],\"EventStatus\":"      \
    "\"Scheduled\",\"NotBefore\":\"" nb "\",\"Description\":\"\",\"EventSource\":"          \
    "\"Platform\",\"DurationInSeconds\":-1}"

static void azure(void **state)
{
    struct notice_event ev;
    int64_t now = T0 - 60000;
    (void)state;
    assert_int_equal(notice_parse_azure(S("{\"DocumentIncarnation\": 1, \"Events\": []}"), now, &ev), 0);
    assert_int_equal(notice_parse_azure(S("{\"DocumentIncarnation\":2,\"Events\":["
                                          AZ_EV("Preempt", "Mon, 18 Sep 2017 08:22:00 GMT", "vm0")
                                          "]}"), now, &ev), 1);
    assert_int_equal(ev.kind, NOTICE_TERMINATE);
    assert_int_equal(ev.deadline_ms, T0);
    assert_string_equal(ev.id, "602d9444-d2cd-49c7-8624-8643e7171297");
    /* blank NotBefore: started, act now with the 30 s minimum */
    assert_int_equal(notice_parse_azure(S("{\"Events\":[" AZ_EV("Terminate", "", "vm0") "]}"),
                                        now, &ev), 1);
    assert_int_equal(ev.deadline_ms, now + 30000);
    /* Freeze is ignored; Reboot is maintenance; Preempt wins over Reboot */
    assert_int_equal(notice_parse_azure(S("{\"Events\":[" AZ_EV("Freeze", "", "vm0") "]}"),
                                        now, &ev), 0);
    assert_int_equal(notice_parse_azure(S("{\"Events\":[" AZ_EV("Reboot", "", "vm0") "]}"),
                                        now, &ev), 1);
    assert_int_equal(ev.kind, NOTICE_MAINTENANCE);
    assert_int_equal(notice_parse_azure(S("{\"Events\":[" AZ_EV("Reboot", "", "vm0") ","
                                          AZ_EV("Preempt", "Mon, 18 Sep 2017 08:22:00 GMT", "vm0")
                                          "]}"), now, &ev), 1);
    assert_int_equal(ev.kind, NOTICE_TERMINATE);
    /* other VMs' events */
    assert_int_equal(notice_parse_azure_for(S("{\"Events\":[" AZ_EV("Preempt", "", "vm1") "]}"),
                                            now, "vm0", &ev), 0);
    assert_int_equal(notice_parse_azure_for(S("{\"Events\":[" AZ_EV("Preempt", "", "VM0") "]}"),
                                            now, "vm0", &ev), 1);
    /* hostile */
    assert_int_equal(notice_parse_azure(S("{\"Events\":[" AZ_EV("Preempt", "tomorrow", "vm0") "]}"),
                                        now, &ev), -1);
    assert_int_equal(notice_parse_azure(S("{\"Events\":[" AZ_EV("Preempt",
                                          "Mon, 19 Sep 2016 18:29:47 GMT", "vm0") "]}"), now, &ev), -1);
    assert_int_equal(notice_parse_azure(S("{\"Events\":[{\"EventType\":\"Preempt\"}]}"), now, &ev), -1);
    assert_int_equal(notice_parse_azure(S("{\"Events\":5}"), now, &ev), -1);
    assert_int_equal(notice_parse_azure(S("{\"Events\":[1,2,\"x\"]}"), now, &ev), -1);
    assert_int_equal(notice_parse_azure(S("[]"), now, &ev), -1);
    assert_int_equal(notice_parse_azure(S("{\"Events\":["), now, &ev), -1);
    {
        /* an EventId longer than ev->id is refused, not truncated */
        char big[512];
        snprintf(big, sizeof big, "{\"Events\":[{\"EventId\":\"%0200d\",\"EventType\":\"Preempt\","
                 "\"NotBefore\":\"\"}]}", 7);
        assert_int_equal(notice_parse_azure(S(big), now, &ev), -1);
    }
}

static void aliyun_tencent(void **state)
{
    struct notice_event ev;
    (void)state;
    assert_int_equal(notice_parse_aliyun(S("2017-09-18T08:22:00Z"), T0 - 300000, &ev), 1);
    assert_int_equal(ev.deadline_ms, T0);
    assert_int_equal(notice_parse_aliyun(S("2017-09-18 08:22:00"), T0, &ev), -1);
    assert_int_equal(notice_parse_tencent_reply(S("2017-09-18 16:22:00"), T0 - 120000, &ev), 1);
    assert_int_equal(ev.deadline_ms, T0);
    assert_int_equal(notice_parse_tencent_reply(S("2017-09-18T08:22:00Z"), T0 - 120000, &ev), 1);
    assert_int_equal(ev.deadline_ms, T0);
    assert_int_equal(notice_parse_tencent_reply(S("2017-09-18 16:22:00"), T0 + 3600000, &ev), -1);
    assert_int_equal(notice_parse_tencent_reply(S("garbage"), T0, &ev), -1);
}

/* Volcano Engine: the time's form is not documented, so any parseable one
 * counts (UTC without a zone); an empty reply is no notice. Reached through
 * the table, as a provider's parser is. */
static void volcengine(void **state)
{
    static const struct {
        const char *body;
        int64_t at; /* the deadline, T0 + at */
    } ok[] = {
        { "2017-09-18T08:22:00Z", 0 },      { "2017-09-18T08:22:00", 0 }, /* no zone: UTC */
        { "2017-09-18 08:22:00", 0 },       { "2017-09-18t08:22:00z", 0 },
        { "2017-09-18T08:22", 0 },          { "2017-09-18T08:22:00.250", 250 },
        { "2017-09-18T08:22:00,5Z", 500 },  { "2017-09-18T08:22:00.123456789Z", 123 },
        { "2017-09-18T16:22:00+08:00", 0 }, { "2017-09-18T16:22:00+0800", 0 },
        { "2017-09-18T16:22:00+08", 0 },    { "2017-09-18T03:22:00-05:00", 0 },
        { "2017-09-18 08:22:00 UTC", 0 },   { "2017-09-18 08:22:00 GMT", 0 },
        { "2017-09-18 08:22:00UTC", 0 },    { "1505722920", 0 },    /* Unix seconds */
        { "1505722920.75", 750 },           { "1505722920000", 0 }, /* Unix milliseconds */
        { "\"2017-09-18T08:22:00Z\"", 0 },  { "  2017-09-18 08:22:00\r\n", 0 },
    };
    static const char *const bad[] = {
        "soon",
        "2017-09-18",
        "2017-09-18T08",
        "2017-13-18T08:22:00Z",
        "2017-09-31 08:22:00",
        "2017-09-18T08:22:00+08:",
        "2017-09-18T08:22:00+24:00",
        "2017-09-18T08:22:00 EST",
        "2017-09-18T08:22:00.Z",
        "2017-09-18T08:22:00ZZ",
        "2017/09/18 08:22:00",
        "150572292000000",
        "12345678901234",
        "1505722920.",
        "1505722920x",
        "-1505722920",
        "null",
        "{\"time\": \"2017-09-18T08:22:00Z\"}",
        "\"\"",
        "253402300800",
    };
    const struct notice_provider *pv = notice_provider_find("volcengine");
    notice_parser parse;
    struct notice_event ev;
    size_t i;
    (void)state;
    assert_non_null(pv);
    assert_null(pv->dmi_match); /* never by DMI until its vendor string is known */
    assert_int_equal(pv->hints.window_ms, 300000);
    assert_string_equal(pv->paths[0].path, "/latest/spot_instance_termination_time");
    parse = pv->paths[0].parse;
    for (i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        if (parse(S(ok[i].body), T0 - 300000, &ev) != 1)
            fail_msg("refused \"%s\": %s", ok[i].body, ev.detail);
        assert_int_equal(ev.kind, NOTICE_TERMINATE);
        if (ev.deadline_ms != T0 + ok[i].at)
            fail_msg("\"%s\": deadline off by %lld ms", ok[i].body,
                     (long long)(ev.deadline_ms - T0 - ok[i].at));
        assert_non_null(strstr(ev.detail, "spot_instance_termination_time"));
    }
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (parse(S(bad[i]), T0 - 300000, &ev) != -1)
            fail_msg("accepted \"%s\"", bad[i]);
        assert_true(ev.detail[0] != '\0'); /* a reason for the log */
    }
    /* no notice: an empty answer, whitespace, no body */
    assert_int_equal(parse(S(""), T0, &ev), 0);
    assert_int_equal(parse(S(" \n"), T0, &ev), 0);
    assert_int_equal(parse(NULL, 0, T0, &ev), 0);
    /* a lingering time is stale: never a notice */
    assert_int_equal(parse(S("2017-09-18T08:22:00Z"), T0 + 121000, &ev), -1);
    assert_int_equal(parse(S("2017-09-18T08:22:00Z"), T0 + 60000, &ev), 1);
    assert_int_equal(parse(S("1505722920"), T0 + 3600000, &ev), -1);
}

static void binary_garbage(void **state)
{
    /* Random bytes through every parser: no crash, never a notice. */
    int (*const parsers[])(const char *, size_t, int64_t, struct notice_event *) = {
        notice_parse_aws_action, notice_parse_aws_termtime, notice_parse_aws_rebalance,
        notice_parse_gcp_preempted, notice_parse_gcp_maintenance, notice_parse_azure,
        notice_parse_aliyun, notice_parse_tencent_reply};
    char buf[600];
    unsigned seed = 12345;
    int i, k;
    size_t j;
    (void)state;
    for (i = 0; i < 2000; i++) {
        size_t n = (size_t)(i % 600);
        struct notice_event ev;
        for (j = 0; j < n; j++) {
            seed = seed * 1103515245u + 12345u;
            buf[j] = (char)(seed >> 16);
        }
        for (k = 0; k < 8; k++)
            assert_true(parsers[k](buf, n, T0, &ev) <= 0 || k == 3 || k == 4);
        /* and every path of every provider of the table */
        for (k = 0; notice_providers[k]; k++)
            for (unsigned q = 0; q < notice_providers[k]->npaths; q++)
                assert_true(notice_providers[k]->paths[q].parse(buf, n, T0, &ev) <= 0 ||
                            !strcmp(notice_providers[k]->name, "gcp"));
    }
}

/* ---- detection / lifecycle -------------------------------------------------- */

static char dmi[64];

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[256];
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void cb(void *user, const struct notice_event *ev)
{
    (void)user, (void)ev;
}

static const char *detect_with(const char *vendor, const char *product)
{
    static char got[16];
    struct notice_config cfg = NOTICE_CONFIG_INIT;
    struct notice_poller *p = NULL;
    write_file(dmi, "sys_vendor", vendor);
    write_file(dmi, "product_name", product);
    cfg.provider = "auto";
    cfg.dmi_dir = dmi;
    cfg.metadata_url = "http://127.0.0.1:9"; /* closed loopback port: never the real address */
    cfg.cb = cb;
    assert_int_equal(notice_start(&cfg, &p), 0);
    snprintf(got, sizeof got, "%s", notice_provider(p));
    notice_stop(p);
    return got;
}

static void detection(void **state)
{
    struct notice_config cfg = NOTICE_CONFIG_INIT;
    struct notice_poller *p = NULL;
    (void)state;
    snprintf(dmi, sizeof dmi, "/tmp/test_notice_dmi.XXXXXX");
    assert_non_null(mkdtemp(dmi));
    assert_string_equal(detect_with("Amazon EC2\n", "m5.large\n"), "aws");
    assert_string_equal(detect_with("Google\n", "Google Compute Engine\n"), "gcp");
    assert_string_equal(detect_with("Microsoft Corporation\n", "Virtual Machine\n"), "azure");
    assert_string_equal(detect_with("Alibaba Cloud\n", "Alibaba Cloud ECS\n"), "aliyun");
    assert_string_equal(detect_with("Tencent Cloud\n", "CVM\n"), "tencent");
    /* Volcano Engine is never detected: its vendor string is not known */
    assert_string_equal(detect_with("Volcano Engine\n", "ECS\n"), "none");
    assert_string_equal(detect_with("Volcengine\n", "volcengine ecs\n"), "none");
    assert_string_equal(detect_with("Dell Inc.\n", "PowerEdge R750\n"), "none");
    assert_string_equal(detect_with("QEMU\n", "Standard PC (Q35 + ICH9, 2009)\n"), "none");
    /* no DMI at all */
    cfg.provider = NULL;
    cfg.dmi_dir = "/nonexistent/dmi";
    assert_int_equal(notice_start(&cfg, &p), 0);
    assert_string_equal(notice_provider(p), "none");
    assert_int_equal(notice_ack(p, "x"), 0); /* no-op */
    notice_stop(p);
    {
        char path[128];
        snprintf(path, sizeof path, "%s/sys_vendor", dmi);
        unlink(path);
        snprintf(path, sizeof path, "%s/product_name", dmi);
        unlink(path);
        rmdir(dmi);
    }
}

/* The provider table: one entry per word of NOTICE_PROVIDER_LIST, in its
 * order, each complete enough for the shared poller, the probe and doctor;
 * every list users read comes from it. */
static void table(void **state)
{
    static const char *const words[] = {
#define W_(name) #name,
        NOTICE_PROVIDER_LIST(W_)
#undef W_
    };
    size_t n = sizeof words / sizeof words[0], i;
    char modes[256] = "auto";
    (void)state;
    for (i = 0; notice_providers[i]; i++) {
        const struct notice_provider *pv = notice_providers[i];
        char base[256];
        assert_true(i < n);
        assert_string_equal(pv->name, words[i]);
        assert_ptr_equal(notice_provider_find(words[i]), pv);
        assert_true(notice_mode_valid(pv->name));
        assert_ptr_equal(notice_hints(pv->name), &pv->hints);
        assert_non_null(pv->title);
        /* its own address is one --metadata-url could name */
        assert_int_equal(notice_base_of(pv->base, base, sizeof base), 0);
        assert_string_equal(base, pv->base);
        assert_true(pv->npaths >= 1 && pv->npaths <= NOTICE_PATHS_MAX);
        for (unsigned k = 0; k < pv->npaths; k++) {
            assert_true(pv->paths[k].path[0] == '/');
            assert_non_null(pv->paths[k].label);
            assert_non_null(pv->paths[k].parse);
        }
        assert_true(pv->poll_ms > 0 && pv->timeout_ms > 0 && pv->body_max >= 1024);
        assert_true(!pv->watch_per_path || pv->run); /* a watch per path runs its own loop */
        assert_true(pv->hints.window_ms > 0 && pv->hints.detect_ms > 0);
        assert_non_null(pv->hints.window_src);
        assert_non_null(pv->hints.window_note);
        if (pv->token) {
            assert_non_null(pv->hints.token_what);
            assert_non_null(pv->hints.token_refused);
            assert_non_null(pv->hints.token_failed);
        }
        assert_true(!pv->hints.temp_mounts || pv->hints.temp_what);
        snprintf(modes + strlen(modes), sizeof modes - strlen(modes), " %s", pv->name);
    }
    assert_int_equal(i, n);
    strncat(modes, " none", sizeof modes - strlen(modes) - 1);
    assert_string_equal(modes, NOTICE_MODES);
    assert_true(notice_mode_valid("auto"));
    assert_true(notice_mode_valid("none"));
    assert_false(notice_mode_valid("oracle"));
    assert_false(notice_mode_valid("AWS"));
    assert_false(notice_mode_valid(""));
    assert_false(notice_mode_valid(NULL));
    assert_null(notice_provider_find("none"));
    assert_null(notice_provider_find("auto"));
    assert_null(notice_hints("none"));
    assert_null(notice_hints(NULL));
    /* doctor's disk check: Azure's resource disk, and nothing elsewhere */
    assert_string_equal(notice_hints("azure")->temp_mounts[1], "/mnt/resource");
    assert_null(notice_hints("aws")->temp_mounts);
}

static void bad_config(void **state)
{
    struct notice_config cfg = NOTICE_CONFIG_INIT;
    struct notice_poller *p = (struct notice_poller *)&cfg;
    (void)state;
    cfg.provider = "oracle";
    assert_int_equal(notice_start(&cfg, &p), -1);
    assert_null(p);
    cfg.provider = "gcp"; /* no callback */
    assert_int_equal(notice_start(&cfg, &p), -1);
    cfg.cb = cb;
    cfg.metadata_url = "ftp://127.0.0.1:9";
    assert_int_equal(notice_start(&cfg, &p), -1);
    cfg.metadata_url = "127.0.0.1:9";
    assert_int_equal(notice_start(&cfg, &p), -1);
    cfg.metadata_url = "http://127.0.0.1:";
    assert_int_equal(notice_start(&cfg, &p), -1);
    cfg.metadata_url = "http://user:pw@127.0.0.1:9";
    assert_int_equal(notice_start(&cfg, &p), -1);
    cfg.metadata_url = "http://127.0.0.1 :9";
    assert_int_equal(notice_start(&cfg, &p), -1);
    cfg.metadata_url = "http://";
    assert_int_equal(notice_start(&cfg, &p), -1);
    cfg.metadata_url = "http://[::1]:9";
    assert_int_equal(notice_start(&cfg, &p), 0);
    notice_stop(p);
    cfg.metadata_url = "http://127.0.0.1:9/computeMetadata/whatever";
    assert_int_equal(notice_start(&cfg, &p), 0); /* path dropped, provider path kept */
    assert_string_equal(notice_provider(p), "gcp");
    notice_stop(p);
    cfg.provider = "none";
    assert_int_equal(notice_start(&cfg, &p), 0);
    assert_string_equal(notice_provider(p), "none");
    notice_stop(p);
    notice_stop(NULL);
    assert_string_equal(notice_provider(NULL), "none");
    assert_int_equal(notice_ack(NULL, "x"), -1);
}

/* A refusal is logged once however long each try took (libcurl words it
 * "... after 0 ms: ..." one poll and "... after 2 ms: ..." the next); a
 * different condition is still a new one. */
static void same_condition(void **state)
{
    (void)state;
    assert_true(notice_same_condition(
        "instance-action: imds: Failed to connect to 127.0.0.1 port 9 after 0 ms: Couldn't "
        "connect to server",
        "instance-action: imds: Failed to connect to 127.0.0.1 port 9 after 12 ms: Couldn't "
        "connect to server"));
    assert_true(notice_same_condition("timed out after 1500 ms", "timed out after 1501 ms"));
    assert_true(notice_same_condition("", ""));
    assert_false(notice_same_condition("x", ""));
    assert_false(notice_same_condition("", "x"));
    assert_false(notice_same_condition("HTTP 500", "HTTP 503"));
    assert_false(notice_same_condition("port 9 after 0 ms", "port 8 after 0 ms"));
    assert_false(notice_same_condition("after 10 ms", "after 10 s"));
    assert_false(notice_same_condition("after 10 ms", "after 10"));
    assert_false(notice_same_condition("after ms", "after 1 ms"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(iso_ok),         cmocka_unit_test(iso_bad),
        cmocka_unit_test(rfc1123_cases),  cmocka_unit_test(tencent_cases),
        cmocka_unit_test(aws_action),     cmocka_unit_test(aws_termtime),
        cmocka_unit_test(aws_rebalance),  cmocka_unit_test(gcp),
        cmocka_unit_test(azure),          cmocka_unit_test(aliyun_tencent),
        cmocka_unit_test(binary_garbage), cmocka_unit_test(detection),
        cmocka_unit_test(bad_config),     cmocka_unit_test(table),
        cmocka_unit_test(volcengine),     cmocka_unit_test(same_condition),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
