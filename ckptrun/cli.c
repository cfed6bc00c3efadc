/*
 * cli.c -- the command line as data (see cli.h): the subcommands, every
 * option, and --help; cli_gen.c turns the same table into the manual page
 * and the shell completions.
 */
#include "cli.h"
#include "ckpt_common.h"
#include "ckpt_store.h"
#include "notice/notice.h"
#include "base/parse.h"

#include <stdlib.h>
#include <string.h>

#define SUP (CMDBIT(CMD_RUN) | CMDBIT(CMD_RECOVER))
#define RESULT_CMDS (CMDBIT(CMD_SAVE) | CMDBIT(CMD_RESTORE) | CMDBIT(CMD_LS) | \
                     CMDBIT(CMD_STATUS) | CMDBIT(CMD_VERIFY) | CMDBIT(CMD_GC) | \
                     CMDBIT(CMD_DOCTOR))

const struct cli_cmd cli_cmds[CMD__COUNT] = {
    [CMD_RUN] = { "run", "[OPTIONS] -- COMMAND [ARG...]",
        "supervise a training command (always runs it)",
        "Runs COMMAND in its own process group, after restoring the run's newest\n"
        "file checkpoint into CKPT_DIR, and commits its checkpoints to the store.\n"
        "The child gets CKPT_SOCKET, CKPT_DIR, CKPT_STORE, CKPT_RUN, CKPT_SIGNAL,\n"
        "CKPT_RESUMED (1 if a checkpoint was restored) and CKPT_STEP.\n"
        "\n"
        "`run` may be left out: `ckptrun python3 train.py` runs python3. A first\n"
        "word that is neither a subcommand nor an executable program is refused\n"
        "(exit 64, with the subcommand it resembles) before anything starts;\n"
        "after `--` or `run` any word is the command.\n"
        "\n"
        "How checkpoints are taken:\n"
        "  - programs linked with libckpt get requests over CKPT_SOCKET;\n"
        "  - otherwise entries (files or directories directly under CKPT_DIR) are\n"
        "    committed when complete: reported by the trainer (saved(path, step)),\n"
        "    renamed into place, holding a closed file that matches\n"
        "    --complete-marker with no writer left in it, or unchanged for --settle\n"
        "    with no writer. Step: the trainer's (saved(), trainer_state.json's\n"
        "    global_step, the number after step= step- step_ checkpoint-, else the\n"
        "    last number in the name), else a counter (marked * by ls).\n"
        "\n"
        "Signals to ckptrun: SIGTERM stops (checkpoint, then stop the child;\n"
        "under SLURM without a SIGUSR1/SIGXCPU first it is the user's stop:\n"
        "state stopped, exit 143); SIGUSR1 and SIGXCPU are scheduler notices\n"
        "(stop within --lead); SIGUSR2 checkpoints now and keeps running; SIGINT\n"
        "is forwarded to the job's process group and is the user's stop (as\n"
        "Ctrl-C: checkpoint, state stopped, exit 130); SIGHUP and SIGQUIT are\n"
        "forwarded. The same SIGTERM or SIGINT sent to the job's process group, or\n"
        "taken by the trainer itself (libckpt, the Python helper), starts the\n"
        "same stop. The job runs under a keeper process: no process of it\n"
        "outlives ckptrun, even if ckptrun is killed.\n",
        "Exit: the child's code when it ends by itself (128+N on signal N; 0 marks\n"
        "the run completed), 130/143 stopped by its user (Ctrl-C, scancel), 75\n"
        "stopped with the final checkpoint committed, 74\n"
        "stopped without it or lease lost, or the child exited 0 with its newest\n"
        "checkpoint still not in the store (state uncommitted), 78 also when\n"
        "another runner holds the lease, 64 bad command line, 69 store\n"
        "unreachable. The last line says the outcome, the newest committed step\n"
        "and the command that resumes the run.\n" },
    [CMD_RECOVER] = { "recover", "[OPTIONS] -- COMMAND [ARG...]",
        "cron/systemd entry point on a new instance",
        "Cron/systemd entry point, safe to start every minute: exits 0 at once when\n"
        "the run is completed, was stopped by its user (unless --resume-stopped),\n"
        "or another live instance holds its lease (naming it);\n"
        "otherwise takes the lease and supervises COMMAND exactly as `run` does\n"
        "(a run that does not exist yet is started). Requires --run or CKPT_RUN.\n"
        "Takes the options of `run`. See docs/recover.md for crontab, systemd and\n"
        "cloud-init recipes.\n",
        "Exit: 0 nothing to do, else as `run`; 74 also when the lease was lost.\n" },
    [CMD_SAVE] = { "save", "[OPTIONS] --step N PATH...",
        "commit files and directories as a checkpoint",
        "Commits files and directories as one checkpoint at step N. Items are\n"
        "named relative to each PATH's parent: `save --step 100 out/checkpoint-100`\n"
        "stores checkpoint-100/model.bin, and `restore DIR` puts it back as\n"
        "DIR/checkpoint-100/model.bin. Unchanged bytes are not stored again.\n"
        "Retention (--keep) applies after the commit.\n"
        "\n"
        "The newest checkpoint is the one with the highest step, the one `run`\n"
        "resumes from: a step lower than the run's newest is refused unless\n"
        "--force (it would not be resumed from). Ends with one line: step, bytes\n"
        "stored and raw, rate.\n",
        "Exit: 0 committed, 1 not committed, 64 bad command line (also a lower\n"
        "step without --force), 69 store unreachable, 78 store refused.\n" },
    [CMD_RESTORE] = { "restore", "[OPTIONS] [--step N] DIR",
        "write a checkpoint's files into DIR",
        "Writes every item of the checkpoint at step N (default: the newest that\n"
        "verifies) as files under DIR, created owner-only when missing. If the\n"
        "newest checkpoint is damaged an older one is used, with a warning, and\n"
        "the exit is 0. Names that would escape DIR are refused. Each file is\n"
        "renamed into place once every byte of it has verified; like cp or curl,\n"
        "restore leaves the writing to disk to the kernel (the store holds the\n"
        "durable copy) unless --sync. Ends with one line: files, bytes, rate.\n",
        "Exit: 0 restored, 1 no such run or checkpoint / damaged / refused, 69\n"
        "store unreachable, 78 bad configuration or DIR not usable.\n" },
    [CMD_LS] = { "ls", "[OPTIONS] [--step N] [--json]",
        "runs of a store, checkpoints of a run, items of a checkpoint",
        "Without a run: the store's runs, one line each: RUN, STATE (the\n"
        "record's; stale: running, but no live runner holds the lease), NEWEST\n"
        "STEP (committed), UPDATED (the newest object's time) and SIZE (every\n"
        "object of the run). Costs one listing of the store, then per run a\n"
        "read of HEAD and of RUN (and of LEASE when RUN says running),\n"
        "--connections runs at a time.\n"
        "\n"
        "With a run selected (--run or CKPT_RUN): one line per committed\n"
        "checkpoint, newest first: step, commit time, items, raw bytes, stored\n"
        "bytes, new bytes. With --step N too: the items of that checkpoint --\n"
        "name, type (file, link, region, device, replicated), size, stored\n"
        "size, and the rank's part of a multi-rank checkpoint.\n"
        "Never creates a store or a directory.\n",
        "Exit: 0 listed, 1 no such run, step or store, 64 bad command line, 69\n"
        "store unreachable.\n" },
    [CMD_STATUS] = { "status", "[OPTIONS] [--json]",
        "the run record: state, lease, preemptions, bytes, time",
        "The run record as a dashboard: state, last update (with how long ago),\n"
        "host and pid, the lease (holder, epoch, live/expired/released, last\n"
        "heartbeat, expiry), the newest checkpoint with its size and the last\n"
        "commit's speed, preemptions, running time, and the estimate of the work\n"
        "lost to stops (time from each session's last commit to its stop or\n"
        "failure). Never creates a store or a directory.\n",
        "Exit: 0, 1 no such run, 69 store unreachable.\n" },
    [CMD_VERIFY] = { "verify", "[OPTIONS] [--step N]",
        "check every chunk's checksum",
        "Reads every chunk of checkpoint N (default: every committed checkpoint)\n"
        "and checks its checksums. Damage is described on stderr (item, chunk).\n"
        "Ends with one line: checkpoints, files, chunks and bytes checked, time.\n"
        "Never creates a store or a directory.\n",
        "Exit: 0 intact, 1 damage found or no such run, 69 store unreachable.\n" },
    [CMD_GC] = { "gc", "[OPTIONS] --keep N [--min-age D] [--dry-run]",
        "apply retention, delete unused objects",
        "Keeps the newest N committed checkpoints (never the newest that\n"
        "verifies), deletes the others and every chunk object or pack no kept\n"
        "checkpoint uses that is older than --min-age by the store's clock (a\n"
        "pack goes only when none of its chunks is used). Never deletes what a\n"
        "save running elsewhere commits with: such a save is refused instead and\n"
        "the next one commits. A save that commits meanwhile makes gc start over\n"
        "from the new HEAD. --dry-run lists what would be deleted and why, and\n"
        "deletes nothing. Ends with one line: objects and bytes freed.\n",
        "Exit: 0, 1 failed, 69 store unreachable.\n" },
    [CMD_DOCTOR] = { "doctor", "[OPTIONS] [--state-bytes SIZE | --dir DIR] [--budget D]",
        "will a checkpoint make it in time on this instance?",
        "Checks, in at most --budget, that this instance can save in time:\n"
        "provider and notice endpoint (--notice, --metadata-url), the window\n"
        "(--grace on Kubernetes, --lead under SLURM), the store's credentials and\n"
        "a write/read/delete under RUN/.doctor/, conditional writes, upload and\n"
        "download speed (at most 32 MiB each way), --codec speed and ratio on\n"
        "this CPU, free space in --dir, and the time from notice to a committed\n"
        "checkpoint. A full checkpoint that does not fit the window fails, unless\n"
        "only a small share of the state changes between checkpoints (--changed,\n"
        "or measured from the run's own last checkpoints). With --interval it\n"
        "states the work expected to be lost per preemption. One ok/warn/fail\n"
        "line per check; see docs/doctor.md.\n",
        "Exit: 0 everything fits, 1 something fails, 64 bad command line.\n" },
};

