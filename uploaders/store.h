/*
 * store.h -- the store interface: a flat key/value object store.
 *
 * Backends move bytes and know nothing of checkpoints. Keys are relative to
 * the store URL's prefix ("run/chunks/ab/abcd..."), made of [A-Za-z0-9._-/],
 * never starting with '/' and never containing "..". Every backend behaves the
 * same to the layers above; the contract of each operation is below.
 *
 * Thread safety: every operation may be called concurrently from several
 * threads on the same store handle (backends serialize internally where they
 * must). open/close are not concurrent with anything else.
 *
 * Errors are ckpt_status values (ckpt.h); the detail (path, errno, HTTP status,
 * S3/Azure error code) is written into the caller's `err` buffer when given.
 * Backends retry transient failures themselves (see retry.h); a status that
 * comes out of a backend is final for that call.
 */
#ifndef CKPT_STORE_H
#define CKPT_STORE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include "ckpt.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CKPT_ETAG_MAX 128  /* bytes, including NUL */
#define CKPT_ERR_MAX 512   /* size of error detail buffers */

typedef enum {
    CKPT_PUT_PLAIN = 0,        /* create or overwrite */
    CKPT_PUT_IF_NONE_MATCH = 1,/* create only: CKPT_E_PRECONDITION if it exists */
    CKPT_PUT_IF_MATCH = 2      /* replace only if current etag == if_match:
                                  CKPT_E_PRECONDITION on mismatch,
                                  CKPT_E_NOENT if missing */
} ckpt_put_cond;

struct ckpt_put_opts {
    ckpt_put_cond cond;
    const char *if_match;      /* etag for CKPT_PUT_IF_MATCH */
    int deferred;              /* 1: durability may wait for barrier() */
};

struct ckpt_obj_info {
    const char *key;           /* relative key */
    uint64_t size;
    int64_t mtime_ms;          /* last modification, Unix ms (0 if unknown) */
};
/* Listing callback; return nonzero to stop the listing early. */
typedef int (*ckpt_list_cb)(void *user, const struct ckpt_obj_info *obj);

struct ckpt_store;

/* get() flags. Object stores check a GET body against the digest the server
 * reports (an MD5 ETag, Azure's Content-MD5) and retry a damaged transfer.
 * SELF_CHECKED: the caller verifies the bytes itself (chunk objects carry
 * XXH64 and XXH3-128 checksums and are fetched again on a mismatch), so the
 * store skips that digest, the largest CPU cost of a download. */
enum { CKPT_GET_SELF_CHECKED = 1u << 0 };

/* Streaming a range: a store that receives it piece by piece calls fn on
 * the caller's thread, during get_range, with the number of bytes of `dst`
 * in place so far; `have` is 0 when a transfer starts (or starts over after
 * a failed attempt, and then sends the same bytes again). fn returns the
 * count at which it wants its next call (0: no more calls). Bytes shown to
 * fn came in a 2xx reply but are otherwise unchecked: the caller checks
 * them (a chunk checks itself). A store may also never call it. */
struct ckpt_range_watch {
    size_t (*fn)(void *arg, size_t have);
    void *arg;
};

struct ckpt_store_ops {
    const char *scheme;        /* "file", "s3", "gs", "az" */
    /* Write `len` bytes at `key`, durably on return (unless opts->deferred).
     * The object appears whole or not at all. `etag_out` (CKPT_ETAG_MAX bytes,
     * may be NULL) receives the new etag. */
    ckpt_status (*put)(struct ckpt_store *, const char *key, const void *buf,
                       size_t len, const struct ckpt_put_opts *opts,
                       char *etag_out, char *err);
    /* Read a whole object into a malloc'd buffer (caller frees) of at most
     * `max_len` bytes (CKPT_E_CORRUPT if larger). CKPT_E_NOENT if missing.
     * `flags`: CKPT_GET_* below. */
    ckpt_status (*get)(struct ckpt_store *, const char *key, size_t max_len,
                       unsigned flags, void **buf_out, size_t *len_out,
                       char *etag_out, char *err);
    /* Read exactly `len` (> 0) bytes at offset `off` of an object into
     * `dst` (at least len + 1 bytes; the caller's, so a reader reuses one
     * buffer): one pack's chunks. CKPT_E_NOENT if the object is missing,
     * CKPT_E_CORRUPT if it is shorter than off + len or the store answers
     * with another number of bytes. `watch` (may be NULL) lets the caller
     * use the first bytes while the rest arrive (see ckpt_range_watch). */
    ckpt_status (*get_range)(struct ckpt_store *, const char *key, uint64_t off,
                             size_t len, unsigned flags, void *dst,
                             const struct ckpt_range_watch *watch, char *err);
    /* Size and etag of an object; CKPT_E_NOENT if missing. */
    ckpt_status (*head)(struct ckpt_store *, const char *key, uint64_t *size,
                        char *etag_out, char *err);
    /* Every object whose key starts with `prefix`, in no particular order,
     * across all pages. */
    ckpt_status (*list)(struct ckpt_store *, const char *prefix, ckpt_list_cb cb,
                        void *user, char *err);
    /* Delete keys (missing ones are not an error). Batched where the store
     * can. */
    ckpt_status (*del)(struct ckpt_store *, const char *const *keys, size_t n,
                       char *err);
    /* Make every earlier deferred put durable. */
    ckpt_status (*barrier)(struct ckpt_store *, char *err);
    /* 1 when conditional puts are enforced by the store itself. */
    int (*has_conditional)(struct ckpt_store *);
    void (*close)(struct ckpt_store *);
};

