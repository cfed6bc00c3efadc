/*
 * cmd/open.h -- how every administration command starts (cmd/save.c,
 * cmd/restore.c, cmd/ls.c, cmd/status.c, cmd/verify.c, cmd/gc.c), and how
 * each says that its run is not there.
 *
 * A command states what it accepts in a `struct cmd_form`; cmd_open() then
 * does, in this order:
 *   1. the operands: as many as the form takes, else a usage error
 *      ("restore needs exactly one DIR (got 2; see ckptrun restore
 *      --help)"), exit 64;
 *   2. the command's own checks that need no store (form->check: save's
 *      PATHs, ls's --step without a run): a usage error found there opens
 *      nothing;
 *   3. for a command that needs an existing store (CMD_EXISTING_STORE: it
 *      only reads one, or cleans one), a file:// store that is there:
 *      opening one creates its directory, and such a command creates
 *      nothing ("store S does not exist", exit 1);
 *   4. the library's log lines held (log_lib_hold, runlog.h): a failure is
 *      then said in one line that quotes the library's detail (cmds.h);
 *   5. a context for administration (open_ctx, opts.h: no control
 *      socket), when the caller asks for one.
 * cmd_close() undoes 4 and 5, and is right after any return of cmd_open.
 *
 * A run that gave the library nothing (no checkpoint, no step N) may not
 * exist at all: cmd_run_missing() tells which, and words the second case
 * the same way for every command, with the names it resembles.
 *
 * Not thread-safe: the held log lines are the process's (one command runs).
 */
#ifndef CKPTRUN_CMD_OPEN_H
#define CKPTRUN_CMD_OPEN_H

#include <stddef.h>
#include "opts.h"

/* How many operands a command takes. */
enum cmd_takes {
    TAKES_NOTHING, /* ls, status, verify, gc */
    TAKES_ONE,     /* restore DIR */
    TAKES_SOME     /* save PATH... (one or more) */
};

/* cmd_open's flags. */
#define CMD_EXISTING_STORE 1u /* never creates the store (all but save) */

struct cmd_form {
    const char *name; /* "restore": the command, as its errors and --help name it */
    enum cmd_takes takes;
    const char *operand; /* the operand's word in the usage error ("DIR"); NULL with
                            TAKES_NOTHING */
    const char *instead; /* TAKES_NOTHING: what to use instead of an operand, for the
                            usage error ("use --step N"), or NULL */
    unsigned flags;      /* CMD_EXISTING_STORE */
    /* The command's own usage checks, after the operands' count and before
     * anything is opened; `arg` is cmd_open's. @return 0, or the exit code
     * of a failure it has said (log_error). NULL: none. */
    int (*check)(const struct opts *o, void *arg);
};

/* Start command `f` on the options o (steps 1 to 5 above). ctx NULL: no
 * context (ls without a run reads the store's runs itself; status reads
 * the run's record before it opens one with open_ctx); else *ctx is the
 * context, NULL until it is open. @return 0, or the exit code of what
 * failed, said in one error line. */
int cmd_open(const struct opts *o, const struct cmd_form *f, void *check_arg,
             struct ckpt_ctx **ctx);
/* Release the library's held log lines (as warnings, those not quoted
 * since) and close ctx (NULL-safe). */
void cmd_close(struct ckpt_ctx *ctx);

/* Whether run o->run, which gave the library nothing, exists (a HEAD or a
 * RUN record): @return 0 when it does (the caller says what
 * it lacks, why ""); EXIT_FAIL when it does not, with `why` (n bytes) "run R not
 * found in S; did you mean R2?" (run_not_found_hint, opts.h) for the caller
 * to say; or the exit code of a store that could not be asked, said
 * (log_error), with `why` "". */
int cmd_run_missing(const struct opts *o, char *why, size_t n);

#endif
