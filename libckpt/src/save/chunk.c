/* chunk.c -- the chunk stage of a save (chunk.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "save/chunk.h"
#include "commit/commit.h"
#include "core/ctx.h"
#include "core/fileread.h"
#include "save/pack.h"
#include "commit/partstore.h"
#include "core/save.h"

/* How many times a protected file is read before a save gives up on it
 * (it kept changing while it was read). */
#define FILE_READS 3

/* The chunk the run holds already: point at it. */
static ckpt_status refer(struct ckpt_save *sv, struct ckpt_chunk_ref *ref,
                         const struct ckpt_loc *loc, const struct ckpt_pack *pk, char *err)
{
    ref->stored_len = loc->stored_len;
    if (loc->pack) {
        uint32_t slot = ckpt__pack_slot_of(sv, pk);
        if (slot == UINT32_MAX) {
            ckpt__seterr(err, "no memory for the pack list");
            return CKPT_E_NOMEM;
        }
        ref->pack = slot + 1;
        ref->off = loc->off;
    }
    return CKPT_OK;
}

/* Hash one chunk's bytes, point at the copy the run holds, else encode and
 * write it: into the save's open pack (object stores), as its own object
 * chunks/<id>, or -- when a gc in force deletes chunks/<id>, and writing it
 * there again could lose it to that gc -- as a pack of its own, which has
 * a fresh name. */
static ckpt_status store_chunk(struct ckpt_ctx *ctx, struct ckpt_save *sv, unsigned elem_size,
                               struct ckpt_chunk_ref *ref, const uint8_t *raw, size_t len,
                               struct ckpt_codec_ws *ws, int *packed, int *counted, char *err)
{
    struct ckpt_loc loc;
    struct ckpt_pack pk;
    const void *obj, *hdr, *payload;
    size_t obj_len, plen;
    ckpt_status st;

    ckpt__chunk_id(raw, len, ref->id);
    ref->raw_len = (uint32_t)len;
    if (ckpt__run_lookup(&ctx->rs, ref->id, &loc, &pk))
        return refer(sv, ref, &loc, &pk, err);
    if (ctx->pack_bytes) {
        st = ckpt__chunk_encode_parts(ws, raw, len, ref->id, sv->codec, sv->level, elem_size,
                                      &hdr, &payload, &plen);
        obj_len = CKPT_CHUNK_HDR + plen;
    } else {
        st = ckpt__chunk_encode(ws, raw, len, ref->id, sv->codec, sv->level, elem_size, &obj,
                                &obj_len);
    }
    if (st) {
        ckpt__seterr(err, "encode failed");
        return st;
    }
    /* progress: what the save will send grows by this object (a chunk
     * read again, file_reread, is sent again too) */
    ckpt__progress_add(&ctx->progress.encoded_bytes, obj_len);
    if (counted) {
        /* progress: read and encoded. Counted before the write, which may
         * be the upload of the pack this chunk fills (or of the save's last
         * one): the reading is done; how far the upload is, the store's
         * count of bytes sent says (ckpt_progress's sent_bytes). */
        ckpt__progress_add(&ctx->progress.bytes_done, len);
        ckpt__progress_add(&ctx->progress.chunks_done, 1);
        *counted = 1;
    }
    if (ctx->pack_bytes) {
        st = ckpt__pack_append(ctx, sv, hdr, payload, plen, ref, err);
        if (packed)
            *packed = st == CKPT_OK;
    } else if (ckpt__run_doomed(&ctx->rs, ref->id, CKPT_OBJ_CHUNK)) {
        st = ckpt__pack_alone(ctx, sv, obj, obj_len, ref, err);
    } else {
        struct ckpt_put_opts po = { CKPT_PUT_PLAIN, NULL, 1 };
        char key[1024];
        ckpt__chunk_key(ctx->run, ref->id, key, sizeof key);
        st = ctx->store->ops->put(ctx->store, key, obj, obj_len, &po, NULL, err);
        if (st == CKPT_OK)
            ckpt__progress_add(&ctx->progress.stored_bytes, obj_len);
    }
    if (st)
        return st;
    ref->stored_len = (uint32_t)obj_len;
    ckpt__save_add_new(sv, obj_len);
    return CKPT_OK;
}

static void fail_file(struct ckpt_save *sv, const struct ckpt_mitem *it, const char *path,
                      int e, const char *when)
{
    if (e == ENOENT)
        ckpt__save_fail(sv, CKPT_E_NOENT, "protected file %s (%s) was deleted %s: not "
                        "committed", it->name, path, when);
    else
        ckpt__save_fail(sv, ckpt__errno_status(e), "protected file %s (%s): %s", it->name,
                        path, e == EINVAL ? "not a regular file" : strerror(e));
}

