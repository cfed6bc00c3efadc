/* ctlwire.c -- the client end of the control socket (ctlwire.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>

#include "control/ctlwire.h"

void ckpt__ctl_key(char out[CKPT_CTL_KEY_MAX])
{
    const char *key = getenv("CKPT_SOCKET_KEY");
    size_t i = 0;
    for (; key && i + 1 < CKPT_CTL_KEY_MAX &&
           ((key[i] >= '0' && key[i] <= '9') || (key[i] >= 'a' && key[i] <= 'f'));
         i++)
        out[i] = key[i];
    out[i] = '\0';
}

int ckpt__ctl_socket(int send_timeout_s)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && send_timeout_s > 0) {
        struct timeval tv = { send_timeout_s, 0 };
        /* best effort: without it a send can only block longer */
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    }
    return fd;
}

int ckpt__ctl_connect(int fd, const char *path)
{
    struct sockaddr_un sa;
    size_t n = strlen(path);

    if (n >= sizeof sa.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, path, n + 1);
    return connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 ? 0 : -1;
}

int ckpt__ctl_send(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Room kept for what ckpt__ctl_end() adds: '}', '\n'. */
#define TAIL 2

static void put(struct ckpt_ctl_msg *m, const char *s, size_t n)
{
    if (m->full || m->len + n + TAIL > CKPT_CTL_MSG_MAX) {
        m->full = true;
        return;
    }
    memcpy(m->buf + m->len, s, n);
    m->len += n;
}

/* s as the body of a JSON string. */
static void put_escaped(struct ckpt_ctl_msg *m, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    for (; *s && !m->full; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char esc[2] = { '\\', (char)c };
            put(m, esc, 2);
        } else if (c < 0x20) {
            char esc[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };
            put(m, esc, 6);
        } else {
            /* bytes >= 0x80 pass as they are: UTF-8 names stay readable;
             * other encodings are the documented limit */
            put(m, (const char *)&c, 1);
        }
    }
}

/* ,"key": (nothing before the first field) */
static void put_key(struct ckpt_ctl_msg *m, const char *key)
{
    put(m, ",\"", 2);
    put_escaped(m, key);
    put(m, "\":", 2);
}

void ckpt__ctl_begin(struct ckpt_ctl_msg *m, const char *type)
{
    m->len = 0;
    m->full = false;
    put(m, "{\"type\":\"", 9);
    put_escaped(m, type);
    put(m, "\"", 1);
}

void ckpt__ctl_str(struct ckpt_ctl_msg *m, const char *key, const char *val)
{
    put_key(m, key);
    put(m, "\"", 1);
    put_escaped(m, val ? val : "");
    put(m, "\"", 1);
}

void ckpt__ctl_int(struct ckpt_ctl_msg *m, const char *key, long long val)
{
    char digits[24];
    size_t i = sizeof digits;
    /* by hand: snprintf is not async-signal-safe */
    unsigned long long u = val < 0 ? 0ull - (unsigned long long)val : (unsigned long long)val;
    do {
        digits[--i] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (val < 0)
        digits[--i] = '-';
    put_key(m, key);
    put(m, digits + i, sizeof digits - i);
}

void ckpt__ctl_bool(struct ckpt_ctl_msg *m, const char *key, bool val)
{
    put_key(m, key);
    if (val)
        put(m, "true", 4);
    else
        put(m, "false", 5);
}

int ckpt__ctl_end(struct ckpt_ctl_msg *m, bool newline)
{
    if (m->full) {
        m->buf[m->len] = '\0';
        return -1;
    }
    m->buf[m->len++] = '}'; /* room kept by put() */
    if (newline)
        m->buf[m->len++] = '\n';
    m->buf[m->len] = '\0';
    return 0;
}
