/*
 * rules.h -- the input rules libckpt and ckptrun share, each defined once.
 *
 * ckptrun checks a value before it starts anything (a child, a lease, a
 * store object), and the library checks the same value when a program opens
 * a context; both call these functions, so a value one side accepts is never
 * refused by the other (`--codec zstd:20` used to pass ckptrun and fail the
 * trainer's ckpt_open). Pure functions: no allocation, no I/O, thread-safe.
 *
 * Conventions (docs/ckptrun.md, "Sizes and durations"):
 *  - sizes: a number with an optional unit. K, M, G, T (also Ki, KiB, M, MiB
 *    ...) are powers of 1024; kB, KB, MB, GB, TB are powers of 1000; B or
 *    nothing is bytes. Printed sizes use the binary units (KiB, MiB, GiB).
 *  - durations: 250ms, 90s, 30m, 1h, 1h30m, 1.5h; a bare number is seconds.
 *  - run names: a run is *opened* (read, resumed, inspected) under any name
 *    either side accepted before the rules were shared: 1..200 characters of
 *    A-Z a-z 0-9 . _ - other than "." and "..". A run is *created* only
 *    under the stricter name: 1..128 of those characters, not starting with
 *    '.' (hidden in listings, and "..x" reads like a path).
 *  - codecs: zstd[:LEVEL] with LEVEL 1..19 (zstd's "ultra" levels 20..22 need
 *    a large window the reader would have to allow), lz4, none.
 */
#ifndef CKPT_RULES_H
#define CKPT_RULES_H

#include <stddef.h>
#include <stdint.h>
#include "ckpt.h"

#define CKPT_RUN_NAME_MAX_OPEN 200
#define CKPT_RUN_NAME_MAX_NEW 128
#define CKPT_ZSTD_LEVEL_MIN 1
#define CKPT_ZSTD_LEVEL_MAX 19

/* What a new run's name may be, for messages. */
#define CKPT_RUN_NAME_RULE "1-128 of A-Z a-z 0-9 . _ - (not starting with '.')"
#define CKPT_CODEC_RULE "zstd[:1-19], lz4 or none"
#define CKPT_SIZE_RULE "a size like 512M, 7GiB, 1.5G or 4096 (K/M/G/T = 1024^n, kB/MB/GB/TB = 1000^n)"

/* @return 1 when `name` may name a run: `creating` 0 for a run that already
 * exists (the lenient rule), 1 for one being created (the strict rule). */
int ckpt__rule_run_name(const char *name, int creating);

/* "zstd", "zstd:LEVEL", "lz4", "none". On success *codec and *level (0 =
 * the codec's default) are set. @return 0, or -1 when the text is not a
 * codec this library writes. */
int ckpt__rule_codec(const char *s, ckpt_codec *codec, int *level);

/* A size (see the conventions above) into *bytes. `*si` (may be NULL) is
 * set to 1 when the text used a decimal unit (kB, MB, GB, TB): earlier
 * versions of the store options (CKPT_MAX_RATE, CKPT_PACK_BYTES) read "MB"
 * as MiB, so callers warn where such an input changes meaning.
 * @return 0, or -1 when malformed, zero or above 2^62. */
int ckpt__rule_size(const char *s, uint64_t *bytes, int *si);

/* A duration (see above) into *ms, integer arithmetic throughout ("0.1s"
 * is exactly 100 ms). @return 0, or -1 when malformed or overflowing. */
int ckpt__rule_duration_ms(const char *s, uint64_t *ms);

#endif
