/* Unit tests of the shared module (common/ckpt_common.h): what
 * libckpt, the stores and ckptrun all read and print the same way. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "ckpt_common.h"
#include "ckpt_store.h" /* CKPT_ERR_MAX */

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
        assert_int_equal(ckpt__parse_duration_ms(ok[i].in, &ms), 0);
        assert_int_equal(ms, ok[i].ms);
    }
    static const char *const bad[] = { "", "s", "10x", "1h30", "-5s", "1..2s", "ms",
                                       "99999999999999999999h", "5 s", "1d" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(ckpt__parse_duration_ms(bad[i], &ms), -1);
    assert_int_equal(ckpt__parse_duration_ms(NULL, &ms), -1);
}


static void test_codec(void **state)
{
    ckpt_codec c;
    int lv;
    (void)state;
    assert_int_equal(ckpt__parse_codec("zstd", &c, &lv), 0);
    assert_int_equal(c, CKPT_CODEC_ZSTD);
    assert_int_equal(ckpt__parse_codec("zstd:19", &c, &lv), 0);
    assert_int_equal(lv, 19);
    assert_int_equal(ckpt__parse_codec("lz4", &c, &lv), 0);
    assert_int_equal(c, CKPT_CODEC_LZ4);
    assert_int_equal(ckpt__parse_codec("none", &c, &lv), 0);
    assert_int_equal(c, CKPT_CODEC_NONE);
    assert_int_equal(ckpt__parse_codec("zstd:0", &c, &lv), -1);
    assert_int_equal(ckpt__parse_codec("zstd:23", &c, &lv), -1);
    /* 20..22 once passed ckptrun and made the trainer's ckpt_open fail:
     * one rule for both now, levels 1..19 */
    for (int l = 0; l <= 23; l++) {
        char spec[16];
        snprintf(spec, sizeof spec, "zstd:%d", l);
        assert_int_equal(ckpt__parse_codec(spec, &c, &lv) == 0, l >= 1 && l <= 19);
    }
    assert_int_equal(ckpt__parse_codec("zstd:", &c, &lv), -1);
    assert_int_equal(ckpt__parse_codec("gzip", &c, &lv), -1);
    assert_string_equal(ckpt__codec_name(CKPT_CODEC_LZ4), "lz4");
    assert_string_equal(ckpt__codec_name(CKPT_CODEC_ZSTD), "zstd");
    assert_string_equal(ckpt__codec_name(CKPT_CODEC_NONE), "none");
    assert_string_equal(ckpt__codec_name(CKPT_CODEC_DEFAULT), "default");
    assert_string_equal(ckpt__codec_name((ckpt_codec)4), "?");
    assert_string_equal(ckpt__codec_name((ckpt_codec)-1), "?");
    assert_int_equal(ckpt__parse_codec("lz4:3", &c, &lv), -1); /* no levels */
    assert_int_equal(ckpt__parse_codec("none:1", &c, &lv), -1);
    assert_int_equal(ckpt__parse_codec("zstdx", &c, &lv), -1);
    assert_int_equal(ckpt__parse_codec("zst", &c, &lv), -1);
    assert_int_equal(ckpt__parse_codec(NULL, &c, &lv), -1);
}

/* CKPT_CODEC_MAP: every row is a public value with its bounds, parsed and
 * named from the map; the texts ckptrun prints come from it too. */
