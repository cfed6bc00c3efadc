/* events.h -- what happens to a save, told in one place: each event goes to
 * the log and, while ckptrun listens on the control socket, to ckptrun as
 * one line of JSON (docs/CONTROL.md, "Child -> ckptrun"). */
#ifndef CKPT_EVENTS_H
#define CKPT_EVENTS_H

#include <stdint.h>

#include "ckpt.h"

struct ckpt_ctx;

enum ckpt_event_type {
    CKPT_EVENT_SAVING,      /* ckpt_save() took its snapshot */
    CKPT_EVENT_COMMITTED,   /* the save's HEAD update is durable */
    CKPT_EVENT_FAILED       /* the save will not commit */
};

struct ckpt_event {
    enum ckpt_event_type type;
    uint64_t step;
    /* committed */
    uint64_t seq;
    uint64_t raw_bytes;     /* the checkpoint's bytes */
    uint64_t new_bytes;     /* stored bytes it wrote first */
    double seconds;         /* from the snapshot to the commit */
    const char *manifest;   /* its manifest's key */
    /* failed */
    ckpt_status status;
    const char *detail;
};

void ckpt__event(struct ckpt_ctx *ctx, const struct ckpt_event *ev);

#endif
