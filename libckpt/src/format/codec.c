/* codec.c -- one chunk in, one self-describing chunk object out, and back.
 *
 * The object header carries everything needed to decode it (codec, filter,
 * sizes) and two checksums: XXH64 of the payload (damage is caught before
 * decompression) and the chunk id, XXH3-128 of the raw bytes, checked after
 * decoding (end-to-end). Layout in docs/FORMAT.md. */
#include <lz4.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include "base/xxh.h"
#include <zstd.h>

#include "format/codec.h"
#include "ckpt_common.h"

struct ckpt_codec_ws {
    size_t chunk;
    uint8_t *filt;        /* byte-grouped copy of the input */
    uint8_t *out;         /* header + compressed payload */
    size_t out_cap;
    uint8_t *scratch;     /* one raw chunk, for jobs that need a staging copy */
    void *fetch;          /* reply buffer kept between fetches (buf_new) */
    size_t fetch_cap;
    ZSTD_CCtx *cctx;
    ZSTD_DCtx *dctx;
};

static size_t out_bound(size_t chunk)
{
    size_t z = ZSTD_compressBound(chunk);
    size_t l = (size_t)LZ4_compressBound((int)chunk);
    return CKPT_CHUNK_HDR + (z > l ? z : l);
}

/* A worker's chunk-sized buffers are mapped with huge pages where the
 * kernel has them: an 8 MiB buffer first touched as 4 KiB pages is 2048
 * page faults, and on virtual machines each fault's trap costs more than
 * clearing its page (8 workers' read buffers were 90% of a save's faults).
 * Under ASan and TSan they stay on the heap, where those see overruns and
 * races. A zero length maps one page (mmap refuses zero). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define WS_HEAP 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define WS_HEAP 1
#endif
#endif

static uint8_t *buf_new(size_t len)
{
#ifdef WS_HEAP
    return malloc(len);
#else
    void *p = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, len, MADV_HUGEPAGE);
#endif
    return p;
#endif
}

static void buf_free(uint8_t *p, size_t len)
{
#ifdef WS_HEAP
    (void)len;
    free(p);
#else
    if (p)
        munmap(p, len ? len : 1);
#endif
}

struct ckpt_codec_ws *ckpt__codec_ws_new(size_t chunk_bytes)
{
    struct ckpt_codec_ws *ws = calloc(1, sizeof *ws);
    if (!ws)
        return NULL;
    ws->chunk = chunk_bytes;
    ws->out_cap = out_bound(chunk_bytes);
    ws->filt = buf_new(chunk_bytes);
    ws->out = buf_new(ws->out_cap);
    ws->scratch = buf_new(chunk_bytes);
    ws->cctx = ZSTD_createCCtx();
    ws->dctx = ZSTD_createDCtx();
    if (!ws->filt || !ws->out || !ws->scratch || !ws->cctx || !ws->dctx) {
        ckpt__codec_ws_free(ws);
        return NULL;
    }
    return ws;
}

void ckpt__codec_ws_free(struct ckpt_codec_ws *ws)
{
    if (!ws)
        return;
    buf_free(ws->filt, ws->chunk);
    buf_free(ws->out, ws->out_cap);
    buf_free(ws->scratch, ws->chunk);
    buf_free(ws->fetch, ws->fetch_cap);
    ZSTD_freeCCtx(ws->cctx);
    ZSTD_freeDCtx(ws->dctx);
    free(ws);
}

/* A checkpoint written with a larger chunk size than this process uses (the
 * writer set CKPT_CHUNK_BYTES, the reader did not) is still readable: the
 * buffers grow to the chunk being read, never past CKPT_MAX_CHUNK. */
ckpt_status ckpt__codec_ws_reserve(struct ckpt_codec_ws *ws, size_t chunk_bytes)
{
    uint8_t *filt, *out, *scratch;
    size_t cap;
    if (chunk_bytes <= ws->chunk)
        return CKPT_OK;
    if (chunk_bytes > CKPT_MAX_CHUNK)
        return CKPT_E_INVAL;
    cap = out_bound(chunk_bytes);
    filt = buf_new(chunk_bytes);
    out = buf_new(cap);
    scratch = buf_new(chunk_bytes);
    if (!filt || !out || !scratch) {
        buf_free(filt, chunk_bytes);
        buf_free(out, cap);
        buf_free(scratch, chunk_bytes);
        return CKPT_E_NOMEM;
    }
    buf_free(ws->filt, ws->chunk);
    buf_free(ws->out, ws->out_cap);
    buf_free(ws->scratch, ws->chunk);
    ws->filt = filt;
    ws->out = out;
    ws->scratch = scratch;
    ws->out_cap = cap;
    ws->chunk = chunk_bytes;
    return CKPT_OK;
}

