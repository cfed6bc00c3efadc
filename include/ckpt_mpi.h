/*
 * ckpt_mpi.h -- a struct ckpt_collective over an MPI communicator, header
 * only: libckpt.so links no MPI, the program that includes this does.
 *
 *   MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
 *   struct ckpt_mpi mpi;
 *   ckpt_mpi_init(&mpi, MPI_COMM_WORLD);      // duplicates the communicator
 *   struct ckpt_config cfg = CKPT_CONFIG_INIT;
 *   cfg.collective = &mpi.coll;               // rank and size come with it
 *   ckpt_open(&cfg, &ctx);
 *   ...
 *   ckpt_close(ctx);
 *   ckpt_mpi_free(&mpi);                      // before MPI_Finalize
 *
 * libckpt calls the collective only on the thread that calls ckpt_open,
 * ckpt_should_save, ckpt_save, ckpt_wait, ckpt_restore and ckpt_close
 * (MPI_THREAD_FUNNELED is enough), every rank in the same order. The
 * communicator is duplicated so that libckpt's messages never match the
 * program's own. See ckpt.h, "Ranks", and docs/multirank.md.
 */
#ifndef CKPT_MPI_H
#define CKPT_MPI_H

#include <mpi.h>
#include <string.h>

#include "ckpt.h"

struct ckpt_mpi {
    struct ckpt_collective coll; /* pass &coll as ckpt_config.collective */
    MPI_Comm comm;               /* libckpt's own duplicate */
};

static inline int ckpt_mpi__allreduce(void *user, uint64_t *vals, size_t n,
                                      ckpt_reduce_op op)
{
    struct ckpt_mpi *m = (struct ckpt_mpi *)user;
    MPI_Op mop = op == CKPT_REDUCE_MAX ? MPI_MAX : op == CKPT_REDUCE_MIN ? MPI_MIN : MPI_SUM;
    if (n > 4096)
        return -1;
    return MPI_Allreduce(MPI_IN_PLACE, vals, (int)n, MPI_UINT64_T, mop, m->comm) ==
                   MPI_SUCCESS
               ? 0
               : -1;
}

static inline int ckpt_mpi__barrier(void *user)
{
    struct ckpt_mpi *m = (struct ckpt_mpi *)user;
    return MPI_Barrier(m->comm) == MPI_SUCCESS ? 0 : -1;
}

/* Fill *m for `comm` (duplicated: MPI_Comm_dup is collective, every rank
 * calls this). @return 0, or an MPI error code. */
static inline int ckpt_mpi_init(struct ckpt_mpi *m, MPI_Comm comm)
{
    int rank = 0, size = 0, rc;
    memset(m, 0, sizeof *m);
    if ((rc = MPI_Comm_dup(comm, &m->comm)) != MPI_SUCCESS)
        return rc;
    MPI_Comm_rank(m->comm, &rank);
    MPI_Comm_size(m->comm, &size);
    m->coll.version = CKPT_COLLECTIVE_VERSION;
    m->coll.rank = (unsigned)rank;
    m->coll.size = (unsigned)size;
    m->coll.user = m;
    m->coll.allreduce_u64 = ckpt_mpi__allreduce;
    m->coll.barrier = ckpt_mpi__barrier;
    return 0;
}

/* Free the duplicate (collective). Call after ckpt_close(), before
 * MPI_Finalize(). */
static inline void ckpt_mpi_free(struct ckpt_mpi *m)
{
    if (m->comm != MPI_COMM_NULL && m->comm != 0)
        MPI_Comm_free(&m->comm);
}

#endif /* CKPT_MPI_H */
