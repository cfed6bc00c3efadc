/* fsutil.c -- directories created and removed (fsutil.h). */
#include "base/fsutil.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int mkdir_owner(const char *path)
{
    char p[4096];
    size_t len = strlen(path);
    struct stat sb;
    int rc = -1;

    if (len == 0 || len >= sizeof p) {
        errno = ENAMETOOLONG;
        goto out;
    }
    memcpy(p, path, len + 1);
    for (char *s = p + 1; ; s++) {
        if (*s == '/' || *s == '\0') {
            char c = *s;
            *s = '\0';
            if (mkdir(p, 0700) != 0 && errno != EEXIST)
                goto out;
            *s = c;
            if (!c)
                break;
        }
    }
    if (stat(path, &sb) != 0)
        goto out;
    if (!S_ISDIR(sb.st_mode)) {
        errno = ENOTDIR;
        goto out;
    }
    rc = 0;
out:
    return rc;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    return (flag == FTW_DP ? rmdir(path) : unlink(path)) == 0 || errno == ENOENT ? 0 : -1;
}

int rm_rf(const char *path)
{
    struct stat sb;

    if (lstat(path, &sb) != 0 && errno == ENOENT)
        return 0;
    return nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}
