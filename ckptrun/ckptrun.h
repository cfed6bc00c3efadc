/*
 * ckptrun.h -- what the modules of ckptrun share: the parsed command line,
 * exit codes, and each module's entry points.
 *
 * ckptrun is a client of libckpt's public header (ckpt.h) and of the store
 * interface (store.h) only.
 *
 * Modules (one file each):
 *   main.c       command line, environment fallbacks, dispatch
 *   cli.c        the command line as data: --help, man page, completions
 *   parse.c      pure parsing (durations, steps from names, codecs, signals)
 *   log.c        the event log on stderr, result lines, the status line
 *   progress.c   progress display of long library calls (terminal only)
 *   cmds.c       save, restore, ls, verify, gc, status
 *   commit.c     commit files/directories as one checkpoint (save + watcher)
 *   record.c     the run record in the store (RUN, events/, files/)
 *   watch.c      watching CKPT_DIR for completed checkpoint entries
 *   ctlserver.c  the control socket server (docs/CONTROL.md)
 *   supervise.c  the supervisor: child, signals, stop, event loop, lease
 *   keeper.c     the keeper of the job's process tree (no survivor, leftovers)
 *   proctree.c   the job's processes from /proc (async-signal-safe)
 *   recover.c    `recover`: the cron/systemd entry point (lease.c: the lease)
 *   doctor.c     `ckptrun doctor`: notice, store, throughput, disk checks
 */
#ifndef CKPTRUN_H
#define CKPTRUN_H

#include <stdint.h>
#include "ckpt.h"

/* Exit codes (docs/ckptrun.md, "Exit codes"; sysexits.h values). */
enum {
    EXIT_STOPPED_OK = 75,     /* stopped, final checkpoint committed */
    EXIT_STOPPED_LOST = 74,   /* stopped, final checkpoint not committed */
    EXIT_USAGE = 64,          /* bad command line */
    EXIT_CONFIG = 78,         /* bad configuration or credentials */
    EXIT_UNAVAILABLE = 69,    /* store unreachable when starting */
};

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

/* mkdir -p with owner-only permissions for what it creates (cmds.c).
 * @return 0 or -1 with errno. */
int mkdir_owner(const char *path);

/* Whether run o->run exists in the store (has a HEAD or a RUN record), for
 * names only an existing run may have (cmds.c). @return 1 yes, 0 no, or
 * -(exit code) when the store cannot be asked (logged). */
int run_exists(const struct opts *o);

/* Subcommands (cmds.c); each returns the process exit code. */
int cmd_save(struct opts *o);
int cmd_restore(struct opts *o);
int cmd_ls(struct opts *o);
int cmd_verify(struct opts *o);
int cmd_gc(struct opts *o);
int cmd_status(struct opts *o);
/* Pre-flight checks of this instance, store and codec (doctor.c). */
int cmd_doctor(struct opts *o);
/* The supervisor (supervise.c). */
int cmd_run(struct opts *o);
/* Exit code of `run` when another live runner holds the run's lease. */
#define EXIT_LEASE_HELD EXIT_CONFIG
enum sup_mode { SUP_RUN, SUP_RECOVER };
/* cmd_run is supervise(o, SUP_RUN). SUP_RECOVER exits 0 without running
 * anything when the run is completed or its lease is held elsewhere. */
int supervise(struct opts *o, enum sup_mode mode);
/* `recover` (recover.c). */
int cmd_recover(struct opts *o);

#endif