/* One buffer per worker for replies, kept: a fresh 32 MiB malloc per range
 * would be a fresh mapping, and its page faults cost more CPU on virtual
 * machines than the copy into it (buf_new: huge pages). */
uint8_t *ckpt__codec_ws_fetch(struct ckpt_codec_ws *ws, size_t need)
{
    if (need > ws->fetch_cap) {
        size_t cap = (need + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
        uint8_t *p = buf_new(cap);
        if (!p)
            return NULL;
        buf_free(ws->fetch, ws->fetch_cap);
        ws->fetch = p;
        ws->fetch_cap = cap;
    }
    return ws->fetch;
}

uint8_t *ckpt__codec_ws_scratch(struct ckpt_codec_ws *ws, size_t need)
{
    return ckpt__codec_ws_reserve(ws, need) == CKPT_OK ? ws->scratch : NULL;
}

void ckpt__chunk_id(const void *raw, size_t len, uint8_t id[CKPT_ID_LEN])
{
    XXH128_hash_t h = XXH3_128bits(raw, len);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, h);
    memcpy(id, c.digest, CKPT_ID_LEN);
}

#if defined(__SSE2__)
/* Byte grouping 16 elements at a time with SSE2 (every x86-64 has it): the
 * bytes of each 16-bit lane split into its low and high byte (mask, shift)
 * and packed -- once for 2-byte elements, twice for 4-byte ones. The
 * scalar loop below moved ~3 GB/s, a third of a CPU second per GiB saved
 * (the bench's state); this runs at memory speed. @return the elements
 * done; the caller does the rest. */
static size_t group2_sse2(const uint8_t *in, uint8_t *o0, uint8_t *o1, size_t n)
{
    const __m128i lo = _mm_set1_epi16(0x00ff);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i a = _mm_loadu_si128((const __m128i *)(in + 2 * i));
        __m128i b = _mm_loadu_si128((const __m128i *)(in + 2 * i + 16));
        _mm_storeu_si128((__m128i *)(o0 + i),
                         _mm_packus_epi16(_mm_and_si128(a, lo), _mm_and_si128(b, lo)));
        _mm_storeu_si128((__m128i *)(o1 + i),
                         _mm_packus_epi16(_mm_srli_epi16(a, 8), _mm_srli_epi16(b, 8)));
    }
    return i;
}

static size_t group4_sse2(const uint8_t *in, uint8_t *o0, uint8_t *o1, uint8_t *o2, uint8_t *o3,
                          size_t n)
{
    const __m128i lo = _mm_set1_epi16(0x00ff);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i v0 = _mm_loadu_si128((const __m128i *)(in + 4 * i));
        __m128i v1 = _mm_loadu_si128((const __m128i *)(in + 4 * i + 16));
        __m128i v2 = _mm_loadu_si128((const __m128i *)(in + 4 * i + 32));
        __m128i v3 = _mm_loadu_si128((const __m128i *)(in + 4 * i + 48));
        /* bytes 0 and 2 of elements i..i+7 (e01), bytes 1 and 3 (d01) */
        __m128i e01 = _mm_packus_epi16(_mm_and_si128(v0, lo), _mm_and_si128(v1, lo));
        __m128i d01 = _mm_packus_epi16(_mm_srli_epi16(v0, 8), _mm_srli_epi16(v1, 8));
        __m128i e23 = _mm_packus_epi16(_mm_and_si128(v2, lo), _mm_and_si128(v3, lo));
        __m128i d23 = _mm_packus_epi16(_mm_srli_epi16(v2, 8), _mm_srli_epi16(v3, 8));
        _mm_storeu_si128((__m128i *)(o0 + i),
                         _mm_packus_epi16(_mm_and_si128(e01, lo), _mm_and_si128(e23, lo)));
        _mm_storeu_si128((__m128i *)(o2 + i),
                         _mm_packus_epi16(_mm_srli_epi16(e01, 8), _mm_srli_epi16(e23, 8)));
        _mm_storeu_si128((__m128i *)(o1 + i),
                         _mm_packus_epi16(_mm_and_si128(d01, lo), _mm_and_si128(d23, lo)));
        _mm_storeu_si128((__m128i *)(o3 + i),
                         _mm_packus_epi16(_mm_srli_epi16(d01, 8), _mm_srli_epi16(d23, 8)));
    }
    return i;
}

