/* fuzz_chunk.c -- chunk objects come from the store: hostile. */
#include <stdlib.h>
#include <string.h>
#include "format/codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct ckpt_codec_ws *ws;
    static uint8_t *raw;
    uint8_t id[CKPT_ID_LEN];
    char err[CKPT_ERR_MAX];
    if (!ws) {
        ws = ckpt__codec_ws_new(1 << 20);
        raw = malloc(1 << 20);
    }
    if (size < CKPT_CHUNK_HDR)
        return 0;
    /* take the id and size the object claims, as a manifest would */
    memcpy(id, data + 24, CKPT_ID_LEN);
    uint32_t rl = (uint32_t)data[8] | (uint32_t)data[9] << 8 | (uint32_t)data[10] << 16 |
                  (uint32_t)data[11] << 24;
    if (rl > (1u << 20))
        rl = 1u << 20;
    ckpt__chunk_decode(ws, data, size, id, raw, rl, err);
    return 0;
}
