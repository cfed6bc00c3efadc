/* commit_files.c -- see commit_files.h. */
#include "watch/commit_files.h"
#include "base/runlog.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Names protected so far (a ckpt_strv), to unprotect them afterwards: the
 * context is reused for the next commit and must start empty. */
static void names_release(struct ckpt_ctx *ctx, struct ckpt_strv *ns)
{
    for (size_t i = 0; i < ns->n; i++) {
        /* NOENT cannot happen for a name we protected; anything else is
         * only worth a debug line, the context is not reused after. */
        ckpt_status st = ckpt_unprotect(ctx, ns->v[i]);
        if (st != CKPT_OK)
            log_msg(LOG_DEBUG, "unprotect", "%s: %s", ns->v[i], ckpt_strerror(st));
    }
    ckpt__strv_free(ns);
}

/* ---- one walk for the fingerprint and for the commit ------------------------ */

/* Called for each regular file found: its path, item name, base name and
 * stat. Nonzero stops the walk with that status. */
typedef ckpt_status (*visit_fn)(void *user, const char *path, const char *name,
                                const char *base, const struct stat *sb);

struct walk {
    visit_fn visit;
    void *user;
    struct commit_print *print;
    char *detail;             /* may be NULL */
    size_t detail_n;
};

static void print_file(struct commit_print *p, const struct stat *sb)
{
    int64_t mt = (int64_t)sb->st_mtim.tv_sec * 1000000000LL + sb->st_mtim.tv_nsec;
    int64_t ct = (int64_t)sb->st_ctim.tv_sec * 1000000000LL + sb->st_ctim.tv_nsec;
    p->files++;
    p->bytes += (uint64_t)sb->st_size;
    p->ino_sum += (uint64_t)sb->st_ino;
    if (mt > p->mtime_max_ns)
        p->mtime_max_ns = mt;
    if (ct > p->ctime_max_ns)
        p->ctime_max_ns = ct;
}

static ckpt_status walk_fail(struct walk *wk, int e, const char *path, const char *what)
{
    if (wk->detail)
        snprintf(wk->detail, wk->detail_n, "%s: %s", path, what ? what : strerror(e));
    return e == ENOENT || e == ENOTDIR ? CKPT_E_NOENT : e == ENOMEM ? CKPT_E_NOMEM : CKPT_E_IO;
}

/* Depth-first. Inside a directory symbolic links to files are followed
 * (some trainers link shared files); links to directories are skipped so a
 * loop cannot recurse forever, and so are dangling links. Anything that
 * vanishes between readdir and lstat fails the walk: the entry is being
 * removed or replaced, and a commit without that file would be torn. */
static ckpt_status walk_tree(struct walk *wk, const char *path, const char *name, int depth)
{
    ckpt_status st = CKPT_OK;
    DIR *d = NULL;
    struct dirent *de;
    char p[4096], nm[1024];
    struct stat sb;

    if (depth > 32) {
        st = walk_fail(wk, EINVAL, path, "directory tree too deep");
        goto out;
    }
    if (!(d = opendir(path))) {
        st = walk_fail(wk, errno, path, NULL);
        goto out;
    }
    wk->print->dirs++;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if ((size_t)snprintf(p, sizeof p, "%s/%s", path, de->d_name) >= sizeof p ||
            (size_t)snprintf(nm, sizeof nm, "%s/%s", name, de->d_name) >= sizeof nm) {
            st = walk_fail(wk, EINVAL, path, "path too long");
            goto out;
        }
        if (lstat(p, &sb) != 0) {
            st = walk_fail(wk, errno, p, NULL);
            goto out;
        }
        if (S_ISLNK(sb.st_mode) && (stat(p, &sb) != 0 || S_ISDIR(sb.st_mode)))
            continue;
        if (S_ISDIR(sb.st_mode))
            st = walk_tree(wk, p, nm, depth + 1);
        else if (S_ISREG(sb.st_mode)) {
            print_file(wk->print, &sb);
            st = wk->visit ? wk->visit(wk->user, p, nm, de->d_name, &sb) : CKPT_OK;
        }
        if (st != CKPT_OK)
            goto out;
    }
