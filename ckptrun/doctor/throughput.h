/* doctor/throughput.h -- upload and download: the store's throughput, measured within the budget
 * (doctor/throughput.c; docs/doctor.md). */
#ifndef CKPTRUN_DOCTOR_THROUGHPUT_H
#define CKPTRUN_DOCTOR_THROUGHPUT_H

struct doctor;

void check_throughput(struct doctor *d);

#endif
