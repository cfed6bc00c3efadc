/*
 * main.c -- command line: subcommand, options with environment fallbacks,
 * and dispatch. The options and the help texts are data (cli.c); nothing
 * here touches the store except run_exists() (opts.h) for names only an
 * existing run may carry.
 */
#include "ckptrun.h"
#include "cli.h"
#include "base/runlog.h"
#include "cli_suggest.h"
#include "notice/notice.h"
#include "base/parse.h"
#include "ckpt_store.h"
#include "notice/table.h"

#include <getopt.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef CKPT_VERSION_FULL
#define CKPT_VERSION_FULL CKPT_VERSION_STRING
#endif

/* --signal or CKPT_SIGNAL given (even "none"): --preload then keeps it. */
static int sig_explicit;

/* A size option or variable that used a decimal unit ("50MB") meant MiB
 * before sizes had one convention: say what it means now. */
static void warn_si(const char *what, const char *v, uint64_t bytes)
{
    char b[32];
    log_msg(LOG_WARN, "options",
            "%s '%s' is %llu bytes (kB, MB, GB are powers of 1000; "
            "earlier versions read them as KiB, MiB, GiB): write %.*sM or %.*sMiB for "
            "powers of 1024 (this is %s)",
            what, v, (unsigned long long)bytes, (int)strcspn(v, "kKmMgGtT"), v,
            (int)strcspn(v, "kKmMgGtT"), v, ckpt__fmt_bytes(bytes, b, sizeof b));
}

/* Options read from the environment are configuration (exit 78 when bad);
 * the same value on the command line is usage (exit 64). */
static int env_duration(const char *var, uint64_t *ms)
{
    const char *v = getenv(var);
    if (v && *v && ckpt__parse_duration_ms(v, ms) != 0) {
        log_error("%s='%s' is not a duration (e.g. 90s, 30m, 1h)", var, v);
        return EXIT_CONFIG;
    }
    return 0;
}

static int set_defaults_from_env(struct opts *o)
{
    const char *v;
    uint64_t n;
    int rc = 0, si = 0;

    o->keep = 3;
    o->node_rank = -1;
    o->grace_ms = 30000;
    o->lead_ms = 60000;
    o->settle_ms = 10000;
    o->min_age_ms = 15 * 60000;
    o->store = getenv("CKPT_STORE");
    o->run = getenv("CKPT_RUN");
    o->dir = getenv("CKPT_DIR");
    o->notice = getenv("CKPT_NOTICE");
    if ((rc = env_duration("CKPT_INTERVAL", &o->interval_ms)) != 0)
        goto out;
    if ((v = getenv("CKPT_KEEP")) && *v) {
        if (parse_u64(v, &n) != 0 || n < 1 || n > 1000000) {
            log_error("CKPT_KEEP='%s' is not a count >= 1", v);
            rc = EXIT_CONFIG;
            goto out;
        }
        o->keep = (unsigned)n;
    }
    if ((v = getenv("CKPT_SIGNAL")) && *v)
        sig_explicit = 1;
    if ((v = getenv("CKPT_SIGNAL")) && *v && ckpt__parse_signal(v, &o->sig) != 0) {
        log_error("CKPT_SIGNAL='%s' is not a signal name (USR1, SIGTERM, 10, none)", v);
        rc = EXIT_CONFIG;
        goto out;
    }
    if (o->notice && *o->notice && !notice_mode_valid(o->notice)) {
        log_error("CKPT_NOTICE='%s' is not one of %s", o->notice, NOTICE_MODES);
        rc = EXIT_CONFIG;
        goto out;
    }
    if ((v = getenv("CKPT_CODEC")) && *v) {
        if (ckpt__parse_codec(v, &o->codec, &o->codec_level) != 0) {
            log_error("CKPT_CODEC='%s' is not one of %s", v, CKPT_CODEC_RULE);
            rc = EXIT_CONFIG;
            goto out;
        }
        o->codec_str = v;
    }
    if ((v = getenv("CKPT_MAX_RATE")) && *v) {
        if (ckpt__parse_size(v, &n, &si) != 0) {
            log_error("CKPT_MAX_RATE='%s' is not a rate in bytes/s (e.g. 50M, 1G)", v);
            rc = EXIT_CONFIG;
            goto out;
        }
        if (si)
            warn_si("CKPT_MAX_RATE", v, n);
    }
    if ((v = getenv("CKPT_CONNECTIONS")) && *v &&
        (parse_u64(v, &n) != 0 || n < 1 || n > 256)) {
        log_error("CKPT_CONNECTIONS='%s' is not a count from 1 to 256", v);
        rc = EXIT_CONFIG;
        goto out;
    }
out:
    return rc;
}

