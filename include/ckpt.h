/*
 * ckpt.h -- the libckpt manual.
 *
 * libckpt takes checkpoints of a running program's state (host memory regions,
 * GPU memory regions, files) and persists them to a *store* (a local directory
 * or an object store) so that a preempted program can resume, here or on any
 * other machine.
 *
 *   struct ckpt_ctx *ctx;
 *   ckpt_open(NULL, &ctx);                       // store/run from CKPT_* env
 *   ckpt_protect(ctx, "weights", w, w_bytes);    // register, never copies
 *   ckpt_protect(ctx, "adam",    m, m_bytes);
 *   uint64_t step = 0;
 *   if (ckpt_restore(ctx, &step) == CKPT_OK) step++;   // resume
 *   for (; step < n; step++) {
 *       train_one_step();
 *       if (step % 500 == 0 || ckpt_should_save(ctx))
 *           ckpt_save(ctx, step);                // stalls only for a memcpy
 *   }
 *   ckpt_wait(ctx);                              // last save durable
 *   ckpt_close(ctx);
 *
 * Model
 * -----
 * A *checkpoint* is an immutable set of named *items* taken at a *step*. Items
 * are cut into chunks; each chunk is optionally byte-grouped (for float
 * arrays), compressed (zstd or lz4, raw when that does not pay), checksummed
 * and named by the hash of its content, so bytes the run already stored are
 * never written again. A checkpoint is *committed* when all its chunks are
 * durable, then its manifest, then the run's HEAD names it. A crash at any
 * instant leaves the previous committed checkpoint restorable. The byte
 * formats are in docs/FORMAT.md.
 *
 * A run has one writer at a time. Commits are conditional on the HEAD a
 * writer last read, so a second context (or process) committing to the same
 * run has its commit refused with CKPT_E_FENCED rather than interleaving;
 * the refused writer re-reads the run and its next save may commit.
 * Under ckptrun, the lease makes "one writer" hold across machines.
 *
 * Memory
 * ------
 * ckpt_save() copies every protected host region into a staging pool of
 * chunk-sized blocks and returns; worker threads then compress and write.
 * Beyond the protected regions themselves, a context holds at most:
 *   staging  the total size of the protected regions (reserved by
 *            ckpt_protect() and touched right after it by one worker,
 *            which gives way to a save's or a restore's jobs, so the
 *            save's copy does not page-fault; a ckpt_unprotect() or
 *            ckpt_close() before it is done calls the rest off; kept
 *            until ckpt_close()),
 *            or at most `staging_max_bytes`;
 *   the pool, bounded by the settings, not by the state:
 *            per worker a filter and an output buffer of a chunk, a read
 *            buffer of a chunk touched only for protected files, and
 *            zstd's contexts (~2 MiB at level 1): about 3 x chunk_bytes;
 *            on object stores (packs) pack_inflight + 1 pack buffers of
 *            pack_bytes + chunk_bytes (pack_inflight = workers / 2); a
 *            restore's worker also keeps one range buffer of a chunk
 *            object (8 MiB + 48 by default).
 * So a save's peak resident memory less the protected state is at most the
 * state (its staged copy) plus the pool: 2 x 3 x 4 MiB = 24 MiB on file://
 * with two workers; 8 x 3 x 8 MiB + 5 x 40 MiB = ~400 MiB on an object
 * store with the default 8 connections (`bench/ckpt_bench.c` measures it).
 * The pool is allocated as it is first used and kept for the next save;
 * its buffers are mapped with huge pages where the kernel offers them
 * (MADV_HUGEPAGE), so a buffer's resident size rounds up to 2 MiB.
 * With a cap, ckpt_save() blocks while the pool is full, until workers free
 * blocks; the stall then grows, memory does not.
 * Device regions are staged in host memory the same way (they count in
 * "the protected regions"), plus a pinned pool of at most `pinned_max_bytes`
 * (default 64 MiB, at least two slots of 64 KiB) while a device region is
 * protected.
 *
 * Threads
 * -------
 * A context is used by one application thread at a time (the "training
 * thread"), except ckpt_should_save(), which any thread may call (but the
 * training thread only in a job with a collective: "Ranks"). Different
 * contexts are independent. The library runs its own worker threads; it never
 * calls back into the application except through the log callback, which may
 * be called from any library thread.
 *
 * Errors
 * ------
 * Every fallible function returns a ckpt_status. CKPT_OK is 0; values are
 * only ever appended. ckpt_strerror() describes a status, ckpt_status_name()
 * spells its identifier and ckpt_status_classify() says whether retrying can
 * help; ckpt_errmsg() gives the detail of the last failure of a context
 * (path, HTTP status, item, chunk).
 *
 * The library never prints unless asked: set `log_fn`, or CKPT_LOG=debug|
 * info|warn|error to log to stderr.
 *
 * Configuration
 * -------------
 * ckpt_open() takes a struct ckpt_config. Every setting has a default, and
 * most can also come from a CKPT_* environment variable: a field left at
 * zero (or NULL) means "the environment variable named, then the default";
 * a field that is set wins over the environment. The fields are listed with
 * the struct below.
 *
 * `version` tells the library which fields the caller's struct knows of.
 * CKPT_CONFIG_INIT sets it to the CKPT_VERSION_NUMBER of the header the
 * program was compiled with. The struct never changes size and no field
 * moves: a field added after 0.1.0 takes one of the slots that 0.1.0 left
 * in `reserved`, and the library reads it only when `version` is at least
 * the version that added it (below that it counts as zero), so a program
 * built against an older header -- whose slots may hold anything -- keeps
 * working. The slots:
 *
 *   slot  field            type                       since
 *   0     pack_bytes       size_t                     0.2.0 (version 200)
 *   1     connections      unsigned                   0.2.0
 *   2     restore_sync     int                        0.2.0
 *   3     retry_budget_ms  uint32_t                   0.2.0
 *   4     world_size       unsigned                   0.3.0 (version 300)
 *   5     rank             unsigned                   0.3.0
 *   6     collective       const struct ckpt_collective *   0.3.0
 *   7     rank_flags       unsigned                   0.3.0
 *
 * Each slot is exactly one pointer wide (an anonymous union: this header
 * needs C11 or C++11); a field that takes one is never wider. A program
 * built against 0.2.0 has slots 4-7 as `reserved[0..3]`; they are not read
 * for its `version` (200).
 *
 * A `version` of 0 means the struct was zeroed (`= {0}`, `= {}` in C++, or
 * memset) instead of starting from CKPT_CONFIG_INIT. Every field is then
 * at its default, the log level included: `log_level` 0 reads as
 * CKPT_LOG_INFO there, not as CKPT_LOG_DEBUG (whose value is 0, and stays
 * 0), and no field added after 0.1.0 is read. To set one of those, or to
 * log at debug level through a callback, start from CKPT_CONFIG_INIT. A
 * version of another major number is refused (CKPT_E_INVAL).
 */
#ifndef CKPT_H
#define CKPT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CKPT_API __attribute__((visibility("default")))
#else
#define CKPT_API
#endif

#define CKPT_VERSION_MAJOR 0
#define CKPT_VERSION_MINOR 5
#define CKPT_VERSION_PATCH 0
#define CKPT_VERSION_STRING "0.5.0"
/* Encoded as MAJOR*10000 + MINOR*100 + PATCH; CKPT_CONFIG_INIT puts it in
 * `version` (see "Configuration" above). */
#define CKPT_VERSION_NUMBER                                                   \
    (CKPT_VERSION_MAJOR * 10000 + CKPT_VERSION_MINOR * 100 + CKPT_VERSION_PATCH)

/* Status codes: one table, from which the enum, ckpt_strerror(),
 * ckpt_status_name() and ckpt_status_classify() are all made (the way
 * libuv's UV_ERRNO_MAP is). Each row: the name after CKPT_, its value (stable:
 * rows are only ever appended), its retry class after CKPT_CLASS_, and the
 * message ckpt_strerror() gives. */
