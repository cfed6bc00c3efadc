/* test_ctlwire.c -- the client end of the control socket (libckpt/src/
 * ctlwire.c), shared by libckpt's connection and the preload shim: messages
 * are one line of valid JSON, escaped, never cut; the key carries only what
 * ckptrun makes; connect and send on a real socket pair. */
#include <errno.h>
#include <limits.h>
#include <sys/socket.h>
#include <sys/un.h>
#include "test_util.h"
#include "control/ctlwire.h"

static void builds_one_line_of_json(void **state)
{
    struct ckpt_ctl_msg m;
    (void)state;
    ckpt__ctl_begin(&m, "hello");
    ckpt__ctl_int(&m, "proto", 1);
    ckpt__ctl_int(&m, "pid", 0);
    ckpt__ctl_int(&m, "neg", -42);
    ckpt__ctl_int(&m, "min", LLONG_MIN);
    ckpt__ctl_bool(&m, "signals", true);
    ckpt__ctl_bool(&m, "off", false);
    ckpt__ctl_str(&m, "run", "r-1");
    assert_int_equal(ckpt__ctl_end(&m, false), 0);
    assert_string_equal(m.buf, "{\"type\":\"hello\",\"proto\":1,\"pid\":0,\"neg\":-42,"
                               "\"min\":-9223372036854775808,\"signals\":true,\"off\":false,"
                               "\"run\":\"r-1\"}");
    assert_int_equal(m.len, strlen(m.buf));

    ckpt__ctl_begin(&m, "file");
    assert_int_equal(ckpt__ctl_end(&m, true), 0);
    assert_string_equal(m.buf, "{\"type\":\"file\"}\n");
}

/* Quote, backslash and control characters escaped; other bytes (UTF-8)
 * pass as they are. */
static void strings_are_escaped(void **state)
{
    struct ckpt_ctl_msg m;
    (void)state;
    ckpt__ctl_begin(&m, "file");
    ckpt__ctl_str(&m, "path", "/d/a\"b\\c\nd\te\x01" "f\x7f\xc3\xa9");
    ckpt__ctl_str(&m, "none", NULL);
    assert_int_equal(ckpt__ctl_end(&m, true), 0);
    assert_string_equal(m.buf, "{\"type\":\"file\",\"path\":\"/d/a\\\"b\\\\c\\u000ad\\u0009e"
                               "\\u0001f\x7f\xc3\xa9\",\"none\":\"\"}\n");
}

/* At most CKPT_CTL_MSG_MAX bytes with the newline; one more is refused,
 * not cut (a cut path would name another file). */
static void long_messages_are_refused_whole(void **state)
{
    static char val[CKPT_CTL_MSG_MAX];
    struct ckpt_ctl_msg m;
    /* {"type":"x","v":"..."}\n = 20 bytes around the value */
    size_t fits = CKPT_CTL_MSG_MAX - 20;
    (void)state;
    memset(val, 'a', fits);
    val[fits] = '\0';
    ckpt__ctl_begin(&m, "x");
    ckpt__ctl_str(&m, "v", val);
    assert_int_equal(ckpt__ctl_end(&m, true), 0);
    assert_int_equal(m.len, CKPT_CTL_MSG_MAX);
    assert_int_equal(m.buf[m.len - 1], '\n');

    val[fits] = 'a';
    val[fits + 1] = '\0';
    ckpt__ctl_begin(&m, "x");
    ckpt__ctl_str(&m, "v", val);
    ckpt__ctl_int(&m, "n", 1); /* nothing is added once full */
    assert_true(m.full);
    assert_int_equal(ckpt__ctl_end(&m, true), -1);
    assert_true(m.len < CKPT_CTL_MSG_MAX);

    /* an escape that would straddle the limit is not half written */
    memset(val, '"', CKPT_CTL_MSG_MAX / 2);
    val[CKPT_CTL_MSG_MAX / 2] = '\0';
    ckpt__ctl_begin(&m, "x");
    ckpt__ctl_str(&m, "v", val);
    assert_int_equal(ckpt__ctl_end(&m, false), -1);
    assert_int_equal((m.len - 17) % 2, 0); /* {"type":"x","v":" is 17, then pairs */
}

static void key_is_hex_only(void **state)
{
    char key[CKPT_CTL_KEY_MAX];
    char long_key[100];
    (void)state;
    unsetenv("CKPT_SOCKET_KEY");
    ckpt__ctl_key(key);
    assert_string_equal(key, "");
    setenv("CKPT_SOCKET_KEY", "0123456789abcdef0123456789abcdef", 1);
    ckpt__ctl_key(key);
    assert_string_equal(key, "0123456789abcdef0123456789abcdef");
    setenv("CKPT_SOCKET_KEY", "abc\"},\"x", 1);
    ckpt__ctl_key(key);
    assert_string_equal(key, "abc");
    memset(long_key, 'f', sizeof long_key - 1);
    long_key[sizeof long_key - 1] = '\0';
    setenv("CKPT_SOCKET_KEY", long_key, 1);
    ckpt__ctl_key(key);
    assert_int_equal(strlen(key), CKPT_CTL_KEY_MAX - 1);
    unsetenv("CKPT_SOCKET_KEY");
}

static void connects_and_sends(void **state)
{
    char *dir = test_tmpdir(), path[600], buf[64], toolong[200];
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int srv, fd, peer;
    struct ckpt_ctl_msg m;
    (void)state;
    snprintf(path, sizeof path, "%s/s", dir);
    assert_true(strlen(path) < sizeof sa.sun_path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    srv = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_int_equal(bind(srv, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(srv, 1), 0);

    fd = ckpt__ctl_socket(2);
    assert_true(fd >= 0);
    assert_int_equal(ckpt__ctl_connect(fd, path), 0);
    peer = accept(srv, NULL, NULL);
    assert_true(peer >= 0);
    ckpt__ctl_begin(&m, "ping");
    assert_int_equal(ckpt__ctl_end(&m, true), 0);
    assert_int_equal(ckpt__ctl_send(fd, m.buf, m.len), 0);
    assert_int_equal(read(peer, buf, sizeof buf), (ssize_t)m.len);
    assert_memory_equal(buf, m.buf, m.len);

    /* a closed peer is an error, never a SIGPIPE */
    close(peer);
    for (int i = 0; i < 100 && ckpt__ctl_send(fd, m.buf, m.len) == 0; i++)
        ;
    assert_int_equal(ckpt__ctl_send(fd, m.buf, m.len), -1);
    close(fd);

    memset(toolong, 'x', sizeof toolong - 1);
    toolong[0] = '/';
    toolong[sizeof toolong - 1] = '\0';
    fd = ckpt__ctl_socket(0);
    errno = 0;
    assert_int_equal(ckpt__ctl_connect(fd, toolong), -1);
    assert_int_equal(errno, ENAMETOOLONG);
    unlink(path);
    assert_int_equal(ckpt__ctl_connect(fd, path), -1);
    close(fd);
    close(srv);
    test_rmrf(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(builds_one_line_of_json),
        cmocka_unit_test(strings_are_escaped),
        cmocka_unit_test(long_messages_are_refused_whole),
        cmocka_unit_test(key_is_hex_only),
        cmocka_unit_test(connects_and_sends),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
