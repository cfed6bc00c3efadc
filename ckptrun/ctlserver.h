/*
 * ctlserver.h -- ckptrun's side of the control socket (docs/CONTROL.md).
 *
 * A Unix stream socket in a private 0700 directory; each connected child
 * process (libckpt, or the preload shim) sends one JSON object per line.
 * Driven by the supervisor's poll loop: no threads, no blocking I/O.
 */
#ifndef CKPTRUN_CTLSERVER_H
#define CKPTRUN_CTLSERVER_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#define CTL_MAX_CLIENTS 16
#define CTL_MAX_LINE 4096

enum ctl_ev_type { CTL_HELLO, CTL_SAVING, CTL_COMMITTED, CTL_FAILED, CTL_FILE, CTL_GONE };

struct ctl_event {
    enum ctl_ev_type type;
    int client;               /* slot of the sender */
    int pid;                  /* hello */
    uint64_t items;           /* hello */
    uint64_t step;            /* saving, committed, failed */
    uint64_t seq;             /* committed */
    uint64_t bytes, stored;   /* committed: raw, new compressed */
    double seconds;           /* committed */
    const char *error;        /* failed */
    const char *detail;       /* failed */
    const char *path;         /* file */
    const char *file_event;   /* file: "closed" | "renamed" */
};

typedef void (*ctl_event_fn)(void *user, const struct ctl_event *ev);

struct ctl;

/* Create the private directory and listening socket. path receives the
 * socket path (for CKPT_SOCKET). @return 0 or -1 (errno; message logged). */
int ctl_open(struct ctl **out, char *path, size_t n);
/* Close every connection, remove the socket and its directory. NULL-safe. */
void ctl_close(struct ctl *c);

/* Append the pollfds to watch to fds[*n..max). */
void ctl_pollfds(struct ctl *c, struct pollfd *fds, int *n, int max);
/* Handle readiness reported in fds[0..n) (only our own fds are looked at);
 * calls fn for each message received. */
void ctl_handle(struct ctl *c, const struct pollfd *fds, int n, ctl_event_fn fn, void *user);

/* Number of connections that have sent "hello". */
int ctl_connected(const struct ctl *c);
/* Send a request to every connection that sent "hello". codec may be NULL.
 * @return the number of connections it was written to. */
int ctl_request(struct ctl *c, const char *reason, int64_t deadline_ms, const char *codec,
                uint64_t id);

#endif
