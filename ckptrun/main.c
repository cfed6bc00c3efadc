/*
 * main.c -- command line: subcommand, options with environment fallbacks,
 * per-command help, and dispatch. Nothing here touches the store.
 */
#include "ckptrun.h"
#include "log.h"
#include "parse.h"
#include "store.h"

#include <getopt.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef CKPT_VERSION_FULL
#define CKPT_VERSION_FULL CKPT_VERSION_STRING
#endif

/* `recover` belongs to the recovery module; when it is not linked in,
 * ckptrun says so instead of failing to link. */
/* --signal or CKPT_SIGNAL given (even "none"): --preload then keeps it. */
static int sig_explicit;

int cmd_recover(struct opts *o) __attribute__((weak));

enum {
    O_STORE = 256, O_RUN, O_DIR, O_INTERVAL, O_KEEP, O_SIGNAL, O_GRACE, O_NOTICE,
    O_METADATA_URL, O_CODEC, O_PRELOAD, O_LOG_JSON, O_VERSION, O_STEP, O_JSON,
    O_LEAD, O_SETTLE, O_MARKER, O_ON_COMPLETE, O_ON_PREEMPT, O_ON_FAILURE, O_MIN_AGE,
    O_STATE_BYTES, O_BUDGET,
    O_LEASE, O_STORAGE_CLASS, O_SSE, O_SSE_KMS, O_MAX_RATE, O_CONNECTIONS,
    O_SYNC, O_DRY_RUN, O_RESUME_STOPPED,
};

static const struct option long_opts[] = {
    { "store", required_argument, NULL, O_STORE },
    { "run", required_argument, NULL, O_RUN },
    { "dir", required_argument, NULL, O_DIR },
    { "interval", required_argument, NULL, O_INTERVAL },
    { "keep", required_argument, NULL, O_KEEP },
    { "signal", required_argument, NULL, O_SIGNAL },
    { "grace", required_argument, NULL, O_GRACE },
    { "notice", required_argument, NULL, O_NOTICE },
    { "metadata-url", required_argument, NULL, O_METADATA_URL },
    { "codec", required_argument, NULL, O_CODEC },
    { "preload", no_argument, NULL, O_PRELOAD },
    { "log-json", no_argument, NULL, O_LOG_JSON },
    { "quiet", no_argument, NULL, 'q' },
    { "verbose", no_argument, NULL, 'v' },
    { "help", no_argument, NULL, 'h' },
    { "version", no_argument, NULL, O_VERSION },
    { "step", required_argument, NULL, O_STEP },
    { "json", no_argument, NULL, O_JSON },
    { "lead", required_argument, NULL, O_LEAD },
    { "settle", required_argument, NULL, O_SETTLE },
    { "complete-marker", required_argument, NULL, O_MARKER },
    { "on-complete", required_argument, NULL, O_ON_COMPLETE },
    { "on-preempt", required_argument, NULL, O_ON_PREEMPT },
    { "on-failure", required_argument, NULL, O_ON_FAILURE },
    { "min-age", required_argument, NULL, O_MIN_AGE },
    { "dry-run", no_argument, NULL, O_DRY_RUN },
    { "state-bytes", required_argument, NULL, O_STATE_BYTES },
    { "budget", required_argument, NULL, O_BUDGET },
    { "lease", required_argument, NULL, O_LEASE },
    { "storage-class", required_argument, NULL, O_STORAGE_CLASS },
    { "sse", required_argument, NULL, O_SSE },
    { "sse-kms-key-id", required_argument, NULL, O_SSE_KMS },
    { "max-rate", required_argument, NULL, O_MAX_RATE },
    { "connections", required_argument, NULL, O_CONNECTIONS },
    { "sync", no_argument, NULL, O_SYNC },
    { "resume-stopped", no_argument, NULL, O_RESUME_STOPPED },
    { NULL, 0, NULL, 0 },
};

