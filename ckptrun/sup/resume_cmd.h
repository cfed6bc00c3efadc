/*
 * resume_cmd.h -- the command line that resumes a run, as the last line of
 * `run` and `recover` prints it (docs/ckptrun.md, "The last line"):
 *
 *   cd /work && ckptrun recover --store URL --run NAME --dir /work/ck
 *       [the options given that change what a run does] -- COMMAND ARG...
 *
 * `recover` because it is the entry point that resumes (and does nothing
 * for a completed run); the working directory and CKPT_DIR absolute
 * because cron and systemd start in another one; options that were set
 * through the environment are written as options, since cron has none of
 * it. Every word is quoted for a POSIX shell. Pure: no I/O but getenv.
 */
#ifndef CKPTRUN_RESUME_CMD_H
#define CKPTRUN_RESUME_CMD_H

#include <stdint.h>
#include <stdio.h>

struct opts;

/* Write `arg` as one shell word on one line: as is when it holds only
 * characters no shell reads specially, else in single quotes ('\'' for a
 * quote); a word with control characters (newlines) as
 * "$(printf '%b' '...')" with backslash escapes -- exact but for trailing
 * newlines, which command substitution drops. */
void shell_word(FILE *f, const char *arg);
/* A duration as an option value that parses back exactly: "90s", "30m",
 * "1h", "1500ms". */
char *resume_duration(uint64_t ms, char *buf, size_t n);
/* The resume command for o (store and run resolved), `self` the way to
 * call ckptrun ("ckptrun" when PATH finds this one), `cwd` the working
 * directory (NULL: no `cd`), `dir` CKPT_DIR, absolute; `stopped` adds
 * --resume-stopped (recover leaves a run its user stopped alone).
 * @return a malloc'd string, or NULL when out of memory. */
char *resume_command(const struct opts *o, const char *self, const char *cwd, const char *dir,
                     int stopped);

#endif
