/* codecspec.c -- the codecs of CKPT_CODEC_MAP and their specs as users
 * write them (ckpt_common.h). */
#include <string.h>

#include "ckpt_common.h"

/* Every row names a public value, and never the "default" placeholder. */
#define CHECK_(name, ID, lv, lo, hi, dflt, speed)                                 \
    _Static_assert(CKPT_CODEC_##ID != CKPT_CODEC_DEFAULT, #name ": not a codec"); \
    _Static_assert((lo) <= (dflt) && (dflt) <= (hi), #name ": default out of range");
CKPT_CODEC_MAP(CHECK_)
#undef CHECK_

#define HAS_LEVELS_LEVELS 1
#define HAS_LEVELS_FIXED 0
#define ROW_(name, ID, lv, lo, hi, dflt, speed) \
    { #name, CKPT_CODEC_##ID, HAS_LEVELS_##lv, lo, hi, dflt, CKPT_SPEED_##speed },
static const struct ckpt__codec_spec codecs[] = { CKPT_CODEC_MAP(ROW_) };
#undef ROW_
#define NCODECS (sizeof codecs / sizeof codecs[0])

const struct ckpt__codec_spec *ckpt__codec_at(size_t i)
{
    return i < NCODECS ? &codecs[i] : NULL;
}

const struct ckpt__codec_spec *ckpt__codec_spec(ckpt_codec codec)
{
    for (size_t i = 0; i < NCODECS; i++)
        if (codecs[i].id == codec)
            return &codecs[i];
    return NULL;
}

const struct ckpt__codec_spec *ckpt__codec_of_speed(enum ckpt_codec_speed speed)
{
    for (size_t i = 0; i < NCODECS; i++)
        if (codecs[i].speed == speed)
            return &codecs[i];
    return NULL;
}

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

int ckpt__parse_codec(const char *s, ckpt_codec *codec, int *level)
{
    for (size_t i = 0; s && i < NCODECS; i++) {
        const struct ckpt__codec_spec *c = &codecs[i];
        size_t n = strlen(c->name);
        long l = 0;
        if (strncmp(s, c->name, n) != 0)
            continue;
        if (s[n] == ':' && c->has_levels) {
            if (small_int(s + n + 1, c->level_min, c->level_max, &l) != 0)
                return -1;
        } else if (s[n] != '\0') {
            continue;
        }
        *codec = c->id;
        *level = (int)l;
        return 0;
    }
    return -1;
}

const char *ckpt__codec_name(ckpt_codec codec)
{
    const struct ckpt__codec_spec *c = ckpt__codec_spec(codec);
    return c ? c->name : codec == CKPT_CODEC_DEFAULT ? "default" : "?";
}