/* The way back, 16 elements at a time: interleave the planes' bytes
 * (unpack), once for 2-byte elements, then the byte pairs for 4-byte ones.
 * The scalar loop below was a quarter of a restore's CPU (ckpt.load of the
 * bench's 1 GiB state). */
static size_t ungroup2_sse2(const uint8_t *i0, const uint8_t *i1, uint8_t *out, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i a = _mm_loadu_si128((const __m128i *)(i0 + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(i1 + i));
        _mm_storeu_si128((__m128i *)(out + 2 * i), _mm_unpacklo_epi8(a, b));
        _mm_storeu_si128((__m128i *)(out + 2 * i + 16), _mm_unpackhi_epi8(a, b));
    }
    return i;
}

static size_t ungroup4_sse2(const uint8_t *i0, const uint8_t *i1, const uint8_t *i2,
                            const uint8_t *i3, uint8_t *out, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i a = _mm_loadu_si128((const __m128i *)(i0 + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(i1 + i));
        __m128i c = _mm_loadu_si128((const __m128i *)(i2 + i));
        __m128i d = _mm_loadu_si128((const __m128i *)(i3 + i));
        /* bytes 0,1 of elements i..i+7 (ab_lo) and i+8..i+15 (ab_hi); 2,3 the same */
        __m128i ab_lo = _mm_unpacklo_epi8(a, b), ab_hi = _mm_unpackhi_epi8(a, b);
        __m128i cd_lo = _mm_unpacklo_epi8(c, d), cd_hi = _mm_unpackhi_epi8(c, d);
        _mm_storeu_si128((__m128i *)(out + 4 * i), _mm_unpacklo_epi16(ab_lo, cd_lo));
        _mm_storeu_si128((__m128i *)(out + 4 * i + 16), _mm_unpackhi_epi16(ab_lo, cd_lo));
        _mm_storeu_si128((__m128i *)(out + 4 * i + 32), _mm_unpacklo_epi16(ab_hi, cd_hi));
        _mm_storeu_si128((__m128i *)(out + 4 * i + 48), _mm_unpackhi_epi16(ab_hi, cd_hi));
    }
    return i;
}
#endif

/* Group the bytes of `elem`-byte elements by significance: all byte 0s, then
 * all byte 1s, ... Exponent bytes of floats are highly repetitive, mantissa
 * low bytes are noise; grouping lets the compressor see the former as runs. */
void ckpt__bytegroup(const uint8_t *in, uint8_t *out, size_t len, unsigned elem)
{
    size_t n = len / elem, i = 0;
    if (elem == 2) {
        uint8_t *o0 = out, *o1 = out + n;
#if defined(__SSE2__)
        i = group2_sse2(in, o0, o1, n);
#endif
        for (; i < n; i++) {
            o0[i] = in[2 * i];
            o1[i] = in[2 * i + 1];
        }
    } else if (elem == 4) {
        uint8_t *o0 = out, *o1 = out + n, *o2 = out + 2 * n, *o3 = out + 3 * n;
#if defined(__SSE2__)
        i = group4_sse2(in, o0, o1, o2, o3, n);
#endif
        for (; i < n; i++) {
            o0[i] = in[4 * i];
            o1[i] = in[4 * i + 1];
            o2[i] = in[4 * i + 2];
            o3[i] = in[4 * i + 3];
        }
    } else {
        for (; i < n; i++)
            for (unsigned b = 0; b < elem; b++)
                out[b * n + i] = in[i * elem + b];
    }
    memcpy(out + n * elem, in + n * elem, len - n * elem);
}

