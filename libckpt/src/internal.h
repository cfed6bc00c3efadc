/* internal.h -- shared between libckpt's modules; never installed. */
#ifndef CKPT_INTERNAL_H
#define CKPT_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "ckpt.h"
#include "progress.h"
#include "ckpt_store.h"

#define CKPT_ID_LEN 16              /* chunk id: XXH3-128 of the raw bytes */
#define CKPT_ID_HEX (CKPT_ID_LEN * 2)
#define CKPT_NAME_MAX 4095           /* item names (segments: 255) */
#define CKPT_TARGET_MAX 4095         /* link targets */
#define CKPT_DEFAULT_CHUNK (4u << 20)        /* file:// */
#define CKPT_DEFAULT_CHUNK_REMOTE (8u << 20) /* s3://, gs://, az:// */
#define CKPT_MIN_CHUNK (64u << 10)
#define CKPT_MAX_CHUNK (64u << 20)
#define CKPT_MANIFEST_MAX (256u << 20) /* largest manifest we accept */
#define CKPT_HEAD_MAX (16u << 20)
#define CKPT_FORMAT_VERSION 3        /* what this reader accepts (1, 2 and 3) */
#define CKPT_FORMAT_UNPACKED 1       /* manifests without packs stay format 1 */
#define CKPT_FORMAT_PACKS 2          /* chunks in packs */
#define CKPT_FORMAT_NAMES 3          /* link items, names outside the old alphabet */
#define CKPT_HEAD_FORMAT 1           /* HEAD: 1, or the highest manifest format above 2
                                        among its entries (docs/FORMAT.md) */
#define CKPT_HEAD_FORMAT_MAX 3       /* what this reader accepts */
#define CKPT_CHUNK_VERSION 1         /* the chunk header's version byte */
#define CKPT_DEFAULT_PACK (32u << 20)  /* object stores; 0 on file:// */
#define CKPT_MAX_PACK (1u << 30)
#define CKPT_MAX_PACKS 10000000u       /* per manifest */

