/*
 * ckpt_store.h -- the ckpt object store: a flat key/value store behind one
 * small interface, with a file://, an S3-compatible (s3://, gs://) and an
 * Azure Blob (az://) backend.
 *
 * Introduction
 * ------------
 * A store is opened from a URL (ckpt_store_open) and used through the
 * function table of its handle (`st->ops`): put, get, get_range, head,
 * list, del, barrier, close, and the optional byte counter sent. Backends move bytes and know nothing of
 * checkpoints. Keys are relative to the URL's prefix ("run/chunks/ab/abcd"),
 * made of [A-Za-z0-9._-/], never starting with '/' and never containing
 * ".." (ckpt_key_valid). Every backend behaves the same to the layers above;
 * the contract of each operation is written next to it below. What a store
 * can do beyond that contract (enforce conditional writes, serve ranges,
 * prefer large requests) it declares in `st->caps` when it opens, so callers
 * choose their policy from the capabilities, never from the URL's scheme.
 *
 * Errors are ckpt_status values (ckpt.h); the detail (path, errno, HTTP
 * status, S3/Azure error code) is written into the caller's `err` buffer
 * (CKPT_ERR_MAX bytes) when one is given. Object-store backends retry
 * transient failures themselves (exponential backoff with jitter within a
 * time budget, docs/stores.md "Retries"): a status that comes out of a
 * backend is final for that call.
 *
 * Thread safety: every operation may be called concurrently from several
 * threads on the same handle (backends serialize internally where they
 * must). ckpt_store_open is thread-safe; ckpt_store_close is not concurrent
 * with any other use of its handle. The process-wide settings
 * (ckpt_store_set_notice_log, ckpt_retry_set_observer) are made once at
 * start; ckpt_retry_set_deadline may be called from any thread at any time.
 *
 * Ownership: whoever allocates frees. A buffer a store returns (get) is the
 * caller's, freed with free(); every pointer the caller passes in is only
 * read during the call unless said otherwise.
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
    const char *key;           /* relative key (valid during the callback only) */
    uint64_t size;
    int64_t mtime_ms;          /* last modification, Unix ms (0 if unknown) */
};
/* Listing callback, called on the listing thread; return nonzero to stop
 * the listing early. */
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

/* The backend's function table. Every function takes the handle first and
 * may be called from any thread (see "Thread safety" above). */
struct ckpt_store_ops {
    const char *scheme;        /* "file", "s3", "gs", "az": for messages */
    /* Write `len` bytes at `key`, durably on return (unless opts->deferred).
     * The object appears whole or not at all. `etag_out` (CKPT_ETAG_MAX bytes,
     * may be NULL) receives the new etag. Conditional puts are enforced only
     * where caps has CKPT_STORE_CONDITIONAL. */
    ckpt_status (*put)(struct ckpt_store *, const char *key, const void *buf,
                       size_t len, const struct ckpt_put_opts *opts,
                       char *etag_out, char *err);
    /* Read a whole object into a malloc'd buffer (caller frees, NUL-terminated
     * one byte past the length) of at most `max_len` bytes (CKPT_E_CORRUPT if
     * larger). CKPT_E_NOENT if missing. `flags`: CKPT_GET_* above. */
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
    /* Release the handle (NULL-safe); nothing may use it any more. */
    void (*close)(struct ckpt_store *);
    /* Since 0.4.0 (optional: NULL when the backend cannot tell; a table
     * only grows at its end). The bytes this handle has sent so far,
     * counted as they leave: what file:// has written of its puts; on an
     * object store every request body (objects and parts, and the small
     * XML of a multipart completion or a batch delete) as the transport
     * hands each piece of it to the network (ckpt__http_sent: the socket's
     * buffer, so up to a few MiB ahead of what the peer has). A rewound
     * body, and all of a request or put that failed (no 2xx reply, an
     * error), are taken back: they are sent again or not at all. So the
     * count can go down; a caller measures one stretch of work by the
     * difference from a reading taken before it (libckpt: a save's
     * progress, ckpt.h). An atomic load: cheap from any thread. */
    uint64_t (*sent)(struct ckpt_store *);
};

/* Capabilities (struct ckpt_store_caps.flags). */
enum {
    /* Conditional puts are enforced by the store itself: an If-None-Match
     * create and an If-Match replace are atomic among every writer. Without
     * it they are best effort (a local emulator that ignores the headers),
     * and a lease or a fence built on them cannot exclude a race. */
    CKPT_STORE_CONDITIONAL = 1u << 0,
    /* get_range fetches only the bytes asked for. */
    CKPT_STORE_RANGES = 1u << 1,
    /* Each request costs a round trip and a fee: small objects should travel
     * packed into larger ones by default (docs/FORMAT.md, "Packs"). */
    CKPT_STORE_PACKS = 1u << 2,
    /* A request spends most of its time waiting on the network: keep more
     * requests in flight than there are cores. */
    CKPT_STORE_LATENCY_BOUND = 1u << 3
};