out:
    if (d)
        closedir(d);
    return st;
}

/* A top-level source: followed when it is a link. */
static ckpt_status walk_path(struct walk *wk, const char *path, const char *name)
{
    struct stat sb;
    const char *base;

    if (stat(path, &sb) != 0)
        return walk_fail(wk, errno, path, NULL);
    if (S_ISDIR(sb.st_mode))
        return walk_tree(wk, path, name, 0);
    if (!S_ISREG(sb.st_mode))
        return walk_fail(wk, EINVAL, path, "not a file or directory");
    print_file(wk->print, &sb);
    base = strrchr(name, '/');
    return wk->visit ? wk->visit(wk->user, path, name, base ? base + 1 : name, &sb) : CKPT_OK;
}

struct on_file_user {
    void (*fn)(void *user, const char *name);
    void (*fn2)(void *user, const char *name, const char *base);
    void *user;
};

static ckpt_status print_visit(void *user, const char *path, const char *name, const char *base,
                               const struct stat *sb)
{
    struct on_file_user *u = user;
    (void)path;
    (void)sb;
    if (u->fn)
        u->fn(u->user, base);
    if (u->fn2)
        u->fn2(u->user, name, base);
    return CKPT_OK;
}

static int print_path(const char *path, struct commit_print *p, struct on_file_user *u)
{
    struct walk wk = { print_visit, u, p, NULL, 0 };
    const char *base = strrchr(path, '/');
    ckpt_status st = walk_path(&wk, path, base ? base + 1 : path);

    if (st == CKPT_OK)
        return 0;
    errno = st == CKPT_E_NOENT ? ENOENT : st == CKPT_E_NOMEM ? ENOMEM : EIO;
    return -1;
}

int commit_print_path(const char *path, struct commit_print *p,
                      void (*on_file)(void *user, const char *name), void *user)
{
    struct on_file_user u = { on_file, NULL, user };
    return print_path(path, p, &u);
}

int commit_print_walk(const char *path, struct commit_print *p,
                      void (*on_file)(void *user, const char *name, const char *base),
                      void *user)
{
    struct on_file_user u = { NULL, on_file, user };
    return print_path(path, p, &u);
}

void commit_print_add(struct commit_print *sum, const struct commit_print *p)
{
    sum->files += p->files;
    sum->dirs += p->dirs;
    sum->bytes += p->bytes;
    sum->ino_sum += p->ino_sum;
    if (p->mtime_max_ns > sum->mtime_max_ns)
        sum->mtime_max_ns = p->mtime_max_ns;
    if (p->ctime_max_ns > sum->ctime_max_ns)
        sum->ctime_max_ns = p->ctime_max_ns;
}

int commit_print_eq(const struct commit_print *a, const struct commit_print *b)
{
    return a->files == b->files && a->dirs == b->dirs && a->bytes == b->bytes &&
           a->ino_sum == b->ino_sum && a->mtime_max_ns == b->mtime_max_ns &&
           a->ctime_max_ns == b->ctime_max_ns;
}

/* ---- commit ------------------------------------------------------------------ */

struct protect_user {
    struct ckpt_ctx *ctx;
    struct ckpt_strv *ns;
    struct commit_result *res;
};

