/* save.h -- one save in flight: what the snapshot hands down to the chunk
 * jobs and then to the commit (the manifest the workers fill, the save's
 * packs, its first failure, its byte counts); and the context's slot for
 * it: at most one save is in flight, and ckpt_wait() waits for it. */
#ifndef CKPT_SAVE_H
#define CKPT_SAVE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "core/fileread.h"
#include "base/idset.h"
#include "format/manifest.h"
#include "ckpt_store.h" /* CKPT_ERR_MAX */

struct ckpt_ctx;
struct ckpt_packbuf;

/* A protected file as the snapshot saw it: what must still hold once every
 * chunk is read, for the bytes read to be one version of the file. */
struct ckpt_fsnap {
    struct ckpt_fversion v;
    mode_t mode;
    size_t left;                /* chunk jobs of the file not finished (sv->mu) */
    int changed;                /* a chunk job found another file or a shorter one */
    int as_is;                  /* CKPT_FILE_AS_IS: a change fails the save, no read again */
};

struct ckpt_save {
    struct ckpt_ctx *ctx;
    uint64_t step;
    uint64_t t0_ns;
    ckpt_codec codec;
    int level;
    struct ckpt_manifest m;     /* items + chunk refs filled by workers */
    char **paths;               /* per item: file path or NULL */
    struct ckpt_fsnap *files;   /* per item: a protected file as ckpt_save saw it */
    /* per item: the chunks lo..hi-1 this rank stores (all but a replicated
     * item's are this rank's; of those it only hashes the others) */
    size_t *lo, *hi;
    pthread_mutex_t mu;
    /* packs (guarded by mu): this save's manifest's pack list, new packs
     * (id filled when uploaded) and older ones chunks were found in */
    struct ckpt_packbuf *open;  /* the pack being filled */
    struct ckpt_idset packslot; /* id of an older pack -> its slot */
    size_t pending;             /* chunk jobs + the submitter's token (mu) */
    ckpt_status st;             /* the first failure (mu) */
    char err[CKPT_ERR_MAX];
    uint64_t raw_bytes, new_bytes; /* (mu) */
    /* where the chunk stage stands (mu), for sealing the last packs
     * (pack.c): raw bytes of the chunks neither put into a pack nor done
     * otherwise (known, hashed only, failed), and the raw and stored bytes
     * of the chunks put into packs so far */
    uint64_t raw_left, packed_raw, packed_stored;
    /* a stop's save reading regions in place (snapshot.h): its chunk jobs
     * still reading a region (mu); cv: one was done */
    size_t in_place;
    pthread_cond_t cv;
};

/* A save of `nitems` items at `step`: manifest items, paths and file
 * snapshots allocated and zeroed. NULL without memory. */
struct ckpt_save *ckpt__save_new(struct ckpt_ctx *ctx, uint64_t step, size_t nitems);
void ckpt__save_free(struct ckpt_save *sv); /* NULL-safe */
/* Record the save's failure (the first one wins): it will not commit. */
void ckpt__save_fail(struct ckpt_save *sv, ckpt_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* References: the chunk jobs queued and the snapshot's own (taken by
 * ckpt__save_new). Unref returns 1 when it dropped the last one: the chunk
 * stage of the save is over. */
void ckpt__save_ref(struct ckpt_save *sv);
int ckpt__save_unref(struct ckpt_save *sv);
/* Count stored bytes first written by this save. */
void ckpt__save_add_new(struct ckpt_save *sv, uint64_t bytes);

/* The slot: whether a save is in flight, and how the last one ended (until
 * someone is told). */
struct ckpt_flight {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool busy;
    ckpt_status last;
};
void ckpt__flight_init(struct ckpt_flight *f);
void ckpt__flight_destroy(struct ckpt_flight *f);
/* Before a save: CKPT_E_BUSY when one is in flight and `skip`; else wait
 * for it, and take how the last one ended into *prev. */
ckpt_status ckpt__flight_idle(struct ckpt_flight *f, bool skip, ckpt_status *prev);
void ckpt__flight_begin(struct ckpt_flight *f);
void ckpt__flight_end(struct ckpt_flight *f, ckpt_status st);
/* Wait until no save is in flight; how the last one ended (then forgotten). */
ckpt_status ckpt__flight_wait(struct ckpt_flight *f);
/* Wait until no save is in flight, forgetting nothing. */
void ckpt__flight_settle(struct ckpt_flight *f);
/* Whether a save is in flight, and how the last one ended (kept). */
void ckpt__flight_peek(struct ckpt_flight *f, bool *busy, ckpt_status *last);

#endif