#define CKPT_STATUS_MAP(X)                                                    \
    X(OK, 0, OK, "success")                                                   \
    /* bad argument (usage error) */                                          \
    X(E_INVAL, 1, USAGE, "invalid argument")                                  \
    X(E_NOMEM, 2, PERMANENT, "out of memory")                                 \
    /* no such checkpoint / object / item */                                  \
    X(E_NOENT, 3, PERMANENT, "not found")                                     \
    /* local I/O error (see ckpt_errmsg) */                                   \
    X(E_IO, 4, PERMANENT, "I/O error")                                        \
    /* stored data failed its checksum or format check */                     \
    X(E_CORRUPT, 5, CORRUPT, "data failed its integrity check")               \
    /* a region's size differs from the checkpoint's */                       \
    X(E_SIZE, 6, USAGE, "region size differs from the checkpoint")            \
    /* name already protected / object already exists */                      \
    X(E_EXISTS, 7, USAGE, "already exists")                                   \
    /* conditional write refused (lost a race or lease) */                    \
    X(E_PRECONDITION, 8, PERMANENT, "conditional write refused")              \
    /* store refused credentials or none were found */                        \
    X(E_AUTH, 9, PERMANENT, "store refused the credentials (or none found)")  \
    /* store could not be reached */                                          \
    X(E_UNREACHABLE, 10, RETRYABLE, "store unreachable")                      \
    /* store failed in a way worth retrying (5xx, reset) */                   \
    X(E_TRANSIENT, 11, RETRYABLE, "transient store failure")                  \
    /* store asked us to slow down */                                         \
    X(E_THROTTLED, 12, THROTTLED, "store throttled the request")              \
    /* feature not in this build or not on this store */                      \
    X(E_UNSUPPORTED, 13, PERMANENT, "unsupported in this build or store")     \
    /* a save is still in flight (on_busy = SKIP) */                          \
    X(E_BUSY, 14, PERMANENT, "a save is still in flight")                     \
    /* bad configuration (URL, codec, env variable) */                        \
    X(E_CONFIG, 15, USAGE, "bad configuration")                               \
    /* another runner took over the run: commit refused */                    \
    X(E_FENCED, 16, PERMANENT, "another runner took over this run")           \
    /* store or local disk full (ckpt_errmsg says which) */                   \
    X(E_NOSPACE, 17, PERMANENT,                                               \
      "no space left (see the detail: store or local disk)")                  \
    /* a stored name would escape the target directory */                     \
    X(E_UNSAFE, 18, PERMANENT, "stored name escapes the target directory")    \
    /* CUDA runtime failure (see ckpt_errmsg) */                              \
    X(E_CUDA, 19, PERMANENT, "CUDA error")                                    \
    /* protected set differs from the checkpoint's items */                   \
    X(E_MISMATCH, 20, USAGE, "protected items differ from the checkpoint")    \
    X(E_INTERNAL, 21, PERMANENT, "internal error")                            \
    /* permission denied or read-only file system: a local disk or a          \
     * file:// store (ckpt_errmsg says which) */                              \
    X(E_PERM, 22, PERMANENT, "permission denied or read-only file system")    \
    /* a file protected with CKPT_FILE_AS_IS is no longer the version it      \
     * was when protected */                                                  \
    X(E_CHANGED, 23, PERMANENT, "a protected file changed while it was saved") \
    /* the ranks of a multi-rank run disagree, the collective failed, or a    \
     * checkpoint's world size differs from this job's (ckpt_errmsg names    \
     * both sizes) */                                                         \
    X(E_WORLD, 24, USAGE, "ranks disagree or the world size differs")

typedef enum {
#define CKPT_STATUS_ENUM_(name, value, cls, msg) CKPT_##name = value,
    CKPT_STATUS_MAP(CKPT_STATUS_ENUM_)
#undef CKPT_STATUS_ENUM_
} ckpt_status;

/* Retry classes for statuses, used by the store layer and ckptrun. */
typedef enum {
    CKPT_CLASS_OK = 0,
    CKPT_CLASS_RETRYABLE,   /* transient: retry with backoff */
    CKPT_CLASS_THROTTLED,   /* retry, and slow the whole client down */
    CKPT_CLASS_PERMANENT,   /* do not retry */
    CKPT_CLASS_CORRUPT,     /* data is damaged: do not retry, try older data */
    CKPT_CLASS_USAGE        /* caller error */
} ckpt_status_class;

/* @return a static, never-NULL English message for any status value
 * ("unknown status" for a value no row has). */
CKPT_API const char *ckpt_strerror(ckpt_status st);
/* @return the status's identifier ("CKPT_E_NOENT"), static and never NULL
 * ("unknown" for a value no row has). Since 0.2.0. */
CKPT_API const char *ckpt_status_name(ckpt_status st);
/* @return the retry class of a status (CKPT_CLASS_PERMANENT for a value no
 * row has). */
CKPT_API ckpt_status_class ckpt_status_classify(ckpt_status st);

typedef enum {
    CKPT_CODEC_DEFAULT = 0, /* from CKPT_CODEC, else zstd level 1 */
    CKPT_CODEC_NONE = 1,
    CKPT_CODEC_ZSTD = 2,
    CKPT_CODEC_LZ4 = 3
} ckpt_codec;

typedef enum { CKPT_BUSY_WAIT = 0, CKPT_BUSY_SKIP = 1 } ckpt_busy_policy;

typedef enum {
    CKPT_LOG_DEBUG = 0,
    CKPT_LOG_INFO = 1,
    CKPT_LOG_WARN = 2,
    CKPT_LOG_ERROR = 3,
    CKPT_LOG_OFF = 4
} ckpt_log_level;

/* Log callback: `subject` is a short module name ("save", "store", ...),
 * `msg` a single line without newline. Called from any library thread;
 * must not call back into libckpt. Credentials never appear in messages. */
typedef void (*ckpt_log_fn)(void *user, ckpt_log_level level,
                            const char *subject, const char *msg);

/* pack_bytes: chunks each in an object of their own, no packs. */
#define CKPT_PACK_NONE ((size_t)-1)

/* Configuration (see "Configuration" at the top: defaults, the environment,
 * versions and slots). Start from CKPT_CONFIG_INIT, or zero it; every zero
 * or NULL field falls back to the CKPT_* environment variable named, then
 * to the default. ckpt_open() reads the struct and copies its strings; it
 * may be freed once ckpt_open() returns. Values outside the ranges below
 * are refused: CKPT_E_CONFIG, with the reason in ckpt_errmsg(NULL). */
struct ckpt_config {
    unsigned version;          /* CKPT_VERSION_NUMBER (set by CKPT_CONFIG_INIT); 0: zeroed */
    const char *store;         /* store URL (CKPT_STORE; default file://$XDG_DATA_HOME/ckpt) */
    const char *run;           /* run name (CKPT_RUN; default basename of cwd) */
    ckpt_codec codec;          /* (CKPT_CODEC = zstd[:LEVEL]|lz4|none) */
    int codec_level;           /* zstd level 1..19, 0 = 1 */
    size_t chunk_bytes;        /* (CKPT_CHUNK_BYTES) default 4 MiB on file://, 8 MiB on
                                  object stores; 64 KiB..64 MiB. On object stores
                                  chunks travel in packs (pack_bytes): docs/FORMAT.md */
    unsigned workers;          /* compression/upload threads (CKPT_WORKERS), at most 64;
                                  0 = min(ncpu, 8) for file://, for object stores
                                  `connections` if given (at most 64), else at least 8 */
    size_t staging_max_bytes;  /* cap on the staging pool, 0 = no cap */
    unsigned keep;             /* committed checkpoints retained (CKPT_KEEP), 0 = 3 */
    ckpt_busy_policy on_busy;  /* ckpt_save() while a save is in flight */
    uint64_t interval_ms;      /* ckpt_should_save() turns true this often (CKPT_INTERVAL), 0 = off */
    ckpt_log_fn log_fn;        /* NULL: CKPT_LOG to stderr, else silent */
    void *log_user;
    ckpt_log_level log_level;  /* used with log_fn; default INFO (version 0: 0 = INFO) */
    int no_control;            /* 1: ignore CKPT_SOCKET (do not talk to ckptrun), and
                                  install no SIGTERM handler alone (ckpt_open) */
    uint64_t epoch;            /* lease epoch recorded in manifests (CKPT_EPOCH), 0 = none */
    size_t pinned_max_bytes;   /* CUDA pinned staging pool, 0 = 64 MiB (docs/cuda.md) */

    /* Since 0.2.0 (version >= 200), in the slots 0.1.0 reserved: */
    union {                    /* slot 0 */
        size_t pack_bytes;     /* chunks travel in objects (packs) of about this size
                                  (CKPT_PACK_BYTES; "0" there = none): 64 KiB..1 GiB,
                                  or CKPT_PACK_NONE; 0 = 32 MiB on object stores,
                                  none on file:// (docs/FORMAT.md) */
        void *slot0_;
    };
    union {                    /* slot 1 */
        unsigned connections;  /* parallel store connections (CKPT_CONNECTIONS), 1..256;
                                  0 = 16 on object stores; also sets `workers` there */
        void *slot1_;
    };
    union {                    /* slot 2 */
        int restore_sync;      /* fsync each restored file before its rename
                                  (CKPT_RESTORE_SYNC = 0|1): 1 yes, -1 no, 0 = no */
        void *slot2_;
    };
    union {                    /* slot 3 */
        uint32_t retry_budget_ms; /* how long an object-store request is retried
                                  (CKPT_RETRY_BUDGET_MS), 0 = 120 s; the minimum
                                  attempts are made whatever the budget
                                  (docs/stores.md, "Retries") */
        void *slot3_;
    };

