/*
 * fsutil.h -- the local file system: directories ckptrun creates (owner
 * only) and trees it removes.
 */
#ifndef CKPTRUN_FSUTIL_H
#define CKPTRUN_FSUTIL_H

/* mkdir -p with owner-only permissions for what it creates.
 * @return 0 or -1 with errno (ENOTDIR when `path` is not a directory). */
int mkdir_owner(const char *path);

/* Remove `path` and everything under it, without following symbolic
 * links; a path that is already gone is fine. @return 0 or -1 (errno). */
int rm_rf(const char *path);

#endif
