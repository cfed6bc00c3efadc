/*
 * objstore.h -- the object-store core: the operations S3/GCS and Azure
 * share, written once, over the HTTP transport (ckpt_http.h) and the retry
 * policy (retry.h).
 *
 * The core implements the whole store contract (ckpt_store.h) for an HTTP
 * object store: a put with its body digest, its retries and the settling of
 * an ambiguous conditional write; multipart uploads for large objects;
 * whole and ranged GETs (with the streaming watch) checked against the
 * store's digest; HEAD; paged listing; deletes, batched where the service
 * can. A backend states only its dialect (struct ckpt_obj_dialect): how a
 * request is addressed and signed, which headers carry a storage class or a
 * condition, how a multipart upload goes, what its listing XML looks like
 * and where its error codes are.
 *
 * A backend's handle starts with a struct ckpt_obj (then its own fields);
 * it is opened with ckpt__obj_open and ckpt__obj_start, and its function
 * table is CKPT_OBJ_OPS(scheme). Locking: `mu` guards `skew_s` and whatever
 * the dialect changes after open (S3: the region, role credentials); the
 * rest is fixed at open. The transport, retry policy and throttle are
 * thread-safe themselves.
 */
#ifndef CKPT_OBJSTORE_H
#define CKPT_OBJSTORE_H

#include <pthread.h>
#include <stdint.h>
#include "ckpt_http.h"
#include "ckpt_store.h"
#include "retry.h"

#define CKPT_OBJ_LINES_MAX 24   /* header lines of one request */
#define CKPT_OBJ_LINE_MAX 300   /* a header line a dialect formats itself */
#define CKPT_OBJ_CHUNK_BYTES (8u << 20) /* preferred chunk size of object stores */

struct ckpt_obj;

/* One logical request: the core makes its attempts. */
struct ckpt_obj_rq {
    const char *method;
    const char *key;          /* object name (prefix included), NULL = the
                                 bucket or container itself */
    const char *query;        /* wire-encoded, NULL = none */
    const char *const *hdrs;  /* extra "Name: value" lines (signed) */
    size_t nhdrs;
    const void *body;
    size_t len;
    size_t max_body;          /* largest reply body (0: 256 KiB, error replies) */
    int body_error_check;     /* a 200 may carry an <Error> (S3 Complete MPU) */
    int digest_check;         /* GET: the body must match the store's digest */
    int *ambiguous;           /* set to 1 when an attempt failed without a
                                 definite answer (it may have been applied) */
    void *dst;                /* reply body into this buffer (max_body + 1) */
    const struct ckpt_range_watch *watch; /* with dst: streamed to the caller */
};

/* A request across its attempts, as the dialect sees it. prepare() fills
 * the path and whatever digests of the body it signs; the core frees the
 * paths. */
struct ckpt__obj_call {
    const struct ckpt_obj_rq *rq;
    char *path;               /* the URL path as signed (SigV4: raw) */
    char *path_enc;           /* the URL path as sent */
    char md5[25];             /* body digests, base64 or hex as the wire wants */
    char crc32c[9];
    char sha256[65];
    char region[64];          /* the region the last attempt went to (S3) */
    int redirects;            /* region redirects followed so far */
};

/* The header lines of one attempt ("Name: value", each malloc'd). They are
 * wiped when cleared: an Authorization or a session token is among them. */
