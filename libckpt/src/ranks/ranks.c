/* ranks.c -- how the ranks of a job with a collective agree (ranks.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <xxhash.h>

#include "commit/commit.h"
#include "core/ctx.h"
#include "control/events.h"
#include "run/globalckpt.h"
#include "run/headscan.h"
#include "core/pool.h"
#include "ranks/ranks.h"
#include "restore/restore.h"
#include "run/runload.h"
#include "run/runobj.h"
#include "save/snapshot.h"

#define COLL_MAX 4096 /* integers per all-reduce (ckpt.h) */

uint32_t ckpt__nonce32(void)
{
    uint32_t n = 0;
    if (getrandom(&n, sizeof n, 0) != (ssize_t)sizeof n)
        n = (uint32_t)ckpt__mono_ns() ^ (uint32_t)getpid();
    return n;
}

/* One all-reduce; a failed collective is CKPT_E_WORLD, now and at every
 * later collective call (the ranks may no longer call in step). */
static ckpt_status reduce(struct ckpt_ctx *ctx, uint64_t *v, size_t n, ckpt_reduce_op op,
                          const char *what)
{
    if (ctx->ranks.broken) {
        ckpt__set_ctx_err(ctx, "the collective failed earlier: %s not agreed", what);
        return CKPT_E_WORLD;
    }
    if (ctx->coll->allreduce_u64(ctx->coll->user, v, n, op) != 0) {
        ctx->ranks.broken = true;
        ckpt__set_ctx_err(ctx, "the collective failed (all-reduce for %s)", what);
        ckpt__log(&ctx->log, CKPT_LOG_ERROR, "ranks", "%s", ckpt__errmsg(ctx));
        return CKPT_E_WORLD;
    }
    return CKPT_OK;
}

ckpt_status ckpt__ranks_open(struct ckpt_ctx *ctx, ckpt_status local)
{
    unsigned n = ctx->world_size;
    uint64_t v[COLL_MAX];
    ckpt_status st = CKPT_OK;
    /* one count per rank (each adds 1 at its own), then this rank's outcome */
    for (unsigned b = 0; b <= n && !st; b += COLL_MAX) {
        size_t k = n + 1 - b < COLL_MAX ? n + 1 - b : COLL_MAX;
        memset(v, 0, k * sizeof *v);
        if (ctx->rank >= b && ctx->rank - b < k)
            v[ctx->rank - b] = 1;
        if (n >= b && n - b < k)
            v[n - b] = local != CKPT_OK;
        st = reduce(ctx, v, k, CKPT_REDUCE_SUM, "the ranks' check at ckpt_open");
        for (size_t i = 0; !st && i < k; i++) {
            if (b + i == n) {
                if (v[i] && !local) {
                    ckpt__set_ctx_err(ctx, "%" PRIu64 " rank%s of %u failed to open: every "
                                      "rank fails", v[i], v[i] == 1 ? "" : "s", n);
                    st = CKPT_E_WORLD;
                }
            } else if (v[i] != 1 && !local) {
                ckpt__set_ctx_err(ctx, "rank %zu of %u is claimed by %" PRIu64 " processes: "
                                  "each rank must be one process's (check the launcher and "
                                  "CKPT_RANK / world_size and rank in the config)", b + i, n,
                                  v[i]);
                st = CKPT_E_CONFIG;
            }
        }
    }
    return local ? local : st;
}

/* What this rank says at a poll: its part (or, rank 0 committing, the
 * commit) still in flight, and its failure as (status << 32 | rank + 1). */
static void poll_values(struct ckpt_ctx *ctx, uint64_t *notready, uint64_t *failed)
{
    struct ckpt_ranks *r = &ctx->ranks;
    bool busy = false;
    ckpt_status last = CKPT_OK;
    *notready = *failed = 0;
    if (r->phase == CKPT_RANKS_IDLE || (r->phase == CKPT_RANKS_COMMITTING && ctx->rank != 0))
        return;
    ckpt__flight_peek(&ctx->flight, &busy, &last);
    if (r->phase == CKPT_RANKS_PART && r->local_st)
        last = r->local_st, busy = false;
    *notready = busy;
    if (!busy && last)
        *failed = (uint64_t)last << 32 | (ctx->rank + 1u);
}

