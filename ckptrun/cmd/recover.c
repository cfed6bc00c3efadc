/*
 * recover.c -- `ckptrun recover --run NAME -- COMMAND`: the entry point that
 * cron, a systemd timer or cloud-init starts on every (new) instance.
 *
 * It is `run` with two differences (docs/recover.md): nothing happens, and
 * the exit is 0, when the run is completed or another live runner holds its
 * lease; and the run name must be given, since cron starts us in $HOME and a
 * name from the working directory would quietly start a different run.
 * Everything else -- lease, fencing, restore, supervision -- is the
 * supervisor's (supervise.c), shared with `run`.
 */
#include "ckptrun.h"
#include "base/runlog.h"
#include "sup/supervise.h"

int cmd_recover(struct opts *o)
{
    int rc;

    /* main.c refuses a missing name already; this guards other callers. */
    if (!o->run || !*o->run) {
        log_error("recover needs the run's name: --run NAME or CKPT_RUN");
        rc = EXIT_USAGE;
        goto out;
    }
    if (o->nargs < 1) {
        log_error("no command to run: ckptrun recover --run NAME [OPTIONS] -- COMMAND [ARG...]");
        rc = EXIT_USAGE;
        goto out;
    }
    rc = supervise(o, SUP_RECOVER);
out:
    return rc;
}