static const char common_help[] =
    "Common options (environment variable in brackets):\n"
    "  --store URL        store: file:///abs/path, s3://bucket/prefix, gs://..., az://...\n"
    "                     [CKPT_STORE] (default file://$XDG_DATA_HOME/ckpt)\n"
    "  --run NAME         run inside the store [CKPT_RUN] (default: basename of cwd)\n"
    "  --codec C          zstd[:LEVEL] | lz4 | none [CKPT_CODEC] (default zstd:1)\n"
    "  --keep N           committed checkpoints to retain [CKPT_KEEP] (default 3)\n"
    "Object stores (set for the trainer too; docs/stores.md):\n"
    "  --connections N    parallel requests [CKPT_CONNECTIONS] (default 8); 8 MiB chunks\n"
    "                     travel in 32 MiB packs [CKPT_PACK_BYTES], N/2 at once\n"
    "  --max-rate RATE    upload cap in bytes/s, e.g. 50M [CKPT_MAX_RATE] (default none)\n"
    "  --storage-class C  S3 storage class, e.g. STANDARD_IA, INTELLIGENT_TIERING,\n"
    "                     GLACIER_IR [CKPT_S3_STORAGE_CLASS] (GLACIER, DEEP_ARCHIVE refused)\n"
    "  --sse AES256|aws:kms  S3 server-side encryption [CKPT_S3_SSE]\n"
    "  --sse-kms-key-id ID   KMS key for aws:kms (implies it) [CKPT_S3_SSE_KMS_KEY_ID]\n"
    "  --log-json         one JSON object per log line on stderr\n"
    "  -q, --quiet        only warnings and errors;  -v, --verbose  debug lines\n"
    "  -h, --help         this help;  --version  print the version\n"
    "Durations: 250ms, 90s, 30m, 1h, 1h30m (a bare number is seconds).\n";

static const char exit_help[] =
    "Exit codes: 0 ok, 64 bad command line, 78 bad configuration or credentials,\n"
    "69 store unreachable; see each command for others.\n";

