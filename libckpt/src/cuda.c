/* cuda.c -- device regions. Until device support lands (see docs/FORMAT.md,
 * item kind "device"), every device call reports CKPT_E_UNSUPPORTED and host
 * paths are unaffected. */
#include <stdio.h>

#include "internal.h"

int ckpt__cuda_available(char *err)
{
    ckpt__seterr(err, "CUDA device regions are unsupported in this build");
    return 0;
}

ckpt_status ckpt__cuda_d2h(void *host, const void *dev, size_t len, int sync, char *err)
{
    (void)host; (void)dev; (void)len; (void)sync;
    ckpt__seterr(err, "CUDA device regions are unsupported in this build");
    return CKPT_E_UNSUPPORTED;
}

ckpt_status ckpt__cuda_h2d(void *dev, const void *host, size_t len, char *err)
{
    (void)host; (void)dev; (void)len;
    ckpt__seterr(err, "CUDA device regions are unsupported in this build");
    return CKPT_E_UNSUPPORTED;
}
