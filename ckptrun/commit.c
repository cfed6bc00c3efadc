/* commit.c -- see commit.h. */
#include "commit.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Names protected so far, to unprotect them afterwards: the context is
 * reused for the next commit and must start empty. */
struct names {
    char **v;
    size_t n, cap;
};

static int names_add(struct names *ns, const char *s)
{
    if (ns->n == ns->cap) {
        size_t cap = ns->cap ? ns->cap * 2 : 64;
        char **v = realloc(ns->v, cap * sizeof *v);
        if (!v)
            return -1;
        ns->v = v;
        ns->cap = cap;
    }
    if (!(ns->v[ns->n] = strdup(s)))
        return -1;
    ns->n++;
    return 0;
}

static void names_release(struct ckpt_ctx *ctx, struct names *ns)
{
    for (size_t i = 0; i < ns->n; i++) {
        /* NOENT cannot happen for a name we protected; anything else is
         * only worth a debug line, the context is not reused after. */
        ckpt_status st = ckpt_unprotect(ctx, ns->v[i]);
        if (st != CKPT_OK)
            log_msg(LOG_DEBUG, "unprotect", "%s: %s", ns->v[i], ckpt_strerror(st));
        free(ns->v[i]);
    }
    free(ns->v);
    ns->v = NULL;
    ns->n = ns->cap = 0;
}

static ckpt_status add_file(struct ckpt_ctx *ctx, struct names *ns, const char *path,
                            const char *name, uint64_t size, struct commit_result *res)
{
    ckpt_status st = ckpt_protect_file(ctx, name, path);
    if (st != CKPT_OK) {
        snprintf(res->detail, sizeof res->detail, "%s: %s %s", name,
                 ckpt_strerror(st), ckpt_errmsg(ctx));
        goto out;
    }
    if (names_add(ns, name) != 0) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    res->files++;
    res->raw_bytes += size;
out:
    return st;
}

/* Depth-first walk. Inside a directory symbolic links to files are followed
 * (some trainers link shared files); links to directories are skipped so a
 * loop cannot recurse forever. */
static ckpt_status add_tree(struct ckpt_ctx *ctx, struct names *ns, const char *path,
                            const char *name, int depth, struct commit_result *res)
{
    ckpt_status st = CKPT_OK;
    DIR *d = NULL;
    struct dirent *de;
    char p[4096], nm[1024];
    struct stat sb;

    if (depth > 32) {
        snprintf(res->detail, sizeof res->detail, "%s: directory tree too deep", path);
        st = CKPT_E_INVAL;
        goto out;
    }
    if (!(d = opendir(path))) {
        snprintf(res->detail, sizeof res->detail, "%s: %s", path, strerror(errno));
        st = errno == ENOENT ? CKPT_E_NOENT : CKPT_E_IO;
        goto out;
    }
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if ((size_t)snprintf(p, sizeof p, "%s/%s", path, de->d_name) >= sizeof p ||
            (size_t)snprintf(nm, sizeof nm, "%s/%s", name, de->d_name) >= sizeof nm) {
            snprintf(res->detail, sizeof res->detail, "%s: path too long", path);
            st = CKPT_E_INVAL;
            goto out;
        }
        if (lstat(p, &sb) != 0)
            continue; /* removed while we walk: the writer is not done; the
                         commit will miss it, which is what it looked like */
        if (S_ISLNK(sb.st_mode) && (stat(p, &sb) != 0 || S_ISDIR(sb.st_mode)))
            continue;
        if (S_ISDIR(sb.st_mode))
            st = add_tree(ctx, ns, p, nm, depth + 1, res);
        else if (S_ISREG(sb.st_mode))
            st = add_file(ctx, ns, p, nm, (uint64_t)sb.st_size, res);
        if (st != CKPT_OK)
            goto out;
    }
out:
    if (d)
        closedir(d);
    return st;
}

struct find_step {
    uint64_t step;
    struct ckpt_info info;
    int found;
};

static int find_step_cb(void *user, const struct ckpt_info *info)
{
    struct find_step *f = user;
    if (info->step != f->step)
        return 0;
    f->info = *info;
    f->info.manifest = NULL; /* not valid after the callback */
    f->found = 1;
    return 1;
}

ckpt_status commit_paths(struct ckpt_ctx *ctx, const struct commit_src *src,
                         size_t n, uint64_t step, struct commit_result *res)
{
    struct names ns = { 0 };
    ckpt_status st = CKPT_OK;
    struct stat sb;
    int64_t t0;
    struct find_step fs = { .step = step };

    memset(res, 0, sizeof *res);
    res->step = step;
    for (size_t i = 0; i < n; i++) {
        if (stat(src[i].path, &sb) != 0) {
            snprintf(res->detail, sizeof res->detail, "%s: %s", src[i].path, strerror(errno));
            st = errno == ENOENT ? CKPT_E_NOENT : CKPT_E_IO;
            goto out;
        }
        if (S_ISDIR(sb.st_mode))
            st = add_tree(ctx, &ns, src[i].path, src[i].name, 0, res);
        else if (S_ISREG(sb.st_mode))
            st = add_file(ctx, &ns, src[i].path, src[i].name, (uint64_t)sb.st_size, res);
        else {
            snprintf(res->detail, sizeof res->detail, "%s: not a file or directory", src[i].path);
            st = CKPT_E_INVAL;
        }
        if (st != CKPT_OK)
            goto out;
    }
    if (res->files == 0) {
        snprintf(res->detail, sizeof res->detail, "no files to commit");
        st = CKPT_E_NOENT;
        goto out;
    }
    t0 = mono_ms();
    st = ckpt_save(ctx, step);
    if (st == CKPT_OK)
        st = ckpt_wait(ctx);
    res->seconds = (double)(mono_ms() - t0) / 1000.0;
    if (st != CKPT_OK) {
        snprintf(res->detail, sizeof res->detail, "%s", ckpt_errmsg(ctx));
        goto out;
    }
    /* Figures for the log line; a failure here does not undo the commit. */
    if (ckpt_list(ctx, find_step_cb, &fs) == CKPT_OK && fs.found) {
        res->stored_bytes = fs.info.stored_bytes;
        res->new_bytes = fs.info.new_bytes;
    }
out:
    names_release(ctx, &ns);
    res->st = st;
    return st;
}

cJSON *commit_fields(const struct commit_result *res, const char *source)
{
    cJSON *o = cJSON_CreateObject();
    double mb_s = res->seconds > 0 ? (double)res->raw_bytes / 1e6 / res->seconds : 0;
    /* ratio = raw bytes per byte stored for this checkpoint's chunks. */
    double ratio = res->stored_bytes ? (double)res->raw_bytes / (double)res->stored_bytes : 0;

    if (!o)
        return NULL;
    cJSON_AddNumberToObject(o, "step", (double)res->step);
    cJSON_AddNumberToObject(o, "files", (double)res->files);
    cJSON_AddNumberToObject(o, "bytes", (double)res->raw_bytes);
    cJSON_AddNumberToObject(o, "stored", (double)res->new_bytes);
    cJSON_AddNumberToObject(o, "ratio", (double)(int64_t)(ratio * 100) / 100.0);
    cJSON_AddNumberToObject(o, "mb_s", (double)(int64_t)(mb_s * 10) / 10.0);
    cJSON_AddNumberToObject(o, "seconds", (double)(int64_t)(res->seconds * 1000) / 1000.0);
    if (source)
        cJSON_AddStringToObject(o, "source", source);
    return o;
}
