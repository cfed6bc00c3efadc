/* xxh.h -- xxHash for the chunk hashes (XXH3-128), at the widest vector
 * width this CPU has. libxxhash's plain XXH3 is compiled for the baseline
 * of its architecture (SSE2 on x86-64: about 15 GB/s here); its x86 build
 * also exports XXH3 variants that pick SSE2, AVX2 or AVX-512 at run time
 * (xxh_x86dispatch.h: about 42 GB/s here), and this header makes XXH3_*
 * calls use them where the build found them (CKPT_HAVE_XXH_DISPATCH).
 * The hashes are the same either way: only the speed differs. */
#ifndef CKPT_XXH_H
#define CKPT_XXH_H

#include <xxhash.h>
#ifdef CKPT_HAVE_XXH_DISPATCH
#include <xxh_x86dispatch.h>
#endif

#endif