    /* Since 0.3.0 (version >= 300): multi-rank runs ("Ranks" below). */
    union {                    /* slot 4 */
        unsigned world_size;   /* ranks in the job; 0 = from the environment
                                  ("Ranks"), else 1 */
        void *slot4_;
    };
    union {                    /* slot 5 */
        unsigned rank;         /* this process's rank, read only with a world_size */
        void *slot5_;
    };
    union {                    /* slot 6 */
        const struct ckpt_collective *collective; /* how ranks agree; NULL: none
                                  (kept by pointer: must outlive the context) */
        void *slot6_;
    };
    union {                    /* slot 7 */
        unsigned rank_flags;   /* CKPT_RANKS_* */
        void *slot7_;
    };
};
#ifndef __cplusplus
#define CKPT_CONFIG_INIT                                                      \
    {                                                                         \
        .version = CKPT_VERSION_NUMBER, .store = NULL, .run = NULL,           \
        .codec = CKPT_CODEC_DEFAULT, .on_busy = CKPT_BUSY_WAIT,               \
        .log_level = CKPT_LOG_INFO                                            \
    }
#else
/* C++ has designated initializers only from C++20, and compilers warn of
 * the fields they leave out: the same values, set on a zeroed struct. */
static inline struct ckpt_config ckpt__config_init_cxx(void)
{
    struct ckpt_config c = {};
    c.version = CKPT_VERSION_NUMBER;
    c.codec = CKPT_CODEC_DEFAULT;
    c.on_busy = CKPT_BUSY_WAIT;
    c.log_level = CKPT_LOG_INFO;
    return c;
}
#define CKPT_CONFIG_INIT (ckpt__config_init_cxx())
#endif

/* Element type hint for ckpt_protect_ex(): enables the byte-grouping filter,
 * which stores the bytes of 2- or 4-byte floats grouped by significance and
 * compresses bf16/fp16/fp32 weights markedly better. */
typedef enum {
    CKPT_ELEM_BYTES = 0, /* opaque bytes */
    CKPT_ELEM_F16 = 1,   /* fp16 or bf16: element size 2 */
    CKPT_ELEM_F32 = 2,   /* fp32: element size 4 */
    CKPT_ELEM_E2 = 3,    /* any 2-byte elements */
    CKPT_ELEM_E4 = 4     /* any 4-byte elements */
} ckpt_elem;

struct ckpt_ctx;

/* Open a context on a store and run.
 * @cfg may be NULL (all from environment, as CKPT_CONFIG_INIT). On success
 * *out owns a context that must be released with ckpt_close(). The whole
 * configuration is checked before the store is opened. Opening does not
 * touch the store's data beyond checking it can be reached; the run is
 * created on first save. If CKPT_SOCKET is set (the program runs under
 * ckptrun) and `no_control` is not, the context connects to it and receives
 * checkpoint requests. Without ckptrun (and without `no_control`), if the
 * program left SIGTERM at its default, a handler is installed that makes a
 * SIGTERM a stop once the program asks (ckpt_should_save): its save is
 * committed, then the process ends of that SIGTERM (docs/CONTROL.md,
 * "Signals"; CKPT_STOP_GRACE, a duration, default 20s: a save must begin
 * within it, else exit 143; 0: no handler). On failure ckpt_errmsg(NULL)
 * says why.
 * @return CKPT_OK, CKPT_E_CONFIG (bad URL, codec, field or environment
 *         variable), CKPT_E_AUTH, CKPT_E_UNREACHABLE, CKPT_E_NOMEM,
 *         CKPT_E_INVAL (NULL out, or a config of another major version). */
CKPT_API ckpt_status ckpt_open(const struct ckpt_config *cfg, struct ckpt_ctx **out);

/* Register a host memory region under a unique name. Names become file
 * names on restore (ckpt_restore_dir): any relative '/'-separated path of
 * well-formed UTF-8 without control characters, at most 4095 bytes, each
 * segment at most 255 bytes and none empty, "." or ".."; no item may also be
 * the directory of another ("data" and "data/a.bin"; checked by
 * ckpt_save()). Names outside [A-Za-z0-9._-/+=@,] (or longer than 255
 * bytes) make the checkpoint manifest format 3 (docs/FORMAT.md).
 * The memory is never copied here; it must stay valid and the same size
 * until ckpt_close() or ckpt_unprotect(). Only ckpt_save() (copy) and ckpt_restore() (write) touch
 * it, both on the calling thread.
 * @return CKPT_OK, CKPT_E_INVAL (bad name, NULL with size>0), CKPT_E_EXISTS. */
CKPT_API ckpt_status ckpt_protect(struct ckpt_ctx *ctx, const char *name,
                                  void *ptr, size_t size);
/* As ckpt_protect() with an element type hint (enables byte grouping). */
CKPT_API ckpt_status ckpt_protect_ex(struct ckpt_ctx *ctx, const char *name,
                                     void *ptr, size_t size, ckpt_elem elem);
/* Register a CUDA device region (cudaMalloc'ed or managed memory) under a
 * unique name, as ckpt_protect() does for host memory: never copied here, it
 * must stay allocated and the same size until ckpt_close()/ckpt_unprotect().
 * ckpt_save() captures it after all work previously submitted to its device
 * completes, on any stream (it calls cudaDeviceSynchronize() on that device
 * once per save), then copies it through a bounded pinned staging pool
 * (`pinned_max_bytes`, reserved here) on the library's own non-blocking
 * stream; it returns once the device state is in host staging memory, so
 * kernels launched after it may modify the region. ckpt_restore() writes the
 * region and its copies are complete when it returns. Work that other threads
 * submit to the device while ckpt_save() or ckpt_restore() runs is not
 * ordered with them. All device regions of a context must be on one device;
 * the application's current device is left as it was.
 * The CUDA runtime is loaded at the first call (dlopen: libcudart.so.13, .12,
 * then libcudart.so, or the path in CKPT_CUDA_RUNTIME); libckpt never links
 * it. See docs/cuda.md.
 * @return CKPT_OK; CKPT_E_UNSUPPORTED when this build has no CUDA support, no
 *         runtime can be loaded or no device is usable (ckpt_errmsg says which;
 *         host regions keep working), or the region is on another device than
 *         the context's others; CKPT_E_INVAL (bad name, NULL with size > 0,
 *         not device memory); CKPT_E_EXISTS; CKPT_E_CUDA (pinned memory or
 *         stream could not be created). */
CKPT_API ckpt_status ckpt_protect_device(struct ckpt_ctx *ctx, const char *name,
                                         void *dev_ptr, size_t size);
/* Register a file (by path, opened again at each save). ckpt_save() stats
 * it (its shape is fixed then: size, mode) and the workers read its bytes
 * during the background persist. A file rewritten or replaced meanwhile is
 * noticed (device, inode, size, mtime and ctime to the nanosecond, compared
 * once its last chunk is read; a rename over it at every chunk) and read
 * again, whole, from a new snapshot: a checkpoint never holds a mix of two
 * versions. After 3 reads that each saw it change the save fails
 * (CKPT_E_IO, naming the file); a file deleted before ckpt_save() fails it
 * at once, one deleted while it is read fails the persist, both with
 * CKPT_E_NOENT naming the item; nothing is committed then. (File systems
 * whose timestamps are coarser than the kernel's, such as FAT or some NFS
 * servers, can hide a rewrite of the same size within their resolution.)
 * On restore the file is rewritten atomically (temp + rename).
 * @return CKPT_OK, CKPT_E_INVAL, CKPT_E_EXISTS. */
CKPT_API ckpt_status ckpt_protect_file(struct ckpt_ctx *ctx, const char *name,
                                       const char *path);
/* Flags of ckpt_protect_file_ex(). */
#define CKPT_FILE_AS_IS 1u /* commit the file as it is now, or not at all */
/* As ckpt_protect_file(), with flags. CKPT_FILE_AS_IS: the version of the
 * file this call finds (device, inode, size, mtime and ctime, read here)
 * is the one to commit. If the file is another version at ckpt_save(), or
 * changes while the workers read it, the save fails with CKPT_E_CHANGED
 * (from ckpt_save() or ckpt_wait(), naming the file) instead of reading
 * it again: a supervisor that judged that version complete (ckptrun's
 * directory watch) never commits a later one it has not judged. A file
 * missing here is CKPT_E_NOENT.
 * @return CKPT_OK, CKPT_E_INVAL (bad name or path, unknown flag),
 *         CKPT_E_EXISTS, CKPT_E_NOENT, CKPT_E_IO, CKPT_E_NOMEM. */
CKPT_API ckpt_status ckpt_protect_file_ex(struct ckpt_ctx *ctx, const char *name,
                                          const char *path, unsigned flags);
/* Register a symbolic link (Lightning's `last.ckpt`) under a unique name:
 * `target` is the link's text as readlink(2) gives it, copied here. It must
 * be relative (at most 4095 bytes of UTF-8 without control characters) and,
 * resolved lexically from the link's own directory (".." taken textually;
 * every directory on the way one that holds items of the checkpoint), name
 * a non-link item or a directory of items of the same checkpoint: never
 * outside it, never the link's own directory, never another link. Where it
 * lands is checked by ckpt_save() against the items protected then (so they
 * may be registered in any order): CKPT_E_INVAL from ckpt_save(), with the
 * reason in ckpt_errmsg(), when it does not. A checkpoint holding a link is
 * manifest format 3 (docs/FORMAT.md).
 * On restore, ckpt_restore_dir() creates each link after every file is in
 * place (symlink(2) under a temporary name, then rename(2)); nothing is
 * ever written through a link. ckpt_restore() ignores link items (stored or
 * protected): there is no region to write.
 * @return CKPT_OK, CKPT_E_INVAL (bad name or target), CKPT_E_EXISTS,
 *         CKPT_E_NOMEM. */