static void help(const char *cmd)
{
    const char *h = NULL;
    if (!cmd) {
        printf("ckptrun %s: checkpoint and resume training on spot instances\n\n"
               "  ckptrun [run] [OPTIONS] -- COMMAND [ARG...]   supervise a training command\n"
               "  ckptrun recover [OPTIONS] -- COMMAND [ARG...] entry point on a new instance\n"
               "  ckptrun save    [OPTIONS] --step N PATH...    commit files as a checkpoint\n"
               "  ckptrun restore [OPTIONS] [--step N] DIR      write a checkpoint's files to DIR\n"
               "  ckptrun ls      [OPTIONS]                     runs of a store / checkpoints of a run\n"
               "  ckptrun status  [OPTIONS]                     run record: state, preemptions, bytes\n"
               "  ckptrun verify  [OPTIONS] [--step N]          check every chunk's checksum\n"
               "  ckptrun gc      [OPTIONS] --keep N            apply retention, delete unused objects\n"
               "  ckptrun doctor  [OPTIONS] [--state-bytes N]   will a checkpoint make it in time?\n\n"
               "`ckptrun COMMAND --help` explains one command.\n\n%s\n%s",
               CKPT_VERSION_FULL, common_help, exit_help);
        return;
    }
    if (strcmp(cmd, "run") == 0)
        h = "ckptrun [run] [OPTIONS] -- COMMAND [ARG...]\n\n"
            "Runs COMMAND in its own process group, after restoring the run's latest\n"
            "file checkpoint into CKPT_DIR, and commits its checkpoints to the store.\n"
            "The child gets CKPT_SOCKET, CKPT_DIR, CKPT_STORE, CKPT_RUN, CKPT_SIGNAL,\n"
            "CKPT_RESUMED (1 if a checkpoint was restored) and CKPT_STEP.\n\n"
            "How checkpoints are taken:\n"
            "  - programs linked with libckpt get requests over CKPT_SOCKET;\n"
            "  - otherwise entries (files or directories directly under CKPT_DIR) are\n"
            "    committed when complete: renamed into place, holding a closed file that\n"
            "    matches --complete-marker, or unchanged for --settle with no writer.\n"
            "    Step: number after step= step- step_ checkpoint-, else the last number.\n\n"
            "Options:\n"
            "  --dir DIR          trainer's checkpoint directory [CKPT_DIR] (./checkpoints)\n"
            "  --interval D       ask for a checkpoint every D [CKPT_INTERVAL] (off)\n"
            "  --signal SIG|none  signal sent to ask for a checkpoint when the child is not\n"
            "                     on the socket: to the child if it handles it, else to the\n"
            "                     topmost handler of each branch of its tree [CKPT_SIGNAL]\n"
            "                     (none; USR1 with --preload, which makes it safe)\n"
            "  --grace D          whole time budget of a stop without its own deadline:\n"
            "                     checkpoint, SIGTERM to the group, SIGKILL at the end (30s)\n"
            "  --lead D           deadline of a SIGUSR1/SIGXCPU scheduler notice (60s)\n"
            "  --settle D         quiet time after which an entry is complete (10s)\n"
            "  --complete-marker GLOB  an entry is complete once a file matching GLOB\n"
            "                     in it has been closed (e.g. trainer_state.json)\n"
            "  --notice P         auto|aws|gcp|azure|aliyun|tencent|none [CKPT_NOTICE]\n"
            "  --metadata-url URL replace scheme/host/port of the metadata service\n"
            "  --preload          inject libckpt_preload.so into the command\n"
            "  --lease D          lease on the run, renewed every D/3 (60s); a run whose\n"
            "                     lease another live runner holds is refused (exit 78)\n"
            "  --on-complete CMD, --on-preempt CMD, --on-failure CMD\n"
            "                     run `sh -c CMD` at the end, with CKPT_RUN, CKPT_STATE,\n"
            "                     CKPT_STEP, CKPT_EXIT set; e.g. --on-preempt 'shutdown -h now'\n\n"
            "Signals to ckptrun: SIGTERM stops (checkpoint, then stop the child); SIGUSR1\n"
            "and SIGXCPU are scheduler notices (stop within --lead); SIGUSR2 checkpoints now\n"
            "and keeps running; SIGINT and SIGHUP are forwarded to the child.\n\n"
            "Exit: the child's code when it ends by itself (128+N on signal N; 0 marks\n"
            "the run completed), 75 stopped with the final checkpoint committed,\n"
            "74 stopped without it or lease lost, 78 also when another runner holds the\n"
            "lease, 64 / 69 as below.\n";
    else if (strcmp(cmd, "save") == 0)
        h = "ckptrun save [OPTIONS] --step N PATH...\n\n"
            "Commits files and directories as one checkpoint at step N. Items are named\n"
            "relative to each PATH's parent: `save --step 100 out/checkpoint-100` stores\n"
            "checkpoint-100/model.bin, and `restore DIR` puts it back as\n"
            "DIR/checkpoint-100/model.bin. Unchanged bytes are not stored again.\n"
            "Retention (--keep) applies after the commit.\n";
    else if (strcmp(cmd, "restore") == 0)
        h = "ckptrun restore [OPTIONS] [--step N] DIR\n\n"
            "Writes every item of the checkpoint at step N (default: the newest that\n"
            "verifies) as files under DIR, created owner-only when missing. If the newest\n"
            "checkpoint is damaged an older one is used, with a warning, and the exit is 0.\n"
            "Names that would escape DIR are refused. Each file is renamed into place once\n"
            "every byte of it has verified; like cp or curl, restore leaves the writing\n"
            "to disk to the kernel (the store holds the durable copy).\n"
            "  --sync             make each file durable (fsync) before its rename\n"
            "                     [CKPT_RESTORE_SYNC=1]; costs the disk's write time\n"
            "Exit: 0 restored, 1 no checkpoint / damaged / refused.\n";
    else if (strcmp(cmd, "ls") == 0)
        h = "ckptrun ls [OPTIONS] [--json]\n\n"
            "With a run selected (--run or CKPT_RUN): one line per committed checkpoint,\n"
            "newest first: step, time, items, raw bytes, stored bytes, new bytes.\n"
            "Without one: the names of the runs in the store.\n";
    else if (strcmp(cmd, "status") == 0)
        h = "ckptrun status [OPTIONS] [--json]\n\n"
            "The run record: state (running, preempted, completed, failed), last update,\n"
            "host and pid, the lease (holder, epoch, live/expired/released, last heartbeat,\n"
            "expiry), preemptions, checkpoints, bytes committed, running time, and an\n"
            "estimate of the work lost to stops (time from the last commit to each stop).\n";
    else if (strcmp(cmd, "verify") == 0)
        h = "ckptrun verify [OPTIONS] [--step N]\n\n"
            "Reads every chunk of checkpoint N (default: every committed checkpoint) and\n"
            "checks its checksum. Exit: 0 intact, 1 damage found (details on stderr),\n"
            "69 store unreachable.\n";
    else if (strcmp(cmd, "gc") == 0)
        h = "ckptrun gc [OPTIONS] --keep N [--min-age D] [--dry-run]\n\n"
            "Keeps the newest N committed checkpoints (never the newest that verifies),\n"
            "deletes the others and every chunk object or pack no kept checkpoint uses\n"
            "that is older than --min-age by the store's clock (default 15m; a pack goes\n"
            "only when none of its chunks is used). Never deletes what a save running\n"
            "elsewhere commits with: such a save is refused instead and the next one\n"
            "commits. A save that commits meanwhile makes gc start over from the new\n"
            "HEAD. --dry-run lists what would be deleted and why, and deletes nothing.\n";
    else if (strcmp(cmd, "doctor") == 0)
        h = "ckptrun doctor [OPTIONS] [--state-bytes SIZE | --dir DIR] [--budget D] [--json]\n\n"
            "Checks, in at most --budget (default 30s), that this instance can save in\n"
            "time: provider and notice endpoint (--notice, --metadata-url), the window\n"
            "(--grace on Kubernetes, --lead under SLURM), the store's credentials and a\n"
            "write/read/delete under RUN/.doctor/, conditional writes, upload and\n"
            "download speed (at most 32 MiB each way), --codec speed and ratio on this\n"
            "CPU, free space in --dir, and estimates the time from notice to a committed\n"
            "full and incremental checkpoint. State size: --state-bytes (e.g. 7GiB), else\n"
            "the newest entry in --dir. One ok/warn/fail line per check (--json: one\n"
            "object). Exit: 0 everything fits, 1 something fails. See docs/doctor.md.\n"
            "Also read: --dir, --notice, --metadata-url, --grace, --lead, --interval, as for run.\n";
    else if (strcmp(cmd, "recover") == 0)
        h = "ckptrun recover [OPTIONS] -- COMMAND [ARG...]\n\n"
            "Cron/systemd entry point, safe to start every minute: exits 0 at once when\n"
            "the run is completed (or stopped by its user) or another live instance\n"
            "holds its lease (naming it);\n"
            "otherwise takes the lease and supervises COMMAND exactly as `run` does\n"
            "(a run that does not exist yet is started). Requires --run or CKPT_RUN.\n"
            "Takes the options of `run`, and:\n"
            "  --lease D          lease duration, renewed every D/3 (60s)\n"
            "  --resume-stopped   also resume a run its user stopped (Ctrl-C, scancel)\n"
            "See docs/recover.md for crontab, systemd and cloud-init recipes.\n"
            "Exit: 0 nothing to do, else as `run`; 74 also when the lease was lost.\n";
    if (h)
        printf("%s\n%s\n%s", h, common_help, exit_help);
}

