/* notice/table.h -- the provider table's names and DMI detection (notice/table.c): the words
 * --notice takes, the providers, their hints for doctor. */
#ifndef CKPTRUN_NOTICE_TABLE_H
#define CKPTRUN_NOTICE_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "notice/types.h"

struct notice_dmi;
struct notice_provider;

/* The provider name as a static string ("aws", ..., "none"), NULL when
 * unknown. */
const char *notice_provider_name(const char *name);
/* The provider DMI names ("none" when none): `dir` is /sys/class/dmi/id or
 * a test's; `how` (may be NULL) receives which DMI string decided. */
const char *notice_detect(const char *dir, ckpt_log_fn log_fn, void *log_user, char *how,
                          size_t how_cap);

/* Every provider, in NOTICE_PROVIDER_LIST's order, NULL-terminated. */
extern const struct notice_provider *const notice_providers[];
/* @return the provider named `name`, or NULL ("none", "auto", unknown). */
const struct notice_provider *notice_provider_find(const char *name);
/* Reads the DMI strings of `dir` (/sys/class/dmi/id or a test's). */
void notice_dmi_read(const char *dir, struct notice_dmi *d);

/* 1 when `mode` is what --notice takes: a word of NOTICE_MODES. */
int notice_mode_valid(const char *mode);
/* @return the hints of the provider named `provider`, NULL for "none" or
 * an unknown name. */
const struct notice_hints *notice_hints(const char *provider);

#endif
