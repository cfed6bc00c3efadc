/*
 * lease.h -- at most one live runner per run (DESIGN.md §5, docs/recover.md).
 *
 * <run>/LEASE is a small JSON object:
 *   {"format":1,"holder":"host:pid:nonce","epoch":N,"expires_ms":T,
 *    "heartbeat_ms":T,"released":false,"boot_id":"..","pid_ns":N,
 *    "hostname":"..","pid":N,"start_ticks":N,"sum":".."}
 * created with a create-only write, taken over (when expired or released)
 * and renewed with writes conditional on the etag last read. Every takeover
 * increments the epoch; the new holder then fences HEAD (ckpt_fence), so a
 * runner that lost its lease -- frozen, partitioned -- cannot commit.
 * A graceful stop marks the lease released (the epoch is kept, so epochs
 * only ever grow). On stores without conditional writes the lease is
 * written then read back after a settle delay (renewals and the release
 * read it first and give way to another holder): it still keeps honest
 * runners apart, but two racing within the delay could both win; fencing
 * then still refuses all but one HEAD write only where HEAD writes are
 * conditional. Expiry uses the writer's clock; readers allow a skew margin.
 *
 * Same-host staleness: the holder also records who it is on its machine
 * (kernel boot id, PID namespace, host name, PID and the process's start
 * time in clock ticks since boot). A reader on the same boot, in the same
 * PID namespace and with the same host name can tell that the holder
 * process is gone (no such PID, a zombie, or a PID reused by a process that
 * started at another time): such a lease is stale and taken over at once.
 * Anywhere else (another host, another container's PID namespace, a LEASE
 * written without these fields) only the expiry counts.
 *
 * Time: a lease reads the wall clock (expiry and heartbeat are Unix ms, so
 * runners on other machines can judge them) and sleeps (the settle delay
 * of stores without conditional writes, the pause between contended
 * attempts) through a `struct lease_clock`: the system's by default, a
 * test's own to move time without waiting.
 *
 * Not thread-safe: one lease is used by one thread.
 */
#ifndef CKPTRUN_LEASE_H
#define CKPTRUN_LEASE_H

#include <stdint.h>
#include "ckpt.h"

struct ckpt_store;
struct lease;

#define LEASE_DEFAULT_TTL_MS 60000
#define LEASE_SKEW_MS 5000 /* a lease counts as live this long past its expiry */

struct lease_info {
    char holder[256];
    uint64_t epoch;
    int64_t expires_ms;
    int64_t heartbeat_ms;
    int released;
    /* The holder's identity on its machine; has_ident 0 when the LEASE
     * carries none (written by an older ckptrun). */
    int has_ident;
    char boot_id[40];
    uint64_t pid_ns;
    char hostname[72];
    int pid;
    uint64_t start_ticks;
    /* The job generation of a job spanning several nodes (its nodes join
     * the lease, nodes.h); "" for a single runner. */
    char job[128];
};

/* What a reader can say about a lease's holder (lease_state). */
enum lease_state {
    LEASE_LIVE,               /* held, not expired, holder not known to be gone */
    LEASE_STALE,              /* not expired, but its holder process is gone (same host) */
    LEASE_EXPIRED,            /* not renewed in time */
    LEASE_RELEASED            /* given back by a graceful stop */
};

/* Read <run>/LEASE. @return CKPT_OK, CKPT_E_NOENT, CKPT_E_CORRUPT, store errors.
 * etag (CKPT_ETAG_MAX) may be NULL. */
ckpt_status lease_read(struct ckpt_store *st, const char *run, struct lease_info *out,
                       char *etag, char *err);
/* 1 if `li` is held by a runner whose lease has not expired at `now_ms`
 * (the expiry rule alone; see lease_state for the holder's liveness). */
int lease_is_live(const struct lease_info *li, int64_t now_ms);
/* 1 when the holder recorded in `li` ran on this very machine, boot and PID
 * namespace (and host name) and that process is gone: no such PID, a
 * zombie, or a process with another start time. 0 when it is alive or
 * cannot be judged from here. */
int lease_holder_gone(const struct lease_info *li);
/* The one definition of a lease's state, used by `run`/`recover` (take
 * over unless LEASE_LIVE) and by `ckptrun status`. */
enum lease_state lease_state(const struct lease_info *li, int64_t now_ms);
/* "live", "stale", "expired", "released". */
const char *lease_state_name(enum lease_state st);

/* The time source of a lease. now_ms: Unix ms; sleep_ms: wait that long
 * (a fake clock advances its time instead). */
struct lease_clock {
    int64_t (*now_ms)(void *user);
    void (*sleep_ms)(void *user, int64_t ms);
    void *user;
};

/* A lease of `run` held for ttl_ms (0: LEASE_DEFAULT_TTL_MS) at a time.
 * clock may be NULL (the system's clocks); it is copied. */
ckpt_status lease_open(struct ckpt_store *st, const char *run, uint64_t ttl_ms,
                       const struct lease_clock *clock, struct lease **out);
/* Take the lease. @return CKPT_OK (held; see lease_epoch), CKPT_E_EXISTS (a
 * live runner holds it: *other describes it), CKPT_E_PRECONDITION (lost a
 * race: another runner took it just now; *other filled when readable),
 * store errors. On CKPT_OK after taking over a stale lease (its holder on
 * this host is gone, lease_holder_gone), *other describes that holder and
 * lease_took_stale() is 1; otherwise *other is zeroed. */
ckpt_status lease_acquire(struct lease *l, struct lease_info *other, char *err);
/* 1 when the last successful lease_acquire took over a stale lease. */
int lease_took_stale(const struct lease *l);
/* Extend the expiry. @return CKPT_OK, CKPT_E_FENCED (someone else holds it
 * now: stop committing), store errors (transient: retry before expiry). */
ckpt_status lease_renew(struct lease *l, char *err);
/* Mark released (keeps the epoch). @return CKPT_OK or store errors. */
ckpt_status lease_release(struct lease *l, char *err);
uint64_t lease_epoch(const struct lease *l);
/* Record job generation `job` (nodes.h) in every LEASE written from now
 * on: the other nodes of that generation join it instead of taking it.
 * Call before lease_acquire. */
void lease_set_job(struct lease *l, const char *job);
const char *lease_holder(const struct lease *l);
int64_t lease_expires_ms(const struct lease *l);
/* 1 when the expiry last written has passed on the lease's clock: a
 * renewal that has not got through by then leaves the run to others. */
int lease_expired(const struct lease *l);
uint64_t lease_ttl_ms(const struct lease *l);
void lease_close(struct lease *l); /* NULL-safe; does not release */

#endif
