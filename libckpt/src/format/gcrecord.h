/* gcrecord.h -- a gc's record: the objects and manifests it deletes, which
 * no commit may use while HEAD names the record (docs/FORMAT.md, "Garbage
 * collection"). */
#ifndef CKPT_GCRECORD_H
#define CKPT_GCRECORD_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "base/idset.h"

#define CKPT_GC_DELETE_MS (60ll * 60 * 1000)          /* a gc deletes for at most this long */
#define CKPT_GC_RECORD_TTL_MS (24ll * 60 * 60 * 1000) /* older records are void */

/* What gc records say is being deleted: object id -> 1 << kind, and the
 * manifest keys (relative to the run). */
struct ckpt_gc_victims {
    struct ckpt_idset objs;
    char **manifests;
    size_t nmanifests;
};

void ckpt__gc_victims_free(struct ckpt_gc_victims *v);
/* Add a manifest key (relative to the run). -1 out of memory. */
int ckpt__gc_victims_add_manifest(struct ckpt_gc_victims *v, const char *rel);
/* Encode a gc record: the objects and manifests a gc deletes. */
ckpt_status ckpt__gc_record_encode(const struct ckpt_gc_victims *v, int64_t time_ms, char **out,
                                   size_t *len);
/* Add the record in buf to v (hostile input: checked like a manifest). */
ckpt_status ckpt__gc_record_decode(const void *buf, size_t len, struct ckpt_gc_victims *v,
                                   char *err);

#endif
