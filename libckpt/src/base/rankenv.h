/* rankenv.h -- a process's rank and world size: the config's slots 4..7,
 * else the launchers' variables, checked against the collective (ckpt.h,
 * "Ranks"). Below config.c, which resolves the rest of the configuration. */
#ifndef CKPT_RANKENV_H
#define CKPT_RANKENV_H

#include <stdbool.h>

#include "ckpt.h"

struct ckpt_rank_settings {
    unsigned world_size, rank; /* 1 and 0 for a single process */
    const struct ckpt_collective *collective; /* NULL: none */
    unsigned rank_flags;
    char source[64];           /* where rank and size came from, for messages */
};

/* `given`: the caller's struct has slots 4..7. CKPT_E_CONFIG with the
 * reason in err (CKPT_ERR_MAX bytes). */
ckpt_status ckpt__ranks_resolve(const struct ckpt_config *cfg, bool given,
                                struct ckpt_rank_settings *out, char *err);

#endif
