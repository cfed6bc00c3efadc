/* rankenv.c -- a context's rank and world size: the config's slots 4..7,
 * else the launchers' environment, checked against the collective
 * (config.h, ckpt.h "Ranks"). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rankenv.h"
#include "base/util.h"

/* The launchers, innermost first: a program started by torchrun under srun
 * sees torchrun's RANK and the node's SLURM_PROCID; torchrun's is its own.
 * PMIx gives a rank only (the size comes from the collective). */
struct launcher {
    const char *name, *rank_var, *size_var;
};
static const struct launcher launchers[] = {
    { "ckpt", "CKPT_RANK", "CKPT_WORLD_SIZE" },
    { "torchrun", "RANK", "WORLD_SIZE" },
    { "Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE" },
    { "PMI", "PMI_RANK", "PMI_SIZE" },
    { "PMIx", "PMIX_RANK", NULL },
    { "Slurm job step", "SLURM_PROCID", "SLURM_NTASKS" },
};
#define NLAUNCHERS (sizeof launchers / sizeof launchers[0])
#define MAX_WORLD (1u << 20)

/* A configuration refused, and why (in err). */
#define refuse(err, ...) (ckpt__seterr((err), __VA_ARGS__), CKPT_E_CONFIG)

/* Slurm's variables describe a job step only inside one: the batch script
 * (no SLURM_STEP_ID, or the batch/extern step's) runs once, whatever
 * SLURM_NTASKS says. */
static int slurm_step(void)
{
    const char *s = getenv("SLURM_STEP_ID");
    if (!s || !*s)
        s = getenv("SLURM_STEPID");
    return s && *s && strcmp(s, "4294967294") != 0 && strcmp(s, "4294967295") != 0 &&
           strcmp(s, "batch") != 0 && strcmp(s, "extern") != 0;
}

/* Variable `var` of launcher k, when it is set: 1 and *v (a malformed value
 * is -1, with the reason in err), else 0. */
static int var_of(size_t k, const char *var, unsigned *v, char *err)
{
    const char *s;
    char *end;
    unsigned long long n;
    if (!var || (k == NLAUNCHERS - 1 && !slurm_step()))
        return 0;
    s = getenv(var);
    if (!s || !*s)
        return 0;
    errno = 0;
    n = strtoull(s, &end, 10);
    if (*end || errno || n >= MAX_WORLD || s[0] == '-') {
        ckpt__seterr(err, "%s='%.40s' (%s): expected a number below %u", var, s,
                     launchers[k].name, MAX_WORLD);
        return -1;
    }
    *v = (unsigned)n;
    return 1;
}

/* From the environment: *size 0 when no launcher says anything. */
static ckpt_status from_env(unsigned *rank, unsigned *size, char *src, size_t srclen,
                            char *err)
{
    size_t rsrc = NLAUNCHERS, ssrc = NLAUNCHERS;
    unsigned r = 0, n = 0, v;
    int got;
    *rank = 0;
    *size = 0;
    for (size_t k = 0; k < NLAUNCHERS; k++) {
        if (rsrc == NLAUNCHERS) {
            if ((got = var_of(k, launchers[k].rank_var, &v, err)) < 0)
                return CKPT_E_CONFIG;
            if (got) {
                rsrc = k;
                r = v;
            }
        }
        if (ssrc == NLAUNCHERS) {
            if ((got = var_of(k, launchers[k].size_var, &v, err)) < 0)
                return CKPT_E_CONFIG;
            if (got) {
                ssrc = k;
                n = v;
            }
        }
    }
    if (rsrc == NLAUNCHERS && ssrc == NLAUNCHERS)
        return CKPT_OK;
    if (ssrc < rsrc)
        return refuse(
            err,
            "%s=%u says %u ranks but %s gives no rank (%s is not set%s): set "
            "CKPT_RANK and CKPT_WORLD_SIZE, or world_size and rank in the "
            "config",
            launchers[ssrc].size_var, n, n, launchers[ssrc].name, launchers[ssrc].rank_var,
            rsrc < NLAUNCHERS ? "; the rank would come from another launcher" : "");
    if (ssrc != rsrc && ssrc < NLAUNCHERS) {
        /* a size from an outer launcher: only if that launcher sees this
         * process at the same rank (srun --mpi=pmix: PMIX_RANK and the
         * job step's SLURM_PROCID) */
        unsigned outer = 0;
        if (var_of(ssrc, launchers[ssrc].rank_var, &outer, err) != 1 || outer != r)
            return refuse(
                err,
                "rank %u comes from %s (%s) but the world size %u from %s (%s): "
                "rank and size from different launchers; set CKPT_RANK and "
                "CKPT_WORLD_SIZE, or world_size and rank in the config",
                r, launchers[rsrc].name, launchers[rsrc].rank_var, n, launchers[ssrc].name,
                launchers[ssrc].size_var);
    }
    if (ssrc == NLAUNCHERS) /* PMIx: the size is the collective's */
        n = 0;
    *rank = r;
    *size = n;
    if (ssrc == NLAUNCHERS)
        snprintf(src, srclen, "%s (%s)", launchers[rsrc].name, launchers[rsrc].rank_var);
    else
        snprintf(src, srclen, "%s (%s, %s)", launchers[rsrc].name, launchers[rsrc].rank_var,
                 launchers[ssrc].size_var);
    if (n == 0 && ssrc != NLAUNCHERS)
        return refuse(err, "%s=0: a world size is at least 1",
                                   launchers[ssrc].size_var);
    return CKPT_OK;
}

