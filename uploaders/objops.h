/* objops.h -- the store operations of the object-store core (objops.c):
 * put, get, ranges, head, list, delete, barrier over any dialect
 * (objstore.h), and the ops table a backend declares with them. */
#ifndef CKPT_OBJOPS_H
#define CKPT_OBJOPS_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt_store.h"
#include "objstore.h"

/* The operations: the store ops of every object-store backend, through
 * the dialect of the handle. */
ckpt_status ckpt__obj_put(struct ckpt_store *st, const char *key, const void *buf, size_t len,
                          const struct ckpt_put_opts *opts, char *etag_out, char *err);
ckpt_status ckpt__obj_get(struct ckpt_store *st, const char *key, size_t max_len, unsigned flags,
                          void **buf_out, size_t *len_out, char *etag_out, char *err);
ckpt_status ckpt__obj_get_range(struct ckpt_store *st, const char *key, uint64_t off, size_t len,
                                unsigned flags, void *dst, const struct ckpt_range_watch *watch,
                                char *err);
ckpt_status ckpt__obj_head(struct ckpt_store *st, const char *key, uint64_t *size, char *etag_out,
                           char *err);
ckpt_status ckpt__obj_list(struct ckpt_store *st, const char *prefix, ckpt_list_cb cb, void *user,
                           char *err);
ckpt_status ckpt__obj_del(struct ckpt_store *st, const char *const *keys, size_t n, char *err);
ckpt_status ckpt__obj_barrier(struct ckpt_store *st, char *err);
uint64_t ckpt__obj_sent(struct ckpt_store *st);

#define CKPT_OBJ_OPS(scheme)                                                                       \
    {                                                                                              \
        scheme, ckpt__obj_put, ckpt__obj_get, ckpt__obj_get_range, ckpt__obj_head, ckpt__obj_list, \
            ckpt__obj_del, ckpt__obj_barrier, ckpt__obj_close, ckpt__obj_sent                      \
    }

#endif
