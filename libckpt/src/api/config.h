/*
 * config.h -- what a context runs with: struct ckpt_config (ckpt.h) and the
 * CKPT_* environment, resolved and checked in one place.
 *
 * ckpt_open() resolves in two steps:
 *   1. ckpt__config_resolve(), before anything is opened: every field of
 *      the struct, and every variable that stands in for one, is read and
 *      checked here and nowhere else (the logger still reads CKPT_LOG, the
 *      store the variables of its own options, retry.h's CKPT_RETRY_*);
 *   2. ckpt__config_fit_store(), once the store is open: the defaults that
 *      depend on what the store is (chunk size, workers, packs).
 * Pure functions of their inputs and the environment: no allocation, no
 * I/O beyond getcwd(); thread-safe as getenv() is.
 */
#ifndef CKPT_CONFIG_H
#define CKPT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "ckpt_common.h"
#include "ckpt_store.h"

/* The version that added the fields in slots 0..3 (pack_bytes, connections,
 * restore_sync, retry_budget_ms). */
#define CKPT_CONFIG_SINCE_SLOTS 200
/* The version that added slots 4..7 (world_size, rank, collective,
 * rank_flags). */
#define CKPT_CONFIG_SINCE_RANKS 300

struct ckpt_settings {
    /* logging: handed to the logger (which reads CKPT_LOG when log_fn is NULL) */
    ckpt_log_fn log_fn;
    void *log_user;
    ckpt_log_level log_level;

    /* the store: the URL is the config's or the environment's string, valid
     * during ckpt_open() only (NULL: the default store); store_cfg holds
     * what the context's settings decide of the store (connections, retry
     * budget), the caller adds the logger */
    const char *store_url;
    struct ckpt_store_config store_cfg;
    char run[CKPT_RUN_NAME_MAX_OPEN + 1];

    ckpt_codec codec;          /* never CKPT_CODEC_DEFAULT */
    int level;                 /* zstd level, 1..19 */
    size_t chunk_bytes;        /* 0 until fitted to the store */
    unsigned workers;          /* 0 until fitted to the store; at most 64 */
    size_t staging_max;
    unsigned keep;
    ckpt_busy_policy on_busy;
    uint64_t interval_ms;
    uint64_t epoch;
    size_t pinned_max;
    bool pack_given;           /* pack_bytes was chosen (config or environment) */
    size_t pack_bytes;         /* 0: no packs */
    unsigned pack_inflight;    /* packs uploading at once (fitted to the store) */
    bool restore_sync;

    /* ranks (rankenv.c): world_size 1 and rank 0 for a single process */
    unsigned world_size, rank;
    const struct ckpt_collective *collective; /* NULL: none */
    unsigned rank_flags;
    char rank_source[64];      /* where rank and size came from, for messages */

    /* ckptrun's control socket (CKPT_SOCKET), NULL when there is none or
     * `no_control` is set; valid during ckpt_open() only */
    const char *control_socket;
    /* alone (no ckptrun, `no_control` unset): a SIGTERM is a stop, and a
     * save must begin within this long of it (CKPT_STOP_GRACE, default
     * 20 s; 0: SIGTERM keeps its default). 0 under ckptrun or with
     * `no_control`. signals.c */
    uint64_t stop_grace_ms;
};

/* Step 1: cfg (NULL: as CKPT_CONFIG_INIT) and the environment into *out.
 * The log fields of *out are set even on failure, so the failure can be
 * logged where the caller asked.
 * @return CKPT_OK; CKPT_E_CONFIG (a value out of range, a malformed
 *         variable) or CKPT_E_INVAL (a config of another major version),
 *         with the reason in err (CKPT_ERR_MAX bytes). */
ckpt_status ckpt__config_resolve(const struct ckpt_config *cfg, struct ckpt_settings *out,
                                 char *err);


/* Step 2: the defaults that depend on the store, for a store just opened. */
void ckpt__config_fit_store(struct ckpt_settings *s, const struct ckpt_store *store);

#endif