void ckpt__byteungroup(const uint8_t *in, uint8_t *out, size_t len, unsigned elem)
{
    size_t n = len / elem, i = 0;
    if (elem == 2) {
        const uint8_t *i0 = in, *i1 = in + n;
#if defined(__SSE2__)
        i = ungroup2_sse2(i0, i1, out, n);
#endif
        for (; i < n; i++) {
            out[2 * i] = i0[i];
            out[2 * i + 1] = i1[i];
        }
    } else if (elem == 4) {
        const uint8_t *i0 = in, *i1 = in + n, *i2 = in + 2 * n, *i3 = in + 3 * n;
#if defined(__SSE2__)
        i = ungroup4_sse2(i0, i1, i2, i3, out, n);
#endif
        for (; i < n; i++) {
            out[4 * i] = i0[i];
            out[4 * i + 1] = i1[i];
            out[4 * i + 2] = i2[i];
            out[4 * i + 3] = i3[i];
        }
    } else {
        for (; i < n; i++)
            for (unsigned b = 0; b < elem; b++)
                out[i * elem + b] = in[b * n + i];
    }
    memcpy(out + n * elem, in + n * elem, len - n * elem);
}

static void put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void put64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static uint32_t get32(const uint8_t *p) { uint32_t v = 0; for (int i = 3; i >= 0; i--) v = v << 8 | p[i]; return v; }
static uint64_t get64(const uint8_t *p) { uint64_t v = 0; for (int i = 7; i >= 0; i--) v = v << 8 | p[i]; return v; }

/* Compress `len` bytes from src into dst (capacity cap) with codec.
 * @return compressed size, or SIZE_MAX when it did not fit / failed. */
static size_t compress_into(struct ckpt_codec_ws *ws, ckpt_codec codec, int level, uint8_t *dst,
                            size_t cap, const uint8_t *src, size_t len)
{
    if (codec == CKPT_CODEC_ZSTD) {
        size_t r = ZSTD_compressCCtx(ws->cctx, dst, cap, src, len, level ? level : 1);
        return ZSTD_isError(r) ? SIZE_MAX : r;
    }
    if (codec == CKPT_CODEC_LZ4) {
        int r = LZ4_compress_default((const char *)src, (char *)dst, (int)len, (int)cap);
        return r > 0 ? (size_t)r : SIZE_MAX;
    }
    return SIZE_MAX;
}

/* One plane of a byte-grouped chunk: zstd at the level asked for, with
 * its match finder all but off (the smallest hash table, 2^6 entries;
 * matches of 7 bytes at least). A plane of float bytes is one byte position of every
 * element -- sign and exponent, or the high mantissa bits: few distinct
 * values in no repeating order, which the entropy coder packs and short
 * matches only break up. Measured on trained-like fp32 and bf16 weights
 * and Adam moments: the exponent plane 8-10% smaller than at the level's
 * own parameters, compressed 2.5-3x faster (at level 3 and 9 the level's
 * matches make it larger still). Other codecs as they are. */
static size_t compress_plane(struct ckpt_codec_ws *ws, ckpt_codec codec, int level, uint8_t *dst,
                             size_t cap, const uint8_t *src, size_t len)
{
    size_t r;
    if (codec != CKPT_CODEC_ZSTD)
        return compress_into(ws, codec, level, dst, cap, src, len);
    ZSTD_CCtx_reset(ws->cctx, ZSTD_reset_parameters);
    if (ZSTD_isError(
            ZSTD_CCtx_setParameter(ws->cctx, ZSTD_c_compressionLevel, level ? level : 1)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(ws->cctx, ZSTD_c_hashLog, 6)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(ws->cctx, ZSTD_c_minMatch, 7)))
        return compress_into(ws, codec, level, dst, cap, src, len);
    r = ZSTD_compress2(ws->cctx, dst, cap, src, len);
    return ZSTD_isError(r) ? SIZE_MAX : r;
}

/* Byte-grouped payload: one record per plane -- u32 (bit 31: stored raw;
 * bits 0-30: length) then the bytes -- then the len % elem tail bytes raw.
 * Planes are compressed separately: the noise planes (low mantissa bytes)
 * are detected as incompressible and stored raw at memcpy speed, and the
 * compressor's tables are not polluted across planes. */
