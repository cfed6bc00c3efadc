/* test_codec.c -- chunk encode/decode for every codec and filter, and damage
 * detection for every byte of a chunk object. */
#include "test_util.h"
#include "format/codec.h"

static const ckpt_codec codecs[] = { CKPT_CODEC_NONE, CKPT_CODEC_ZSTD, CKPT_CODEC_LZ4 };
static const unsigned elems[] = { 0, 2, 4 };

static void roundtrip(size_t len, int compressible)
{
    size_t chunk = 1 << 20;
    struct ckpt_codec_ws *ws = ckpt__codec_ws_new(chunk);
    uint8_t *raw = malloc(len + 1), *back = malloc(len + 1), id[CKPT_ID_LEN];
    assert_non_null(ws);
    if (compressible)
        test_fill_weights((float *)raw, len / 4, len);
    else
        for (size_t i = 0; i < len; i++)
            raw[i] = (uint8_t)(i * 2654435761u >> 13);
    if (len % 4)
        memset(raw + len - len % 4, 0x5a, len % 4);
    ckpt__chunk_id(raw, len, id);
    for (size_t c = 0; c < sizeof codecs / sizeof *codecs; c++)
        for (size_t e = 0; e < sizeof elems / sizeof *elems; e++) {
            const void *obj;
            size_t obj_len;
            char err[CKPT_ERR_MAX];
            assert_int_equal(ckpt__chunk_encode(ws, raw, len, id, codecs[c], 1, elems[e], &obj,
                                                &obj_len),
                             CKPT_OK);
            void *copy = malloc(obj_len);
            memcpy(copy, obj, obj_len);
            memset(back, 0, len + 1);
            assert_int_equal(ckpt__chunk_decode(ws, copy, obj_len, id, back, len, err), CKPT_OK);
            assert_memory_equal(raw, back, len);
            free(copy);
        }
    free(raw);
    free(back);
    ckpt__codec_ws_free(ws);
}

static void test_roundtrip_sizes(void **state)
{
    (void)state;
    roundtrip(1, 0);
    roundtrip(7, 1);
    roundtrip(4096, 1);
    roundtrip(65537, 0);
    roundtrip(1 << 20, 1);
}

static void test_bytegroup(void **state)
{
    uint8_t in[103], g[103], out[103];
    (void)state;
    for (unsigned e = 2; e <= 8; e++) {
        for (size_t i = 0; i < sizeof in; i++)
            in[i] = (uint8_t)(i * 7 + e);
        ckpt__bytegroup(in, g, sizeof in, e);
        ckpt__byteungroup(g, out, sizeof in, e);
        assert_memory_equal(in, out, sizeof in);
    }
    /* the vector paths (16 elements at a time) against the definition, with
     * every tail length: plane b holds byte b of each element, in order */
    for (unsigned e = 2; e <= 4; e += 2) {
        for (size_t len = 0; len < 16 * 4 * 3 + 9; len++) {
            uint8_t src[16 * 4 * 3 + 9], grp[sizeof src], back[sizeof src];
            size_t n = len / e;
            for (size_t i = 0; i < len; i++)
                src[i] = (uint8_t)(i * 37 + len * 11 + e);
            ckpt__bytegroup(src, grp, len, e);
            for (size_t i = 0; i < n; i++)
                for (unsigned b = 0; b < e; b++)
                    assert_int_equal(grp[b * n + i], src[i * e + b]);
            assert_memory_equal(grp + n * e, src + n * e, len - n * e);
            ckpt__byteungroup(grp, back, len, e);
            assert_memory_equal(back, src, len);
        }
    }
    /* grouping really groups: byte 1 of every fp16 comes after all byte 0s */
    uint8_t h[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, hg[8];
    ckpt__bytegroup(h, hg, 8, 2);
    uint8_t want[8] = { 1, 3, 5, 7, 2, 4, 6, 8 };
    assert_memory_equal(hg, want, 8);
}

/* Flip each byte of the object in turn: every flip must be caught. */
static void test_every_flip_detected(void **state)
{
    size_t len = 20000;
    struct ckpt_codec_ws *ws = ckpt__codec_ws_new(1 << 20);
    float *raw = malloc(len);
    uint8_t id[CKPT_ID_LEN], *back = malloc(len);
    (void)state;
    test_fill_weights(raw, len / 4, 3);
    ckpt__chunk_id(raw, len, id);
    for (size_t c = 0; c < sizeof codecs / sizeof *codecs; c++) {
        const void *obj;
        size_t obj_len;
        assert_int_equal(ckpt__chunk_encode(ws, raw, len, id, codecs[c], 3, 4, &obj, &obj_len),
                         CKPT_OK);
        uint8_t *copy = malloc(obj_len);
        memcpy(copy, obj, obj_len);
        size_t stride = obj_len > 3000 ? 7 : 1;
        for (size_t i = 0; i < obj_len; i += stride) {
            char err[CKPT_ERR_MAX] = "";
            copy[i] ^= 0x40;
            assert_int_equal(ckpt__chunk_decode(ws, copy, obj_len, id, back, len, err),
                             CKPT_E_CORRUPT);
            assert_true(err[0] != '\0');
            copy[i] ^= 0x40;
        }
        /* truncated and extended objects */
        char err[CKPT_ERR_MAX];
        assert_int_equal(ckpt__chunk_decode(ws, copy, obj_len - 1, id, back, len, err),
                         CKPT_E_CORRUPT);
        assert_int_equal(ckpt__chunk_decode(ws, copy, 10, id, back, len, err), CKPT_E_CORRUPT);
        /* wrong expected id or size */
        uint8_t other[CKPT_ID_LEN];
        memcpy(other, id, sizeof other);
        other[3] ^= 1;
        assert_int_equal(ckpt__chunk_decode(ws, copy, obj_len, other, back, len, err),
                         CKPT_E_CORRUPT);
        assert_int_equal(ckpt__chunk_decode(ws, copy, obj_len, id, back, len - 4, err),
                         CKPT_E_CORRUPT);
        free(copy);
    }
    free(raw);
    free(back);
    ckpt__codec_ws_free(ws);
}

static void test_incompressible_stored_raw(void **state)
{
    size_t len = 1 << 16;
    struct ckpt_codec_ws *ws = ckpt__codec_ws_new(len);
    uint8_t *raw = malloc(len), id[CKPT_ID_LEN];
    uint64_t s = 88172645463325252ull;
    const void *obj;
    size_t obj_len;
    (void)state;
    for (size_t i = 0; i < len; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        raw[i] = (uint8_t)s;
    }
    ckpt__chunk_id(raw, len, id);
    assert_int_equal(ckpt__chunk_encode(ws, raw, len, id, CKPT_CODEC_ZSTD, 1, 0, &obj, &obj_len),
                     CKPT_OK);
    assert_int_equal(obj_len, len + CKPT_CHUNK_HDR);
    assert_int_equal(((const uint8_t *)obj)[5], CKPT_CODEC_NONE);
    free(raw);
    ckpt__codec_ws_free(ws);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_sizes),
        cmocka_unit_test(test_bytegroup),
        cmocka_unit_test(test_every_flip_detected),
        cmocka_unit_test(test_incompressible_stored_raw),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
