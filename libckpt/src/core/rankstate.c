/* rankstate.c -- a context's ranks state made and released (rankstate.h). */
#include <stdlib.h>
#include <string.h>

#include "core/rankstate.h"

void ckpt__ranks_init(struct ckpt_ranks *r)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
}

static void free_digests(struct ckpt_ranks *r)
{
    for (size_t i = 0; i < r->ndig; i++)
        free(r->dig_names[i]);
    free(r->dig_names);
    free(r->digs);
    r->dig_names = NULL;
    r->digs = NULL;
    r->ndig = 0;
}

void ckpt__ranks_destroy(struct ckpt_ranks *r)
{
    free_digests(r);
    pthread_mutex_destroy(&r->mu);
}
