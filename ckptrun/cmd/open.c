/* cmd/open.c -- the start every administration command shares, and a
 * missing run said once (cmd/open.h). */
#include "cmd/open.h"
#include "cmd/cmds.h"
#include "base/runlog.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* 1 when o's operands are what f takes; else a usage error is said. */
static int operands_ok(const struct opts *o, const struct cmd_form *f)
{
    char got[160];

    switch (f->takes) {
    case TAKES_NOTHING:
        if (o->nargs == 0)
            return 1;
        snprintf(got, sizeof got, "got '%.100s'; %s%s", o->args[0], f->instead ? f->instead : "",
                 f->instead ? "; " : "");
        log_error("%s takes no arguments (%ssee ckptrun %s --help)", f->name, got, f->name);
        return 0;
    case TAKES_ONE:
        if (o->nargs == 1)
            return 1;
        break;
    case TAKES_SOME:
        if (o->nargs >= 1)
            return 1;
        break;
    }
    if (o->nargs > 1)
        snprintf(got, sizeof got, "got %d; ", o->nargs);
    else
        got[0] = '\0';
    log_error("%s needs %s one %s (%ssee ckptrun %s --help)", f->name,
              f->takes == TAKES_ONE ? "exactly" : "at least", f->operand, got, f->name);
    return 0;
}

/* A file:// store is a directory, which opening it creates: a command that
 * creates nothing looks first. @return 1 when it is missing (said). */
static int file_store_missing(const struct opts *o)
{
    struct stat sb;

    if (strncmp(o->store, "file://", 7) != 0 || stat(o->store + 7, &sb) == 0)
        return 0;
    if (o->run)
        log_error("run %s not found: store %s does not exist", o->run, o->store);
    else
        log_error("store %s does not exist (nothing was saved there)", o->store);
    return 1;
}

int cmd_open(const struct opts *o, const struct cmd_form *f, void *check_arg, struct ckpt_ctx **ctx)
{
    int rc = 0;

    if (ctx)
        *ctx = NULL;
    if (!operands_ok(o, f)) {
        rc = EXIT_USAGE;
        goto out;
    }
    if (f->check && (rc = f->check(o, check_arg)) != 0)
        goto out;
    if ((f->flags & CMD_EXISTING_STORE) && file_store_missing(o)) {
        rc = EXIT_FAIL;
        goto out;
    }
    log_lib_hold();
    if (ctx)
        rc = open_ctx(o, ctx);
out:
    return rc;
}

void cmd_close(struct ckpt_ctx *ctx)
{
    log_lib_release(NULL);
    ckpt_close(ctx);
}

int cmd_run_missing(const struct opts *o, char *why, size_t n)
{
    char hint[512];
    int e = run_exists(o);

    why[0] = '\0';
    if (e < 0)
        return -e; /* the store could not be asked: said */
    if (e > 0)
        return 0;
    snprintf(why, n, "run %s not found in %s%s", o->run, o->store,
             run_not_found_hint(o, hint, sizeof hint));
    return EXIT_FAIL;
}
