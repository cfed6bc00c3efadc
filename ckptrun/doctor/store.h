/* doctor/store.h -- store, store-rw and conditional: the credentials work, and the lease is
 * enforced; the helpers the store-facing checks share (doctor/store.c; docs/doctor.md). */
#ifndef CKPTRUN_DOCTOR_STORE_H
#define CKPTRUN_DOCTOR_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"

struct doctor;

void check_store(struct doctor *d);

/* What a failed store operation asks of the user (the store's URL decides
 * for file:// paths). */
const char *store_advice(const struct doctor *d, ckpt_status st);
/* Bytes no codec shrinks (like chunks). */
void fill_random(uint8_t *b, size_t n, uint64_t seed);
/* Every object under `prefix` deleted (what an interrupted doctor left). */
void clean_prefix(struct doctor *d, const char *prefix);

#endif
