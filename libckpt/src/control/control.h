/* control.h -- the libckpt side of the control socket to ckptrun
 * (docs/CONTROL.md): one connection per context, one reader thread. */
#ifndef CKPT_CONTROL_H
#define CKPT_CONTROL_H

#include <stdint.h>

#include "ckpt.h"

struct ckpt_ctx;
struct ckpt_control;

ckpt_status ckpt__control_open(struct ckpt_ctx *ctx, const char *path);
void ckpt__control_close(struct ckpt_control *c);
/* Send one JSON message (no newline): any thread. */
void ckpt__control_send(struct ckpt_control *c, const char *json_line);
/* ckpt_report_file(): the `file` message (event `renamed`, with `step` and
 * the run's key) for `path`, made absolute. Any thread. Errors go to the
 * context's message. */
ckpt_status ckpt__control_report_file(struct ckpt_control *c, const char *path, uint64_t step);

#endif
