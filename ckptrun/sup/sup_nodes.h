/*
 * sup_nodes.h -- the supervisor's side of a job of several nodes (nodes.h,
 * nodesync.h): claiming the run as one node of a job generation, the
 * context of this node's rank, the restore of its own part, and what the
 * nodesync thread learns (another node's stop, global commits, steps that
 * wait for this node's empty part, the job taken over).
 * All of it is a no-op with one node (s->nid.nnodes == 1, s->ns NULL).
 * What runs while the job runs (on_wake, stop_begun, settling, on_part)
 * reads the clocks and reaches the watch and the nodes' thread through the
 * supervisor's seam (sup_seam.h), so tests/unit/test_sup_nodes.c drives it
 * under a fake clock; start and close set the real thread up and down.
 */
#ifndef CKPTRUN_SUP_NODES_H
#define CKPTRUN_SUP_NODES_H

#include "ckpt.h"

struct sup;
struct stop_cause;

/* Resolve the node's identity into s->nid. @return 0 or an exit code. */
int sup_nodes_resolve(struct sup *s);
/* Several nodes: claim the run (node 0 takes the lease with the job
 * generation, the others join it). @return 1 when the caller must exit
 * with *rc, 0 claimed. */
int sup_nodes_claim(struct sup *s, int *rc);
/* This node's rank, world size and CKPT_RANKS_STORE into cfg. */
void sup_nodes_config(const struct sup *s, struct ckpt_config *cfg);
/* The restore before start of this node's part of the newest global step
 * into s->dir; a checkpoint of another node count is refused
 * (CKPT_E_WORLD: exit 78). @return 0 or an exit code (logged). */
int sup_nodes_prestart(struct sup *s, struct ckpt_ctx *ctx);
/* Start the nodesync thread (its own context). @return 0 or an exit code. */
int sup_nodes_start(struct sup *s);
/* The loop was woken: take what the nodesync thread learnt. */
void sup_nodes_on_wake(struct sup *s);
/* A stop began on this node: tell the others (the job's stop object). */
void sup_nodes_stop_begun(struct sup *s, const struct stop_cause *c, int64_t deadline_unix);
/* 1 while this node must stay for the other nodes: the child is gone but
 * steps are pending (parts missing, or node 0 has still to commit), until
 * the stop's deadline or --grace after the child ended. */
int sup_nodes_settling(struct sup *s);
/* A watched entry's part is durable (or failed). */
void sup_nodes_on_part(struct sup *s, uint64_t step, int64_t changed_mono, int ok);
void sup_nodes_close(struct sup *s);

#endif