static int bad_duration(const char *opt, const char *v)
{
    log_error("%s '%s' is not a duration (e.g. 250ms, 90s, 30m, 1h)", opt, v);
    return EXIT_USAGE;
}

/* A store URL ckpt_store_open would refuse for its form alone, said once
 * (the store itself is not contacted). @return 1 when the form is right. */
static int store_url_ok(const char *what, const char *u)
{
    char forms[256], hint[4400];
    if (ckpt_store_scheme_known(u))
        return 1;
    /* with what it was probably meant to be (a relative file:// path) */
    log_error("%s'%s' is not a store URL (%s)%s", what, u,
              ckpt_store_url_forms(forms, sizeof forms), store_url_hint(u, hint, sizeof hint));
    return 0;
}

/* Whether `word` names a program the child could exec: a path to an
 * executable file, or one found on PATH as execvp would. */
static int is_program(const char *word)
{
    const char *path = getenv("PATH");
    struct stat sb;
    char buf[4096];

    if (!*word)
        return 0;
    if (strchr(word, '/'))
        return stat(word, &sb) == 0 && S_ISREG(sb.st_mode) && access(word, X_OK) == 0;
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        size_t n = strcspn(path, ":");
        snprintf(buf, sizeof buf, "%.*s/%s", n ? (int)n : 1, n ? path : ".", word);
        if (stat(buf, &sb) == 0 && S_ISREG(sb.st_mode) && access(buf, X_OK) == 0)
            return 1;
        path += n + (path[n] == ':');
    }
    return 0;
}

static int unknown_command(const char *word, int in_help)
{
    const char *s = cli_suggest(word);
    char hint[128] = "";

    if (s)
        snprintf(hint, sizeof hint, "; did you mean `ckptrun %s`?", s);
    if (in_help)
        log_error("unknown command '%s'%s (commands: run, recover, save, restore, ls, "
                  "status, verify, gc, doctor)", word, hint);
    else
        log_error("'%s' is neither a ckptrun command nor a program on PATH%s (to run a "
                  "program of that name: ckptrun -- %s; see ckptrun --help)", word, hint, word);
    return EXIT_USAGE;
}

/* getopt refused an option: name it as written, with what it resembles
 * (cli_suggest_option). An unknown long option (optopt 0) is
 * argv[optind - 1]; an unknown short one is a letter of a cluster
 * ("-store"): argv[optind] while the cluster goes on, else the one before. */
static int unknown_option(int argc, char **argv, int cmd)
{
    const char *arg = argv[optind - 1], *name = cli_cmds[cmd].name;
    char hint[256];
    int what;

    if (optopt && optind < argc && argv[optind][0] == '-' && argv[optind][1] != '-' &&
        strchr(argv[optind] + 1, optopt))
        arg = argv[optind];
    what = cli_suggest_option(arg, cmd, hint, sizeof hint);
    if (optopt && strlen(arg) > 2)
        log_error("unknown option '-%c' in '%s'%s%s (see ckptrun %s --help)", optopt, arg,
                  what ? "; " : "", hint, name);
    else if (optopt)
        log_error("unknown option '-%c' (see ckptrun %s --help)", optopt, name);
    else if (what == 2)
        log_error("option '%.*s' is ambiguous: %s (see ckptrun %s --help)", (int)strcspn(arg, "="),
                  arg, hint, name);
    else
        log_error("unknown option '%.*s'%s%s (see ckptrun %s --help)", (int)strcspn(arg, "="), arg,
                  what ? "; " : "", hint, name);
    return EXIT_USAGE;
}

/* The index of a subcommand written after options ("ckptrun --store S
 * status"), or -1: the first word that is neither an option nor an
 * option's value, before any "--". */