static const char *const commands[] = {
    "run", "recover", "save", "restore", "ls", "status", "verify", "gc", "doctor", NULL,
};

int exit_code_for_status(ckpt_status st)
{
    switch (st) {
    case CKPT_E_UNREACHABLE:
    case CKPT_E_NOENT:        /* file store whose mount point is missing */
    case CKPT_E_TRANSIENT:
    case CKPT_E_THROTTLED:
    case CKPT_E_IO:
    case CKPT_E_NOSPACE:
        return EXIT_UNAVAILABLE;
    default:
        return EXIT_CONFIG;
    }
}

void opts_to_config(const struct opts *o, struct ckpt_config *cfg)
{
    struct ckpt_config init = CKPT_CONFIG_INIT;
    *cfg = init;
    cfg->store = o->store;
    cfg->run = o->run;
    cfg->codec = o->codec;
    cfg->codec_level = o->codec_level;
    cfg->keep = o->keep;
    cfg->log_fn = log_lib;
    cfg->log_level = log_lib_level();
    /* ckptrun's own contexts must never connect to a control socket (it
     * may itself run under another ckptrun). */
    cfg->no_control = 1;
}

int open_ctx(const struct opts *o, struct ckpt_ctx **ctx)
{
    struct ckpt_config cfg;
    ckpt_status st;
    int rc = 0;

    opts_to_config(o, &cfg);
    st = ckpt_open(&cfg, ctx);
    if (st != CKPT_OK) {
        rc = exit_code_for_status(st);
        log_error("cannot open store %s (run %s): %s", o->store, o->run, ckpt_strerror(st));
        *ctx = NULL;
    }
    return rc;
}

