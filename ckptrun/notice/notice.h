/*
 * notice.h -- preemption-notice pollers for cloud metadata services.
 *
 * ckptrun starts one poller per process. The poller detects (or is told) the
 * cloud provider, polls that provider's metadata endpoint from its own
 * thread(s) and calls back once per notice. It never blocks the caller on the
 * network: notice_start() only reads DMI files and starts threads.
 *
 * Providers are a table (NOTICE_PROVIDER_LIST below; one file each,
 * ckptrun/notice/<name>.c, implementing notice/provider.h). What each one
 * polls, how its replies map to notices (NOTICE_TERMINATE: the instance goes
 * away; NOTICE_REBALANCE: an early warning without a deadline;
 * NOTICE_MAINTENANCE: host maintenance) and their deadlines, and how to add
 * one: docs/notices.md.
 *
 * Guarantees: NOTICE_TERMINATE is delivered at most once per poller, from
 * whichever path or event reports it first, however long it keeps being
 * served; NOTICE_REBALANCE and NOTICE_MAINTENANCE once per distinct notice
 * (AWS noticeTime, Azure EventId). Errors (timeouts, 5xx, refused connections, oversized or
 * malformed replies, unparseable or stale times) are logged once per change
 * of condition and never produce a notice. Times more than 120 s in the past
 * are stale (a lingering document) and ignored.
 *
 * Threading: the callback runs on a poller thread, serialized (never two at
 * once); it should return quickly and must not call notice_stop() or
 * notice_ack() (an acknowledgement is a network call). notice_provider() and
 * notice_ack() may be called from any other thread while the poller runs.
 *
 * Builds: the poller's requests go through one transport file: notice/net.c
 * over the shared HTTP transport (http.h) with libcurl; without it
 * notice/none.c, whose transport has nothing to poll with (notice_available()
 * says 0; a forced provider is warned about and nothing is polled). The
 * table, the reply parsers and the probe's answers exist in both. In
 * ckptrun, notice_glue.c hands notices to the supervisor's queue
 * (notice_queue.h); this header does not depend on the supervisor.
 */
#ifndef CKPT_NOTICE_H
#define CKPT_NOTICE_H

#include <stddef.h>
#include <stdint.h>
#include "ckpt.h"

struct notice_poller;

/* The providers, one word each, in the order DMI detection tries them: the
 * table. notice/table.c builds the table of struct notice_provider from it
 * (each word names `notice_<word>`, defined in ckptrun/notice_<word>.c),
 * and every list users read (--notice's help, completions and messages,
 * doctor's advice) comes from it. Adding a provider is one word here plus
 * its file (docs/notices.md, "Adding a provider"). */
#define NOTICE_PROVIDER_LIST(X) X(aws) X(gcp) X(azure) X(aliyun) X(tencent) X(volcengine)

/* " aws gcp azure ...": every provider, each after a space (a literal). */
#define NOTICE_WORD_(name) " " #name
#define NOTICE_PROVIDER_NAMES NOTICE_PROVIDER_LIST(NOTICE_WORD_)
/* What --notice and CKPT_NOTICE take: "auto aws gcp ... none". */
#define NOTICE_MODES "auto" NOTICE_PROVIDER_NAMES " none"

enum notice_kind {
    NOTICE_TERMINATE = 0,  /* the instance goes away at the deadline: checkpoint and stop */
    NOTICE_REBALANCE = 1,  /* early warning: checkpoint now, keep running */
    NOTICE_MAINTENANCE = 2 /* host maintenance will stop or reboot the VM at the deadline */
};

struct notice_event {
    enum notice_kind kind;
    const char *provider;  /* "aws", "gcp", ...: static string */
    int64_t deadline_ms;   /* absolute Unix time in ms; 0 = none given (rebalance) */
    char id[128];          /* Azure EventId (pass to notice_ack), else "" */
    char detail[256];      /* human-readable origin, e.g. "spot/instance-action terminate" */
};

/* Called on a poller thread; `ev` is valid only during the call. */
typedef void (*notice_cb)(void *user, const struct notice_event *ev);