static size_t encode_planes(struct ckpt_codec_ws *ws, ckpt_codec codec, int level,
                            const uint8_t *grouped, size_t len, unsigned elem, uint8_t *out,
                            size_t cap)
{
    size_t plane = len / elem, o = 0;
    for (unsigned p = 0; p < elem; p++) {
        const uint8_t *src = grouped + (size_t)p * plane;
        size_t c;
        if (o + 4 + plane > cap)
            return SIZE_MAX;
        c = compress_plane(ws, codec, level, out + o + 4, cap - o - 4, src, plane);
        if (c == SIZE_MAX || c >= plane - plane / 64) {
            memcpy(out + o + 4, src, plane);
            put32(out + o, (uint32_t)plane | 0x80000000u);
            o += 4 + plane;
        } else {
            put32(out + o, (uint32_t)c);
            o += 4 + c;
        }
    }
    if (o + (len - plane * elem) > cap)
        return SIZE_MAX;
    memcpy(out + o, grouped + plane * elem, len - plane * elem);
    return o + (len - plane * elem);
}

/* The header goes to ws->out; the payload follows it there, except a raw
 * payload without `copy_raw`: then *payload is the caller's bytes. */
static ckpt_status encode(struct ckpt_codec_ws *ws, const void *raw, size_t len,
                          const uint8_t id[CKPT_ID_LEN], ckpt_codec codec, int level,
                          unsigned elem_size, int copy_raw, const void **payload_out,
                          size_t *plen_out)
{
    uint8_t *hdr = ws->out, *payload = ws->out + CKPT_CHUNK_HDR;
    size_t cap = ws->out_cap - CKPT_CHUNK_HDR, plen;
    int filter = CKPT_FILTER_NONE;

    if (len > ws->chunk || len > UINT32_MAX)
        return CKPT_E_INVAL;
    if (codec != CKPT_CODEC_NONE && (elem_size == 2 || elem_size == 4) && len >= elem_size) {
        ckpt__bytegroup(raw, ws->filt, len, elem_size);
        filter = CKPT_FILTER_BYTEGROUP;
        plen = encode_planes(ws, codec, level, ws->filt, len, elem_size, payload, cap);
    } else {
        plen = compress_into(ws, codec, level, payload, cap, raw, len);
    }
    /* Store raw when compression saves less than 1/64: decoding raw is a
     * memcpy, so marginal gains are not worth the restore time. */
    if (plen == SIZE_MAX || plen >= len - len / 64) {
        codec = CKPT_CODEC_NONE;
        filter = CKPT_FILTER_NONE;
        if (copy_raw)
            memcpy(payload, raw, len);
        else
            payload = (uint8_t *)raw; /* only read from here on */
        plen = len;
    }
    memcpy(hdr, CKPT_CHUNK_MAGIC, 4);
    hdr[4] = CKPT_CHUNK_VERSION;
    hdr[5] = (uint8_t)codec;
    hdr[6] = (uint8_t)filter;
    hdr[7] = (uint8_t)(filter ? elem_size : 0);
    put32(hdr + 8, (uint32_t)len);
    put32(hdr + 12, (uint32_t)plen);
    put64(hdr + 16, XXH64(payload, plen, 0));
    memcpy(hdr + 24, id, CKPT_ID_LEN);
    put64(hdr + 40, XXH64(hdr, 40, 0));
    *payload_out = payload;
    *plen_out = plen;
    return CKPT_OK;
}

ckpt_status ckpt__chunk_encode(struct ckpt_codec_ws *ws, const void *raw, size_t len,
                               const uint8_t id[CKPT_ID_LEN], ckpt_codec codec, int level,
                               unsigned elem_size, const void **obj, size_t *obj_len)
{
    const void *payload;
    size_t plen;
    ckpt_status st = encode(ws, raw, len, id, codec, level, elem_size, 1, &payload, &plen);
    if (st == CKPT_OK) {
        *obj = ws->out;
        *obj_len = CKPT_CHUNK_HDR + plen;
    }
    return st;
}

ckpt_status ckpt__chunk_encode_parts(struct ckpt_codec_ws *ws, const void *raw, size_t len,
                                     const uint8_t id[CKPT_ID_LEN], ckpt_codec codec,
                                     int level, unsigned elem_size, const void **hdr,
                                     const void **payload, size_t *plen)
{
    ckpt_status st = encode(ws, raw, len, id, codec, level, elem_size, 0, payload, plen);
    if (st == CKPT_OK)
        *hdr = ws->out;
    return st;
}