static int notice_valid(const char *v)
{
    static const char *const ok[] = { "auto", "aws", "gcp", "azure", "aliyun", "tencent",
                                       "none", NULL };
    for (int i = 0; ok[i]; i++)
        if (strcmp(v, ok[i]) == 0)
            return 1;
    return 0;
}

/* Options read from the environment are configuration (exit 78 when bad);
 * the same value on the command line is usage (exit 64). */
static int env_duration(const char *var, uint64_t *ms)
{
    const char *v = getenv(var);
    if (v && *v && parse_duration_ms(v, ms) != 0) {
        log_error("%s='%s' is not a duration (e.g. 90s, 30m, 1h)", var, v);
        return EXIT_CONFIG;
    }
    return 0;
}

static int set_defaults_from_env(struct opts *o)
{
    const char *v;
    uint64_t n;
    int rc = 0;

    o->keep = 3;
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
    if ((v = getenv("CKPT_SIGNAL")) && *v && parse_signal(v, &o->sig) != 0) {
        log_error("CKPT_SIGNAL='%s' is not a signal name (USR1, SIGTERM, 10, none)", v);
        rc = EXIT_CONFIG;
        goto out;
    }
    if (o->notice && *o->notice && !notice_valid(o->notice)) {
        log_error("CKPT_NOTICE='%s' is not auto, aws, gcp, azure, aliyun, tencent or none",
                  o->notice);
        rc = EXIT_CONFIG;
        goto out;
    }
    if ((v = getenv("CKPT_CODEC")) && *v) {
        if (parse_codec(v, &o->codec, &o->codec_level) != 0) {
            log_error("CKPT_CODEC='%s' is not zstd[:1-22], lz4 or none", v);
            rc = EXIT_CONFIG;
            goto out;
        }
        o->codec_str = v;
    }
out:
    return rc;
}

static int is_command(const char *s)
{
    for (int i = 0; commands[i]; i++)
        if (strcmp(s, commands[i]) == 0)
            return 1;
    return 0;
}

static int bad_duration(const char *opt, const char *v)
{
    log_error("%s '%s' is not a duration (e.g. 250ms, 90s, 30m, 1h)", opt, v);
    return EXIT_USAGE;
}