/* The file changed while its chunks were read: read it again whole, on this
 * worker, from a new snapshot, until one read sees a single version of it
 * (FILE_READS in all), then put the chunks of that read in the manifest. */
static void file_reread(struct ckpt_ctx *ctx, struct ckpt_save *sv, size_t i,
                        struct ckpt_codec_ws *ws)
{
    struct ckpt_mitem *it = &sv->m.items[i];
    const char *path = sv->paths[i];
    char err[CKPT_ERR_MAX] = "";
    for (int attempt = 2; attempt <= FILE_READS && !sv->st; attempt++) {
        struct ckpt_fsnap nf;
        struct ckpt_fversion now;
        struct ckpt_chunk_ref *refs = NULL;
        size_t n;
        int changed = 0, fd;
        ckpt_status st = CKPT_OK;

        ckpt__log(&ctx->log, CKPT_LOG_INFO, "save", "protected file %s (%s) changed while it "
                  "was read: reading it again (read %d of %d)", it->name, path, attempt,
                  FILE_READS);
        if (ckpt__fversion_snap(path, &nf.v, &nf.mode) != 0) {
            fail_file(sv, it, path, errno, "while it was read");
            return;
        }
        n = (size_t)(((uint64_t)nf.v.size + ctx->chunk_bytes - 1) / ctx->chunk_bytes);
        refs = n ? calloc(n, sizeof *refs) : NULL;
        if (n && !refs) {
            ckpt__save_fail(sv, CKPT_E_NOMEM, "item %s: no memory for its chunk list",
                            it->name);
            return;
        }
        fd = ckpt__file_open(path, &nf.v, &changed);
        if (fd < 0) {
            free(refs);
            fail_file(sv, it, path, errno, "while it was read");
            return;
        }
        for (size_t c = 0; c < n && !changed && !st; c++) {
            uint64_t off = (uint64_t)c * ctx->chunk_bytes;
            size_t len = (size_t)((uint64_t)nf.v.size - off < ctx->chunk_bytes
                                      ? (uint64_t)nf.v.size - off : ctx->chunk_bytes);
            uint8_t *raw = ws ? ckpt__codec_ws_scratch(ws, len) : NULL;
            if (!raw) {
                st = CKPT_E_NOMEM;
                snprintf(err, sizeof err, "no memory");
                break;
            }
            st = ckpt__file_pread(fd, path, off, len, raw, &changed, err);
            if (!st && !changed)
                st = store_chunk(ctx, sv, it->elem_size, &refs[c], raw, len, ws, NULL, NULL, err);
        }
        close(fd);
        if (st) {
            free(refs);
            ckpt__save_fail(sv, st, "item %s: %s", it->name, err);
            return;
        }
        if (!changed && ckpt__fversion_stat(path, &now) != 0) {
            free(refs);
            fail_file(sv, it, path, errno, "while it was read");
            return;
        }
        if (!changed && ckpt__fversion_same(&nf.v, &now)) {
            pthread_mutex_lock(&sv->mu);
            free(it->chunks);
            it->chunks = refs;
            it->nchunks = n;
            sv->raw_bytes += (uint64_t)nf.v.size - it->size;
            it->size = (uint64_t)nf.v.size;
            it->mode = nf.mode;
            pthread_mutex_unlock(&sv->mu);
            return;
        }
        free(refs);
    }
    ckpt__save_fail(sv, CKPT_E_IO, "protected file %s (%s) kept changing while it was read "
                    "(%d reads): not committed", it->name, path, FILE_READS);
}

/* The last chunk job of a protected file: the bytes read are one version of
 * the file only if it is still what the snapshot saw (same device, inode,
 * size, mtime and ctime to the nanosecond); else it is read again. */
static void file_done(struct ckpt_ctx *ctx, struct ckpt_save *sv, size_t i,
                      struct ckpt_codec_ws *ws)
{
    struct ckpt_fversion now;
    if (sv->st)
        return;
    if (ckpt__fversion_stat(sv->paths[i], &now) != 0) {
        fail_file(sv, &sv->m.items[i], sv->paths[i], errno, "while it was read");
        return;
    }
    if (!sv->files[i].changed && ckpt__fversion_same(&sv->files[i].v, &now))
        return;
    if (sv->files[i].as_is) {
        /* the caller judged that version: another one is not for us to take */
        ckpt__save_fail(sv, CKPT_E_CHANGED, "protected file %s (%s) changed while it was "
                        "read: not committed", sv->m.items[i].name, sv->paths[i]);
        return;
    }
    file_reread(ctx, sv, i, ws);
}

/* Read [off, off+len) of a protected file. Another file at the path (it was
 * replaced) or a shorter one sets *changed: the bytes are then not used.
 * A file gone from its path is CKPT_E_NOENT. */
