/* doctor/estimate.h -- estimate-full, estimate-incremental and lost-work: from notice to commit,
 * against the window (doctor/estimate.c; docs/doctor.md). */
#ifndef CKPTRUN_DOCTOR_ESTIMATE_H
#define CKPTRUN_DOCTOR_ESTIMATE_H

#include <cjson/cJSON.h>

struct doctor;

void check_estimate(struct doctor *d, cJSON *ej);

#endif