static int command_after_options(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0)
            return -1;
        if (strncmp(a, "--", 2) == 0) {
            size_t n = strcspn(a + 2, "=");
            if (a[2 + n] == '=')
                continue;
            for (size_t k = 0; k < cli_nopts; k++)
                if (strlen(cli_opts[k].name) == n && strncmp(cli_opts[k].name, a + 2, n) == 0 &&
                    cli_opts[k].arg) {
                    i++; /* its value */
                    break;
                }
            continue;
        }
        if (a[0] == '-' && a[1])
            continue; /* short flags (-q, -v): none takes a value */
        return cli_cmd_find(a) >= 0 ? i : -1;
    }
    return -1;
}

/* Parse argv into o. @return 0, or an exit code (-1: exit 0 after help). */
static int parse_args(int argc, char **argv, struct opts *o)
{
    int c, rc = 0, first = 1, want_help = 0, want_version = 0, si = 0;
    const char *s3_flag = NULL; /* an S3-only option given: warned about below if unused */
    int explicit_cmd = 0, store_from_cli = 0;
    uint64_t n;

    o->cmd_id = CMD_RUN;
    if (argc == 1) {
        /* A bare `ckptrun` is someone finding out what it does: the usage,
         * on stderr since nothing ran (exit 64, as for no command). */
        cli_help(stderr, -1, CKPT_VERSION_FULL);
        rc = EXIT_USAGE;
        goto out;
    }
    if (argc > 1 && strcmp(argv[1], "__generate") == 0) {
        /* hidden build step: the man page and completions (cli.h) */
        FILE *f = argc == 4 ? fopen(argv[3], "w") : stdout;
        rc = (argc == 3 || argc == 4) && f && cli_generate(f, argv[2], CKPT_VERSION_FULL) == 0
                 ? -1 : EXIT_USAGE;
        if (f && f != stdout && fclose(f) != 0)
            rc = EXIT_USAGE;
        if (rc == EXIT_USAGE)
            log_error("__generate man|bash|zsh [FILE]");
        goto out;
    }
    if (argc > 1 && strcmp(argv[1], "help") == 0) {
        int id = argc > 2 ? cli_cmd_find(argv[2]) : -1;
        if (argc > 2 && id < 0 && strcmp(argv[2], "help") != 0) {
            rc = unknown_command(argv[2], 1);
            goto out;
        }
        cli_help(stdout, id, CKPT_VERSION_FULL);
        rc = -1;
        goto out;
    }
    {
        /* options may come before the subcommand, as with git: move it first */
        int at = command_after_options(argc, argv);
        if (at > 1) {
            char *w = argv[at];
            memmove(argv + 2, argv + 1, (size_t)(at - 1) * sizeof *argv);
            argv[1] = w;
        }
    }
    if (argc > 1 && cli_cmd_find(argv[1]) >= 0) {
        o->cmd_id = cli_cmd_find(argv[1]);
        explicit_cmd = 1;
        first = 2;
    }
    o->cmd = cli_cmds[o->cmd_id].name;
    if ((rc = set_defaults_from_env(o)) != 0)
        goto out;
    /* getopt sees argv shifted past the subcommand; run and recover stop at
     * the first non-option (the training command). */
    argv += first - 1;
    argc -= first - 1;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv,
                            cli_short_options(o->cmd_id == CMD_RUN || o->cmd_id == CMD_RECOVER),
                            cli_long_options(), NULL)) != -1) {
        switch (c) {
        case O_STORE: o->store = optarg; store_from_cli = 1; break;
        case O_RUN: o->run = optarg; break;
        case O_DIR: o->dir = optarg; break;
        case O_INTERVAL:
            if (ckpt__parse_duration_ms(optarg, &o->interval_ms) != 0) {
                rc = bad_duration("--interval", optarg);
                goto out;
            }
            break;
        case O_GRACE:
            if (ckpt__parse_duration_ms(optarg, &o->grace_ms) != 0) {
                rc = bad_duration("--grace", optarg);
                goto out;
            }
            break;
        case O_LEAD:
            if (ckpt__parse_duration_ms(optarg, &o->lead_ms) != 0) {
                rc = bad_duration("--lead", optarg);
                goto out;
            }
            break;
        case O_SETTLE:
            if (ckpt__parse_duration_ms(optarg, &o->settle_ms) != 0) {
                rc = bad_duration("--settle", optarg);
                goto out;
            }
            break;
        case O_STATE_BYTES: o->state_bytes = optarg; break;
        case O_CHANGED: o->changed = optarg; break;
        case O_BUDGET:
            if (ckpt__parse_duration_ms(optarg, &o->budget_ms) != 0 || o->budget_ms == 0) {
                rc = bad_duration("--budget", optarg);
                goto out;
            }
            break;
        case O_MIN_AGE:
            if (ckpt__parse_duration_ms(optarg, &o->min_age_ms) != 0) {
                rc = bad_duration("--min-age", optarg);
                goto out;
            }
            break;
        case O_LEASE:
            if (ckpt__parse_duration_ms(optarg, &o->lease_ms) != 0 || o->lease_ms < 1000) {
                log_error("--lease '%s' is not a duration of at least 1s (e.g. 60s)", optarg);
                rc = EXIT_USAGE;
                goto out;
            }
            break;
        case O_KEEP:
            if (parse_u64(optarg, &n) != 0 || n < 1 || n > 1000000) {
                log_error("--keep '%s' is not a count >= 1", optarg);
                rc = EXIT_USAGE;
                goto out;
            }
            o->keep = (unsigned)n;
            break;
        case O_STEP:
            if (parse_u64(optarg, &o->step) != 0 || o->step >= CKPT_STEP_ALL) {
                log_error("--step '%s' is not a step number", optarg);
                rc = EXIT_USAGE;
                goto out;
            }
            o->step_set = 1;
            break;
        case O_FORCE: o->force = 1; break;
        case O_SIGNAL:
            sig_explicit = 1;
            if (ckpt__parse_signal(optarg, &o->sig) != 0) {
                log_error("--signal '%s' is not a signal (USR1, SIGUSR1, 10, none)", optarg);
                rc = EXIT_USAGE;
                goto out;
            }
            break;
        case O_CODEC:
            if (ckpt__parse_codec(optarg, &o->codec, &o->codec_level) != 0) {
                log_error("--codec '%s' is not one of %s", optarg, CKPT_CODEC_RULE);
                rc = EXIT_USAGE;
                goto out;
            }
            o->codec_str = optarg;
            break;
        case O_NOTICE:
            if (!notice_mode_valid(optarg)) {
                log_error("--notice '%s' is not one of %s", optarg, NOTICE_MODES);
                rc = EXIT_USAGE;
                goto out;
            }
            o->notice = optarg;
            break;
        case O_METADATA_URL: o->metadata_url = optarg; break;
        /* Object-store settings travel in the environment: every store this
         * process opens reads them (uploaders/store.h), and so does a
         * libckpt trainer started under ckptrun. */
        case O_STORAGE_CLASS:
            s3_flag = "--storage-class";
            setenv("CKPT_S3_STORAGE_CLASS", optarg, 1);
            break;
        case O_SSE:
            if (strcmp(optarg, "AES256") != 0 && strcmp(optarg, "aws:kms") != 0) {
                log_error("--sse '%s' is not AES256 (SSE-S3) or aws:kms (SSE-KMS)", optarg);
                rc = EXIT_USAGE;
                goto out;
            }
            s3_flag = "--sse";
            setenv("CKPT_S3_SSE", optarg, 1);
            break;
        case O_SSE_KMS:
            s3_flag = "--sse-kms-key-id";
            setenv("CKPT_S3_SSE_KMS_KEY_ID", optarg, 1);
            break;
        case O_MAX_RATE:
            if (ckpt__parse_size(optarg, &n, &si) != 0) {
                log_error("--max-rate '%s' is not a rate in bytes/s (e.g. 50M, 1G)", optarg);
                rc = EXIT_USAGE;
                goto out;
            }
            if (si)
                warn_si("--max-rate", optarg, n);
            setenv("CKPT_MAX_RATE", optarg, 1);
            break;
        case O_CONNECTIONS:
            if (parse_u64(optarg, &n) != 0 || n < 1 || n > 256) {
                log_error("--connections '%s' is not a count from 1 to 256", optarg);
                rc = EXIT_USAGE;
                goto out;
            }
            setenv("CKPT_CONNECTIONS", optarg, 1);
            break;
        case O_SYNC: setenv("CKPT_RESTORE_SYNC", "1", 1); break;
        case O_DRY_RUN: o->dry_run = 1; break;
        case O_RESUME_STOPPED: o->resume_stopped = 1; break;
        case O_NNODES:
            if (parse_u64(optarg, &n) != 0 || n < 1 || n > 65536) {
                log_error("--nnodes '%s' is not a count of nodes (1-65536)", optarg);
                rc = EXIT_USAGE;
                goto out;
            }
            o->nnodes = (unsigned)n;
            break;
        case O_NODE_RANK:
            if (parse_u64(optarg, &n) != 0 || n > 65535) {
                log_error("--node-rank '%s' is not a node rank (0-65535)", optarg);
                rc = EXIT_USAGE;
                goto out;
            }
            o->node_rank = (int)n;
            break;
        case O_JOB_ID: o->job_id = optarg; break;
        case O_PRELOAD: o->preload = 1; break;
        case O_LOG_JSON: o->log_json = 1; log_setup(1, o->verbosity); break;
        case 'q': o->verbosity = -1; break;
        case 'v': o->verbosity = 1; break;
        case 'h': want_help = 1; break;
        case 'V':
        case O_VERSION: want_version = 1; break;
        case O_JSON: o->json = 1; break;
        case O_MARKER: o->marker = optarg; break;
        case O_ON_COMPLETE: o->on_complete = optarg; break;
        case O_ON_PREEMPT: o->on_preempt = optarg; break;
        case O_ON_FAILURE: o->on_failure = optarg; break;
        case ':':
            log_error("option '%s' needs a value (see ckptrun %s --help)", argv[optind - 1], o->cmd);
            rc = EXIT_USAGE;
            goto out;
        default:
            rc = unknown_option(argc, argv, o->cmd_id);
            goto out;
        }
    }
    if (want_help) {
        cli_help(stdout, explicit_cmd ? o->cmd_id : -1, CKPT_VERSION_FULL);
        rc = -1;
        goto out;
    }
    if (want_version) {
        printf("ckptrun %s (libckpt %s)\n", CKPT_VERSION_FULL, ckpt_version_string());
        rc = -1;
        goto out;
    }
    o->args = argv + optind;
    o->nargs = argc - optind;
    /* `ckptrun WORD ...` runs WORD only when it is a program: a mistyped
     * subcommand ("stauts", "list") must not take a lease, create a run and
     * fail with 127. After `--` or an explicit `run`, any word is the command. */
    if (o->cmd_id == CMD_RUN && !explicit_cmd && o->nargs > 0 &&
        !(optind > 1 && strcmp(argv[optind - 1], "--") == 0) && !is_program(o->args[0])) {
        rc = unknown_command(o->args[0], 0);
        goto out;
    }
    if (store_from_cli && *o->store && !store_url_ok("--store ", o->store)) {
        rc = EXIT_USAGE;
        goto out;
    }
    {
        const char *url = o->store && *o->store ? o->store : getenv("CKPT_STORE");
        const struct ckpt_store_scheme *sch = url ? ckpt_store_scheme_known(url) : NULL;
        if (s3_flag && !(sch && (sch->flags & CKPT_SCHEME_S3_SETTINGS))) {
            char which[128] = "";
            for (size_t i = 0; (sch = ckpt_store_scheme_at(i)); i++)
                if (sch->flags & CKPT_SCHEME_S3_SETTINGS)
                    snprintf(which + strlen(which), sizeof which - strlen(which), "%s%s://",
                             which[0] ? " and " : "", sch->name);
            log_msg(LOG_WARN, "options", "%s applies to %s stores only: ignored for %s",
                    s3_flag, which, url && *url ? url : "the default file store");
        }
    }
    /* The shim makes SIGUSR1 safe for any program (it installs a handler
     * when the program has none), so with --preload a request can always be
     * sent: default to it unless a signal was chosen. */
    if (o->preload && !sig_explicit)
        o->sig = SIGUSR1;
