/*
 * ckpt_common.h -- what libckpt, its stores and ckptrun all need, each
 * defined once: durations, sizes, names, codec specs, signal names, the
 * clock, threads, error details and lists of strings.
 *
 * Internal to the project (not installed, not exported from libckpt.so):
 * libckpt and uploaders compile these files in, and ckptrun, which links
 * libckpt statically, includes this header beside the public ones. A value
 * one side accepts is never refused by the other (`--codec zstd:20` once
 * passed ckptrun and failed the trainer's ckpt_open), and a size or a
 * duration is printed the same way everywhere.
 *
 * Conventions (docs/ckptrun.md, "Sizes and durations"):
 *  - sizes: a number with an optional unit. K, M, G, T (also Ki, KiB, M,
 *    MiB ...) are powers of 1024; kB, KB, MB, GB, TB are powers of 1000; B or
 *    nothing is bytes. Printed sizes use the binary units (KiB, MiB, GiB).
 *  - durations: 250ms, 90s, 30m, 1h, 1h30m, 1.5h; a bare number is seconds.
 *  - run names: a run is *opened* (read, resumed, inspected) under any name
 *    either side accepted before the rules were shared: 1..200 characters
 *    of A-Z a-z 0-9 . _ - other than "." and "..". A run is *created* only
 *    under the stricter name: 1..128 of those characters, not starting
 *    with '.' (hidden in listings, and "..x" reads like a path).
 *  - codecs: the rows of CKPT_CODEC_MAP (below): zstd[:LEVEL] with LEVEL
 *    1..19, lz4, none.
 *  - signals: a name with or without "SIG" in any case (USR1, SIGusr1),
 *    or a number 1..64; KILL and STOP are never accepted (they cannot be
 *    caught), "none" is 0.
 *
 * Every function is pure (no allocation, no I/O) and thread-safe unless
 * said otherwise.
 */
#ifndef CKPT_COMMON_H
#define CKPT_COMMON_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- local writes ---------------------------------------------------------- */

/* The most one write() to a local file takes: restored files (restore/
 * deliver.c) and the file store's objects (uploaders/file.c) are written
 * in pieces of this size, not a chunk or a pack at once. Linux (6.x, ext4
 * and xfs) sizes the page cache's folios by the length of the write: a
 * 1 MiB write takes 1 MiB folios, cut from the large free blocks that a
 * virtual machine with free page reporting has handed back to its host,
 * and the first touch of each of their pages costs a fault in the host.
 * Measured on such a machine (bench/README.md, "Loopback s3rver"), 1 GiB,
 * medians of alternating runs: a restore from s3rver took 2.22 s (1.3 s of
 * system time) in 1 MiB writes and 1.58 s (0.6 s) in 128 KiB ones (eight
 * runs each); a save to a file store 1.34 s and 0.77 s (six each). On
 * memory already warm, 128 KiB and 1 MiB writes cost the same (0.2-0.3 s
 * per GiB). */
#define CKPT_WRITE_PIECE ((size_t)128 << 10)

/* ---- the clock ------------------------------------------------------------ */
int64_t ckpt__now_ms(void);   /* wall clock, Unix ms */
int64_t ckpt__mono_ms(void);  /* monotonic, ms (for deadlines and ages) */
uint64_t ckpt__mono_ns(void); /* monotonic, ns (for measurements) */

/* ---- threads --------------------------------------------------------------- */
/* pthread_create with every signal blocked in the new thread (the caller's
 * mask is restored): a library's threads must not take the signals the
 * application (or ckptrun's signalfd) waits for. @return 0 or an errno. */
int ckpt__thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

/* ---- lists of strings ---------------------------------------------------------- */
/* A growable list of strings it owns, e.g. the keys a store's list call
 * gives: start it zeroed ({ 0 }). Allocates; not thread-safe. */
struct ckpt_strv {
    char **v;
    size_t n, cap;
};
/* Append a copy of s. 0, or -1 without memory (the list is as before). */
int ckpt__strv_push(struct ckpt_strv *sv, const char *s);
/* Free the strings and the list; it is empty and zeroed after. */
void ckpt__strv_free(struct ckpt_strv *sv);

/* ---- error details ------------------------------------------------------------ */
/* printf into err, a buffer of n bytes, truncated; nothing is written when
 * err is NULL (a caller that does not want the detail). */
