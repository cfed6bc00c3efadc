/*
 * sup_events.h -- what each event source of the supervisor's loop means
 * for the run: signals to ckptrun, the keeper's reports about the job, the
 * control socket's messages, the watcher's commit results, notices and the
 * lease renewer, and the timer. Each source has a reader (the descriptor
 * is readable: read it) and, apart from it, what one event means, taking
 * the event as data and reading the time through the seam (sup_seam.h):
 * that half moves the run on (stop.h, request.h) and is what the unit
 * tests drive (tests/unit/test_stop.c). Supervisor's thread only.
 */
#ifndef CKPTRUN_SUP_EVENTS_H
#define CKPTRUN_SUP_EVENTS_H

#include <stdint.h>

struct sup;
struct ctl_event;
struct keeper_msg;
struct queued_notice;
struct watch_result;

/* The signalfd is readable; one signal to ckptrun. */
void sup_on_signals(struct sup *s);
void sup_on_signal(struct sup *s, int sig);
/* The keeper's report pipe is readable; one report (keeper.h: the child
 * exited or was suspended, the job's group got a signal). */
void sup_on_keeper(struct sup *s);
void sup_on_keeper_msg(struct sup *s, const struct keeper_msg *m);
/* The watcher's result fd is readable; one commit result (not freed). */
void sup_on_results(struct sup *s);
void sup_on_result(struct sup *s, struct watch_result *r);
/* The notice queue's fd is readable: notices, or the lease renewer; one
 * notice (owned from here on: freed, or kept until the stop answers it). */
void sup_on_notices(struct sup *s);
void sup_on_notice(struct sup *s, struct queued_notice *n);
/* A control socket event (ctl_event_fn; user is the struct sup). */
void sup_on_ctl(void *user, const struct ctl_event *ev);
/* The next due time of the run (periodic requests, the watcher, the stop,
 * the report), mono ms, -1 none; what is due at `now`, done. */
int64_t sup_next_due(const struct sup *s);
void sup_on_time(struct sup *s, int64_t now);
/* Whether the loop is over: the child is gone, commits are finished and
 * no process of the job is left, or a stop's deadline has come (a commit
 * still in flight is then abandoned). With the child gone by 0 and complete
 * entries not in the store, it arms their last attempt (sup_report.h) and
 * says not yet. */
int sup_loop_done(struct sup *s);
/* Arm the timerfd for sup_next_due(); the timerfd is readable: act on
 * what is due now. */
void sup_arm_timer(struct sup *s);
void sup_on_timer(struct sup *s);

#endif