/* ---- util.c ----------------------------------------------------------- */
int64_t ckpt__now_ms(void);        /* wall clock, Unix ms */
uint64_t ckpt__mono_ns(void);      /* monotonic */
void ckpt__seterr(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ckpt__hex(const uint8_t *in, size_t n, char *out); /* out: 2n+1 */
int ckpt__unhex(const char *in, uint8_t *out, size_t n); /* 0 ok */
/* Well-formed UTF-8 without control characters. */
int ckpt__text_valid(const char *s, size_t len);
/* Item names: relative, no empty/"."/".." segments, UTF-8 text. */
int ckpt__name_valid(const char *name);
/* Names formats 1 and 2 accept: [A-Za-z0-9._-/+=@,], at most 255 bytes. */
int ckpt__name_legacy(const char *name);
char *ckpt__strdup(const char *s);
ckpt_status ckpt__mkdirs(const char *path, mode_t mode, char *err);
ckpt_status ckpt__errno_status(int e);

/* Failpoints, for tests: after ckpt__failpoint_arm(name, n), the nth call
 * of ckpt__failpoint(name) returns 1 (once); unarmed it costs one relaxed
 * atomic load. Points: "idset_put" (out of memory growing an id set),
 * "pool_submit" (a job cannot be queued). */
void ckpt__failpoint_arm(const char *name, unsigned nth);
int ckpt__failpoint(const char *name);

/* Set of 16-byte ids with a value each (open addressing, grows). Not
 * thread-safe by itself. */
struct ckpt_idset {
    uint8_t (*keys)[CKPT_ID_LEN];
    uint64_t *vals;
    uint8_t *used;
    size_t cap, n;
};
void ckpt__idset_init(struct ckpt_idset *s);
void ckpt__idset_free(struct ckpt_idset *s);
int ckpt__idset_get(const struct ckpt_idset *s, const uint8_t *id, uint64_t *val);
int ckpt__idset_put(struct ckpt_idset *s, const uint8_t *id, uint64_t val); /* -1 nomem */

/* ---- log.c ------------------------------------------------------------- */
struct ckpt_logger {
    ckpt_log_fn fn;
    void *user;
    ckpt_log_level level;
};
void ckpt__logger_init(struct ckpt_logger *lg, ckpt_log_fn fn, void *user,
                       ckpt_log_level level);
void ckpt__log(const struct ckpt_logger *lg, ckpt_log_level level,
               const char *subject, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- codec.c ------------------------------------------------------------ */
/* Chunk object: a 48-byte header then the payload (see docs/FORMAT.md). */
#define CKPT_CHUNK_MAGIC "CKC1"
#define CKPT_CHUNK_HDR 48
enum { CKPT_FILTER_NONE = 0, CKPT_FILTER_BYTEGROUP = 1 };

struct ckpt_codec_ws; /* per-thread compression workspace */
struct ckpt_codec_ws *ckpt__codec_ws_new(size_t chunk_bytes);
void ckpt__codec_ws_free(struct ckpt_codec_ws *ws);
/* Grow the workspace to chunks of `chunk_bytes` (<= CKPT_MAX_CHUNK); decode
 * does this itself for chunks written with a larger chunk size. */
ckpt_status ckpt__codec_ws_reserve(struct ckpt_codec_ws *ws, size_t chunk_bytes);
/* The workspace's raw-chunk buffer, grown to `need` bytes; NULL without memory.
 * Valid until the next reserve or scratch call on this workspace. */
uint8_t *ckpt__codec_ws_scratch(struct ckpt_codec_ws *ws, size_t need);
/* The workspace's reply buffer (kept between fetches), at least `need`. */
uint8_t *ckpt__codec_ws_fetch(struct ckpt_codec_ws *ws, size_t need);
/* Encode one chunk. *obj points into ws (valid until the next call). */
ckpt_status ckpt__chunk_encode(struct ckpt_codec_ws *ws, const void *raw, size_t len,
                               const uint8_t id[CKPT_ID_LEN], ckpt_codec codec,
                               int level, unsigned elem_size, const void **obj,
                               size_t *obj_len);
/* The same as two pieces, the 48-byte header (in ws) and the payload: a
 * chunk stored raw is not copied (*payload is `raw`), for callers that copy
 * it somewhere anyway (a pack). */
ckpt_status ckpt__chunk_encode_parts(struct ckpt_codec_ws *ws, const void *raw, size_t len,
                                     const uint8_t id[CKPT_ID_LEN], ckpt_codec codec,
                                     int level, unsigned elem_size, const void **hdr,
                                     const void **payload, size_t *plen);
/* Decode and verify one chunk object into raw (exactly raw_len bytes). On
 * damage returns CKPT_E_CORRUPT with the reason in err. */
ckpt_status ckpt__chunk_decode(struct ckpt_codec_ws *ws, const void *obj, size_t obj_len,
                               const uint8_t id[CKPT_ID_LEN], void *raw, size_t raw_len,
                               char *err);
/* Check one chunk object and point *view at its raw bytes: the payload
 * itself for a chunk stored raw (no copy), else decoded into the
 * workspace's scratch (valid until the next call on ws). */
ckpt_status ckpt__chunk_view(struct ckpt_codec_ws *ws, const void *obj, size_t obj_len,
                             const uint8_t id[CKPT_ID_LEN], size_t raw_len,
                             const uint8_t **view, char *err);
void ckpt__chunk_id(const void *raw, size_t len, uint8_t id[CKPT_ID_LEN]);
/* 1 if the chunk object whose first CKPT_CHUNK_HDR bytes are at `hdr` has
 * a sound header for `id` and `raw_len` and stores its bytes as they are
 * (no codec, no filter): its payload is then the raw bytes, checked by
 * their content hash (XXH3-128, the id) alone. */
int ckpt__chunk_is_plain(const void *hdr, size_t obj_len, const uint8_t id[CKPT_ID_LEN],
                         size_t raw_len);
void ckpt__bytegroup(const uint8_t *in, uint8_t *out, size_t len, unsigned elem);
void ckpt__byteungroup(const uint8_t *in, uint8_t *out, size_t len, unsigned elem);
const char *ckpt__codec_name(ckpt_codec c);
ckpt_status ckpt__codec_parse(const char *s, ckpt_codec *codec, int *level);

/* ---- format.c ----------------------------------------------------------- */
enum { CKPT_ITEM_MEM = 0, CKPT_ITEM_FILE = 1, CKPT_ITEM_DEVICE = 2, CKPT_ITEM_LINK = 3 };

struct ckpt_chunk_ref {
    uint8_t id[CKPT_ID_LEN];
    uint32_t raw_len;
    uint32_t stored_len;   /* size of the chunk object */
    uint32_t pack;         /* 0: its own object chunks/<id>; else 1 + index in
                              the manifest's packs, the chunk object at `off` */
    uint64_t off;
};

/* A pack: one object (packs/<id>) holding many chunk objects back to back;
 * id: 128 random bits. */
struct ckpt_pack {
    uint8_t id[CKPT_ID_LEN];
    uint64_t size;
};

struct ckpt_mitem {
    char *name;
    int kind;
    unsigned elem_size;    /* 0/1 = bytes, 2, 4 (byte grouping) */
    uint64_t size;
    uint32_t mode;         /* file permission bits */
    char *target;          /* links: the link's text (relative) */
    size_t nchunks;
    struct ckpt_chunk_ref *chunks;
};

struct ckpt_manifest {
    unsigned version;
    uint64_t step, seq, epoch;
    int64_t time_ms;
    uint32_t rank, world_size;
    uint64_t chunk_bytes;
    uint64_t new_bytes;    /* stored bytes first written by this checkpoint */
    char *writer;          /* "host:pid" */
    char *parent;          /* manifest key of the previous commit, or NULL */
    size_t nitems;
    struct ckpt_mitem *items;
    size_t npacks;         /* packs its chunks live in (format 2) */
    struct ckpt_pack *packs;
};

/* The objects a manifest needs, each once: chunk objects (kind 0, by chunk
 * id) and packs (kind 1, by pack id). */
enum { CKPT_OBJ_CHUNK = 0, CKPT_OBJ_PACK = 1 };
struct ckpt_idlist {
    uint8_t (*ids)[CKPT_ID_LEN];
    uint8_t *kind;
    uint64_t *size;        /* stored size the manifest records */
    size_t n;
};
int ckpt__manifest_objects(const struct ckpt_manifest *m, struct ckpt_idlist *out); /* -1 nomem */
void ckpt__idlist_free(struct ckpt_idlist *l);
/* Key of an object of the run: "<run>/chunks/ab/<id>" or "<run>/packs/ab/<id>". */
void ckpt__object_key(const char *run, int kind, const uint8_t id[CKPT_ID_LEN], char *out,
                      size_t n);

struct ckpt_head_entry {
    char *manifest;        /* key relative to the run */
    uint64_t step, seq;
    unsigned format;       /* the manifest's format (0: not recorded, 1 or 2) */
    int64_t marked_ms;     /* damaged entries: when marked (the marker's clock) */
};
/* A gc in progress (or one that stopped before it finished): its record
 * object lists what it deletes; while HEAD names it, no commit may use any
 * of those objects (docs/FORMAT.md, "Garbage collection"). */
struct ckpt_gc_ref {
    char *record;          /* key relative to the run: "gc/<32 hex>" */
    int64_t time_ms;       /* when the gc published it (its clock) */
};
#define CKPT_GC_MAX_REFS 64
#define CKPT_GC_DELETE_MS (60ll * 60 * 1000)       /* a gc deletes for at most this long */
#define CKPT_GC_RECORD_TTL_MS (24ll * 60 * 60 * 1000) /* older records are void */

struct ckpt_head {
    unsigned version;
    uint64_t rev;          /* +1 at every write: no rewrite looks like an older HEAD
                              to a conditional write on a content etag */
    uint64_t seq, step, epoch;
    int64_t time_ms;
    size_t n;              /* retained committed checkpoints, highest step first
                              (then newest commit first): the resume order */
    struct ckpt_head_entry *entries;
    size_t ndamaged;       /* checkpoints a restore found damaged: out of the
                              resume order, kept for inspection until gc */
    struct ckpt_head_entry *damaged;
    size_t ngc;            /* gc records in force */
    struct ckpt_gc_ref *gc;
};

/* What gc records say is being deleted: object id -> 1 << kind, and the
 * manifest keys (relative to the run). */
struct ckpt_gc_victims {
    struct ckpt_idset objs;
    char **manifests;
    size_t nmanifests;
};
void ckpt__gc_victims_free(struct ckpt_gc_victims *v);
/* Encode a gc record: the objects and manifests a gc deletes. */
ckpt_status ckpt__gc_record_encode(const struct ckpt_gc_victims *v, int64_t time_ms, char **out,
                                   size_t *len);
/* Add the record in buf to v (hostile input: checked like a manifest). */
ckpt_status ckpt__gc_record_decode(const void *buf, size_t len, struct ckpt_gc_victims *v,
                                   char *err);

void ckpt__manifest_free(struct ckpt_manifest *m);
/* The format a manifest is written in: 3 with a link item or a name outside
 * the old alphabet, else 2 with packs, else 1. */
unsigned ckpt__manifest_format(const struct ckpt_manifest *m);
/* The manifest as a whole: names unique, no item also a directory of
 * another, every link's target relative and resolving, inside the
 * checkpoint, to a non-link item or a directory of items. CKPT_E_CORRUPT
 * with the reason (callers saving map it to CKPT_E_INVAL). */
ckpt_status ckpt__manifest_check(const struct ckpt_manifest *m, char *err);
/* A link target's own text: relative, 1..CKPT_TARGET_MAX bytes of UTF-8
 * text. 1 if valid. */
int ckpt__target_valid(const char *target);
ckpt_status ckpt__manifest_encode(const struct ckpt_manifest *m, char **out, size_t *len);
ckpt_status ckpt__manifest_decode(const void *buf, size_t len, struct ckpt_manifest *m,
                                  char *err);
void ckpt__head_free(struct ckpt_head *h);
/* Sort entries into the resume order: step descending, then seq descending. */
void ckpt__head_sort(struct ckpt_head_entry *e, size_t n);
ckpt_status ckpt__head_encode(const struct ckpt_head *h, char **out, size_t *len);
ckpt_status ckpt__head_decode(const void *buf, size_t len, struct ckpt_head *h, char *err);
/* Envelope shared by manifests and HEAD: JSON, "\n#xxh64:<16 hex>\n". */
ckpt_status ckpt__envelope_open(const void *buf, size_t len, size_t *json_len, char *err);
char *ckpt__envelope_seal(const char *json, size_t *len);
void ckpt__chunk_key(const char *run, const uint8_t id[CKPT_ID_LEN], char *out, size_t n);
/* Manifest key: "<run>/manifests/<seq:020>_<step:020>_<epoch:010>_<nonce:08x>.ckm"
 * (the nonce keeps a commit's key apart from one a crashed save left) */
void ckpt__manifest_key(const char *run, uint64_t seq, uint64_t step, uint64_t epoch,
                        uint32_t nonce, char *out, size_t n);

/* ---- the context -------------------------------------------------------- */
struct ckpt_arena;
struct ckpt_item {
    char *name;
    int kind;
    void *ptr;             /* host or device pointer */
    size_t size;
    unsigned elem_size;
    char *path;            /* files: the path; links: the target text */
    bool as_is;            /* files: CKPT_FILE_AS_IS, `version` is the one to commit */
    struct {
        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtime, ctime;
    } version;
    struct ckpt_arena *stage; /* host regions without a staging cap: a private
                              copy of the whole region, so a save is one
                              large memcpy (streaming stores) per region */
    struct ckpt_item *next;
};

struct ckpt_block {        /* a chunk-sized staging buffer */
    struct ckpt_block *next;
    uint8_t *data;
};

struct ckpt_arena {        /* one mapping holding many blocks */
    struct ckpt_arena *next;
    void *base;
    size_t len;
    struct ckpt_block *blocks;
};

/* What a writer knows the run holds: chunk id -> where it lives. */
struct ckpt_loc {
    uint32_t stored_len;
    uint32_t pack;             /* 0: its own object; else 1 + index in packtab */
    uint64_t off;
};
struct ckpt_index {
    struct ckpt_idset known;   /* chunk id -> index in locs (UINT64_MAX: being
                                  deleted, never reused) */
    struct ckpt_loc *locs;
    size_t nlocs, caplocs;
    struct ckpt_pack *packtab; /* size 0: deleted by retention */
    size_t npacktab, cappacktab;
    struct ckpt_idset packidx; /* pack id -> index in packtab */
};
void ckpt__index_init(struct ckpt_index *x);
void ckpt__index_free(struct ckpt_index *x);
/* Remember where chunk r of manifest m lives (newest wins). -1 nomem. */
int ckpt__index_put(struct ckpt_index *x, const struct ckpt_manifest *m,
                    const struct ckpt_chunk_ref *r);
/* Where chunk `id` lives, if known and not deleted: 1 and *loc (and *pack
 * for packed chunks), else 0. */
int ckpt__index_get(const struct ckpt_index *x, const uint8_t *id, struct ckpt_loc *loc,
                    struct ckpt_pack *pack);

struct ckpt_job;
struct ckpt_packbuf;       /* pipeline.c */
struct ckpt_pool;          /* worker threads, pipeline.c */

struct ckpt_save;          /* one save in flight, pipeline.c */

struct ckpt_ctx {
    struct ckpt_logger log;
    struct ckpt_store *store;
    char *store_url;
    char *run;
    ckpt_codec codec;
    int level;
    size_t chunk_bytes;
    unsigned workers;
    size_t staging_max;
    unsigned keep;
    ckpt_busy_policy on_busy;
    uint64_t interval_ms;
    size_t pinned_max;

    struct ckpt_item *items, *items_tail;
    size_t nitems;

    struct ckpt_pool *pool;

    /* Staging blocks, shared with workers. */
    pthread_mutex_t blk_mu;
    pthread_cond_t blk_cv;
    struct ckpt_block *blk_free;
    size_t blk_total;      /* allocated blocks */
    struct ckpt_arena *arenas;

    /* Run state known to this writer (guarded by run_mu). */
    pthread_mutex_t run_mu;
    pthread_cond_t run_cv;
    bool run_loaded;
    bool load_ok;        /* the last load read HEAD (or learned there is none) */
    bool have_head;
    char head_etag[CKPT_ETAG_MAX];
    struct ckpt_head head;
    struct ckpt_index idx;         /* chunks durable in the run (dedup) */
    /* objects of retained manifests, parallel to head.entries */
    struct ckpt_idlist *retained_ids;
    /* what the gc records HEAD names are deleting: a commit never uses it */
    struct ckpt_gc_victims gcv;
    /* objects of HEAD's damaged entries, parallel to head.damaged: kept by
     * retention (for inspection), never used for dedup */
    struct ckpt_idlist *damaged_ids;
    /* chunks a restore found damaged: never used for dedup (kept across
     * loads of the run) */
    struct ckpt_idset bad_chunks;
    /* a retained checkpoint is of a newer format than this version reads:
     * this writer must not commit (its retention would push it out) */
    bool run_newer;
    /* Packing (object stores): chunks go into packs of about pack_bytes,
     * at most pack_inflight of them uploading at once; buffers are kept. */
    size_t pack_bytes;
    unsigned pack_inflight;
    /* ckpt_restore_dir fsyncs each file before renaming it (CKPT_RESTORE_SYNC) */
    bool restore_sync;
    pthread_mutex_t pk_mu;
    pthread_cond_t pk_cv;
    struct ckpt_packbuf *pk_free;
    unsigned pk_total;
    struct ckpt_save *inflight;    /* at most one */
    ckpt_status last_status;       /* of the last finished persist, until reported */
    uint64_t epoch;

    /* Requests (any thread, signal handlers). */
    atomic_int requested;
    atomic_int req_codec;
    uint64_t last_save_mono_ns;

    struct ckpt_control *control;  /* control.c, NULL without ckptrun */
    struct ckpt_cuda *cuda;        /* cuda.c, NULL until a device region */

    pthread_mutex_t err_mu;
    char errmsg[CKPT_ERR_MAX];

    struct ckpt__progress progress; /* ckpt_progress(): atomics, any thread */
};

void ckpt__set_ctx_err(struct ckpt_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- pipeline.c ----------------------------------------------------------- */
typedef void (*ckpt_job_fn)(struct ckpt_ctx *ctx, void *arg, struct ckpt_codec_ws *ws);
ckpt_status ckpt__pool_start(struct ckpt_ctx *ctx);
void ckpt__pool_stop(struct ckpt_ctx *ctx);
/* Queue a job; runs on a worker with that worker's codec workspace (NULL if
 * it could not be allocated: the job reports NOMEM). */
ckpt_status ckpt__pool_submit(struct ckpt_ctx *ctx, ckpt_job_fn fn, void *arg);
/* Submit many jobs held back so far (used by save to release them at once). */
void ckpt__pool_hold(struct ckpt_ctx *ctx, int hold);
ckpt_status ckpt__save(struct ckpt_ctx *ctx, uint64_t step);
ckpt_status ckpt__wait(struct ckpt_ctx *ctx);
void ckpt__blocks_free(struct ckpt_ctx *ctx);
void ckpt__packbufs_free(struct ckpt_ctx *ctx);
/* Make sure `n` staging blocks exist (within the cap), mapped and touched,
 * so the first save does not pay page faults inside its copy. */
ckpt_status ckpt__blocks_reserve(struct ckpt_ctx *ctx, size_t n);
/* A mapping of n chunk-sized blocks, asked for huge pages and touched. */
struct ckpt_arena *ckpt__arena_new(size_t chunk, size_t n);
void ckpt__arena_free(struct ckpt_arena *a);

/* ---- run state (restore.c) -------------------------------------------------- */
/* Read HEAD (and, with ids, the retained manifests' chunk ids and the gc
 * records HEAD names) into ctx. */
ckpt_status ckpt__load_run(struct ckpt_ctx *ctx, bool ids);
/* Mark the retained checkpoints whose manifests are `keys` (relative to the
 * run) damaged in HEAD: out of the resume order, into "damaged" (a
 * conditional write, retried). Needs ctx->epoch (the lease holder). */
ckpt_status ckpt__mark_damaged(struct ckpt_ctx *ctx, char *const *keys, size_t n);
/* The victims of the gc records of h that are in force, into v. */
ckpt_status ckpt__read_gc_records(struct ckpt_ctx *ctx, const struct ckpt_head *h,
                                  struct ckpt_gc_victims *v);
void ckpt__run_state_free(struct ckpt_ctx *ctx); /* head, retained ids, known set */
ckpt_status ckpt__read_head(struct ckpt_ctx *ctx, struct ckpt_head *h, char *etag,
                            bool *exists);
ckpt_status ckpt__read_manifest(struct ckpt_ctx *ctx, const char *key,
                                struct ckpt_manifest *m);
/* Fetch and check every chunk of m not in `seen` (added there), over the
 * pool; damaged ones are logged and counted in *bad. */
ckpt_status ckpt__verify_manifest(struct ckpt_ctx *ctx, const struct ckpt_manifest *m,
                                  struct ckpt_idset *seen, size_t *bad, char *err);
void ckpt__run_key(const struct ckpt_ctx *ctx, const char *rel, char *out, size_t n);

/* Run a batch of chunk jobs over the pool and wait. */
struct ckpt_batch {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t pending;
    ckpt_status st;
    char err[CKPT_ERR_MAX];
    struct ckpt_idset *bad;  /* restore: ids of chunks found damaged (may be NULL) */
};
void ckpt__batch_init(struct ckpt_batch *b);
void ckpt__batch_destroy(struct ckpt_batch *b);
void ckpt__batch_done(struct ckpt_batch *b, ckpt_status st, const char *err);
ckpt_status ckpt__batch_wait(struct ckpt_batch *b);

/* ---- control.c ------------------------------------------------------------- */
struct ckpt_control;
ckpt_status ckpt__control_open(struct ckpt_ctx *ctx, const char *path);
void ckpt__control_close(struct ckpt_control *c);
void ckpt__control_send(struct ckpt_control *c, const char *json_line);

/* ---- signals.c ------------------------------------------------------------- */
/* SIGTERM/SIGINT reaching the process directly become a stop while a
 * context talks to ckptrun (see signals.c). install: @return 1 if a
 * handler was installed (the program had left a signal at its default). */
int ckpt__signals_install(struct ckpt_ctx *ctx);
void ckpt__signals_uninstall(struct ckpt_ctx *ctx); /* before ctx is freed */
int ckpt__signals_wake_fd(void);    /* readable when a report is pending, -1 none */
/* One pending report: the signal and when it came. @return 1, or 0 none. */
int ckpt__signals_take(int *sig, long long *when_ms);
int ckpt__signals_taken(void);      /* a signal was already taken as a stop */
void ckpt__signals_stopping(void);  /* ckptrun said `stopping` */
void ckpt__signals_stop_requested(void); /* ckptrun asked for the stop's save */

/* ---- cuda.c ------------------------------------------------------------------- */
/* The CUDA runtime is dlopen'ed at first use (CKPT_CUDA_RUNTIME overrides the
 * search); see docs/cuda.md. */
struct ckpt_cuda;  /* per-context stream and pinned pool, ctx->cuda */
/* 1 if CUDA device regions can be used in this process, else 0 with why. */
int ckpt__cuda_available(char *err);
/* Check a region about to be protected (device memory, one device per
 * context) and grow the pinned pool for it. */
ckpt_status ckpt__cuda_protect(struct ckpt_ctx *ctx, void *dev, size_t size, char *err);
/* Free the stream and pinned pool (ckpt_close). NULL-state safe. */
void ckpt__cuda_release(struct ckpt_ctx *ctx);
/* Save, training thread: copy [off, off+len) of device item `it` into dst.
 * Must be called for every chunk of every device item in list order; the
 * first call of a save synchronizes the device and starts the pipelined
 * device -> pinned copies. */
ckpt_status ckpt__cuda_snapshot_chunk(struct ckpt_ctx *ctx, const struct ckpt_item *it,
                                      uint64_t off, size_t len, void *dst, char *err);
/* End of a save's snapshot (also after a failure): drains queued copies. */
void ckpt__cuda_snapshot_end(struct ckpt_ctx *ctx);
/* Restore, any worker: host -> pinned -> device; done when it returns. */
ckpt_status ckpt__cuda_h2d(struct ckpt_ctx *ctx, void *dev, const void *host, size_t len,
                           char *err);

#endif
