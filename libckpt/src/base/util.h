/* util.h -- small helpers every module of libckpt uses: ids as hex, item
 * names, directories, and the failpoints tests arm; with the shared
 * module's header (ckpt_common.h: the clock, sizes, durations, error text
 * (ckpt__seterr)...). */
#ifndef CKPT_UTIL_H
#define CKPT_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ckpt.h"
#include "ckpt_common.h"
#include "ckpt_store.h" /* CKPT_ERR_MAX */

#define CKPT_ID_LEN 16               /* chunk id: XXH3-128 of the raw bytes */
#define CKPT_ID_HEX (CKPT_ID_LEN * 2)
#define CKPT_NAME_MAX 4095           /* item names (segments: 255) */
#define CKPT_TARGET_MAX 4095         /* link targets */

void ckpt__hex(const uint8_t *in, size_t n, char *out);  /* out: 2n+1 */
int ckpt__unhex(const char *in, uint8_t *out, size_t n); /* 0 ok */
/* Well-formed UTF-8 without control characters. */
int ckpt__text_valid(const char *s, size_t len);
/* Item names: relative, no empty/"."/".." segments, UTF-8 text. */
int ckpt__name_valid(const char *name);
/* Names formats 1 and 2 accept: [A-Za-z0-9._-/+=@,], at most 255 bytes. */
int ckpt__name_legacy(const char *name);
char *ckpt__strdup(const char *s);
ckpt_status ckpt__mkdirs(const char *path, mode_t mode, char *err);
ckpt_status ckpt__errno_status(int e);

/* Failpoints, for tests: after ckpt__failpoint_arm(name, n), the nth call
 * of ckpt__failpoint(name) returns 1 (once); unarmed it costs one relaxed
 * atomic load. Points: "idset_put" (out of memory growing an id set),
 * "pool_submit" (a job cannot be queued). */
void ckpt__failpoint_arm(const char *name, unsigned nth);
int ckpt__failpoint(const char *name);

#endif
