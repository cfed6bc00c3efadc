/*
 * supervise.h -- `ckptrun [run] -- COMMAND` and `recover`: claim the run
 * (claim.h), restore its newest checkpoint of files (prestart.h), start the
 * child under the keeper (child.h), and drive one event loop (signalfd,
 * timerfd, inotify, control socket, commit results, notices, the keeper's
 * reports) until the child and every process of its tree are gone; then
 * write the outcome and run the hooks (hooks.h).
 */
#ifndef CKPTRUN_SUPERVISE_H
#define CKPTRUN_SUPERVISE_H

struct opts;

enum sup_mode { SUP_RUN, SUP_RECOVER };

/* SUP_RUN: always run the command; a lease held elsewhere is exit 78.
 * SUP_RECOVER: exit 0 without running anything when the run is completed
 * (or stopped by its user, without --resume-stopped) or its lease is held
 * elsewhere. @return the process exit code (docs/ckptrun.md). */
int supervise(struct opts *o, enum sup_mode mode);

#endif
