/*
 * sup_leftover.h -- what a previous session left uncommitted on this
 * machine (docs/ckptrun.md, "Exit codes", 74; docs/recover.md). A child that
 * exited 0 while its newest checkpoint could not be committed leaves RUN in
 * state `uncommitted`, naming the entries of CKPT_DIR and their step
 * (sup_report.h). Before the restore of the next `run` or `recover`, those
 * entries are committed first when they are still in CKPT_DIR as they were
 * (same names, file counts and sizes): the run then resumes from them, and
 * the restore of an older checkpoint never overwrites them. When they are
 * gone (another machine) the run resumes the newest committed step.
 */
#ifndef CKPTRUN_SUP_LEFTOVER_H
#define CKPTRUN_SUP_LEFTOVER_H

#include <stdint.h>
#include <cjson/cJSON.h>
#include "ckpt.h"

struct sup;

/* `prev` is the previous RUN (may be NULL); `ctx` the supervisor's context,
 * fenced at its epoch. On a commit, *step is set and *done = 1 (the run
 * resumes from the entries in place: no restore needed). @return 0, or an
 * exit code when they are there but the store still refuses them (logged:
 * nothing is started, the entries stay for the next attempt). */
int sup_commit_leftover(struct sup *s, struct ckpt_ctx *ctx, const cJSON *prev, uint64_t *step,
                        int *done);

#endif
