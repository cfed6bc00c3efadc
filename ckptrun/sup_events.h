/*
 * sup_events.h -- what each event source of the supervisor's loop means
 * for the run: signals to ckptrun, the keeper's reports about the job, the
 * control socket's messages, the watcher's commit results, notices and the
 * lease renewer, and the timer. Each handler reads its source and moves
 * the run on (stop.h, request.h). Supervisor's thread only.
 */
#ifndef CKPTRUN_SUP_EVENTS_H
#define CKPTRUN_SUP_EVENTS_H

struct sup;
struct ctl_event;

/* The signalfd is readable. */
void sup_on_signals(struct sup *s);
/* The keeper's report pipe is readable. */
void sup_on_keeper(struct sup *s);
/* The watcher's result fd is readable. */
void sup_on_results(struct sup *s);
/* The notice queue's fd is readable: notices, or the lease renewer. */
void sup_on_notices(struct sup *s);
/* A control socket event (ctl_event_fn; user is the struct sup). */
void sup_on_ctl(void *user, const struct ctl_event *ev);
/* Arm the timerfd for the next due time of the run (periodic requests,
 * the watcher, the stop); the timerfd is readable: act on what is due. */
void sup_arm_timer(struct sup *s);
void sup_on_timer(struct sup *s);

#endif
