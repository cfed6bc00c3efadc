/*
 * commit.h -- commit files and directories as one checkpoint through the
 * public API (ckpt_protect_file + ckpt_save + ckpt_wait). Used by
 * `ckptrun save` and by the watcher's worker thread. The library dedups
 * chunks, so committing an unchanged file again costs a manifest.
 */
#ifndef CKPTRUN_COMMIT_H
#define CKPTRUN_COMMIT_H

#include <stddef.h>
#include <stdint.h>
#include "ckpt.h"

/* One source: a file or directory on disk and the item name it gets (a
 * directory's files are named "<name>/<relative path>"). A top-level
 * symbolic link is followed: committed as what it points to. */
struct commit_src {
    const char *path;
    const char *name;
};

struct commit_result {
    ckpt_status st;
    uint64_t step;
    uint64_t files;
    uint64_t raw_bytes;       /* sum of file sizes */
    uint64_t stored_bytes;    /* from ckpt_list, 0 if unknown */
    uint64_t new_bytes;       /* compressed bytes first written by this commit */
    double seconds;           /* ckpt_save .. committed */
    char detail[512];         /* why it failed ("" on success) */
};

/* Commit `n` sources at `step` on `ctx` (which must have nothing else
 * protected) and wait until committed or failed; everything protected here is
 * unprotected before returning. @return res->st. */
ckpt_status commit_paths(struct ckpt_ctx *ctx, const struct commit_src *src,
                         size_t n, uint64_t step, struct commit_result *res);

#include <cjson/cJSON.h>
/* Fields of a commit for the log and the run record: step, files, bytes,
 * stored, ratio, mb_s, seconds, source. Caller frees. */
cJSON *commit_fields(const struct commit_result *res, const char *source);

#endif
