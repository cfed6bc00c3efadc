/*
 * ckptrun.h -- the commands of ckptrun, as main.c dispatches them. Each
 * takes the parsed command line (opts.h) and returns the process exit code.
 *
 * ckptrun is a client of libckpt's public header (ckpt.h), of the store
 * interface (ckpt_store.h), the HTTP transport (ckpt_http.h) and the shared
 * module (common/ckpt_common.h). Its folders, from the top down (each uses
 * only those below it; quoted includes name a path under ckptrun/):
 *   main.c, cli.c  command line (the option table and --help; cli_gen.c
 *                  the man page and completions from it), environment
 *                  fallbacks, dispatch;
 *                  cli_suggest.c "did you mean"; opts.c the options to a
 *                  libckpt context, exit codes (opts.h)
 *   cmd/           save, restore, ls, verify, gc, status, recover (the
 *                  cron/systemd entry point); open.c the preamble they
 *                  share, cmds.c their helpers, pending_show.c
 *   doctor/        `doctor`: doctor.c runs the checks, one file each
 *                  (notice, state, disk, store, changed, codec, throughput,
 *                  estimate), report.c records their lines (doctor/report.h)
 *   sup/           `run`: supervise.c (setup, event loop, outcome) over
 *                  sup_events.c (what each event source means), stop.c (the
 *                  stop state machine), request.c (asking the child for a
 *                  checkpoint), sup.h (its state), sup_log.c (its event log
 *                  and run record), sup_report.c (what is not safe, said),
 *                  sup_seam.c (the clocks and the world, for tests),
 *                  sup_nodes.c, sup_leftover.c, child.c (spawn, signals,
 *                  reap), keeper.c and proctree.c (the job's process tree),
 *                  ctlserver.c (the control socket, docs/CONTROL.md),
 *                  renewer.c (the lease renewal thread), claim.c (the lease
 *                  and fencing), prestart.c (the restore before start),
 *                  hooks.c (--on-complete ...), resume_cmd.c,
 *                  notice_queue.c and notice_glue.c (notices posted to the
 *                  loop)
 *   watch/         commit what a trainer writes into CKPT_DIR (watch.h,
 *                  watch/int.h); commit_files.c commits files/directories
 *                  as one checkpoint (save, watcher)
 *   nodes/         a job of several nodes: its identity, the nodes' shared
 *                  view through the store
 *   notice/        cloud preemption notices (notice.h, notice/int.h; one
 *                  file per provider, notice/provider.h; notice/none.c
 *                  without libcurl)
 *   record/        the run record in the store (RUN, events/, files/), the
 *                  runs of a store, the event history, the run's lease
 *   base/          runlog.c (the event log on stderr, result lines, the
 *                  status line), parse.c (pure parsing of its own: steps
 *                  from names, fractions; durations, sizes, codecs, signals
 *                  and the clock are common/'s), tty_progress.c (progress
 *                  of long library calls, terminal only), fsutil.c
 */
#ifndef CKPTRUN_H
#define CKPTRUN_H

#include "opts.h"

/* Administration commands (cmd/<name>.c). */
int cmd_save(struct opts *o);
int cmd_restore(struct opts *o);
int cmd_ls(struct opts *o);
int cmd_verify(struct opts *o);
int cmd_gc(struct opts *o);
int cmd_status(struct opts *o);
/* Pre-flight checks of this instance, store and codec (doctor/doctor.c). */
int cmd_doctor(struct opts *o);
/* `run`: supervise COMMAND (sup/supervise.c). */
int cmd_run(struct opts *o);
/* `recover`: `run` for cron and systemd; exits 0 without running anything
 * when the run is completed or its lease is held elsewhere (cmd/recover.c). */
int cmd_recover(struct opts *o);

#endif
