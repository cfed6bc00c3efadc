/*
 * nodes.h -- one ckptrun on every node of a job (docs/multirank.md,
 * "Several nodes"): who this node is, and how it joins the job's lease.
 *
 * A job of N nodes runs one ckptrun per node (srun ckptrun ..., one per
 * torchrun node, one per Kubernetes pod). Each commits the entries of its
 * own CKPT_DIR as its *part* of a step (libckpt's CKPT_RANKS_STORE: world
 * size N, rank K); node 0 writes the global commit once every node's part
 * of a step is durable (nodesync.h). The ckptruns agree only through the
 * store: the lease, the part manifests, the commit record and the stop
 * objects.
 *
 * Identity: --nnodes N and --node-rank K; else, inside a SLURM job step
 * (SLURM_STEP_ID set: `srun ckptrun`, not the batch script),
 * SLURM_NNODES/SLURM_NODEID; else PET_NNODES/PET_NODE_RANK (Kubeflow's
 * PyTorchJob, torchrun's environment); else one node. The job generation is
 * --job-id, else SLURM_JOB_ID.SLURM_RESTART_COUNT (0 when unset); a job of
 * several nodes needs one.
 *
 * Lease: node 0 takes (or takes over) the run's lease as a single runner
 * does, with the job generation recorded in LEASE, and fences HEAD at the
 * new epoch. Every other node joins: it waits for a live LEASE of its own
 * generation and takes its epoch (its parts carry it; node 0 commits only
 * parts of its epoch). A live LEASE of another generation refuses the node
 * (exit 78, as a second runner is refused) once that lease is renewed
 * after the node began to wait (a dead generation's lease, not expired
 * yet, is waited out: our node 0 takes it over); a generation whose lease a new
 * one took over is fenced (its commits are refused) and its nodes see the
 * epoch change and stop (exit 74).
 */
#ifndef CKPTRUN_NODES_H
#define CKPTRUN_NODES_H

#include <stdint.h>

struct opts;
struct record;

struct nodes_id {
    unsigned nnodes;          /* 1: a single runner, as ever */
    unsigned rank;            /* 0..nnodes-1 */
    char job[128];            /* job generation ("" with one node and none given) */
    const char *from;         /* where nnodes/rank came from: "options", "SLURM",
                                 "PET", "default" */
};

/* Resolve this node's identity from the options and the environment
 * (see above). @return 0, or an exit code (logged): a rank outside the
 * count, a rank without a count, several nodes without a job generation,
 * a job id with characters other than [A-Za-z0-9._-]. */
int nodes_resolve(const struct opts *o, struct nodes_id *id);

/* Nodes other than 0: wait (at most `wait_ms`) for node 0 to hold the
 * run's lease for this job generation, and take its epoch.
 * @return 0 (*epoch set), or 1 with *rc: the lease is held by another
 * generation (EXIT_CONFIG), none came in time (EXIT_UNAVAILABLE), the
 * store failed. Logged. */
int nodes_join_lease(struct record *rec, const struct opts *o, const struct nodes_id *id,
                     uint64_t wait_ms, uint64_t *epoch, int *rc);

#endif
