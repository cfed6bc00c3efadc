/* fileread.h -- protected files: telling versions of a file apart, and
 * reading a version's bytes. A save reads a protected file while the
 * program may rewrite it; the bytes it read are one version of the file
 * only if the file is still that version once they are all read. */
#ifndef CKPT_FILEREAD_H
#define CKPT_FILEREAD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "ckpt.h"

/* A version of a file: what stat() tells apart. */
struct ckpt_fversion {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
};

void ckpt__fversion_of(struct ckpt_fversion *v, const struct stat *sb);
int ckpt__fversion_same(const struct ckpt_fversion *a, const struct ckpt_fversion *b);
/* The version at path now (stat): 0, or -1 with errno. */
int ckpt__fversion_stat(const char *path, struct ckpt_fversion *v);
/* The version of the regular file at path, for a snapshot (and its
 * permission bits in *mode): 0, or -1 with errno (EINVAL: not a regular
 * file). Waits, a millisecond at a time, until the file's last change is in
 * the past of the kernel's coarse clock, so that any later write shows as a
 * later time. */
int ckpt__fversion_snap(const char *path, struct ckpt_fversion *v, mode_t *mode);

/* Open the file at path for reading its version v: a descriptor, or -1
 * with errno. *changed is set when the path holds another file now. */
int ckpt__file_open(const char *path, const struct ckpt_fversion *v, int *changed);
/* Read [off, off+len) into dst; a file shorter than that (a new version)
 * sets *changed. CKPT_E_IO with the detail in err. */
ckpt_status ckpt__file_pread(int fd, const char *path, uint64_t off, size_t len, uint8_t *dst,
                             int *changed, char *err);

#endif
