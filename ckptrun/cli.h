/*
 * cli.h -- ckptrun's command line as data: one table of subcommands and one
 * of options. Everything a user reads about the command line comes from
 * here, so it cannot drift from what the parser accepts:
 *   - the getopt_long table main.c parses with (cli_long_options),
 *   - `ckptrun --help` and `ckptrun COMMAND --help` (cli_help),
 *   - the manual page and the bash and zsh completions, which the build
 *     generates by running the freshly built ckptrun in a hidden mode
 *     (`ckptrun __generate man|bash|zsh`, cli_generate) and installs;
 *   - what a mistyped subcommand or option resembles (cli_suggest.h).
 * Adding an option is one row in cli.c's table (and one case in main.c).
 */
#ifndef CKPTRUN_CLI_H
#define CKPTRUN_CLI_H

#include <getopt.h>
#include <stdio.h>

enum cli_cmd_id {
    CMD_RUN, CMD_RECOVER, CMD_SAVE, CMD_RESTORE, CMD_LS, CMD_STATUS, CMD_VERIFY, CMD_GC,
    CMD_DOCTOR, CMD__COUNT
};
#define CMDBIT(c) (1u << (c))
#define CMD_ALL ((1u << CMD__COUNT) - 1)

/* Option ids: getopt_long's `val` (short options use their character). */
enum {
    O_STORE = 256, O_RUN, O_DIR, O_INTERVAL, O_KEEP, O_SIGNAL, O_GRACE, O_NOTICE,
    O_METADATA_URL, O_CODEC, O_PRELOAD, O_LOG_JSON, O_VERSION, O_STEP, O_JSON,
    O_LEAD, O_SETTLE, O_MARKER, O_ON_COMPLETE, O_ON_PREEMPT, O_ON_FAILURE, O_MIN_AGE,
    O_STATE_BYTES, O_BUDGET,
    O_LEASE, O_STORAGE_CLASS, O_SSE, O_SSE_KMS, O_MAX_RATE, O_CONNECTIONS,
    O_SYNC, O_FORCE, O_CHANGED, O_DRY_RUN, O_RESUME_STOPPED,
    O_NODE_RANK, O_NNODES, O_JOB_ID,
};

struct cli_cmd {
    const char *name;
    const char *usage;     /* after "ckptrun NAME " */
    const char *summary;   /* one line, for the overview and completions */
    const char *text;      /* description: paragraphs separated by a blank line;
                              lines indented by two spaces are kept as they are */
    const char *exit;      /* "Exit: ..." line(s) */
};

struct cli_opt {
    const char *name;      /* long name without "--" */
    char short_name;       /* 0 if none */
    const char *arg;       /* metavariable, NULL for a flag */
    int id;
    unsigned cmds;         /* CMDBIT()s it applies to; CMD_ALL = common option */
    const char *env;       /* environment fallback, or NULL */
    const char *dflt;      /* default shown in help, or NULL */
    const char *help;      /* one or two sentences, wrapped by the printer */
    const char *values;    /* completion: space-separated words, "@file",
                              "@dir", "@command", or NULL (free text) */
};

extern const struct cli_cmd cli_cmds[CMD__COUNT];
extern const struct cli_opt cli_opts[];
extern const size_t cli_nopts;
/* the sizes and durations every option takes, and the exit codes common
 * to every subcommand: the end of --help and sections of the manual page */
extern const char cli_conventions[];
extern const char cli_exit_common[];

/* @return the command named `s`, or -1. */
int cli_cmd_find(const char *s);

/* A getopt_long table of every option (static storage, NULL-terminated),
 * and the matching short-option string for getopt ("+" first when `stop`
 * is set: parsing ends at the first non-option, the training command). */
const struct option *cli_long_options(void);
const char *cli_short_options(int stop);

/* `ckptrun --help` (cmd < 0) or `ckptrun COMMAND --help`, on f. */
void cli_help(FILE *f, int cmd, const char *version);

/* Hidden build step: write the manual page ("man"), the bash completion
 * ("bash") or the zsh completion ("zsh") to f. @return 0, or -1 for an
 * unknown kind. */
int cli_generate(FILE *f, const char *kind, const char *version);

#endif
