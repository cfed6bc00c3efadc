/* dedup.h -- the writer's dedup index: for each chunk the run holds, where
 * it lives (its own object, or a pack and an offset), so a save stores a
 * chunk the run already holds only by reference. Not thread-safe by
 * itself: the run state's lock guards it (runstate.h). */
#ifndef CKPT_DEDUP_H
#define CKPT_DEDUP_H

#include <stddef.h>
#include <stdint.h>

#include "base/idset.h"
#include "format/manifest.h"

struct ckpt_loc {
    uint32_t stored_len;
    uint32_t pack;             /* 0: its own object; else 1 + index in packtab */
    uint64_t off;
};

struct ckpt_dedup {
    struct ckpt_idset known;   /* chunk id -> index in locs (UINT64_MAX: being
                                  deleted or damaged, never reused) */
    struct ckpt_loc *locs;
    size_t nlocs, caplocs;
    struct ckpt_pack *packtab; /* size 0: deleted by retention */
    size_t npacktab, cappacktab;
    struct ckpt_idset packidx; /* pack id -> index in packtab */
};

void ckpt__dedup_init(struct ckpt_dedup *x);
void ckpt__dedup_free(struct ckpt_dedup *x);
/* Remember where chunk r of manifest m lives (newest wins). -1 nomem. */
int ckpt__dedup_put(struct ckpt_dedup *x, const struct ckpt_manifest *m,
                    const struct ckpt_chunk_ref *r);
/* Remember every chunk of m. -1 nomem. */
int ckpt__dedup_put_manifest(struct ckpt_dedup *x, const struct ckpt_manifest *m);
/* Where chunk `id` lives, if known and not forgotten: 1 and *loc (and
 * *pack for packed chunks), else 0. */
int ckpt__dedup_get(const struct ckpt_dedup *x, const uint8_t *id, struct ckpt_loc *loc,
                    struct ckpt_pack *pack);
/* Never point at object `id` of `kind` (CKPT_OBJ_CHUNK, CKPT_OBJ_PACK)
 * again: it is being deleted, or a restore found it damaged. */
void ckpt__dedup_forget(struct ckpt_dedup *x, const uint8_t *id, int kind);

#endif