const struct cli_opt cli_opts[] = {
    /* common to every command */
    { "store", 0, "URL", O_STORE, CMD_ALL, "CKPT_STORE", "file://$XDG_DATA_HOME/ckpt",
      "the store, by its URL:" CKPT_STORE_URL_FORMS, NULL },
    { "run", 0, "NAME", O_RUN, CMD_ALL, "CKPT_RUN", "basename of the working directory",
      "the run inside the store (recover needs it; ls without it lists the runs); a new "
      "run's name is 1-128 of A-Z a-z 0-9 . _ - not starting with '.'", NULL },
    { "connections", 0, "N", O_CONNECTIONS, CMD_ALL, "CKPT_CONNECTIONS", "8",
      "object stores: parallel requests; 8 MiB chunks travel in 32 MiB packs, N/2 "
      "uploading at once", NULL },
    { "max-rate", 0, "RATE", O_MAX_RATE, CMD_ALL, "CKPT_MAX_RATE", "none",
      "object stores: upload cap in bytes/s for the whole process, e.g. 50M (MiB/s) "
      "or 50MB (10^6 B/s)", NULL },
    { "storage-class", 0, "CLASS", O_STORAGE_CLASS, CMD_ALL, "CKPT_S3_STORAGE_CLASS", NULL,
      "s3:// and gs://: storage class of every object, e.g. STANDARD_IA, "
      "INTELLIGENT_TIERING, GLACIER_IR (GLACIER and DEEP_ARCHIVE are refused)",
      "STANDARD STANDARD_IA ONEZONE_IA INTELLIGENT_TIERING GLACIER_IR NEARLINE COLDLINE ARCHIVE" },
    { "sse", 0, "MODE", O_SSE, CMD_ALL, "CKPT_S3_SSE", NULL,
      "s3://: server-side encryption, AES256 (SSE-S3) or aws:kms (SSE-KMS)", "AES256 aws:kms" },
    { "sse-kms-key-id", 0, "ID", O_SSE_KMS, CMD_ALL, "CKPT_S3_SSE_KMS_KEY_ID", NULL,
      "s3://: the KMS key of SSE-KMS (implies --sse aws:kms)", NULL },
    { "log-json", 0, NULL, O_LOG_JSON, CMD_ALL, NULL, NULL,
      "one JSON object per log line on stderr", NULL },
    { "quiet", 'q', NULL, 'q', CMD_ALL, NULL, NULL,
      "only warnings and errors (no progress, no result line)", NULL },
    { "verbose", 'v', NULL, 'v', CMD_ALL, NULL, NULL, "debug lines too (libckpt's as well)",
      NULL },
    { "help", 'h', NULL, 'h', CMD_ALL, NULL, NULL, "this help", NULL },
    { "version", 'V', NULL, O_VERSION, CMD_ALL, NULL, NULL, "print the version", NULL },
    /* supervision */
    { "dir", 0, "DIR", O_DIR, SUP | CMDBIT(CMD_DOCTOR), "CKPT_DIR", "./checkpoints",
      "the trainer's checkpoint directory (created owner-only); doctor: the directory "
      "whose newest entry is the state and whose disk is checked", "@dir" },
    { "interval", 0, "D", O_INTERVAL, SUP | CMDBIT(CMD_DOCTOR), "CKPT_INTERVAL", "off",
      "ask for a checkpoint every D; doctor: the work lost per preemption follows from it",
      NULL },
    { "keep", 0, "N", O_KEEP, SUP | CMDBIT(CMD_SAVE) | CMDBIT(CMD_GC), "CKPT_KEEP", "3",
      "committed checkpoints to retain", NULL },
    { "codec", 0, "C", O_CODEC, SUP | CMDBIT(CMD_SAVE) | CMDBIT(CMD_DOCTOR), "CKPT_CODEC",
      "zstd:1", "how chunks are compressed, one of:" CKPT_CODEC_FORMS
      " (a stop short of time takes a faster one)", CKPT_CODEC_WORDS },
    { "signal", 0, "SIG", O_SIGNAL, SUP, "CKPT_SIGNAL", "none; USR1 with --preload",
      "signal sent to ask for a checkpoint when the child is not on the control socket: "
      "to the child if it handles it, else to the topmost handler of each branch of its "
      "process tree (SIGUSR1, USR1, 10, none)", "none SIGUSR1 SIGUSR2 SIGTERM SIGINT SIGHUP" },
    { "grace", 0, "D", O_GRACE, SUP | CMDBIT(CMD_DOCTOR), NULL, "30s",
      "whole time budget of a stop without its own deadline: checkpoint, SIGTERM to the "
      "child's group, SIGKILL at the end; doctor: the window on Kubernetes", NULL },
    { "lead", 0, "D", O_LEAD, SUP | CMDBIT(CMD_DOCTOR), NULL, "60s",
      "deadline of a SIGUSR1/SIGXCPU scheduler notice (SLURM --signal)", NULL },
    { "settle", 0, "D", O_SETTLE, SUP, NULL, "10s",
      "quiet time after which an entry of CKPT_DIR with no writer is complete", NULL },
    { "complete-marker", 0, "GLOB", O_MARKER, SUP, NULL, NULL,
      "an entry is complete once a file matching GLOB in it has been closed and "
      "no process writes in it any more (e.g. trainer_state.json)", NULL },
    { "notice", 0, "P", O_NOTICE, SUP | CMDBIT(CMD_DOCTOR), "CKPT_NOTICE", "auto",
      "where preemption notices come from: auto (the provider DMI names), none, or a "
      "provider:" NOTICE_PROVIDER_NAMES, NOTICE_MODES },
    { "metadata-url", 0, "URL", O_METADATA_URL, SUP | CMDBIT(CMD_DOCTOR), NULL, NULL,
      "replaces the scheme, host and port of the metadata service", NULL },
    { "preload", 0, NULL, O_PRELOAD, SUP, NULL, NULL,
      "inject libckpt_preload.so into the command (docs/preload.md)", NULL },
    { "resume-stopped", 0, NULL, O_RESUME_STOPPED, CMDBIT(CMD_RECOVER), NULL, NULL,
      "also resume a run its user stopped (Ctrl-C, scancel)", NULL },
    { "lease", 0, "D", O_LEASE, SUP, NULL, "60s",
      "lease on the run, renewed every D/3; a run whose lease another live runner holds "
      "is refused (exit 78)", NULL },
    { "nnodes", 0, "N", O_NNODES, SUP, NULL, "1; SLURM_NNODES in a job step, else PET_NNODES",
      "nodes of the job, one ckptrun on each (docs/multirank.md, \"Several nodes\")", NULL },
    { "node-rank", 0, "K", O_NODE_RANK, SUP, NULL, "SLURM_NODEID in a job step, else PET_NODE_RANK",
      "this node's rank, 0..N-1; node 0 commits each step once every node's part is in", NULL },
    { "job-id", 0, "ID", O_JOB_ID, SUP, NULL, "SLURM_JOB_ID.SLURM_RESTART_COUNT",
      "the job generation every node's ckptrun shares; a node of another is refused", NULL },
    { "on-complete", 0, "CMD", O_ON_COMPLETE, SUP, NULL, NULL,
      "run `sh -c CMD` when the child exited 0", NULL },
    { "on-preempt", 0, "CMD", O_ON_PREEMPT, SUP, NULL, NULL,
      "run `sh -c CMD` after a stop (exit 75 or 74), e.g. 'shutdown -h now'", NULL },
    { "on-failure", 0, "CMD", O_ON_FAILURE, SUP, NULL, NULL,
      "run `sh -c CMD` when the child failed; hooks get CKPT_RUN, CKPT_STATE, CKPT_STEP "
      "and CKPT_EXIT", NULL },
    /* administration */
    { "step", 0, "N", O_STEP,
      CMDBIT(CMD_SAVE) | CMDBIT(CMD_RESTORE) | CMDBIT(CMD_VERIFY) | CMDBIT(CMD_LS), NULL, NULL,
      "the checkpoint's step (restore, verify: default the newest; ls: list its items)",
      NULL },
    { "force", 0, NULL, O_FORCE, CMDBIT(CMD_SAVE), NULL, NULL,
      "commit a step lower than the run's newest (it will not be the one resumed from)",
      NULL },
    { "sync", 0, NULL, O_SYNC, SUP | CMDBIT(CMD_RESTORE), "CKPT_RESTORE_SYNC", "off",
      "make each restored file durable (fsync) before its rename", NULL },
    { "json", 0, NULL, O_JSON, RESULT_CMDS, NULL, NULL,
      "print the result as one JSON document on stdout (fields: docs/ckptrun.md)", NULL },
    { "min-age", 0, "D", O_MIN_AGE, CMDBIT(CMD_GC), NULL, "15m",
      "spare unused objects younger than D (a save running elsewhere)", NULL },
    { "dry-run", 0, NULL, O_DRY_RUN, CMDBIT(CMD_GC), NULL, NULL,
      "list what would be deleted and why; delete nothing", NULL },
    { "state-bytes", 0, "SIZE", O_STATE_BYTES, CMDBIT(CMD_DOCTOR), NULL,
      "the newest entry of --dir", "size of the state a checkpoint holds, e.g. 7GiB", NULL },
    { "changed", 0, "FRACTION", O_CHANGED, CMDBIT(CMD_DOCTOR), NULL,
      "measured from the run's checkpoints, else 100%",
      "share of the state that changes between checkpoints, e.g. 2% for a LoRA or "
      "frozen-backbone run", NULL },
    { "budget", 0, "D", O_BUDGET, CMDBIT(CMD_DOCTOR), NULL, "30s", "time doctor may take",
      NULL },
};
const size_t cli_nopts = sizeof cli_opts / sizeof cli_opts[0];

