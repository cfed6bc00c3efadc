/*
 * opts.h -- the parsed command line every module of ckptrun reads, the exit
 * codes (docs/ckptrun.md, "Exit codes"), and what turns the options into a
 * libckpt context. main.c fills `struct opts`; the commands read it.
 */
#ifndef CKPTRUN_OPTS_H
#define CKPTRUN_OPTS_H

#include <stdint.h>
#include "ckpt.h"

/* Exit codes (sysexits.h values). */
enum {
    EXIT_STOPPED_OK = 75,     /* stopped, final checkpoint committed */
    EXIT_STOPPED_LOST = 74,   /* stopped, final checkpoint not committed */
    EXIT_USAGE = 64,          /* bad command line */
    EXIT_CONFIG = 78,         /* bad configuration or credentials */
    EXIT_UNAVAILABLE = 69,    /* store unreachable when starting */
};
/* Exit code of `run` when another live runner holds the run's lease. */
#define EXIT_LEASE_HELD EXIT_CONFIG

struct opts {
    const char *cmd;          /* "run", "save", "restore", ... */
    int cmd_id;               /* enum cli_cmd_id (cli.h) */
    const char *store;        /* NULL: library default */
    char store_buf[1024];
    const char *run;
    char run_buf[160];
    const char *dir;
    uint64_t interval_ms;     /* 0 = off */
    unsigned keep;
    int sig;                  /* request signal, 0 = none */
    uint64_t grace_ms;
    uint64_t lead_ms;         /* SIGUSR1/SIGXCPU notice lead time */
    uint64_t settle_ms;
    uint64_t min_age_ms;      /* gc */
    int dry_run;              /* gc --dry-run */
    uint64_t lease_ms;        /* run/recover: lease duration, 0 = default (60 s) */
    int resume_stopped;       /* recover: resume a run in state `stopped` too */
    const char *notice;
    const char *metadata_url;
    const char *codec_str;    /* as given, exported to the child */
    ckpt_codec codec;
    int codec_level;
    int preload;
    int log_json;
    int verbosity;            /* -1 quiet, 0, 1 verbose */
    int json;                 /* ls/status --json */
    int step_set;
    uint64_t step;
    const char *marker;       /* --complete-marker GLOB */
    const char *on_complete, *on_preempt, *on_failure;
    int force;                /* save --force: a step below the newest */
    const char *state_bytes;  /* doctor --state-bytes SIZE, as given */
    const char *changed;      /* doctor --changed FRACTION, as given */
    uint64_t budget_ms;       /* doctor --budget (0 = default) */
    /* Several nodes (nodes.h): -1/0/NULL until given or resolved. */
    int node_rank;            /* --node-rank K */
    unsigned nnodes;          /* --nnodes N */
    const char *job_id;       /* --job-id ID: the job generation */
    char job_buf[160];
    char **args;              /* COMMAND [ARG...] or PATH... or DIR */
    int nargs;
};

/* Map a library/store status met while starting to an exit code:
 * 78 for configuration/credentials, 69 for an unreachable store. */
int exit_code_for_status(ckpt_status st);

/* Fill a ckpt_config from the options (strings point into o). */
void opts_to_config(const struct opts *o, struct ckpt_config *cfg);
/* Open a context for administration (no control socket). On failure logs
 * one line and @return the exit code (else 0). */
int open_ctx(const struct opts *o, struct ckpt_ctx **ctx);

/* Whether run o->run exists in the store (has a HEAD or a RUN record), for
 * names only an existing run may have. @return 1 yes, 0 no, or -(exit
 * code) when the store cannot be asked (logged). */
int run_exists(const struct opts *o);

/* For "run X not found in STORE": the runs of the store whose names are
 * close to o->run ("; did you mean job-7 or job-8?"), else, when the store
 * holds a handful, their names ("; its runs: a, b, c"), else "". Walks
 * the store's keys (at most RUN_HINT_MAX_KEYS: an error's hint must not
 * cost more than a few requests of a LIST). Never creates a store.
 * @return buf. */
#define RUN_HINT_MAX_KEYS 20000
char *run_not_found_hint(const struct opts *o, char *buf, size_t n);

/* What a store URL ckptrun refused for its form was probably meant to be,
 * as text to append to the error: for "file://data/ckpt" (a relative path,
 * which a file:// URL cannot hold), "file:/data" or a bare path, "; it is
 * a relative path (file:// takes an absolute one): did you mean
 * file:///abs/cwd/data/ckpt?" with the absolute path it names from here.
 * buf "" when there is nothing to suggest. @return buf. */
char *store_url_hint(const char *url, char *buf, size_t n);

#endif