CKPT_API ckpt_status ckpt_protect_link(struct ckpt_ctx *ctx, const char *name,
                                       const char *target);
/* Forget a region, file or link. @return CKPT_OK or CKPT_E_NOENT. Waits for an
 * in-flight save first. */
CKPT_API ckpt_status ckpt_unprotect(struct ckpt_ctx *ctx, const char *name);

/* Restore the newest committed checkpoint (highest step; among those of one
 * step, the latest commit) whose chunks all verify into the protected
 * regions and files. A checkpoint with any missing or damaged part
 * (manifest, chunk, pack, a rank's part manifest), or one this version
 * cannot read (a newer format), is reported in the log (warn) and ckpt_errmsg() (item,
 * chunk, expected vs found) and the next older one is used. A context with
 * a lease epoch (`epoch`: a trainer under ckptrun) then marks the damaged
 * ones in HEAD (ckpt_mark_damaged). A local error (out of memory, a
 * protected file's disk full or read-only) or a store error stops the
 * restore instead: an older checkpoint would not fare better. Sizes are checked for every item before anything is written: a size
 * difference returns CKPT_E_SIZE with nothing overwritten. Every protected
 * name must exist in the checkpoint (else CKPT_E_MISMATCH, nothing written);
 * stored items not protected are ignored. When the newest checkpoint
 * disagrees with the protected items but an older one fits, the newer
 * one's manifest is taken as damaged (warn) and the older one restored;
 * CKPT_E_SIZE / CKPT_E_MISMATCH (the newest one's reason) mean that every
 * checkpoint disagrees: the program changed. A checkpoint another writer's
 * retention removed meanwhile is skipped, not reported as damaged. A
 * damaged HEAD is replaced by the run's manifests (docs/FORMAT.md, "A
 * damaged HEAD"; logged as a warning). Protected files are replaced as
 * ckpt_restore_dir() writes its files (renamed into place once verified;
 * fsynced first only with `restore_sync`).
 * A multi-rank checkpoint restores this rank's part with the replicated
 * items; with a collective every rank restores the same step, falling back
 * together ("Ranks"): past a step damaged on any rank, and past one whose
 * items do not fit some rank's while an older one fits every rank (the
 * ranks agree that every rank's items fit before any rank writes, so
 * CKPT_E_SIZE / CKPT_E_MISMATCH leave every rank's items untouched). One of another world size than this job's stops the
 * restore with CKPT_E_WORLD (naming both sizes), unless every protected
 * item is replicated; ckpt_restore_part() reads any part.
 * After CKPT_OK from a fallback, ckpt_errmsg() says which newer one was
 * passed and why.
 * @step receives the step restored (may be NULL).
 * @return CKPT_OK, CKPT_E_NOENT (no committed checkpoint), CKPT_E_SIZE,
 *         CKPT_E_MISMATCH, CKPT_E_CORRUPT (none verified; regions may hold
 *         partial data), CKPT_E_WORLD, store errors. */
CKPT_API ckpt_status ckpt_restore(struct ckpt_ctx *ctx, uint64_t *step);

/* Cheap (one atomic load plus a clock read when an interval is set); any
 * thread. @return nonzero once a checkpoint is wanted: a request from ckptrun
 * (preemption notice, signal, periodic), or `interval_ms` elapsed since the
 * last save; without ckptrun, a SIGTERM once this has been called (the save
 * that follows then waits for its commit and ends the process with that
 * SIGTERM: docs/CONTROL.md, "Signals", Alone; CKPT_STOP_GRACE). Cleared by ckpt_save(). With a collective ("Ranks") it is a
 * collective call, on the training thread only: one all-reduce of 3
 * integers, true on every rank when any rank wants a save, and it commits a
 * global step once all its parts are durable. */
CKPT_API int ckpt_should_save(struct ckpt_ctx *ctx);

/* Snapshot every protected item at `step` and return; the snapshot is then
 * compressed, written and committed in the background. When it returns, the
 * program may modify its regions freely.
 * A stop's save (ckptrun asked for it to stop the job, or SIGTERM/SIGINT
 * was taken as a stop: docs/CONTROL.md), one rank, reads the host regions
 * in place instead of copying them and returns once every chunk of them is
 * read, compressed and put (the last packs and the commit follow): nothing
 * the program computes after it is kept, so meanwhile its CPU goes to the
 * compression, and no copy delays the first upload. The outcome is still
 * reported by ckpt_wait().
 * If a previous save is still persisting: with CKPT_BUSY_WAIT (default) this
 * waits for it to finish first; with CKPT_BUSY_SKIP it returns CKPT_E_BUSY
 * at once and saves nothing.
 * With several ranks it writes this rank's part ("Ranks"; a rank with
 * nothing protected writes an empty part) and, with a collective, first
 * checks that every rank passes the same step (CKPT_E_WORLD if not).
 * @return CKPT_OK (snapshot taken), CKPT_E_BUSY, CKPT_E_NOMEM, CKPT_E_INVAL
 *         (nothing protected, one rank; or the item set cannot be restored: an item
 *         that is also a directory of another, a link whose target does not
 *         land on an item of the checkpoint; ckpt_errmsg() says which),
 *         CKPT_E_CUDA, CKPT_E_NOENT (a protected file does not exist),
 *         CKPT_E_IO (a protected file cannot be read). The outcome of the background persist is reported by
 *         ckpt_wait(); a failed persist that nobody waited for is logged (warn)
 *         when the next save starts, and the run keeps its previous commit. */
CKPT_API ckpt_status ckpt_save(struct ckpt_ctx *ctx, uint64_t step);

/* Block until the last save is committed or failed. With a collective,
 * until its global step is committed or refused, with the same outcome on
 * every rank; with CKPT_RANKS_STORE, until this rank's part is durable.
 * @return CKPT_OK (committed, or nothing in flight) or the persist's error
 *         (store errors, CKPT_E_FENCED, CKPT_E_IO, CKPT_E_WORLD ...).
 *         Reported once. */
CKPT_API ckpt_status ckpt_wait(struct ckpt_ctx *ctx);

/* Wait for an in-flight save, stop the workers, disconnect from ckptrun and
 * free everything. NULL-safe. Protected memory is not touched. With a
 * collective it is a collective call: the global step in progress ends on
 * every rank first, as ckpt_wait() ends it. */
CKPT_API void ckpt_close(struct ckpt_ctx *ctx);

/* @return the detail of the context's last failure ("" if none). Valid until
 * the next call on the context. ckpt_errmsg(NULL) gives the detail of the
 * calling thread's last failed ckpt_open(). */
CKPT_API const char *ckpt_errmsg(struct ckpt_ctx *ctx);

/* ------------------------------------------------------------------------ */
/* Administration: used by `ckptrun save|restore|ls|verify|gc`.              */

/* One committed checkpoint, as listed by ckpt_list(). The struct and the
 * string it points to belong to the library and are valid only during the
 * call of the ckpt_list_fn that receives them: copy what you keep. */
struct ckpt_info {
    uint64_t step;
    uint64_t seq;           /* commit sequence number of the run */
    uint64_t epoch;         /* lease epoch of the writer */
    int64_t time_ms;        /* commit time, Unix ms; -1: the manifest could not
                               be read (missing, damaged, or the store failed):
                               only step, seq and manifest are known, the
                               other counts are 0 */
    uint64_t items;
    uint64_t raw_bytes;     /* sum of item sizes */
    uint64_t stored_bytes;  /* compressed bytes of all referenced chunks */
    uint64_t new_bytes;     /* compressed bytes first written by this checkpoint */
    uint64_t chunks;
    const char *manifest;   /* store key of the manifest ("<run>/manifests/..."),
                               valid during the callback only */
    uint64_t links;         /* link items among `items` (ckpt_protect_link) */
    unsigned world_size;    /* ranks whose parts make the checkpoint (1: one
                               writer); since 0.3.0 */
};
typedef int (*ckpt_list_fn)(void *user, const struct ckpt_info *info);
/* Call fn for each committed checkpoint of the run in the resume order
 * (highest step first; checkpoints marked damaged are not listed), on the
 * calling thread; fn returns nonzero to stop. A checkpoint whose manifest
 * cannot be read is still listed, with time_ms -1 (see struct ckpt_info).
 * A damaged HEAD is replaced by the checkpoints the run's manifests show
 * (docs/FORMAT.md, "A damaged HEAD"; logged as a warning).
 * @return CKPT_OK (also for a run with none), store errors (also while
 *         reading the manifests of a damaged HEAD). */
CKPT_API ckpt_status ckpt_list(struct ckpt_ctx *ctx, ckpt_list_fn fn, void *user);

