/* Unit tests of ckptrun's own pure parsing helpers (ckptrun/parse.c) and
 * the command-line table (ckptrun/cli.c: suggestions for mistyped
 * subcommands). What it shares with libckpt: test_common.c. */
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

static void test_temporary_names(void **state)
{
    (void)state;
    assert_true(name_is_temporary(".checkpoint-5"));
    assert_true(name_is_temporary("tmp-checkpoint-5"));
    assert_true(name_is_temporary("model.pt.tmp"));
    assert_true(name_is_temporary("x.partial"));
    assert_false(name_is_temporary("checkpoint-5"));
    assert_false(name_is_temporary("epoch=1-step=3.ckpt"));
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
        cmocka_unit_test(test_step_from_name), cmocka_unit_test(test_temporary_names),
        cmocka_unit_test(test_u64),            cmocka_unit_test(test_suggest),
        cmocka_unit_test(test_fraction),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
