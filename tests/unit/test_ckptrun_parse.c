/* Unit tests of ckptrun's own pure parsing helpers (ckptrun/base/parse.c) and
 * the command-line table (ckptrun/cli.c: suggestions for mistyped
 * subcommands and options, on the one edit-distance helper of parse.c). What it shares with
 * libckpt: test_common.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "cli.h"
#include "base/parse.h"
#include "cli_suggest.h"

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

static void test_edit_distance(void **state)
{
    (void)state;
    assert_int_equal(edit_distance("store", "store"), 0);
    assert_int_equal(edit_distance("stroe", "store"), 1); /* two neighbours swapped */
    assert_int_equal(edit_distance("stauts", "status"), 1);
    assert_int_equal(edit_distance("stor", "store"), 1);
    assert_int_equal(edit_distance("storre", "store"), 1);
    assert_int_equal(edit_distance("stare", "store"), 1);
    assert_int_equal(edit_distance("", "abc"), 3);
    assert_int_equal(edit_distance("abc", ""), 3);
    assert_int_equal(edit_distance("kitten", "sitting"), 3);
    assert_int_equal(edit_distance("ca", "abc"), 3); /* a swap is not edited again */
    assert_int_equal(edit_distance("job", "typo"), 4);
    {
        char longw[80];
        memset(longw, 'a', sizeof longw - 1);
        longw[sizeof longw - 1] = '\0';
        assert_true(edit_distance(longw, "a") == SIZE_MAX);
    }
}

static void test_suggest_closest(void **state)
{
    static const char *const runs[] = { "job", "job-2", "llama-7b-ft", NULL, "other" };
    size_t idx[4];
    (void)state;
    /* one edit: the closest, and every candidate as close */
    assert_int_equal(suggest_closest("jbo", runs, 5, idx, 4), 1);
    assert_int_equal(idx[0], 0);
    assert_int_equal(suggest_closest("jo", runs, 5, idx, 4), 2); /* a typo and a prefix */
    assert_int_equal(idx[0], 0);
    assert_int_equal(idx[1], 1);
    /* a prefix of 2 or more characters */
    assert_int_equal(suggest_closest("llama", runs, 5, idx, 4), 1);
    assert_int_equal(idx[0], 2);
    /* longer words allow more edits: 3 for 9 and more characters */
    assert_int_equal(suggest_closest("lama-7b-fy", runs, 5, idx, 4), 1);
    assert_int_equal(idx[0], 2);
    /* the closest only: job-3 is 1 from job-2, 2 from job */
    assert_int_equal(suggest_closest("job-3", runs, 5, idx, 4), 1);
    assert_int_equal(idx[0], 1);
    /* nothing close, the word itself, max */
    assert_int_equal(suggest_closest("typo", runs, 5, idx, 4), 0);
    assert_int_equal(suggest_closest("job", runs, 5, idx, 4), 1); /* job-2, not job itself */
    assert_int_equal(idx[0], 1);
    assert_int_equal(suggest_closest("jo", runs, 5, idx, 1), 1);
    assert_int_equal(suggest_closest("x", runs, 5, idx, 4), 0);
}

static void test_suggest_option(void **state)
{
    char buf[256];
    (void)state;
    assert_int_equal(cli_suggest_option("--stroe", CMD_LS, buf, sizeof buf), 1);
    assert_string_equal(buf, "did you mean --store?");
    assert_int_equal(cli_suggest_option("--stroe=file:///x", CMD_RUN, buf, sizeof buf), 1);
    assert_string_equal(buf, "did you mean --store?");
    /* each command's own options first: --stpe is --step for save */
    assert_int_equal(cli_suggest_option("--stpe", CMD_SAVE, buf, sizeof buf), 1);
    assert_string_equal(buf, "did you mean --step?");
    assert_int_equal(cli_suggest_option("--intervl", CMD_RUN, buf, sizeof buf), 1);
    assert_string_equal(buf, "did you mean --interval?");
    assert_int_equal(cli_suggest_option("--complete-makrer", CMD_RECOVER, buf, sizeof buf), 1);
    assert_string_equal(buf, "did you mean --complete-marker?");
    assert_int_equal(cli_suggest_option("--dryrun", CMD_GC, buf, sizeof buf), 1);
    assert_string_equal(buf, "did you mean --dry-run?");
    assert_int_equal(cli_suggest_option("--state-byte", CMD_DOCTOR, buf, sizeof buf), 1);
    assert_string_equal(buf, "did you mean --state-bytes?");
    /* then another command's, named */
    assert_int_equal(cli_suggest_option("--setle", CMD_LS, buf, sizeof buf), 1);
    assert_string_equal(buf, "did you mean --settle? (an option of ckptrun run)");
    /* a single dash before a long option's name */
    assert_int_equal(cli_suggest_option("-store", CMD_STATUS, buf, sizeof buf), 1);
    assert_string_equal(buf, "did you mean --store? (long options take two dashes)");
    /* a prefix of several options */
    assert_int_equal(cli_suggest_option("--s", CMD_LS, buf, sizeof buf), 2);
    assert_string_equal(buf, "it could be --store, --storage-class, --sse, ...");
    assert_int_equal(cli_suggest_option("--on-", CMD_RUN, buf, sizeof buf), 2);
    assert_string_equal(buf, "it could be --on-complete, --on-preempt or --on-failure");
    /* nothing close */
    assert_int_equal(cli_suggest_option("--frobnicate", CMD_LS, buf, sizeof buf), 0);
    assert_string_equal(buf, "");
    assert_int_equal(cli_suggest_option("-x", CMD_LS, buf, sizeof buf), 0);
    assert_int_equal(cli_suggest_option("---store", CMD_LS, buf, sizeof buf), 0);
    /* every option of every command is found from a one-letter slip */
    for (size_t i = 0; i < cli_nopts; i++) {
        char typo[80];
        size_t l = strlen(cli_opts[i].name);
        if (l < 4)
            continue;
        snprintf(typo, sizeof typo, "--%s", cli_opts[i].name);
        typo[2 + l - 1] = typo[2 + l - 1] == 'x' ? 'y' : 'x'; /* last letter wrong */
        for (int c = 0; c < CMD__COUNT; c++) {
            if (!(cli_opts[i].cmds & CMDBIT(c)))
                continue;
            assert_int_not_equal(cli_suggest_option(typo, c, buf, sizeof buf), 0);
            assert_non_null(strstr(buf, cli_opts[i].name));
        }
    }
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
        cmocka_unit_test(test_step_from_name),
        cmocka_unit_test(test_temporary_names),
        cmocka_unit_test(test_u64),
        cmocka_unit_test(test_suggest),
        cmocka_unit_test(test_fraction),
        cmocka_unit_test(test_edit_distance),
        cmocka_unit_test(test_suggest_closest),
        cmocka_unit_test(test_suggest_option),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
