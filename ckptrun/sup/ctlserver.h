/*
 * ctlserver.h -- ckptrun's side of the control socket (docs/CONTROL.md).
 *
 * A Unix stream socket in a private 0700 directory; each connected child
 * process (libckpt, the preload shim, the Python helper) sends one JSON
 * object per line. Driven by the supervisor's poll loop: no threads, no
 * blocking I/O.
 *
 * Trust: any process of the same user could connect. A connection counts
 * only once it is known to come from the job: its peer (SO_PEERCRED at
 * accept) is a descendant of this ckptrun, or one of its messages carries
 * the run's key (handed to the child as CKPT_SOCKET_KEY, for processes the
 * job starts outside our tree, e.g. through srun). Messages of other
 * connections are ignored (logged once per connection).
 */
#ifndef CKPTRUN_CTLSERVER_H
#define CKPTRUN_CTLSERVER_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#define CTL_MAX_CLIENTS 16
#define CTL_MAX_LINE 4096

enum ctl_ev_type {
    CTL_HELLO,                /* libckpt: saves through the library */
    CTL_SAVING, CTL_COMMITTED, CTL_FAILED, CTL_FILE,
    CTL_GONE,                 /* a client that said hello or helper disconnected */
    CTL_HELPER,               /* a process that writes its own files (Python helper) */
    CTL_SIGNAL,               /* the sender took a signal (SIGTERM, SIGINT) as a stop */
    CTL_STOPPING_ACK,         /* the sender acknowledged `stopping` */
};

/* Kinds of clients, for ctl_request. */
enum { CTL_KIND_LIB = 1, CTL_KIND_FILES = 2 };

struct ctl_event {
    enum ctl_ev_type type;
    int client;               /* slot of the sender */
    int kind;                 /* CTL_KIND_* of the sender, 0 if neither */
    int pid;                  /* hello, helper, signal, gone */
    uint64_t items;           /* hello */
    uint64_t step;            /* saving, committed, failed; file (has_step) */
    uint64_t seq;             /* committed */
    uint64_t bytes, stored;   /* committed: raw, new compressed */
    double seconds;           /* committed */
    const char *error;        /* failed */
    const char *detail;       /* failed */
    const char *path;         /* file */
    const char *file_event;   /* file: "closed" | "renamed" */
    int has_step;             /* file: carries the trainer's step (saved()) */
    const char *signal;       /* signal: "SIGTERM" | "SIGINT" */
    int64_t mono_ms;          /* signal: when it arrived (CLOCK_MONOTONIC ms), 0 unknown */
};

typedef void (*ctl_event_fn)(void *user, const struct ctl_event *ev);

struct ctl;

/* Create the private directory and listening socket, and the run's key.
 * path receives the socket path (for CKPT_SOCKET). @return 0 or -1 (errno;
 * message logged). */
int ctl_open(struct ctl **out, char *path, size_t n);
/* The key clients outside our process tree present (CKPT_SOCKET_KEY). */
const char *ctl_key(const struct ctl *c);
/* Close every connection, remove the socket and its directory. NULL-safe. */
void ctl_close(struct ctl *c);

/* Append the pollfds to watch to fds[*n..max). */
void ctl_pollfds(struct ctl *c, struct pollfd *fds, int *n, int max);
/* Handle readiness reported in fds[0..n) (only our own fds are looked at);
 * calls fn for each message received. */
void ctl_handle(struct ctl *c, const struct pollfd *fds, int n, ctl_event_fn fn, void *user);

/* Number of connections that have sent "hello" (libckpt). */
int ctl_connected(const struct ctl *c);
/* Number of connections that have sent "helper". */
int ctl_helpers(const struct ctl *c);
/* Send a request to every connection of the given kinds (CTL_KIND_* mask),
 * except slot `except` (-1: none; -2: every client that turns signals into
 * stops). codec may be NULL. @return the number
 * of connections it was written to. */
int ctl_request(struct ctl *c, const char *reason, int64_t deadline_ms, const char *codec,
                uint64_t id, int kinds, int except);
/* Tell every client that turns signals into stops (hello or helper with
 * `signals`) that ckptrun is stopping the job now and `signal` comes next:
 * it must let it take its default effect. @return the number of clients
 * told, whose acknowledgement ctl_unacked() then counts. */
int ctl_stopping(struct ctl *c, const char *reason, const char *signal);
/* Clients of the given kinds that turn SIGTERM/SIGINT into stops. */
int ctl_signal_clients(const struct ctl *c, int kinds);
/* Clients told `stopping` that have neither acknowledged nor gone. */
int ctl_unacked(const struct ctl *c);

#endif
