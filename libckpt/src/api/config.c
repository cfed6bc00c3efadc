/* config.c -- struct ckpt_config + the CKPT_* environment -> the settings a
 * context runs with (config.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/codec.h"
#include "api/config.h"
#include "base/rankenv.h"
#include "format/manifest.h"
#include "base/util.h"

/* The layout of 0.1.0, the first published one. The struct may grow into
 * its reserved slots but never change size or move a field: a program built
 * against an older header passes its struct to this library. */
struct config_0_1 {
    unsigned version;
    const char *store;
    const char *run;
    ckpt_codec codec;
    int codec_level;
    size_t chunk_bytes;
    unsigned workers;
    size_t staging_max_bytes;
    unsigned keep;
    ckpt_busy_policy on_busy;
    uint64_t interval_ms;
    ckpt_log_fn log_fn;
    void *log_user;
    ckpt_log_level log_level;
    int no_control;
    uint64_t epoch;
    size_t pinned_max_bytes;
    void *reserved[8];
};
#define SAME_PLACE(f)                                                                    \
    _Static_assert(offsetof(struct ckpt_config, f) == offsetof(struct config_0_1, f),   \
                   "ckpt_config." #f " moved")
#define IN_SLOT(f, k)                                                                    \
    _Static_assert(offsetof(struct ckpt_config, f) ==                                   \
                           offsetof(struct config_0_1, reserved) + (k) * sizeof(void *) && \
                       sizeof(((struct ckpt_config *)0)->f) <= sizeof(void *),          \
                   "ckpt_config." #f " is not in slot " #k)
_Static_assert(sizeof(struct ckpt_config) == sizeof(struct config_0_1),
               "struct ckpt_config changed size");
SAME_PLACE(version);
SAME_PLACE(store);
SAME_PLACE(run);
SAME_PLACE(codec);
SAME_PLACE(codec_level);
SAME_PLACE(chunk_bytes);
SAME_PLACE(workers);
SAME_PLACE(staging_max_bytes);
SAME_PLACE(keep);
SAME_PLACE(on_busy);
SAME_PLACE(interval_ms);
SAME_PLACE(log_fn);
SAME_PLACE(log_user);
SAME_PLACE(log_level);
SAME_PLACE(no_control);
SAME_PLACE(epoch);
SAME_PLACE(pinned_max_bytes);
IN_SLOT(pack_bytes, 0);
IN_SLOT(connections, 1);
IN_SLOT(restore_sync, 2);
IN_SLOT(retry_budget_ms, 3);
IN_SLOT(world_size, 4);
IN_SLOT(rank, 5);
IN_SLOT(collective, 6);
IN_SLOT(rank_flags, 7);

#define DEFAULT_KEEP 3
#define DEFAULT_STOP_GRACE_MS 20000 /* alone: a SIGTERM's save begins within it */
#define DEFAULT_PINNED (64u << 20)
#define MAX_WORKERS 64
#define MAX_CONNECTIONS 256

/* A configuration refused, and why (in err). */
#define refuse(err, ...) (ckpt__seterr((err), __VA_ARGS__), CKPT_E_CONFIG)

static const char *env(const char *name)
{
    const char *s = getenv(name);
    return s && *s ? s : NULL;
}

/* A count from the environment. Malformed values count as unset, as they
 * always have for these variables. @return 1 when *v was read. */
static int env_u64(const char *name, uint64_t *v)
{
    const char *s = env(name);
    char *end;
    if (!s)
        return 0;
    errno = 0;
    *v = strtoull(s, &end, 10);
    return !*end && !errno;
}

/* The codec: the config's, else CKPT_CODEC, else zstd; level 0 is the
 * codec's default (CKPT_CODEC_MAP), a level is ignored by a codec without. */
static ckpt_status resolve_codec(const struct ckpt_config *cfg, struct ckpt_settings *s,
                                 char *err)
{
    const struct ckpt__codec_spec *c;
    const char *v;
    if (cfg->codec != CKPT_CODEC_DEFAULT && !ckpt__codec_spec(cfg->codec))
        return refuse(err, "codec %d: expected one of CKPT_CODEC_*", (int)cfg->codec);
    s->codec = cfg->codec;
    s->level = cfg->codec_level;
    if (s->codec == CKPT_CODEC_DEFAULT) {
        s->codec = CKPT_CODEC_ZSTD;
        if ((v = env("CKPT_CODEC")) && ckpt__parse_codec(v, &s->codec, &s->level))
            return refuse(err, "CKPT_CODEC='%s': expected %s", v, CKPT_CODEC_RULE);
    }
    c = ckpt__codec_spec(s->codec);
    if (c->has_levels && (s->level < 0 || s->level > c->level_max))
        return refuse(err, "%s level %d: expected %d to %d (0: %d)", c->name, s->level,
                      c->level_min, c->level_max, c->level_default);
    if (s->level == 0 && c->has_levels)
        s->level = c->level_default;
    return CKPT_OK;
}

/* The run name: the config's, else CKPT_RUN, else the working directory's
 * name; opened under the lenient rule (rules.h: ckptrun applies the strict
 * one when it creates a run). */
static ckpt_status resolve_run(const struct ckpt_config *cfg, struct ckpt_settings *s,
                               char *err)
{
    char cwd[4096];
    const char *r = cfg->run && *cfg->run ? cfg->run : env("CKPT_RUN");
    if (!r) {
        if (!getcwd(cwd, sizeof cwd))
            return refuse(err,
                                       "no run name given and the working directory is unknown");
        r = strrchr(cwd, '/') ? strrchr(cwd, '/') + 1 : cwd;
    }
    if (!ckpt__run_name_ok(r, 0))
        return refuse(err,
                                   "run name '%s' is not usable: use letters, digits, '.', '_' "
                                   "and '-' (set CKPT_RUN or --run)",
                                   r);
    memcpy(s->run, r, strlen(r) + 1); /* the rule bounds it: CKPT_RUN_NAME_MAX_OPEN */
    return CKPT_OK;
}

/* Chunk size, workers, retention, interval, epoch, staging and pinned
 * pools: the fields 0.1.0 had. */
static ckpt_status resolve_sizes(const struct ckpt_config *cfg, struct ckpt_settings *s,
                                 char *err)
{
    const char *v;
    uint64_t n;

    s->chunk_bytes = cfg->chunk_bytes;
    if (!s->chunk_bytes && env_u64("CKPT_CHUNK_BYTES", &n))
        s->chunk_bytes = (size_t)n; /* 0: by store, once it is open */
    if (s->chunk_bytes && (s->chunk_bytes < CKPT_MIN_CHUNK || s->chunk_bytes > CKPT_MAX_CHUNK))
        return refuse(err, "chunk size %zu outside [%u, %u]", s->chunk_bytes,
                                   CKPT_MIN_CHUNK, CKPT_MAX_CHUNK);
    s->workers = cfg->workers;
    if (!s->workers && env_u64("CKPT_WORKERS", &n))
        s->workers = (unsigned)n;
    if (s->workers > MAX_WORKERS)
        s->workers = MAX_WORKERS;
    s->staging_max = cfg->staging_max_bytes;
    s->keep = cfg->keep;
    if (!s->keep && env_u64("CKPT_KEEP", &n))
        s->keep = (unsigned)n;
    if (!s->keep)
        s->keep = DEFAULT_KEEP;
    if (cfg->on_busy != CKPT_BUSY_WAIT && cfg->on_busy != CKPT_BUSY_SKIP)
        return refuse(err, "on_busy %d: expected CKPT_BUSY_WAIT or CKPT_BUSY_SKIP",
                      (int)cfg->on_busy);
    s->on_busy = cfg->on_busy;
    s->interval_ms = cfg->interval_ms;
    if (!s->interval_ms && (v = env("CKPT_INTERVAL")) &&
        ckpt__parse_duration_ms(v, &s->interval_ms) != 0)
        return refuse(err, "CKPT_INTERVAL='%s': expected a duration like 90s or 30m",
                                   v);
    s->epoch = cfg->epoch;
    if (!s->epoch && env_u64("CKPT_EPOCH", &n))
        s->epoch = n;
    s->pinned_max = cfg->pinned_max_bytes ? cfg->pinned_max_bytes : DEFAULT_PINNED;
    return CKPT_OK;
}

/* The fields of slots 0..3 (`given`: the caller's struct has them) and the
 * variables they stand for. */
static ckpt_status resolve_slots(const struct ckpt_config *cfg, bool given,
                                 struct ckpt_settings *s, char *err)
{
    const char *v;
    size_t pack = given ? cfg->pack_bytes : 0;
    unsigned conn = given ? cfg->connections : 0;
    int sync = given ? cfg->restore_sync : 0;

    /* Packs: on object stores, chunks travel in objects of about 32 MiB
     * (docs/FORMAT.md: a request costs time and fees, small objects waste
     * both); a local disk gains nothing from them. */
    if (pack == CKPT_PACK_NONE) {
        s->pack_given = true;
        s->pack_bytes = 0;
    } else if (pack) {
        if (pack < CKPT_MIN_CHUNK || pack > CKPT_MAX_PACK)
            return refuse(err,
                                       "pack_bytes %zu: expected CKPT_PACK_NONE or a size from 64K "
                                       "to 1G",
                                       pack);
        s->pack_given = true;
        s->pack_bytes = pack;
    } else if ((v = env("CKPT_PACK_BYTES"))) {
        uint64_t b = 0;
        if (strcmp(v, "0") != 0 && ckpt__parse_size(v, &b, NULL) != 0)
            b = 0;
        if (strcmp(v, "0") != 0 && (b < CKPT_MIN_CHUNK || b > CKPT_MAX_PACK))
            return refuse(err, "CKPT_PACK_BYTES='%s': expected 0 (no packs) or a size "
                               "from 64K to 1G", v);
        s->pack_given = true;
        s->pack_bytes = (size_t)b;
    }

    /* Connections: the store opens this many; on an object store each
     * worker keeps one request in flight, so they set the workers too. */
    if (conn && conn > MAX_CONNECTIONS)
        return refuse(err, "connections %u: expected 1 to %d", conn, MAX_CONNECTIONS);
    if (!conn && (v = env("CKPT_CONNECTIONS"))) {
        char *end;
        unsigned long c = strtoul(v, &end, 10);
        if (*end || c < 1 || c > MAX_CONNECTIONS)
            return refuse(err, "CKPT_CONNECTIONS='%.40s': expected 1..%d", v,
                                       MAX_CONNECTIONS);
        conn = (unsigned)c;
    }
    s->store_cfg.connections = conn;

    /* Restored files are not made durable by default: the store holds the
     * durable copy and `ckptrun run` restores from it on every start, so an
     * fsync would only keep the GPU waiting on the local disk (a 10 GiB
     * checkpoint on a 125 MB/s cloud volume: 80 s). */
    if (sync < -1 || sync > 1)
        return refuse(err, "restore_sync %d: expected 1 (fsync), -1 (no fsync) or 0 "
                           "(CKPT_RESTORE_SYNC)", sync);
    if (!sync && (v = env("CKPT_RESTORE_SYNC"))) {
        if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
            return refuse(err, "CKPT_RESTORE_SYNC='%s': expected 0 or 1", v);
        sync = strcmp(v, "1") == 0 ? 1 : -1;
    }
    s->restore_sync = sync == 1;

    /* 0: the store reads CKPT_RETRY_BUDGET_MS, with its other retry
     * variables (retry.h) */
    s->store_cfg.retry_budget_ms = given ? cfg->retry_budget_ms : 0;
    return CKPT_OK;
}

/* The ranks (rankenv.c) into the settings. */
static ckpt_status resolve_ranks(const struct ckpt_config *cfg, struct ckpt_settings *s,
                                 char *err)
{
    struct ckpt_rank_settings r;
    ckpt_status st;
    memset(&r, 0, sizeof r);
    st = ckpt__ranks_resolve(cfg, cfg->version >= CKPT_CONFIG_SINCE_RANKS, &r, err);
    snprintf(s->rank_source, sizeof s->rank_source, "%s", r.source);
    if (st)
        return st;
    s->world_size = r.world_size;
    s->rank = r.rank;
    s->collective = r.collective;
    s->rank_flags = r.rank_flags;
    return CKPT_OK;
}

ckpt_status ckpt__config_resolve(const struct ckpt_config *cfg_in, struct ckpt_settings *s,
                                 char *err)
{
    static const struct ckpt_config init = CKPT_CONFIG_INIT;
    const struct ckpt_config *cfg = cfg_in ? cfg_in : &init;
    ckpt_status st;

    memset(s, 0, sizeof *s);
    err[0] = '\0';
    if (cfg->version / 10000 != CKPT_VERSION_MAJOR) {
        /* its fields may not be where this version has them: none is read */
        snprintf(err, CKPT_ERR_MAX, "config version %u is not of this library's major "
                                    "version %d (%s): rebuild against its ckpt.h",
                 cfg->version, CKPT_VERSION_MAJOR, CKPT_VERSION_STRING);
        return CKPT_E_INVAL;
    }
    s->log_fn = cfg->log_fn;
    s->log_user = cfg->log_user;
    /* A zeroed struct (version 0) means every default: its log level 0 is
     * the default INFO, not DEBUG (ckpt.h, "Configuration"). */
    s->log_level = cfg->version == 0 && cfg->log_level == CKPT_LOG_DEBUG ? CKPT_LOG_INFO
                                                                         : cfg->log_level;
    if ((unsigned)s->log_level > CKPT_LOG_OFF) {
        s->log_level = CKPT_LOG_INFO; /* to log the refusal */
        return refuse(err, "log_level %d: expected one of CKPT_LOG_*",
                                   (int)cfg->log_level);
    }
    if ((st = resolve_codec(cfg, s, err)) || (st = resolve_sizes(cfg, s, err)) ||
        (st = resolve_run(cfg, s, err)) ||
        (st = resolve_slots(cfg, cfg->version >= CKPT_CONFIG_SINCE_SLOTS, s, err)) ||
        (st = resolve_ranks(cfg, s, err)))
        return st;
    s->store_url = cfg->store && *cfg->store ? cfg->store : env("CKPT_STORE");
    s->control_socket = cfg->no_control ? NULL : env("CKPT_SOCKET");
    s->stop_grace_ms = 0;
    if (!cfg->no_control && !s->control_socket) {
        const char *v = env("CKPT_STOP_GRACE");
        s->stop_grace_ms = DEFAULT_STOP_GRACE_MS;
        if (v && ckpt__parse_duration_ms(v, &s->stop_grace_ms) != 0)
            return refuse(err, "CKPT_STOP_GRACE='%s': expected a duration like 20s (0: a "
                               "SIGTERM keeps its default effect)", v);
    }
    return CKPT_OK;
}

/* What a store asks of a writer: its preferred chunk size, whether small
 * objects should travel packed (each request costs a round trip and a
 * fee), whether its requests mostly wait on the network. The one place
 * that tells stores apart: from the scheme until stores declare these
 * capabilities themselves (then: caps.chunk_bytes, CKPT_STORE_PACKS,
 * CKPT_STORE_LATENCY_BOUND). */
void ckpt__config_fit_store(struct ckpt_settings *s, const struct ckpt_store *store)
{
    if (!s->chunk_bytes) {
        /* Object stores pay per request, in time (a first byte after tens of
         * ms; per-request CPU on the server) and in fees: 8 MiB there, in
         * the range the providers recommend for parallel transfers, still
         * within the dedup bound (docs/FORMAT.md). 4 MiB on a local disk. */
        s->chunk_bytes = store->caps.chunk_bytes ? store->caps.chunk_bytes : CKPT_DEFAULT_CHUNK;
    }
    if (!s->workers) {
        /* A local store is CPU-bound: one worker per core. An object store
         * is latency-bound: each worker waits on its PUT most of the time,
         * so more requests in flight than cores (memory: workers x 3 x
         * chunk_bytes); one request in flight per connection, so
         * `connections` sets both. */
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        unsigned c = s->store_cfg.connections;
        s->workers = n < 1 ? 1 : n > 8 ? 8 : (unsigned)n;
        if (ckpt_store_can(store, CKPT_STORE_LATENCY_BOUND))
            s->workers = c ? (c > MAX_WORKERS ? MAX_WORKERS : c) : s->workers < 8 ? 8
                                                                                 : s->workers;
    }
    if (!s->pack_given)
        s->pack_bytes = ckpt_store_can(store, CKPT_STORE_PACKS) ? CKPT_DEFAULT_PACK : 0;
    /* Half the workers upload packs while the others fill the next ones
     * (memory: that + 1 packs): 4 of the default 8; 32 connections give 16. */
    s->pack_inflight = s->workers < 2 ? 1 : s->workers / 2;
}
