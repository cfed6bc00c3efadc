/*
 * ckptrun.h -- the commands of ckptrun, as main.c dispatches them. Each
 * takes the parsed command line (opts.h) and returns the process exit code.
 *
 * ckptrun is a client of libckpt's public header (ckpt.h) and of the store
 * interface (store.h). Its files, from the top down:
 *   main.c        command line, environment fallbacks, dispatch
 *   recover.c     `recover`: the cron/systemd entry point
 *   supervise.c   `run`: the supervisor's setup, event loop and outcome, over
 *                 sup_events.c (what each event source means), stop.c (the
 *                 stop state machine), request.c (asking the child for a
 *                 checkpoint), sup.h (its state), sup_log.c (its event
 *                 log and run record),
 *                 child.c (spawn, signals, reap), renewer.c (the lease
 *                 renewal thread), notice_queue.c (notices posted to the
 *                 loop), prestart.c (the restore before start), claim.c
 *                 (the lease and fencing), hooks.c (--on-complete ...)
 *   cmd_*.c       save, restore, ls, verify, gc, status (cmds.c: shared)
 *   doctor*.c     `doctor`: one file per check (doctor.h)
 *   watch*.c      commit what a trainer writes into CKPT_DIR (watch.h)
 *   commit_files.c commit files/directories as one checkpoint (save, watcher)
 *   record.c      the run record in the store (RUN, events/, files/)
 *   lease.c       the run's lease
 *   ctlserver.c   the control socket server (docs/CONTROL.md)
 *   keeper.c      the keeper of the job's process tree (no survivor, leftovers)
 *   proctree.c    the job's processes from /proc (async-signal-safe)
 *   notice*.c     cloud preemption notices (notice.h, notice_int.h;
 *                 notice_none.c without libcurl); notice_glue.c: from the
 *                 poller to the supervisor's queue
 *   opts.c        the options to a libckpt context, exit codes (opts.h)
 *   cli.c         the command line as data: --help, man page, completions
 *   parse.c       pure parsing of its own (steps from names, fractions);
 *                 durations, sizes, codecs, signals and the clock are the
 *                 shared module's (common/ckpt_common.h)
 *   runlog.c      the event log on stderr, result lines, the status line
 *   tty_progress.c progress display of long library calls (terminal only)
 *   fsutil.c      directories made and removed
 */
#ifndef CKPTRUN_H
#define CKPTRUN_H

#include "opts.h"

/* Administration commands (cmd_<name>.c). */
int cmd_save(struct opts *o);
int cmd_restore(struct opts *o);
int cmd_ls(struct opts *o);
int cmd_verify(struct opts *o);
int cmd_gc(struct opts *o);
int cmd_status(struct opts *o);
/* Pre-flight checks of this instance, store and codec (doctor.c). */
int cmd_doctor(struct opts *o);
/* `run`: supervise COMMAND (supervise.c). */
int cmd_run(struct opts *o);
/* `recover`: `run` for cron and systemd; exits 0 without running anything
 * when the run is completed or its lease is held elsewhere (recover.c). */
int cmd_recover(struct opts *o);

#endif