static ckpt_status read_file_chunk(const char *path, const struct ckpt_fsnap *f, uint64_t off,
                                   size_t len, uint8_t *dst, int *changed, char *err)
{
    ckpt_status st = CKPT_OK;
    int fd = ckpt__file_open(path, &f->v, changed);
    if (fd < 0) {
        ckpt__seterr(err, errno == ENOENT ? "%s was deleted while it was read" : "open %s: %s",
                     path, strerror(errno));
        return ckpt__errno_status(errno);
    }
    if (!*changed)
        st = ckpt__file_pread(fd, path, off, len, dst, changed, err);
    close(fd);
    return st;
}

/* The chunk stage is over (every chunk job has run): the last pack goes
 * out, then the commit. */
static void stage_end(struct ckpt_ctx *ctx, struct ckpt_save *sv)
{
    char err[CKPT_ERR_MAX] = "";
    ckpt_status st = ckpt__pack_flush(ctx, sv, err);
    if (st)
        ckpt__save_fail(sv, st, "writing a pack: %.480s", err);
    if (ctx->world_size > 1)
        ckpt__part_commit(ctx, sv); /* one rank's part (partstore.c) */
    else
        ckpt__commit(ctx, sv);
}

void ckpt__chunk_stage_end(void *arg, struct ckpt_codec_ws *ws)
{
    struct ckpt_save *sv = arg;
    (void)ws;
    stage_end(sv->ctx, sv);
}

void ckpt__chunk_job(void *arg, struct ckpt_codec_ws *ws)
{
    struct ckpt_chunk_job *j = arg;
    struct ckpt_save *sv = j->sv;
    struct ckpt_ctx *ctx = sv->ctx;
    struct ckpt_mitem *it = &sv->m.items[j->item];
    struct ckpt_chunk_ref *ref = &it->chunks[j->chunk];
    const uint8_t *raw;
    char err[CKPT_ERR_MAX] = "";
    ckpt_status st = CKPT_OK;
    int is_file = !j->blk && !j->raw, packed = 0, counted = 0;

    if (sv->st) /* already failed: do no more work */
        goto out;
    if (!ws) {
        ckpt__save_fail(sv, CKPT_E_NOMEM, "worker has no buffers");
        goto out;
    }
    if (j->blk) {
        raw = j->blk->data;
    } else if (j->raw) {
        raw = j->raw;
    } else {
        uint8_t *scratch = ckpt__codec_ws_scratch(ws, j->len);
        int changed = 0;
        st = scratch ? read_file_chunk(sv->paths[j->item], &sv->files[j->item], j->off, j->len,
                                       scratch, &changed, err)
                     : CKPT_E_NOMEM;
        if (st) {
            ckpt__save_fail(sv, st, "item %s: %s", it->name, scratch ? err : "no memory");
            goto out;
        }
        if (changed) { /* another version: file_done reads it again */
            pthread_mutex_lock(&sv->mu);
            sv->files[j->item].changed = 1;
            pthread_mutex_unlock(&sv->mu);
            goto out;
        }
        raw = scratch;
    }
    if (j->hash_only) {
        ckpt__chunk_id(raw, j->len, ref->id);
        ref->raw_len = (uint32_t)j->len;
        goto out;
    }
    st = store_chunk(ctx, sv, it->elem_size, ref, raw, j->len, ws, &packed, &counted, err);
    if (st)
        ckpt__save_fail(sv, st, "writing chunk %zu of %s: %s", j->chunk, it->name, err);
out:
    if (!sv->st && !counted) { /* progress: this chunk is known (or hashed) */
        ckpt__progress_add(&ctx->progress.bytes_done, j->len);
        ckpt__progress_add(&ctx->progress.chunks_done, 1);
    }
    if (j->in_place) { /* the region is read: its owner may change it */
        pthread_mutex_lock(&sv->mu);
        if (--sv->in_place == 0)
            pthread_cond_broadcast(&sv->cv);
        pthread_mutex_unlock(&sv->mu);
    }
    if (!packed) { /* a chunk put into a pack was counted there */
        pthread_mutex_lock(&sv->mu);
        sv->raw_left -= j->len < sv->raw_left ? j->len : sv->raw_left;
        pthread_mutex_unlock(&sv->mu);
    }
    if (is_file) {
        size_t left;
        pthread_mutex_lock(&sv->mu);
        left = --sv->files[j->item].left;
        pthread_mutex_unlock(&sv->mu);
        if (left == 0)
            file_done(ctx, sv, j->item, ws);
    }
    ckpt__staging_put(&ctx->staging, j->blk);
    free(j);
    if (ckpt__save_unref(sv))
        stage_end(ctx, sv); /* the last chunk: this worker ends the stage */
}
