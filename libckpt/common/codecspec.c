/* codecspec.c -- codec specs as users write them (ckpt_common.h). */
#include <string.h>

#include "ckpt_common.h"

/* Whole-string decimal in [lo, hi]. */
static int small_int(const char *s, long lo, long hi, long *out)
{
    long v = 0;
    if (!*s)
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > hi)
            return -1;
        v = v * 10 + (*s - '0');
    }
    if (v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int ckpt_parse_codec(const char *s, ckpt_codec *codec, int *level)
{
    long l = 0;
    int rc = -1;

    if (!s)
        goto out;
    if (!strcmp(s, "none")) {
        *codec = CKPT_CODEC_NONE;
    } else if (!strcmp(s, "lz4")) {
        *codec = CKPT_CODEC_LZ4;
    } else if (!strcmp(s, "zstd")) {
        *codec = CKPT_CODEC_ZSTD;
    } else if (!strncmp(s, "zstd:", 5)) {
        if (small_int(s + 5, CKPT_ZSTD_LEVEL_MIN, CKPT_ZSTD_LEVEL_MAX, &l) != 0)
            goto out;
        *codec = CKPT_CODEC_ZSTD;
    } else {
        goto out;
    }
    *level = (int)l;
    rc = 0;
out:
    return rc;
}


const char *ckpt_codec_name(ckpt_codec codec)
{
    switch (codec) {
    case CKPT_CODEC_NONE: return "none";
    case CKPT_CODEC_LZ4: return "lz4";
    case CKPT_CODEC_ZSTD: return "zstd";
    case CKPT_CODEC_DEFAULT: return "default";
    default: return "?";
    }
}
