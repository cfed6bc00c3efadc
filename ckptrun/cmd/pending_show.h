/*
 * pending_show.h -- the steps of a job of several nodes that are not
 * committed yet, and which nodes' parts they miss (ckpt_pending), for
 * `ckptrun ls` and `ckptrun status` (docs/multirank.md, "ls and status").
 */
#ifndef CKPTRUN_PENDING_SHOW_H
#define CKPTRUN_PENDING_SHOW_H

#include <stdio.h>
#include <cjson/cJSON.h>
#include "ckpt.h"

/* The pending steps: a JSON array of {"step","world_size","epoch","parts":[ranks],
 * "missing":[ranks]} in step order, into *out (caller frees; an empty
 * array when there are none). @return CKPT_OK, CKPT_E_NOMEM, store errors. */
ckpt_status pending_json(struct ckpt_ctx *ctx, cJSON **out);
/* Print one line per pending step ("pending      step 500: parts 1/2,
 * missing node 1"), with `label` as the first column. */
void pending_print(FILE *f, const cJSON *arr, const char *label);

#endif