/* The common head of every backend's handle. */
struct ckpt_store {
    const struct ckpt_store_ops *ops;
    char *url;                 /* as given, without credentials */
    /* Where the backend found its credentials, for diagnostics (`ckptrun
     * doctor`): e.g. "environment (AWS_ACCESS_KEY_ID)", "profile 'x' in
     * /home/u/.aws/credentials", "instance role 'r' (IMDSv2)", "connection
     * string (AZURE_STORAGE_CONNECTION_STRING, account key)". Never holds key
     * material. "" when the store needs none (file://). Set at open. */
    char cred_source[256];
    /* The endpoint requests go to ("http://127.0.0.1:9000", "https://
     * s3.eu-west-1.amazonaws.com"), without credentials; "" for file://. */
    char endpoint[256];
};

/* Options for opening a store (all optional). Zero/NULL fields come from the
 * environment, then defaults: CKPT_CONNECTIONS, CKPT_MAX_RATE (bytes/s, "50M"),
 * CKPT_S3_STORAGE_CLASS, CKPT_S3_SSE (AES256 | aws:kms), CKPT_S3_SSE_KMS_KEY_ID
 * (implies aws:kms). Checked at open: CKPT_E_CONFIG with the reason (GLACIER
 * and DEEP_ARCHIVE are refused: their objects cannot be read back at once). */
struct ckpt_store_config {
    unsigned connections;      /* parallel connections for object stores (0 = 16) */
    uint64_t max_rate_bps;     /* upload rate cap, bytes/s (0 = none) */
    const char *storage_class; /* S3 storage class */
    const char *sse;           /* "AES256" or "aws:kms" */
    const char *sse_kms_key_id;
    ckpt_log_fn log_fn;
    void *log_user;
    ckpt_log_level log_level;
    /* How long one request may keep retrying, in ms (0 = CKPT_RETRY_BUDGET_MS,
     * else 120000). At least 6 attempts are made whatever the budget. */
    uint64_t retry_budget_ms;
};

/* Sizes and rates as users write them: "50M", "1.5G", "800k", "1048576"
 * (K/M/G/T = 1024^n, also KiB..; kB/MB/GB/TB = 1000^n: libckpt/src/rules.h).
 * @return bytes, 0 if invalid. */
uint64_t ckpt_store_parse_size(const char *s);

/* Open the store named by `url` (file:///abs, s3://bucket/prefix,
 * gs://bucket/prefix, az://container/prefix). `url` NULL or "" = the default
 * file store. @return CKPT_OK, CKPT_E_CONFIG (bad URL, unknown scheme),
 * CKPT_E_UNSUPPORTED (scheme compiled out), CKPT_E_AUTH, CKPT_E_IO. */
ckpt_status ckpt_store_open(const char *url, const struct ckpt_store_config *cfg,
                            struct ckpt_store **out, char *err);
void ckpt_store_close(struct ckpt_store *st);
/* Where a store opened without a log callback reports what its user must
 * know once per process (a plain-http endpoint off this machine). Set once
 * at start, before any store is opened (not thread-safe). */
void ckpt_store_set_notice_log(ckpt_log_fn fn, void *user);

/* The default store URL: file://$XDG_DATA_HOME/ckpt or ~/.local/share/ckpt.
 * Writes into buf; @return buf or NULL if it does not fit / no HOME. */
char *ckpt_store_default_url(char *buf, size_t len);

/* Convenience wrappers (NULL-safe for err/etag). */
static inline ckpt_status ckpt_store_put(struct ckpt_store *st, const char *key,
                                         const void *buf, size_t len,
                                         const struct ckpt_put_opts *o,
                                         char *etag, char *err)
{
    static const struct ckpt_put_opts plain = { CKPT_PUT_PLAIN, NULL, 0 };
    return st->ops->put(st, key, buf, len, o ? o : &plain, etag, err);
}
static inline ckpt_status ckpt_store_get(struct ckpt_store *st, const char *key,
                                         size_t max_len, void **buf, size_t *len,
                                         char *etag, char *err)
{
    return st->ops->get(st, key, max_len, 0, buf, len, etag, err);
}

/* Key validation shared by backends: [A-Za-z0-9._-/], no "..", no "//",
 * no leading '/'. @return 1 if valid. */
int ckpt_key_valid(const char *key);
/* A relative '/'-separated path of at most `max` bytes of [A-Za-z0-9._-]
 * plus the characters in `extra`, without empty, "." or ".." segments. */
int ckpt_path_valid(const char *p, size_t max, const char *extra);
/* Validate `key` and return prefix+key, malloc'd, in *out (caller frees).
 * @return CKPT_OK, CKPT_E_INVAL (invalid key, detail in err), CKPT_E_NOMEM. */
ckpt_status ckpt_store_prefixed_key(const char *prefix, const char *key, char **out, char *err);

/* Backend constructors (each in its own file). */
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

#ifdef __cplusplus
}
#endif
/* pthread_create with every signal blocked in the new thread (restored in
 * the caller's): a library's threads must not take signals the application
 * (or ckptrun's signalfd) waits for. @return 0 or an errno value. */
int ckpt_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

#endif
