/*
 * mpi_bench -- one save of a replicated state by every rank of an MPI job
 * (bench/run_mpi.sh runs it with 1, 2 and 4 ranks, on file:// and s3://).
 *
 *   mpirun -np N mpi_bench --mb MB --store URL --run NAME [--items K]
 *
 * Every rank holds the same MB MiB of pseudo-random bytes (incompressible:
 * this measures transfer), in K replicated items (weights, Adam moments),
 * saved once at step 1 with codec none. Rank 0 prints one line:
 *
 *   mpi_bench ranks=N bytes=B ms=T sent_max=X sent_min=Y sent_sum=Z
 *
 * ms: from a barrier before ckpt_save() to the last rank's ckpt_wait()
 * (the global commit: the aggregate save time); sent_*: the bytes each rank
 * moved to the store (ckpt_progress's stored_bytes after the save).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

#include "ckpt.h"
#include "ckpt_mpi.h"

static uint64_t next_u64(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    unsigned long mb = 256, items = 4;
    const char *store = NULL, *run = NULL;
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *ctx = NULL;
    struct ckpt_progress pr;
    struct ckpt_mpi mpi;
    int provided, rank, world, rc = 1;
    unsigned char *state;
    uint64_t seed = 0x243F6A8885A308D3ull, sent, vmax, vmin, vsum;
    double t0, ms, msmax;
    ckpt_status st;

    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--mb"))
            mb = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--items"))
            items = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--store"))
            store = argv[i + 1];
        else if (!strcmp(argv[i], "--run"))
            run = argv[i + 1];
    }
    if (!mb || !items || mb % items || !store || !run) {
        if (rank == 0)
            fprintf(stderr, "usage: mpi_bench --mb MB --store URL --run NAME [--items K]\n");
        MPI_Finalize();
        return 64;
    }
    if (!(state = malloc(mb << 20))) {
        fprintf(stderr, "mpi_bench: cannot allocate %lu MiB\n", mb);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < (mb << 20) / 8; i++) { /* the same bytes on every rank */
        uint64_t v = next_u64(&seed);
        memcpy(state + i * 8, &v, 8);
    }
    ckpt_mpi_init(&mpi, MPI_COMM_WORLD);
    cfg.store = store;
    cfg.run = run;
    cfg.codec = CKPT_CODEC_NONE;
    cfg.no_control = 1;
    cfg.collective = &mpi.coll;
    if ((st = ckpt_open(&cfg, &ctx))) {
        fprintf(stderr, "mpi_bench: rank %d: ckpt_open: %s: %s\n", rank, ckpt_strerror(st),
                ckpt_errmsg(NULL));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (unsigned long k = 0; k < items; k++) {
        char name[32];
        size_t each = (mb << 20) / items;
        snprintf(name, sizeof name, "state%lu", k);
        if ((st = ckpt_protect_replicated(ctx, name, state + k * each, each, CKPT_ELEM_BYTES))) {
            fprintf(stderr, "mpi_bench: protect: %s\n", ckpt_strerror(st));
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = now_ms();
    st = ckpt_save(ctx, 1);
    if (st == CKPT_OK)
        st = ckpt_wait(ctx); /* the global outcome: committed on every rank */
    ms = now_ms() - t0;
    if (st) {
        fprintf(stderr, "mpi_bench: rank %d: save: %s: %s\n", rank, ckpt_strerror(st),
                ckpt_errmsg(ctx));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    ckpt_progress(ctx, &pr);
    sent = pr.stored_bytes;
    MPI_Reduce(&ms, &msmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&sent, &vmax, 1, MPI_UINT64_T, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&sent, &vmin, 1, MPI_UINT64_T, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(&sent, &vsum, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("mpi_bench ranks=%d bytes=%llu ms=%.0f sent_max=%llu sent_min=%llu "
               "sent_sum=%llu\n",
               world, (unsigned long long)(mb << 20), msmax, (unsigned long long)vmax,
               (unsigned long long)vmin, (unsigned long long)vsum);
    rc = 0;
    ckpt_close(ctx);
    ckpt_mpi_free(&mpi);
    MPI_Finalize();
    free(state);
    return rc;
}
