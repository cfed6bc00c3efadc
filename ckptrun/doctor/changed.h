/* doctor/changed.h -- changed: how much of the state a final save sends (--changed, the run's own
 * checkpoints, else all of it) (doctor/changed.c; docs/doctor.md). */
#ifndef CKPTRUN_DOCTOR_CHANGED_H
#define CKPTRUN_DOCTOR_CHANGED_H

struct doctor;

void check_changed(struct doctor *d);

#endif
