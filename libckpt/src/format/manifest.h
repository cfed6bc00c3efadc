/* manifest.h -- a checkpoint's manifest: its items, where each chunk is
 * stored, and the keys of a run's objects (docs/FORMAT.md, "Manifests").
 * Everything read back from a store is hostile: ckpt__manifest_decode
 * bounds and checks every field, then the manifest as a whole. */
#ifndef CKPT_MANIFEST_H
#define CKPT_MANIFEST_H

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
#define CKPT_MAX_PACKS 10000000u       /* per manifest */

enum { CKPT_ITEM_MEM = 0, CKPT_ITEM_FILE = 1, CKPT_ITEM_DEVICE = 2, CKPT_ITEM_LINK = 3 };

struct ckpt_chunk_ref {
    uint8_t id[CKPT_ID_LEN];
    uint32_t raw_len;
    uint32_t stored_len;   /* size of the chunk object */
    uint32_t pack;         /* 0: its own object chunks/<id>; else 1 + index in
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
    unsigned elem_size;    /* 0/1 = bytes, 2, 4 (byte grouping) */
    uint64_t size;
    uint32_t mode;         /* file permission bits */
    char *target;          /* links: the link's text (relative) */
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
    uint64_t new_bytes;    /* stored bytes first written by this checkpoint */
    char *writer;          /* "host:pid" */
    char *parent;          /* manifest key of the previous commit, or NULL */
    size_t nitems;
    struct ckpt_mitem *items;
    size_t npacks;         /* packs its chunks live in (format 2) */
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

void ckpt__manifest_free(struct ckpt_manifest *m);
/* The format a manifest is written in: 4 for a part of a multi-rank
 * checkpoint (world_size > 1), else 3 with a link item or a name outside
 * the old alphabet, else 2 with packs, else 1. */
unsigned ckpt__manifest_format(const struct ckpt_manifest *m);
ckpt_status ckpt__manifest_encode(const struct ckpt_manifest *m, char **out, size_t *len);
ckpt_status ckpt__manifest_decode(const void *buf, size_t len, struct ckpt_manifest *m,
                                  char *err);
/* Totals for listings: raw bytes, stored bytes and chunks (each distinct
 * chunk once), link items. */
void ckpt__manifest_sizes(const struct ckpt_manifest *m, uint64_t *raw, uint64_t *stored,
                          uint64_t *chunks, uint64_t *links);

/* The objects a manifest needs, each once: chunk objects (kind 0, by chunk
 * id) and packs (kind 1, by pack id). */
enum { CKPT_OBJ_CHUNK = 0, CKPT_OBJ_PACK = 1 };
struct ckpt_idlist {
    uint8_t (*ids)[CKPT_ID_LEN];
    uint8_t *kind;
    uint64_t *size;        /* stored size the manifest records */
    size_t n;
    char **keys;           /* a global checkpoint's part manifests (relative keys) */
    size_t nkeys;
};
int ckpt__manifest_objects(const struct ckpt_manifest *m, struct ckpt_idlist *out); /* -1 nomem */
void ckpt__idlist_free(struct ckpt_idlist *l);
void ckpt__idlists_free(struct ckpt_idlist *l, size_t n); /* each, then the array */

/* Key of an object of the run: "<run>/chunks/ab/<id>" or "<run>/packs/ab/<id>". */
void ckpt__object_key(const char *run, int kind, const uint8_t id[CKPT_ID_LEN], char *out,
                      size_t n);
void ckpt__chunk_key(const char *run, const uint8_t id[CKPT_ID_LEN], char *out, size_t n);
/* The id in an object's key ("<run>/chunks/ab/<32 hex>"): 0, or -1 when the
 * key names no object of ours. */
int ckpt__key_id(const char *key, uint8_t id[CKPT_ID_LEN]);
/* Manifest key: "<run>/manifests/<seq:020>_<step:020>_<epoch:010>_<nonce:08x>.ckm"
 * (the nonce keeps a commit's key apart from one a crashed save left) */
void ckpt__manifest_key(const char *run, uint64_t seq, uint64_t step, uint64_t epoch,
                        uint32_t nonce, char *out, size_t n);

/* Part manifest key: "<run>/manifests/<step:020>_<epoch:010>_<nonce:08x>_r<rank:07>.ckp" */
void ckpt__part_key(const char *run, uint64_t step, uint64_t epoch, uint32_t nonce,
                    unsigned rank, char *out, size_t n);
/* The fields of a part key relative to the run ("manifests/..."): 0, or -1
 * when it names no part. */
int ckpt__part_key_parse(const char *rel, uint64_t *step, uint64_t *epoch, uint32_t *nonce,
                         unsigned *rank);
/* Commit record key: as a manifest's, ending ".ckc" */
void ckpt__commit_key(const char *run, uint64_t seq, uint64_t step, uint64_t epoch,
                      uint32_t nonce, char *out, size_t n);
int ckpt__is_commit_key(const char *rel);
void ckpt__mitem_free(struct ckpt_mitem *it);

#endif
