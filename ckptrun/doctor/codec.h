/* doctor/codec.h -- codec: the codec measured on this CPU, on a sample of the state
 * (doctor/codec.c; docs/doctor.md). */
#ifndef CKPTRUN_DOCTOR_CODEC_H
#define CKPTRUN_DOCTOR_CODEC_H

#include "ckpt.h"

struct doctor;

void check_codec(struct doctor *d);

/* Two small saves of the sample through the public API to the scratch
 * file:// store (run RUN_NAME): everything new, then nothing changed.
 * @return CKPT_OK and *m, or the failing status (*what says which step). */
struct meas {
    double t_full_s, t_same_s, ratio;
};
ckpt_status measure(struct doctor *d, const char *run_name, ckpt_codec codec, int level,
                    struct meas *m, const char **what);

#endif
