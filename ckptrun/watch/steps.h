/* watch/steps.h -- whose step an entry has: saved(), trainer_state.json, its name, or the counter
 * (watch/steps.c; the watcher's insides: watch/int.h). Supervisor's thread only. */
#ifndef CKPTRUN_WATCH_STEPS_H
#define CKPTRUN_WATCH_STEPS_H

#include <stddef.h>
#include <stdint.h>

struct claim;
struct entry;
struct watch;

/* The step of a version of `e` that is complete now: a saved() report of
 * this version, trainer_state.json's global_step, the name's number, or the
 * counter. Sets e->step, e->numbered, e->step_from. */
void resolve_step(struct watch *w, struct entry *e);
/* The saved() report matching this version of `e`, or NULL. */
struct claim *claim_of(struct watch *w, const struct entry *e);

/* 1 when an entry of `step` (numbered by its name) is in the directory,
 * complete, committed or still being written (watch/steps.c). */
int watch_has_step(const struct watch *w, uint64_t step);

#endif
