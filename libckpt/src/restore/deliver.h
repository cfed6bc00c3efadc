/* deliver.h -- where a restore's chunks go: a protected host region
 * (decoded in place), a device region (through pinned memory), or a file,
 * written under a temporary name and renamed into place once every chunk of
 * the restore is in (fsynced first when asked). Any worker delivers any
 * chunk.
 *
 * The file descriptors a restore holds open at once are bounded, whatever
 * the number of files: a file is opened when a chunk of it is written,
 * closed once its last chunk is in, and an idle one is closed (least
 * recently opened first) when the budget is used up. The budget is a share
 * of RLIMIT_NOFILE left free (at most CKPT_FDS_MAX), lowered when open()
 * meets EMFILE anyway. */
#ifndef CKPT_DELIVER_H
#define CKPT_DELIVER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "format/codec.h"
#include "format/manifest.h"

#define CKPT_FDS_MAX 256

struct ckpt_ctx;
struct ckpt_dest;

struct ckpt_fdpool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned limit;
    unsigned n;                       /* open now */
    struct ckpt_dest *open[CKPT_FDS_MAX]; /* oldest first */
};

/* Destination of one item for a restore. */
struct ckpt_dest {
    int kind;               /* CKPT_ITEM_*; a link item has none */
    uint8_t *ptr;           /* host regions */
    void *dev;              /* device regions */
    int fd;                 /* files: -1 while closed (fdpool.mu) */
    unsigned users;         /* writes using fd now (fdpool.mu) */
    size_t left;            /* chunks not yet written (fdpool.mu) */
    struct ckpt_fdpool *pool;
    char *tmp, *final;
    uint32_t mode;
    uint64_t unsynced;
    /* Writes to one file are serialized here: the kernel serializes them
     * anyway (ext4, XFS and tmpfs take the inode lock for a buffered
     * write), and its waiters spin on the lock owner: on a 2-core machine
     * restoring 1 GiB with 8 workers that was a seventh of the CPU, taken
     * from the downloads. A mutex's waiters sleep. */
    pthread_mutex_t wmu;
};

/* The destinations of one restore: one per item of m, sharing a pool of
 * descriptors. -1 out of memory. */
struct ckpt_dests {
    struct ckpt_fdpool pool;
    struct ckpt_dest *d;
    size_t n;
};
int ckpt__dests_init(struct ckpt_dests *ds, const struct ckpt_manifest *m);
/* Rename every restored file into place when all went well (*st OK;
 * fsynced first when `sync`), else remove the temporary files; then free. */
void ckpt__dests_finish(struct ckpt_dests *ds, int sync, ckpt_status *st, char *err);
/* Create the temporary file of the file to restore at `final`, sized. */
ckpt_status ckpt__dest_file(struct ckpt_dest *d, const char *final, uint64_t size, char *err);

/* Decode chunk object `obj` (chunk c) and put its bytes at `off` of d
 * (NULL: only checked). */
ckpt_status ckpt__deliver(struct ckpt_ctx *ctx, struct ckpt_codec_ws *ws, struct ckpt_dest *d,
                          uint64_t off, const struct ckpt_chunk_ref *c, const uint8_t *obj,
                          char *err);
/* Pieces of a chunk stored as it is, written to a file as they arrive: */
ckpt_status ckpt__dest_write(struct ckpt_dest *d, uint64_t off, const uint8_t *p, size_t n,
                             char *err);
/* ... n more bytes of d written (starts their writeback now and then) ... */
ckpt_status ckpt__dest_written(struct ckpt_dest *d, uint64_t n, char *err);
/* ... and one more chunk of d is in. */
void ckpt__dest_chunk_in(struct ckpt_dest *d);

/* Errors of the local disk say so: they are never a damaged checkpoint nor
 * the store's. Sets err, returns the status for errno e. */
ckpt_status ckpt__local_err(char *err, const char *what, const char *path, int e);

#endif
