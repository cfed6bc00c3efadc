/* cmds.c -- what the administration commands share (cmds.h). */
#include "cmd/cmds.h"
#include "base/runlog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int runtime_exit(ckpt_status st)
{
    return st == CKPT_E_UNREACHABLE ? EXIT_UNAVAILABLE
         : (st == CKPT_E_AUTH || st == CKPT_E_CONFIG || st == CKPT_E_PERM) ? EXIT_CONFIG
                                                                            : EXIT_FAIL;
}

void print_json(cJSON *j)
{
    char *s = cJSON_Print(j);
    if (s)
        printf("%s\n", s);
    fflush(stdout);
    free(s);
}

double secs_since(int64_t t0)
{
    return (double)(ckpt__mono_ms() - t0) / 1000.0;
}

int rows_cb(void *user, const struct ckpt_info *i)
{
    struct rows *r = user;
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 16;
        struct ckpt_row *v = realloc(r->v, cap * sizeof *v);
        if (!v) {
            r->oom = 1;
            return 1;
        }
        r->v = v;
        r->cap = cap;
    }
    r->v[r->n++] = (struct ckpt_row){ i->step, i->items, i->raw_bytes, i->stored_bytes,
                                      i->new_bytes, i->chunks, i->time_ms,
                                      i->world_size ? i->world_size : 1 };
    return 0;
}

const struct ckpt_row *row_of(const struct rows *r, uint64_t step)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->v[i].step == step)
            return &r->v[i];
    return NULL;
}

const struct ckpt_row *row_newest(const struct rows *r)
{
    const struct ckpt_row *b = NULL;
    for (size_t i = 0; i < r->n; i++)
        if (!b || r->v[i].step > b->step)
            b = &r->v[i];
    return b;
}