ckpt_status ckpt__ranks_resolve(const struct ckpt_config *cfg, bool given,
                                struct ckpt_rank_settings *s, char *err)
{
    const struct ckpt_collective *coll = given ? cfg->collective : NULL;
    unsigned flags = given ? cfg->rank_flags : 0, rank = 0, size = 0;
    bool has_rank = false;
    ckpt_status st;

    if (flags & ~CKPT_RANKS_STORE)
        return refuse(err, "rank_flags 0x%x: unknown flags", flags);
    if (given && cfg->world_size) {
        if (cfg->world_size >= MAX_WORLD)
            return refuse(err, "world_size %u: at most %u", cfg->world_size,
                                       MAX_WORLD - 1);
        size = cfg->world_size;
        rank = cfg->rank;
        has_rank = true;
        snprintf(s->source, sizeof s->source, "the config");
    } else {
        char src[64] = "";
        st = from_env(&rank, &size, src, sizeof src, err);
        if (st)
            return st;
        has_rank = src[0] != '\0';
        if (has_rank)
            snprintf(s->source, sizeof s->source, "%s", src);
    }
    if (coll) {
        if (coll->version != CKPT_COLLECTIVE_VERSION || !coll->allreduce_u64 ||
            !coll->barrier || coll->size == 0 || coll->rank >= coll->size)
            return refuse(
                err,
                "collective: version %u, rank %u of %u: expected version %d, "
                "rank below size, allreduce_u64 and barrier set",
                coll->version, coll->rank, coll->size, CKPT_COLLECTIVE_VERSION);
        if (size && size != coll->size)
            return refuse(err,
                                       "world size %u from %s differs from the collective's %u",
                                       size, s->source, coll->size);
        if (has_rank && rank != coll->rank)
            return refuse(err, "rank %u from %s differs from the collective's rank %u",
                                       rank, s->source, coll->rank);
        size = coll->size;
        rank = coll->rank;
        if (!has_rank)
            snprintf(s->source, sizeof s->source, "the collective");
    }
    if (has_rank && size == 0)
        return refuse(
            err,
            "rank %u from %s but no world size: pass a collective (its size) "
            "or set CKPT_WORLD_SIZE",
            rank, s->source);
    if (size == 0) {
        size = 1;
        rank = 0;
        snprintf(s->source, sizeof s->source, "a single process");
    }
    if (rank >= size)
        return refuse(err, "rank %u from %s is outside the world size %u", rank,
                      s->source, size);
    if (size > 1 && !coll && !(flags & CKPT_RANKS_STORE))
        return refuse(err, "%u ranks (from %s) but no collective: pass one in "
                           "ckpt_config.collective (ckpt_mpi.h adapts an MPI communicator), "
                           "or set rank_flags = CKPT_RANKS_STORE and commit with "
                           "ckpt_commit_parts(); or unset the launcher's variables for a "
                           "single-process run", size, s->source);
    if (coll && (flags & CKPT_RANKS_STORE))
        return refuse(err, "CKPT_RANKS_STORE is for ranks without a collective");
    s->world_size = size;
    s->rank = rank;
    s->collective = coll;
    s->rank_flags = flags;
    return CKPT_OK;
}
