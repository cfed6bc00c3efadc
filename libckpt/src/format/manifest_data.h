/* format/manifest_data.h -- what a manifest holds (docs/FORMAT.md): its
 * format versions and bounds, items, chunk references and packs. Data
 * only, below the code that encodes, decodes and checks it (manifest.h,
 * itemset.h). */
#ifndef CKPT_MANIFEST_DATA_H
#define CKPT_MANIFEST_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "base/util.h"

#define CKPT_MANIFEST_MAX (256u << 20) /* largest manifest (and gc record) we accept */
#define CKPT_FORMAT_VERSION 4          /* what this reader accepts (1 to 4) */
#define CKPT_FORMAT_UNPACKED 1         /* manifests without packs stay format 1 */
#define CKPT_FORMAT_PACKS 2            /* chunks in packs */
#define CKPT_FORMAT_NAMES 3            /* link items, names outside the old alphabet */
#define CKPT_FORMAT_RANKS 4            /* parts of a multi-rank checkpoint, commit records */
#define CKPT_DEFAULT_PACK (32u << 20)  /* object stores; 0 on file:// */
#define CKPT_MAX_PACK (1u << 30)
#define CKPT_MAX_PACKS 10000000u /* per manifest */

enum { CKPT_ITEM_MEM = 0, CKPT_ITEM_FILE = 1, CKPT_ITEM_DEVICE = 2, CKPT_ITEM_LINK = 3 };

struct ckpt_chunk_ref {
    uint8_t id[CKPT_ID_LEN];
    uint32_t raw_len;
    uint32_t stored_len; /* size of the chunk object */
    uint32_t pack;       /* 0: its own object chunks/<id>; else 1 + index in
                            the manifest's packs, the chunk object at `off` */
    uint64_t off;
};

/* A pack: one object (packs/<id>) holding many chunk objects back to back;
 * id: 128 random bits. */
struct ckpt_pack {
    uint8_t id[CKPT_ID_LEN];
    uint64_t size;
};

struct ckpt_mitem {
    char *name;
    int kind;
    unsigned elem_size; /* 0/1 = bytes, 2, 4 (byte grouping) */
    uint64_t size;
    uint32_t mode; /* file permission bits */
    char *target;  /* links: the link's text (relative) */
    size_t nchunks;
    struct ckpt_chunk_ref *chunks;
    /* Replicated items (format 4): the same bytes on every rank. In a part
     * manifest, `chunks` are the ones this part uploaded: chunks
     * first..first+nchunks-1 of the item; `digest` covers the whole item's
     * chunk ids (globalckpt.h). Assembled whole when a global checkpoint is read. */
    int replicated;
    uint64_t digest;
    size_t first;
    /* A global checkpoint's `others` (globalckpt.h): the rank whose part
     * holds the item. Not stored: set when the parts are composed. */
    unsigned part;
};

struct ckpt_manifest {
    unsigned version;
    uint64_t step, seq, epoch;
    int64_t time_ms;
    uint32_t rank, world_size;
    uint64_t chunk_bytes;
    uint64_t new_bytes; /* stored bytes first written by this checkpoint */
    char *writer;       /* "host:pid" */
    char *parent;       /* manifest key of the previous commit, or NULL */
    size_t nitems;
    struct ckpt_mitem *items;
    size_t npacks; /* packs its chunks live in (format 2) */
    struct ckpt_pack *packs;
    /* Multi-rank (format 4). A part manifest: the job step's nonce. A global
     * checkpoint read through its commit record (globalckpt.h): `items` are one
     * rank's view (its own items and the replicated ones, assembled),
     * `others` the other ranks' own items (their chunks count as the
     * checkpoint's objects), `parts` the part manifests' keys (relative). */
    uint32_t nonce;
    size_t nothers;
    struct ckpt_mitem *others;
    size_t nparts;
    char **parts;
};

#endif
