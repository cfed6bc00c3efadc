/*
 * ctlwire.h -- the client end of ckptrun's control socket (docs/CONTROL.md):
 * connecting, the run's key, building one message, sending it. Shared by
 * the context's connection (control.c) and the preload shim's own
 * (preload/files.c), which say different things on the same wire.
 *
 * Everything here is async-signal-safe, allocates nothing and leaves errno
 * to its documented use, so the shim may call it on the paths it
 * interposes (close, rename) whatever the program was doing.
 */
#ifndef CKPT_CTLWIRE_H
#define CKPT_CTLWIRE_H

#include <stdbool.h>
#include <stddef.h>

/* One message: a JSON object on one line, at most this many bytes with its
 * newline (docs/CONTROL.md). */
#define CKPT_CTL_MSG_MAX 4096
/* CKPT_SOCKET_KEY as sent: at most 64 hex digits (ckptrun makes 32), NUL. */
#define CKPT_CTL_KEY_MAX 65

/* The run's key for `key` fields: the leading lowercase hex digits of
 * CKPT_SOCKET_KEY, at most 64 ("" when unset). Any other character ends
 * it: a key ckptrun did not make cannot match anyway, and what is sent
 * needs no escaping. (Reads the environment: not async-signal-safe.) */
void ckpt__ctl_key(char out[CKPT_CTL_KEY_MAX]);

/* A socket for the control socket: an AF_UNIX stream, close-on-exec.
 * `send_timeout_s` > 0 bounds each send on it, so a stuck ckptrun cannot
 * hang the sender. @return the fd, or -1 with errno. */
int ckpt__ctl_socket(int send_timeout_s);
/* Connect `fd` (from ckpt__ctl_socket) to the control socket at `path`.
 * @return 0, or -1 with errno (ENAMETOOLONG: `path` does not fit a socket
 * address); the caller then closes fd, with its own close (the shim's is
 * libc's, not its wrapper). */
int ckpt__ctl_connect(int fd, const char *path);

/* Send `len` bytes whole (MSG_NOSIGNAL: a closed peer is an error, not a
 * SIGPIPE; EINTR retried). @return 0, or -1 with errno. */
int ckpt__ctl_send(int fd, const void *buf, size_t len);

/* Building a message in place:
 *   struct ckpt_ctl_msg m;
 *   ckpt__ctl_begin(&m, "file");
 *   ckpt__ctl_str(&m, "path", path);
 *   ckpt__ctl_int(&m, "pid", getpid());
 *   if (ckpt__ctl_end(&m) == 0) ckpt__ctl_send(fd, m.buf, m.len);
 * Strings are escaped as JSON (quote, backslash, control characters); other
 * bytes pass as they are, so UTF-8 stays readable. A message that does not
 * fit is marked and refused by ckpt__ctl_end(), never cut. */
struct ckpt_ctl_msg {
    char buf[CKPT_CTL_MSG_MAX + 1]; /* + NUL */
    size_t len;                     /* bytes in buf */
    bool full;                      /* something did not fit */
};
void ckpt__ctl_begin(struct ckpt_ctl_msg *m, const char *type);
void ckpt__ctl_str(struct ckpt_ctl_msg *m, const char *key, const char *val);
void ckpt__ctl_int(struct ckpt_ctl_msg *m, const char *key, long long val);
void ckpt__ctl_bool(struct ckpt_ctl_msg *m, const char *key, bool val);
/* Close the object. `newline`: end it with '\n', ready to send (else the
 * caller adds it). buf is NUL-terminated either way.
 * @return 0, or -1 when the message does not fit (do not send it). */
int ckpt__ctl_end(struct ckpt_ctl_msg *m, bool newline);

#endif