static void test_codec_map(void **state)
{
    const struct ckpt__codec_spec *sp;
    size_t i, n = 0;
    (void)state;
    for (i = 0; (sp = ckpt__codec_at(i)); i++, n++) {
        ckpt_codec c = CKPT_CODEC_DEFAULT;
        int lv = -1;
        char spec[32];
        assert_ptr_equal(ckpt__codec_spec(sp->id), sp);
        assert_string_equal(ckpt__codec_name(sp->id), sp->name);
        assert_int_equal(ckpt__parse_codec(sp->name, &c, &lv), 0);
        assert_int_equal(c, sp->id);
        assert_int_equal(lv, 0);
        if (sp->has_levels) {
            assert_true(sp->level_min >= 1 && sp->level_min <= sp->level_default &&
                        sp->level_default <= sp->level_max);
            for (int l = sp->level_min - 1; l <= sp->level_max + 1; l++) {
                snprintf(spec, sizeof spec, "%s:%d", sp->name, l);
                assert_int_equal(ckpt__parse_codec(spec, &c, &lv) == 0,
                                 l >= sp->level_min && l <= sp->level_max);
            }
        } else {
            assert_int_equal(sp->level_max, 0);
        }
        assert_non_null(strstr(CKPT_CODEC_RULE, sp->name));
        assert_non_null(strstr(CKPT_CODEC_FORMS, sp->name));
        assert_non_null(strstr(CKPT_CODEC_WORDS, sp->name));
    }
    assert_int_equal(n, 3);
    /* the public values did not move (ABI) and nothing else has a row */
    assert_int_equal(ckpt__codec_spec(CKPT_CODEC_NONE)->id, 1);
    assert_int_equal(ckpt__codec_spec(CKPT_CODEC_ZSTD)->id, 2);
    assert_int_equal(ckpt__codec_spec(CKPT_CODEC_LZ4)->id, 3);
    assert_null(ckpt__codec_spec(CKPT_CODEC_DEFAULT));
    assert_null(ckpt__codec_spec((ckpt_codec)4));
    assert_null(ckpt__codec_spec((ckpt_codec)255));
    /* zstd's levels stop where its ultra levels begin */
    assert_int_equal(ckpt__codec_spec(CKPT_CODEC_ZSTD)->level_max, 19);
    assert_int_equal(ckpt__codec_spec(CKPT_CODEC_ZSTD)->level_default, 1);
    /* speed classes: what a stop short of time falls back to */
    assert_int_equal(ckpt__codec_of_speed(CKPT_SPEED_COPY)->id, CKPT_CODEC_NONE);
    assert_int_equal(ckpt__codec_of_speed(CKPT_SPEED_FAST)->id, CKPT_CODEC_LZ4);
    assert_int_equal(ckpt__codec_of_speed(CKPT_SPEED_DENSE)->id, CKPT_CODEC_ZSTD);
    assert_null(ckpt__codec_of_speed((enum ckpt_codec_speed)7));
    /* the literals --help, the completions and the messages use */
    assert_string_equal(CKPT_CODEC_RULE, "zstd[:1-19], lz4, none");
    assert_string_equal(CKPT_CODEC_FORMS, " zstd[:1-19] lz4 none");
    assert_string_equal(CKPT_CODEC_WORDS, "zstd zstd:1 zstd:19 lz4 none");
}

static void test_signal(void **state)
{
    int sig = -1;
    (void)state;
    assert_int_equal(ckpt__parse_signal("none", &sig), 0);
    assert_int_equal(sig, 0);
    assert_int_equal(ckpt__parse_signal("USR1", &sig), 0);
    assert_int_equal(sig, SIGUSR1);
    assert_int_equal(ckpt__parse_signal("sigusr2", &sig), 0);
    assert_int_equal(sig, SIGUSR2);
    assert_int_equal(ckpt__parse_signal("15", &sig), 0);
    assert_int_equal(sig, SIGTERM);
    assert_int_equal(ckpt__parse_signal("KILL", &sig), -1);
    assert_int_equal(ckpt__parse_signal("9", &sig), -1);
    assert_int_equal(ckpt__parse_signal("SIGFOO", &sig), -1);
    assert_int_equal(ckpt__parse_signal("", &sig), -1);
    assert_int_equal(ckpt__parse_signal("65", &sig), -1);
    assert_string_equal(ckpt__signal_name(SIGUSR1), "SIGUSR1");
    assert_string_equal(ckpt__signal_name(SIGKILL), "SIGKILL");
    assert_string_equal(ckpt__signal_name(0), "none");
    assert_string_equal(ckpt__signal_name(SIGRTMIN + 1), "35"); /* no name: its number */
}