struct ckpt_obj_lines {
    char *v[CKPT_OBJ_LINES_MAX];
    size_t n;
    int oom;                  /* an allocation failed or the table was full */
};
void ckpt__obj_line(struct ckpt_obj_lines *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void ckpt__obj_lines_clear(struct ckpt_obj_lines *l);
/* Split a "Name: value" line: the name into `name` (n bytes), *value to the
 * text after the colon and its blanks. @return 1, or 0 if the name did not
 * fit. */
int ckpt__obj_split(const char *line, char *name, size_t n, const char **value);

/* A multipart upload (S3 parts, Azure blocks) in progress. */
struct ckpt_obj_parts {
    const char *key;          /* object name (prefix included) */
    size_t n;                 /* parts */
    char *id;                 /* upload id, query-encoded (malloc'd; S3) */
    char (*tags)[CKPT_ETAG_MAX]; /* per part: its ETag (S3) or block id (Azure) */
};

/* How a service lists: the query of a page, "<query>&prefix=P&<page_param>=N"
 * then "&<token_param>=T" after the first page, and the XML elements of its
 * reply (xml.h), named from the root: entry "<root>/<entry>", an object's
 * key "<root>/<entry>/<key>", the next page's token "<root>/<next>". */
struct ckpt_obj_listing {
    const char *query, *page_param, *token_param;
    const char *root, *entry, *key, *size, *mtime;
    const char *next;
    const char *truncated;    /* "true" while pages follow; NULL: they follow
                                 while `next` is given */
    int64_t (*time_s)(const char *text); /* mtime as Unix s (<= 0: unknown) */
    size_t max_body;          /* largest page accepted, bytes */
};

/* How a service takes an object in parts (S3 multipart upload, Azure
 * blocks). The upload ends with `end_method` on the object with the query
 * end_query + the upload id (if any), listing the parts in XML:
 * list_open, then per part item_open [its number, number_close] its tag
 * (escaped) item_close, then list_close; with the whole object's MD5
 * (base64) in the header `md5_header` (NULL: none). The object's etag is the
 * text of `etag_path` in the reply (NULL: its headers, as after a put). */
struct ckpt_obj_multipart {
    size_t max_parts;         /* parts one object may have */
    int part_etag;            /* a part's tag is the ETag of its reply (S3) */
    int end_check;            /* the end may answer 200 with an error inside */
    const char *end_method, *end_query;
    const char *list_open, *item_open, *number_close, *item_close, *list_close;
    const char *md5_header, *etag_path;
};

/* What a backend states; the functions are called on any thread. */
struct ckpt_obj_dialect {
    const char *range_header; /* "Range" or "x-ms-range" */
    const char *etag_header;  /* read before ETag (GCS: x-goog-generation) */
    const struct ckpt_obj_multipart *multipart;
    int skew_on_403;          /* a 403 with a Date > 10 min off is our clock */
    const struct ckpt_obj_listing *listing;
    /* Once per request: c->path, c->path_enc and the body's digests. */
    ckpt_status (*prepare)(struct ckpt_obj *o, struct ckpt__obj_call *c);
    /* Every attempt: the URL (malloc'd) and the signed header lines. A
     * failure (credentials, signing) ends the request; detail in err. */
    ckpt_status (*build)(struct ckpt_obj *o, struct ckpt__obj_call *c, char **url,
                         struct ckpt_obj_lines *h, char *err);
    /* The service's error code of a reply into code ("" if none); may turn a
     * 200 that carries an error into its real status. */
    void (*reply)(struct ckpt_obj *o, const struct ckpt__obj_call *c, struct ckpt_http_resp *resp,
                  char *code, size_t n);
    /* 1: the reply says where the request must go instead (S3: the bucket's
     * region, now set), and it is made again. NULL: never. */
    int (*redirect)(struct ckpt_obj *o, struct ckpt__obj_call *c,
                    const struct ckpt_http_resp *resp);
    /* Whether a reply's digest (ETag, Content-MD5) shows `buf`: 1 yes, 0 it
     * shows other bytes, -1 it carries no usable digest. */
    int (*holds)(const struct ckpt_http_resp *resp, const void *buf, size_t len);
    /* The header line of a conditional put (writes line; 1 if any). */
    int (*cond_header)(const struct ckpt_obj *o, const struct ckpt_put_opts *opts,
                       char *line, size_t n);
    /* The extra header lines of a new object (storage class, blob type); at
     * most 4. @return how many. */
    size_t (*put_headers)(const struct ckpt_obj *o, char (*lines)[CKPT_OBJ_LINE_MAX]);
    /* Multipart (with `multipart`): begin (sets mp->id; NULL: nothing to
     * begin); the query that puts part i (malloc'd; it may set the part's
     * tag: Azure's block id); the abort of a begun upload (NULL: nothing to
     * abort). */
    ckpt_status (*parts_begin)(struct ckpt_obj *o, struct ckpt_obj_parts *mp, char *err);
    char *(*part_query)(struct ckpt_obj_parts *mp, size_t i);
    void (*parts_abort)(struct ckpt_obj *o, struct ckpt_obj_parts *mp);
    /* Delete up to del_batch_max names in one request (NULL: one DELETE a
     * name). */
    ckpt_status (*del_batch)(struct ckpt_obj *o, const char *const *keys, size_t n,
                             char *err);
    size_t del_batch_max;
    /* Release the dialect's own fields (the core frees the handle). */
    void (*close)(struct ckpt_obj *o);
};

/* The head of every object-store handle. */
struct ckpt_obj {
    struct ckpt_store base;
    const struct ckpt_obj_dialect *d;
    const char *tag;          /* "s3", "gs", "az": messages */
    char *container;          /* bucket or container */
    char *prefix;             /* "" or "p/q/" */
    char *ep_scheme;          /* endpoint: "https" */
    char *ep_host;            /* "s3.us-east-1.amazonaws.com", "127.0.0.1:9000" */
    char *ep_path;            /* "" or "/base" (no trailing slash) */
    size_t part_size;         /* objects above part_min go up in parts */
    size_t part_min;
    unsigned page_size;       /* objects a listing page asks for */
    int verify;               /* the store's digests are the content's: GETs
                                 are checked, ambiguous puts settled */
    ckpt_log_fn log_fn;
    void *log_user;
    ckpt_log_level log_level;
    struct ckpt_http *http;
    struct ckpt_retry_policy pol;
    struct ckpt_throttle thr;
    pthread_mutex_t mu;       /* guards skew_s and the dialect's mutable state */
    int64_t skew_s;           /* server clock - local clock */
};

/* Release a handle opened by ckpt__obj_open (the store op `close`). */
void ckpt__obj_close(struct ckpt_store *st);

/* Open the common part of a handle `o` (zeroed, allocated by the backend
 * with its own fields after it, freed by ckpt__obj_close): locks, retry policy
 * (cfg->retry_budget_ms), logging, the URL "xx://container/prefix" split and checked (`noun`
 * "bucket" or "container" for the message). The capabilities every object
 * store has are declared (ranges, packs, latency-bound, 8 MiB chunks); the
 * backend adds CKPT_STORE_CONDITIONAL when the service enforces it. After a
 * failure, and in any case once initialised, ckpt__obj_close releases it. */
ckpt_status ckpt__obj_open(struct ckpt_obj *o, const struct ckpt_store_ops *ops,
                           const struct ckpt_obj_dialect *d, const char *tag, const char *url,
                           const char *noun, const struct ckpt_store_config *cfg, char *err);
/* Parts of `size_env` bytes (default 8 MiB, at least `size_floor`) for
 * objects above `min_env` bytes (default 64 MiB, at least one part). */
void ckpt__obj_parts_config(struct ckpt_obj *o, const char *size_env, size_t size_floor,
                            const char *min_env);
/* Split an endpoint URL "scheme://host[:port][/path]" into o->ep_scheme,
 * ep_host and ep_path (without trailing '/').
 * @return CKPT_OK, CKPT_E_CONFIG (no "://"; detail in err), CKPT_E_NOMEM. */
ckpt_status ckpt__obj_endpoint(struct ckpt_obj *o, const char *url, char *err);
/* Start the transport (cfg->connections, cfg->max_rate_bps). */
ckpt_status ckpt__obj_start(struct ckpt_obj *o, const struct ckpt_store_config *cfg);

/* One request with the dialect's addressing and signing, retries, clock
 * correction and digest checks. On CKPT_OK resp holds the 2xx reply; on a
 * failure it may hold the last one. The caller frees resp in every case. */
ckpt_status ckpt__obj_call(struct ckpt_obj *o, const struct ckpt_obj_rq *rq,
                           struct ckpt_http_resp *resp, char *err);
/* The object's etag from a reply into out (CKPT_ETAG_MAX bytes; NULL-safe). */
void ckpt__obj_etag(const struct ckpt_obj *o, const struct ckpt_http_resp *resp, char *out);
/* Log at `lvl` under the subject "store". */
void ckpt__obj_log(const struct ckpt_obj *o, ckpt_log_level lvl, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