const char cli_conventions[] =
    "Durations: 250ms, 90s, 30m, 1h, 1h30m (a bare number is seconds). Sizes:\n"
    "K, M, G, T (also KiB, MiB, GiB) are powers of 1024, kB, MB, GB, TB powers\n"
    "of 1000; printed sizes are binary (KiB, MiB, GiB).\n";
const char cli_exit_common[] =
    "Exit codes: 0 ok, 64 bad command line, 78 bad configuration or credentials,\n"
    "69 store unreachable; see each command for others.\n";

int cli_cmd_find(const char *s)
{
    for (int i = 0; i < CMD__COUNT; i++)
        if (strcmp(s, cli_cmds[i].name) == 0)
            return i;
    return -1;
}

const struct option *cli_long_options(void)
{
    static struct option opts[sizeof cli_opts / sizeof cli_opts[0] + 1];
    if (!opts[0].name) {
        for (size_t i = 0; i < cli_nopts; i++) {
            opts[i].name = cli_opts[i].name;
            opts[i].has_arg = cli_opts[i].arg ? required_argument : no_argument;
            opts[i].flag = NULL;
            opts[i].val = cli_opts[i].id;
        }
    }
    return opts;
}

const char *cli_short_options(int stop)
{
    /* ':' first (after '+'): a missing value is reported as ':' */
    static char buf[2][64];
    char *b = buf[stop ? 1 : 0];
    if (!b[0]) {
        size_t n = 0;
        if (stop)
            b[n++] = '+';
        b[n++] = ':';
        for (size_t i = 0; i < cli_nopts && n + 3 < sizeof buf[0]; i++) {
            if (!cli_opts[i].short_name)
                continue;
            b[n++] = cli_opts[i].short_name;
            if (cli_opts[i].arg)
                b[n++] = ':';
        }
        b[n] = '\0';
    }
    return b;
}

