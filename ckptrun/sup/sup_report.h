/*
 * sup_report.h -- the supervisor says what is not safe, at the level a user
 * sees (docs/ckptrun.md, "What a run tells you"): no silent loss.
 *
 *   - Failed commits are counted (the run record's `commit_failures`,
 *     `last_error`); after FAIL_ESCALATE in a row each one is an error, and
 *     the first of them says how many, what the store holds and what to do.
 *   - A checkpoint request (an --interval tick, a notice, a stop) that finds
 *     no way to reach the trainer (no --signal, no helper or `import ckpt`
 *     connection, no libckpt) is a warning, once; clients connect seconds
 *     after the start, so this is judged at the first request, not at start.
 *   - CKPT_DIR without a new complete entry for long while the child runs
 *     (`CKPT_WARN_NO_CHECKPOINT`, default the larger of 15 min and twice
 *     --interval) is a warning, once.
 *   - When the child ends by itself with 0, complete entries the store does
 *     not hold get a last attempt; if they still fail, the run ends
 *     `uncommitted` with exit 74, and the record names them so that the
 *     next `run`/`recover` on this machine commits them first (sup_leftover.c).
 *   - A final checkpoint not committed says why; every run ends with one
 *     line: the outcome, the newest committed step and the command that
 *     resumes it (resume_cmd.h).
 *
 * Supervisor's thread only (sup.h).
 */
#ifndef CKPTRUN_SUP_REPORT_H
#define CKPTRUN_SUP_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

struct sup;

#define FAIL_ESCALATE 3                  /* failed commits in a row: an error */
#define NO_CKPT_WARN_MS (15 * 60 * 1000) /* CKPT_DIR without a new entry: a warning */

/* Before anything: the threshold (CKPT_WARN_NO_CHECKPOINT). @return 0, or
 * EXIT_CONFIG for a bad value (logged). */
int sup_report_init(struct sup *s);
/* What the previous RUN (may be NULL) carries on: commit_failures,
 * last_error. */
void sup_report_carry(struct sup *s, const cJSON *prev_run);
/* The child started: the idle clock starts now. */
void sup_report_started(struct sup *s);
void sup_report_free(struct sup *s);

/* A commit of the run succeeded. */
void sup_report_commit_ok(struct sup *s);
/* A commit failed at `step` (error, detail: the event's fields; f: the
 * event's fields, which get `in_row`). @return the event's level. */
int sup_report_commit_failed(struct sup *s, uint64_t step, const char *error, const char *detail,
                             cJSON *f);
/* Evidence that the trainer checkpoints: a complete entry, a save. */
void sup_report_activity(struct sup *s);
/* A request for `reason` could reach no process of the job. */
void sup_report_unreachable(struct sup *s, const char *reason);
/* The CKPT_DIR idle check: its next due time (mono ms, -1 none), and the
 * check itself when due. */
int64_t sup_report_due(const struct sup *s);
void sup_report_tick(struct sup *s, int64_t now);

/* The child ended by itself: give complete entries that the store does not
 * hold one more commit. @return 1 when one was armed (the loop goes on). */
int sup_report_last_attempt(struct sup *s);
/* After the outcome: a child that exited 0 leaving a complete entry
 * uncommitted makes it 74, state "uncommitted" (logged as an error). */
void sup_report_outcome(struct sup *s, int *rc, const char **state);
/* Why the final checkpoint did not commit, into f's `why`. */
void sup_report_final_why(struct sup *s, cJSON *f);
/* The RUN fields this module keeps (commit_failures, last_error,
 * uncommitted). Caller frees. */
cJSON *sup_report_run_fields(struct sup *s, const char *state);
/* The run's last line (log_result "run"): outcome, newest committed step,
 * the command that resumes it; with --log-json the same as fields. */
void sup_report_end(struct sup *s, const char *state, int rc);

#endif