/* What a run's HEAD object says (docs/FORMAT.md, "HEAD"), for a tool that
 * lists many runs with one request each and no context per run: it reads
 * `<run>/HEAD` itself (ckpt_store.h) and hands the bytes to
 * ckpt_head_parse(). Since 0.4.0. */
struct ckpt_head_info {
    uint64_t step;          /* the highest retained step: the one resumed from
                               (0 when `checkpoints` is 0) */
    uint64_t seq;           /* sequence number of the last commit */
    uint64_t epoch;         /* lease epoch of HEAD's last writer */
    int64_t time_ms;        /* when HEAD was last written, Unix ms (its writer's clock) */
    unsigned checkpoints;   /* committed checkpoints retained */
    unsigned damaged;       /* checkpoints a restore marked damaged, kept for inspection */
    unsigned format;        /* HEAD's format (1 to 4) */
    uint64_t reserved[4];
};
/* Check and read the bytes of a HEAD object (untrusted: bounded, checksummed
 * and range-checked as every reader of the library checks it). Thread-safe.
 * @return CKPT_OK, CKPT_E_CORRUPT (damaged, or not a HEAD),
 *         CKPT_E_UNSUPPORTED (a newer format than this library reads),
 *         CKPT_E_INVAL (NULL buf or out). */
CKPT_API ckpt_status ckpt_head_parse(const void *buf, size_t len, struct ckpt_head_info *out);

/* Write every item of the checkpoint at `step` (or, with CKPT_STEP_LATEST,
 * the first of the resume order that restores whole, falling back as
 * ckpt_restore() does, and marking as it does in a context with a lease
 * epoch) as a file under `dir`, named by the item's name (a name with '/'
 * creates sub-directories). Names that would
 * escape `dir` are refused (CKPT_E_UNSAFE). Files are written to temporary
 * names and renamed into place after they verify. They are not fsynced (like
 * cp, curl or aws s3 cp: the store keeps the durable copy) unless the
 * context was opened with `restore_sync` (or CKPT_RESTORE_SYNC=1); then
 * each file is durable before its rename. Any number of files restores: at most a
 * quarter of the free file descriptors (RLIMIT_NOFILE), 256 at most, are
 * open at once. Before anything is written, the files' total size (a chunk
 * named many times counting each time) is checked against the free space
 * of the target file system: CKPT_E_NOSPACE, nothing written. Errors of
 * the local disk say "local disk" in ckpt_errmsg() and are never reported
 * as damage (no fallback for them).
 * @restored receives the step written (may be NULL).
 * A multi-rank checkpoint writes this context's rank's part with the
 * replicated items; one of another world size than the context's is
 * CKPT_E_WORLD (naming both sizes).
 * @return CKPT_OK, CKPT_E_NOENT, CKPT_E_CORRUPT (damaged; with
 *         CKPT_STEP_LATEST: none restored whole), CKPT_E_UNSUPPORTED (a newer
 *         format), CKPT_E_WORLD, CKPT_E_UNSAFE, CKPT_E_NOSPACE,
 *         CKPT_E_PERM (read-only or not writable), CKPT_E_IO, store errors. */
#define CKPT_STEP_LATEST UINT64_MAX
#define CKPT_STEP_ALL (UINT64_MAX - 1)
CKPT_API ckpt_status ckpt_restore_dir(struct ckpt_ctx *ctx, uint64_t step,
                                      const char *dir, uint64_t *restored);

/* Read and check every chunk of the checkpoint at `step`, of the newest
 * committed one (CKPT_STEP_LATEST) or of every committed one (CKPT_STEP_ALL).
 * Each damaged chunk is described in the log (item, chunk, expected vs
 * found); the first in ckpt_errmsg(). Its verdict is restore's: a manifest
 * restore refuses (a newer format, a damaged part) fails verify too. A
 * multi-rank checkpoint is checked whole: every rank's part, and a
 * replicated item whose parts disagree fails (CKPT_E_CORRUPT). A checkpoint
 * another writer's retention removed while verify read it is gone, not
 * damaged: skipped (CKPT_E_NOENT when it was the one `step` asked for). A
 * damaged HEAD is CKPT_E_CORRUPT, after the checkpoints the run's manifests
 * show are checked (the message says whether they are intact). Every
 * manifest is read from the store, never from the copies a context keeps of
 * those it read last (manifests are immutable: the other calls read each
 * from the store once, docs/FORMAT.md "Reads").
 * @return CKPT_OK, CKPT_E_CORRUPT, CKPT_E_UNSUPPORTED, CKPT_E_NOENT, store
 *         errors. */
CKPT_API ckpt_status ckpt_verify(struct ckpt_ctx *ctx, uint64_t step);

/* Apply retention: keep the `keep` highest steps (never dropping the newest
 * one whose objects are all present), delete the others' manifests, those of
 * checkpoints marked damaged at least `min_age_ms` ago, and every chunk or
 * pack that no kept checkpoint references and that is at least `min_age_ms`
 * old by the store's clock (see ckpt_gc_ex()).
 * @deleted receives the number of objects deleted (may be NULL). */
CKPT_API ckpt_status ckpt_gc(struct ckpt_ctx *ctx, unsigned keep,
                             uint64_t min_age_ms, uint64_t *deleted);

/* ckpt_gc_ex(): each object it deletes (or would delete, with
 * CKPT_GC_DRY_RUN) is shown to `fn`: its store key, its size and why
 * ("checkpoint step 4: past --keep 1", "chunk no kept checkpoint uses, 3h
 * old", "manifest never committed (no HEAD entry), 2h old"). */
typedef void (*ckpt_gc_fn)(void *user, const char *key, uint64_t size, const char *why);
#define CKPT_GC_DRY_RUN 1u /* decide and report, delete nothing, rewrite nothing */
/* ckpt_gc() with a report of each deletion and flags (CKPT_GC_DRY_RUN).
 * Safe against saves of other processes and machines at any instant: it
 * never deletes an object a committed checkpoint uses, nor one a save in
 * flight will commit with -- such a save is refused at its commit instead
 * (CKPT_E_PRECONDITION, "a gc ... is deleting ...") and the next one
 * writes what it needs again. Ages are taken from the store's clock (the
 * time it gives an object gc writes), so --min-age holds whatever this
 * machine's clock says. An out-of-memory or store error while it learns
 * what the kept checkpoints use deletes nothing; a checkpoint of a newer
 * format stops it (CKPT_E_UNSUPPORTED: upgrade). docs/FORMAT.md, "Garbage
 * collection". @deleted: objects deleted (with CKPT_GC_DRY_RUN: that
 * would be). @return CKPT_OK, CKPT_E_INVAL (keep 0), CKPT_E_NOMEM,
 * CKPT_E_UNSUPPORTED, CKPT_E_PRECONDITION (saves kept committing: run it
 * again), store errors. */
CKPT_API ckpt_status ckpt_gc_ex(struct ckpt_ctx *ctx, unsigned keep, uint64_t min_age_ms,
                                unsigned flags, ckpt_gc_fn fn, void *user, uint64_t *deleted);

/* Fence the run: rewrite its HEAD (same checkpoints, `epoch` recorded) with a
 * conditional write, so that every writer that read HEAD before -- a runner
 * that lost its lease -- has its next commit refused (CKPT_E_FENCED). A run
 * without a HEAD gets an empty one, which stale writers cannot overwrite
 * either. Used by `ckptrun run/recover` right after taking the lease. A
 * damaged HEAD is rewritten from the run's manifests (docs/FORMAT.md, "A
 * damaged HEAD"), conditionally on the damaged one.
 * @return CKPT_OK, CKPT_E_PRECONDITION (HEAD changed meanwhile: retry),
 *         CKPT_E_UNSUPPORTED (HEAD damaged, and a manifest of a newer
 *         format among them: upgrade), store errors. */
CKPT_API ckpt_status ckpt_fence(struct ckpt_ctx *ctx, uint64_t epoch);

/* Mark the committed checkpoints at `steps` damaged: they leave the resume
 * order (ckpt_list, ckpt_restore, CKPT_STEP_LATEST, retention's --keep
 * count) and go to HEAD's "damaged" list, their objects kept for
 * inspection until `ckptrun gc` (which deletes them once --min-age has
 * passed since the marking). For the lease holder after a restore that
 * had to fall back: `steps` are those ckpt_restore_dir() found damaged
 * (CKPT_E_CORRUPT); a step not retained is ignored. ckpt_restore() and
 * ckpt_restore_dir(CKPT_STEP_LATEST) do this themselves in a context with
 * a lease epoch (`epoch`, CKPT_EPOCH: ckptrun run/recover and a trainer
 * under them). Later commits, above the restored step or not, are
 * retained and resume normally. A conditional HEAD write, retried. A
 * damaged HEAD is rewritten from the run's manifests with the marks, as
 * ckpt_fence rewrites it (docs/FORMAT.md, "A damaged HEAD").
 * @return CKPT_OK, CKPT_E_INVAL (no epoch: only the lease holder marks),
 *         CKPT_E_FENCED (another runner holds the lease), CKPT_E_NOENT (no
 *         HEAD), CKPT_E_PRECONDITION (HEAD kept changing),
 *         CKPT_E_UNSUPPORTED (HEAD is damaged and a manifest of a newer
 *         format is among the run's: upgrade), store errors. */
