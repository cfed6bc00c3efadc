/*
 * history.h -- figures of a run's event history (the run record's events/,
 * docs/ckptrun.md "Run record"), as `ckptrun status` shows them. Pure: the
 * events are given as a JSON array sorted by time; unknown types and
 * missing fields are skipped, so records of older builds read the same.
 *
 * A *session* is one ckptrun process (host + pid): its running time is from
 * its first event to its last; the work lost at a stop, a failure or an end
 * with a checkpoint left uncommitted is the time since the session's last
 * commit (or its start when it committed nothing). A runner session (one
 * with a start event) that ends with no exit event died without a word
 * (SIGKILL, a lost machine): a crash, whose loss runs to its last event.
 */
#ifndef CKPTRUN_HISTORY_H
#define CKPTRUN_HISTORY_H

#include <stdint.h>
#include <cjson/cJSON.h>

struct history {
    uint64_t commits, commit_bytes, commit_stored, stops, failures, crashes, sessions;
    uint64_t run_ms, lost_ms;
    uint64_t uncommitted_ends; /* exits in state `uncommitted` */
    /* the last commit event: its size and speed */
    int have_last;
    double last_step, last_bytes, last_stored, last_seconds;
    int64_t last_ms;
    /* failed commits (`commit-failed`, a node's `part-failed`): all of them,
     * and the newest with its error */
    uint64_t commit_failures;
    int have_error;
    double error_step;
    int64_t error_ms;
    char error[160], detail[512], error_entry[256];
    /* the newest session: the highest step whose commit failed (a complete
     * entry of that machine's CKPT_DIR); -1 none */
    double local_step;
    char local_host[72];
};

/* Summarize `events`; `runner_live`: a live runner holds the lease (the
 * newest session is not a crash). */
void history_summarize(const cJSON *events, int runner_live, struct history *h);

/* A field of a record object (RUN, an event): its number or its string,
 * `dflt` when it is absent or of another type. */
double field_num(const cJSON *o, const char *k, double dflt);
const char *field_str(const cJSON *o, const char *k, const char *dflt);

#endif
