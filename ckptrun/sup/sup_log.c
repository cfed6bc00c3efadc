/* sup_log.c -- the supervisor's event log and run record (sup_log.h). */
#include "sup/sup_log.h"
#include "sup/sup.h"
#include "sup/sup_report.h"
#include "base/runlog.h"
#include "record/record.h"
#include "watch/watch.h"

cJSON *sup_fields(void) { return cJSON_CreateObject(); }

void sup_event(struct sup *s, int level, const char *name, cJSON *f, int to_record)
{
    log_event(level, name, f);
    if (to_record && s->rec)
        record_event(s->rec, name, f);
    cJSON_Delete(f);
}

void sup_set_state(struct sup *s, const char *state)
{
    cJSON *extra;

    if (!s->rec || s->nid.rank != 0) /* one RUN per job: node 0's */
        return;
    extra = sup_report_run_fields(s, state);
    record_set_state(s->rec, state, s->last_step, s->preemptions, s->started_ms, extra);
    cJSON_Delete(extra);
}

void sup_note_commit(struct sup *s, uint64_t step, double seconds)
{
    if ((int64_t)step > s->last_step)
        s->last_step = (int64_t)step;
    s->last_commit_s = seconds;
    s->seam->watch_note_step(s->w, step);
}
