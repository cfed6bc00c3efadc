/* watch_steps.c -- which steps the watched directory holds (watch.h). */
#include "watch_int.h"

int watch_has_step(const struct watch *w, uint64_t step)
{
    for (size_t i = 0; i < w->nent; i++) {
        const struct entry *e = &w->ent[i];
        if (e->in_use && e->numbered && e->step == step)
            return 1;
    }
    return 0;
}
