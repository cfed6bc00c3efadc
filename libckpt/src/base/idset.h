/* idset.h -- a set of 16-byte ids (chunk and pack ids), each with a 64-bit
 * value: open addressing, linear probing (the ids are hashes already),
 * grows by doubling. Not thread-safe by itself: its owner's lock guards it. */
#ifndef CKPT_IDSET_H
#define CKPT_IDSET_H

#include <stddef.h>
#include <stdint.h>

#include "base/util.h"

struct ckpt_idset {
    uint8_t (*keys)[CKPT_ID_LEN];
    uint64_t *vals;
    uint8_t *used;
    size_t cap, n;
};

void ckpt__idset_init(struct ckpt_idset *s);
void ckpt__idset_free(struct ckpt_idset *s);
/* 1 and *val (when val is not NULL) if id is in the set, else 0. */
int ckpt__idset_get(const struct ckpt_idset *s, const uint8_t *id, uint64_t *val);
/* Add id, or set its value. -1 out of memory (failpoint "idset_put"). */
int ckpt__idset_put(struct ckpt_idset *s, const uint8_t *id, uint64_t val);
/* Set the value of an id already in the set (never allocates): 1, or 0
 * when id is not in the set. */
int ckpt__idset_update(struct ckpt_idset *s, const uint8_t *id, uint64_t val);

/* Sets of objects: id -> a bit per kind of object with that id (1 << kind,
 * CKPT_OBJ_* of manifest.h). Add: -1 out of memory. */
int ckpt__objset_add(struct ckpt_idset *s, const uint8_t *id, int kind);
int ckpt__objset_has(const struct ckpt_idset *s, const uint8_t *id, int kind);

#endif