/* The agreement on the replicated items, once every part is durable: the
 * same count, then, by batches, the same value per item (digest and name,
 * in name order) -- MAX of v and of ~v give both extremes. */
static ckpt_status agree_replicated(struct ckpt_ctx *ctx)
{
    struct ckpt_ranks *r = &ctx->ranks;
    uint64_t v[COLL_MAX];
    ckpt_status st;
    size_t n;

    pthread_mutex_lock(&r->mu);
    n = r->ndig;
    pthread_mutex_unlock(&r->mu);
    v[0] = n;
    v[1] = ~(uint64_t)n;
    if ((st = reduce(ctx, v, 2, CKPT_REDUCE_MAX, "the replicated items")) != CKPT_OK)
        return st;
    if (v[0] != ~v[1]) {
        ckpt__set_ctx_err(ctx, "step %" PRIu64 " not committed: the ranks protect different "
                          "numbers of replicated items (%" PRIu64 " to %" PRIu64 ")", r->step,
                          ~v[1], v[0]);
        return CKPT_E_WORLD;
    }
    for (size_t b = 0; b < n; b += COLL_MAX / 2) {
        size_t k = n - b < COLL_MAX / 2 ? n - b : COLL_MAX / 2;
        pthread_mutex_lock(&r->mu);
        for (size_t i = 0; i < k; i++) {
            v[2 * i] = r->digs[b + i];
            v[2 * i + 1] = ~r->digs[b + i];
        }
        pthread_mutex_unlock(&r->mu);
        if ((st = reduce(ctx, v, 2 * k, CKPT_REDUCE_MAX, "the replicated items")) != CKPT_OK)
            return st;
        for (size_t i = 0; i < k; i++)
            if (v[2 * i] != ~v[2 * i + 1]) {
                pthread_mutex_lock(&r->mu);
                ckpt__set_ctx_err(ctx, "step %" PRIu64 " not committed: replicated item %.300s "
                                  "differs between the ranks (another name, size or bytes on "
                                  "some rank): a replicated item must hold the same bytes on "
                                  "every rank", r->step, r->dig_names[b + i]);
                pthread_mutex_unlock(&r->mu);
                return CKPT_E_WORLD;
            }
    }
    return CKPT_OK;
}

struct commit_job {
    struct ckpt_ctx *ctx;
    uint64_t step, epoch;
    uint32_t nonce;
};

/* Rank 0's worker: the commit record and HEAD of a step whose parts are all
 * durable. */
static void commit_job_fn(void *arg, struct ckpt_codec_ws *ws)
{
    struct commit_job *j = arg;
    struct ckpt_ctx *ctx = j->ctx;
    unsigned n = ctx->world_size;
    char **keys = calloc(n, sizeof *keys), err[CKPT_ERR_MAX] = "", mkey[1024] = "";
    struct ckpt_manifest gm;
    struct ckpt_event ev = { .step = j->step };
    uint64_t t0 = ckpt__mono_ns();
    ckpt_status st = keys ? CKPT_OK : CKPT_E_NOMEM;
    (void)ws;

    memset(&gm, 0, sizeof gm);
    for (unsigned r = 0; !st && r < n; r++) {
        char full[1024];
        ckpt__part_key(ctx->run, j->step, j->epoch, j->nonce, r, full, sizeof full);
        if (!(keys[r] = ckpt__strdup(full + strlen(ctx->run) + 1)))
            st = CKPT_E_NOMEM;
    }
    if (!st)
        st = ckpt__read_parts(ctx, keys, n, &gm, err);
    if (!st)
        st = ckpt__commit_global(ctx, &gm, mkey, sizeof mkey, err);
    if (st) {
        ckpt__set_ctx_err(ctx, "commit of global step %" PRIu64 " failed: %s", j->step, err);
        ev.type = CKPT_EVENT_FAILED;
        ev.status = st;
        ev.detail = err;
    } else {
        uint64_t raw, stored, chunks, links;
        ckpt__manifest_sizes(&gm, &raw, &stored, &chunks, &links);
        ev.type = CKPT_EVENT_COMMITTED;
        ev.seq = gm.seq;
        ev.raw_bytes = raw;
        ev.new_bytes = gm.new_bytes;
        ev.seconds = (double)(ckpt__mono_ns() - t0) / 1e9;
        ev.manifest = mkey;
    }
    ckpt__event(ctx, &ev);
    ckpt__manifest_free(&gm);
    for (unsigned r = 0; keys && r < n; r++)
        free(keys[r]);
    free(keys);
    free(j);
    ckpt__flight_end(&ctx->flight, st);
}

