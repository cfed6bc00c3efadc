/*
 * cmds.h -- what the administration commands (cmd/save.c, cmd/restore.c,
 * cmd/ls.c, cmd/verify.c, cmd/gc.c, cmd/status.c) share. Each opens what it
 * needs, does one thing, and returns the exit code. What each prints
 * (docs/ckptrun.md):
 *   - a failure: one error line (log_error), quoting the library's detail;
 *   - a success: one result line a person reads (log_result; -q hides it),
 *     after a progress line while the work lasts (terminal only);
 *   - with --json: one JSON document on stdout, whatever the outcome.
 * How each starts (its operands, a store that must exist, a context) and
 * says that its run does not exist: cmd/open.h. The commands that read
 * (ls, status, verify, restore) and gc never create a store, a run or a
 * directory; a run that does not exist is an error for each reader.
 */
#ifndef CKPTRUN_CMDS_H
#define CKPTRUN_CMDS_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "opts.h"

/* Exit code of a command that failed after starting. */
#define EXIT_FAIL 1

/* The exit code for a failure met while working: 69 unreachable, 78
 * credentials/configuration/permission, else EXIT_FAIL. */
int runtime_exit(ckpt_status st);
/* Print a JSON document on stdout (the --json output). */
void print_json(cJSON *j);
/* Seconds since the monotonic time t0 (ms). */
double secs_since(int64_t t0);

/* The checkpoints of a run, newest first (ckpt_list's order), with the
 * fields the commands report. */
struct ckpt_row {
    uint64_t step, items, raw, stored, new_bytes, chunks;
    int64_t time_ms;
    unsigned world;           /* nodes/ranks whose parts make it (1: one writer) */
};
struct rows {
    struct ckpt_row *v;
    size_t n, cap;
    int oom;
};
/* ckpt_list callback filling a struct rows (free rows.v). */
int rows_cb(void *user, const struct ckpt_info *i);
const struct ckpt_row *row_of(const struct rows *r, uint64_t step);
/* The highest step among the listed checkpoints (the one resumed from). */
const struct ckpt_row *row_newest(const struct rows *r);

#endif
