/*
 * commit_files.h -- commit files and directories as one checkpoint through the
 * public API (ckpt_protect_file + ckpt_save + ckpt_wait). Used by
 * `ckptrun save` and by the watcher's worker thread. The library dedups
 * chunks, so committing an unchanged file again costs a manifest.
 */
#ifndef CKPTRUN_COMMIT_FILES_H
#define CKPTRUN_COMMIT_FILES_H

#include <stddef.h>
#include <stdint.h>
#include "ckpt.h"

/* One source: a file or directory on disk and the item name it gets (a
 * directory's files are named "<name>/<relative path>"). A top-level
 * symbolic link is followed: committed as what it points to. With `link`
 * set, the source is a symbolic link item instead (ckpt_protect_link: the
 * target text `link`; `path` is not read). */
struct commit_src {
    const char *path;
    const char *name;
    const char *link;
};

/* What a walk of sources found, as commit_paths reads them: regular files
 * (symbolic links to files followed, links to directories skipped) and the
 * directories holding them. Equal prints = nothing seen changed. */
struct commit_print {
    uint64_t files, dirs, bytes, ino_sum;
    int64_t mtime_max_ns, ctime_max_ns;
};

struct commit_result {
    ckpt_status st;
    uint64_t step;
    uint64_t files;
    uint64_t links;           /* symbolic link items */
    uint64_t raw_bytes;       /* sum of file sizes */
    uint64_t stored_bytes;    /* from ckpt_list, 0 if unknown */
    uint64_t new_bytes;       /* compressed bytes first written by this commit */
    double seconds;           /* ckpt_save .. committed */
    struct commit_print print;/* of what was protected (links items excluded) */
    int aborted;              /* the check refused the print: nothing was saved */
    int changed;              /* committed, but a second walk after the commit
                                 found the sources changed since the first */
    char detail[512];         /* why it failed ("" on success) */
};

/* Fingerprint `path` (a file, or a directory tree) as commit_paths would read
 * it, adding to *p. `on_file` (may be NULL) gets each file's base name.
 * @return 0, or -1 with errno (ENOENT: something vanished during the walk). */
int commit_print_path(const char *path, struct commit_print *p,
                      void (*on_file)(void *user, const char *name), void *user);
/* As commit_print_path; `on_file` gets each file's item name as well
 * ("<last component of path>/<relative path>" for a directory). */
int commit_print_walk(const char *path, struct commit_print *p,
                      void (*on_file)(void *user, const char *name, const char *base),
                      void *user);
void commit_print_add(struct commit_print *sum, const struct commit_print *p);
int commit_print_eq(const struct commit_print *a, const struct commit_print *b);

/* Called once everything is protected, before ckpt_save: nonzero refuses
 * the commit (res->aborted, st CKPT_E_PRECONDITION, nothing saved). */
typedef int (*commit_check_fn)(void *user, const struct commit_print *print);

/* Commit `n` sources at `step` on `ctx` (which must have nothing else
 * protected) and wait until committed or failed. Files are protected with
 * CKPT_FILE_AS_IS: a file that changes after the check fails the commit
 * (res->aborted, CKPT_E_PRECONDITION or CKPT_E_CHANGED) rather than being
 * committed in a version nobody judged; everything protected here is
 * unprotected before returning. A file or directory that vanishes while the
 * sources are walked fails the commit with CKPT_E_NOENT (never a commit
 * missing it). After a successful commit the sources are walked again:
 * res->changed says they moved meanwhile. @return res->st. */
ckpt_status commit_paths_checked(struct ckpt_ctx *ctx, const struct commit_src *src, size_t n,
                                 uint64_t step, commit_check_fn check, void *user,
                                 struct commit_result *res);
ckpt_status commit_paths(struct ckpt_ctx *ctx, const struct commit_src *src,
                         size_t n, uint64_t step, struct commit_result *res);

#include <cjson/cJSON.h>
/* Fields of a commit for the log and the run record: step, files, links
 * (when any), bytes, stored, ratio, mb_s, seconds, source. Caller frees. */
cJSON *commit_fields(const struct commit_result *res, const char *source);

#endif