CKPT_API ckpt_status ckpt_mark_damaged(struct ckpt_ctx *ctx, const uint64_t *steps, size_t n);

/* Request a checkpoint from inside the program (as ckptrun's requests do):
 * ckpt_should_save() turns true. `codec` != DEFAULT overrides the codec for
 * the next save only. Thread-safe, async-signal-safe. */
CKPT_API void ckpt_request(struct ckpt_ctx *ctx, ckpt_codec codec);

/* ------------------------------------------------------------------------ */
/* Ranks: one checkpoint written by the several processes of a job.          */
/*
 * A job of N ranks (mpirun -np N, torchrun, srun) saves one *global*
 * checkpoint per step: each rank writes its *part* (a part manifest naming
 * its items), and one commit record, then HEAD, are written by rank 0 only
 * once every rank's part of that step is durable. A step missing any part is
 * never visible to a reader (ckpt_restore, ckpt_list, `ckptrun ls`), and the
 * previous global step stays restorable. docs/multirank.md tells the whole
 * story, docs/FORMAT.md the bytes (manifest format 4).
 *
 * Rank and world size: `world_size` and `rank` in the config, else the
 * environment, innermost launcher first: CKPT_RANK/CKPT_WORLD_SIZE;
 * RANK/WORLD_SIZE (torchrun); OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE;
 * PMI_RANK/PMI_SIZE; PMIX_RANK (size from the collective); SLURM_PROCID/
 * SLURM_NTASKS only inside a job step (SLURM_STEP_ID set, not the batch
 * script), else 1 rank. A rank and a size from different launchers, a rank
 * outside the size, a size other than the collective's, or a rank claimed
 * by two processes (checked at ckpt_open through the collective) is
 * CKPT_E_CONFIG with the reason in ckpt_errmsg(NULL), never a hang.
 *
 * How ranks agree: through the job's own engine, never a service of
 * libckpt's. With world_size > 1 the program passes a `collective` (an
 * all-reduce of 64-bit integers and a barrier: ckpt_mpi.h adapts an MPI
 * communicator in a few lines; the Python package, `import ckpt`, adapts
 * torch.distributed: docs/python.md).
 * libckpt links no MPI. Collectives run only on the thread that calls the
 * collective functions below (MPI_THREAD_FUNNELED suffices), never on a
 * library thread; every rank must call them in the same order:
 *
 *   ckpt_open (rank check), ckpt_should_save, ckpt_save, ckpt_wait,
 *   ckpt_restore (and ckpt_restore_step, ckpt_restore_alloc), ckpt_close.
 *
 * ckpt_should_save() then costs one all-reduce of 3 integers per call (a
 * few microseconds over shared memory, tens over a network): a request,
 * notice or interval seen on any rank makes it true on every rank at the
 * same call, so every rank saves the same step. It also reports whether
 * this rank's part of the last save is durable; once every part is, rank 0
 * commits (in the background), so a program that calls it every step needs
 * no ckpt_wait() for its saves to commit. ckpt_save() agrees on the step and
 * on CKPT_BUSY_SKIP (all ranks skip if any is busy); ckpt_wait() returns
 * the global outcome on every rank (CKPT_OK only once the commit record and
 * HEAD are written); ckpt_restore() restores, on every rank, the newest
 * step whose parts verify on every rank, falling back together.
 *
 * Without a collective (CKPT_RANKS_STORE), ranks agree through the store
 * only: ckpt_save() writes this rank's part and ckpt_wait() returns once it
 * is durable; nothing is committed until some process calls
 * ckpt_commit_parts() for that step (ckptrun does, on node 0). Every other
 * world_size > 1 without a collective is CKPT_E_CONFIG.
 *
 * Replicated items (ckpt_protect_replicated: DDP weights and optimizer
 * state, the same bytes on every rank) are written once per step: their
 * chunks are spread over the ranks, each uploading about 1/N. Before the
 * commit the ranks agree on a digest of each replicated item's chunk ids;
 * if they differ the step is refused (CKPT_E_WORLD, naming the item) and
 * never committed. Every other item is per-rank.
 *
 * A checkpoint of another world size is refused by ckpt_restore()
 * (CKPT_E_WORLD naming both sizes), unless every protected item is
 * replicated; ckpt_restore_part() reads any one part.
 */

/* Flags of ckpt_config.rank_flags. */
#define CKPT_RANKS_STORE 1u /* world_size > 1 without a collective: parts only,
                               committed by ckpt_commit_parts() */

typedef enum { CKPT_REDUCE_MAX = 0, CKPT_REDUCE_MIN = 1, CKPT_REDUCE_SUM = 2 } ckpt_reduce_op;

#define CKPT_COLLECTIVE_VERSION 1
/* The job's collective, provided by the program (ckpt_mpi.h). Every
 * function returns 0 on success, nonzero when the collective failed (the
 * libckpt call then fails with CKPT_E_WORLD). Called only on the thread
 * calling a collective libckpt function, never concurrently. */
struct ckpt_collective {
    unsigned version;          /* CKPT_COLLECTIVE_VERSION */
    unsigned rank, size;       /* this process's rank in the collective, its size */
    void *user;
    /* In-place all-reduce of `n` (1..4096) integers; every rank passes
     * the same n and op. */
    int (*allreduce_u64)(void *user, uint64_t *vals, size_t n, ckpt_reduce_op op);
    int (*barrier)(void *user);
    void *reserved[4];         /* zero */
};

/* As ckpt_protect_ex(), for a host region that holds the same bytes on every
 * rank (see "Ranks"). With one rank it is an ordinary item.
 * @return as ckpt_protect_ex(). */
CKPT_API ckpt_status ckpt_protect_replicated(struct ckpt_ctx *ctx, const char *name,
                                             void *ptr, size_t size, ckpt_elem elem);

/* Restore part `part` (0..world size-1) of the committed global checkpoint
 * at `step` (CKPT_STEP_LATEST: the newest whose part verifies), with the
 * replicated items, into the protected regions, whatever this job's world
 * size: for a job resumed on fewer or more ranks that knows how to
 * redistribute. Not collective (each caller chooses on its own). A
 * single-rank checkpoint is part 0.
 * @return as ckpt_restore(); CKPT_E_NOENT for a part the checkpoint lacks. */
CKPT_API ckpt_status ckpt_restore_part(struct ckpt_ctx *ctx, uint64_t step, unsigned part,
                                       uint64_t *restored);

/* One rank's part of a global step not committed (yet), as ckpt_pending()
 * lists them. Valid during the callback only. */
struct ckpt_part_info {
    uint64_t step;
    uint64_t epoch;
    int64_t time_ms;           /* when the part was written */
    unsigned rank, world_size;
    uint64_t items, raw_bytes, stored_bytes;
    const char *manifest;      /* store key of the part manifest */
    uint64_t reserved[4];
};
typedef int (*ckpt_part_fn)(void *user, const struct ckpt_part_info *part);
/* Call fn for every durable part of a step above the newest committed one
 * (parts of steps not committed yet), in step order then rank order; fn
 * returns nonzero to stop. Not collective. A damaged HEAD: above the newest
 * step the run's manifests show (docs/FORMAT.md, "A damaged HEAD").
 * @return CKPT_OK, store errors, CKPT_E_NOMEM. */
CKPT_API ckpt_status ckpt_pending(struct ckpt_ctx *ctx, ckpt_part_fn fn, void *user);

/* Commit the global step `step` from the parts in the store: each of ranks
 * 0..world_size-1 must have a durable part of that step written with this
 * context's epoch (the newest, if a rank wrote several); the commit record,
 * then HEAD (conditionally, fenced as ckpt_save's commit is), are written,
 * then retention runs. For CKPT_RANKS_STORE jobs (ckptrun on node 0). An
 * empty part (a rank with nothing to save at that step) is a part like any.
 * @return CKPT_OK, CKPT_E_NOENT (a part is missing: ckpt_errmsg names the
 *         ranks), CKPT_E_WORLD (parts of another world size, replicated
 *         items that differ), CKPT_E_FENCED, store errors. */
CKPT_API ckpt_status ckpt_commit_parts(struct ckpt_ctx *ctx, uint64_t step,
                                       unsigned world_size);

/* This context's rank and world size, as resolved at ckpt_open(). */
CKPT_API unsigned ckpt_rank(const struct ckpt_ctx *ctx);
CKPT_API unsigned ckpt_world_size(const struct ckpt_ctx *ctx);

/* ------------------------------------------------------------------------ */
/* Progress: what a long call is doing, for a progress display.              */

typedef enum {
    CKPT_PROGRESS_IDLE = 0,    /* nothing started yet on this context */
    CKPT_PROGRESS_SAVE = 1,    /* ckpt_save()'s background persist */
    CKPT_PROGRESS_RESTORE = 2, /* ckpt_restore() / ckpt_restore_dir() */
    CKPT_PROGRESS_VERIFY = 3   /* ckpt_verify() */
} ckpt_progress_phase;

