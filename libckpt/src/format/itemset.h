/* itemset.h -- the rules a checkpoint's item set keeps (docs/FORMAT.md,
 * "Links"), checked whole when a manifest is read and before a save. */
#ifndef CKPT_ITEMSET_H
#define CKPT_ITEMSET_H

#include "ckpt.h"

struct ckpt_manifest;

/* The manifest as a whole: names unique, no item also a directory of
 * another, every link's target relative and resolving, inside the
 * checkpoint, to a non-link item or a directory of items. CKPT_E_CORRUPT
 * with the reason (callers saving map it to CKPT_E_INVAL). */
ckpt_status ckpt__manifest_check(const struct ckpt_manifest *m, char *err);
/* A link target's own text: relative, 1..CKPT_TARGET_MAX bytes of UTF-8
 * text. 1 if valid. */
int ckpt__target_valid(const char *target);

#endif
