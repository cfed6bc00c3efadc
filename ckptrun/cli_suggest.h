/* cli_suggest.h -- "did you mean": what a mistyped subcommand or option
 * resembles, from the option table (cli.h), by edit distance. */
#ifndef CKPTRUN_CLI_SUGGEST_H
#define CKPTRUN_CLI_SUGGEST_H

#include <stddef.h>

/* The closest command (or well-known alias such as "list" or "version")
 * to a mistyped word, as text to suggest ("status", "--version"), or NULL
 * when nothing is close. */
const char *cli_suggest(const char *word);
/* What to say of an option getopt refused, `arg` as written ("--stroe",
 * "--stroe=x", "-store"), written to buf (size bytes):
 *   1: the closest options of command `cmd` (else of any command), "did
 *      you mean --store" (for "-store": "... (long options take two
 *      dashes)");
 *   2: a prefix of several options, "it could be --store, --storage-class,
 *      --sse, ...";
 *   0: nothing close (buf ""). */
int cli_suggest_option(const char *arg, int cmd, char *buf, size_t size);

#endif