out:
    return rc;
}

/* Store URL, run name and directory defaults; validation shared by all
 * commands. */
static int resolve(struct opts *o)
{
    char cwd[4096];
    int rc = 0;
    int run_from_env = o->run && getenv("CKPT_RUN") && o->run == getenv("CKPT_RUN");
    int creates = o->cmd_id == CMD_RUN || o->cmd_id == CMD_RECOVER || o->cmd_id == CMD_SAVE;

    if (!o->store || !*o->store) {
        if (!ckpt_store_default_url(o->store_buf, sizeof o->store_buf)) {
            log_error("no store given (--store or CKPT_STORE) and no HOME for the default");
            rc = EXIT_CONFIG;
            goto out;
        }
        o->store = o->store_buf;
    } else if (!store_url_ok("CKPT_STORE=", o->store)) {
        rc = EXIT_CONFIG;
        goto out;
    }
    if (o->run && *o->run) {
        /* An existing run opens under any name ckptrun or libckpt accepted
         * before the rules were shared; a new one needs the strict name. */
        if (!ckpt__run_name_ok(o->run, 0)) {
            log_error("run name '%s' is not valid: use " "1-128 of A-Z a-z 0-9 . _ - "
                      "(not starting with '.')", o->run);
            rc = run_from_env ? EXIT_CONFIG : EXIT_USAGE;
            goto out;
        }
        if (creates && !ckpt__run_name_ok(o->run, 1)) {
            int e = run_exists(o);
            if (e < 0) {
                rc = -e;
                goto out;
            }
            if (e == 0) {
                log_error("run name '%s' can only open an existing run: a new run's name is "
                          "1-128 of A-Z a-z 0-9 . _ - (not starting with '.')", o->run);
                rc = run_from_env ? EXIT_CONFIG : EXIT_USAGE;
                goto out;
            }
        }
    } else if (o->cmd_id == CMD_LS) {
        o->run = NULL; /* ls without a run lists the runs of the store */
    } else if (o->cmd_id == CMD_RECOVER) {
        /* cron and systemd start us in $HOME or /: a name from the working
         * directory would silently start a different run */
        log_error("recover needs the run's name: --run NAME or CKPT_RUN");
        rc = EXIT_USAGE;
        goto out;
    } else {
        if (!getcwd(cwd, sizeof cwd) ||
            ckpt__name_sanitize(basename(cwd), o->run_buf, sizeof o->run_buf) != 0) {
            log_error("cannot name the run after the working directory: use --run NAME");
            rc = EXIT_USAGE;
            goto out;
        }
        o->run = o->run_buf;
    }
    if (!o->dir || !*o->dir)
        o->dir = "./checkpoints";
out:
    return rc;
}

