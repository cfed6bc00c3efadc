/* pending_show.c -- pending steps and their missing parts (pending_show.h). */
#include "cmd/pending_show.h"

#include <inttypes.h>
#include <string.h>

#define MAX_STEPS 64

static cJSON *step_obj(cJSON *arr, const struct ckpt_part_info *p)
{
    cJSON *e;

    cJSON_ArrayForEach(e, arr) {
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(e, "step");
        const cJSON *w = cJSON_GetObjectItemCaseSensitive(e, "world_size");
        const cJSON *ep = cJSON_GetObjectItemCaseSensitive(e, "epoch");
        if ((uint64_t)cJSON_GetNumberValue(s) == p->step &&
            (unsigned)cJSON_GetNumberValue(w) == p->world_size &&
            (uint64_t)cJSON_GetNumberValue(ep) == p->epoch)
            return e;
    }
    if (cJSON_GetArraySize(arr) >= MAX_STEPS || !(e = cJSON_CreateObject()))
        return NULL;
    cJSON_AddNumberToObject(e, "step", (double)p->step);
    cJSON_AddNumberToObject(e, "world_size", p->world_size);
    cJSON_AddNumberToObject(e, "epoch", (double)p->epoch);
    cJSON_AddArrayToObject(e, "parts");
    cJSON_AddItemToArray(arr, e);
    return e;
}

static int on_part(void *user, const struct ckpt_part_info *p)
{
    cJSON *e = step_obj(user, p), *parts, *r;

    if (!e)
        return 0;
    parts = cJSON_GetObjectItemCaseSensitive(e, "parts");
    cJSON_ArrayForEach(r, parts)
        if ((unsigned)cJSON_GetNumberValue(r) == p->rank)
            return 0; /* a rank's second part of the step */
    cJSON_AddItemToArray(parts, cJSON_CreateNumber(p->rank));
    return 0;
}

ckpt_status pending_json(struct ckpt_ctx *ctx, cJSON **out)
{
    cJSON *arr = cJSON_CreateArray(), *e;
    ckpt_status st;

    *out = NULL;
    if (!arr)
        return CKPT_E_NOMEM;
    st = ckpt_pending(ctx, on_part, arr);
    if (st != CKPT_OK) {
        cJSON_Delete(arr);
        return st;
    }
    cJSON_ArrayForEach(e, arr) {
        const cJSON *parts = cJSON_GetObjectItemCaseSensitive(e, "parts");
        unsigned w = (unsigned)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "world_size"));
        cJSON *miss = cJSON_AddArrayToObject(e, "missing");
        for (unsigned k = 0; miss && k < w && k < 65536; k++) {
            const cJSON *r;
            int have = 0;
            cJSON_ArrayForEach(r, parts)
                have |= (unsigned)cJSON_GetNumberValue(r) == k;
            if (!have)
                cJSON_AddItemToArray(miss, cJSON_CreateNumber(k));
        }
    }
    *out = arr;
    return CKPT_OK;
}

void pending_print(FILE *f, const cJSON *arr, const char *label)
{
    const cJSON *e;

    cJSON_ArrayForEach(e, arr) {
        const cJSON *miss = cJSON_GetObjectItemCaseSensitive(e, "missing"), *r;
        int nmiss = cJSON_GetArraySize(miss), i = 0;
        unsigned w = (unsigned)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "world_size"));
        fprintf(f, "%-12s step %.0f: parts %u/%u", label,
                cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "step")),
                w - (unsigned)nmiss, w);
        cJSON_ArrayForEach(r, miss) {
            if (i == 8) {
                fprintf(f, ", ... (%d missing)", nmiss);
                break;
            }
            fprintf(f, "%s%.0f", i++ ? "," : nmiss == 1 ? ", missing node " : ", missing nodes ",
                    cJSON_GetNumberValue(r));
        }
        fprintf(f, "\n");
    }
}