void ckpt__errf(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The same into a detail buffer of CKPT_ERR_MAX bytes: the `err` of every
 * store call (ckpt_store.h) and of libckpt's internal calls. A macro, so
 * that this header needs not the store interface's: CKPT_ERR_MAX is the
 * one the including file sees (it has ckpt_store.h). */
#define ckpt__seterr(err, ...) ckpt__errf((err), CKPT_ERR_MAX, __VA_ARGS__)

/* ---- sizes and durations ----------------------------------------------------- */
#define CKPT_SIZE_RULE "a size like 512M, 7GiB, 1.5G or 4096 (K/M/G/T = 1024^n, kB/MB/GB/TB = 1000^n)"
/* A size into *bytes. `*si` (may be NULL) is set to 1 when the text used a
 * decimal unit (kB, MB, GB, TB): earlier versions of the store options
 * (CKPT_MAX_RATE, CKPT_PACK_BYTES) read "MB" as MiB, so callers warn where
 * such an input changes meaning. @return 0, or -1 when malformed, zero or
 * above 2^62. */
int ckpt__parse_size(const char *s, uint64_t *bytes, int *si);
/* A duration into *ms, integer arithmetic throughout ("0.1s" is exactly
 * 100 ms). @return 0, or -1 when malformed or overflowing. */
int ckpt__parse_duration_ms(const char *s, uint64_t *ms);
/* Human forms into buf (size n); @return buf. */
char *ckpt__fmt_bytes(uint64_t bytes, char *buf, size_t n);    /* "12.3 MiB" */
char *ckpt__fmt_rate(double bytes_per_s, char *buf, size_t n); /* "12.3 MiB/s" */
char *ckpt__fmt_duration(uint64_t ms, char *buf, size_t n);    /* "1h02m", "4.2s" */

/* ---- names -------------------------------------------------------------------- */
#define CKPT_RUN_NAME_MAX_OPEN 200
#define CKPT_RUN_NAME_MAX_NEW 128
#define CKPT_RUN_NAME_RULE "1-128 of A-Z a-z 0-9 . _ - (not starting with '.')"
/* 1 when `name` may name a run: `creating` 0 for a run that already exists
 * (the lenient rule), 1 for one being created (the strict rule). */
int ckpt__run_name_ok(const char *name, int creating);
/* Copy `in` into out (size n) with every character outside [A-Za-z0-9._-]
 * replaced by '_' and leading '.' dropped: a run name from a directory's
 * name, a host name in a key. @return 0, -1 if empty or longer than 128. */
int ckpt__name_sanitize(const char *in, char *out, size_t n);

/* ---- codecs ------------------------------------------------------------------
 * Every codec, one row each:
 *   X(name, ID, levels, level_min, level_max, level_default, speed)
 * name: as users write it (--codec, CKPT_CODEC, the control protocol, logs);
 * ID: its public value CKPT_CODEC_<ID> (ckpt.h; pinned there: the ABI and
 * the chunk header's codec byte); levels: LEVELS when it takes ":LEVEL"
 * (level_min..level_max, and 0 means level_default), FIXED when it takes
 * none (its level columns are 0 and a level given is ignored); speed: its
 * CKPT_SPEED_<speed> class. Rows are listed in the order users see them.
 *
 * Generated from it: the bounds every check uses (ckpt__codec_spec: a value
 * with no row is refused), the parser and the names (ckpt__parse_codec,
 * ckpt__codec_name), the messages (CKPT_CODEC_RULE) and ckptrun's --help and
 * completions (CKPT_CODEC_FORMS, CKPT_CODEC_WORDS). The map is internal, not
 * in ckpt.h: level ranges and speed classes are policy that may change
 * without an API promise, while the public enum keeps its explicit values.
 * A new codec: its value in ckpt.h, a row here, its implementation in
 * libckpt/src/format/codec.c.
 *
 * zstd stops at 19: its "ultra" levels 20..22 need a large window the
 * reader would have to allow. */
#define CKPT_CODEC_MAP(X)                  \
    X(zstd, ZSTD, LEVELS, 1, 19, 1, DENSE) \
    X(lz4, LZ4, FIXED, 0, 0, 0, FAST)      \
    X(none, NONE, FIXED, 0, 0, 0, COPY)

/* Speed classes, fastest first: what a stop short of time falls back to. */
enum ckpt_codec_speed {
    CKPT_SPEED_COPY = 0, /* no compression: memory speed */
    CKPT_SPEED_FAST = 1, /* GB/s per core, a modest ratio */
    CKPT_SPEED_DENSE = 2 /* a better ratio at a fraction of that speed */
};

struct ckpt__codec_spec {
    const char *name;         /* "zstd" */
    ckpt_codec id;            /* CKPT_CODEC_ZSTD */
    int has_levels;           /* 1: takes ":LEVEL" */
    int level_min, level_max; /* 0, 0 without levels */
    int level_default;        /* what level 0 means */
    enum ckpt_codec_speed speed;
};

/* The row of a codec, NULL for CKPT_CODEC_DEFAULT and any value without
 * one (the bound of every check of a codec value: a config's, a chunk
 * header's). */
const struct ckpt__codec_spec *ckpt__codec_spec(ckpt_codec codec);
/* Row i in the map's order, NULL past the end. */
const struct ckpt__codec_spec *ckpt__codec_at(size_t i);
/* The first row of speed class `speed`, NULL when none has it. */
const struct ckpt__codec_spec *ckpt__codec_of_speed(enum ckpt_codec_speed speed);

/* How specs are written, as literals built from the map:
 *  CKPT_CODEC_FORMS  " zstd[:1-19] lz4 none" (each after a space, for a
 *                    help text: "codec:" CKPT_CODEC_FORMS)
 *  CKPT_CODEC_WORDS  "zstd zstd:1 zstd:19 lz4 none" (completion words: a
 *                    codec, and its lowest and highest level)
 *  CKPT_CODEC_RULE   "zstd[:1-19], lz4, none" (messages: "expected %s") */
#define CKPT_CODEC_FORM_LEVELS(lo, hi) "[:" #lo "-" #hi "]"
#define CKPT_CODEC_FORM_FIXED(lo, hi) ""
#define CKPT_CODEC_WORDS_LEVELS(name, lo, hi) " " #name ":" #lo " " #name ":" #hi
#define CKPT_CODEC_WORDS_FIXED(name, lo, hi) ""
#define CKPT_CODEC_FORM_(name, ID, lv, lo, hi, dflt, speed) " " #name CKPT_CODEC_FORM_##lv(lo, hi)
#define CKPT_CODEC_RULE_(name, ID, lv, lo, hi, dflt, speed) ", " #name CKPT_CODEC_FORM_##lv(lo, hi)
#define CKPT_CODEC_WORD_(name, ID, lv, lo, hi, dflt, speed) \
    " " #name CKPT_CODEC_WORDS_##lv(name, lo, hi)
#define CKPT_CODEC_FORMS CKPT_CODEC_MAP(CKPT_CODEC_FORM_)
#define CKPT_CODEC_WORDS (&CKPT_CODEC_MAP(CKPT_CODEC_WORD_)[1])
#define CKPT_CODEC_RULE (&CKPT_CODEC_MAP(CKPT_CODEC_RULE_)[2])

/* "zstd", "zstd:LEVEL", "lz4", "none" (a row's name, with ":LEVEL" in its
 * range for a codec that has levels): *codec and *level (0 = the codec's
 * default). @return 0, or -1 when the text is not a codec this library
 * writes. */
int ckpt__parse_codec(const char *s, ckpt_codec *codec, int *level);
/* A row's name ("zstd", "lz4", "none": as the control protocol and the logs
 * spell them), "default" for CKPT_CODEC_DEFAULT, "?" for anything else. */
const char *ckpt__codec_name(ckpt_codec codec);

/* ---- signal names ------------------------------------------------------------- */
/* "none" (0), "USR1", "SIGUSR1", "usr1" or a number 1..64 into *sig.
 * @return 0, or -1 (unknown, KILL, STOP, out of range). */
int ckpt__parse_signal(const char *s, int *sig);
/* "SIGUSR1" for a signal number, "none" for 0, the number itself for one
 * without a name (then in a per-thread buffer, valid until the calling
 * thread's next call). */
const char *ckpt__signal_name(int sig);

#ifdef __cplusplus
}
#endif
#endif
