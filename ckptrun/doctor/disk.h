/* doctor/disk.h -- disk and disk-survival: room for a checkpoint in CKPT_DIR, and whether it
 * outlives the instance (doctor/disk.c; docs/doctor.md). */
#ifndef CKPTRUN_DOCTOR_DISK_H
#define CKPTRUN_DOCTOR_DISK_H

struct doctor;

void check_disk(struct doctor *d);

#endif
