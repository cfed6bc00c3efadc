/*
 * parse.h -- pure parsing helpers of ckptrun (no I/O, no globals), so they
 * can be unit-tested on their own (tests/unit/test_ckptrun_parse.c).
 */
#ifndef CKPTRUN_PARSE_H
#define CKPTRUN_PARSE_H

#include <stddef.h>
#include <stdint.h>
#include "ckpt.h"

/* "90s", "30m", "1h30m", "250ms", "1.5h"; a bare number means seconds
 * (the rule libckpt applies to CKPT_INTERVAL too).
 * @return 0 and *ms on success, -1 on a malformed or overflowing value. */
int parse_duration_ms(const char *s, uint64_t *ms);

/* Decimal unsigned integer, whole string. @return 0 or -1. */
int parse_u64(const char *s, uint64_t *out);

/* Step encoded in a checkpoint entry's name: the number after the last
 * "step=", "step-", "step_" or "checkpoint-" (case-insensitive), else the
 * last integer in the name. @return 1 and *step when found, 0 when the name
 * carries no number (the caller then uses its own counter). */
int parse_step_from_name(const char *name, uint64_t *step);

/* "zstd", "zstd:LEVEL" (1..19), "lz4", "none": exactly what libckpt's
 * ckpt_open accepts (the rule is libckpt/src/rules.c). @return 0 or -1. */
int parse_codec(const char *s, ckpt_codec *codec, int *level);
/* A size: K/M/G/T = 1024^n (also KiB..), kB/MB/GB/TB = 1000^n, B or a bare
 * number = bytes. *si (may be NULL) is 1 when a decimal unit was used.
 * @return 0 or -1 (malformed, zero, too large). */
int parse_size(const char *s, uint64_t *bytes, int *si);
/* A share in (0, 1]: "0.02" or "2%". @return 0 and *v, or -1. */
int parse_fraction(const char *s, double *v);
/* Name of a codec as the control protocol spells it ("zstd", ...). */
const char *codec_name(ckpt_codec codec);

/* "none" (0), "USR1", "SIGUSR1", "usr1" or a number 1..64.
 * @return 0 and *sig (0 for none) or -1. */
int parse_signal(const char *s, int *sig);
/* "SIGUSR1" for a signal number, "none" for 0; static storage. */
const char *signal_name(int sig);

/* 1 when `name` may name a new run: 1..128 of [A-Za-z0-9._-], not starting
 * with '.'. */
int run_name_valid(const char *name);
/* 1 when `name` may name an existing run (what either ckptrun or libckpt
 * accepted before the rules were shared): 1..200 of [A-Za-z0-9._-], not "."
 * or "..". */
int run_name_openable(const char *name);
/* Copy `in` into out (size n) with every character outside [A-Za-z0-9._-]
 * replaced by '_' and a leading '.' dropped. @return 0, -1 if empty or too
 * long. Used for the default run name (basename of the working directory)
 * and host names in keys. */
int name_sanitize(const char *in, char *out, size_t n);

/* 1 for names the watcher never treats as a checkpoint entry: hidden
 * (".x"), temporary ("tmp-x", "tmp_x", "x.tmp", "x.part", "x.partial",
 * "x~") -- writers use these before renaming into place. */
int name_is_temporary(const char *name);

/* Human formats into buf (size n); @return buf. */
char *fmt_bytes(uint64_t bytes, char *buf, size_t n);  /* "12.3 MiB" (1024^n) */
char *fmt_rate(double bytes_per_s, char *buf, size_t n); /* "12.3 MiB/s" */
char *fmt_duration(uint64_t ms, char *buf, size_t n);  /* "1h02m", "4.2s" */

#endif
