/* notice/types.h -- the notice module's data: the provider list (the
 * table's words), a notice event, the poller's configuration, what doctor
 * says of a provider and what a probe found. Below everything of notice/
 * (the poller, the table, the providers' parsers) and used by them all;
 * the calls are notice.h's. */
#ifndef CKPTRUN_NOTICE_TYPES_H
#define CKPTRUN_NOTICE_TYPES_H

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
    const char *provider; /* "aws", "gcp", ...: static string */
    int64_t deadline_ms;  /* absolute Unix time in ms; 0 = none given (rebalance) */
    char id[128];         /* Azure EventId (pass to notice_ack), else "" */
    char detail[256];     /* human-readable origin, e.g. "spot/instance-action terminate" */
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
    ckpt_log_fn log_fn; /* NULL: silent */
    void *log_user;
    long poll_interval_ms; /* 0: the provider's own (docs/notices.md); a provider that
                              long-polls (gcp) uses this only to pace retries */
    long reserved[4];      /* zero */
};
#define NOTICE_CONFIG_INIT \
    {                      \
        0                  \
    }

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

/* What notice_probe() (notice/probe.h) found. */
struct notice_probe_result {
    const char *provider; /* resolved provider, static string ("none" if none) */
    char how[200];        /* how it was chosen: "DMI sys_vendor \"Amazon EC2\"",
                             "forced by --notice", "DMI names no known provider (...)" */
    char base[256];       /* scheme://host[:port] contacted ("" when none) */
    int reachable;        /* 1: the notice path answered with HTTP (any status) */
    long status;          /* HTTP status of the notice path */
    long latency_ms;      /* of the notice-path request */
    int token;            /* the provider's session token PUT (aws, aliyun): 1
                             obtained, 0 refused with 403/404/405 (requests
                             without one), -1 failed, -2 n/a */
    long token_status;    /* HTTP status of the token PUT (0: no reply) */
    int pending;          /* 1: a notice is being served right now */
    char detail[256];     /* what failed, or the notice path's body summary */
};

#endif
