/*
 * notice/provider.h -- one cloud's preemption notice as data and hooks: the
 * interface each ckptrun/notice/<name>.c implements, as curl's struct
 * Curl_ssl describes one TLS backend. The shared machinery reads only this
 * struct, so no other file names a provider:
 *   notice/table.c   the table (from NOTICE_PROVIDER_LIST, notice/types.h), names,
 *                    DMI detection, doctor's hints
 *   notice.c         start (base URL, watches), stop, acknowledgement
 *   notice/poll.c    the shared polling loop and session tokens
 *   notice/probe.c   doctor's one-shot probe
 *   notice/parse.c   the time parsers and reply helpers (notice/parse.h)
 *
 * Adding a provider (docs/notices.md, "Adding a provider"):
 *   1. ckptrun/notice/<name>.c: its reply parser(s) and
 *      `const struct notice_provider notice_<name>`; data first, hooks only
 *      for what the shared loop does not do;
 *   2. its word in NOTICE_PROVIDER_LIST (notice/types.h): the table line;
 *   3. its paths in tests/tools/metadata_mock.py, its test in
 *      tests/integration/notice_itest.c (and the provider list of
 *      tests/notice.cmake), a parser line and corpus entries for fuzz_notice;
 *   4. its row and notes in docs/notices.md.
 */
#ifndef CKPTRUN_NOTICE_PROVIDER_H
#define CKPTRUN_NOTICE_PROVIDER_H

#include <stddef.h>
#include <stdint.h>
#include "notice/types.h"

struct cJSON;
struct nwatch;
struct notice_poller;
struct notice_reply;

#define NOTICE_PATHS_MAX 4 /* paths one provider polls (log-once slots per watch) */

typedef int (*notice_parser)(const char *, size_t, int64_t, struct notice_event *);

/* The DMI strings detection looks at (/sys/class/dmi/id, trimmed; "" when
 * missing). */
struct notice_dmi {
    char vendor[256];  /* sys_vendor */
    char product[256]; /* product_name */
    char bios_vendor[256];
    char bios_version[256];
    char asset_tag[256]; /* chassis_asset_tag */
};

/* One path a provider polls. */
struct notice_path {
    const char *path;    /* after the base URL, with any query */
    const char *label;   /* its name in log lines ("instance-action") */
    notice_parser parse; /* its HTTP 200 reply (notice.h: 1 notice, 0 none, -1 bad) */
};

/* A session token asked for with PUT and sent on every request (AWS IMDSv2,
 * Alibaba's hardened mode). */
struct notice_token {
    const char *path;       /* "/latest/api/token" */
    const char *ttl_header; /* on the PUT: "X-aws-ec2-metadata-token-ttl-seconds" */
    const char *header;     /* on each request: "X-aws-ec2-metadata-token" */
    long ttl_s;             /* asked for by the poller (the probe asks for 60 s) */
};

struct notice_provider {
    const char *name;  /* its word in NOTICE_PROVIDER_LIST: --notice, logs, events */
    const char *title; /* "Amazon EC2 spot" */
    /* --notice auto: 1 when the DMI strings are this cloud's. NULL: never
     * detected (chosen by name only, until its vendor string is known). */
    int (*dmi_match)(const struct notice_dmi *d);
    const char *base;                 /* its metadata service: scheme://host[:port] */
    const char *base_env;             /* variable naming another base when there is no
                                         --metadata-url (AWS_EC2_METADATA_SERVICE_ENDPOINT), or NULL */
    const char *off_env;              /* variable that turns polling off when "true", or NULL */
    const char *const *headers;       /* on every request, NULL-terminated; or NULL */
    const struct notice_token *token; /* or NULL */
    const struct notice_path *paths;  /* polled in turn each round; paths[0] is the
                                         notice path doctor probes */
    unsigned npaths;                  /* 1..NOTICE_PATHS_MAX */
    long poll_ms;    /* between rounds (notice_config.poll_interval_ms overrides) */
    long timeout_ms; /* one request */
    size_t body_max; /* a longer reply is an error, never truncated */
    int quiet_404;   /* 1: HTTP 404 means "no notice"; else every non-200 is a
                        failure */
    /* Deadline semantics: the reply's own time where it carries one (the
     * parser checks it is not stale), else delivery plus the documented
     * window, hints.window_ms (the parser adds it). */
    struct notice_hints hints;

    /* Hooks, each NULL for the shared behaviour. */
    size_t state_size; /* its own state: p->state, zeroed, freed at stop */
    /* Before any thread starts: set up its state. @return 0 to poll, 1 to poll
     * nothing (the provider becomes "none", e.g. metadata disabled), -1 on
     * error. */
    int (*start)(struct notice_poller *p, const struct notice_config *cfg);
    int watch_per_path;            /* 1: one watch (thread) per path, for long polls */
    void (*run)(struct nwatch *w); /* a watch's loop; NULL: notice_poll_paths */
    /* One GET of `path` for the shared loop. NULL: HTTP on p->http with its
     * headers and token. @return 0 with r->status and r->body, -1 with r->err. */
    int (*fetch)(struct nwatch *w, const char *path, struct notice_reply *r);
    void (*before_round)(struct nwatch *w);
    /* A 200 reply of paths[i] read with the watch's state (Azure: events of
     * this VM only). NULL: paths[i].parse. */
    int (*parse)(struct nwatch *w, unsigned i, const char *body, size_t len, int64_t now_ms,
                 struct notice_event *ev);
    /* notice_ack() for an event id. NULL: nothing to acknowledge (0).
     * @return 0 on a 2xx reply, else -1 (logged). */
    int (*ack)(struct notice_poller *p, const char *event_id);
};

#endif