/* What a store can do, declared by its backend at open, fixed thereafter. */
struct ckpt_store_caps {
    unsigned flags;            /* CKPT_STORE_* */
    size_t chunk_bytes;        /* preferred chunk size (0: no preference) */
};

/* The common head of every backend's handle; read-only for callers. */
struct ckpt_store {
    const struct ckpt_store_ops *ops;
    struct ckpt_store_caps caps;
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

/* @return 1 when the store declared every capability in `caps`. */
static inline int ckpt_store_can(const struct ckpt_store *st, unsigned caps)
{
    return (st->caps.flags & caps) == caps;
}

/* ---- URL schemes ------------------------------------------------------------
 * The schemes a store is opened from, one row each:
 *   X(name, form, backend, description)
 * `name` is what comes before "://"; `form` is how a URL of the scheme is
 * written in messages and help texts; `backend` is the backend that serves it
 * (FILE, S3 for the S3 dialect, AZURE), and rows of one backend share its
 * settings (CKPT_S3_* for S3). ckpt_store_open's dispatch, the table below
 * (ckpt_store_scheme_at) and every list of schemes ckptrun prints come from
 * this map: a new scheme is one row here plus, for a new backend, its open
 * function in uploaders/store.c. Since 0.4.0. */
#define CKPT_STORE_SCHEME_MAP(X)                                                        \
    X(file, "file:///abs/path", FILE, "a directory: local disk, NFS, a mounted volume") \
    X(s3, "s3://bucket/prefix", S3, "Amazon S3 or an S3-compatible service")            \
    X(gs, "gs://bucket/prefix", S3, "Google Cloud Storage (XML API, HMAC keys)")        \
    X(az, "az://container/prefix", AZURE, "Azure Blob Storage")

/* The forms as one string literal, each after a space (" file:///abs/path
 * s3://bucket/prefix ..."), for texts that must be constant (a static table
 * of help texts). */
#define CKPT_STORE_FORM_WORD_(name, form, backend, what) " " form
#define CKPT_STORE_URL_FORMS CKPT_STORE_SCHEME_MAP(CKPT_STORE_FORM_WORD_)

/* One row of the map, as the library built it. */
struct ckpt_store_scheme {
    const char *name;          /* "s3" */
    const char *form;          /* "s3://bucket/prefix" */
    const char *description;   /* "Amazon S3 or an S3-compatible service" */
    unsigned flags;            /* CKPT_SCHEME_* */
};
enum {
    CKPT_SCHEME_BUILT = 1u << 0,      /* its backend is compiled into this build */
    CKPT_SCHEME_S3_SETTINGS = 1u << 1 /* it reads CKPT_S3_* (storage class, SSE) */
};

/* Row `i` of the scheme table, in the map's order; NULL past the end.
 * Thread-safe. Since 0.4.0. */
CKPT_API const struct ckpt_store_scheme *ckpt_store_scheme_at(size_t i);
/* The row of `url`'s scheme when the URL has a form ckpt_store_open accepts
 * before contacting anything: "file://" then an absolute path, any other
 * scheme's "name://" then a bucket or container name (non-empty, not
 * starting with '/'). A scheme compiled out of this build is still known
 * (its flags lack CKPT_SCHEME_BUILT; opening it gives CKPT_E_UNSUPPORTED).
 * Touches nothing. Thread-safe. Since 0.4.0.
 * @return the row, or NULL (NULL url, unknown scheme, malformed). */
CKPT_API const struct ckpt_store_scheme *ckpt_store_scheme_known(const char *url);
/* Every form for a message: "file:///abs/path, s3://bucket/prefix,
 * gs://bucket/prefix or az://container/prefix", into buf (`len` bytes,
 * truncated to fit). Thread-safe. Since 0.4.0. @return buf. */
CKPT_API char *ckpt_store_url_forms(char *buf, size_t len);

/* Options for opening a store (all optional: zero-initialise, then set what
 * you need). Zero/NULL fields come from the environment, then defaults:
 * CKPT_CONNECTIONS, CKPT_MAX_RATE (bytes/s, "50M"), CKPT_RETRY_BUDGET_MS,
 * CKPT_S3_STORAGE_CLASS, CKPT_S3_SSE (AES256 | aws:kms),
 * CKPT_S3_SSE_KMS_KEY_ID (implies aws:kms). Checked at open: CKPT_E_CONFIG
 * with the reason (GLACIER and DEEP_ARCHIVE are refused: their objects cannot
 * be read back at once). The strings are copied by the store. */
struct ckpt_store_config {
    unsigned connections;      /* parallel connections for object stores (0 = 16) */
    uint64_t max_rate_bps;     /* upload rate cap, bytes/s (0 = none) */
    const char *storage_class; /* S3 storage class */
    const char *sse;           /* "AES256" or "aws:kms" */
    const char *sse_kms_key_id;
    ckpt_log_fn log_fn;        /* called from any thread of the store */
    void *log_user;
    ckpt_log_level log_level;
    /* How long one request may keep retrying, in ms (0 = CKPT_RETRY_BUDGET_MS,
     * else 120000). At least 6 attempts are made whatever the budget. */
    uint64_t retry_budget_ms;
};

/* Open the store named by `url` (a scheme of CKPT_STORE_SCHEME_MAP:
 * file:///abs, s3://bucket/prefix, ...). `url` NULL or "" = the default
 * file store (ckpt_store_default_url). `cfg` may be NULL. On CKPT_OK *out is
 * the new handle (close it with ckpt_store_close); otherwise *out is NULL and
 * `err` (may be NULL) says why. Thread-safe.
 * @return CKPT_OK, CKPT_E_CONFIG (bad URL, unknown scheme, bad setting),
 *         CKPT_E_UNSUPPORTED (scheme compiled out), CKPT_E_AUTH (no
 *         credentials), CKPT_E_IO / CKPT_E_PERM (file store root),
 *         CKPT_E_NOMEM. */
CKPT_API ckpt_status ckpt_store_open(const char *url, const struct ckpt_store_config *cfg,
                                     struct ckpt_store **out, char *err);
/* Close a store (NULL-safe). No call on it may be in flight. */
CKPT_API void ckpt_store_close(struct ckpt_store *st);

/* Where a store opened without a log callback reports what its user must
 * know once per process (a plain-http endpoint off this machine). `fn` NULL:
 * nowhere. Set once at start, before any store is opened (not thread-safe). */
CKPT_API void ckpt_store_set_notice_log(ckpt_log_fn fn, void *user);

/* The default store URL: file://$XDG_DATA_HOME/ckpt or ~/.local/share/ckpt,
 * written into buf (`len` bytes). Thread-safe.
 * @return buf, or NULL if it does not fit or neither variable is an absolute
 *         path. */
CKPT_API char *ckpt_store_default_url(char *buf, size_t len);

/* A valid key: [A-Za-z0-9._-/], at most 1024 bytes, no empty, "." or ".."
 * segment, no leading or trailing '/'. Thread-safe. @return 1 if valid. */
CKPT_API int ckpt_key_valid(const char *key);
/* A relative '/'-separated path of at most `max` bytes of [A-Za-z0-9._-]
 * plus the characters in `extra` (may be NULL), without empty, "." or ".."
 * segments. Thread-safe. @return 1 if valid. */
CKPT_API int ckpt_path_valid(const char *p, size_t max, const char *extra);

/* Convenience wrappers: a plain put when `o` is NULL, a get without flags.
 * `etag` and `err` may be NULL. */
static inline ckpt_status ckpt_store_put(struct ckpt_store *st, const char *key,
                                         const void *buf, size_t len,
                                         const struct ckpt_put_opts *o,
                                         char *etag, char *err)
{
    static const struct ckpt_put_opts plain = { CKPT_PUT_PLAIN, NULL, 0 };
    return st->ops->put(st, key, buf, len, o ? o : &plain, etag, err);
}
/* The store's sent() count into *out. @return 1, or 0 (and *out = 0) when
 * the backend cannot tell. Since 0.4.0. */
static inline int ckpt_store_sent(struct ckpt_store *st, uint64_t *out)
{
    *out = st->ops->sent ? st->ops->sent(st) : 0;
    return st->ops->sent != NULL;
}
static inline ckpt_status ckpt_store_get(struct ckpt_store *st, const char *key,
                                         size_t max_len, void **buf, size_t *len,
                                         char *etag, char *err)
{
    return st->ops->get(st, key, max_len, 0, buf, len, etag, err);
}

/* ---- retries, process-wide ---------------------------------------------
 * Every object-store request of the process retries under one policy
 * (docs/stores.md, "Retries"). Two controls reach across all stores. They
 * exist in every build; in one without object stores nothing retries and
 * they only record what they are given. */

/* Bound every later retry to `mono_ms` on the CLOCK_MONOTONIC clock, in ms
 * (0 = no bound): no backoff sleeps past it and no attempt starts after it,
 * so a failing store cannot hold a stop beyond its deadline. A nearer
 * deadline replaces a farther one, never the other way round, until it is
 * cleared with 0. Thread-safe (atomic). */
CKPT_API void ckpt_retry_set_deadline(int64_t mono_ms);

/* Told about every retry (before its backoff sleep), on the requesting
 * thread: `attempt` is the attempt about to be made (2 after the first
 * failure) of at most `max`, after `delay_ms`, and `reason` why the last one
 * failed ("HTTP 503 SlowDown", the transport's text; valid during the call
 * only). A terminal UI shows it ("retrying 2/6: connection refused"). */
struct ckpt_retry_notice {
    unsigned attempt, max;
    long delay_ms;
    const char *reason;
};
typedef void (*ckpt_retry_observer)(const struct ckpt_retry_notice *n);
/* Set the observer (NULL: nobody is told). Thread-safe (atomic); the
 * observer must be safe to call from any thread. */
CKPT_API void ckpt_retry_set_observer(ckpt_retry_observer fn);

#ifdef __cplusplus
}
#endif

#endif