/* Parse argv into o. @return 0, or an exit code (-1: exit 0 after help). */
static int parse_args(int argc, char **argv, struct opts *o)
{
    int c, rc = 0, first = 1, want_help = 0, want_version = 0;
    const char *s3_flag = NULL; /* an S3-only option given: warned about below if unused */
    uint64_t n;
    /* `run` stops at the first non-option: the rest is the command. */
    const char *short_opts;

    o->cmd = "run";
    if (argc > 1 && is_command(argv[1])) {
        o->cmd = argv[1];
        first = 2;
    } else if (argc > 1 && strcmp(argv[1], "help") == 0) {
        help(argc > 2 && is_command(argv[2]) ? argv[2] : NULL);
        rc = -1;
        goto out;
    }
    if ((rc = set_defaults_from_env(o)) != 0)
        goto out;
    short_opts = (strcmp(o->cmd, "run") == 0 || strcmp(o->cmd, "recover") == 0) ? "+:qvhV" : ":qvhV";
    /* getopt sees argv shifted past the subcommand. */
    argv += first - 1;
    argc -= first - 1;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, short_opts, long_opts, NULL)) != -1) {
        switch (c) {
        case O_STORE: o->store = optarg; break;
        case O_RUN: o->run = optarg; break;
        case O_DIR: o->dir = optarg; break;
        case O_INTERVAL:
            if (parse_duration_ms(optarg, &o->interval_ms) != 0) {
                rc = bad_duration("--interval", optarg);
                goto out;
            }
            break;
        case O_GRACE:
            if (parse_duration_ms(optarg, &o->grace_ms) != 0) {
                rc = bad_duration("--grace", optarg);
                goto out;
            }
            break;
        case O_LEAD:
            if (parse_duration_ms(optarg, &o->lead_ms) != 0) {
                rc = bad_duration("--lead", optarg);
                goto out;
            }
            break;
        case O_SETTLE:
            if (parse_duration_ms(optarg, &o->settle_ms) != 0) {
                rc = bad_duration("--settle", optarg);
                goto out;
            }
            break;
        case O_STATE_BYTES: o->state_bytes = optarg; break;
        case O_BUDGET:
            if (parse_duration_ms(optarg, &o->budget_ms) != 0 || o->budget_ms == 0) {
                rc = bad_duration("--budget", optarg);
                goto out;
            }
            break;
        case O_MIN_AGE:
            if (parse_duration_ms(optarg, &o->min_age_ms) != 0) {
                rc = bad_duration("--min-age", optarg);
                goto out;
            }
            break;
        case O_LEASE:
            if (parse_duration_ms(optarg, &o->lease_ms) != 0 || o->lease_ms < 1000) {
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
        case O_SIGNAL:
            sig_explicit = 1;
            if (parse_signal(optarg, &o->sig) != 0) {
                log_error("--signal '%s' is not a signal (USR1, SIGUSR1, 10, none)", optarg);
                rc = EXIT_USAGE;
                goto out;
            }
            break;
        case O_CODEC:
            if (parse_codec(optarg, &o->codec, &o->codec_level) != 0) {
                log_error("--codec '%s' is not zstd[:1-22], lz4 or none", optarg);
                rc = EXIT_USAGE;
                goto out;
            }
            o->codec_str = optarg;
            break;
        case O_NOTICE:
            if (!notice_valid(optarg)) {
                log_error("--notice '%s' is not auto, aws, gcp, azure, aliyun, tencent or none",
                          optarg);
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
            if (ckpt_store_parse_size(optarg) == 0) {
                log_error("--max-rate '%s' is not a rate in bytes/s (e.g. 50M, 1G)", optarg);
                rc = EXIT_USAGE;
                goto out;
            }
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
        case O_RESUME_STOPPED: o->resume_stopped = 1; break;
        case O_PRELOAD: o->preload = 1; break;
        case O_LOG_JSON: o->log_json = 1; log_setup(1, o->verbosity); break;
        case 'q': o->verbosity = -1; break;
        case 'v': o->verbosity = 1; break;
        case 'h': want_help = 1; break;
        case 'V':
        case O_VERSION: want_version = 1; break;
        case O_JSON: o->json = 1; break;
        case O_DRY_RUN: o->dry_run = 1; break;
        case O_MARKER: o->marker = optarg; break;
        case O_ON_COMPLETE: o->on_complete = optarg; break;
        case O_ON_PREEMPT: o->on_preempt = optarg; break;
        case O_ON_FAILURE: o->on_failure = optarg; break;
        case ':':
            log_error("option '%s' needs a value (see ckptrun %s --help)", argv[optind - 1], o->cmd);
            rc = EXIT_USAGE;
            goto out;
        default:
            if (optopt)
                log_error("unknown option '-%c' (see ckptrun %s --help)", optopt, o->cmd);
            else
                log_error("unknown option '%s' (see ckptrun %s --help)", argv[optind - 1], o->cmd);
            rc = EXIT_USAGE;
            goto out;
        }
    }
    if (want_help) {
        help(first == 2 ? o->cmd : NULL);
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
    {
        const char *url = o->store && *o->store ? o->store : getenv("CKPT_STORE");
        if (s3_flag && (!url || (strncmp(url, "s3://", 5) && strncmp(url, "gs://", 5))))
            log_msg(LOG_WARN, "options", "%s applies to s3:// (and gs://) stores only: "
                    "ignored for %s", s3_flag, url && *url ? url : "the default file store");
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

    if (!o->store || !*o->store) {
        if (!ckpt_store_default_url(o->store_buf, sizeof o->store_buf)) {
            log_error("no store given (--store or CKPT_STORE) and no HOME for the default");
            rc = EXIT_CONFIG;
            goto out;
        }
        o->store = o->store_buf;
    }
    if (o->run && *o->run) {
        if (!run_name_valid(o->run)) {
            log_error("run name '%s' is not valid: use 1-128 of A-Z a-z 0-9 . _ - "
                      "(not starting with '.')", o->run);
            rc = run_from_env ? EXIT_CONFIG : EXIT_USAGE;
            goto out;
        }
    } else if (strcmp(o->cmd, "ls") == 0) {
        o->run = NULL; /* ls without a run lists the runs of the store */
    } else if (strcmp(o->cmd, "recover") == 0) {
        /* cron and systemd start us in $HOME or /: a name from the working
         * directory would silently start a different run */
        log_error("recover needs the run's name: --run NAME or CKPT_RUN");
        rc = EXIT_USAGE;
        goto out;
    } else {
        if (!getcwd(cwd, sizeof cwd) || name_sanitize(basename(cwd), o->run_buf,
                                                       sizeof o->run_buf) != 0) {
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
    if ((rc = resolve(&o)) != 0)
        goto out;
    if (strcmp(o.cmd, "run") == 0)
        rc = cmd_run(&o);
    else if (strcmp(o.cmd, "recover") == 0) {
        if (cmd_recover) {
            rc = cmd_recover(&o);
        } else {
            log_error("recover is not available in this build");
            rc = EXIT_USAGE;
        }
    } else if (strcmp(o.cmd, "save") == 0)
        rc = cmd_save(&o);
    else if (strcmp(o.cmd, "restore") == 0)
        rc = cmd_restore(&o);
    else if (strcmp(o.cmd, "ls") == 0)
        rc = cmd_ls(&o);
    else if (strcmp(o.cmd, "status") == 0)
        rc = cmd_status(&o);
    else if (strcmp(o.cmd, "verify") == 0)
        rc = cmd_verify(&o);
    else if (strcmp(o.cmd, "doctor") == 0)
        rc = cmd_doctor(&o);
    else
        rc = cmd_gc(&o);
out:
    return rc;
}