/* ---- --help ------------------------------------------------------------------- */

/* Print `text` wrapped to `width`, every line indented by `indent` spaces,
 * the first line starting at column `col` (already printed). */
static void wrap(FILE *f, const char *text, int col, int indent, int width)
{
    const char *p = text;
    while (*p) {
        const char *w = p, *e;
        while (*w == ' ')
            w++;
        e = w;
        while (*e && *e != ' ')
            e++;
        if (e == w)
            break;
        if (col > indent && col + 1 + (int)(e - w) > width) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            fputc(' ', f);
            col++;
        }
        fprintf(f, "%.*s", (int)(e - w), w);
        col += (int)(e - w);
        p = e;
    }
    fputc('\n', f);
}

static void opt_label(const struct cli_opt *o, char *buf, size_t n)
{
    if (o->short_name)
        snprintf(buf, n, "-%c, --%s%s%s", o->short_name, o->name, o->arg ? " " : "",
                 o->arg ? o->arg : "");
    else
        snprintf(buf, n, "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
}

static void opt_help(FILE *f, const struct cli_opt *o)
{
    char label[64], text[600];
    int col;
    opt_label(o, label, sizeof label);
    snprintf(text, sizeof text, "%s%s%s%s%s%s", o->help, o->env ? " [" : "",
             o->env ? o->env : "", o->env ? "]" : "", o->dflt ? " (default: " : "",
             o->dflt ? o->dflt : "");
    if (o->dflt)
        strncat(text, ")", sizeof text - strlen(text) - 1);
    col = fprintf(f, "  %s", label);
    if (col > 22) {
        fprintf(f, "\n%*s", 23, "");
        col = 23;
    } else {
        fprintf(f, "%*s", 23 - col, "");
        col = 23;
    }
    wrap(f, text, col, 23, 79);
}

void cli_help(FILE *f, int cmd, const char *version)
{
    if (cmd < 0) {
        fprintf(f, "ckptrun %s: checkpoint and resume training on spot instances\n\n", version);
        fprintf(f, "Usage:\n");
        for (int i = 0; i < CMD__COUNT; i++) {
            char u[160];
            snprintf(u, sizeof u, "ckptrun %-7s %s", i == CMD_RUN ? "[run]" : cli_cmds[i].name,
                     cli_cmds[i].usage);
            if (strlen(u) <= 46)
                fprintf(f, "  %-46s %s\n", u, cli_cmds[i].summary);
            else
                fprintf(f, "  %s\n  %-46s %s\n", u, "", cli_cmds[i].summary);
        }
        fprintf(f, "\n`ckptrun COMMAND --help` (or `ckptrun help COMMAND`) explains one command;\n"
                   "`man ckptrun` has them all.\n\nCommon options (environment variable in "
                   "brackets):\n");
    } else {
        fprintf(f, "Usage: ckptrun %s %s\n\n%s\nOptions:\n", cli_cmds[cmd].name,
                cli_cmds[cmd].usage, cli_cmds[cmd].text);
        for (size_t i = 0; i < cli_nopts; i++)
            if ((cli_opts[i].cmds & CMDBIT(cmd)) && cli_opts[i].cmds != CMD_ALL)
                opt_help(f, &cli_opts[i]);
        fprintf(f, "\nCommon options (environment variable in brackets):\n");
    }
    for (size_t i = 0; i < cli_nopts; i++)
        if (cli_opts[i].cmds == CMD_ALL)
            opt_help(f, &cli_opts[i]);
    fprintf(f, "\n%s\n%s", cli_conventions,
            cmd < 0 ? cli_exit_common : cli_cmds[cmd].exit);
}
