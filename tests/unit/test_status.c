/* test_status.c -- the status table (CKPT_STATUS_MAP in ckpt.h): every code
 * has its message, its name and its class, and no value moved. */
#include "test_util.h"
#include "ckpt.h"

struct row {
    ckpt_status st;
    int value;
    const char *name;
    ckpt_status_class cls;
    const char *msg;
};

static const struct row rows[] = {
#define ROW(name, value, cls, msg) { CKPT_##name, value, "CKPT_" #name, CKPT_CLASS_##cls, msg },
    CKPT_STATUS_MAP(ROW)
#undef ROW
};
#define NROWS (sizeof rows / sizeof rows[0])

/* Every row is served by the three functions, with its own text. */
static void every_code_has_a_message_name_and_class(void **state)
{
    (void)state;
    for (size_t i = 0; i < NROWS; i++) {
        const struct row *r = &rows[i];
        assert_int_equal((int)r->st, r->value);
        assert_string_equal(ckpt_strerror(r->st), r->msg);
        assert_string_not_equal(ckpt_strerror(r->st), "unknown status");
        assert_true(strlen(r->msg) > 3);
        assert_string_equal(ckpt_status_name(r->st), r->name);
        assert_int_equal(ckpt_status_classify(r->st), r->cls);
        for (size_t j = 0; j < i; j++) {
            assert_string_not_equal(rows[j].name, r->name);
            assert_string_not_equal(rows[j].msg, r->msg);
        }
    }
}

/* Values are dense from 0 (appended, never renumbered) and those published
 * in 0.1.0 keep their numbers; the retry classes are the ones callers rely on. */
static void values_and_classes_are_stable(void **state)
{
    static const struct {
        ckpt_status st;
        int value;
        ckpt_status_class cls;
    } pinned[] = {
        { CKPT_OK, 0, CKPT_CLASS_OK },
        { CKPT_E_INVAL, 1, CKPT_CLASS_USAGE },
        { CKPT_E_NOMEM, 2, CKPT_CLASS_PERMANENT },
        { CKPT_E_NOENT, 3, CKPT_CLASS_PERMANENT },
        { CKPT_E_IO, 4, CKPT_CLASS_PERMANENT },
        { CKPT_E_CORRUPT, 5, CKPT_CLASS_CORRUPT },
        { CKPT_E_SIZE, 6, CKPT_CLASS_USAGE },
        { CKPT_E_EXISTS, 7, CKPT_CLASS_USAGE },
        { CKPT_E_PRECONDITION, 8, CKPT_CLASS_PERMANENT },
        { CKPT_E_AUTH, 9, CKPT_CLASS_PERMANENT },
        { CKPT_E_UNREACHABLE, 10, CKPT_CLASS_RETRYABLE },
        { CKPT_E_TRANSIENT, 11, CKPT_CLASS_RETRYABLE },
        { CKPT_E_THROTTLED, 12, CKPT_CLASS_THROTTLED },
        { CKPT_E_UNSUPPORTED, 13, CKPT_CLASS_PERMANENT },
        { CKPT_E_BUSY, 14, CKPT_CLASS_PERMANENT },
        { CKPT_E_CONFIG, 15, CKPT_CLASS_USAGE },
        { CKPT_E_FENCED, 16, CKPT_CLASS_PERMANENT },
        { CKPT_E_NOSPACE, 17, CKPT_CLASS_PERMANENT },
        { CKPT_E_UNSAFE, 18, CKPT_CLASS_PERMANENT },
        { CKPT_E_CUDA, 19, CKPT_CLASS_PERMANENT },
        { CKPT_E_MISMATCH, 20, CKPT_CLASS_USAGE },
        { CKPT_E_INTERNAL, 21, CKPT_CLASS_PERMANENT },
        { CKPT_E_PERM, 22, CKPT_CLASS_PERMANENT },
        { CKPT_E_CHANGED, 23, CKPT_CLASS_PERMANENT },
    };
    (void)state;
    for (size_t i = 0; i < NROWS; i++)
        assert_int_equal(rows[i].value, (int)i);
    assert_true(NROWS >= sizeof pinned / sizeof pinned[0]);
    for (size_t i = 0; i < sizeof pinned / sizeof pinned[0]; i++) {
        assert_int_equal((int)pinned[i].st, pinned[i].value);
        assert_int_equal(ckpt_status_classify(pinned[i].st), pinned[i].cls);
    }
}

/* A value no row has (a newer library's, or garbage) still gets text. */
static void unknown_values_are_named_as_such(void **state)
{
    ckpt_status beyond = (ckpt_status)NROWS, negative = (ckpt_status)-1;
    (void)state;
    assert_string_equal(ckpt_strerror(beyond), "unknown status");
    assert_string_equal(ckpt_status_name(beyond), "unknown");
    assert_int_equal(ckpt_status_classify(beyond), CKPT_CLASS_PERMANENT);
    assert_string_equal(ckpt_strerror(negative), "unknown status");
    assert_string_equal(ckpt_status_name(negative), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_code_has_a_message_name_and_class),
        cmocka_unit_test(values_and_classes_are_stable),
        cmocka_unit_test(unknown_values_are_named_as_such),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