/* A global step that ended before rank 0's commit job (a part failed, the
 * replicated items differ): rank 0 says so as its commit job would, so a
 * supervisor waiting for the step's outcome (ckptrun's stop) hears it now
 * rather than at its deadline. */
static void report_failed(struct ckpt_ctx *ctx, ckpt_status st)
{
    struct ckpt_event ev = { .type = CKPT_EVENT_FAILED, .step = ctx->ranks.step,
                             .status = st, .detail = ckpt__errmsg(ctx) };
    if (ctx->rank == 0)
        ckpt__event(ctx, &ev);
}

/* Decide after a poll's all-reduce (same values on every rank). */
static void advance(struct ckpt_ctx *ctx, uint64_t notready, uint64_t failed)
{
    struct ckpt_ranks *r = &ctx->ranks;
    ckpt_status fst = (ckpt_status)(failed >> 32);
    unsigned frank = (unsigned)(failed & 0xffffffffu);

    if (r->phase == CKPT_RANKS_PART) {
        if (failed) {
            if (frank - 1 != ctx->rank)
                ckpt__set_ctx_err(ctx, "step %" PRIu64 " not committed: the part of rank %u "
                                  "failed (%s)", r->step, frank - 1, ckpt_strerror(fst));
            ckpt__log(&ctx->log, CKPT_LOG_WARN, "ranks", "step %" PRIu64 " not committed: "
                      "the part of rank %u failed (%s); the run keeps its last global step",
                      r->step, frank - 1, ckpt_status_name(fst));
            r->outcome = fst;
            r->phase = CKPT_RANKS_IDLE;
            report_failed(ctx, fst);
            return;
        }
        if (notready)
            return;
        ckpt__flight_wait(&ctx->flight); /* ours is durable: taken */
        r->outcome = agree_replicated(ctx);
        if (r->outcome) {
            ckpt__log(&ctx->log, CKPT_LOG_ERROR, "ranks", "%s", ckpt__errmsg(ctx));
            r->phase = CKPT_RANKS_IDLE;
            report_failed(ctx, r->outcome);
            return;
        }
        r->phase = CKPT_RANKS_COMMITTING;
        if (ctx->rank == 0) {
            struct commit_job *j = calloc(1, sizeof *j);
            ckpt__flight_begin(&ctx->flight);
            if (j) {
                j->ctx = ctx;
                j->step = r->step;
                j->epoch = r->epoch;
                j->nonce = r->nonce;
            }
            if (!j || ckpt__pool_submit(ctx->pool, commit_job_fn, j) != CKPT_OK) {
                free(j);
                ckpt__set_ctx_err(ctx, "out of memory queueing the commit of step %" PRIu64,
                                  r->step);
                ckpt__flight_end(&ctx->flight, CKPT_E_NOMEM);
            }
        }
        return;
    }
    if (r->phase == CKPT_RANKS_COMMITTING && !notready) {
        if (ctx->rank == 0)
            ckpt__flight_wait(&ctx->flight); /* the commit's outcome: taken */
        else
            r->reload = true;
        if (failed && ctx->rank != 0)
            ckpt__set_ctx_err(ctx, "rank 0 could not commit step %" PRIu64 " (%s)", r->step,
                              ckpt_strerror(fst));
        r->outcome = failed ? fst : CKPT_OK;
        r->phase = CKPT_RANKS_IDLE;
    }
}

