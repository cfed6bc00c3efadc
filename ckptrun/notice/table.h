/* notice/table.h -- the provider table's names and DMI detection (notice/table.c). */
#ifndef CKPTRUN_NOTICE_TABLE_H
#define CKPTRUN_NOTICE_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "notice/int.h"

/* The provider name as a static string ("aws", ..., "none"), NULL when
 * unknown. */
const char *notice_provider_name(const char *name);
/* The provider DMI names ("none" when none): `dir` is /sys/class/dmi/id or
 * a test's; `how` (may be NULL) receives which DMI string decided. */
const char *notice_detect(const char *dir, ckpt_log_fn log_fn, void *log_user, char *how,
                          size_t how_cap);

#endif