static ckpt_status protect_visit(void *user, const char *path, const char *name,
                                 const char *base, const struct stat *sb)
{
    struct protect_user *u = user;
    /* AS_IS: the version judged complete or nothing (libckpt would read a
     * file that changed again, and could take a version nobody judged). */
    ckpt_status st = ckpt_protect_file_ex(u->ctx, name, path, CKPT_FILE_AS_IS);

    (void)base;
    if (st != CKPT_OK) {
        snprintf(u->res->detail, sizeof u->res->detail, "%s: %s %s", name, ckpt_strerror(st),
                 ckpt_errmsg(u->ctx));
        goto out;
    }
    if (ckpt__strv_push(u->ns, name) != 0) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    u->res->files++;
    u->res->raw_bytes += (uint64_t)sb->st_size;
out:
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

/* The sources' print now, for the after-commit comparison; -1 when a walk
 * fails (something vanished: changed too). */
static int print_sources(const struct commit_src *src, size_t n, struct commit_print *p)
{
    memset(p, 0, sizeof *p);
    for (size_t i = 0; i < n; i++) {
        struct walk wk = { NULL, NULL, p, NULL, 0 };
        if (!src[i].link && walk_path(&wk, src[i].path, src[i].name) != CKPT_OK)
            return -1;
    }
    return 0;
}

ckpt_status commit_paths_checked(struct ckpt_ctx *ctx, const struct commit_src *src, size_t n,
                                 uint64_t step, commit_check_fn check, void *user,
                                 struct commit_result *res)
{
    struct ckpt_strv ns = { 0 };
    struct protect_user pu = { ctx, &ns, res };
    ckpt_status st = CKPT_OK;
    int64_t t0;
    struct find_step fs = { .step = step };
    struct commit_print after;

    memset(res, 0, sizeof *res);
    res->step = step;
    for (size_t i = 0; i < n; i++) {
        struct walk wk = { protect_visit, &pu, &res->print, res->detail, sizeof res->detail };
        if (src[i].link) {
            /* Where it lands is checked by ckpt_save against the items. */
            st = ckpt_protect_link(ctx, src[i].name, src[i].link);
            if (st != CKPT_OK)
                snprintf(res->detail, sizeof res->detail, "%s -> %s: %s %s", src[i].name,
                         src[i].link, ckpt_strerror(st), ckpt_errmsg(ctx));
            else if (ckpt__strv_push(&ns, src[i].name) != 0)
                st = CKPT_E_NOMEM;
            else
                res->links++;
        } else {
            st = walk_path(&wk, src[i].path, src[i].name);
        }
        if (st != CKPT_OK)
            goto out;
    }
    if (res->files == 0) {
        snprintf(res->detail, sizeof res->detail, "no files to commit");
        st = CKPT_E_NOENT;
        goto out;
    }
    /* Walked again now that libckpt holds each file's version: a file that
     * changed since the walk above shows here, one that changes later makes
     * the save fail with CKPT_E_CHANGED (ctime only grows). */
    if ((check && check(user, &res->print) != 0) || print_sources(src, n, &after) != 0 ||
        !commit_print_eq(&after, &res->print)) {
        snprintf(res->detail, sizeof res->detail, "changed between its check and its reading");
        res->aborted = 1;
        st = CKPT_E_PRECONDITION;
        goto out;
    }
    t0 = ckpt__mono_ms();
    st = ckpt_save(ctx, step);
    if (st == CKPT_OK)
        st = ckpt_wait(ctx);
    res->seconds = (double)(ckpt__mono_ms() - t0) / 1000.0;
    if (st != CKPT_OK) {
        snprintf(res->detail, sizeof res->detail, "%s", ckpt_errmsg(ctx));
        if (st == CKPT_E_CHANGED)
            res->aborted = 1; /* not the version judged: judged again */
        goto out;
    }
    /* A rewrite while the library read the files would have changed what
     * a walk sees (size, mtime, ctime, inode); AS_IS makes that a failure,
     * so this is the second line of defence. */
    if (print_sources(src, n, &after) != 0 || !commit_print_eq(&after, &res->print))
        res->changed = 1;
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

ckpt_status commit_paths(struct ckpt_ctx *ctx, const struct commit_src *src,
                         size_t n, uint64_t step, struct commit_result *res)
{
    return commit_paths_checked(ctx, src, n, step, NULL, NULL, res);
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
    if (res->links)
        cJSON_AddNumberToObject(o, "links", (double)res->links);
    cJSON_AddNumberToObject(o, "bytes", (double)res->raw_bytes);
    cJSON_AddNumberToObject(o, "stored", (double)res->new_bytes);
    cJSON_AddNumberToObject(o, "ratio", (double)(int64_t)(ratio * 100) / 100.0);
    cJSON_AddNumberToObject(o, "mb_s", (double)(int64_t)(mb_s * 10) / 10.0);
    cJSON_AddNumberToObject(o, "seconds", (double)(int64_t)(res->seconds * 1000) / 1000.0);
    if (source)
        cJSON_AddStringToObject(o, "source", source);
    return o;
}
