/* Unit tests of ckptrun's pure parsing helpers (ckptrun/parse.c), the rules
 * it shares with libckpt (libckpt/src/rules.c) and the command-line table
 * (ckptrun/cli.c: suggestions for mistyped subcommands). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "cli.h"
#include "parse.h"
#include "rules.h"
#include "ckpt_store.h"

/* libckpt's own readers of the same settings (internal API) */
ckpt_status ckpt__codec_parse(const char *s, ckpt_codec *codec, int *level);

static void test_duration(void **state)
{
    uint64_t ms = 0;
    (void)state;
    static const struct { const char *in; uint64_t ms; } ok[] = {
        { "250ms", 250 }, { "90s", 90000 }, { "30m", 1800000 }, { "1h", 3600000 },
        { "1h30m", 5400000 }, { "2", 2000 }, { "0.5s", 500 }, { "1.5h", 5400000 },
        { "0", 0 }, { "1m30s", 90000 }, { "0.001s", 1 },
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        assert_int_equal(parse_duration_ms(ok[i].in, &ms), 0);
        assert_int_equal(ms, ok[i].ms);
    }
    static const char *const bad[] = { "", "s", "10x", "1h30", "-5s", "1..2s", "ms",
                                       "99999999999999999999h", "5 s", "1d" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(parse_duration_ms(bad[i], &ms), -1);
    assert_int_equal(parse_duration_ms(NULL, &ms), -1);
}

static void test_step_from_name(void **state)
{
    uint64_t step = 0;
    (void)state;
    static const struct { const char *in; uint64_t step; } ok[] = {
        { "checkpoint-100", 100 },
        { "epoch=1-step=300.ckpt", 300 },
        { "epoch=12-step=4500-v1.ckpt", 4500 },
        { "step_42", 42 },
        { "global-step-7", 7 },
        { "model_epoch3.pt", 3 },
        { "ckpt_000120.pt", 120 },
        { "Checkpoint-5", 5 },
        { "step=9-checkpoint-11", 11 }, /* the last keyword wins */
        { "run7-step=8", 8 },
        { "weights-2024-01-05", 5 },    /* no keyword: last integer */
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        step = 0;
        assert_int_equal(parse_step_from_name(ok[i].in, &step), 1);
        assert_int_equal(step, ok[i].step);
    }
    assert_int_equal(parse_step_from_name("last.ckpt", &step), 0);
    assert_int_equal(parse_step_from_name("best", &step), 0);
    assert_int_equal(parse_step_from_name("", &step), 0);
    /* A number too long to be a step is not wrapped around. */
    assert_int_equal(parse_step_from_name("x12345678901234567890123", &step), 0);
    /* "step-" with no digits falls back to the last integer. */
    assert_int_equal(parse_step_from_name("v2-step-final", &step), 1);
    assert_int_equal(step, 2);
}

static void test_codec(void **state)
{
    ckpt_codec c;
    int lv;
    (void)state;
    assert_int_equal(parse_codec("zstd", &c, &lv), 0);
    assert_int_equal(c, CKPT_CODEC_ZSTD);
    assert_int_equal(parse_codec("zstd:19", &c, &lv), 0);
    assert_int_equal(lv, 19);
    assert_int_equal(parse_codec("lz4", &c, &lv), 0);
    assert_int_equal(c, CKPT_CODEC_LZ4);
    assert_int_equal(parse_codec("none", &c, &lv), 0);
    assert_int_equal(c, CKPT_CODEC_NONE);
    assert_int_equal(parse_codec("zstd:0", &c, &lv), -1);
    assert_int_equal(parse_codec("zstd:23", &c, &lv), -1);
    /* 20..22 passed ckptrun and made the trainer's ckpt_open fail: one rule
     * now, and both sides agree on every level */
    for (int l = 0; l <= 23; l++) {
        char spec[16];
        ckpt_codec c2;
        int lv2;
        snprintf(spec, sizeof spec, "zstd:%d", l);
        assert_int_equal(parse_codec(spec, &c, &lv) == 0,
                         ckpt__codec_parse(spec, &c2, &lv2) == CKPT_OK);
        assert_int_equal(parse_codec(spec, &c, &lv) == 0, l >= 1 && l <= 19);
    }
    assert_int_equal(parse_codec("zstd:", &c, &lv), -1);
    assert_int_equal(parse_codec("gzip", &c, &lv), -1);
    assert_string_equal(codec_name(CKPT_CODEC_LZ4), "lz4");
}

static void test_signal(void **state)
{
    int sig = -1;
    (void)state;
    assert_int_equal(parse_signal("none", &sig), 0);
    assert_int_equal(sig, 0);
    assert_int_equal(parse_signal("USR1", &sig), 0);
    assert_int_equal(sig, SIGUSR1);
    assert_int_equal(parse_signal("sigusr2", &sig), 0);
    assert_int_equal(sig, SIGUSR2);
    assert_int_equal(parse_signal("15", &sig), 0);
    assert_int_equal(sig, SIGTERM);
    assert_int_equal(parse_signal("KILL", &sig), -1);
    assert_int_equal(parse_signal("9", &sig), -1);
    assert_int_equal(parse_signal("SIGFOO", &sig), -1);
    assert_int_equal(parse_signal("", &sig), -1);
    assert_int_equal(parse_signal("65", &sig), -1);
    assert_string_equal(signal_name(SIGUSR1), "SIGUSR1");
    assert_string_equal(signal_name(SIGKILL), "SIGKILL");
    assert_string_equal(signal_name(0), "none");
}

static void test_names(void **state)
{
    char out[160];
    (void)state;
    assert_true(run_name_valid("llama-7b_run.1"));
    assert_false(run_name_valid(""));
    assert_false(run_name_valid(".hidden"));
    assert_false(run_name_valid("a/b"));
    assert_false(run_name_valid("a b"));
    /* a new run: 1..128, no leading dot; an existing one: what libckpt
     * accepted too (up to 200, a leading dot) */
    {
        char n128[130], n129[131], n200[202], n201[203];
        memset(n128, 'a', 128), n128[128] = 0;
        memset(n129, 'a', 129), n129[129] = 0;
        memset(n200, 'a', 200), n200[200] = 0;
        memset(n201, 'a', 201), n201[201] = 0;
        assert_true(run_name_valid(n128));
        assert_false(run_name_valid(n129));
        assert_true(run_name_openable(n129));
        assert_true(run_name_openable(n200));
        assert_false(run_name_openable(n201));
        assert_false(run_name_valid(".hidden"));
        assert_true(run_name_openable(".hidden"));
        assert_false(run_name_openable("."));
        assert_false(run_name_openable(".."));
        assert_false(run_name_openable("a/b"));
        assert_false(run_name_openable(""));
    }
    assert_int_equal(name_sanitize("my run (2)", out, sizeof out), 0);
    assert_string_equal(out, "my_run__2_");
    assert_int_equal(name_sanitize("..x", out, sizeof out), 0);
    assert_string_equal(out, "x");
    assert_int_equal(name_sanitize("...", out, sizeof out), -1);
    assert_true(name_is_temporary(".checkpoint-5"));
    assert_true(name_is_temporary("tmp-checkpoint-5"));
    assert_true(name_is_temporary("model.pt.tmp"));
    assert_true(name_is_temporary("x.partial"));
    assert_false(name_is_temporary("checkpoint-5"));
    assert_false(name_is_temporary("epoch=1-step=3.ckpt"));
}

static void test_formats(void **state)
{
    char b[32];
    (void)state;
    assert_string_equal(fmt_bytes(999, b, sizeof b), "999 B");
    /* one convention: binary multiples, named so */
    assert_string_equal(fmt_bytes(1500000, b, sizeof b), "1.43 MiB");
    assert_string_equal(fmt_bytes(14ull << 30, b, sizeof b), "14.0 GiB");
    assert_string_equal(fmt_bytes(1024, b, sizeof b), "1.00 KiB");
    assert_string_equal(fmt_bytes(300ull << 20, b, sizeof b), "300 MiB");
    assert_string_equal(fmt_rate(50.0 * 1048576, b, sizeof b), "50.0 MiB/s");
    assert_string_equal(fmt_duration(250, b, sizeof b), "250ms");
    assert_string_equal(fmt_duration(4200, b, sizeof b), "4.2s");
    assert_string_equal(fmt_duration(62000, b, sizeof b), "1m02s");
    assert_string_equal(fmt_duration(3720000, b, sizeof b), "1h02m");
}

static void test_sizes(void **state)
{
    static const struct { const char *in; uint64_t bytes; int si; } ok[] = {
        { "4096", 4096, 0 },      { "512M", 512ull << 20, 0 }, { "7GiB", 7ull << 30, 0 },
        { "7G", 7ull << 30, 0 },  { "1.5G", 3ull << 29, 0 },   { "800k", 800 << 10, 0 },
        { "50MiB", 50ull << 20, 0 }, { "2Ti", 2ull << 40, 0 }, { "10B", 10, 0 },
        { "50MB", 50000000, 1 },  { "1kB", 1000, 1 },          { "2GB", 2000000000, 1 },
        { "1.5KB", 1500, 1 },     { "1TB", 1000000000000ull, 1 },
    };
    static const char *const bad[] = { "", "0", "M", "1.5.5G", "-1M", "1Q", "1MBs",
                                       "1 M", "0x10", "1e3", "inf", "99999999999999999999",
                                       "9000P", "8E" };
    uint64_t v;
    int si;
    (void)state;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        si = -1;
        assert_int_equal(parse_size(ok[i].in, &v, &si), 0);
        assert_true(v == ok[i].bytes);
        assert_int_equal(si, ok[i].si);
        /* the store's reader (CKPT_MAX_RATE, CKPT_PACK_BYTES) agrees */
        assert_true(ckpt_store_parse_size(ok[i].in) == ok[i].bytes);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(parse_size(bad[i], &v, NULL), -1);
        assert_true(ckpt_store_parse_size(bad[i]) == 0);
    }
}

