/* chunk.h -- the chunk stage of a save, on the workers: each chunk is
 * hashed (its id), looked up in the run (dedup), else encoded and put: as
 * its own object on a local disk, into the save's open pack on an object
 * store. A protected file's chunks are read here, and the file is read
 * again whole when it changed while it was read. Once the last chunk is
 * done the stage ends -- the save's last pack goes out -- and the commit
 * runs (commit.h). */
#ifndef CKPT_CHUNK_H
#define CKPT_CHUNK_H

#include <stddef.h>
#include <stdint.h>

#include "format/codec.h"

struct ckpt_save;
struct ckpt_block;

/* One chunk of a save: its bytes are in a staging block, in the region's
 * own stage, or (neither) still in the protected file. */
struct ckpt_chunk_job {
    struct ckpt_save *sv;
    size_t item, chunk;
    uint64_t off;
    size_t len;
    struct ckpt_block *blk;   /* staging block (capped staging, devices) */
    const uint8_t *raw;       /* or the chunk inside the region's own stage */
    int in_place;             /* raw is the protected region itself (a stop's
                                 save): counted in sv->in_place until done */
    int hash_only;            /* a replicated item's chunk another rank stores:
                                 its id only (globalckpt.h) */
};

/* Pool job (pool.h): store the chunk of a malloc'ed struct ckpt_chunk_job
 * (freed), give its staging block back, and drop its reference to the save
 * (the last one ends the stage, here). */
void ckpt__chunk_job(void *arg, struct ckpt_codec_ws *ws);
/* Pool job: end the chunk stage of the save `arg` and commit it; for the
 * submitter whose reference was the last. */
void ckpt__chunk_stage_end(void *arg, struct ckpt_codec_ws *ws);

#endif