struct notice_config {
    const char *provider;     /* one of NOTICE_MODES ("auto" when NULL) */
    const char *metadata_url; /* NULL: the provider's own address; else "scheme://host[:port]"
                                 replacing it (any path in it is ignored; provider paths kept).
                                 For aws, NULL honours AWS_EC2_METADATA_SERVICE_ENDPOINT. */
    const char *dmi_dir;      /* NULL: /sys/class/dmi/id (read by "auto" only) */
    notice_cb cb;             /* required unless the provider resolves to "none" */
    void *user;
    ckpt_log_fn log_fn;       /* NULL: silent */
    void *log_user;
    long poll_interval_ms;    /* 0: the provider's own (docs/notices.md); a provider that
                                 long-polls (gcp) uses this only to pace retries */
    long reserved[4];         /* zero */
};
#define NOTICE_CONFIG_INIT {0}

/* 1 when `mode` is what --notice takes: a word of NOTICE_MODES. */
int notice_mode_valid(const char *mode);

/* What `ckptrun doctor` says about a provider, from its table entry. */
struct notice_hints {
    long window_ms;                 /* the warning it documents (the window doctor judges by) */
    long detect_ms;                 /* how late a notice may be seen (its poll interval;
                                       a long poll sees it at once) */
    const char *window_src;         /* what the window is: "AWS spot notice" */
    const char *window_note;        /* how sure: "2 minutes, best effort (...)" */
    const char *unreachable;        /* advice when its endpoint does not answer (NULL: generic) */
    const char *slow_start;         /* advice when the first request times out because the
                                       service starts on first use (NULL: a failure) */
    const char *token_what;         /* its session token ("IMDSv2 session"); NULL: none */
    const char *token_refused;      /* advice when the token PUT is refused (403/404/405) */
    const char *token_failed;       /* advice when it fails otherwise */
    int token_required;             /* 1: a failed token is a failure, 0: a warning */
    const char *const *temp_mounts; /* mount points lost with the VM (doctor's disk
                                       check), NULL-terminated; NULL: none known */
    const char *temp_what;          /* what such a mount is, and when it is lost */
};

/* @return the hints of the provider named `provider`, NULL for "none" or
 * an unknown name. */
const struct notice_hints *notice_hints(const char *provider);

/* 1 when this build polls cloud metadata (it has libcurl), else 0. */
int notice_available(void);

/* Detects the provider (for "auto": DMI only, no network) and starts polling.
 * Strings in `cfg` are copied. With provider "none" (or "auto" finding no
 * known vendor, or AWS_EC2_METADATA_DISABLED=true for aws) no thread is
 * started and *out is still a valid poller whose provider is "none".
 * @return 0, or -1 on bad arguments (unknown provider name, missing cb,
 *         malformed metadata_url) or when threads cannot be started. */
int notice_start(const struct notice_config *cfg, struct notice_poller **out);

/* @return the provider being polled ("aws", ..., or "none"); static string. */
const char *notice_provider(const struct notice_poller *p);

/* Acknowledges an event so the platform may proceed early. Only Azure has an
 * acknowledgement (POST StartRequests with `event_id`); other providers: no-op
 * returning 0. Call only after the final checkpoint committed. Blocks for at
 * most ~5 s on the network. @return 0 on an HTTP 2xx reply, else -1. */
int notice_ack(struct notice_poller *p, const char *event_id);

/* Stops polling, joins the threads and frees p. NULL-safe. In-flight
 * requests are aborted; returns within about 2 s (aws: the IMDS timeout). */
void notice_stop(struct notice_poller *p);

/* ---- one-shot diagnostics (`ckptrun doctor`) ------------------------------ */

struct notice_probe_result {
    const char *provider;    /* resolved provider, static string ("none" if none) */
    char how[200];           /* how it was chosen: "DMI sys_vendor \"Amazon EC2\"",
                                "forced by --notice", "DMI names no known provider (...)" */
    char base[256];          /* scheme://host[:port] contacted ("" when none) */
    int reachable;           /* 1: the notice path answered with HTTP (any status) */
    long status;             /* HTTP status of the notice path */
    long latency_ms;         /* of the notice-path request */
    int token;               /* the provider's session token PUT (aws, aliyun): 1
                                obtained, 0 refused with 403/404/405 (requests
                                without one), -1 failed, -2 n/a */
    long token_status;       /* HTTP status of the token PUT (0: no reply) */
    int pending;             /* 1: a notice is being served right now */
    char detail[256];        /* what failed, or the notice path's body summary */
};

/* The probe is notice/probe.h. The reply parsers are each provider's own
 * (notice/<name>.h, for the unit tests and the fuzz target); a provider
 * added later reaches its tests through the table:
 * notice_provider_find(name)->paths[i].parse, notice/provider.h. */

#endif
