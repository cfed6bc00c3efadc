/*
 * notice_sink.h -- the seam between the supervisor and the notices module
 * (ckptrun/notice.c: cloud metadata polling, written separately).
 *
 * The notices module implements ckptrun_notice_start/stop; the supervisor
 * implements ckptrun_notice_post. The supervisor declares the module's
 * functions weak, so ckptrun builds and runs (polling nothing) without it.
 *
 * Flow: the supervisor calls ckptrun_notice_start() once, before starting the
 * child. The module's own thread(s) poll and, for each new notice, call
 * ckptrun_notice_post(). The supervisor requests a checkpoint at once; for a
 * preemption it then stops the child before `deadline_ms`. When the final
 * checkpoint has committed (or failed, or the deadline passed) it calls
 * `ack(ack_user, committed, step)` exactly once, from the supervisor's
 * thread (Azure: approve the event only then). At exit the supervisor calls
 * ckptrun_notice_stop(), which must join the module's threads.
 */
#ifndef CKPTRUN_NOTICE_SINK_H
#define CKPTRUN_NOTICE_SINK_H

#include <stdint.h>

enum ckptrun_notice_kind {
    CKPTRUN_NOTICE_PREEMPT = 1,    /* instance goes away at deadline: stop */
    CKPTRUN_NOTICE_REBALANCE = 2,  /* early warning: checkpoint, keep running */
    CKPTRUN_NOTICE_MAINTENANCE = 3 /* host event at deadline: stop */
};

/* committed: 1 if the final checkpoint committed; step: its step (or the
 * last committed one). Called at most once per posted notice. */
typedef void (*ckptrun_notice_ack_fn)(void *user, int committed, uint64_t step);

/* Thread-safe, non-blocking (queues and wakes the supervisor). `provider`
 * ("aws", "gcp", ...) is copied. deadline_ms: Unix ms, 0 = none given (the
 * supervisor then uses --grace). `ack` may be NULL. */
void ckptrun_notice_post(enum ckptrun_notice_kind kind, int64_t deadline_ms,
                         const char *provider, ckptrun_notice_ack_fn ack, void *ack_user);

struct ckptrun_notice_cfg {
    const char *mode;          /* --notice: auto|aws|gcp|azure|aliyun|tencent|none */
    const char *metadata_url;  /* --metadata-url or NULL */
    int verbosity;             /* -1 quiet, 0, 1 verbose */
};
/* Implemented by the notices module. @return 0 (polling, or nothing to poll
 * on this machine), -1 on a bad configuration (the supervisor exits 78). */
int ckptrun_notice_start(const struct ckptrun_notice_cfg *cfg);
void ckptrun_notice_stop(void);

#endif
