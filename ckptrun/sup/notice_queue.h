/*
 * notice_queue.h -- preemption notices on their way from other threads (the
 * cloud poller, notice_glue.c) to the supervisor's event loop.
 *
 * A poller thread posts each new notice (ckptrun_notice_post: thread-safe,
 * non-blocking); the post wakes the loop through an eventfd, which the loop
 * polls and then takes every queued notice. The supervisor requests a
 * checkpoint at once; for a preemption it then stops the child before
 * `deadline_ms`. When the final checkpoint has committed (or failed, or the
 * deadline passed) it calls `ack(ack_user, committed, step)` exactly once,
 * from its own thread (Azure: approve the event only then).
 *
 * The eventfd also wakes the loop for news that is not a notice (the lease
 * renewer losing the lease): notice_queue_wake().
 *
 * One queue per process, opened by the supervisor before anything posts.
 */
#ifndef CKPTRUN_NOTICE_QUEUE_H
#define CKPTRUN_NOTICE_QUEUE_H

#include <stdint.h>

enum ckptrun_notice_kind {
    CKPTRUN_NOTICE_PREEMPT = 1,    /* instance goes away at deadline: stop */
    CKPTRUN_NOTICE_REBALANCE = 2,  /* early warning: checkpoint, keep running */
    CKPTRUN_NOTICE_MAINTENANCE = 3 /* host event at deadline: stop */
};

/* committed: 1 if the final checkpoint committed; step: its step (or the
 * last committed one). Called at most once per posted notice. */
typedef void (*ckptrun_notice_ack_fn)(void *user, int committed, uint64_t step);

/* A notice as the loop takes it (free() it once answered). */
struct queued_notice {
    struct queued_notice *next;
    enum ckptrun_notice_kind kind;
    int64_t deadline_ms;       /* Unix ms, 0 = none given (--grace then) */
    char provider[32];
    ckptrun_notice_ack_fn ack; /* may be NULL */
    void *ack_user;
};

/* Thread-safe, non-blocking (queues and wakes the loop). `provider`
 * ("aws", "gcp", ...) is copied. `ack` may be NULL. */
void ckptrun_notice_post(enum ckptrun_notice_kind kind, int64_t deadline_ms,
                         const char *provider, ckptrun_notice_ack_fn ack, void *ack_user);

/* Create the wake-up eventfd. @return 0, or -1 with errno. */
int notice_queue_open(void);
void notice_queue_close(void);
/* The fd the loop polls (readable after a post or a wake), -1 when closed. */
int notice_queue_fd(void);
/* Wake the loop without a notice. Thread-safe, async-signal-safe. */
void notice_queue_wake(void);
/* Clear the wake-up and take every queued notice, the latest posted first.
 * @return the list (NULL: none). */
struct queued_notice *notice_queue_take(void);

#endif
