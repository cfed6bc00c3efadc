/* doctor/state.h -- state: how big the state a checkpoint holds is, and where that was found
 * (doctor/state.c; docs/doctor.md). */
#ifndef CKPTRUN_DOCTOR_STATE_H
#define CKPTRUN_DOCTOR_STATE_H

struct doctor;

void check_state(struct doctor *d);

#endif
