/* doctor/notice.h -- provider, metadata, imds-token and window: where the notice comes from and how
 * long it leaves (doctor/notice.c; docs/doctor.md). */
#ifndef CKPTRUN_DOCTOR_NOTICE_H
#define CKPTRUN_DOCTOR_NOTICE_H

struct doctor;

void check_notice(struct doctor *d);

#endif
