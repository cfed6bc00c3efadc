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

#include "format/manifest_data.h"

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
