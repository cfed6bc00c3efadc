/*
 * stop.h -- the supervisor's stop state machine.
 *
 *   P_RUN --stop--> P_CKPT --checkpoint settled, or its time up--> P_TERM
 *         --deadline, child still there--> P_KILL
 *
 * A stop (SIGTERM, a scheduler's warning signal, a cloud notice, Ctrl-C, a
 * lost lease) has a deadline D: by default now + --grace, else the notice's
 * deadline less a safety margin. The time to D is split: up to the last
 * third (at most --grace) is the child's to exit after SIGTERM; before
 * that, the final checkpoint is requested (request.h) and awaited (P_CKPT).
 * Its answer is the commit that started after the request: a libckpt
 * commit over the socket, or an entry of CKPT_DIR written after the stop
 * began. Then (P_TERM) clients that turn signals into stops are told
 * `stopping`, their acknowledgements awaited at most a second, and the job
 * gets its signal; SIGKILL goes to the whole tree at D (P_KILL). So a child
 * that ignores requests is still gone by D, and ckptrun always finishes
 * before the deadline. A signal that reached the job's processes directly
 * starts the same stop. Ctrl-C (SIGINT), and a plain SIGTERM under SLURM,
 * are the user's stop: state `stopped`, exit 128 + the signal, no SIGKILL.
 *
 * All on the supervisor's thread; the functions drive the child (child.h),
 * the watcher and the control socket through the supervisor (sup.h).
 */
#ifndef CKPTRUN_STOP_H
#define CKPTRUN_STOP_H

#include <stdint.h>

#include "sup/sup.h"

#define STOP_MARGIN_MS 5000       /* kept free before a notice's deadline */
#define STOP_SETTLE_MS 2000       /* settle time while a stop waits for an entry */
#define STOPPING_ACK_MS 1000     /* longest wait for `stopping` acknowledgements */

void stop_init(struct stop_state *st);

/* Start a stop (or, already stopping, shorten it to a nearer deadline). */
void stop_begin(struct sup *s, const struct stop_cause *c);
/* A stop from a signal: ckptrun's own (SIGTERM, SIGUSR1, SIGXCPU, SIGINT),
 * the job's process group's (the keeper saw it: job = 1, every process
 * that turns signals into stops got it too), or one a client process took
 * as a stop and reported (from_slot, with its channel). */
void stop_on_signal(struct sup *s, int sig, int job, int from_slot, enum channel self,
                    int64_t since_mono);
/* A preemption or maintenance notice: a stop, acknowledged (n->ack) with
 * the final result; n is the stop's now. */
void stop_on_notice(struct sup *s, struct queued_notice *n);
/* The run now belongs to another runner: commit nothing more, stop the
 * child now, exit 74. */
void stop_lease_lost(struct sup *s, const char *why);

/* Evidence for the final checkpoint: a save the child began (`saving`);
 * a commit over the socket (ok or failed) at `step`; a watched entry
 * committed (ok or failed) whose newest change was at changed_mono. */
void stop_saving(struct sup *s, uint64_t step);
void stop_socket_commit(struct sup *s, uint64_t step, int ok);
void stop_entry_commit(struct sup *s, int64_t changed_mono, int ok);
/* Several nodes: this node's part of `step` is durable (an entry last
 * changed at changed_mono, or an empty part: empty 1); the stop is then
 * answered by the global commit of that step (stop_global_commit). */
void stop_node_part(struct sup *s, uint64_t step, int64_t changed_mono, int empty);
/* Several nodes: the newest global step is now s->last_step. */
void stop_global_commit(struct sup *s);
/* A client acknowledged `stopping` or went away: the signal may go now. */
void stop_client_acked(struct sup *s);

/* The stop's next due time (mono ms), -1 none; stop_tick acts on it. */
int64_t stop_due(const struct sup *s);
void stop_tick(struct sup *s, int64_t now);

/* The loop is over: the exit code, and the run's state in *state
 * ("completed", "failed", "preempted", "stopped", "lost"). Settles the
 * final result if it is still open. */
int stop_outcome(struct sup *s, const char **state);
/* Answer every notice still waiting (at exit). */
void stop_finish_acks(struct sup *s);

#endif
