/*
 * record.h -- the run record, kept in the store next to the checkpoints
 * (layout and fields: docs/ckptrun.md, "Run record"):
 *
 *   <run>/RUN                      current state, rewritten on state change only
 *   <run>/events/<ms>-<host>-<pid>-<seq>.json   one immutable object per event
 *   <run>/files/<step, 20 digits>.json          "this checkpoint holds files
 *                                               of CKPT_DIR" (restore on start)
 *   <run>/LEASE                    the lease (lease.c, not written here)
 *
 * Nothing that grows is ever rewritten: a long run adds small objects.
 * Not thread-safe: used by one thread (the supervisor's loop, or a command);
 * record_start_writer() moves the writes themselves to a thread of its own.
 */
#ifndef CKPTRUN_RECORD_H
#define CKPTRUN_RECORD_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "ckpt.h"

struct record;
struct ckpt_store;

#define RECORD_FORMAT 1
#define RECORD_MAX_BYTES (64 * 1024) /* bound on any record object read back */

/* Open the store at `url` (NULL = default store) for run `run`.
 * @return CKPT_OK or the store's status; detail in err (CKPT_ERR_MAX). */
ckpt_status record_open(const char *url, const char *run, struct record **out, char *err);
/* Drains pending writes first. NULL-safe. */
void record_close(struct record *r);
/* Wait until every queued write has landed and stop the writer thread;
 * later writes are synchronous. NULL-safe. */
void record_drain(struct record *r);
/* From now on, writes (RUN, events, files marks) are queued to one writer
 * thread and return at once; a failed write is logged. @return 0 or -1. */
int record_start_writer(struct record *r);
struct ckpt_store *record_store(struct record *r);
const char *record_host(struct record *r);

/* Read <run>/RUN. @return CKPT_OK (*out owned by caller), CKPT_E_NOENT,
 * CKPT_E_CORRUPT (not a JSON object of a known format), store errors. */
ckpt_status record_read_run(struct record *r, cJSON **out);

/* The lease epoch written into RUN from now on (0 = none). */
void record_set_epoch(struct record *r, uint64_t epoch);

/* Rewrite <run>/RUN with `state` ("running", "preempted", "stopped",
 * "completed", "uncommitted", "failed"). `last_step` < 0 = none yet.
 * `preemptions` carried by caller. The members of `extra` (may be NULL; not
 * consumed) follow the fixed fields, never replacing one: `commit_failures`,
 * `last_error`, `uncommitted` (docs/ckptrun.md, "Run record"). */
ckpt_status record_set_state(struct record *r, const char *state, int64_t last_step,
                             uint64_t preemptions, int64_t started_ms, const cJSON *extra);

/* Write one event object: {"type":type,"time_ms":..,"host":..,"pid":..,
 * fields...}. `fields` is not consumed. */
ckpt_status record_event(struct record *r, const char *type, const cJSON *fields);

/* Read every event of the run, sorted by key (= time), into a JSON array.
 * Unreadable or malformed event objects are skipped (counted in *skipped).
 * At most `max` events (the newest) are returned. */
ckpt_status record_read_events(struct record *r, size_t max, cJSON **out, size_t *skipped);

/* A job of several nodes (nodes.h): the files marks written and read
 * from now on are this node's own, "<step>.n<node>.json". */
void record_set_node(struct record *r, unsigned node, unsigned nnodes);
/* Mark checkpoint `step` as a checkpoint of CKPT_DIR files whose top-level
 * entries are `entries`. */
ckpt_status record_mark_files(struct record *r, uint64_t step, const char *const *entries,
                              size_t n);
/* The same, saying where the step comes from (`step_from`: "saved",
 * "state", "name", "counter"; NULL: not said). */
ckpt_status record_mark_files_from(struct record *r, uint64_t step, const char *const *entries,
                                   size_t n, const char *step_from);
/* Where the step of mark `step` comes from ("" when the mark does not say:
 * written by `ckptrun save`, or by 0.3.0 and earlier). @return CKPT_OK,
 * CKPT_E_NOENT (not marked), CKPT_E_CORRUPT, store errors. */
ckpt_status record_files_from(struct record *r, uint64_t step, char *out, size_t n);
/* @return 1 when `step` is marked, 0 when not, -1 on a store error. */
int record_has_files(struct record *r, uint64_t step);
/* The top-level entries named in the mark of `step`: *out receives a JSON
 * array (caller frees; strings only, others dropped). @return CKPT_OK,
 * CKPT_E_NOENT (not marked), CKPT_E_CORRUPT, store errors. */
ckpt_status record_files_entries(struct record *r, uint64_t step, cJSON **out);
/* Delete the marks of steps for which keep(user, step) returns 0. */
ckpt_status record_prune_files(struct record *r, int (*keep)(void *user, uint64_t step),
                               void *user, uint64_t *deleted);

/* record_read_run() for run `run` of an open store, without a record:
 * for `ls`, which reads the RUN of every run of a store (from several
 * threads: it only reads). The runs of a store are found by runs.h. */
ckpt_status record_read_run_of(struct ckpt_store *st, const char *run, cJSON **out);

#endif