/* One poll: [want, notready, failed], MAX. */
static ckpt_status poll(struct ckpt_ctx *ctx, uint64_t *want)
{
    uint64_t v[3] = { *want, 0, 0 };
    ckpt_status st;
    poll_values(ctx, &v[1], &v[2]);
    st = reduce(ctx, v, 3, CKPT_REDUCE_MAX, "ckpt_should_save");
    if (st)
        return st;
    *want = v[0];
    advance(ctx, v[1], v[2]);
    return CKPT_OK;
}

/* Bring the global step in progress to its end (skip: one poll, then
 * CKPT_E_BUSY on every rank if it has not ended). */
static ckpt_status settle(struct ckpt_ctx *ctx, bool skip)
{
    struct ckpt_ranks *r = &ctx->ranks;
    while (r->phase != CKPT_RANKS_IDLE) {
        uint64_t want = 0;
        ckpt_status st;
        if (r->broken) {
            ckpt__flight_settle(&ctx->flight);
            r->phase = CKPT_RANKS_IDLE;
            r->outcome = CKPT_E_WORLD;
            break;
        }
        if (!skip)
            ckpt__flight_settle(&ctx->flight);
        st = poll(ctx, &want);
        if (st)
            return st;
        if (skip && r->phase != CKPT_RANKS_IDLE)
            return CKPT_E_BUSY;
    }
    return CKPT_OK;
}

int ckpt__ranks_should_save(struct ckpt_ctx *ctx, int want)
{
    uint64_t w = want != 0;
    if (poll(ctx, &w) != CKPT_OK)
        return 0;
    return w != 0;
}

static void load_job(void *arg, struct ckpt_codec_ws *ws)
{
    (void)ws;
    ckpt__load_run(arg, true);
}

ckpt_status ckpt__ranks_save(struct ckpt_ctx *ctx, uint64_t step)
{
    struct ckpt_ranks *r = &ctx->ranks;
    uint64_t v[4];
    ckpt_status st = settle(ctx, ctx->on_busy == CKPT_BUSY_SKIP);
    if (st)
        return st;
    if (r->outcome) {
        ckpt__log(&ctx->log, CKPT_LOG_WARN, "save", "the previous global step failed (%s); "
                  "the run keeps its last commit", ckpt_strerror(r->outcome));
        r->outcome = CKPT_OK;
    }
    v[0] = step;
    v[1] = ~step;
    v[2] = ctx->rank == 0 ? ckpt__nonce32() : 0;
    v[3] = ctx->rank == 0 ? atomic_load(&ctx->epoch) : 0;
    if ((st = reduce(ctx, v, 4, CKPT_REDUCE_MAX, "ckpt_save")) != CKPT_OK)
        return st;
    if (v[0] != ~v[1]) {
        ckpt__set_ctx_err(ctx, "the ranks passed different steps to ckpt_save (%" PRIu64
                          " to %" PRIu64 "): nothing saved", ~v[1], v[0]);
        return CKPT_E_WORLD;
    }
    r->step = step;
    r->nonce = (uint32_t)v[2];
    r->epoch = v[3];
    if (r->reload) {
        /* rank 0 committed (and its retention deleted what it dropped):
         * this rank's dedup index must not point at what is gone. Chunk
         * jobs wait for the load. */
        r->reload = false;
        pthread_mutex_lock(&ctx->rs.mu);
        ctx->rs.loaded = false;
        pthread_mutex_unlock(&ctx->rs.mu);
        if (ckpt__pool_submit(ctx->pool, load_job, ctx) != CKPT_OK)
            ckpt__run_skip_load(&ctx->rs);
    }
    st = ckpt__snapshot(ctx, step);
    r->local_st = st;
    r->phase = CKPT_RANKS_PART;
    return st;
}

