/* history.c -- figures of a run's event history (history.h). */
#include "record/history.h"

#include <stdio.h>
#include <string.h>

double field_num(const cJSON *o, const char *k, double dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

const char *field_str(const cJSON *o, const char *k, const char *dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : dflt;
}

static void failed_commit(struct history *h, const cJSON *ev, int64_t t)
{
    double step = field_num(ev, "step", -1);

    h->commit_failures++;
    h->have_error = 1;
    h->error_step = step;
    h->error_ms = t;
    snprintf(h->error, sizeof h->error, "%s", field_str(ev, "error", ""));
    snprintf(h->detail, sizeof h->detail, "%s", field_str(ev, "detail", ""));
    snprintf(h->error_entry, sizeof h->error_entry, "%s", field_str(ev, "entry", ""));
    if (step > h->local_step) {
        h->local_step = step;
        snprintf(h->local_host, sizeof h->local_host, "%s", field_str(ev, "host", "?"));
    }
}

void history_summarize(const cJSON *events, int runner_live, struct history *h)
{
    const cJSON *ev;
    char cur[128] = "";
    int64_t start = 0, last = 0, last_commit = 0;
    int open = 0, had_start = 0, ended = 0;

    memset(h, 0, sizeof *h);
    h->local_step = -1;
    /* Events are sorted by time; sessions do not overlap (one live runner),
     * so a change of host/pid closes the previous session. */
    cJSON_ArrayForEach(ev, events) {
        char id[128];
        const char *type = field_str(ev, "type", "");
        const char *state = field_str(ev, "state", "");
        int64_t t = (int64_t)field_num(ev, "time_ms", 0);
        snprintf(id, sizeof id, "%s/%.0f", field_str(ev, "host", "?"), field_num(ev, "pid", 0));
        /* (a runner's `lease` event comes before its `start`: same session) */
        if ((strcmp(type, "start") == 0 && had_start) || strcmp(id, cur) != 0) {
            if (open) {
                h->run_ms += (uint64_t)(last - start);
                if (had_start && !ended) {
                    h->crashes++;
                    h->lost_ms += (uint64_t)(last - last_commit);
                }
            }
            snprintf(cur, sizeof cur, "%s", id);
            start = last = last_commit = t;
            open = 1;
            had_start = ended = 0;
            h->sessions++;
            h->local_step = -1; /* what another session failed to commit is older */
        }
        if (strcmp(type, "start") == 0)
            had_start = 1;
        if (strcmp(type, "exit") == 0)
            ended = 1;
        last = t;
        if (strcmp(type, "commit") == 0) {
            h->commits++;
            h->commit_bytes += (uint64_t)field_num(ev, "bytes", 0);
            h->commit_stored += (uint64_t)field_num(ev, "stored", 0);
            last_commit = t;
            h->have_last = 1;
            h->last_step = field_num(ev, "step", 0);
            h->last_bytes = field_num(ev, "bytes", 0);
            h->last_stored = field_num(ev, "stored", 0);
            h->last_seconds = field_num(ev, "seconds", 0);
            h->last_ms = t;
        } else if (strcmp(type, "commit-failed") == 0 || strcmp(type, "part-failed") == 0) {
            failed_commit(h, ev, t);
        } else if (strcmp(type, "stop") == 0) {
            /* a user's stop (Ctrl-C, scancel) is not a preemption */
            if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ev, "user")))
                h->stops++;
            h->lost_ms += (uint64_t)(t - last_commit);
        } else if (strcmp(type, "exit") == 0 &&
                   (strcmp(state, "failed") == 0 || strcmp(state, "lost") == 0)) {
            h->failures++;
            h->lost_ms += (uint64_t)(t - last_commit);
        } else if (strcmp(type, "exit") == 0 && strcmp(state, "uncommitted") == 0) {
            /* training done, but its newest checkpoint is not in the store */
            h->uncommitted_ends++;
            h->lost_ms += (uint64_t)(t - last_commit);
        }
    }
    if (open) {
        h->run_ms += (uint64_t)(last - start);
        /* the newest runner: dead if it said nothing and holds no live lease */
        if (had_start && !ended && !runner_live) {
            h->crashes++;
            h->lost_ms += (uint64_t)(last - last_commit);
        }
    }
}
