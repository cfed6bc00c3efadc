/*
 * sup_log.h -- the supervisor's event log and run record: what it says on
 * stderr (runlog.h) and writes to the run's RUN record (record.h), with the
 * fields the report keeps (sup_report.h). Supervisor's thread only (sup.h).
 */
#ifndef CKPTRUN_SUP_LOG_H
#define CKPTRUN_SUP_LOG_H

#include <stdint.h>
#include <cjson/cJSON.h>

struct sup;

/* An empty object for an event's fields (NULL when out of memory). */
cJSON *sup_fields(void);
/* Log event `name` with fields f (consumed; may be NULL), and add it to
 * the run record when to_record. */
void sup_event(struct sup *s, int level, const char *name, cJSON *f, int to_record);
/* The run record's state ("running", "completed", ...). */
void sup_set_state(struct sup *s, const char *state);
/* A checkpoint of the run committed (by either writer). */
void sup_note_commit(struct sup *s, uint64_t step, double seconds);

#endif
