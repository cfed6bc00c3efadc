/*
 * backend.h -- private to uploaders/: the small helpers every backend uses
 * (backend.c), and the backends' constructors, which store.c calls for the
 * URL's scheme.
 */
#ifndef CKPT_BACKEND_H
#define CKPT_BACKEND_H

#include "ckpt_store.h"

/* Validate `key` and return prefix+key, malloc'd, in *out (caller frees).
 * @return CKPT_OK, CKPT_E_INVAL (invalid key, detail in err), CKPT_E_NOMEM. */
ckpt_status ckpt_store_prefixed_key(const char *prefix, const char *key, char **out, char *err);

/* printf into an error detail buffer of CKPT_ERR_MAX bytes (err may be
 * NULL: nothing is written). */
void ckpt_store_err(char *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Backend constructors, each in its own file. `cfg` has been completed from
 * the environment and checked by ckpt_store_open. */
ckpt_status ckpt_store_file_open(const char *path, const struct ckpt_store_config *cfg,
                                 struct ckpt_store **out, char *err);
#ifdef CKPT_WITH_S3
ckpt_status ckpt_store_s3_open(const char *url, const struct ckpt_store_config *cfg,
                               struct ckpt_store **out, char *err);
#endif
#ifdef CKPT_WITH_AZURE
ckpt_status ckpt_store_az_open(const char *url, const struct ckpt_store_config *cfg,
                               struct ckpt_store **out, char *err);
#endif

#endif