static int decompress_into(struct ckpt_codec_ws *ws, unsigned codec, uint8_t *dst, size_t n,
                           const uint8_t *src, size_t len, char *err)
{
    if (codec == CKPT_CODEC_ZSTD) {
        size_t r = ZSTD_decompressDCtx(ws->dctx, dst, n, src, len);
        if (ZSTD_isError(r) || r != n) {
            ckpt__seterr(err, "zstd: %s", ZSTD_isError(r) ? ZSTD_getErrorName(r) : "short");
            return -1;
        }
    } else if (codec == CKPT_CODEC_LZ4) {
        int r = LZ4_decompress_safe((const char *)src, (char *)dst, (int)len, (int)n);
        if (r < 0 || (size_t)r != n) {
            ckpt__seterr(err, "lz4: malformed payload");
            return -1;
        }
    } else {
        if (len != n) {
            ckpt__seterr(err, "raw payload of %zu bytes, expected %zu", len, n);
            return -1;
        }
        memcpy(dst, src, n);
    }
    return 0;
}

static int decode_planes(struct ckpt_codec_ws *ws, unsigned codec, const uint8_t *payload,
                         size_t pl, uint8_t *grouped, size_t n, unsigned elem, char *err)
{
    size_t plane = n / elem, o = 0, tail = n - plane * elem;
    for (unsigned p = 0; p < elem; p++) {
        uint32_t rec;
        size_t l;
        if (o + 4 > pl) {
            ckpt__seterr(err, "plane %u header beyond the payload", p);
            return -1;
        }
        rec = get32(payload + o);
        l = rec & 0x7fffffffu;
        o += 4;
        if (l > pl - o) {
            ckpt__seterr(err, "plane %u of %zu bytes beyond the payload", p, l);
            return -1;
        }
        if (decompress_into(ws, (rec & 0x80000000u) ? CKPT_CODEC_NONE : codec,
                            grouped + (size_t)p * plane, plane, payload + o, l, err))
            return -1;
        o += l;
    }
    if (pl - o != tail) {
        ckpt__seterr(err, "payload has %zu trailing bytes, expected %zu", pl - o, tail);
        return -1;
    }
    memcpy(grouped + plane * elem, payload + o, tail);
    return 0;
}

/* The last check of every read: the XXH3-128 of the bytes is the id. */
static int content_check(const void *raw, size_t len, const uint8_t id[CKPT_ID_LEN], char *err)
{
    uint8_t got[CKPT_ID_LEN];
    char a[CKPT_ID_HEX + 1], b[CKPT_ID_HEX + 1];
    ckpt__chunk_id(raw, len, got);
    if (memcmp(got, id, CKPT_ID_LEN) == 0)
        return 0;
    ckpt__hex(id, CKPT_ID_LEN, a);
    ckpt__hex(got, CKPT_ID_LEN, b);
    ckpt__seterr(err, "content hash mismatch: expected %s, found %s", a, b);
    return -1;
}

struct chunk_hdr {
    unsigned codec, filter, elem;
    uint32_t rl, pl;          /* raw and payload lengths */
};

/* Check a chunk object's header against what the manifest says of it, and
 * read its fields into *o. */
static ckpt_status chunk_header(const uint8_t *h, size_t obj_len, const uint8_t id[CKPT_ID_LEN],
                                size_t raw_len, struct chunk_hdr *o, char *err)
{
    char a[CKPT_ID_HEX + 1], b[CKPT_ID_HEX + 1];

    if (obj_len < CKPT_CHUNK_HDR || memcmp(h, CKPT_CHUNK_MAGIC, 4) != 0) {
        ckpt__seterr(err, "not a chunk object (%zu bytes, bad magic)", obj_len);
        return CKPT_E_CORRUPT;
    }
    if (get64(h + 40) != XXH64(h, 40, 0)) {
        ckpt__seterr(err, "chunk header checksum mismatch");
        return CKPT_E_CORRUPT;
    }
    *o = (struct chunk_hdr){ h[5], h[6], h[7], get32(h + 8), get32(h + 12) };
    if (h[4] != CKPT_CHUNK_VERSION || !ckpt__codec_spec((ckpt_codec)o->codec) ||
        o->filter > CKPT_FILTER_BYTEGROUP || (o->filter && o->elem != 2 && o->elem != 4)) {
        ckpt__seterr(err, "chunk header names unknown version/codec/filter (%u/%u/%u)",
                     h[4], o->codec, o->filter);
        return CKPT_E_CORRUPT;
    }
    if (o->rl != raw_len || (size_t)o->pl != obj_len - CKPT_CHUNK_HDR || o->rl > CKPT_MAX_CHUNK ||
        (o->codec == CKPT_CODEC_NONE && o->pl != o->rl)) {
        ckpt__seterr(err, "chunk sizes wrong: raw %u (expected %zu), payload %u of %zu",
                     o->rl, raw_len, o->pl, obj_len - CKPT_CHUNK_HDR);
        return CKPT_E_CORRUPT;
    }
    if (memcmp(h + 24, id, CKPT_ID_LEN) != 0) {
        ckpt__hex(id, CKPT_ID_LEN, a);
        ckpt__hex(h + 24, CKPT_ID_LEN, b);
        ckpt__seterr(err, "chunk object names id %s, expected %s", b, a);
        return CKPT_E_CORRUPT;
    }
    return CKPT_OK;
}