static void test_fraction(void **state)
{
    static const struct { const char *in; double v; } ok[] = {
        { "0.02", 0.02 }, { "2%", 0.02 }, { "1", 1.0 }, { "100%", 1.0 }, { ".5", 0.5 },
    };
    static const char *const bad[] = { "", "0", "0%", "1.5", "101%", "-0.1", "2 %", "x",
                                       "2%%", "0.5x" };
    double v;
    (void)state;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        assert_int_equal(parse_fraction(ok[i].in, &v), 0);
        assert_true(v > ok[i].v - 1e-12 && v < ok[i].v + 1e-12);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(parse_fraction(bad[i], &v), -1);
}

static void test_suggest(void **state)
{
    (void)state;
    assert_string_equal(cli_suggest("stauts"), "status");
    assert_string_equal(cli_suggest("statsu"), "status");
    assert_string_equal(cli_suggest("list"), "ls");
    assert_string_equal(cli_suggest("version"), "--version");
    assert_string_equal(cli_suggest("restor"), "restore");
    assert_string_equal(cli_suggest("verfy"), "verify");
    assert_string_equal(cli_suggest("rn"), "run");
    assert_null(cli_suggest("python3"));
    assert_null(cli_suggest("torchrun"));
    assert_int_equal(cli_cmd_find("doctor"), CMD_DOCTOR);
    assert_int_equal(cli_cmd_find("stauts"), -1);
}

static void test_u64(void **state)
{
    uint64_t v;
    (void)state;
    assert_int_equal(parse_u64("18446744073709551615", &v), 0);
    assert_true(v == UINT64_MAX);
    assert_int_equal(parse_u64("18446744073709551616", &v), -1);
    assert_int_equal(parse_u64("12a", &v), -1);
    assert_int_equal(parse_u64("", &v), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_duration), cmocka_unit_test(test_step_from_name),
        cmocka_unit_test(test_codec),    cmocka_unit_test(test_signal),
        cmocka_unit_test(test_names),    cmocka_unit_test(test_formats),
        cmocka_unit_test(test_u64),      cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_suggest),  cmocka_unit_test(test_fraction),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
