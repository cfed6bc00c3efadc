/*
 * opts.c -- from the options to the store: exit codes for what the library
 * says, the context configuration, and whether a run exists (opts.h).
 */
#include "opts.h"
#include "runlog.h"
#include "ckpt_store.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

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
