/*
 * opts.c -- from the options to the store: exit codes for what the library
 * says, the context configuration, and whether a run exists (opts.h).
 */
#include "opts.h"
#include "base/runlog.h"
#include "base/parse.h"
#include "record/runs.h"
#include "ckpt_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int exit_code_for_status(ckpt_status st)
{
    switch (st) {
    case CKPT_E_UNREACHABLE:
    case CKPT_E_NOENT:        /* file store whose mount point is missing */
    case CKPT_E_TRANSIENT:
    case CKPT_E_THROTTLED:
    case CKPT_E_IO:
    case CKPT_E_NOSPACE:
        return EXIT_UNAVAILABLE;
    default:
        return EXIT_CONFIG;
    }
}

void opts_to_config(const struct opts *o, struct ckpt_config *cfg)
{
    struct ckpt_config init = CKPT_CONFIG_INIT;
    *cfg = init;
    cfg->store = o->store;
    cfg->run = o->run;
    cfg->codec = o->codec;
    cfg->codec_level = o->codec_level;
    cfg->keep = o->keep;
    cfg->log_fn = log_lib;
    cfg->log_level = log_lib_level();
    /* ckptrun's own contexts must never connect to a control socket (it
     * may itself run under another ckptrun). */
    cfg->no_control = 1;
}

int open_ctx(const struct opts *o, struct ckpt_ctx **ctx)
{
    struct ckpt_config cfg;
    ckpt_status st;
    int rc = 0;

    opts_to_config(o, &cfg);
    st = ckpt_open(&cfg, ctx);
    if (st != CKPT_OK) {
        rc = exit_code_for_status(st);
        log_error("cannot open store %s (run %s): %s: %s", o->store, o->run, ckpt_strerror(st),
                  ckpt_errmsg(NULL));
        *ctx = NULL;
    }
    return rc;
}

int run_exists(const struct opts *o)
{
    static const char *const keys[] = { "HEAD", "RUN" };
    struct ckpt_store *st = NULL;
    char err[CKPT_ERR_MAX] = "", key[512];
    struct stat sb;
    int rc = 0;

    if (strncmp(o->store, "file://", 7) == 0) {
        /* no open: it would create the store's directory */
        for (size_t i = 0; i < 2 && !rc; i++) {
            snprintf(key, sizeof key, "%s/%s/%s", o->store + 7, o->run, keys[i]);
            rc = stat(key, &sb) == 0;
        }
        goto out;
    }
    {
        ckpt_status s = ckpt_store_open(o->store, NULL, &st, err);
        for (size_t i = 0; i < 2 && s == CKPT_OK && !rc; i++) {
            uint64_t size;
            snprintf(key, sizeof key, "%s/%s", o->run, keys[i]);
            s = st->ops->head(st, key, &size, NULL, err);
            if (s == CKPT_OK)
                rc = 1;
            else if (s == CKPT_E_NOENT)
                s = CKPT_OK;
        }
        if (s != CKPT_OK) {
            log_error("store %s: %s%s%s", o->store, ckpt_strerror(s), err[0] ? ": " : "", err);
            rc = -exit_code_for_status(s);
        }
    }
out:
    ckpt_store_close(st);
    return rc;
}

char *store_url_hint(const char *url, char *buf, size_t n)
{
    const char *path = NULL, *what = "a relative path (file:// takes an absolute one)";
    const char *home = getenv("HOME");
    char cwd[4096];

    buf[0] = '\0';
    if (strncmp(url, "file://", 7) == 0)
        path = url + 7; /* file://data/ckpt */
    else if (strncmp(url, "file:", 5) == 0)
        path = url + 5; /* file:/data, file:data */
    else if (!strstr(url, "://") && *url) {
        path = url; /* /data/ckpt, ./ckpt */
        what = "a path, not a store URL";
    }
    if (!path || !*path)
        goto out;
    if (path[0] == '/') {
        if (path == url || strncmp(url, "file:/", 6) == 0)
            snprintf(buf, n, "; %s: did you mean file://%s?",
                     path == url ? what : "a file:// URL has three slashes", path);
        goto out;
    }
    while (strncmp(path, "./", 2) == 0)
        path += 2;
    if (path[0] == '~' && (path[1] == '/' || !path[1]) && home && home[0] == '/')
        snprintf(buf, n, "; %s (the shell does not expand ~ there): did you mean file://%s%s?",
                 what, home, path + 1);
    else if (getcwd(cwd, sizeof cwd)) {
        const char *rest = strcmp(path, ".") == 0 ? "" : path;
        snprintf(buf, n, "; %s: did you mean file://%s%s%s?", what, cwd,
                 rest[0] && strcmp(cwd, "/") != 0 ? "/" : "", rest);
    }
out:
    return buf;
}

char *run_not_found_hint(const struct opts *o, char *buf, size_t n)
{
    struct ckpt_store *st = NULL;
    struct runs r = { 0 };
    char err[CKPT_ERR_MAX] = "";
    const char **names = NULL;
    size_t idx[5], k, len;
    int close = 1;
    struct stat sb;

    buf[0] = '\0';
    /* opening a file:// store creates its directory */
    if (strncmp(o->store, "file://", 7) == 0 && stat(o->store + 7, &sb) != 0)
        goto out;
    if (ckpt_store_open(o->store, NULL, &st, err) != CKPT_OK ||
        runs_walk(st, RUN_HINT_MAX_KEYS, &r, err) != CKPT_OK ||
        !(names = calloc(r.n + 1, sizeof *names)))
        goto out;
    for (size_t i = 0; i < r.n; i++)
        names[i] = r.v[i].name;
    k = suggest_closest(o->run, names, r.n, idx, 3);
    if (k == 0 && r.n > 0 && r.n <= 5 && !r.truncated) {
        /* nothing close, but few enough to name them all */
        close = 0;
        for (k = 0; k < r.n; k++)
            idx[k] = k;
    }
    if (k == 0)
        goto out;
    snprintf(buf, n, "%s", close ? "; did you mean " : "; its runs: ");
    for (size_t i = 0; i < k && (len = strlen(buf)) < n; i++) {
        const char *sep = i + 1 < k ? ", " : close ? " or " : " and ";
        snprintf(buf + len, n - len, "%s%s", i == 0 ? "" : sep, names[idx[i]]);
    }
    if (close && (len = strlen(buf)) < n)
        snprintf(buf + len, n - len, "?");
out:
    free(names);
    runs_free(&r);
    ckpt_store_close(st);
    return buf;
}