ckpt_status ckpt__ranks_wait(struct ckpt_ctx *ctx)
{
    ckpt_status st = settle(ctx, false);
    if (st)
        return st;
    st = ctx->ranks.outcome;
    ctx->ranks.outcome = CKPT_OK;
    return st;
}

ckpt_status ckpt__ranks_store_save(struct ckpt_ctx *ctx, uint64_t step)
{
    ckpt_status st, prev;
    /* a busy save refuses here, before the nonce of the slot changes */
    st = ckpt__flight_idle(&ctx->flight, ctx->on_busy == CKPT_BUSY_SKIP, &prev);
    if (st)
        return st;
    if (prev)
        ckpt__log(&ctx->log, CKPT_LOG_WARN, "save", "the previous part failed (%s)",
                  ckpt_strerror(prev));
    ctx->ranks.step = step;
    ctx->ranks.nonce = ckpt__nonce32();
    ctx->ranks.epoch = atomic_load(&ctx->epoch);
    return ckpt__snapshot(ctx, step);
}

/* ---- restore ------------------------------------------------------------ */

/* The first entry of h (resume order) below `bound`, or NULL. */
static const struct ckpt_head_entry *below(const struct ckpt_head *h, uint64_t bound)
{
    for (size_t i = 0; i < h->n; i++)
        if (h->entries[i].step < bound)
            return &h->entries[i];
    return NULL;
}

/* The entry of h at exactly `step`, or NULL. */
static const struct ckpt_head_entry *at_step(const struct ckpt_head *h, uint64_t step)
{
    for (size_t i = 0; i < h->n; i++)
        if (h->entries[i].step == step)
            return &h->entries[i];
    return NULL;
}

/* A rank's verdict on a step of a collective restore, agreed by MAX: */
enum {
    FIT = 0,     /* its part fits (phase 1), or was restored (phase 2) */
    SKIP = 1,    /* not of the kind ckpt_restore_alloc's caller restores:
                    passed over together, neither damaged nor a misfit */
    DAMAGED = 2, /* its part or a chunk is damaged: fall back together */
    SHAPE = 3,   /* its items do not fit the part (sizes, names): the program
                    changed, or the manifest lies -- older steps tell */
    STOP = 4     /* an error older data would not cure: stop together */
};

static uint64_t rank_verdict(ckpt_status st, enum ckpt__misfit why)
{
    return st == CKPT_OK                                      ? FIT
           : why == CKPT__SKIP                                ? SKIP
           : why == CKPT__SHAPE                               ? SHAPE
           : st == CKPT_E_CORRUPT || st == CKPT_E_UNSUPPORTED ? DAMAGED
                                                              : STOP;
}

/* One agreement on a step: v = [verdict, stop (status << 32 | rank + 1),
 * shape (the same), anyone found damage], MAX over the ranks. */
static ckpt_status agree_verdict(struct ckpt_ctx *ctx, ckpt_status st, enum ckpt__misfit why,
                                 uint64_t v[4])
{
    v[0] = rank_verdict(st, why);
    v[1] = v[0] == STOP ? (uint64_t)st << 32 | (ctx->rank + 1u) : 0;
    v[2] = v[0] == SHAPE ? (uint64_t)st << 32 | (ctx->rank + 1u) : 0;
    v[3] = v[0] == DAMAGED;
    if (st)
        ckpt__log(&ctx->log,
                  v[0] == STOP   ? CKPT_LOG_ERROR
                  : v[0] == SKIP ? CKPT_LOG_DEBUG
                                 : CKPT_LOG_WARN,
                  "restore", "%s", ckpt__errmsg(ctx));
    return reduce(ctx, v, 4, CKPT_REDUCE_MAX, "ckpt_restore");
}

/* The newest step a shape disagreement was found at: its status and rank,
 * agreed (the highest status, then the highest rank, of those whose items
 * did not fit), and this rank's own message when it is that rank. */
struct shape_seen {
    size_t n;            /* steps with one */
    uint64_t step, info; /* the newest one: step, (status << 32 | rank + 1) */
    bool own;
    char msg[CKPT_ERR_MAX];
};