/* Every retry of a store request, as it happens: a warning on a terminal
 * (a person waits and should see why), a debug line otherwise. */
static void retry_notice(const struct ckpt_retry_notice *n)
{
    log_msg(log_interactive() ? LOG_WARN : LOG_DEBUG, "retry", "retrying %u/%u in %.1fs: %s",
            n->attempt, n->max, (double)n->delay_ms / 1000.0, n->reason);
}

int main(int argc, char **argv)
{
    struct opts o;
    int rc;

    memset(&o, 0, sizeof o);
    rc = parse_args(argc, argv, &o);
    if (rc != 0) {
        rc = rc < 0 ? 0 : rc;
        goto out;
    }
    log_setup(o.log_json, o.verbosity);
    ckpt_retry_set_observer(retry_notice);
    ckpt_store_set_notice_log(log_lib, NULL);
    if ((rc = resolve(&o)) != 0)
        goto out;
    switch (o.cmd_id) {
    case CMD_RUN: rc = cmd_run(&o); break;
    case CMD_RECOVER: rc = cmd_recover(&o); break;
    case CMD_SAVE: rc = cmd_save(&o); break;
    case CMD_RESTORE: rc = cmd_restore(&o); break;
    case CMD_LS: rc = cmd_ls(&o); break;
    case CMD_STATUS: rc = cmd_status(&o); break;
    case CMD_VERIFY: rc = cmd_verify(&o); break;
    case CMD_DOCTOR: rc = cmd_doctor(&o); break;
    default: rc = cmd_gc(&o); break;
    }
out:
    return rc;
}
