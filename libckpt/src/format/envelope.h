/* envelope.h -- the text records of a run (manifests, HEAD, gc records):
 * JSON sealed in a checksummed envelope, and the field conventions they
 * share (docs/FORMAT.md). Everything read back from a store is hostile:
 * sizes are bounded, every field is type- and range-checked, and the
 * checksum guards the whole text. */
#ifndef CKPT_ENVELOPE_H
#define CKPT_ENVELOPE_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"

#define CKPT_JSON_MAX_SAFE 9007199254740992.0 /* 2^53: exact in a JSON double */

/* Seal JSON text: the text, then "\n#xxh64:<16 hex>\n". Malloc'ed; NULL
 * without memory. */
char *ckpt__envelope_seal(const char *json, size_t *len);
/* Check a sealed record; *json_len: the length of its JSON text. */
ckpt_status ckpt__envelope_open(const void *buf, size_t len, size_t *json_len, char *err);
/* Bound (at most max bytes), check and parse a sealed record ("<what> too
 * large", a damaged envelope: CKPT_E_CORRUPT). *root: its JSON value, NULL
 * when the text does not parse; the caller deletes it. */
ckpt_status ckpt__envelope_parse(const void *buf, size_t len, size_t max, const char *what,
                                 cJSON **root, char *err);

/* ckpt__envelope_parse(), then the checks every record starts with: a JSON
 * object with a `format` of 1..fmt_max (above: CKPT_E_UNSUPPORTED, "newer
 * than this ckpt: upgrade") and a `kind` of `kind` (else CKPT_E_CORRUPT).
 * On success *root is the object (the caller deletes it) and *fmt its
 * format; on failure *root is NULL. */
ckpt_status ckpt__envelope_record(const void *buf, size_t len, size_t max, const char *what,
                                  const char *kind, int fmt_max, cJSON **root, double *fmt,
                                  char *err);

/* Fields. 64-bit counters are decimal strings (JSON numbers are doubles for
 * most readers); other numbers must be integers within [lo, hi]. The adders
 * return 1, or 0 without memory; the getters 0, or -1 when the field is
 * missing or out of range. */
int ckpt__json_add_u64s(cJSON *o, const char *k, uint64_t v);
int ckpt__json_add_num(cJSON *o, const char *k, double v);
int ckpt__json_get_u64s(const cJSON *o, const char *k, uint64_t *v);
int ckpt__json_get_num(const cJSON *o, const char *k, double lo, double hi, double *v);
const char *ckpt__json_get_str(const cJSON *o, const char *k); /* NULL: not a string */

#endif