static void test_names(void **state)
{
    char out[160];
    (void)state;
    assert_true(ckpt__run_name_ok("llama-7b_run.1", 1));
    assert_false(ckpt__run_name_ok("", 1));
    assert_false(ckpt__run_name_ok(".hidden", 1));
    assert_false(ckpt__run_name_ok("a/b", 1));
    assert_false(ckpt__run_name_ok("a b", 1));
    /* a new run: 1..128, no leading dot; an existing one: what libckpt
     * accepted too (up to 200, a leading dot) */
    {
        char n128[130], n129[131], n200[202], n201[203];
        memset(n128, 'a', 128), n128[128] = 0;
        memset(n129, 'a', 129), n129[129] = 0;
        memset(n200, 'a', 200), n200[200] = 0;
        memset(n201, 'a', 201), n201[201] = 0;
        assert_true(ckpt__run_name_ok(n128, 1));
        assert_false(ckpt__run_name_ok(n129, 1));
        assert_true(ckpt__run_name_ok(n129, 0));
        assert_true(ckpt__run_name_ok(n200, 0));
        assert_false(ckpt__run_name_ok(n201, 0));
        assert_false(ckpt__run_name_ok(".hidden", 1));
        assert_true(ckpt__run_name_ok(".hidden", 0));
        assert_false(ckpt__run_name_ok(".", 0));
        assert_false(ckpt__run_name_ok("..", 0));
        assert_false(ckpt__run_name_ok("a/b", 0));
        assert_false(ckpt__run_name_ok("", 0));
    }
    assert_int_equal(ckpt__name_sanitize("my run (2)", out, sizeof out), 0);
    assert_string_equal(out, "my_run__2_");
    assert_int_equal(ckpt__name_sanitize("..x", out, sizeof out), 0);
    assert_string_equal(out, "x");
    assert_int_equal(ckpt__name_sanitize("...", out, sizeof out), -1);
}


static void test_formats(void **state)
{
    char b[32];
    (void)state;
    assert_string_equal(ckpt__fmt_bytes(999, b, sizeof b), "999 B");
    /* one convention: binary multiples, named so */
    assert_string_equal(ckpt__fmt_bytes(1500000, b, sizeof b), "1.43 MiB");
    assert_string_equal(ckpt__fmt_bytes(14ull << 30, b, sizeof b), "14.0 GiB");
    assert_string_equal(ckpt__fmt_bytes(1024, b, sizeof b), "1.00 KiB");
    assert_string_equal(ckpt__fmt_bytes(300ull << 20, b, sizeof b), "300 MiB");
    assert_string_equal(ckpt__fmt_rate(50.0 * 1048576, b, sizeof b), "50.0 MiB/s");
    assert_string_equal(ckpt__fmt_duration(250, b, sizeof b), "250ms");
    assert_string_equal(ckpt__fmt_duration(4200, b, sizeof b), "4.2s");
    assert_string_equal(ckpt__fmt_duration(62000, b, sizeof b), "1m02s");
    assert_string_equal(ckpt__fmt_duration(3720000, b, sizeof b), "1h02m");
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
        assert_int_equal(ckpt__parse_size(ok[i].in, &v, &si), 0);
        assert_true(v == ok[i].bytes);
        assert_int_equal(si, ok[i].si);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(ckpt__parse_size(bad[i], &v, NULL), -1);
    }
}


static void test_clock(void **state)
{
    struct timespec ts = { 0, 20 * 1000000L };
    int64_t m0 = ckpt__mono_ms(), w = ckpt__now_ms();
    uint64_t n0 = ckpt__mono_ns();
    (void)state;
    assert_true(w > 1600000000000LL); /* after 2020, in ms */
    nanosleep(&ts, NULL);
    assert_true(ckpt__mono_ms() - m0 >= 20);
    assert_true(ckpt__mono_ns() - n0 >= 20000000ull);
}

