/* codec.h -- one chunk in, one self-describing chunk object out, and back
 * (docs/FORMAT.md, "Chunk objects"). */
#ifndef CKPT_CODEC_H
#define CKPT_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "base/util.h"

#define CKPT_DEFAULT_CHUNK (4u << 20)        /* file:// */
#define CKPT_DEFAULT_CHUNK_REMOTE (8u << 20) /* s3://, gs://, az:// */
#define CKPT_MIN_CHUNK (64u << 10)
#define CKPT_MAX_CHUNK (64u << 20)

/* Chunk object: a 48-byte header then the payload. */
#define CKPT_CHUNK_MAGIC "CKC1"
#define CKPT_CHUNK_HDR 48
#define CKPT_CHUNK_VERSION 1                 /* the header's version byte */
enum { CKPT_FILTER_NONE = 0, CKPT_FILTER_BYTEGROUP = 1 };

struct ckpt_codec_ws; /* per-thread compression workspace */
struct ckpt_codec_ws *ckpt__codec_ws_new(size_t chunk_bytes);
void ckpt__codec_ws_free(struct ckpt_codec_ws *ws);
/* Grow the workspace to chunks of `chunk_bytes` (<= CKPT_MAX_CHUNK); decode
 * does this itself for chunks written with a larger chunk size. */
ckpt_status ckpt__codec_ws_reserve(struct ckpt_codec_ws *ws, size_t chunk_bytes);
/* The workspace's raw-chunk buffer, grown to `need` bytes; NULL without memory.
 * Valid until the next reserve or scratch call on this workspace. */
uint8_t *ckpt__codec_ws_scratch(struct ckpt_codec_ws *ws, size_t need);
/* The workspace's reply buffer (kept between fetches), at least `need`. */
uint8_t *ckpt__codec_ws_fetch(struct ckpt_codec_ws *ws, size_t need);
/* Encode one chunk. *obj points into ws (valid until the next call). */
ckpt_status ckpt__chunk_encode(struct ckpt_codec_ws *ws, const void *raw, size_t len,
                               const uint8_t id[CKPT_ID_LEN], ckpt_codec codec,
                               int level, unsigned elem_size, const void **obj,
                               size_t *obj_len);
/* The same as two pieces, the 48-byte header (in ws) and the payload: a
 * chunk stored raw is not copied (*payload is `raw`), for callers that copy
 * it somewhere anyway (a pack). */
ckpt_status ckpt__chunk_encode_parts(struct ckpt_codec_ws *ws, const void *raw, size_t len,
                                     const uint8_t id[CKPT_ID_LEN], ckpt_codec codec,
                                     int level, unsigned elem_size, const void **hdr,
                                     const void **payload, size_t *plen);
/* Decode and verify one chunk object into raw (exactly raw_len bytes). On
 * damage returns CKPT_E_CORRUPT with the reason in err. */
ckpt_status ckpt__chunk_decode(struct ckpt_codec_ws *ws, const void *obj, size_t obj_len,
                               const uint8_t id[CKPT_ID_LEN], void *raw, size_t raw_len,
                               char *err);
/* Check one chunk object and point *view at its raw bytes: the payload
 * itself for a chunk stored raw (no copy), else decoded into the
 * workspace's scratch (valid until the next call on ws). */
ckpt_status ckpt__chunk_view(struct ckpt_codec_ws *ws, const void *obj, size_t obj_len,
                             const uint8_t id[CKPT_ID_LEN], size_t raw_len,
                             const uint8_t **view, char *err);
void ckpt__chunk_id(const void *raw, size_t len, uint8_t id[CKPT_ID_LEN]);
/* 1 if the chunk object whose first CKPT_CHUNK_HDR bytes are at `hdr` has
 * a sound header for `id` and `raw_len` and stores its bytes as they are
 * (no codec, no filter): its payload is then the raw bytes, checked by
 * their content hash (XXH3-128, the id) alone. */
int ckpt__chunk_is_plain(const void *hdr, size_t obj_len, const uint8_t id[CKPT_ID_LEN],
                         size_t raw_len);
void ckpt__bytegroup(const uint8_t *in, uint8_t *out, size_t len, unsigned elem);
void ckpt__byteungroup(const uint8_t *in, uint8_t *out, size_t len, unsigned elem);

#endif