/* The restore ends on a shape disagreement (every step tried had one, or
 * the one step asked for): every rank returns its status. */
static ckpt_status shape_end(struct ckpt_ctx *ctx, const struct shape_seen *sh)
{
    ckpt_status st = (ckpt_status)(sh->info >> 32);
    if (sh->own)
        ckpt__set_ctx_err(ctx, "%s", sh->msg);
    else
        ckpt__set_ctx_err(ctx,
                          "the items of rank %u do not fit checkpoint step %" PRIu64
                          " (%s): nothing restored",
                          (unsigned)(sh->info & 0xffffffffu) - 1, sh->step, ckpt_strerror(st));
    return st;
}

ckpt_status ckpt__ranks_restore(struct ckpt_ctx *ctx, uint64_t want, uint64_t *step)
{
    struct ckpt_head h;
    bool exists = false;
    ckpt_status st, hst, last = CKPT_E_NOENT;
    struct ckpt_idset bad_ids;
    struct shape_seen sh = { 0 };
    const char **bad_keys = NULL;
    size_t nbad = 0;
    uint64_t bound = UINT64_MAX, newest = 0, v[4];
    bool first = true, renew = false;

    st = settle(ctx, false);
    if (st)
        return st;
    ckpt__flight_wait(&ctx->flight);
    ckpt__idset_init(&bad_ids);
    ckpt__progress_begin(&ctx->progress, CKPT_PROGRESS_RESTORE, want);
    {
        unsigned scanned; /* a damaged HEAD: what the manifests show (headscan.h) */
        hst = ckpt__read_head_or_scan(ctx, &h, NULL, &exists, &scanned, NULL);
    }
    if (hst)
        memset(&h, 0, sizeof h);
    bad_keys = calloc(h.n + 1, sizeof *bad_keys);
    for (;;) {
        /* one step only (want): tried once, never an older one */
        const struct ckpt_head_entry *e = hst                        ? NULL
                                          : want == CKPT_STEP_LATEST ? below(&h, bound)
                                          : first                    ? at_step(&h, want)
                                                                     : NULL;
        struct ckpt_manifest m;
        enum ckpt__misfit why = CKPT__FIT;
        bool have_m = false;
        ckpt_status own;
        /* each rank proposes its newest candidate; the smallest wins (a
         * rank that has none, or could not read HEAD, stops everyone) */
        v[0] = e ? e->step + 1 : 0;
        if ((st = reduce(ctx, v, 1, CKPT_REDUCE_MIN, "ckpt_restore")) != CKPT_OK)
            break;
        if (v[0] == 0) {
            st = hst ? hst : last;
            if (!hst && sh.n)
                st = shape_end(ctx, &sh); /* no step fits every rank: the program changed */
            else if (!hst && last == CKPT_E_NOENT && want != CKPT_STEP_LATEST)
                ckpt__set_ctx_err(
                    ctx, "run %s has no committed checkpoint at step %" PRIu64 " on every rank",
                    ctx->run, want);
            else if (!hst && last == CKPT_E_NOENT)
                ckpt__set_ctx_err(ctx, "run %s has no committed checkpoint that every rank "
                                  "can restore in %s", ctx->run, ctx->store_url);
            break;
        }
        e = below(&h, v[0]);
        if (e && e->step != v[0] - 1)
            e = NULL;
        if (want != CKPT_STEP_LATEST && v[0] - 1 != want) {
            ckpt__set_ctx_err(ctx,
                              "the ranks asked to restore different steps (%" PRIu64
                              " here, %" PRIu64 " on another rank): nothing restored",
                              want, v[0] - 1);
            st = CKPT_E_WORLD;
        } else if (!e) {
            ckpt__set_ctx_err(ctx, "step %" PRIu64 ", which another rank proposed, is not "
                              "in the HEAD this rank read", v[0] - 1);
            st = CKPT_E_CORRUPT;
        } else {
            st = ckpt__restore_check(ctx, e, ctx->rank, false, NULL, &m, &why);
            have_m = st == CKPT_OK;
        }
        bound = v[0] - 1;
        if (first || renew)
            newest = bound;
        first = renew = false;
        /* Phase 1: every rank's part read and its items fit, before any
         * rank writes -- a step some rank's items do not fit leaves every
         * rank's memory as it was. Phase 2: the restore itself. */
        own = st;
        if ((st = agree_verdict(ctx, own, why, v)) != CKPT_OK) {
            if (have_m)
                ckpt__manifest_free(&m);
            break;
        }
        if (v[0] == FIT) {
            own = ckpt__restore_write(ctx, &m, NULL, &bad_ids);
            if ((st = agree_verdict(ctx, own, CKPT__FIT, v)) != CKPT_OK) {
                ckpt__manifest_free(&m);
                break;
            }
        }
        if (have_m)
            ckpt__manifest_free(&m);
        if (v[0] == FIT) {
            if (step)
                *step = bound;
            if (bound != newest)
                ckpt__restore_fell_back(
                    ctx,
                    "restored step %" PRIu64 " instead of the newer step %" PRIu64 ", which %s",
                    bound, newest,
                    sh.n && sh.step == newest
                        ? "holds items of other sizes or names than this program's "
                          "while this older one fits: its manifest is taken as damaged"
                        : "does not restore on every rank");
            break;
        }
        if (v[0] == STOP) {
            /* this rank's own error, or the one that stopped another */
            st = rank_verdict(own, why) == STOP ? own : (ckpt_status)(v[1] >> 32);
            if (rank_verdict(own, why) != STOP)
                ckpt__set_ctx_err(ctx,
                                  "restore of step %" PRIu64 " stopped on rank %u: "
                                  "%s",
                                  bound, (unsigned)(v[1] & 0xffffffffu) - 1, ckpt_strerror(st));
            break;
        }
        if (v[0] == SKIP) {
            /* passed over as if HEAD did not name it */
            if (want != CKPT_STEP_LATEST) {
                if (!own)
                    ckpt__set_ctx_err(ctx,
                                      "step %" PRIu64 " is not of the kind the caller "
                                      "restores on another rank",
                                      bound);
                st = CKPT_E_NOENT;
                break;
            }
            renew = bound == newest; /* "instead of the newer step": one not passed over */
            continue;
        }
        if (v[0] == SHAPE) {
            /* Not marked damaged: another build of the program may fit it. */
            if (!sh.n++) {
                sh.step = bound;
                sh.info = v[2];
                /* every rank returns the agreed rank's status; that
                 * rank, its own message */
                sh.own = why == CKPT__SHAPE && (v[2] & 0xffffffffu) == ctx->rank + 1u;
                if (sh.own)
                    snprintf(sh.msg, sizeof sh.msg, "%s", ckpt__errmsg(ctx));
            }
            if (want != CKPT_STEP_LATEST) {
                st = shape_end(ctx, &sh);
                break;
            }
        } else {
            last = CKPT_E_CORRUPT;
            if (!own)
                ckpt__set_ctx_err(ctx, "step %" PRIu64 " is damaged on another rank", bound);
        }
        if (v[3] && e && bad_keys)
            bad_keys[nbad++] = e->manifest;
        ckpt__log(&ctx->log, CKPT_LOG_WARN, "restore",
                  "step %" PRIu64 " does not %s on every "
                  "rank: the ranks fall back together",
                  bound, v[0] == SHAPE ? "fit the protected items" : "restore");
    }
    if (bad_ids.n)
        ckpt__run_forget_bad(&ctx->rs, &bad_ids);
    /* rank 0 marks what some rank found damaged, as one writer would */
    if (ctx->rank == 0 && nbad && atomic_load(&ctx->epoch))
        ckpt__restore_mark(ctx, bad_keys, nbad);
    free(bad_keys);
    ckpt__idset_free(&bad_ids);
    ckpt__head_free(&h);
    return st;
}