/* Counters of the context's current (or last) save, restore or verify.
 * Byte counts are raw (uncompressed) bytes of items; `stored_bytes` are the
 * bytes moved to (save, counted as each object's put returns) or read from
 * (restore, verify) the store. Totals are known when the phase starts,
 * except for a verify of several checkpoints, where they grow as each
 * checkpoint's manifest is read. A save counts a chunk done once it is read
 * and encoded (before its write, which may be the upload of a whole pack),
 * or recognised as one the run already holds; a verify counts a chunk
 * shared by several checkpoints once.
 *
 * What a save still has to send (since 0.4.0): `encoded_bytes` is the
 * stored size of the new chunks encoded so far -- what the save sends, exact
 * once bytes_done == bytes_total; before that, encoded_bytes * bytes_total /
 * bytes_done estimates it. `sent_bytes` counts what the context has sent to
 * the store since the save began, as it leaves (the transport's count,
 * ckpt_store_ops.sent: its chunks or packs, then its manifest and HEAD;
 * bytes of a failed attempt are taken back, so it can go down; it stops
 * when the save ends): the rate of the upload, and its end. With
 * CKPT_PROGRESS_SENT clear in `flags` the store cannot tell (sent_bytes 0):
 * bytes_done and stored_bytes are all there is. A call that uploads on the
 * same context during a save (ckpt_gc) counts in its sent_bytes. */
struct ckpt_progress {
    ckpt_progress_phase phase;
    uint64_t step;             /* checkpoint being processed */
    uint64_t bytes_done;
    uint64_t bytes_total;
    uint64_t chunks_done;
    uint64_t chunks_total;
    uint64_t stored_bytes;
    uint64_t checkpoints_done; /* verify: checkpoints whose chunks are all queued */
    int64_t started_ms;        /* Unix ms the phase started (0 when idle) */
    /* Since 0.4.0, in slots 0.1.0 reserved (0 before; save only): */
    uint64_t sent_bytes;       /* bytes of this save sent to the store so far */
    uint64_t encoded_bytes;    /* stored bytes of the new chunks encoded so far */
    uint64_t flags;            /* CKPT_PROGRESS_SENT */
    uint64_t reserved[3];      /* zero */
};
/* ckpt_progress.flags: sent_bytes is counted (the store can tell). */
#define CKPT_PROGRESS_SENT 1u

/* Fill *out with the context's progress counters. Thread-safe: meant to be
 * called from another thread (a display) while the context's own thread is
 * inside ckpt_wait(), ckpt_restore_dir() or ckpt_verify(); every counter is
 * read atomically (the set is not one snapshot: done may briefly lead its
 * total by a chunk). Cheap (a few atomic loads). Since 0.1.0.
 * @return CKPT_OK, CKPT_E_INVAL (NULL argument). */
CKPT_API ckpt_status ckpt_progress(struct ckpt_ctx *ctx, struct ckpt_progress *out);

/* ------------------------------------------------------------------------ */
/* Since 0.4.0: what a language binding needs (the Python package,          */
/* docs/python.md): regions with flags, a checkpoint's items, restoring a    */
/* given step or into memory the caller allocates, taking a request,         */
/* reporting a file, signals the program's own handler receives.             */

/* Flags of ckpt_protect_region(). */
#define CKPT_REGION_REPLICATED 1u /* the same bytes on every rank ("Ranks"), as
                                     ckpt_protect_replicated() */
#define CKPT_REGION_DEVICE 2u     /* a CUDA device region, as ckpt_protect_device() */
#define CKPT_REGION_NO_STAGE 4u   /* reserve no staging for it now (see below) */

/* The general form of ckpt_protect_ex(), ckpt_protect_replicated() and
 * ckpt_protect_device(): register the region `ptr`/`size` under `name` with
 * an element hint and flags; the same rules of names, validity and
 * lifetime. ckpt_protect() reserves and touches a private staging copy of
 * each host region (see "Memory") so that a save stalls only for its copy;
 * CKPT_REGION_NO_STAGE leaves that out, for a region protected only to be
 * restored into: nothing is allocated for it, and a save
 * that includes it copies it through staging blocks allocated then.
 * A device region (CKPT_REGION_DEVICE) may be replicated: each save stages
 * it to host as ckpt_protect_device() describes, then spreads its chunks
 * over the ranks as for a host region. Since 0.4.0.
 * @return as ckpt_protect_ex() (host) or ckpt_protect_device() (device);
 *         CKPT_E_INVAL also for an unknown flag or element type. */
CKPT_API ckpt_status ckpt_protect_region(struct ckpt_ctx *ctx, const char *name, void *ptr,
                                         size_t size, ckpt_elem elem, unsigned flags);

/* Kinds of items, as ckpt_items() reports them. */
typedef enum {
    CKPT_KIND_REGION = 0, /* host memory (ckpt_protect*, a replicated region) */
    CKPT_KIND_FILE = 1,   /* a file (ckpt_protect_file) */
    CKPT_KIND_DEVICE = 2, /* CUDA device memory (ckpt_protect_device) */
    CKPT_KIND_LINK = 3    /* a symbolic link (ckpt_protect_link): no bytes */
} ckpt_item_kind;

/* One item of a committed checkpoint, as ckpt_items() lists it. The struct
 * and its strings belong to the library and are valid during the callback
 * only. */
struct ckpt_item_info {
    const char *name;
    uint64_t size;          /* raw bytes (a link: 0) */
    ckpt_item_kind kind;
    unsigned elem_size;     /* 2 or 4: saved with that element hint (byte
                               grouping); 0: bytes */
    int replicated;         /* the same bytes on every rank ("Ranks") */
    const char *target;     /* links: the link's text; else NULL */
    uint64_t step;          /* of the checkpoint */
    unsigned world_size;    /* ranks whose parts make it (1: one writer) */
    unsigned part;          /* the rank whose part holds it (0 for one writer
                               and for a replicated item) */
    uint32_t mode;          /* permission bits of a file, else 0 */
    uint64_t stored_bytes;  /* compressed bytes of its chunks as stored, each
                               distinct chunk once (a chunk the item shares
                               with another counts for both) */
    uint64_t chunks;        /* its distinct chunks */
    uint64_t reserved[4];   /* zero */
};
typedef int (*ckpt_item_fn)(void *user, const struct ckpt_item_info *item);
/* ckpt_items(): every part of a multi-rank checkpoint (`ckptrun ls --step`). */
#define CKPT_PART_ALL 0xffffffffu
/* Call fn for each item of the committed checkpoint at `step` (CKPT_STEP_LATEST:
 * the newest in the resume order), as part `part` of it sees them: a
 * single-writer checkpoint has part 0; a multi-rank one, the part's own
 * items then the replicated ones. With CKPT_PART_ALL, every item of every
 * part once: the replicated items and rank 0's own, then each other rank's
 * own, rank by rank (`part` says whose). Reads HEAD and the checkpoint's
 * manifest(s), no chunk: what a listing shows (`ckptrun ls --step`), or a
 * program needs to allocate regions it then protects and restores
 * (ckpt_restore_step; ckpt_restore_alloc does both in one call, with the
 * fallback). On the calling thread; fn returns nonzero to stop. Not
 * collective. Since 0.4.0.
 * @return CKPT_OK, CKPT_E_NOENT (no such committed checkpoint, or no part
 *         `part`: ckpt_errmsg() says which), CKPT_E_CORRUPT (a manifest is
 *         damaged or missing), CKPT_E_UNSUPPORTED (a newer format), store
 *         errors, CKPT_E_NOMEM, CKPT_E_INVAL (NULL ctx or fn). */
CKPT_API ckpt_status ckpt_items(struct ckpt_ctx *ctx, uint64_t step, unsigned part,
                                ckpt_item_fn fn, void *user);

/* As ckpt_restore(), the committed checkpoint at `step` only (no fallback
 * to an older one: CKPT_E_CORRUPT when it is damaged, and it is not marked
 * damaged); CKPT_STEP_LATEST is ckpt_restore() itself. With a collective it
 * is collective: every rank passes the same step (else CKPT_E_WORLD on
 * every rank) and gets the same outcome. Since 0.4.0.
 * @return as ckpt_restore(); CKPT_E_NOENT when no committed checkpoint has
 *         that step. */
CKPT_API ckpt_status ckpt_restore_step(struct ckpt_ctx *ctx, uint64_t step, uint64_t *restored);

