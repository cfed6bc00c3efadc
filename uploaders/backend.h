/*
 * backend.h -- private to uploaders/: the small helpers every backend uses
 * (backend.c; error details are ckpt_common.h's ckpt__seterr), and the
 * backends' constructors, which store.c calls for the
 * URL's scheme.
 */
#ifndef CKPT_BACKEND_H
#define CKPT_BACKEND_H

#include "ckpt_store.h"
#include "ckpt_common.h" /* ckpt__seterr: error details */

/* Validate `key` and return prefix+key, malloc'd, in *out (caller frees).
 * @return CKPT_OK, CKPT_E_INVAL (invalid key, detail in err), CKPT_E_NOMEM. */
ckpt_status ckpt__store_prefixed_key(const char *prefix, const char *key, char **out, char *err);

/* Backend constructors, each in its own file. `cfg` has been completed from
 * the environment and checked by ckpt_store_open. */
ckpt_status ckpt__store_file_open(const char *path, const struct ckpt_store_config *cfg,
                                  struct ckpt_store **out, char *err);
#ifdef CKPT_WITH_S3
ckpt_status ckpt__store_s3_open(const char *url, const struct ckpt_store_config *cfg,
                                struct ckpt_store **out, char *err);
#endif
#ifdef CKPT_WITH_AZURE
ckpt_status ckpt__store_az_open(const char *url, const struct ckpt_store_config *cfg,
                                struct ckpt_store **out, char *err);
#endif

#endif