/* A thread started by ckpt__thread_start blocks every signal, and the
 * caller's own mask is left as it was. */
static void *report_mask(void *arg)
{
    sigset_t *out = arg;
    pthread_sigmask(SIG_SETMASK, NULL, out);
    return NULL;
}

static void test_thread_start(void **state)
{
    sigset_t in_thread, mine, before;
    pthread_t t;
    (void)state;
    pthread_sigmask(SIG_SETMASK, NULL, &before);
    assert_int_equal(ckpt__thread_start(&t, report_mask, &in_thread), 0);
    pthread_join(t, NULL);
    assert_true(sigismember(&in_thread, SIGTERM));
    assert_true(sigismember(&in_thread, SIGUSR1));
    assert_true(sigismember(&in_thread, SIGINT));
    pthread_sigmask(SIG_SETMASK, NULL, &mine);
    assert_int_equal(sigismember(&mine, SIGTERM), sigismember(&before, SIGTERM));
    assert_int_equal(sigismember(&mine, SIGUSR1), sigismember(&before, SIGUSR1));
}

/* The one error-detail helper of libckpt and the stores: truncated to the
 * buffer, NULL-safe; ckpt__seterr writes CKPT_ERR_MAX bytes. */
static void test_errf(void **state)
{
    char small[8], big[CKPT_ERR_MAX + 16], longer[CKPT_ERR_MAX * 2];
    (void)state;
    ckpt__errf(small, sizeof small, "%s %d", "abcdef", 42);
    assert_string_equal(small, "abcdef ");
    ckpt__errf(NULL, 100, "%s", "nothing written, no crash");
    memset(small, 'x', sizeof small);
    ckpt__errf(small, 0, "%s", "n 0: nothing written");
    assert_int_equal(small[0], 'x');
    memset(longer, 'y', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    memset(big, 'z', sizeof big);
    ckpt__seterr(big, "%s", longer);
    assert_int_equal(strlen(big), CKPT_ERR_MAX - 1);
    assert_int_equal(big[CKPT_ERR_MAX], 'z'); /* nothing past CKPT_ERR_MAX bytes */
    ckpt__seterr(NULL, "%s", "nothing");
}

/* The list of strings every store listing fills: copies, in order, past
 * its first growth (16), and empty and zeroed after free (free twice is
 * harmless, as a list freed on an error path and again at the end). */
static void test_strv(void **state)
{
    struct ckpt_strv l = { 0 };
    char buf[32];
    (void)state;
    for (int i = 0; i < 100; i++) {
        snprintf(buf, sizeof buf, "runs/r/events/%03d", i);
        assert_int_equal(ckpt__strv_push(&l, buf), 0);
        buf[0] = 'X'; /* the list holds its own copy */
    }
    assert_int_equal(l.n, 100);
    assert_true(l.cap >= 100);
    for (int i = 0; i < 100; i++) {
        snprintf(buf, sizeof buf, "runs/r/events/%03d", i);
        assert_string_equal(l.v[i], buf);
    }
    assert_int_equal(ckpt__strv_push(&l, ""), 0);
    assert_string_equal(l.v[100], "");
    ckpt__strv_free(&l);
    assert_null(l.v);
    assert_int_equal(l.n, 0);
    assert_int_equal(l.cap, 0);
    ckpt__strv_free(&l);
    assert_int_equal(ckpt__strv_push(&l, "again"), 0); /* usable after free */
    assert_string_equal(l.v[0], "again");
    ckpt__strv_free(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_duration),     cmocka_unit_test(test_codec),
        cmocka_unit_test(test_codec_map),    cmocka_unit_test(test_signal),
        cmocka_unit_test(test_names),        cmocka_unit_test(test_formats),
        cmocka_unit_test(test_sizes),        cmocka_unit_test(test_clock),
        cmocka_unit_test(test_thread_start), cmocka_unit_test(test_errf),
        cmocka_unit_test(test_strv),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
