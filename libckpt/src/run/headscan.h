/* headscan.h -- a run whose HEAD is damaged, read from its manifests
 * (docs/FORMAT.md, "A damaged HEAD").
 *
 * HEAD is the one definition of "committed"; when it cannot be decoded
 * (garbage, a bad checksum, an empty object, fields out of range) while the
 * manifests it named are intact, nothing would restore and nothing could
 * commit. Instead, readers list manifests/ and take what decodes as the
 * run's checkpoints, and the next writer rewrites HEAD from that list,
 * conditionally on the damaged HEAD's etag:
 *   - a manifest of a lower lease epoch than the newest one among them,
 *     with a sequence number not below the first of that newest epoch, was
 *     left by a runner fenced out after the takeover: left out;
 *   - for one step, the latest commit (highest seq) supersedes the others;
 *   - HEAD's epoch becomes the newest epoch among the manifests, so a writer
 *     of an older lease (commit.c, fence) still refuses to commit;
 *   - what HEAD alone knew is lost: the damaged marks (those checkpoints
 *     come back and fail restore's checks again), the gc records in force
 *     (so a writer over a scanned HEAD dedups against nothing, and gc
 *     refuses to run until HEAD is written again).
 * Errors go to the context's message. */
#ifndef CKPT_HEADSCAN_H
#define CKPT_HEADSCAN_H

#include <stdbool.h>

#include "ckpt.h"
#include "format/head.h"

struct ckpt_ctx;
struct ckpt_run;

enum {
    CKPT_HEAD_SCANNED = 1u << 0, /* HEAD is damaged: h was built from the manifests */
    CKPT_HEAD_NEWER = 1u << 1    /* a manifest of a newer format was seen (not in h):
                                    writers must not commit */
};

/* Read HEAD into h (ckpt__read_head: *exists false and h empty when the run
 * has none). When HEAD exists but is damaged, build h from the manifests
 * instead: *flags gets CKPT_HEAD_SCANNED, *exists stays true and etag (may
 * be NULL) is the damaged HEAD's, so that a write over it is conditional;
 * a warning is logged once, naming the damage (copied to `why`, may be
 * NULL, CKPT_ERR_MAX bytes) and how HEAD gets rewritten. Store errors stop
 * the scan as they would stop reading HEAD. */
ckpt_status ckpt__read_head_or_scan(struct ckpt_ctx *ctx, struct ckpt_head *h, char *etag,
                                    bool *exists, unsigned *flags, char *why);

/* Whether the run's HEAD (read again now, scanned if damaged) still names
 * the checkpoint whose manifest is `rel`, retained or marked damaged: 0
 * when retention (after another writer's commit) took it out since it was
 * read -- a checkpoint gone, not a damaged one. 1 when it is still there,
 * or when HEAD cannot be read (then what was found stands). The context's
 * message is kept; nothing is logged. */
int ckpt__head_retains(struct ckpt_ctx *ctx, const char *rel);

/* A view scanned while this process commits `rel` (its manifest or commit
 * record is written, HEAD not yet: a writer whose HEAD was damaged under
 * it reads the run again when its conditional write is refused) names
 * `rel` as if it were committed. It is not: left there, the commit would
 * take it for another writer's (refused as fenced) or supersede it, and
 * retention delete the manifest being committed. Drop it from rs's view
 * (rs.mu held), with its objects; HEAD's seq and step come from the rest.
 * Nothing for a HEAD that was read whole. */
void ckpt__run_unscan(struct ckpt_run *rs, const char *rel);

#endif
