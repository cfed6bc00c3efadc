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

/* "Did you mean": the edit distance between two words, counting an
 * insertion, a deletion, a substitution or two neighbours swapped as one
 * edit each ("stroe" is 1 from "store": optimal string alignment). Words
 * longer than 64 bytes are never close: SIZE_MAX. */
size_t edit_distance(const char *a, const char *b);

/* The candidates a mistyped `word` resembles: the indices into cands[0..n)
 * (NULL entries are skipped) of the closest ones, all at the same
 * distance, at most `max` (up to 16) of them, in the candidates' order. A
 * candidate is close when it is within 1 edit of a word of up to 3
 * characters, 2 of a word of up to 8, 3 of a longer one, or when it starts
 * with the word (of 2 characters or more: a word cut short, 1 edit). A
 * candidate equal to the word is not a suggestion.
 * @return how many were written to out. */
size_t suggest_closest(const char *word, const char *const *cands, size_t n, size_t *out,
                       size_t max);

#endif