int ckpt__chunk_is_plain(const void *hdr, size_t obj_len, const uint8_t id[CKPT_ID_LEN],
                         size_t raw_len)
{
    struct chunk_hdr o = { 0 };
    return chunk_header(hdr, obj_len, id, raw_len, &o, NULL) == CKPT_OK &&
           o.codec == CKPT_CODEC_NONE && o.filter == 0;
}

/* With `view`: a raw chunk is not copied, *view points at its payload
 * (checked by its content hash, which covers exactly those bytes); any
 * other is decoded into the workspace's scratch and *view points there. */
static ckpt_status chunk_decode(struct ckpt_codec_ws *ws, const void *obj, size_t obj_len,
                                const uint8_t id[CKPT_ID_LEN], void *raw, size_t raw_len,
                                const uint8_t **view, char *err)
{
    const uint8_t *h = obj, *payload;
    struct chunk_hdr o = { 0 };
    ckpt_status st = chunk_header(h, obj_len, id, raw_len, &o, err);
    uint32_t rl = o.rl, pl = o.pl;
    unsigned codec = o.codec, filter = o.filter, elem = o.elem;

    if (st)
        return st;
    if (ckpt__codec_ws_reserve(ws, rl) != CKPT_OK) {
        ckpt__seterr(err, "no memory for a %u-byte chunk", rl);
        return CKPT_E_NOMEM;
    }
    payload = h + CKPT_CHUNK_HDR;
    if (view && codec == CKPT_CODEC_NONE && !filter) {
        if (content_check(payload, rl, id, err))
            return CKPT_E_CORRUPT;
        *view = payload;
        return CKPT_OK;
    }
    if (view) {
        raw = ckpt__codec_ws_scratch(ws, rl);
        if (!raw) {
            ckpt__seterr(err, "no memory for a %u-byte chunk", rl);
            return CKPT_E_NOMEM;
        }
        *view = raw;
    }
    if (get64(h + 16) != XXH64(payload, pl, 0)) {
        ckpt__seterr(err, "chunk payload checksum mismatch");
        return CKPT_E_CORRUPT;
    }
    if (filter) {
        if (decode_planes(ws, codec, payload, pl, ws->filt, rl, elem, err))
            return CKPT_E_CORRUPT;
        ckpt__byteungroup(ws->filt, raw, rl, elem);
    } else if (decompress_into(ws, codec, raw, rl, payload, pl, err)) {
        return CKPT_E_CORRUPT;
    }
    return content_check(raw, rl, id, err) ? CKPT_E_CORRUPT : CKPT_OK;
}

ckpt_status ckpt__chunk_decode(struct ckpt_codec_ws *ws, const void *obj, size_t obj_len,
                               const uint8_t id[CKPT_ID_LEN], void *raw, size_t raw_len,
                               char *err)
{
    return chunk_decode(ws, obj, obj_len, id, raw, raw_len, NULL, err);
}

ckpt_status ckpt__chunk_view(struct ckpt_codec_ws *ws, const void *obj, size_t obj_len,
                             const uint8_t id[CKPT_ID_LEN], size_t raw_len,
                             const uint8_t **view, char *err)
{
    return chunk_decode(ws, obj, obj_len, id, NULL, raw_len, view, err);
}