/* Restoring into memory the caller allocates as it learns what a checkpoint
 * holds (a binding rebuilding its objects: `import ckpt`'s load()), where
 * ckpt_restore() writes into regions protected beforehand.
 *
 * ckpt_restore_alloc() calls `alloc` for the checkpoint it tries, with its
 * items (this rank's part and the replicated items, as ckpt_items() lists
 * them; links, which hold no bytes, left out): the caller sets dest[k] to
 * host memory of at least items[k].size writable bytes, or leaves it NULL
 * to leave that item out. With `index`, it asks twice: round 0 with the
 * index items the checkpoint holds, which are then restored, and round 1
 * with the others (n may be 0) -- so an item describing the rest (the binding's
 * structure: dtypes, shapes) is read before they are allocated. A
 * checkpoint that holds none of the index items is not of the kind the
 * caller restores (ckptrun's file checkpoints of the same run): it is
 * passed over, neither restored nor reported as damaged.
 * alloc returns CKPT_OK, or refuses the checkpoint:
 *   CKPT_E_SIZE, CKPT_E_MISMATCH: its items are not what the caller
 *     expects (the index describes other items: the manifest lies, or the
 *     program changed) -- as protected items that do not fit for
 *     ckpt_restore(): an older checkpoint that fits is restored instead
 *     (warn), and when none fits, that status is returned;
 *   CKPT_E_CORRUPT: the index is damaged (treated as a damaged checkpoint);
 *   CKPT_E_UNSUPPORTED: written by a newer version of the caller (the one
 *     before it is tried, nothing marked);
 *   any other status stops the restore and is returned (CKPT_E_NOMEM...).
 * `msg` (in the request) may say why; it becomes ckpt_errmsg()'s detail.
 * Memory that alloc handed out for a checkpoint that is then given up (found
 * damaged, refused, or the call failing) is handed back through `release`
 * (when set) once, before alloc is asked for an older checkpoint, or before
 * the call returns; its content is then undefined. The memory of the
 * checkpoint restored stays the caller's, holding its bytes, and is not
 * released. The library writes the memory only during the call.
 *
 * The callbacks run on the calling thread, inside the call, and must not
 * call libckpt on this context. */
#define CKPT_ALLOC_VERSION 1
struct ckpt_alloc_req {
    uint64_t step;       /* of the checkpoint tried */
    unsigned world_size; /* the ranks that wrote it */
    unsigned round;      /* 0: the index items, 1: the others */
    size_t n;
    const struct ckpt_item_info *items; /* n items (stored_bytes, chunks: 0) */
    void **dest;                        /* n pointers, NULL on entry */
    char msg[256];                      /* "" on entry: a refusal's reason */
    void *reserved[4];
};
struct ckpt_alloc {
    unsigned version;         /* CKPT_ALLOC_VERSION */
    void *user;               /* passed to the callbacks */
    const char *const *index; /* names of the index items (NULL: none; one
                                 round, every checkpoint taken) */
    size_t nindex;
    ckpt_status (*alloc)(void *user, struct ckpt_alloc_req *req); /* required */
    /* The n non-NULL dest pointers the caller gave for checkpoint `step`. */
    void (*release)(void *user, uint64_t step, void *const *dest, size_t n);
    void *reserved[4]; /* zero */
};
/* Restore the newest committed checkpoint that verifies and that the
 * callbacks take (CKPT_STEP_LATEST), or the one at `step`, into memory
 * `a->alloc` provides. The rules are ckpt_restore()'s: a damaged
 * checkpoint (manifest, chunk, pack, a part, its index) is reported (warn)
 * and the one before it tried, and a context with a lease epoch marks it
 * damaged in HEAD; a local or store error stops; one of another world size
 * is CKPT_E_WORLD (naming both sizes) unless every item the caller takes
 * is replicated; with a collective it is collective and every rank falls
 * back together (any rank's damage, refusal or passing over counts for
 * all). A given `step` is that one only, as ckpt_restore_step() (no
 * fallback, nothing marked; CKPT_E_NOENT if it is passed over). The
 * protected items are neither needed nor written. After CKPT_OK,
 * ckpt_errmsg() is empty, or says which newer checkpoint was given up and
 * why (a fallback, also logged). Since 0.4.0.
 * @restored receives the step restored (may be NULL).
 * @return CKPT_OK, CKPT_E_NOENT (no committed checkpoint the caller takes),
 *         CKPT_E_CORRUPT (none verified), CKPT_E_SIZE/CKPT_E_MISMATCH
 *         (alloc refused every one), CKPT_E_WORLD, store errors, alloc's
 *         own status; CKPT_E_INVAL (NULL ctx, a or a->alloc, an unknown
 *         version, or called from a callback). */
CKPT_API ckpt_status ckpt_restore_alloc(struct ckpt_ctx *ctx, uint64_t step,
                                        const struct ckpt_alloc *a, uint64_t *restored);
/* ckpt_restore_alloc() for a job resumed on another number of ranks than
 * wrote the checkpoint (a spot job back on fewer or more GPUs). A
 * checkpoint of this job's world size is restored as by
 * ckpt_restore_alloc() (this rank's own part); one of another world size,
 * instead of CKPT_E_WORLD, gives this rank the part rank `part` wrote --
 * its own items as well as the replicated ones. Every rank may name the
 * same part (part 0: its step, its counters); what was each old rank's own
 * (a data shard's position, RNG states) is then the caller's to re-derive:
 * the items' `part` and `world_size` (ckpt_item_info) say whose they are.
 * One with no part `part` (fewer ranks wrote it) is CKPT_E_WORLD. Collective
 * as ckpt_restore_alloc(). Since 0.5.0.
 * @return as ckpt_restore_alloc(); CKPT_E_INVAL also for part > INT_MAX. */
CKPT_API ckpt_status ckpt_restore_alloc_any(struct ckpt_ctx *ctx, uint64_t step, unsigned part,
                                            const struct ckpt_alloc *a, uint64_t *restored);

/* Take this process's pending checkpoint request without saving: the
 * answer ckpt_should_save() would give without a collective (a request, or
 * `interval_ms` elapsed since the last save or take), cleared as
 * ckpt_save() clears it; a codec the request asked for stays for the next
 * save. For a program that answers a request by writing its own files
 * (ckpt_report_file), and for bindings that report a request once. Not
 * collective: in a job with a collective, call ckpt_should_save() first
 * (every rank learns of any rank's request there), then this to clear it.
 * Training thread. Since 0.4.0.
 * @return nonzero if one was pending. */
CKPT_API int ckpt_take_request(struct ckpt_ctx *ctx);

/* Tell ckptrun, over this context's own connection, that the program wrote
 * a complete checkpoint entry at `path` (a file or directory of CKPT_DIR,
 * renamed into place) holding `step`: the `file` message of
 * docs/CONTROL.md (event `renamed`), so ckptrun commits it without waiting
 * for its watch to settle. A relative path is taken from the current
 * directory. Any thread. Since 0.4.0.
 * @return CKPT_OK (sent), CKPT_E_NOENT (not connected to ckptrun),
 *         CKPT_E_INVAL (NULL or empty path, or one too long for a message),
 *         CKPT_E_UNREACHABLE (ckptrun went away). */
CKPT_API ckpt_status ckpt_report_file(struct ckpt_ctx *ctx, const char *path, uint64_t step);

/* What ckpt_signal() says to do with a signal. */
#define CKPT_SIGNAL_DEFAULT 0 /* let it take its default effect now */
#define CKPT_SIGNAL_STOP 1    /* a stop: a checkpoint is requested (and reported
                                 to ckptrun); save at the next safe point */
#define CKPT_SIGNAL_REPEAT 2  /* the same stop again (forwarded by a launcher):
                                 nothing to do */
/* For a program whose own handler receives SIGTERM or SIGINT (a language
 * runtime: Python handles SIGINT itself, so libckpt never sees it): decide
 * as libckpt's handler does under ckptrun (docs/CONTROL.md, "Signals"). A
 * stop is only taken while this context handles the process's stops (it
 * is connected to ckptrun and installed its handler for a signal the
 * program left at its default at ckpt_open: hello's `signals`); otherwise,
 * after ckptrun's `stopping`, for a second signal, in a forked process, or
 * for another signal, the answer is CKPT_SIGNAL_DEFAULT. Async-signal-safe.
 * Since 0.4.0. */
CKPT_API int ckpt_signal(struct ckpt_ctx *ctx, int sig);

/* For a process forked from a trainer whose stops come by SIGTERM (a
 * data-loader worker): a SIGTERM sent to the whole job (systemd's
 * control-group kill at a spot VM's shutdown, `kill -TERM -PGID`, a
 * scheduler) reaches the workers too, and a worker that dies of it breaks
 * the trainer's next step before the stop's save. After this call the
 * stop's SIGTERM -- the first, and a repeat within 0.5 s -- is left to the
 * trainer, which saves and then ends its workers; a SIGTERM from the
 * parent ends this process at once with status 0 (the parent ending its
 * worker); a later one takes its default effect. Replaces this process's
 * SIGTERM action. Python's package calls it in each PyTorch DataLoader
 * worker (docs/python.md, "Data-loader workers"). Since 0.5.0.
 * @return CKPT_OK, CKPT_E_IO (sigaction failed). */
CKPT_API ckpt_status ckpt_child_signals(void);

/* Version of the library actually loaded. */
CKPT_API unsigned ckpt_version_number(void);
CKPT_API const char *ckpt_version_string(void);

#ifdef __cplusplus
}
#endif
#endif /* CKPT_H */
