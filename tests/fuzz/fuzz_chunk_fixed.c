/* fuzz_chunk_fixed.c -- the chunk decoders (zstd, lz4, byte grouping)
 * behind their checksums. fuzz_chunk feeds whole objects, and almost every
 * mutation dies at the header checksum; this target builds a sound header
 * around the input instead, so mutations reach the decompressors and the
 * plane decoder. It also checks an oracle: any bytes encoded with any codec
 * and filter decode to themselves.
 *
 * Input: byte 0 selects the mode and codec, byte 1 the filter and element
 * size, bytes 2..4 the raw length the header claims; the rest is the
 * payload (decode mode) or the raw bytes (round-trip mode, byte 0 >= 0x80). */
#include <stdlib.h>
#include <string.h>
#define XXH_INLINE_ALL
#include <xxhash.h>
#include "format/codec.h"

#define RAW_MAX (256u << 10)

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct ckpt_codec_ws *ws;
    static uint8_t *raw, *obj;
    char err[CKPT_ERR_MAX];
    unsigned codec, filter, elem;
    uint8_t id[CKPT_ID_LEN];
    if (!ws) {
        ws = ckpt__codec_ws_new(RAW_MAX);
        raw = malloc(RAW_MAX);
        obj = malloc(CKPT_CHUNK_HDR + 2 * RAW_MAX + 4096);
        if (!ws || !raw || !obj)
            abort();
    }
    if (size < 5)
        return 0;
    codec = CKPT_CODEC_NONE + data[0] % 3;
    filter = data[1] & 1;
    elem = data[1] & 2 ? 4 : 2;
    if (data[0] & 0x80) {
        /* oracle: encode, decode, compare */
        const uint8_t *in = data + 5;
        size_t n = size - 5 > RAW_MAX ? RAW_MAX : size - 5;
        const void *o;
        size_t olen;
        const uint8_t *view;
        if (n == 0)
            return 0;
        ckpt__chunk_id(in, n, id);
        if (ckpt__chunk_encode(ws, in, n, id, (ckpt_codec)codec, 1 + data[2] % 3,
                               filter ? elem : 0, &o, &olen) != CKPT_OK)
            abort();
        memcpy(obj, o, olen);
        if (ckpt__chunk_decode(ws, obj, olen, id, raw, n, err) != CKPT_OK ||
            memcmp(raw, in, n) != 0)
            abort();
        if (ckpt__chunk_view(ws, obj, olen, id, n, &view, err) != CKPT_OK ||
            memcmp(view, in, n) != 0)
            abort();
        return 0;
    }
    {
        /* decode: a sound header around the payload */
        size_t pl = size - 5 > 2 * RAW_MAX ? 2 * RAW_MAX : size - 5;
        uint32_t rl = ((uint32_t)data[2] | (uint32_t)data[3] << 8 | (uint32_t)data[4] << 16) %
                          RAW_MAX + 1;
        const uint8_t *view;
        if (codec == CKPT_CODEC_NONE && !filter) {
            if (pl == 0 || pl > RAW_MAX)
                return 0;
            rl = (uint32_t)pl; /* a raw chunk is its payload */
        }
        memcpy(obj, CKPT_CHUNK_MAGIC, 4);
        obj[4] = CKPT_CHUNK_VERSION;
        obj[5] = (uint8_t)codec;
        obj[6] = (uint8_t)filter;
        obj[7] = filter ? (uint8_t)elem : 0;
        put32(obj + 8, rl);
        put32(obj + 12, (uint32_t)pl);
        memcpy(obj + CKPT_CHUNK_HDR, data + 5, pl);
        put64(obj + 16, XXH64(obj + CKPT_CHUNK_HDR, pl, 0));
        /* the id: of the payload itself, so raw chunks pass every check */
        ckpt__chunk_id(obj + CKPT_CHUNK_HDR, pl, id);
        memcpy(obj + 24, id, CKPT_ID_LEN);
        put64(obj + 40, XXH64(obj, 40, 0));
        ckpt__chunk_decode(ws, obj, CKPT_CHUNK_HDR + pl, id, raw, rl, err);
        ckpt__chunk_view(ws, obj, CKPT_CHUNK_HDR + pl, id, rl, &view, err);
        ckpt__chunk_is_plain(obj, CKPT_CHUNK_HDR + pl, id, rl);
    }
    return 0;
}
