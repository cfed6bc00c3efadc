/* strv.c -- a growable list of strings it owns (ckpt_common.h). */
#include <stdlib.h>
#include <string.h>

#include "ckpt_common.h"

int ckpt__strv_push(struct ckpt_strv *sv, const char *s)
{
    char *copy;
    if (sv->n == sv->cap) {
        size_t cap = sv->cap ? sv->cap * 2 : 16;
        char **v = realloc(sv->v, cap * sizeof *v);
        if (!v)
            return -1;
        sv->v = v;
        sv->cap = cap;
    }
    if (!(copy = strdup(s)))
        return -1;
    sv->v[sv->n++] = copy;
    return 0;
}

void ckpt__strv_free(struct ckpt_strv *sv)
{
    for (size_t i = 0; i < sv->n; i++)
        free(sv->v[i]);
    free(sv->v);
    memset(sv, 0, sizeof *sv);
}
