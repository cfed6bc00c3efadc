/*
 * parse.h -- ckptrun's own pure parsing helpers (no I/O, no globals), so
 * they can be unit-tested on their own (tests/unit/test_ckptrun_parse.c).
 * What ckptrun shares with libckpt (sizes, durations, codec specs, signal
 * and run names, the clock) is in ckpt_common.h.
 */
#ifndef CKPTRUN_PARSE_H
#define CKPTRUN_PARSE_H

#include <stddef.h>
#include <stdint.h>

/* Decimal unsigned integer, whole string. @return 0 or -1. */
int parse_u64(const char *s, uint64_t *out);

/* Step encoded in a checkpoint entry's name: the number after the last
 * "step=", "step-", "step_" or "checkpoint-" (case-insensitive), else the
 * last integer in the name. @return 1 and *step when found, 0 when the name
 * carries no number (the caller then uses its own counter). */
int parse_step_from_name(const char *name, uint64_t *step);

/* A share in (0, 1]: "0.02" or "2%". @return 0 and *v, or -1. */
int parse_fraction(const char *s, double *v);

/* 1 for names the watcher never treats as a checkpoint entry: hidden
 * (".x"), temporary ("tmp-x", "tmp_x", "x.tmp", "x.part", "x.partial",
 * "x~") -- writers use these before renaming into place. */
int name_is_temporary(const char *name);

#endif
