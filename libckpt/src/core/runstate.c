/* runstate.c -- what this writer knows of its run (runstate.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/runstate.h"

void ckpt__run_init(struct ckpt_run *rs)
{
    memset(rs, 0, sizeof *rs);
    pthread_mutex_init(&rs->mu, NULL);
    pthread_cond_init(&rs->cv, NULL);
    ckpt__dedup_init(&rs->idx);
    ckpt__idset_init(&rs->bad_chunks);
}

/* The state a load builds (not bad_chunks, which outlives loads). */
static void state_free(struct ckpt_run *rs)
{
    ckpt__gc_victims_free(&rs->gcv);
    ckpt__idlists_free(rs->damaged_ids, rs->head.ndamaged);
    rs->damaged_ids = NULL;
    ckpt__idlists_free(rs->retained_ids, rs->head.n);
    rs->retained_ids = NULL;
    ckpt__head_free(&rs->head);
    ckpt__dedup_free(&rs->idx);
}

void ckpt__run_destroy(struct ckpt_run *rs)
{
    state_free(rs);
    ckpt__idset_free(&rs->bad_chunks);
    pthread_mutex_destroy(&rs->mu);
    pthread_cond_destroy(&rs->cv);
}

void ckpt__run_install(struct ckpt_run *rs, struct ckpt_run_load *ld, bool ok)
{
    pthread_mutex_lock(&rs->mu);
    if (ok) {
        /* chunks a restore found damaged stay out of the index */
        for (size_t k = 0; k < rs->bad_chunks.cap; k++)
            if (rs->bad_chunks.used[k])
                ckpt__dedup_forget(&ld->idx, rs->bad_chunks.keys[k], CKPT_OBJ_CHUNK);
        state_free(rs);
        rs->head = ld->head;
        rs->retained_ids = ld->retained;
        rs->damaged_ids = ld->damaged;
        rs->idx = ld->idx;
        rs->gcv = ld->gcv;
        rs->newer = ld->newer;
        rs->have_head = ld->exists;
        rs->head_scanned = ld->scanned;
        rs->load_ok = true;
        snprintf(rs->head_etag, sizeof rs->head_etag, "%s", ld->etag);
    } else {
        ckpt__dedup_free(&ld->idx);
        ckpt__idlists_free(ld->retained, ld->head.n);
        ckpt__idlists_free(ld->damaged, ld->head.ndamaged);
        ckpt__head_free(&ld->head); /* zeroed when it was not read */
        ckpt__gc_victims_free(&ld->gcv);
    }
    memset(ld, 0, sizeof *ld);
    rs->loaded = true;
    pthread_cond_broadcast(&rs->cv);
    pthread_mutex_unlock(&rs->mu);
}

void ckpt__run_skip_load(struct ckpt_run *rs)
{
    pthread_mutex_lock(&rs->mu);
    rs->loaded = true; /* load_ok stays false: the commit loads */
    pthread_cond_broadcast(&rs->cv);
    pthread_mutex_unlock(&rs->mu);
}

void ckpt__run_wait_loaded(struct ckpt_run *rs)
{
    pthread_mutex_lock(&rs->mu);
    while (!rs->loaded)
        pthread_cond_wait(&rs->cv, &rs->mu);
    pthread_mutex_unlock(&rs->mu);
}

int ckpt__run_lookup(struct ckpt_run *rs, const uint8_t *id, struct ckpt_loc *loc,
                     struct ckpt_pack *pack)
{
    int known;
    pthread_mutex_lock(&rs->mu);
    while (!rs->loaded)
        pthread_cond_wait(&rs->cv, &rs->mu);
    /* never a chunk (or pack) retention is deleting */
    known = ckpt__dedup_get(&rs->idx, id, loc, pack);
    pthread_mutex_unlock(&rs->mu);
    return known;
}

int ckpt__run_doomed(struct ckpt_run *rs, const uint8_t *id, int kind)
{
    int doomed;
    pthread_mutex_lock(&rs->mu);
    doomed = ckpt__objset_has(&rs->gcv.objs, id, kind);
    pthread_mutex_unlock(&rs->mu);
    return doomed;
}

void ckpt__run_forget_bad(struct ckpt_run *rs, const struct ckpt_idset *bad)
{
    pthread_mutex_lock(&rs->mu);
    for (size_t k = 0; k < bad->cap; k++)
        if (bad->used[k]) {
            ckpt__idset_put(&rs->bad_chunks, bad->keys[k], 1);
            ckpt__dedup_forget(&rs->idx, bad->keys[k], CKPT_OBJ_CHUNK);
        }
    pthread_mutex_unlock(&rs->mu);
}

void ckpt__run_forget(struct ckpt_run *rs, const uint8_t *id, int kind)
{
    ckpt__dedup_forget(&rs->idx, id, kind);
}

void ckpt__dropped_free(struct ckpt_dropped *d)
{
    for (size_t i = 0; i < d->n; i++)
        free(d->entries[i].manifest);
    free(d->entries);
    ckpt__idlists_free(d->ids, d->n);
    memset(d, 0, sizeof *d);
}

int ckpt__run_adopt(struct ckpt_run *rs, struct ckpt_head *nh, const size_t *src,
                    const char *etag, const struct ckpt_manifest *m,
                    struct ckpt_idlist *new_ids, struct ckpt_dropped *dropped)
{
    size_t nold = rs->head.n, at = 0;
    struct ckpt_idlist *retained = calloc(nh->n, sizeof *retained);
    char *kept = calloc(nold ? nold : 1, 1), *mkey = NULL;

    memset(dropped, 0, sizeof *dropped);
    dropped->entries = calloc(nold ? nold : 1, sizeof *dropped->entries);
    dropped->ids = calloc(nold ? nold : 1, sizeof *dropped->ids);
    while (at + 1 < nh->n && src[at] != SIZE_MAX)
        at++;
    mkey = ckpt__strdup(nh->entries[at].manifest);
    if (!retained || !kept || !dropped->entries || !dropped->ids || !mkey) {
        free(retained);
        free(kept);
        free(mkey);
        ckpt__dropped_free(dropped);
        return -1;
    }
    nh->entries[at].manifest = mkey;
    for (size_t k = 0; k < nh->n; k++) {
        if (src[k] == SIZE_MAX) {
            retained[k] = *new_ids;
            memset(new_ids, 0, sizeof *new_ids);
        } else {
            retained[k] = rs->retained_ids[src[k]];
            kept[src[k]] = 1;
        }
    }
    for (size_t i = 0; i < nold; i++)
        if (!kept[i]) {
            dropped->entries[dropped->n] = rs->head.entries[i];
            dropped->ids[dropped->n++] = rs->retained_ids[i];
        }
    free(kept);
    free(rs->head.entries);
    free(rs->retained_ids);
    /* nh shares the old HEAD's damaged entries and gc records */
    rs->head = *nh;
    memset(nh, 0, sizeof *nh);
    rs->retained_ids = retained;
    rs->have_head = true;
    rs->head_scanned = false;
    snprintf(rs->head_etag, sizeof rs->head_etag, "%s", etag);
    /* best effort: a chunk left out of the index is only written again */
    (void)ckpt__dedup_put_manifest(&rs->idx, m);
    return 0;
}
