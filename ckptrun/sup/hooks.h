/*
 * hooks.h -- the --on-complete, --on-preempt and --on-failure commands,
 * run by `sh -c` once the run's outcome is written (the record drained and
 * the lease released: a hook may read the record, or power the machine
 * off). Each sees CKPT_RUN, CKPT_STATE, CKPT_STEP (the last committed step,
 * unset when none) and CKPT_EXIT (ckptrun's exit code).
 */
#ifndef CKPTRUN_HOOKS_H
#define CKPTRUN_HOOKS_H

#include <stdint.h>

/* Run `cmd` (NULL or "": nothing) and wait for it; a failure is logged. */
void hook_run(const char *cmd, const char *run, const char *state, int64_t last_step, int code);

#endif
