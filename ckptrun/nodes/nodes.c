/* nodes.c -- this node's identity and its part of the job's lease (nodes.h). */
#include "nodes/nodes.h"
#include "record/lease.h"
#include "opts.h"
#include "base/parse.h"
#include "record/record.h"
#include "base/runlog.h"
#include "ckpt_common.h"
#include "ckpt_store.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A count and a rank from two variables; both or neither. @return 1 when
 * both are set (and parsed into *n, *k), 0 when neither, -1 malformed. */
static int env_pair(const char *nvar, const char *kvar, uint64_t *n, uint64_t *k)
{
    const char *nv = getenv(nvar), *kv = getenv(kvar);

    if ((!nv || !*nv) && (!kv || !*kv))
        return 0;
    if (!nv || !*nv || !kv || !*kv || parse_u64(nv, n) != 0 || parse_u64(kv, k) != 0) {
        log_error("%s='%s' and %s='%s' do not name a node count and rank", nvar,
                  nv ? nv : "", kvar, kv ? kv : "");
        return -1;
    }
    return 1;
}

static int job_ok(const char *j)
{
    size_t n = strlen(j);

    if (n == 0 || n >= 128)
        return 0;
    for (; *j; j++)
        if (!((*j >= 'a' && *j <= 'z') || (*j >= 'A' && *j <= 'Z') || (*j >= '0' && *j <= '9') ||
              *j == '.' || *j == '_' || *j == '-'))
            return 0;
    return 1;
}

int nodes_resolve(const struct opts *o, struct nodes_id *id)
{
    uint64_t n = 1, k = 0;
    int got = 0;

    memset(id, 0, sizeof *id);
    id->from = "default";
    if (o->nnodes || o->node_rank >= 0) {
        if (!o->nnodes || o->node_rank < 0) {
            log_error("--nnodes and --node-rank go together (this node's rank among N)");
            return EXIT_USAGE;
        }
        n = o->nnodes;
        k = (uint64_t)o->node_rank;
        id->from = "options";
    } else if (getenv("SLURM_STEP_ID") &&
               (got = env_pair("SLURM_NNODES", "SLURM_NODEID", &n, &k)) != 0) {
        /* Only in a job step (srun ckptrun): the batch script runs on the
         * first node alone, whatever SLURM_NNODES says. */
        if (got < 0)
            return EXIT_CONFIG;
        id->from = "SLURM";
    } else if ((got = env_pair("PET_NNODES", "PET_NODE_RANK", &n, &k)) != 0) {
        if (got < 0)
            return EXIT_CONFIG;
        id->from = "PET";
    }
    if (n < 1 || n > 65536 || k >= n) {
        log_error("node rank %" PRIu64 " is not one of %" PRIu64 " nodes (%s)", k, n, id->from);
        return strcmp(id->from, "options") == 0 ? EXIT_USAGE : EXIT_CONFIG;
    }
    id->nnodes = (unsigned)n;
    id->rank = (unsigned)k;
    if (o->job_id && *o->job_id) {
        snprintf(id->job, sizeof id->job, "%s", o->job_id);
    } else if (getenv("SLURM_JOB_ID") && *getenv("SLURM_JOB_ID")) {
        const char *rc = getenv("SLURM_RESTART_COUNT");
        snprintf(id->job, sizeof id->job, "%s.%s", getenv("SLURM_JOB_ID"),
                 rc && *rc ? rc : "0");
    }
    if (id->job[0] && !job_ok(id->job)) {
        log_error("job id '%s' is not 1-127 characters of [A-Za-z0-9._-]", id->job);
        return EXIT_USAGE;
    }
    if (id->nnodes > 1 && !id->job[0]) {
        log_error("a job of %u nodes needs its generation: --job-id ID (the same on every "
                  "node, a new one at each restart), or SLURM_JOB_ID", id->nnodes);
        return EXIT_USAGE;
    }
    return 0;
}

static void nap_ms(int64_t ms)
{
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

int nodes_join_lease(struct record *rec, const struct opts *o, const struct nodes_id *id,
                     uint64_t wait_ms, uint64_t *epoch, int *rc)
{
    int64_t until = ckpt__mono_ms() + (int64_t)wait_ms, since = ckpt__now_ms();
    struct lease_info li;
    char err[CKPT_ERR_MAX];
    int told = 0;

    for (;;) {
        ckpt_status st;
        err[0] = '\0';
        st = lease_read(record_store(rec), o->run, &li, NULL, err);
        if (st == CKPT_OK && lease_state(&li, ckpt__now_ms()) == LEASE_LIVE) {
            if (strcmp(li.job, id->job) == 0) {
                *epoch = li.epoch;
                log_msg(LOG_INFO, "lease", "node %u of %u joined job %s (epoch %" PRIu64
                        ", held by node 0: %s)", id->rank, id->nnodes, id->job, li.epoch,
                        li.holder);
                return 0;
            }
            /* Another generation. Renewed since this node began to wait:
             * it is alive, and this node is refused. Not renewed since: it
             * may be a dead one whose lease has not expired yet (a requeue
             * after a lost node), which our node 0 takes over at the
             * expiry: wait for it. */
            if (li.heartbeat_ms > since + 1000) { /* a second of clock skew */
                log_error("run %s is held by %s of job %s (epoch %" PRIu64 "); this node is "
                          "of job %s: refusing to start (a node of another job generation)",
                          o->run, li.holder, li.job[0] ? li.job : "(single runner)", li.epoch,
                          id->job);
                *rc = EXIT_LEASE_HELD;
                return 1;
            }
        }
        if (st != CKPT_OK && st != CKPT_E_NOENT && st != CKPT_E_CORRUPT) {
            log_error("cannot read the lease of run %s: %s %s", o->run, ckpt_strerror(st), err);
            *rc = exit_code_for_status(st);
            return 1;
        }
        if (ckpt__mono_ms() >= until) {
            log_error("node 0 of job %s did not take the lease of run %s in %" PRIu64 " s; "
                      "not starting", id->job, o->run, wait_ms / 1000);
            *rc = EXIT_UNAVAILABLE;
            return 1;
        }
        if (!told++ && st == CKPT_OK && lease_state(&li, ckpt__now_ms()) == LEASE_LIVE)
            log_msg(LOG_INFO, "lease", "node %u of %u: run %s is held by %s of job %s; "
                    "waiting for it to be renewed (alive: refused) or taken over by node 0 "
                    "of job %s", id->rank, id->nnodes, o->run, li.holder,
                    li.job[0] ? li.job : "(single runner)", id->job);
        else if (told == 1)
            log_msg(LOG_INFO, "lease", "node %u of %u: waiting for node 0 of job %s to take "
                    "the lease of run %s", id->rank, id->nnodes, id->job, o->run);
        nap_ms(200);
    }
}
